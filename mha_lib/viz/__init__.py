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
* :func:`bilingual_figures` -- the book's build: every matplotlib figure also drawn with Chinese labels
  (``bilingual.py``); :func:`keep_text` marks tick labels or texts that are data (tokens), never translated.

Shapes (as everywhere in mha_lib):
    H heads, L query positions, S key positions, ``layers`` layers.
    One layer: (H, L, S). Several layers: (layers, H, L, S), or a sequence of per-layer
    tensors (H_l, L, S) / (1, H_l, L, S) -- ragged when heads were pruned, which is how
    :func:`mha_lib.pretrained.load_bert` models return them.
    Weights may be torch tensors (any device, any float dtype) or NumPy arrays.

The files: ``panels.py`` (input checks, the panels every picture draws), ``figure.py``
(:func:`plot_heads`), ``png.py`` (:func:`render_heads_png`), ``explorer.py``
(:func:`attention_explorer`), ``bertviz_adapter.py`` (:func:`bertviz_view`); ``_extras.py``
imports the extra. A new view of a chapter goes in the file of its kind, or a new file here.

Needs the ``viz`` extra: ``pip install "mha_lib[viz]"`` (matplotlib, ipywidgets >= 7, anywidget,
Pillow); :func:`bertviz_view` also needs bertviz, its own extra: ``pip install "mha_lib[bertviz]"``.
"""
from __future__ import annotations

from ._extras import _EXTRA_HINT  # noqa: F401  (first: a missing extra names the pip install)
from .bertviz_adapter import HEAD_COLOURS, bertviz_view
from .bilingual import LabelCatalog, bilingual_figures, draw_in_chinese, keep_text
from .explorer import AttentionExplorer, Frame, attention_explorer, layer_frames
from .figure import HeadsFigure, plot_heads
from .panels import DEFAULT_CMAP
from .png import render_heads_png

__all__ = [
    "plot_heads",
    "HeadsFigure",
    "render_heads_png",
    "Frame",
    "layer_frames",
    "AttentionExplorer",
    "attention_explorer",
    "bertviz_view",
    "bilingual_figures",
    "keep_text",
    "draw_in_chinese",
    "LabelCatalog",
]
