"""Load imbalance across ranks: the busiest of ``p`` ranks sets an iteration's pace.

When ``n`` work items (a batch's routed token-expert pairs under expert parallelism, or its
sequences under data-parallel attention) land on ``p`` ranks independently and uniformly,
each rank's load is Binomial(n, 1/p): mean ``n/p``, standard deviation
``sqrt(n (1/p)(1 - 1/p))``. The expected maximum of ``p`` such loads is about the mean plus
``sqrt(2 ln p)`` standard deviations (the Gaussian extreme-value bound), so the busiest rank
carries

    f(n, p) = 1 + s x sqrt(2 ln p) x sqrt((p - 1) / n),     1 <= f <= p

times the mean load. ``s`` scales the spread: 0 is perfect balance (the ideal the serving
paper assumes), 1 uniform independent routing; real routers are skewed (s > 1).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["max_load_factor"]


def max_load_factor(n, p: int, spread: float = 1.0):
    """Busiest-rank load over the mean for ``n`` items on ``p`` ranks (arrays of ``n``)."""
    if spread < 0:
        raise ValueError(f"imbalance spread must be >= 0, not {spread!r}")
    n = np.asarray(n, dtype=float)
    if p <= 1 or spread == 0:
        return np.ones_like(n)
    f = 1.0 + spread * math.sqrt(2.0 * math.log(p)) * np.sqrt((p - 1) / np.maximum(n, 1.0))
    return np.minimum(f, float(p))
