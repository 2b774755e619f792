"""The same grid as PNG bytes (:func:`render_heads_png`), drawn from a colormapped array with
Pillow (no matplotlib Axes), fast enough to redraw while a slider moves.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from ._extras import ImageDraw, ImageFont, PILImage, matplotlib
from .panels import DEFAULT_CMAP, _check_cell, _panels, _value_range


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
