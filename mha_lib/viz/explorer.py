"""The attention explorer: an ipywidgets slider over precomputed frames.

It works with a live kernel (``.observe`` updates one image) AND in the static HTML book (one
image per slider value in an ``ipywidgets.Stack``, the slider ``jslink``-ed to it; ipywidgets 7,
without Stack, is feature-detected).
"""
from __future__ import annotations

import html
import numbers
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Hashable, Mapping, Optional, Sequence, Tuple

import numpy as np

from ._extras import widgets
from .panels import DEFAULT_CMAP, _check_cell, _check_colour_limits, _panels, _value_range
from .png import _draw_frame, _layout, _lut, _png


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

    Raises:
        ValueError: empty ``frames``, a ``compute`` that is not callable, a starting value that is
            not a frame key, a frame that is not a ``Frame``, a dict of its fields or a ``(weights,
            tokens)`` tuple, a bad ``cell`` or a non-finite ``vmin``/``vmax`` (each naming the value).
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
