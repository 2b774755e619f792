"""The static grid of per-head heat maps (:func:`plot_heads`), a matplotlib figure with alt text.
"""
from __future__ import annotations

import base64
import html
import io
import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import notebook
from ._extras import Figure, PILImage
from .bilingual import METADATA_KEY, chinese_copy, keep_text
from .panels import DEFAULT_CMAP, _alt_text, _panels, _value_range


# ---------------------------------------------------------------------------------------------
# plot_heads: the static matplotlib grid
# ---------------------------------------------------------------------------------------------


class HeadsFigure(Figure):
    """A matplotlib Figure that carries its alt text into notebooks and the HTML book.

    What :func:`plot_heads` returns: one (L, S) heat-map Axes per head, drawn from float
    weights (float64 after conversion), in rows of heads per layer, plus a colour bar.
    ``fig.alt_text`` (a str) describes it; :meth:`to_png` gives PNG bytes.

    ``fig.alt_text`` holds the description. Displayed in a notebook, the figure is an
    ``<img alt="...">`` (text/html, what Jupyter Book, JupyterLab, Colab and VS Code show),
    plus image/png, plus the alt text as text/plain (no memory address, so nbval-stable).
    A grid wider than a phone shows well (over 5.6 inches, 560 px) has a second layout,
    ``fig.narrow()``: the same maps in rows of 1 to 4, 5 inches wide, colour bar below; its
    HTML is then a ``<picture>`` (:class:`mha_lib.notebook.FigurePair`) that shows that layout
    in a window at most 600 px wide. Both are drawn when the figure is shown, from the figure as
    :func:`plot_heads` made it: lines drawn on its axes afterwards are in the wide one only.
    Everything else is a normal Figure: ``fig.savefig(...)``, ``fig.axes``...
    """

    alt_text: str = ""
    # the phone's layout (plot_heads sets it where the grid is wider than a phone shows well): draws a Figure
    narrow: Optional[Callable[[], Figure]] = None

    def to_png(self, dpi: int = 100) -> bytes:
        """The figure as PNG bytes (metadata stripped, so equal figures give equal bytes)."""
        return _png_bytes(self, dpi)

    def _repr_mimebundle_(self, include=None, exclude=None):
        png = self.to_png()
        copy = chinese_copy(self, HeadsFigure.to_png)  # the book's build: its Chinese labels too
        bundle = {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": self.alt_text}
        if self.narrow is None:
            alt = html.escape(self.alt_text, quote=True)
            bundle["text/html"] = (f'<img class="mha-heads-figure" src="data:image/png;base64,{bundle["image/png"]}" '
                                   f'alt="{alt}" style="max-width:100%;height:auto">')
            if copy is None:
                return bundle
            return bundle, {"text/html": {METADATA_KEY: copy}, "image/png": {METADATA_KEY: copy}}
        # two layouts in a <picture>: the page shows the phone's below NARROW_BREAKPOINT px
        narrow = self.narrow()
        pair = notebook.FigurePair(png, _png_bytes(narrow), self.alt_text, NARROW_BREAKPOINT,
                                   [copy, chinese_copy(narrow, _png_bytes)], "mha-figure-pair mha-heads-figure")
        shown = pair._repr_mimebundle_()
        data, metadata = shown if isinstance(shown, tuple) else (shown, {})
        bundle["text/html"] = data["text/html"]
        if copy is not None:
            metadata["image/png"] = {METADATA_KEY: copy}
        return (bundle, metadata) if metadata else bundle


def _png_bytes(fig: Figure, dpi: int = 100) -> bytes:
    """A figure as PNG bytes, its metadata stripped (equal figures give equal bytes).

    In 256 colours (a palette PNG, no dithering): about a third of matplotlib's RGBA bytes, with viridis's own
    256 colours and the text's greys kept to the eye; a chapter page carries each grid twice (wide and phone).
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    image = PILImage.open(buf).convert("RGB").quantize(256, method=PILImage.Quantize.MEDIANCUT,
                                                       dither=PILImage.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def plot_heads(
    weights: Any,
    tokens: Sequence[str],
    key_tokens: Optional[Sequence[str]] = None,
    *,
    layer: int = 0,
    head_labels: Optional[Sequence[str]] = None,
    ncols: Optional[int] = None,
    cmap: str = DEFAULT_CMAP,
    vmin: float = 0.0,
    vmax: Optional[float] = None,
    title: Optional[str] = None,
    panel_inches: Optional[float] = None,
) -> HeadsFigure:
    """A static grid of per-head attention heat maps, with token labels and alt text.

    Args:
        weights: attention probabilities, float, as a torch tensor or NumPy array of shape
            (H, L, S) for one layer, or (layers, H, L, S), or a sequence of per-layer
            (H_l, L, S) / (1, H_l, L, S) tensors (ragged after pruning). A 4-D tensor is
            ALWAYS read as (layers, H, L, S): the (B, H, L, S) weights of one batched layer
            must be indexed first, ``weights[b]``, or each batch row would be drawn as a layer.
        tokens: L query token strings (row labels).
        key_tokens: S key token strings (column labels); default ``tokens`` when S == L.
        layer: index of the first layer, used only for labels (0-based).
        head_labels: one label per head, in order, replacing "L{layer}.H{head}" (e.g. the
            original indices of the heads that survived pruning).
        ncols: heads per row for a single layer (default 4, or 8 above 16 heads).
            Several layers always give one row per layer.
        cmap: a matplotlib colormap name; the default viridis is colourblind-safe.
        vmin, vmax: colour range, finite numbers; ``vmax=None`` uses the largest weight shown.
        title: figure title.
        panel_inches: size of one panel in inches (default grows with L: 1.7 to 3.2 for up to
            4 columns, 1.1 to 2.0 for more).

    Returns:
        a :class:`HeadsFigure` (a matplotlib Figure, not attached to pyplot, so it shows
        once); ``fig.alt_text`` describes it. Each panel's title is its head label. Where the
        grid is wider than 5.6 inches, ``fig.narrow()`` draws its phone layout (else
        ``fig.narrow`` is None).

    Raises:
        ValueError: wrong rank, layers with different (L, S), 0 heads, non-finite weights,
            ``tokens``/``key_tokens`` whose length is not L/S, a bad ``layer``/``ncols``, or
            a NaN or infinite ``vmin``/``vmax``.

    Example:
        >>> fig = plot_heads(torch.rand(4, 5, 5).softmax(-1), list("abcde"))  # doctest: +SKIP
        >>> fig.axes[0].get_title()                                          # doctest: +SKIP
        'L0.H0'
    """
    rows, tokens, key_tokens = _panels(weights, tokens, key_tokens, layer=layer,
                                       head_labels=head_labels, ncols=ncols)
    vmin, vmax = _value_range(rows, vmin, vmax)
    n_cols = max(len(r) for r in rows)
    L, S = rows[0][0][1].shape
    if panel_inches is None:  # big panels for a few heads, smaller ones for a whole model
        n = max(L, S)
        panel_inches = float(np.clip(0.15 * n, 1.7, 3.2) if n_cols <= 4 else np.clip(0.1 * n, 1.1, 2.0))
    colours = dict(cmap=cmap, vmin=vmin, vmax=vmax)
    fig = _draw_grid(HeadsFigure, rows, tokens, key_tokens, colours, title, panel_inches)
    if fig.get_figwidth() > NARROW_WIDTH_INCHES + 0.6:  # shown below ~0.6 of its pixels on a phone
        fig.narrow = _narrow_grid(rows, tokens, key_tokens, colours, title)
    fig.alt_text = _alt_text(rows, tokens, key_tokens, vmin, vmax, cmap)
    return fig


# ---------------------------------------------------------------------------------------------
# The grid, placed by hand in inches: one layout for a wide page, one for a phone
# ---------------------------------------------------------------------------------------------

NARROW_WIDTH_INCHES = 5.0  # a phone's rendering: 500 px at 100 dpi, shown at ~0.7 in a 358 px column
NARROW_BREAKPOINT = 600  # CSS px: the widest window that gets the phone's rendering (as figure_pair's default)
GAP_INCHES = 0.12  # between two maps, across and down
PHONE_MARGIN_INCHES = 0.1  # right of the phone's grid (its colour bar is below)


def _token_labels(panel_inches: float, n: int, tokens: Sequence[str]) -> tuple:
    """(font size in points, width in inches) of the row labels of maps ``panel_inches`` on their longer side of
    ``n`` tokens: the font follows a token's row height, from 4.5 to 9 points."""
    tick_size = float(np.clip(panel_inches * 72 / n * 0.75, 4.5, 9))
    return tick_size, max(len(t) for t in tokens) * (tick_size * 0.7 / 72) + 0.15


def _draw_grid(cls: type, rows: list, tokens: list, key_tokens: list, colours: dict, title: Optional[str],
               panel_inches: float, *, phone: bool = False) -> Figure:
    """Draw ``rows`` of ``(label, (L, S) array)`` panels, each ``panel_inches`` on its longer side.

    Everything is placed by hand, in inches: constrained layout takes ~10 s for 72 panels. The colour bar
    stands right of the grid, or below it for a phone (``phone=True``: its width goes to the maps, and a long
    title wraps).
    """
    n_rows, n_cols = len(rows), max(len(r) for r in rows)
    L, S = rows[0][0][1].shape
    tick_size, left_in = _token_labels(panel_inches, max(L, S), tokens)
    _, bottom_in = _token_labels(panel_inches, max(L, S), key_tokens)
    title_in = (max(tick_size + 1, 7) + 4) / 72
    gap_x = gap_y = GAP_INCHES
    panel_w, panel_h = panel_inches * S / max(L, S), panel_inches * L / max(L, S)
    grid_w = left_in + n_cols * panel_w + (n_cols - 1) * gap_x
    title_size = 10.0 if phone else 12.0  # points; about 0.55 of a point wide per character
    title_lines = 0 if not title else max(1, math.ceil(len(title) * title_size * 0.55 / 72 / (grid_w - 0.2)))
    top_in = 0.1 + (0.3 * title_lines + 0.1 if title and phone else 0.4 if title else 0.0)
    cbar_right, cbar_below = (PHONE_MARGIN_INCHES, 0.2 + 0.12 + 0.45) if phone else (0.15 + 0.12 + 0.7, 0.0)
    width = grid_w + cbar_right
    height = top_in + n_rows * (title_in + panel_h) + (n_rows - 1) * gap_y + bottom_in + cbar_below
    fig = cls(figsize=(width, height))
    image = None
    for r, row in enumerate(rows):
        y_top = top_in + r * (title_in + panel_h + gap_y) + title_in
        for c, (label, arr) in enumerate(row):
            x_left = left_in + c * (panel_w + gap_x)
            ax = fig.add_axes((x_left / width, 1 - (y_top + panel_h) / height, panel_w / width, panel_h / height))
            image = ax.imshow(arr, interpolation="nearest", aspect="auto", **colours)
            ax.set_title(label, fontsize=max(tick_size + 1, 7), pad=2)
            bottom_of_column = r == n_rows - 1 or c >= len(rows[r + 1])
            if bottom_of_column:
                ax.set_xticks(range(S), key_tokens, rotation=90, fontsize=tick_size)
            else:
                ax.set_xticks([])
            if c == 0:
                ax.set_yticks(range(L), tokens, fontsize=tick_size)
            else:
                ax.set_yticks([])
            ax.tick_params(length=0, pad=1)
            keep_text(ax.xaxis, ax.yaxis)  # tokens a model reads: the same in both editions
    grid_top, grid_bottom = top_in + title_in, height - bottom_in - cbar_below
    if phone:  # below the key tokens, as wide as the maps
        bar_w = min(grid_w - left_in, 3.0)
        cax = fig.add_axes(((left_in + (grid_w - left_in - bar_w) / 2) / width, (cbar_below - 0.32) / height,
                            bar_w / width, 0.12 / height))
        fig.colorbar(image, cax=cax, orientation="horizontal", label="attention weight")
    else:
        cb_h = min(grid_bottom - grid_top, max(1.5, 0.6 * (grid_bottom - grid_top)))
        cax = fig.add_axes(((width - cbar_right + 0.12) / width, 1 - (grid_top + cb_h) / height,
                            0.15 / width, cb_h / height))
        fig.colorbar(image, cax=cax, label="attention weight")
    if title:
        fig.suptitle(title, y=1 - 0.08 / height, va="top", fontsize=title_size, wrap=phone)
    return fig


def _narrow_grid(rows: list, tokens: list, key_tokens: list, colours: dict,
                 title: Optional[str]) -> Callable[[], Figure]:
    """The phone's layout of the same panels, drawn when first shown: each row of the wide grid (a layer, or
    ``ncols`` heads) wrapped into rows of 1 to 4 maps (as many as keep 0.1 inch a token, at least 2; 1 for up
    to 3 maps) of at most 3.2 inches, the figure at most ``NARROW_WIDTH_INCHES`` wide; the colour bar below."""
    n_panels = sum(len(r) for r in rows)
    L, S = rows[0][0][1].shape
    # as many maps a row as keep 0.1 inch a token (up to 4: short texts), at least 2 (3 above 24 maps)
    fit = int((NARROW_WIDTH_INCHES - 0.7) // (0.1 * max(L, S) + GAP_INCHES))
    per_row = 1 if n_panels <= 3 else min(4, max(2 if n_panels <= 24 else 3, fit))
    narrow_rows = [row[i:i + per_row] for row in rows for i in range(0, len(row), per_row)]

    def draw() -> Figure:
        # the panel size that makes the grid NARROW_WIDTH_INCHES wide (the token labels' width depends on it)
        panel = 3.2
        for _ in range(3):
            _, left_in = _token_labels(panel, max(L, S), tokens)
            panel_w = (NARROW_WIDTH_INCHES - PHONE_MARGIN_INCHES - left_in - (per_row - 1) * GAP_INCHES) / per_row
            panel = min(3.2, panel_w * max(L, S) / S)
        return _draw_grid(Figure, narrow_rows, tokens, key_tokens, colours, title, panel, phone=True)

    return draw
