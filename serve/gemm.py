"""Time of a GEMM on a GPU: tile and wave quantization under a large-GEMM efficiency ceiling.

A Hopper GEMM kernel (CUTLASS / cuBLAS warp-specialized, stream-K) computes the ``M x N``
output in tiles of ``tile_m x tile_n``; the ``K`` loop of each tile runs in steps of
``tile_k``. Stream-K hands the (tile, k-step) work units to the SMs evenly, so the GPU runs

    tile_m = min(m, max(m_min, 2^ceil(log2 M)))                         (the kernel's choice)
    units  = ceil(M / tile_m) * ceil(N / tile_n) * ceil(K / tile_k)     (x groups)
    waves  = ceil(units / SMs)
    t      = waves * 2 tile_m tile_n tile_k / (peak / SMs x eta)

seconds, where ``eta`` is the fraction of the dense peak the best-shaped GEMM reaches. The
tile height follows ``M`` as the kernels' heuristics pick it: full 128-row tiles for large
``M``, down to ``m_min`` rows for a few tokens (vLLM's fused MoE kernel takes 16-row blocks
when ``M`` is at most the expert count; dense Hopper kernels take 64-row tiles or swap the
operands for small ``M``). The achieved efficiency ``2 M N K / (t x peak)`` is therefore
at most ``eta``, equal to it when every dimension fills whole tiles and the units fill
whole waves, and lower for small M (decode batches padded to the next tile height, at
least ``m_min`` rows), ragged N of TP shards and the last partial wave
(LLMCompass models GEMMs the same way, by tiles mapped onto the cores). ``groups`` runs that
many independent GEMMs of the same shape in one launch (a grouped MoE expert GEMM).
docs/serving.md, "Cost model", gives the parameters' sources.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GemmTiles", "gemm_seconds", "gemm_efficiency"]


@dataclass(frozen=True)
class GemmTiles:
    """Tile shape of the GEMM kernels (elements).

    Members
    -------
    m, n : int
        Output tile rows and columns (128 x 128: the CUTLASS Hopper warp-specialized default
        for BF16 and FP8); ``m`` is the largest tile height.
    m_min : int
        The smallest tile height: a GEMM of ``M`` rows runs in tiles of the power of two at
        or above ``M``, at least ``m_min`` and at most ``m`` (16: vLLM's fused MoE kernel,
        ``get_default_config``, takes 16-row blocks when ``M`` is at most the expert count).
    k_bytes : int
        Bytes of one K step of a tile's operands per row (128 B: 64 BF16 or 128 FP8
        elements, the CUTLASS Hopper default stage depth).
    """

    m: int = 128
    n: int = 128
    k_bytes: int = 128
    m_min: int = 16

    def __post_init__(self):
        for k in ("m", "n", "k_bytes", "m_min"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"GEMM tile {k} must be a positive integer, not {v!r}")
        if self.m_min > self.m:
            raise ValueError(f"GEMM tile m_min must be at most m = {self.m}, not {self.m_min!r}")

    def height(self, m):
        """Tile height of a GEMM of ``m`` rows: the power of two at or above ``m``, within
        ``m_min .. m`` (array in, array out)."""
        p2 = 2.0 ** np.ceil(np.log2(np.maximum(np.asarray(m, dtype=float), 1.0)))
        return np.clip(p2, self.m_min, self.m)


def gemm_seconds(m, n, k, peak: float, eta: float, sms: int, tiles: GemmTiles | None,
                 elem_bytes: int = 2, groups=1):
    """Seconds of ``groups`` GEMMs of ``m x n x k`` (arrays broadcast; ``m = 0``: none).

    Parameters
    ----------
    m, n, k : float or ndarray
        Rows (tokens), output columns, reduction depth of one GEMM.
    peak : float
        Dense peak FLOP/s of the dtype.
    eta : float
        Efficiency ceiling (fraction of ``peak``) of a well-shaped GEMM.
    sms : int
        Streaming multiprocessors.
    tiles : GemmTiles or None
        ``None``: no quantization (``2 m n k / (peak x eta)``, the flat roofline).
    elem_bytes : int
        Operand bytes (sets the K step: ``tiles.k_bytes / elem_bytes`` elements).
    groups : float or ndarray
        Independent GEMMs of this shape (grouped expert GEMM); may be fractional (an
        expectation).
    """
    m = np.asarray(m, dtype=float)
    if tiles is None:
        return groups * 2.0 * m * n * k / (peak * eta)
    tk = max(1, tiles.k_bytes // elem_bytes)
    tm = tiles.height(m)
    units = groups * np.ceil(m / tm) * np.ceil(n / tiles.n) * np.ceil(k / tk)
    waves = np.ceil(units / sms)
    return waves * 2.0 * tm * tiles.n * tk / (peak / sms * eta)


def gemm_efficiency(m, n, k, peak, eta, sms, tiles, elem_bytes=2, groups=1):
    """Achieved fraction of ``peak``: ``2 m n k groups / (t x peak)`` (0 < . <= eta)."""
    t = gemm_seconds(m, n, k, peak, eta, sms, tiles, elem_bytes, groups)
    return groups * 2.0 * np.asarray(m, dtype=float) * n * k / (t * peak)
