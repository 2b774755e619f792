"""Pictures of attention: static head grids, the attention explorer, and a bertviz adapter.

Three tools, one convention. Every picture shows per-head attention weights as heat maps:
rows are query positions (L), columns are key positions (S), and a head is labelled
``"L{layer}.H{head}"``, 0-based (Clark et al. 2019 count from 1: their head 8-10 is our
``L7.H9``).

* :func:`plot_heads` -- a matplotlib figure: the static grid that stands next to every
  interactive view, with alt text that reaches the HTML page.
* :func:`render_heads_png` -- the same grid as PNG bytes, drawn straight from a colormapped
  array with Pillow (no matplotlib Axes), fast enough to redraw while a slider moves.
* :func:`attention_explorer` -- an ipywidgets control: a slider over precomputed frames
  (head count, layer, heads kept...), optionally recomputed for a sentence the reader types.
  It works with a live kernel (Jupyter, JupyterLab, Colab, VS Code) AND in the static HTML
  book, where no kernel runs.
* :func:`bertviz_view` -- mha_lib weights into bertviz's head view / model view (Vig 2019).

Shapes (as everywhere in mha_lib):
    H heads, L query positions, S key positions, ``layers`` layers.
    One layer: (H, L, S). Several layers: (layers, H, L, S), or a sequence of per-layer
    tensors (H_l, L, S) / (1, H_l, L, S) -- ragged when heads were pruned, which is how
    :func:`mha_lib.pretrained.load_bert` models return them.
    Weights may be torch tensors (any device, any float dtype) or NumPy arrays.

Needs the ``viz`` extra: ``pip install "mha_lib[viz]"`` (matplotlib, ipywidgets >= 7,
Pillow; bertviz for :func:`bertviz_view`).
"""
from __future__ import annotations

import base64
import hashlib
import html
import io
import itertools
import json
import math
import numbers
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import checks

_EXTRA_HINT = 'pip install "mha_lib[viz]"'

try:
    import ipywidgets as widgets
    import matplotlib
    from matplotlib.figure import Figure
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageFont
except ImportError as err:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        f"mha_lib.viz needs {getattr(err, 'name', None) or 'matplotlib, ipywidgets and Pillow'!s}: "
        f"{_EXTRA_HINT}"
    ) from err

__all__ = [
    "plot_heads",
    "HeadsFigure",
    "render_heads_png",
    "Frame",
    "layer_frames",
    "AttentionExplorer",
    "attention_explorer",
    "bertviz_view",
]

DEFAULT_CMAP = "viridis"  # perceptually uniform and readable with the common colour-vision deficiencies

# ---------------------------------------------------------------------------------------------
# Input checking: every public function turns its weights into rows of labelled 2-D panels.
# ---------------------------------------------------------------------------------------------

Panel = Tuple[str, np.ndarray]  # ("L0.H3", (L, S) float64)


