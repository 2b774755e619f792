"""Helpers the book's chapters share, so that a chapter's cells show only what is new.

* :func:`glue`: myst-nb's ``glue`` (it feeds computed numbers into the prose of the HTML book),
  or a no-op where myst-nb is not installed (e.g. Colab), since every glued number is also
  printed by its cell.
* :func:`sig`: a number rounded to a few significant digits, for printing and for the prose
  (nbval compares printed numbers, so they carry no more digits than are stable).
"""
from __future__ import annotations

import math
from typing import Any

from . import checks

__all__ = ["glue", "sig"]


def glue(name: str, value: Any, display: bool = True) -> None:
    """``myst_nb.glue(name, value, display)`` when myst-nb is installed, else nothing.

    Raises:
        ValueError: ``name`` not a non-empty string.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"glue name must be a non-empty str, got {name!r}")
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        return None
    myst_glue(name, value, display=display)
    return None


def sig(x: float, digits: int = 3) -> float:
    """``x`` rounded to ``digits`` significant digits (a float; NaN and inf pass through).

    Raises:
        ValueError: ``x`` not a real number, or ``digits`` not a positive integer.
    """
    digits = checks.positive_int(digits, "digits")
    if isinstance(x, bool):
        raise ValueError(f"sig needs a number, got {x!r}")
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"sig needs a number, got {x!r}") from None
    if not math.isfinite(x):
        return x
    return float(f"{x:.{digits}g}")
