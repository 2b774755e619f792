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
* :func:`table`: a result table that the book shows as an HTML table (it fits a phone's column, or
  scrolls in its box with a hint), with a plain-text form for Jupyter's text view and nbval.
* :func:`figure_pair`: one figure drawn twice, for a wide page and for a phone (stacked panels);
  the page shows the one that fits its width.
"""
from __future__ import annotations

import base64
import html
import io
import math
import numbers
import re
from typing import Any, Optional, Sequence

from . import checks

__all__ = ["glue", "glue_html", "glue_text", "sig", "table", "Table", "figure_pair", "FigurePair",
           "ZH_SUFFIX", "ZH_FIGURE_KEY"]

ZH_SUFFIX = "__zh"  # glue_text's Chinese key: name + ZH_SUFFIX (_ext/mha_i18n.py pastes it in the Chinese edition)
# output.metadata[mime][ZH_FIGURE_KEY]: a figure's Chinese copy (mha_lib.viz.bilingual), which the Chinese edition shows
ZH_FIGURE_KEY = "mha_zh_CN"
# Set by mha_lib.viz.bilingual.bilingual_figures() in the book's execution (else None): (figure, draw) -> the figure's
# Chinese copy ({"png", "untranslated", "missing_glyphs"}), so that figure_pair's PNGs get one too.
chinese_copy_hook = None


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


# a number, with an optional short unit: "1,050,624", "0.92", "-1.5e-07", "12%", "4.5 MiB", "1.92x"
_NUMBER = re.compile(r"[-+]?(\d[\d,]*)?\.?\d+([eE][-+]?\d+)?(%|\s?[A-Za-z\u00d7]{1,5})?")
# short text made mostly of figures, kept on one line: "11 of 15", "[0.48, 0.89]", "0.918 [0.897, 0.940]"
_SHORT_FIGURES = re.compile(r"(?=.*\d)(?!(?:.*[A-Za-z]){5})[^\n]{1,28}")


def _cell_text(value: Any, digits: int, where: str) -> tuple:
    """(text, numeric) of one table cell: str as given (numeric when it reads as a number), bool as
    "yes"/"no", int with thousands separators, float to ``digits`` significant digits, None empty."""
    if value is None:
        return "", True
    if isinstance(value, str):
        return value, not value.strip() or bool(_NUMBER.fullmatch(value.strip()))  # "" takes no side
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # numpy.bool_ too
        return ("yes" if value else "no"), False
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}", True
    if isinstance(value, numbers.Real):
        x = float(value)
        return (f"{sig(x, digits):g}" if math.isfinite(x) else str(x)), True
    raise ValueError(f"table cell {where} must be a str, a number, a bool or None, got {type(value).__name__}")


class Table:
    """A result table (from :func:`table`): HTML in the book, aligned plain text elsewhere.

    Attributes:
        columns: the header, a tuple of str.
        rows: the cells as shown, a tuple of tuples of str.
        numeric: per column, whether every cell is a number (right-aligned).
        caption: the caption, or None.
    """

    def __init__(self, columns: tuple, rows: tuple, numeric: tuple, caption: Optional[str]):
        self.columns, self.rows, self.numeric, self.caption = columns, rows, numeric, caption

    def __repr__(self) -> str:
        widths = [max(len(c), *(len(r[j]) for r in self.rows)) if self.rows else len(c)
                  for j, c in enumerate(self.columns)]

        def line(cells):
            return "  ".join(c.rjust(w) if num else c.ljust(w)
                             for c, w, num in zip(cells, widths, self.numeric)).rstrip()

        out = [self.caption] if self.caption else []
        out += [line(self.columns), "  ".join("-" * w for w in widths)]
        out += [line(r) for r in self.rows]
        return "\n".join(out)

    def _repr_html_(self) -> str:
        def cell(tag, value, num):
            # numbers right-aligned and whole; short number-like text ("11 of 15", "[0.48, 0.89]") whole
            kind = ' class="mha-num"' if num else ' class="mha-nowrap"' if _SHORT_FIGURES.fullmatch(value) else ""
            return f"<{tag}{kind}>{html.escape(value)}</{tag}>"

        def cells(tag, values):
            return "".join(cell(tag, v, num) for v, num in zip(values, self.numeric))

        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        body = "".join(f"<tr>{cells('td', r)}</tr>" for r in self.rows)
        return (f'<table class="mha-table">{caption}<thead><tr>{cells("th", self.columns)}</tr></thead>'
                f"<tbody>{body}</tbody></table>")


def table(rows: Sequence[Sequence[Any]], columns: Sequence[str], *, caption: Optional[str] = None,
          digits: int = 3) -> Table:
    """A table of results, for a chapter cell to show (the last expression of the cell).

    The book's pages show its HTML (``_repr_html_``): a ``<table class="mha-table">`` whose text
    wraps in a narrow column and which scrolls in its own box, with a "scroll" hint, when it still
    does not fit. Jupyter's text view and nbval read the plain text (``repr``): the columns aligned,
    numbers to the right. Every cell is escaped: no text becomes HTML.

    Args:
        rows: one sequence per row, each as long as ``columns``; a cell is a str (shown as given),
            an int (with thousands separators), a float (to ``digits`` significant digits; NaN and
            inf as such), a bool ("yes"/"no") or None (empty). A column whose cells are all numbers,
            or strings that read as numbers ("0.92", "1,024", "12%", "4.5 MiB", "1.92x"), is
            right-aligned and never broken across lines.
        columns: the header, one non-empty str per column.
        caption: an optional line above the table.
        digits: significant digits of the float cells (positive).

    Returns:
        a :class:`Table`.

    Raises:
        ValueError: no columns, a column name that is not a non-empty str, a row of another
            length, a cell of another type (naming its row and column), a caption that is not a
            str, or ``digits`` not positive.
    """
    digits = checks.positive_int(digits, "digits")
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise ValueError(f"columns must be a non-empty list of str, got {columns!r}")
    for c in columns:
        if not isinstance(c, str) or not c:
            raise ValueError(f"every column name must be a non-empty str, got {c!r}")
    if caption is not None and not isinstance(caption, str):
        raise ValueError(f"caption must be a str or None, got {type(caption).__name__}")
    if isinstance(rows, str) or not isinstance(rows, Sequence):
        raise ValueError(f"rows must be a list of rows, got {type(rows).__name__}")
    texts, numeric = [], [True] * len(columns)
    for i, row in enumerate(rows):
        if isinstance(row, str) or not isinstance(row, Sequence) or len(row) != len(columns):
            raise ValueError(f"row {i} must have {len(columns)} cells (one per column), got {row!r}")
        shown = []
        for j, value in enumerate(row):
            text, num = _cell_text(value, digits, f"[{i}][{columns[j]!r}]")
            shown.append(text)
            numeric[j] = numeric[j] and num
        texts.append(tuple(shown))
    if not texts:
        numeric = [False] * len(columns)
    return Table(tuple(columns), tuple(texts), tuple(numeric), caption)


def _savefig_png(figure: Any) -> bytes:
    """A matplotlib figure's PNG as Jupyter's inline backend draws it: tight box, the figure's dpi."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi, bbox_inches="tight")
    return buffer.getvalue()


