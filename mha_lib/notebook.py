"""Helpers the book's chapters share, so that a chapter's cells show only what is new.

* :func:`glue`: myst-nb's ``glue`` (it feeds computed numbers into the prose of the HTML book),
  or a no-op where myst-nb is not installed (e.g. Colab), since every glued number is also
  printed by its cell.
* :func:`glue_html`: glue only an object's HTML (``_repr_html_``), e.g. a live view to paste
  earlier in a chapter with ``{glue:}``: no widget view, whose ids change at every run.
* :func:`glue_text`: glue a computed phrase in English and, as a second key ``name + "__zh"``, in
  Chinese written for Chinese (``mha_lib.prose`` composes both); the Chinese edition pastes the second.
* :func:`sig`: a number rounded to a few significant digits, for printing and for the prose
  (nbval compares printed numbers, so they carry no more digits than are stable).
"""
from __future__ import annotations

import math
from typing import Any

from . import checks

__all__ = ["glue", "glue_html", "glue_text", "sig", "ZH_SUFFIX", "ZH_FIGURE_KEY"]

ZH_SUFFIX = "__zh"  # glue_text's Chinese key: name + ZH_SUFFIX (_ext/mha_i18n.py pastes it in the Chinese edition)
# output.metadata[mime][ZH_FIGURE_KEY]: a figure's Chinese copy (mha_lib.viz.bilingual), which the Chinese edition shows
ZH_FIGURE_KEY = "mha_zh_CN"


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


def glue_html(name: str, value: Any) -> None:
    """Glue ``value``'s HTML alone (``value._repr_html_()``), not displayed, for a ``{glue:}`` paste.

    A :class:`mha_lib.live.LiveView` displays as HTML plus, in a kernel with anywidget, a widget
    view; gluing the object itself would store the widget view too, whose model id changes at every
    run (nbval would see it). Nothing happens where myst-nb is not installed, as for :func:`glue`.

    Raises:
        ValueError: ``name`` not a non-empty string, or ``value`` without a ``_repr_html_`` method.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"glue name must be a non-empty str, got {name!r}")
    html = getattr(value, "_repr_html_", None)
    if not callable(html):
        raise ValueError(f"glue_html needs an object with _repr_html_, got {type(value).__name__}")
    try:
        from IPython.display import HTML
    except ImportError:  # no kernel front end: nothing to paste into
        return None
    glue(name, HTML(html()), display=False)
    return None


def glue_text(name: str, en: str, zh: str) -> None:
    """Glue a phrase the cell computed, in English as ``name`` and in Chinese as ``name + "__zh"``.

    A phrase such as "better than importance at 60% and 81%" cannot be translated word by word: Chinese puts
    the place first and builds the clause another way. The cell composes it in both languages (the functions
    of :mod:`mha_lib.prose`); the English page pastes ``name``, the Chinese edition pastes the Chinese one in
    its place (``_ext/mha_i18n.py``), so the catalogs keep ``{glue:text}`name``` as it is.

    Raises:
        ValueError: ``name`` not a non-empty string, or ``en`` or ``zh`` not a non-empty string.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"glue name must be a non-empty str, got {name!r}")
    for language, text in (("en", en), ("zh", zh)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"glue_text({name!r}) needs a non-empty {language} string, got {text!r}")
    glue(name, en, display=False)
    glue(name + ZH_SUFFIX, zh, display=False)


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