def _to_numpy(x: Any, what: str = "weights") -> np.ndarray:
    """A float64 NumPy copy of a torch tensor, NumPy array or nested list."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch
        x = x.detach().cpu().float().numpy()
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{what} must be a tensor or array of numbers, got {type(x).__name__}") from err
    return arr


def _check_finite(arr: np.ndarray, what: str) -> None:
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        raise ValueError(f"{what} contain {bad} non-finite values (NaN or inf); attention weights must be finite")


def _layer_rows(weights: Any, layer: int) -> List[Tuple[int, np.ndarray]]:
    """Split ``weights`` into ``[(layer_index, (H_l, L, S) array), ...]``."""
    if isinstance(weights, (list, tuple)):
        if len(weights) == 0:
            raise ValueError("weights is an empty sequence: no layers to show")
        rows = []
        for i, w in enumerate(weights):
            arr = _to_numpy(w, f"weights[{i}]")
            if arr.ndim == 4:
                if arr.shape[0] != 1:
                    raise ValueError(
                        f"weights[{i}] has shape {tuple(arr.shape)}: a batch of {arr.shape[0]}; "
                        "pass one sequence, e.g. [w[b:b + 1] for w in weights]"
                    )
                arr = arr[0]
            if arr.ndim != 3:
                raise ValueError(
                    f"weights[{i}] has shape {tuple(arr.shape)}; each layer must be (H, L, S) or (1, H, L, S)"
                )
            rows.append((layer + i, arr))
        return rows
    arr = _to_numpy(weights)
    if arr.ndim == 3:
        return [(layer, arr)]
    if arr.ndim == 4:
        return [(layer + i, arr[i]) for i in range(arr.shape[0])]
    hint = " (one head? use weights[None])" if arr.ndim == 2 else ""
    raise ValueError(
        f"weights must have shape (H, L, S) or (layers, H, L, S); got shape {tuple(arr.shape)}{hint}"
    )


def _check_tokens(tokens: Sequence[str], n: int, name: str, axis: str) -> List[str]:
    if tokens is None:
        raise ValueError(f"{name} is required")
    if isinstance(tokens, str):
        raise ValueError(f"{name} must be a list of token strings, not one string ({tokens[:30]!r})")
    # A label is one line: control characters (a "\n" in a token) are shown escaped, as Python
    # writes them, instead of reaching the text renderer.
    tokens = ["".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in str(t))
              for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"{name} has {len(tokens)} entries but the weights have {axis}={n}")
    return tokens


def _panels(
    weights: Any,
    tokens: Sequence[str],
    key_tokens: Optional[Sequence[str]],
    *,
    layer: int = 0,
    head_labels: Optional[Sequence[str]] = None,
    ncols: Optional[int] = None,
) -> Tuple[List[List[Panel]], List[str], List[str]]:
    """Rows of ``(label, (L, S) array)`` panels plus the checked query and key tokens.

    One layer (H, L, S) is wrapped into rows of ``ncols`` heads (default 4; 8 above 16 heads).
    Several layers give one row per layer.
    """
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or layer < 0:
        raise ValueError(f"layer must be a non-negative int, got {layer!r}")
    layer_rows = _layer_rows(weights, int(layer))
    shapes = {arr.shape[1:] for _, arr in layer_rows}
    if len(shapes) != 1:
        raise ValueError(f"every layer must have the same (L, S); got {sorted(shapes)}")
    (L, S), = shapes
    if L == 0 or S == 0:
        raise ValueError(f"weights have L={L}, S={S}: nothing to show")
    n_heads = sum(arr.shape[0] for _, arr in layer_rows)
    if n_heads == 0:
        raise ValueError("weights have 0 heads (every head pruned?): nothing to show")
    for li, arr in layer_rows:
        _check_finite(arr, f"weights of layer {li}")
    tokens = _check_tokens(tokens, L, "tokens", "L")
    key_tokens = tokens if key_tokens is None and S == L else key_tokens
    if key_tokens is None:
        raise ValueError(f"weights have S={S} keys but L={L} queries: pass key_tokens (S strings)")
    key_tokens = _check_tokens(key_tokens, S, "key_tokens", "S")

    labels = [f"L{li}.H{h}" for li, arr in layer_rows for h in range(arr.shape[0])]
    if head_labels is not None:
        head_labels = [str(s) for s in head_labels]
        if len(head_labels) != n_heads:
            raise ValueError(f"head_labels has {len(head_labels)} entries for {n_heads} heads")
        labels = head_labels
    it = iter(labels)
    if len(layer_rows) == 1:
        arr = layer_rows[0][1]
        H = arr.shape[0]
        if ncols is None:
            ncols = H if H <= 4 else (4 if H <= 16 else 8)
        if ncols < 1:
            raise ValueError(f"ncols must be >= 1, got {ncols}")
        flat = [(next(it), arr[h]) for h in range(H)]
        rows = [flat[i:i + ncols] for i in range(0, H, ncols)]
    else:
        rows = [[(next(it), arr[h]) for h in range(arr.shape[0])] for _, arr in layer_rows]
        rows = [r for r in rows if r]  # a fully pruned layer has no panel
    return rows, tokens, key_tokens


def _check_colour_limits(vmin: Any, vmax: Any) -> None:
    """vmin a finite number, vmax None or a finite number (NaN would give a blank or garbled map)."""
    for name, v in (("vmin", vmin), ("vmax", vmax)):
        if v is None and name == "vmax":
            continue
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")


def _check_cell(cell: Any) -> None:
    """cell None (automatic) or an int >= 1 (pixels per attention entry)."""
    if cell is None:
        return
    if isinstance(cell, bool) or not isinstance(cell, numbers.Integral) or cell < 1:
        raise ValueError(f"cell must be a positive int (pixels per attention entry) or None, got {cell!r}")


def _value_range(rows: List[List[Panel]], vmin: float, vmax: Optional[float]) -> Tuple[float, float]:
    _check_colour_limits(vmin, vmax)
    if vmax is None:
        vmax = max(float(a.max()) for row in rows for _, a in row)
    if not (math.isfinite(vmin) and math.isfinite(vmax)) or vmax <= vmin:
        vmax = vmin + 1.0 if not vmax > vmin else vmax
    return float(vmin), float(vmax)


def _alt_text(rows: List[List[Panel]], tokens: List[str], key_tokens: List[str], vmin: float, vmax: float,
              cmap: str) -> str:
    """A description for readers who cannot see the figure, computed from the data.

    Besides layout and tokens it says, per key token, which heads give it their highest
    mean weight (the commonest pattern in trained models is "everything on [CLS]/[SEP]").
    """
    panels = [p for row in rows for p in row]
    first, last = panels[0][0], panels[-1][0]
    span = first if len(panels) == 1 else f"{first} to {last}"
    groups: Dict[str, List[str]] = {}
    for label, a in panels:
        groups.setdefault(key_tokens[int(np.argmax(a.mean(axis=0)))], []).append(label)
    parts = []
    for key, labels in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        who = ", ".join(labels) if len(labels) <= 6 else f"{len(labels)} heads"
        parts.append(f"{key} ({who})")
    return (
        f"Grid of {len(panels)} attention heat maps, one per head ({span}). "
        f"Rows are query tokens, columns are key tokens: {' '.join(tokens)}"
        + ("" if key_tokens == tokens else f" (keys: {' '.join(key_tokens)})")
        + f". Colour scale {cmap}, dark = {vmin:.2g}, bright = {vmax:.2g}. "
        f"Key token with the highest mean weight, per head: {'; '.join(parts)}."
    )


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
    Everything else is a normal Figure: ``fig.savefig(...)``, ``fig.axes``...
    """

    alt_text: str = ""

    def to_png(self, dpi: int = 100) -> bytes:
        """The figure as PNG bytes (metadata stripped, so equal figures give equal bytes)."""
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
        return buf.getvalue()

    def _repr_mimebundle_(self, include=None, exclude=None):
        png = base64.b64encode(self.to_png()).decode("ascii")
        alt = html.escape(self.alt_text, quote=True)
        img = (f'<img class="mha-heads-figure" src="data:image/png;base64,{png}" alt="{alt}" '
               f'style="max-width:100%;height:auto">')
        return {"text/html": img, "image/png": png, "text/plain": self.alt_text}


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
        once); ``fig.alt_text`` describes it. Each panel's title is its head label.

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
    n_rows, n_cols = len(rows), max(len(r) for r in rows)
    L, S = rows[0][0][1].shape
    if panel_inches is None:  # big panels for a few heads, smaller ones for a whole model
        n = max(L, S)
        panel_inches = float(np.clip(0.15 * n, 1.7, 3.2) if n_cols <= 4 else np.clip(0.1 * n, 1.1, 2.0))
    # Everything is placed by hand, in inches: constrained layout takes ~10 s for 72 panels.
    tick_size = float(np.clip(panel_inches * 72 / max(L, S) * 0.75, 4.5, 9))
    char_in = tick_size * 0.7 / 72
    title_in = (max(tick_size + 1, 7) + 4) / 72
    left_in = max(len(t) for t in tokens) * char_in + 0.15
    bottom_in = max(len(t) for t in key_tokens) * char_in + 0.15
    top_in = 0.1 + (0.4 if title else 0.0)
    gap_x, gap_y = 0.12, 0.12
    cbar_in = 0.15 + 0.12 + 0.7
    panel_w, panel_h = panel_inches * S / max(L, S), panel_inches * L / max(L, S)
    width = left_in + n_cols * panel_w + (n_cols - 1) * gap_x + cbar_in
    height = top_in + n_rows * (title_in + panel_h) + (n_rows - 1) * gap_y + bottom_in
    fig = HeadsFigure(figsize=(width, height))
    image = None
    for r, row in enumerate(rows):
        y_top = top_in + r * (title_in + panel_h + gap_y) + title_in
        for c, (label, arr) in enumerate(row):
            x_left = left_in + c * (panel_w + gap_x)
            ax = fig.add_axes((x_left / width, 1 - (y_top + panel_h) / height, panel_w / width, panel_h / height))
            image = ax.imshow(arr, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest", aspect="auto")
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
    grid_top, grid_bottom = top_in + title_in, height - bottom_in
    cb_h = min(grid_bottom - grid_top, max(1.5, 0.6 * (grid_bottom - grid_top)))
    cax = fig.add_axes(((width - cbar_in + 0.12) / width, 1 - (grid_top + cb_h) / height, 0.15 / width, cb_h / height))
    fig.colorbar(image, cax=cax, label="attention weight")
    if title:
        fig.suptitle(title, y=1 - 0.08 / height, va="top")
    fig.alt_text = _alt_text(rows, tokens, key_tokens, vmin, vmax, cmap)
    return fig


# ---------------------------------------------------------------------------------------------
# render_heads_png: fast frames (a colormapped array, drawn with Pillow, no Axes)
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _lut(cmap: str) -> np.ndarray:
    """(256, 3) uint8 colours of a matplotlib colormap."""
    try:
        cm = matplotlib.colormaps[cmap]
    except KeyError as err:
        raise ValueError(f"unknown colormap {cmap!r}") from err
    return (cm(np.linspace(0.0, 1.0, 256))[:, :3] * 255 + 0.5).astype(np.uint8)


@lru_cache(maxsize=16)
def _font(size: int):
    path = f"{matplotlib.get_data_path()}/fonts/ttf/DejaVuSans.ttf"  # ships with matplotlib
    return ImageFont.truetype(path, size)


def _text_width(font, text: str) -> int:
    left, _, right, _ = font.getbbox(text)
    return int(math.ceil(right - min(left, 0)))


@dataclass
class _Layout:
    cell: int
    font: int
    left: int
    top: int
    title_h: int
    gap: int
    panel_w: int
    panel_h: int
    bottom: int
    width: int
    height: int


_PANEL_PX = 176  # target panel size: 4 panels of 16 tokens fit an 800-px text column


def _layout(rows, tokens, key_tokens, cell: Optional[int], title: Optional[str]) -> _Layout:
    L, S = rows[0][0][1].shape
    if cell is None:
        cell = int(np.clip(_PANEL_PX // max(L, S), 4, 24))
    font = int(np.clip(cell, 9, 13))
    f = _font(font)
    n_cols = max(len(r) for r in rows)
    show_labels = cell >= 7
    left = (max(_text_width(f, t) for t in tokens) + 6) if show_labels else 4
    key_h = (max(_text_width(f, t) for t in key_tokens) + 6) if show_labels else 4
    top = (font + 10) if title else 4
    title_h = font + 5
    gap = 10
    panel_w, panel_h = S * cell, L * cell
    colorbar_h = 12 + font + 8
    bottom = key_h + colorbar_h + 6
    left = max(left, 30)
    width = left + n_cols * panel_w + (n_cols - 1) * gap + 8
    width = max(width, left + 200)
    height = top + len(rows) * (title_h + panel_h) + (len(rows) - 1) * gap + bottom
    return _Layout(cell, font, left, top, title_h, gap, panel_w, panel_h, bottom, width, height)


def _draw_frame(rows, tokens, key_tokens, *, cmap: str, vmin: float, vmax: float, cell: Optional[int],
                title: Optional[str], size: Optional[Tuple[int, int]] = None) -> PILImage.Image:
    lay = _layout(rows, tokens, key_tokens, cell, title)
    width, height = lay.width, lay.height
    if size is not None:  # pad to a shared canvas so the page does not jump between frames
        width, height = max(width, size[0]), max(height, size[1])
    canvas = np.full((height, width, 3), 255, dtype=np.uint8)
    lut = _lut(cmap)
    scale = 255.0 / (vmax - vmin)
    origins = []
    for r, row in enumerate(rows):
        y0 = lay.top + r * (lay.title_h + lay.panel_h + lay.gap) + lay.title_h
        for c, (label, arr) in enumerate(row):
            x0 = lay.left + c * (lay.panel_w + lay.gap)
            idx = np.clip((arr - vmin) * scale, 0, 255).astype(np.uint8)          # (L, S)
            rgb = lut[idx]                                                         # (L, S, 3)
            rgb = np.repeat(np.repeat(rgb, lay.cell, axis=0), lay.cell, axis=1)   # (L*cell, S*cell, 3)
            canvas[y0:y0 + lay.panel_h, x0:x0 + lay.panel_w] = rgb
            origins.append((r, c, label, x0, y0))
    # colour bar: a horizontal gradient under the grid
    cb_w = 160
    cb_y = height - (12 + lay.font + 8)
    cb_x = lay.left
    canvas[cb_y:cb_y + 10, cb_x:cb_x + cb_w] = np.repeat(lut[np.linspace(0, 255, cb_w).astype(np.uint8)][None], 10, 0)

    img = PILImage.fromarray(canvas, "RGB")
    draw = ImageDraw.Draw(img)
    f = _font(lay.font)
    ink = (20, 20, 20)
    if title:
        draw.text((lay.left, 3), title, font=f, fill=ink)
    show_labels = lay.cell >= 7
    rotated: Dict[str, PILImage.Image] = {}
    for r, c, label, x0, y0 in origins:
        draw.text((x0, y0 - lay.title_h + 1), label, font=f, fill=ink)
        if show_labels and c == 0:
            for i, tok in enumerate(tokens):
                yc = y0 + i * lay.cell + lay.cell // 2
                draw.text((x0 - 4, yc), tok, font=f, fill=ink, anchor="rm")
        below_is_empty = r == len(rows) - 1 or c >= len(rows[r + 1])
        if show_labels and below_is_empty:
            for j, tok in enumerate(key_tokens):
                if tok not in rotated:
                    w = max(_text_width(f, tok), 1)
                    tmp = PILImage.new("L", (w + 2, lay.font + 4), 0)
                    ImageDraw.Draw(tmp).text((0, 0), tok, font=f, fill=255)
                    rotated[tok] = tmp.rotate(90, expand=True)
                mask = rotated[tok]
                xc = x0 + j * lay.cell + (lay.cell - mask.width) // 2 + 1
                yt = y0 + lay.panel_h + 3
                img.paste(ink, (xc, yt, xc + mask.width, yt + mask.height), mask)
    draw.text((cb_x, cb_y + 12), f"{vmin:.2g}", font=f, fill=ink)
    draw.text((cb_x + cb_w, cb_y + 12), f"{vmax:.2g}", font=f, fill=ink, anchor="ra")
    draw.text((cb_x + cb_w + 8, cb_y - 2), "attention weight", font=f, fill=ink)
    return img


def _png(img: PILImage.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def render_heads_png(
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
    cell: Optional[int] = None,
    title: Optional[str] = None,
) -> bytes:
    """The grid of :func:`plot_heads` as PNG bytes, drawn fast: no matplotlib Axes.

    Each head's (L, S) weights are mapped through the colormap's 256-colour table, scaled
    up to ``cell`` x ``cell`` pixels per entry, and labelled with Pillow (DejaVu Sans, from
    matplotlib's data). Token labels are drawn when a cell is at least 7 px.

    Args:
        weights, tokens, key_tokens, layer, head_labels, ncols, cmap, vmin, vmax, title:
            as for :func:`plot_heads`.
        cell: pixels per attention entry, an int >= 1 (default: about 176 px per panel,
            4 to 24 px).

    Returns:
        PNG bytes (RGB). About 10-60 KB for 12 heads of 16 tokens.

    Raises:
        ValueError: as :func:`plot_heads`, an unknown ``cmap``, or a ``cell`` that is not
            a positive int.
    """
    rows, tokens, key_tokens = _panels(weights, tokens, key_tokens, layer=layer,
                                       head_labels=head_labels, ncols=ncols)
    _check_cell(cell)
    vmin, vmax = _value_range(rows, vmin, vmax)
    return _png(_draw_frame(rows, tokens, key_tokens, cmap=cmap, vmin=vmin, vmax=vmax, cell=int(cell) if cell else cell,
                            title=title))


# ---------------------------------------------------------------------------------------------
# The attention explorer
# ---------------------------------------------------------------------------------------------


@dataclass
class Frame:
    """What one slider position shows.

    Attributes:
        weights: (H, L, S) or (layers, H, L, S) float weights, or a per-layer sequence
            (see :func:`plot_heads`).
        tokens: L query token strings.
        key_tokens: S key token strings (default ``tokens``).
        layer: index of the first layer, for the "L{layer}.H{head}" labels.
        head_labels: explicit panel labels, e.g. original indices of kept heads.
        title: a line drawn above the grid.
    """

    weights: Any
    tokens: Sequence[str]
    key_tokens: Optional[Sequence[str]] = None
    layer: int = 0
    head_labels: Optional[Sequence[str]] = None
    title: Optional[str] = None


def _as_frame(spec: Any, where: str) -> Frame:
    if isinstance(spec, Frame):
        return spec
    if isinstance(spec, Mapping):
        try:
            return Frame(**spec)
        except TypeError as err:
            raise ValueError(f"{where}: bad frame fields {sorted(spec)}: {err}") from err
    if isinstance(spec, tuple) and len(spec) == 2:
        return Frame(spec[0], spec[1])
    raise ValueError(
        f"{where}: a frame must be a Frame, a dict of Frame fields or a (weights, tokens) tuple, "
        f"got {type(spec).__name__}"
    )


def layer_frames(attentions: Sequence[Any], tokens: Sequence[str], *, batch_index: int = 0,
                 title: str = "layer {layer}") -> Dict[int, Frame]:
    """One :class:`Frame` per layer, for a layer slider: ``{layer: Frame}``.

    Args:
        attentions: per-layer weights, each (B, H_l, L, L) (what
            ``model(..., output_attentions=True).attentions`` returns) or (H_l, L, L).
        tokens: the L token strings of sequence ``batch_index``.
        batch_index: which sequence of the batch to show, an int in [-B, B) (negative
            counts from the end); ignored for (H_l, L, L) layers.
        title: format string for each frame's title; ``{layer}`` is the 0-based layer.

    Returns:
        ``{layer: Frame}``, layers 0, 1, ... in order; each frame holds that layer's
        (H_l, L, L) weights.

    Raises:
        ValueError: no layers, a layer whose rank is not 3 or 4, or a ``batch_index`` that
            is not an int or is out of range for a layer's batch size B.
    """
    if attentions is None or len(attentions) == 0:
        raise ValueError("attentions is empty: run the model with output_attentions=True")
    if isinstance(batch_index, bool) or not isinstance(batch_index, numbers.Integral):
        raise ValueError(f"batch_index must be an int, got {batch_index!r}")
    frames = {}
    for i, a in enumerate(attentions):
        shape = tuple(getattr(a, "shape", np.shape(a)))
        ndim = len(shape)
        if ndim == 4:
            if not -shape[0] <= batch_index < shape[0]:
                raise ValueError(
                    f"batch_index {batch_index} is out of range for attentions[{i}] of shape {shape} "
                    f"(batch size {shape[0]})"
                )
            a = a[batch_index]
        elif ndim != 3:
            raise ValueError(f"attentions[{i}] must be (B, H, L, L) or (H, L, L); got rank {ndim}")
        frames[i] = Frame(a, tokens, layer=i, title=title.format(layer=i) if title else None)
    return frames


def _has_stack() -> bool:
    """ipywidgets 8 has ``Stack``; ipywidgets 7 (Colab has shipped it) does not."""
    return hasattr(widgets, "Stack")


class AttentionExplorer:
    """A slider over attention frames; see :func:`attention_explorer` (which builds one).

    Each frame holds float weights of shape (H, L, S) for one layer, (layers, H, L, S), or a
    per-layer sequence of (H_l, L, S), with L query and S key token strings; frames are
    rendered once, as PNG bytes, with one colour range over all of them.

    Attributes:
        widget: the ``VBox`` to display (displaying the explorer displays it).
        slider: the ``SelectionSlider`` over the frame keys (its own label and readout off:
            the row around it shows them).
        slider_row: the ``HBox`` the reader sees: the description, the current value (the
            readout), the first value's label, the slider, the last value's label.
        readout: what shows the current value: a ``Stack`` of one ``Label`` per value,
            ``jslink``-ed to the slider (ipywidgets 8, works without a kernel), or one
            ``Label`` the kernel updates (ipywidgets 7).
        description: the slider's name, as given.
        images: the ``Image`` widgets: one per slider value inside ``stack`` (ipywidgets 8),
            or a single one that ``.observe`` updates in place (ipywidgets 7).
        stack: the ``Stack`` (ipywidgets 8) or None.
        link: the ``jslink`` from ``slider.index`` to ``stack.selected_index``, or None.
        text: the sentence ``Text`` box (only with ``compute``).
        message: an ``HTML`` line for status and errors.
        pngs: ``{value: PNG bytes}`` of the frames shown now.
        sentence: the sentence the frames show (with ``compute``).
    """

    def __init__(self, frames: Mapping[Hashable, Any], *, description: str = "", compute=None,
                 sentence: Optional[str] = None, value: Any = None, cmap: str = DEFAULT_CMAP,
                 vmin: float = 0.0, vmax: Optional[float] = None, cell: Optional[int] = None,
                 ncols: Optional[int] = None, continuous_update: bool = True,
                 end_labels: Optional[Tuple[str, str]] = None):
        if not isinstance(frames, Mapping) or len(frames) == 0:
            raise ValueError("frames must be a non-empty dict {slider value: frame}")
        if compute is not None and not callable(compute):
            raise ValueError(f"compute must be callable (value, sentence) -> frame, got {compute!r}")
        self.values = list(frames)
        if value is None:
            value = self.values[0]
        if value not in frames:
            raise ValueError(f"value {value!r} is not one of the frame keys {self.values}")
        self._compute = compute
        self._lock = threading.Lock()
        _check_cell(cell)
        _check_colour_limits(vmin, vmax)
        self._style = dict(cmap=cmap, vmin=vmin, vmax=vmax, cell=cell, ncols=ncols)
        _lut(cmap)  # fail now on an unknown colormap
        self.sentence = sentence
        self.pngs = self._render_all({v: _as_frame(frames[v], f"frames[{v!r}]") for v in self.values})

        labels = [str(v) for v in self.values]
        if end_labels is None:
            end_labels = (labels[0], labels[-1])
        if (not isinstance(end_labels, (tuple, list)) or len(end_labels) != 2
                or not all(isinstance(t, str) for t in end_labels)):
            raise ValueError(f"end_labels must be two strings (left end, right end), got {end_labels!r}")
        self.description = str(description)
        index = self.values.index(value)
        # The slider's own label and readout are off: the row shows the name, the value, and a
        # label at each end of the track, so the reader sees which way the values run.
        self.slider = widgets.SelectionSlider(
            options=list(zip(labels, self.values)), value=value, description="", readout=False,
            continuous_update=continuous_update,
            layout=widgets.Layout(flex="1 1 160px", min_width="100px", width="auto"),
        )
        if _has_stack():  # one Label per value, switched in the browser like the frames
            self.readout = widgets.Stack([widgets.Label(t) for t in labels], selected_index=index)
            self.readout_link = widgets.jslink((self.slider, "index"), (self.readout, "selected_index"))
        else:  # ipywidgets 7: the kernel updates one Label (see _on_index)
            self.readout = widgets.Label(labels[index])
            self.readout_link = None
        width = max(len(t) for t in labels) + 1
        self.readout.layout = widgets.Layout(min_width=f"{width}ch", margin="0 1em 0 0.3em")
        self.readout.add_class("widget-readout")     # what the book's script and tests read
        self.readout.add_class("mha-slider-readout")
        name = widgets.Label(self.description)
        name.add_class("mha-slider-name")
        ends = [widgets.Label(t) for t in end_labels]
        for end in ends:
            end.add_class("mha-slider-end")
        self.slider_row = widgets.HBox(
            [name, self.readout, ends[0], self.slider, ends[1]],
            layout=widgets.Layout(align_items="center", width="100%", max_width="640px"),
        )
        self.slider_row.add_class("mha-slider-row")
        image_layout = dict(max_width="100%", height="auto")
        if _has_stack():
            # Static HTML: every frame is in the page and the browser switches them (jslink),
            # so the slider works without a kernel. With a kernel the same link runs, and the
            # observer below keeps the kernel-side Stack in step for code that sets the slider.
            self.images = [widgets.Image(value=self.pngs[v], format="png", layout=widgets.Layout(**image_layout))
                           for v in self.values]
            self.stack = widgets.Stack(self.images, selected_index=index)
            self.link = widgets.jslink((self.slider, "index"), (self.stack, "selected_index"))
            view = self.stack
        else:
            # ipywidgets 7: one Image, replaced in place by the kernel (needs a live kernel).
            self.images = [widgets.Image(value=self.pngs[value], format="png", layout=widgets.Layout(**image_layout))]
            self.stack = None
            self.link = None
            view = self.images[0]
        self.slider.observe(self._on_index, names="index")

        self.text = None
        children = []
        if compute is not None:
            self.text = widgets.Text(
                value=sentence or "", description="Sentence:", continuous_update=False,
                placeholder="Type a sentence and press Enter",
                style={"description_width": "initial"}, layout=widgets.Layout(width="100%", max_width="640px"),
            )
            self.text.observe(self._on_text, names="value")
            children.append(self.text)
        self.message = widgets.HTML(
            value=("<small>Type a sentence and press Enter to recompute: that needs a running kernel "
                   "(Jupyter, Colab). The slider works everywhere.</small>") if compute is not None else ""
        )
        children += [self.slider_row, view, self.message]
        self.widget = widgets.VBox(children)
        self.widget.add_class("mha-attention-explorer")  # the browser tests find explorers by it

    # -- rendering -------------------------------------------------------------------------
    def _prepare(self, frames: Dict[Hashable, Frame]):
        """Check every frame; return a renderer per value (one shared canvas size and colour range)."""
        s = self._style
        prepared = {}
        for v, fr in frames.items():
            rows, toks, keys = _panels(fr.weights, fr.tokens, fr.key_tokens, layer=fr.layer,
                                       head_labels=fr.head_labels, ncols=s["ncols"])
            prepared[v] = (rows, toks, keys, fr.title)
        all_rows = [row for rows, *_ in prepared.values() for row in rows]
        vmin, vmax = _value_range(all_rows, s["vmin"], s["vmax"])
        sizes = [_layout(rows, toks, keys, s["cell"], title) for rows, toks, keys, title in prepared.values()]
        size = (max(l.width for l in sizes), max(l.height for l in sizes))

        def render(v) -> bytes:
            rows, toks, keys, title = prepared[v]
            return _png(_draw_frame(rows, toks, keys, cmap=s["cmap"], vmin=vmin, vmax=vmax, cell=s["cell"],
                                    title=title, size=size))
        return render

    def _render_all(self, frames: Dict[Hashable, Frame]) -> Dict[Hashable, bytes]:
        render = self._prepare(frames)
        return {v: render(v) for v in frames}

    @property
    def image(self):
        """The Image widget showing the current slider value."""
        return self.images[self.slider.index] if self.stack is not None else self.images[0]

    def _on_index(self, change) -> None:
        i = change["new"]
        if i is None:
            return
        if self.stack is not None:
            if self.stack.selected_index != i:
                self.stack.selected_index = i
            if self.readout.selected_index != i:
                self.readout.selected_index = i
        else:
            self.images[0].value = self.pngs[self.values[i]]  # in place: same widget, new bytes
            self.readout.value = str(self.values[i])

    def _on_text(self, change) -> None:
        self.set_sentence(change["new"])

    def set_sentence(self, sentence: str) -> bool:
        """Recompute every frame for ``sentence`` (needs ``compute``); True when the maps changed.

        The frame on screen is redrawn first, then the others. An empty sentence, or an
        exception from ``compute`` or from rendering, leaves the frames, the slider and the
        text box as they were and explains itself in ``message`` (no exception reaches the
        caller: a reader's typo must not break the page).

        Args:
            sentence: the text to show; ``compute(value, sentence)`` is called once per
                slider value and must return a frame whose weights are (H, L, S) floats.

        Returns:
            True when every frame was recomputed and shown, False when the state was kept.

        Raises:
            ValueError: the explorer was built without ``compute``.
        """
        if self._compute is None:
            raise ValueError("this explorer has no compute callback: pass compute=... to attention_explorer")
        if sentence is not None and not isinstance(sentence, str):
            raise ValueError(f"sentence must be a str, got {type(sentence).__name__}: {sentence!r}")
        sentence = (sentence or "").strip()
        if not sentence:
            self.message.value = "<b>The sentence is empty.</b> Type a few words and press Enter."
            return False
        with self._lock:  # one recompute at a time: calls from several threads queue up
            return self._recompute(sentence)

    def _recompute(self, sentence: str) -> bool:
        self.message.value = f"<small>Computing attention for “{html.escape(sentence)}”…</small>"
        first_value = self.slider.value  # drawn first; the slider may move while we work
        try:
            frames = {v: _as_frame(self._compute(v, sentence), f"compute({v!r}, ...)") for v in self.values}
            render = self._prepare(frames)  # every frame checked before anything changes
            pngs = {first_value: render(first_value)}
        except Exception as err:  # the reader's input is bad; keep their state, say why
            self.message.value = (f"<b>Could not show “{html.escape(sentence)}”:</b> "
                                  f"{html.escape(type(err).__name__)}: {html.escape(str(err))}")
            return False
        # The frame for the value the slider had first, so the reader sees new maps early; it
        # goes into that value's own Image, whatever the slider shows by now.
        self._show(first_value, pngs[first_value])
        for v in self.values:
            if v not in pngs:
                pngs[v] = render(v)
        self.pngs = {v: pngs[v] for v in self.values}
        self.sentence = sentence
        for v in self.values:  # every frame, then (ipywidgets 7) the one the slider shows NOW
            self._show(v, self.pngs[v])
        if self.stack is None:
            self.images[0].value = self.pngs[self.slider.value]
        self.message.value = f"<small>Showing “{html.escape(sentence)}”.</small>"
        return True

    def _show(self, value, png: bytes) -> None:
        """Put a frame's PNG into the Image that shows ``value`` (ipywidgets 7: only if on screen)."""
        if self.stack is not None:
            self.images[self.values.index(value)].value = png
        elif self.slider.value == value:
            self.images[0].value = png

    # -- display ---------------------------------------------------------------------------
    def __repr__(self) -> str:
        values = ", ".join(str(v) for v in self.values)
        mode = "Stack + jslink" if self.stack is not None else "one Image, kernel updates"
        return f"AttentionExplorer({self.description or 'value'}: {values}; {mode})"

    def _repr_mimebundle_(self, include=None, exclude=None):
        # ipywidgets 8: the widget view, with a short text/plain (the VBox repr would dump
        # every child, PNG bytes included, into the notebook).
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        if isinstance(bundle, dict):
            bundle = dict(bundle, **{"text/plain": repr(self)})
        return bundle

    def _ipython_display_(self, **kwargs):
        from IPython.display import display

        if hasattr(self.widget, "_repr_mimebundle_"):  # ipywidgets 8
            display(self._repr_mimebundle_(), raw=True)
        else:  # ipywidgets 7 displays itself
            display(self.widget)


def attention_explorer(
    frames: Mapping[Hashable, Any],
    *,
    description: str = "",
    compute: Optional[Callable[[Any, str], Any]] = None,
    sentence: Optional[str] = None,
    value: Any = None,
    cmap: str = DEFAULT_CMAP,
    vmin: float = 0.0,
    vmax: Optional[float] = None,
    cell: Optional[int] = None,
    ncols: Optional[int] = None,
    continuous_update: bool = True,
    end_labels: Optional[Tuple[str, str]] = None,
) -> AttentionExplorer:
    """A slider that flips between attention maps, live in a kernel and in the static book.

    Every frame is rendered up front to a PNG (:func:`render_heads_png`, one shared colour
    range and canvas size, so frames compare fairly and the page does not jump):

    * ipywidgets 8: the frames sit in an ``ipywidgets.Stack`` whose ``selected_index`` is
      ``jslink``-ed to the slider's ``index``. The browser switches frames by itself, so the
      slider works in the static HTML book, where no kernel runs. Nothing is re-created
      when the slider moves: no stacked figures, no flicker.
    * ipywidgets 7 (no ``Stack``, e.g. older Colab): one ``Image``, whose bytes the kernel
      replaces in place from ``.observe`` on the slider.

    The slider's row reads ``description  value  first ━━●━━ last``: its name, the value
    shown now (switched in the browser like the frames), and a label at each end of the
    track, so the reader sees which way the values run. The book's script (``_static/
    mha_book.js``) gives the slider handle that name and value as ``aria-label`` and
    ``aria-valuetext``.

    With ``compute``, a text box recomputes every frame for a sentence the reader types
    (needs a kernel); an empty sentence or a failing ``compute`` shows a message and keeps
    the current maps.

    Args:
        frames: ``{slider value: frame}``, in slider order (left to right). A frame is a
            :class:`Frame`, a dict of its fields, or a ``(weights, tokens)`` tuple; weights (H, L, S),
            (layers, H, L, S) or per-layer, as for :func:`plot_heads`.
        description: slider label, e.g. ``"heads"`` or ``"layer"``.
        compute: optional ``compute(value, sentence) -> frame`` for a typed sentence; called
            once per slider value (memoise a shared forward pass, e.g. with lru_cache).
        sentence: the sentence the initial frames show (pre-fills the text box).
        value: initial slider value (default: the first key).
        cmap, vmin, vmax: colours; ``vmax=None``: the largest weight over all frames.
        cell: pixels per attention entry (default: about 176 px per panel).
        ncols: heads per row for one-layer frames.
        continuous_update: update while dragging (True) or on release.
        end_labels: the text at the left and right ends of the slider (default: the first and
            last keys), e.g. ``("all 72 heads", "7")``. Give the keys in the order a reader
            expects, usually increasing to the right.

    Returns:
        an :class:`AttentionExplorer`; display it (last line of a cell) to show the control.

    Raises:
        ValueError: empty ``frames``, a ``value`` not in ``frames``, a non-callable
            ``compute``, an unknown ``cmap``, ``end_labels`` that are not two strings, or a
            frame :func:`plot_heads` would reject.

    Example -- a head-count slider over models with 1, 2, 4 and 8 heads, and a layer slider
    over a pretrained encoder that recomputes for a typed sentence::

        frames = {h: (weights_of[h][0], tokens) for h in (1, 2, 4, 8)}   # (H, L, L) each
        attention_explorer(frames, description="heads")

        model, tokenizer = mha_lib.pretrained.load_bert()

        @functools.lru_cache(maxsize=4)
        def run(sentence):                      # one forward pass serves all 6 layers
            out, batch = model.encode_text([sentence], output_attentions=True)
            return out.attentions, batch.tokens[0]

        def compute(layer, sentence):
            attentions, tokens = run(sentence)
            return Frame(attentions[layer][0], tokens, layer=layer, title=f"layer {layer}")

        attentions, tokens = run("The cat sat on the mat.")
        attention_explorer(layer_frames(attentions, tokens), description="layer",
                           compute=compute, sentence="The cat sat on the mat.")
    """
    return AttentionExplorer(frames, description=description, compute=compute, sentence=sentence, value=value,
                             cmap=cmap, vmin=vmin, vmax=vmax, cell=cell, ncols=ncols,
                             continuous_update=continuous_update, end_labels=end_labels)


# ---------------------------------------------------------------------------------------------
# bertviz adapter
# ---------------------------------------------------------------------------------------------

# What bertviz 1.4 loads from cdnjs; the book can point these at its own copies by setting
# window.mhaLibScripts = {require: URL, paths: {d3: URL-without-.js, jquery: ...}} before.
_CDN_REQUIRE = "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"
_CDN_PATHS = {
    "d3": "https://cdnjs.cloudflare.com/ajax/libs/d3/5.7.0/d3.min",
    "jquery": "https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.0/jquery.min",
}
_REQUIRE_CONFIG = re.compile(r"require\.config\(\{\s*paths:\s*\{[^}]*\}\s*\}\);")
_BERTVIZ_ID = re.compile(r"bertviz-[0-9a-f]{32}")
_view_counter = itertools.count()

# Runs bertviz's script once require.js is there: loads it when missing (JupyterLab, VS Code,
# Colab and the book have no global `require`; bertviz's own `<script src>` + inline script
# races and fails there with "require is not defined"). In a page still loading, waits for
# `load`, so that require's global `define` cannot confuse other scripts of the page.
_LOADER = """
(function () {
  var cfg = window.mhaLibScripts || {};
  var requireUrl = cfg.require || %(require)s;
  var mhaPaths = Object.assign(%(paths)s, cfg.paths || {});
  function run() {
%(body)s
  }
  function whenRequire(cb) {
    if (typeof window.requirejs === "function") { cb(); return; }
    if (!window.__mhaRequireLoading) {
      window.__mhaRequireLoading = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = requireUrl; s.onload = resolve; s.onerror = reject;
        document.head.appendChild(s);
      });
    }
    window.__mhaRequireLoading.then(cb);
  }
  function start() { whenRequire(run); }
  if (document.readyState === "complete") { start(); } else { window.addEventListener("load", start); }
})();
"""


def _bertviz_layers(weights: Any, tokens: Sequence[str]) -> Tuple[list, List[str]]:
    """Checked per-layer float64 torch tensors (1, H, L, L), rounded to 4 decimals, and tokens."""
    import torch

    if weights is None:
        raise ValueError("no attentions (weights is None): run the model with output_attentions=True "
                         "(mha_lib.MultiHeadAttention: need_weights=True)")
    if isinstance(weights, (list, tuple)):
        layers = list(weights)
        if len(layers) == 0:
            raise ValueError("no attentions (an empty sequence): run the model with output_attentions=True")
        if any(w is None for w in layers):
            raise ValueError("no attentions (a layer returned None): run the model with output_attentions=True")
    else:
        arr = weights
        ndim = len(arr.shape)
        if ndim == 3:
            layers = [arr[None]]
        elif ndim == 4:
            layers = [arr[i][None] for i in range(arr.shape[0])]
        else:
            raise ValueError(f"weights must be per-layer (1, H, L, L) tensors or (layers, H, L, L); "
                             f"got shape {tuple(arr.shape)}")
    out = []
    for i, w in enumerate(layers):
        a = _to_numpy(w, f"weights[{i}]")
        if a.ndim == 3:
            a = a[None]
        if a.ndim != 4:
            raise ValueError(f"weights[{i}] has shape {tuple(a.shape)}; bertviz needs (1, H, L, L) per layer")
        if a.shape[0] != 1:
            raise ValueError(f"bertviz shows one sequence, but weights[{i}] has batch size {a.shape[0]} "
                             f"(shape {tuple(a.shape)}); select one, e.g. [w[b:b + 1] for w in attentions]")
        if a.shape[2] != a.shape[3]:
            raise ValueError(f"weights[{i}] has L={a.shape[2]} queries and S={a.shape[3]} keys; "
                             "bertviz's self-attention views need L == S")
        _check_finite(a, f"weights[{i}]")
        out.append(a)
    heads = [a.shape[1] for a in out]
    if len(set(heads)) != 1:
        raise ValueError(f"bertviz needs the same number of heads in every layer; got {heads} (pruned heads?)")
    if heads[0] == 0:
        raise ValueError("the weights have 0 heads: nothing to show")
    lengths = {a.shape[2] for a in out}
    if len(lengths) != 1:
        raise ValueError(f"layers disagree on the sequence length: {sorted(lengths)}")
    n = lengths.pop()
    if isinstance(tokens, str) or tokens is None:
        raise ValueError("tokens must be a list of token strings")
    # A label is one line: control characters (a "\n" in a token) are shown escaped, as Python
    # writes them, instead of reaching the text renderer.
    tokens = ["".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in str(t))
              for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"tokens has {len(tokens)} entries but the attention covers {n} positions; "
                         "pass the tokens of the same (unpadded) sequence")
    # rounding keeps the page small; float64 keeps the JSON short (0.1234, not 0.12340000271797)
    return [torch.from_numpy(np.round(a, 4)) for a in out], tokens


def _checked_indices(name: str, values: Any, n: int, what: str) -> List[int]:
    """A list of ints in [0, n), or a ValueError naming ``name`` and the bad values."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list of ints, got {values!r}")
    values = list(values)
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in values):
        raise ValueError(f"{name} must be a list of ints, got {values!r}")
    bad = [int(v) for v in values if not 0 <= v < n]
    if bad:
        raise ValueError(f"{name} {bad} out of range: the weights have {n} {what} (0 to {n - 1})")
    return [int(v) for v in values]


def bertviz_view(
    weights: Any,
    tokens: Sequence[str],
    kind: str = "head",
    *,
    layer: Optional[int] = None,
    heads: Optional[Sequence[int]] = None,
    include_layers: Optional[Sequence[int]] = None,
    display: bool = False,
):
    """bertviz's head view or model view (Vig 2019) of mha_lib attention weights, batch 1.

    The HTML differs from bertviz's own, so that it works in more places:
    it loads require.js itself when the page has none (JupyterLab, VS Code, Colab and the
    book, where bertviz's plain display fails with "require is not defined"); it takes its
    script URLs from ``window.mhaLibScripts`` when a page sets it (the book serves its own
    copies) and from bertviz's CDN otherwise; and its element id is derived from the data,
    not a random uuid, so re-running a notebook gives the same output. And it reads well in a
    narrow column: the head view gives each of 12 heads its own colour (:data:`HEAD_COLOURS`,
    where bertviz repeats its 10) and writes the head number on each colour swatch; the model
    view is laid out as wide as its box (320 to 970 px, where bertviz always draws 970 px), so
    every head is in view on a laptop or a phone.

    Args:
        weights: a sequence of per-layer (1, H, L, L) tensors (``output_attentions=True``),
            or a (layers, H, L, L) / (H, L, L) tensor or array. Same H in every layer. A 4-D
            tensor is ALWAYS read as (layers, H, L, L): the (B, H, L, L) weights of one
            batched layer must be indexed first, ``weights[b]``, or each batch row would be
            shown as a layer.
        tokens: the L token strings.
        kind: ``"head"`` (one layer, lines between tokens) or ``"model"`` (every layer x head).
        layer, heads: head view only: the layer and heads selected at first (0-based ints,
            in range).
        include_layers: layers to include, 0-based ints in range (default all).
        display: show it now (IPython ``display``) and return None.

    Returns:
        ``IPython.display.HTML`` (displayed when it is the last line of a cell), or None
        when ``display=True``.

    Raises:
        ValueError: no attentions, a batch above 1, L != S, a token count that is not L,
            ragged head counts, non-finite weights, an unknown ``kind``, or a ``layer``,
            ``heads`` or ``include_layers`` entry out of range (naming it).
        ImportError: bertviz missing (``pip install "mha_lib[viz]"``).
    """
    if kind not in ("head", "model"):
        raise ValueError(f"kind must be 'head' or 'model', got {kind!r}")
    layers, tokens = _bertviz_layers(weights, tokens)
    try:
        from bertviz import head_view, model_view
    except ImportError as err:
        raise ImportError(f"bertviz_view needs bertviz: {_EXTRA_HINT}") from err
    from IPython.display import HTML
    from IPython.display import display as ipy_display

    n_layers, n_heads = len(layers), layers[0].shape[1]
    if include_layers is not None:
        include_layers = _checked_indices("include_layers", include_layers, n_layers, "layers")
    if heads is not None:
        heads = _checked_indices("heads", heads, n_heads, "heads per layer")
    if kind == "head":
        if layer is not None:
            layer = checks.as_int(layer, "layer")
        if layer is not None and not 0 <= layer < len(layers):
            raise ValueError(f"layer {layer} is out of range for {len(layers)} layers")
        raw = head_view(layers, tokens, layer=layer, heads=list(heads) if heads is not None else None,
                        include_layers=list(include_layers) if include_layers is not None else None,
                        html_action="return").data
    else:
        if layer is not None or heads is not None:
            raise ValueError("layer and heads apply to kind='head' only")
        raw = model_view(layers, tokens, include_layers=list(include_layers) if include_layers is not None else None,
                         html_action="return").data
    page = _portable_bertviz_html(raw, kind, layers, tokens)
    if display:
        ipy_display(HTML(page))
        return None
    return HTML(page)


# The head view's head colours. bertviz cycles d3.schemeCategory10, so in a 12-head layer heads 0
# and 10, and 1 and 11, look the same. These are the first 12 colours of colorcet's
# glasbey_category10: category10, then the colours farthest from every colour already chosen
# (Glasbey et al. 2007, "Colour displays for categorical images"). A 13th head reuses colour 0;
# the number on its swatch still tells it apart.
HEAD_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#3a0183", "#004301")

# The head view: head i gets HEAD_COLOURS[i]; each colour swatch shows its head number, in black
# or white, whichever contrasts more with the swatch (WCAG relative luminance), and a tooltip.
_HEAD_NUMBERS = """.attr("height", CHECKBOX_SIZE);
        // mha_lib: the head number on each swatch, and a tooltip
        checkbox.append("title").text((d, i) => "head " + i);
        checkboxContainer.selectAll("text").data(config.headVis).enter().append("text")
            .text((d, i) => i)
            .attr("x", (d, i) => (i + 0.5) * CHECKBOX_SIZE)
            .attr("y", top + CHECKBOX_SIZE / 2)
            .attr("dy", "0.35em")
            .attr("text-anchor", "middle")
            .attr("font-size", "11px")
            .style("pointer-events", "none")
            .style("user-select", "none");
        function mhaInk(colour) {
            const c = d3.rgb(colour);
            const lin = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
            return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b) > 0.179 ? "#000" : "#fff";
        }"""
_HEAD_NUMBER_INK = """.attr("fill", (d, i) => d ? headColors(i): lighten(headColors(i)));
            checkboxContainer.selectAll("text").data(config.headVis)
                .attr("fill", (d, i) => mhaInk(d ? headColors(i) : lighten(headColors(i))));"""

# The model view: bertviz draws it 970 px wide, which a book column (688 px on a laptop, 358 px
# on a phone) cuts off. It is laid out as wide as its box at drawing time instead (320 to 970 px;
# 970 when the box has no width yet, e.g. hidden), with a viewBox so that it scales if the box
# changes later; the detail panel of a clicked head stays inside the view.
_MODEL_WIDTH = """const DIV_WIDTH = (function () {  // mha_lib: as wide as its box, 320 to 970 px
            const root = document.getElementById(params['root_div_id']);
            const width = root ? Math.floor(root.getBoundingClientRect().width) : 0;
            return width >= 320 ? Math.min(970, width) : 970;
        })();"""

# (kind, bertviz's text, replacement): each must occur exactly once (bertviz 1.4's head_view.js
# and model_view.js); a missing one raises instead of silently showing bertviz's layout.
_BERTVIZ_PATCHES = (
    ("head", "d3.scaleOrdinal(d3.schemeCategory10)",
     "(function (i) { const c = %s; return c[(+i) %% c.length]; })" % json.dumps(list(HEAD_COLOURS))),
    ("head", '.attr("height", CHECKBOX_SIZE);', _HEAD_NUMBERS),
    ("head", '.attr("fill", (d, i) => d ? headColors(i): lighten(headColors(i)));', _HEAD_NUMBER_INK),
    ("model", "const DIV_WIDTH = 970;", _MODEL_WIDTH),
    ("model", '.attr("width", DIV_WIDTH)',
     '.attr("width", DIV_WIDTH)\n                .attr("viewBox", "0 0 " + DIV_WIDTH + " " + config.divHeight)'),
    ("model", "var posLeftText = x;",
     "x = Math.max(MIN_X, Math.min(x, maxX - DETAIL_WIDTH));  // mha_lib: inside a narrow view\n"
     "            var posLeftText = x;"),
)


def _patch_bertviz_js(body: str, kind: str) -> str:
    """Apply :data:`_BERTVIZ_PATCHES` for ``kind`` ("head" or "model") to bertviz's script."""
    for patch_kind, old, new in _BERTVIZ_PATCHES:
        if patch_kind != kind:
            continue
        if body.count(old) != 1:
            raise RuntimeError(f"bertviz's {kind} view script has {body.count(old)} copies of {old!r}, "
                               "expected 1; mha_lib.viz supports bertviz 1.4")
        body = body.replace(old, new)
    return body


# bertviz writes its params (tokens included) on this line, twice: as code and in a comment.
_PARAMS = re.compile(r"(const params = )([^\n]*)")


def _escape_script_json(body: str) -> str:
    """Escape ``<``, ``>`` and ``&`` in the JSON line bertviz writes into its ``<script>`` (tokens come
    from readers' text): a token ``</script><script>...`` must not end the tag (cases.md 20).
    ``\u003c`` is the same character to JavaScript, so the view shows the token as it was."""
    match = _PARAMS.search(body)
    if match is None:
        raise RuntimeError("bertviz's params literal was not found; mha_lib.viz supports bertviz 1.4")
    params = match.group(2)
    for char, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                       ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        params = params.replace(char, code)
    return body[: match.start(2)] + params + body[match.end(2):]


def _portable_bertviz_html(raw: str, kind: str, layers: list, tokens: List[str]) -> str:
    # The id comes from what the view shows (kind, tokens, shapes), never from the weights' float
    # bytes, which differ in the last bit between CPUs; the counter keeps two views apart.
    digest = hashlib.sha1(json.dumps([kind, tokens, [list(a.shape) for a in layers]]).encode())
    view_id = f"bertviz-{kind}-{digest.hexdigest()[:12]}-{next(_view_counter)}"
    raw = _BERTVIZ_ID.sub(view_id, raw)
    raw = re.sub(r'<script src="[^"]*require(\.min)?\.js"></script>', "", raw, count=1)
    opening = '<script type="text/javascript">'
    start = raw.rfind(opening)
    end = raw.rfind("</script>")
    if start < 0 or end < start:
        raise RuntimeError("unexpected bertviz HTML layout; mha_lib.viz supports bertviz 1.4")
    markup, body = raw[:start], raw[start + len(opening):end]
    body = _escape_script_json(body)
    body = _patch_bertviz_js(body, kind)
    body, n = _REQUIRE_CONFIG.subn("require.config({paths: mhaPaths});", body, count=1)
    if n != 1:
        raise RuntimeError("bertviz's require.config block was not found; mha_lib.viz supports bertviz 1.4")
    script = _LOADER % {"require": json.dumps(_CDN_REQUIRE), "paths": json.dumps(_CDN_PATHS), "body": body}
    return markup.strip() + '\n<script type="text/javascript">' + script + "</script>\n"
