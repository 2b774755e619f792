"""Small statistics the book's claims rest on: intervals for success rates over seeds.

A chapter that says "4 of 10 seeds solved the task" also gives the interval that 10 seeds allow;
:func:`wilson_interval` is the score interval of Wilson 1927 ("Probable inference, the law of
succession, and statistical inference", JASA 22), which behaves well at 0/n and n/n, where the
textbook normal interval collapses to a point.
"""
from __future__ import annotations

import math
from statistics import NormalDist
from typing import Tuple

from . import checks

__all__ = ["wilson_interval"]


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Tuple[float, float]:
    """Wilson score interval for a binomial proportion ``successes / n``.

    Args:
        successes: k, an integer in [0, n].
        n: trials (seeds), a positive integer.
        confidence: two-sided level in (0, 1), default 0.95.

    Returns:
        ``(low, high)``, floats with 0 <= low <= k/n <= high <= 1.

    Raises:
        ValueError: ``n`` not a positive integer, ``successes`` not an integer in [0, n], or
            ``confidence`` outside (0, 1).
    """
    n = checks.positive_int(n, "n")
    k = checks.nonnegative_int(successes, "successes")
    if k > n:
        raise ValueError(f"successes={k} exceeds n={n}")
    level = checks.finite_real(confidence, "confidence")
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = 0.0 if k == 0 else max(0.0, centre - half)  # exact ends: rounding must not move them
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high