def _png(figure: Any, name: str, copies: Optional[list] = None) -> bytes:
    """PNG bytes of a matplotlib figure (:func:`_savefig_png`), closed afterwards so that the backend does not
    show it again; or PNG bytes as given. In the book's execution (:data:`chinese_copy_hook` set) a figure's
    Chinese copy is appended to ``copies`` (None for PNG bytes, which have no texts to translate)."""
    if isinstance(figure, (bytes, bytearray)):
        png = bytes(figure)
        if copies is not None:
            copies.append(None)
    elif callable(getattr(figure, "savefig", None)):
        png = _savefig_png(figure)
        if copies is not None:
            copies.append(chinese_copy_hook(figure, _savefig_png) if chinese_copy_hook else None)
        try:
            import matplotlib.pyplot as plt
        except ImportError:  # pragma: no cover - a figure without pyplot is no pyplot figure
            pass
        else:
            plt.close(figure)
    else:
        raise ValueError(f"{name} must be a matplotlib figure or PNG bytes, got {type(figure).__name__}")
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{name} is not a PNG image")
    return png


class FigurePair:
    """One figure in two layouts (from :func:`figure_pair`): the page picks the one that fits.

    Its HTML is a ``<picture>``: the narrow PNG for a window at most ``breakpoint`` px wide, the wide
    one otherwise, with the alt text; its PNG (``_repr_png_``) is the wide rendering.

    Attributes:
        wide, narrow: the PNG bytes of the two renderings.
        alt: the alt text.
        breakpoint: the widest window, in CSS px, that gets the narrow rendering.
        css_class: the ``<picture>``'s classes (``mha-figure-pair``, plus ``mha-heads-figure`` for
            :class:`mha_lib.viz.HeadsFigure`'s two layouts).
    """

    def __init__(self, wide: bytes, narrow: bytes, alt: str, breakpoint: int, chinese: Optional[list] = None,
                 css_class: str = "mha-figure-pair"):
        self.wide, self.narrow, self.alt, self.breakpoint = wide, narrow, alt, breakpoint
        self.chinese = chinese  # [wide's, narrow's] Chinese copies (the book's execution), else None
        self.css_class = css_class

    def _repr_mimebundle_(self, include=None, exclude=None):
        """The HTML, with the Chinese copies of its two PNGs in its metadata where the book's execution drew
        them (``metadata["text/html"][ZH_FIGURE_KEY]``: ``pngs`` in the HTML's order, narrow then wide, None
        where a rendering has no text to translate; the texts left untranslated and the glyphs missing)."""
        data = {"text/html": self._repr_html_()}
        if not self.chinese or not any(self.chinese):
            return data
        wide, narrow = (copy or {} for copy in self.chinese)
        copy = {"pngs": [narrow.get("png"), wide.get("png")],
                "untranslated": sorted(set(wide.get("untranslated", [])) | set(narrow.get("untranslated", []))),
                "missing_glyphs": sorted(set(wide.get("missing_glyphs", [])) | set(narrow.get("missing_glyphs", [])))}
        return data, {"text/html": {ZH_FIGURE_KEY: copy}}

    def _repr_png_(self) -> bytes:
        return self.wide

    def _repr_html_(self) -> str:
        def url(png):
            return "data:image/png;base64," + base64.b64encode(png).decode("ascii")

        return (f'<picture class="{self.css_class}"><source media="(max-width: {self.breakpoint}px)" '
                f'srcset="{url(self.narrow)}"><img src="{url(self.wide)}" alt="{html.escape(self.alt, quote=True)}">'
                "</picture>")

    def __repr__(self) -> str:
        return "<FigurePair: a wide and a narrow rendering>"


