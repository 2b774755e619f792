"""Small statistics the book's claims rest on: intervals for success rates over seeds, and
the correction for several tests behind one sentence.

A chapter that says "4 of 10 seeds solved the task" also gives the interval that 10 seeds allow;
:func:`wilson_interval` is the score interval of Wilson 1927 ("Probable inference, the law of
succession, and statistical inference", JASA 22), which behaves well at 0/n and n/n, where the
textbook normal interval collapses to a point. A sentence that rests on several tests (one per
budget, one per pair of head counts) reports :func:`holm_adjusted` p-values: Holm 1979 ("A simple
sequentially rejective multiple test procedure", Scand. J. Statistics 6), which keeps the chance of
any false rejection among them at the stated level.
"""
from __future__ import annotations

import math
from statistics import NormalDist
from typing import List, Sequence, Tuple

from . import checks

__all__ = ["wilson_interval", "holm_adjusted"]


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


def holm_adjusted(p_values: Sequence[float]) -> List[float]:
    """Holm's step-down adjusted p-values for m tests behind one claim (Holm 1979).

    With the raw p-values sorted, p_(1) <= ... <= p_(m), the adjusted value of the i-th smallest
    is max over j <= i of min(1, (m - j + 1) p_(j)); rejecting where it is below alpha keeps the
    family-wise error rate at alpha for any dependence between the tests. Equal to
    ``statsmodels.stats.multitest.multipletests(p, method="holm")[1]``.

    Args:
        p_values: m >= 1 raw p-values, each a finite float in [0, 1].

    Returns:
        the m adjusted p-values (floats in [0, 1]) in the input's order; each is >= its raw value.

    Raises:
        ValueError: no p-values, or a value that is not a number in [0, 1] (named with its index).
    """
    raw = [checks.finite_real(p, f"p_values[{i}]") for i, p in enumerate(p_values)]
    if not raw:
        raise ValueError("p_values is empty: Holm's correction needs at least one p-value")
    for i, p in enumerate(raw):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p_values[{i}] must be in [0, 1], got {p!r}")
    m = len(raw)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=raw.__getitem__)):
        running = max(running, min(1.0, (m - rank) * raw[i]))
        adjusted[i] = running
    return adjusted
