"""hbfsim: a High-Bandwidth Flash simulator (golden model, Amaranth RTL, cocotb cosim)."""

__version__ = "0.1.0"