def figure_pair(wide: Any, narrow: Any, *, alt: str, breakpoint: int = 600) -> FigurePair:
    """One figure drawn twice, side by side for a wide page and stacked for a phone.

    A figure of several panels in a row, drawn for a 1280 px page, shrinks on a phone until its
    labels cannot be read. Draw it twice, e.g. ``plt.subplots(1, 3)`` and ``plt.subplots(3, 1)``
    with the same plotting code, and show ``figure_pair(wide_fig, narrow_fig, alt=...)``: the page
    (an HTML ``<picture>``) shows the narrow one in a window at most ``breakpoint`` px wide. Both
    figures are closed, so Jupyter's inline backend does not show them again.

    Args:
        wide, narrow: matplotlib figures (or PNG bytes).
        alt: the alt text (both renderings show the same data).
        breakpoint: the widest window, in CSS px, that gets the narrow rendering (positive).

    Returns:
        a :class:`FigurePair`.

    Raises:
        ValueError: a figure that is neither a matplotlib figure nor PNG bytes, empty ``alt``, or a
            ``breakpoint`` that is not a positive integer.
    """
    breakpoint = checks.positive_int(breakpoint, "breakpoint")
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError(f"alt must be a non-empty str (the figure's alt text), got {alt!r}")
    copies: list = []
    return FigurePair(_png(wide, "wide", copies), _png(narrow, "narrow", copies), alt, breakpoint, copies)
