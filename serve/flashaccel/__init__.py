"""FlashAccel at the serving level: the HBF tier a FlashAccel stack gives a GPU, its write
path, and the decode-step model of the CSI / CLI study (docs/flashaccel.md, "The study")."""
