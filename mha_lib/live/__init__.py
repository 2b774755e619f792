"""Live views: attention maps recomputed as the reader acts, in the book's pages and in a kernel.

A live view is one HTML element, ``<div class="mha-live-view" data-view=... data-model=...
data-config=...>``, holding a static fallback figure. In the built book, ``_static/mha_book.js``
finds it and imports ``_static/live/mha_live.mjs`` (the source is ``mha_lib/web/mha_live.mjs``),
which draws the maps on canvas from the numbers in ``data-config`` -- computed here, by mha_lib,
when the notebook ran -- and loads the ONNX model (:mod:`mha_lib.export`, written to
``_static/models/`` by ``tools/export_site_models.py``) only at the reader's first action: the
reader's browser recomputes the maps (onnxruntime-web). MiniLM's file holds float16 weights
without its token table; the page fetches the rows of each text's tokens from
``_static/models/all-MiniLM-L6-v2.rows/`` (:func:`mha_lib.export.split_for_web`).

In a kernel (Jupyter, Colab, VS Code) with ``anywidget`` installed (the ``viz`` extra), the same
output is also a widget, :class:`LiveWidget`: its ES module is the book's modules of
``mha_lib/web/`` joined in the order of :data:`WIDGET_MODULES` (:func:`widget_esm`), the view
looks the same, and the kernel computes the maps -- the module sends
the model's inputs (token ids, token types, padding mask, head mask) as a widget message and
:meth:`KernelRunner.answer` runs mha_lib's own model on them (all-MiniLM-L6-v2 from
:func:`mha_lib.pretrained.load_bert`, the toy models from :func:`mha_lib.tasks.load_trained`).
:meth:`LiveView._repr_mimebundle_` gives both: ``text/html`` (the element, which the static book
shows; ``_config.yml`` makes the html builder prefer it) and the widget's view. Without anywidget,
or outside a kernel, it is ``text/html`` only; where no script runs, the fallback figure shows.

Three views (``data-view``):

* ``"sentence"`` -- all-MiniLM-L6-v2 on a sentence the reader types, every head of a layer
  (:func:`sentence_config`);
* ``"toy-compare"`` -- chapter 1's task (:class:`~mha_lib.tasks.PrevMarkedTask`) read by the 1-,
  2-, 4- and 8-head models side by side; the reader edits the tokens and moves the mark
  (:func:`toy_compare_config`);
* ``"prune"`` -- MiniLM with head toggles: embedding fidelity and paraphrase ranking against the
  unpruned model, and one sentence's maps (:func:`prune_config`).

Usage in a chapter cell::

    from mha_lib import live
    config = live.sentence_config(bert, "The animal didn't cross the street because it was too tired.")
    live.live_view("sentence", "all-MiniLM-L6-v2", config, fallback=fig, alt=fig.alt_text)

Safety: the configuration is JSON inside an HTML attribute, escaped with ``html.escape`` (``<``,
``>``, ``&``, both quotes), so no text -- a reader's or the data's -- can end the attribute or
open a tag; the module shows every text with ``textContent``. Numbers are rounded to 4 decimals
to keep pages small; NaN and infinity are refused.
"""
from __future__ import annotations

import base64
import functools
import html
import json
import math
import re
from importlib import resources
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from .. import checks
from .. import tasks
from .. import tasks as T
from ..model import TokenClassifier
from ..pretrained import BertEncoder, load_bert

__all__ = ["VIEWS", "LiveView", "live_view", "sentence_config", "toy_compare_config", "prune_config",
           "paraphrase_scores", "DECIMALS", "KernelRunner", "widget_esm", "MAX_KERNEL_ROWS", "MAX_KERNEL_TOKENS"]

#: The kinds of live view that ``mha_lib/web/mha_live.mjs`` draws.
VIEWS = ("sentence", "toy-compare", "prune")
#: Decimals kept for every float of a configuration (attention weights: 1e-4 is below what a
#: colour shows, and the readout prints 3 decimals).
DECIMALS = 4
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # a file stem under _static/models/
MINILM_ID = "all-MiniLM-L6-v2"


_MAX_SAFE_INTEGER = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER


def _check_utf8(text: str, where: str) -> str:
    """``text`` if it can be written as UTF-8 (no lone surrogate, e.g. ``"\\ud800"``); ValueError otherwise."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{where} holds {text[err.start:err.end]!r} at index {err.start}, a lone surrogate: "
                         "not a character, it cannot be written as UTF-8") from None
    return text


def _rounded(value: Any, where: str) -> Any:
    """A JSON-able copy of ``value`` with floats rounded to :data:`DECIMALS` (tensors -> lists)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().tolist()
    elif hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy arrays and scalars
        value = value.tolist()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return _check_utf8(value, where)
    if isinstance(value, int):
        if abs(value) > _MAX_SAFE_INTEGER:
            raise ValueError(f"{where} holds the integer {value!r:.60}, beyond 2**53 - 1: a browser's JSON.parse "
                             "would change it (or make it Infinity)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} holds a non-finite number ({value!r}): the config must be finite")
        r = round(value, DECIMALS)
        return 0.0 if r == 0 else r  # no "-0.0"
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{where}: keys must be str, got {k!r}")
            _check_utf8(k, f"{where}: key")
            out[k] = _rounded(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [_rounded(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise ValueError(f"{where} holds a {type(value).__name__} ({value!r:.60}): only numbers, str, bool, None, "
                     "lists, dicts and tensors go into a live view's config")


WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


class LiveView:
    """One live view; a notebook cell that returns it shows it.

    Its MIME bundle (:meth:`_repr_mimebundle_`) holds ``text/html`` (the element; the built book
    shows it) and, in a kernel with ``anywidget`` installed, the view of a :class:`LiveWidget`
    (Jupyter and Colab show that: the kernel computes the maps).

    Attributes:
        view: one of :data:`VIEWS`.
        model: the model id (a file stem under ``_static/models/``).
        config: the rounded, JSON-able configuration (a dict).
        html: the element, ``<div class="mha-live-view" ...>`` with the fallback inside.
        fallback_src: the fallback figure as a ``data:image/png;base64,...`` URL, or "".
        alt, caption: the fallback's alt text and the caption ("" when none).
    """

    def __init__(self, view: str, model: str, config: dict, html_text: str, *, fallback_src: str = "",
                 alt: str = "", caption: str = ""):
        self.view, self.model, self.config, self.html = view, model, config, html_text
        self.fallback_src, self.alt, self.caption = fallback_src, alt, caption
        self._widget = None

    def _repr_html_(self) -> str:
        return self.html

    def widget(self):
        """The :class:`LiveWidget` of this view, made on the first call.

        Returns:
            the widget, or None when ``anywidget`` is not installed (the view is then HTML only).
        """
        if self._widget is None:
            cls = _widget_class()
            if cls is None:
                return None
            self._widget = cls(self)
        return self._widget

    def _repr_mimebundle_(self, include=None, exclude=None):
        """``text/plain``, ``text/html`` and, in a kernel with anywidget, the widget's view.

        Returns:
            ``{mime type: data}``, or ``(data, metadata)`` with the widget (anywidget's metadata:
            in Colab, its custom widget manager).
        """
        data = {"text/plain": repr(self), "text/html": self.html}
        widget = self.widget() if _in_kernel() else None
        if widget is None:
            return data
        bundle = widget._repr_mimebundle_()
        view_data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        data[WIDGET_VIEW_MIME] = view_data[WIDGET_VIEW_MIME]
        return data, metadata

    def __repr__(self) -> str:
        return f"LiveView(view={self.view!r}, model={self.model!r})"


def live_view(view: str, model: str, config: Mapping[str, Any], *, fallback: Any = None,
              alt: Optional[str] = None, caption: Optional[str] = None) -> LiveView:
    """Write the HTML element of a live view (see the module docstring).

    Args:
        view: ``"sentence"``, ``"toy-compare"`` or ``"prune"`` (:data:`VIEWS`).
        model: the model id the view runs, e.g. ``"all-MiniLM-L6-v2"`` or ``"ch1-h1"`` (the first
            of a toy-compare's models): letters, digits, ``_ . -``.
        config: the view's configuration, from :func:`sentence_config`,
            :func:`toy_compare_config` or :func:`prune_config` (a dict of numbers, strings,
            lists and tensors; floats are rounded to 4 decimals).
        fallback: the static figure shown where the view cannot run: PNG bytes, or an object
            with ``to_png()`` (a :class:`mha_lib.viz.HeadsFigure`), or None.
        alt: the fallback's alt text; required with a fallback (default: the figure's
            ``alt_text`` when it has one).
        caption: optional text under the view.

    Returns:
        a :class:`LiveView`: ``text/html`` (``_repr_html_``), and in a kernel with anywidget also
        a :class:`LiveWidget` view (``_repr_mimebundle_``), which the kernel computes.

    Raises:
        ValueError: an unknown ``view``; a ``model`` that is not a plain id, or not the view's
            (``"sentence"`` and ``"prune"`` run all-MiniLM-L6-v2; a ``"toy-compare"`` model must
            be one of ``config["models"]``); a ``config`` that is not a dict, holds NaN/inf, an
            integer beyond 2**53 - 1, a str with a lone surrogate or other objects, or lacks
            what the view draws (``mha_lib/web/view_contract.json``, which the page checks too: tokens
            and [layer][head][query][key] maps of one row per token, ...; the message names the
            key path); a ``fallback`` that is not PNG, or a fallback without alt text.
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    if not isinstance(model, str) or not _MODEL_ID.fullmatch(model):
        raise ValueError(f"model must be a model id (letters, digits, '_', '.', '-'), got {model!r}")
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict, got {type(config).__name__}")
    data = _rounded(dict(config), "config")
    _check_config(view, model, data)
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    figure = ""
    if fallback is not None:
        if alt is None:
            alt = getattr(fallback, "alt_text", None)
        png = fallback.to_png() if hasattr(fallback, "to_png") else fallback
        if not isinstance(png, (bytes, bytearray)) or not bytes(png[:8]) == b"\x89PNG\r\n\x1a\n":
            raise ValueError(f"fallback must be PNG bytes or have to_png(), got {type(fallback).__name__}")
        if not isinstance(alt, str) or not alt.strip():
            raise ValueError(f"a fallback figure needs alt text (alt=...), got {alt!r}")
        src = "data:image/png;base64," + base64.b64encode(bytes(png)).decode("ascii")
        figure = (f'<img class="mha-live-fallback" src="{src}" alt="{html.escape(alt, quote=True)}" '
                  'style="max-width:100%;height:auto">')
    elif alt is not None:
        raise ValueError("alt is given but there is no fallback figure")
    if caption is not None and not isinstance(caption, str):
        raise ValueError(f"caption must be a str, got {type(caption).__name__}")
    note = ('<p class="mha-live-noscript">This figure is live where JavaScript and WebAssembly SIMD run (the book\'s '
            "web pages in a recent Chrome, Edge, Firefox or Safari): your browser recomputes it. Here it shows what "
            "the notebook computed; run the cell in Jupyter or Colab (with anywidget) and the kernel recomputes "
            "it.</p>")
    cap = f'<p class="mha-live-caption">{html.escape(caption)}</p>' if caption else ""
    markup = (f'<div class="mha-live-view" data-view="{view}" data-model="{model}" '
              f'data-config="{html.escape(payload, quote=True)}">{figure}{note}{cap}</div>')
    return LiveView(view, model, data, markup, fallback_src=src if fallback is not None else "",
                    alt=alt or "", caption=caption or "")


@functools.lru_cache(maxsize=1)
def view_contract() -> dict:
    """``mha_lib/web/view_contract.json``: per view, the keys its drawing reads and their shapes.

    The one description of a view's configuration: :func:`_check_config` here and ``checkConfig`` of
    ``mha_lib/web/contract.mjs`` (the page) both read it, and word their refusals alike.
    """
    return json.loads((resources.files("mha_lib") / "web" / "view_contract.json").read_text(encoding="utf-8"))


def _size_of(spec, config: dict) -> int:
    """A size of the contract: a number, a key (its length, or its integer value) or ``"N*key"``."""
    if isinstance(spec, int):
        return spec
    factor, _, key = spec.rpartition("*")
    value = config[key]
    return int(factor or 1) * (len(value) if isinstance(value, list) else int(value))


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_integer(v) -> bool:
    """An integer as the page's JSON.parse reads it (``2.0`` is the number 2 there)."""
    return _is_number(v) and float(v).is_integer()


def _quoted(values) -> str:
    return ", ".join(json.dumps(x, ensure_ascii=False) for x in values)


def _check_rule(value, rule: dict, path: str, config: dict, fail) -> None:
    """``value`` (at ``path``, e.g. ``'texts'[3]``) against a rule of the contract; as ``checkRule`` in contract.mjs."""

    def must(ok: bool, what: str) -> None:
        if not ok:
            fail(f"{path} must be {what}, got {value!r:.80}")

    kind = rule["type"]
    if kind == "str":
        must(isinstance(value, str), "a string")
    elif kind == "number":
        must(_is_number(value), "a number")
    elif kind == "int":
        bounds, ok = [], _is_integer(value)
        if "min" in rule:
            bounds.append(f">= {rule['min']}")
            ok = ok and value >= rule["min"]
        if "below" in rule:
            top = _size_of(rule["below"], config)
            bounds.append(f"< {top} (the length of '{rule['below']}')")
            ok = ok and value < top
        must(ok, "an integer" + (" " + " and ".join(bounds) if bounds else ""))
    elif kind == "enum":
        must(any(value == x and isinstance(value, bool) == isinstance(x, bool)
                 and isinstance(value, str) == isinstance(x, str) for x in rule["values"]),
             f"one of {_quoted(rule['values'])}")
    elif kind == "object":
        must(isinstance(value, dict), "an object")
        for key, inner in rule.get("keys", {}).items():
            if not (inner.get("optional") and key not in value):
                _check_rule(value.get(key), inner, f"{path}[{key!r}]", config, fail)
    elif kind == "list":
        what, ok = "a list", isinstance(value, list)
        if "min_length" in rule:
            n = _size_of(rule["min_length"], config)
            what = "a non-empty list" if n == 1 else f"a list of at least {n} items"
            what += f" ({rule['min_length']})" if isinstance(rule["min_length"], str) else ""
            ok = ok and len(value) >= n
        if "length" in rule:
            n = _size_of(rule["length"], config)
            what = f"a list of {n} items" + (f" ({rule['length']})" if isinstance(rule["length"], str) else "")
            ok = ok and len(value) == n
        must(ok, what)
        for i, v in enumerate(value if "items" in rule else []):
            _check_rule(v, rule["items"], f"{path}[{i}]", config, fail)
    elif kind == "maps":
        n = _size_of(rule["side"], config)
        must(isinstance(value, list) and len(value) > 0, "a non-empty [layer][head][query][key] list")
        for i, layer in enumerate(value):
            if not isinstance(layer, list) or not layer:
                fail(f"{path}[{i}] must be a non-empty list of heads, got {layer!r:.80}")
            for j, m in enumerate(layer):
                if (not isinstance(m, list) or len(m) != n
                        or any(not isinstance(row, list) or len(row) != n for row in m)):
                    fail(f"{path}[{i}][{j}] must be a {n} x {n} map (one row and column per item of "
                         f"'{rule['side']}'), got {m!r:.80}")
    elif kind == "head_mask":
        maps = config[rule["like"]]
        must(isinstance(value, list) and len(value) == len(maps),
             f"a list of {len(maps)} rows, one per layer of '{rule['like']}'")
        for l, row in enumerate(value):
            if not isinstance(row, list) or len(row) != len(maps[l]):
                fail(f"{path}[{l}] must be a list of {len(maps[l])} values, one per head of "
                     f"'{rule['like']}'[{l}], got {row!r:.80}")
            for h, v in enumerate(row):
                if not (isinstance(v, bool) or (_is_number(v) and v in (0, 1))):
                    fail(f"{path}[{l}][{h}] must be 0, 1 or a boolean, got {v!r:.80}")
    elif kind == "per_item":
        must(isinstance(value, dict), "an object")
        for name in config[rule["of"]]:
            _check_rule(value.get(name), rule["value"], f"{path}[{name!r}]", config, fail)
    else:
        raise RuntimeError(f"view_contract.json: unknown rule type {kind!r} at {path}")


def _check_config(view: str, model: str, config: dict) -> None:
    """``config`` (already rounded: lists, dicts, numbers, str) and ``model`` against :func:`view_contract`,
    before the page is written: what ``checkConfig`` of ``mha_lib/web/contract.mjs`` checks, with the
    same words. ValueError naming the key path, e.g. ``'results'['ch1-h1']['attentions'][0][0]``."""

    def fail(what: str):
        raise ValueError(f"config of a {view!r} view: {what}")

    spec = view_contract()["views"][view]
    for key, rule in spec["keys"].items():
        if not (rule.get("optional") and key not in config):
            _check_rule(config.get(key), rule, f"{key!r}", config, fail)
    if "equals" in spec["model"] and model != spec["model"]["equals"]:
        fail(f"model must be {json.dumps(spec['model']['equals'])}, got {model!r}")
    if "one_of" in spec["model"] and model not in config[spec["model"]["one_of"]]:
        key = spec["model"]["one_of"]
        fail(f"model must be one of '{key}' [{_quoted(config[key])}], got {model!r}")


# ----------------------------------------------------------------------------- configurations
def _layers_as_lists(attentions, row: int, n: int) -> list:
    """Per-layer (B, H, L, L) tensors -> [layer][head][query][key] lists of sequence ``row``, cut to n tokens."""
    return [a[row, :, :n, :n].float().tolist() for a in attentions]


def _check_text(text: Any, name: str) -> str:
    """A non-blank str that UTF-8 can write; ValueError naming ``name`` otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a str, got {type(text).__name__}: {text!r:.60}")
    if not text.strip():
        raise ValueError(f"{name} is empty: a live view needs a text to start from")
    return _check_utf8(text, name)


def _check_texts(texts: Any, name: str) -> list:
    """A sequence of texts (not one str) -> a list of checked str; ValueError naming ``name``."""
    bad = ValueError(f"{name} must be a list of str (one text each), got {type(texts).__name__}: {texts!r:.60}")
    if isinstance(texts, (str, bytes, Mapping)) or texts is None:
        raise bad
    try:
        texts = list(texts)
    except TypeError:
        raise bad from None
    for i, t in enumerate(texts):
        _check_text(t, f"{name}[{i}]")
    return texts


def _check_bert(bert: Any) -> None:
    if not isinstance(bert, BertEncoder):
        raise ValueError(f"bert must be a mha_lib.pretrained.BertEncoder (e.g. load_bert()), got "
                         f"{type(bert).__name__}: {bert!r:.60}")


@torch.no_grad()
def sentence_config(bert, text: str, *, layer: int = 0) -> Dict[str, Any]:
    """The initial maps of a ``"sentence"`` view: every head of every layer of ``bert`` on ``text``.

    Args:
        bert: a :class:`~mha_lib.pretrained.BertEncoder` (all-MiniLM-L6-v2 in the book).
        text: the sentence shown first (the reader can type another).
        layer: the layer shown first, in [0, num_layers).

    Returns:
        a dict with ``text``, ``tokens`` (L str), ``truncated`` (bool), ``layer`` (int),
        ``num_layers``, ``num_heads`` and ``attentions`` ([layer][head][query][key] lists): the
        weights as mha_lib returns them, (L, L) per head, rows summing to 1.

    Raises:
        ValueError: ``bert`` not a BertEncoder, ``text`` not a non-empty str (or with a lone
            surrogate), ``layer`` out of range, or a model whose layers have different head
            counts (pruned).
    """
    _check_bert(bert)
    text = _check_text(text, "text")
    num_layers = len(bert.blocks) if hasattr(bert, "blocks") else bert.config.num_layers
    layer = checks.as_int(layer, "layer")
    if not 0 <= layer < num_layers:
        raise ValueError(f"layer={layer} is out of range for num_layers={num_layers}")
    was_training = bert.training
    bert.eval()
    try:
        out, batch = bert.encode_text([text], output_attentions=True)
    finally:
        bert.train(was_training)
    heads = {a.shape[1] for a in out.attentions}
    if len(heads) != 1:
        raise ValueError(f"the model's layers have different head counts {sorted(heads)}: a live view needs one H")
    n = batch.lengths[0]
    return {"text": text, "tokens": batch.tokens[0], "truncated": bool(batch.truncated[0]), "layer": layer,
            "num_layers": len(out.attentions), "num_heads": heads.pop(),
            "attentions": _layers_as_lists(out.attentions, 0, n)}


@torch.no_grad()
def toy_compare_config(spec_names: Sequence[str], batch, *, index: int = 0, seed: Optional[int] = None,
                       models: Optional[Mapping[str, torch.nn.Module]] = None) -> Dict[str, Any]:
    """The initial maps of a ``"toy-compare"`` view: one task sequence read by several shipped models.

    Args:
        spec_names: names from :data:`mha_lib.tasks.SHIPPED` whose models read the same task
            with token types (chapter 1: ``["ch1-h1", "ch1-h2", "ch1-h4", "ch1-h8"]``); the
            site ships seed 0 of each (``ch1-h4.onnx``, ...).
        batch: a :class:`~mha_lib.tasks.TaskBatch` of that task.
        index: which sequence of the batch.
        seed: the seed of the shipped weights (default the spec's first, as the site's models).
        models: already loaded models by name, ``{name: TokenClassifier}`` (each checked against
            its spec); names left out are loaded with :func:`mha_lib.tasks.load_trained`.

    Returns:
        a dict with ``models`` (the names), ``task`` (``task.to_dict()``), ``ids`` and
        ``types`` (L each), ``labels`` (L; the task's labels, -100 where none) and ``results``:
        per name, a dict with ``attentions`` ([layer][head][query][key]), ``predictions`` (L;
        argmax of the logits) and ``confidence`` (L; its softmax probability).

    Raises:
        ValueError: ``spec_names`` not a (list of) str, empty, with an unknown or repeated name;
            models of different tasks, or of a task other than
            :class:`~mha_lib.tasks.PrevMarkedTask` (the view edits its tokens and mark);
            ``batch`` not a TaskBatch of that task: tensors that do not fit (naming the tensor),
            a length other than the task's ``seq_len``, ids outside [0, vocab_size), a row
            without exactly one mark (the page requires one), or labels that are not the
            task's labels for those ids and marks (a batch of another task, e.g. ``op="add"``);
            ``index`` out of range; ``models`` not a mapping of names to TokenClassifiers whose
            configuration is the spec's (``num_heads``, ``num_layers``, ``vocab_size``, ...).
    """
    if isinstance(spec_names, str):
        spec_names = [spec_names]
    try:
        names = list(spec_names)
    except TypeError:
        raise ValueError(f"spec_names must be a list of names from mha_lib.tasks.SHIPPED, got {spec_names!r:.60}") \
            from None
    if not names:
        raise ValueError("spec_names is empty: name at least one shipped model")
    specs = []
    for name in names:
        if not isinstance(name, str):
            raise ValueError(f"spec_names must hold names (str) from mha_lib.tasks.SHIPPED, got {name!r:.60}")
        if name not in T.SHIPPED:
            raise ValueError(f"{name!r} is not a shipped model (mha_lib.tasks.SHIPPED)")
        specs.append(T.SHIPPED[name])
    if len(set(names)) != len(names):
        raise ValueError(f"spec_names {names} names a model twice")
    task_dicts = {json.dumps(s.task, sort_keys=True) for s in specs}
    if len(task_dicts) != 1:
        raise ValueError(f"the models {names} were trained on different tasks: {sorted(task_dicts)}")
    task = specs[0].make_task()
    if not isinstance(task, T.PrevMarkedTask):
        raise ValueError(f"the models {names} were trained on {task.to_dict()}: a toy-compare view edits "
                         "chapter 1's PrevMarkedTask (tokens and one marked position)")
    if models is not None and not isinstance(models, Mapping):
        raise ValueError(f"models must be a dict {{name: model}} or None, got {type(models).__name__}")
    for name, model in (models or {}).items():
        if name not in names:
            raise ValueError(f"models has {name!r}, which is not in spec_names {names}")
        _check_toy_model(model, T.SHIPPED[name], f"models[{name!r}]", TokenClassifier)
    _check_task_batch(batch, task, T)
    ids, types, labels = batch.input_ids, batch.token_type_ids, batch.labels
    index = checks.as_int(index, "index")
    if not 0 <= index < ids.shape[0]:
        raise ValueError(f"index={index} is out of range for a batch of {ids.shape[0]}")
    row = slice(index, index + 1)
    results = {}
    for name, spec in zip(names, specs):
        model = models[name] if models and name in models else T.load_trained(spec, seed)
        was_training = model.training
        model.eval()
        try:
            logits, attentions = T.logits_and_attentions(model, batch[row])
        finally:
            model.train(was_training)
        probs = logits[0].float().softmax(-1)  # (L, C)
        confidence, predictions = probs.max(-1)  # (L,), (L,)
        results[name] = {"attentions": _layers_as_lists(attentions, 0, ids.shape[1]),
                         "predictions": predictions.tolist(), "confidence": confidence.tolist()}
    return {"models": names, "task": task.to_dict(), "ids": ids[index].tolist(), "types": types[index].tolist(),
            "labels": labels[index].tolist(), "results": results}


def _check_toy_model(model: Any, spec, where: str, TokenClassifier) -> None:
    """``model`` is a TokenClassifier built as ``spec`` says (every key of ``spec.model``, and C)."""
    if not isinstance(model, TokenClassifier):
        raise ValueError(f"{where} must be a mha_lib TokenClassifier (e.g. tasks.load_trained({spec.name!r})), got "
                         f"{type(model).__name__}: {model!r:.60}")
    cfg = model.encoder.config
    wrong = {k: getattr(cfg, k, None) for k, v in spec.model.items() if getattr(cfg, k, None) != v}
    if model.num_classes != spec.make_task().num_classes:
        wrong["num_classes"] = model.num_classes
    if wrong or len(set(model.encoder.heads_per_layer)) != 1 or model.encoder.heads_per_layer[0] != cfg.num_heads:
        expected = {k: spec.model[k] for k in wrong if k in spec.model}
        raise ValueError(f"{where} is not a {spec.name} model: it has {wrong or 'pruned heads'}, the spec "
                         f"{expected or 'all heads'} (heads per layer {model.encoder.heads_per_layer})")


def _check_task_batch(batch: Any, task, T) -> None:
    """``batch`` is a TaskBatch of ``task`` (a PrevMarkedTask): shapes, ranges, one mark, the task's labels."""
    if not isinstance(batch, T.TaskBatch):
        raise ValueError(f"batch must be a mha_lib.tasks.TaskBatch (task.dataset(n, seed)), got "
                         f"{type(batch).__name__}: {batch!r:.60}")
    if batch.token_type_ids is None:
        raise ValueError("batch has no token_type_ids: a toy-compare view edits a task with a marked position")
    ids, types, labels = batch.input_ids, batch.token_type_ids, batch.labels
    for name, t in (("input_ids", ids), ("token_type_ids", types), ("labels", labels)):
        if not isinstance(t, torch.Tensor) or t.dtype.is_floating_point or t.is_complex() or t.dtype == torch.bool:
            raise ValueError(f"batch.{name} must be an integer tensor, got {getattr(t, 'dtype', type(t).__name__)}")
    if ids.dim() != 2 or types.shape != ids.shape or labels.shape != ids.shape or ids.shape[0] == 0:
        raise ValueError(f"batch tensors must all be (B, L) with B >= 1; got input_ids {tuple(ids.shape)}, "
                         f"token_type_ids {tuple(types.shape)}, labels {tuple(labels.shape)}")
    ids, types, labels = ids.cpu(), types.cpu(), labels.cpu()
    B, L = ids.shape
    if L != task.seq_len:
        raise ValueError(f"batch sequences have length {L}, the task {task.to_dict()} has seq_len={task.seq_len}")
    if int(ids.min()) < 0 or int(ids.max()) >= task.vocab_size:
        raise ValueError(f"batch.input_ids hold ids in [{int(ids.min())}, {int(ids.max())}], outside "
                         f"[0, vocab_size={task.vocab_size}) of the task")
    marks = (types == 1).sum(1)  # (B,)
    if not bool(((types == 0) | (types == 1)).all()) or not bool((marks == 1).all()):
        bad = int(((marks != 1) | ((types != 0) & (types != 1)).any(1)).nonzero()[0])
        raise ValueError(f"batch.token_type_ids row {bad} is {types[bad].tolist()}: every sequence needs exactly "
                         "one mark (one 1, the rest 0)")
    m = types.argmax(1)  # (B,) the marked position
    expected = torch.full((B, L), T.IGNORE_INDEX, dtype=torch.long)
    expected[:, 1:] = task.combine(ids[:, :-1], ids[torch.arange(B), m][:, None])  # (B, L-1)
    if not torch.equal(labels.long(), expected):
        bad = int((labels.long() != expected).any(1).nonzero()[0])
        raise ValueError(f"batch.labels row {bad} are not the labels of the task {task.to_dict()} for its ids and "
                         f"mark (a batch of another task?): got {labels[bad].tolist()}, the task gives "
                         f"{expected[bad].tolist()}")


def paraphrase_scores(embeddings: torch.Tensor, reference: torch.Tensor, num_anchors: int) -> Dict[str, float]:
    """Fidelity and paraphrase ranking of (possibly pruned) sentence embeddings.

    The texts are ``anchors + paraphrases + distractors``: anchor i's paraphrase is text
    ``num_anchors + i``; the candidates of every anchor are all texts after the anchors.

    Args:
        embeddings: (N, d) float, unit rows (MiniLM's ``sentence_embeddings``).
        reference: (N, d) float, the unpruned model's embeddings of the same texts.
        num_anchors: A >= 1, with N >= 2 A.

    Returns:
        a dict with ``fidelity`` (the mean over texts of cos(embedding, reference)) and ``mrr``
        (the mean over anchors of 1 / rank of its paraphrase among the candidates; 1 = ranked
        first; ties count in the paraphrase's favour, as chapter 4's evaluation does): the mean
        reciprocal rank of question answering (Voorhees 1999, TREC-8).

    Raises:
        ValueError: shapes that do not match, or too few texts for ``num_anchors``.
    """
    A = checks.positive_int(num_anchors, "num_anchors")
    if (not isinstance(embeddings, torch.Tensor) or not isinstance(reference, torch.Tensor)
            or embeddings.dim() != 2 or embeddings.shape != reference.shape):
        raise ValueError(f"embeddings and reference must be two (N, d) tensors of one shape, got "
                         f"{tuple(getattr(embeddings, 'shape', ()))} and {tuple(getattr(reference, 'shape', ()))}")
    if embeddings.shape[0] < 2 * A:
        raise ValueError(f"{embeddings.shape[0]} texts cannot hold {A} anchors and their {A} paraphrases")
    e, ref = embeddings.float(), reference.float()
    fidelity = torch.nn.functional.cosine_similarity(e, ref, dim=-1).mean()
    sims = e[:A] @ e[A:].T  # (A, N - A); anchor i's paraphrase is column i
    rank = 1 + (sims > sims.diagonal()[:, None]).sum(1)  # (A,)
    return {"fidelity": float(fidelity), "mrr": float((1.0 / rank.float()).mean())}


@torch.no_grad()
def prune_config(bert, text: str, anchors: Sequence[str], paraphrases: Sequence[str],
                 distractors: Optional[Sequence[str]] = (), *, mask=None, layer: int = 0) -> Dict[str, Any]:
    """The initial state of a ``"prune"`` view: head toggles, fidelity, paraphrase ranking, one sentence.

    The page recomputes, after every toggle, the sentence embeddings of ``anchors +
    paraphrases + distractors`` with the ``head_mask`` the toggles give, and compares them with
    the unpruned embeddings (computed in the page once, all heads on) by
    :func:`paraphrase_scores`. Keep the set small (about 24 texts): the page runs them all at
    every toggle.

    Args:
        bert: a :class:`~mha_lib.pretrained.BertEncoder` with one head count per layer.
        text: the sentence whose maps the view shows.
        anchors: A texts; ``paraphrases``: A texts, the i-th saying what anchor i says.
        distractors: further candidates (e.g. hard negatives); None = none.
        mask: the initial (num_layers, H) grid, 1 = head on (default all on); bools or floats.
        layer: the layer whose maps are shown first.

    Returns:
        a dict with ``text``, ``tokens``, ``truncated``, ``layer``, ``num_layers``,
        ``num_heads``, ``mask`` ([layer][head], 0/1), ``texts`` (N str), ``num_anchors`` (A),
        ``fidelity`` and ``mrr`` (for ``mask``, by mha_lib), ``mrr_all`` (all heads on) and
        ``attentions`` ([layer][head][query][key]): the maps with ``mask`` applied downstream
        (a head's own weights do not change when it is off: ``head_mask`` gates its output);
        ``token_ids``: the distinct token ids of the sentence and the texts, sorted (the page says
        how many bytes of word vectors its first run fetches).

    Raises:
        ValueError: ``bert`` not a BertEncoder; ``anchors``, ``paraphrases`` or ``distractors``
            not a list of texts (a single str is refused, not read letter by letter), or holding
            an empty or non-str text; ``len(paraphrases) != len(anchors)``; a ``mask`` that is
            not a numeric (num_layers, H) grid (ragged, strings) or holds values other than 0/1;
            ``layer`` out of range.
    """
    _check_bert(bert)
    text = _check_text(text, "text")
    anchors, paraphrases = _check_texts(anchors, "anchors"), _check_texts(paraphrases, "paraphrases")
    distractors = [] if distractors is None else _check_texts(distractors, "distractors")
    if not anchors:
        raise ValueError("anchors is empty: the paraphrase score needs at least one anchor")
    if len(paraphrases) != len(anchors):
        raise ValueError(f"{len(anchors)} anchors but {len(paraphrases)} paraphrases: one paraphrase per anchor")
    texts = anchors + paraphrases + distractors
    config = sentence_config(bert, text, layer=layer)
    L, H = config["num_layers"], config["num_heads"]
    if mask is None:
        grid = torch.ones(L, H)
    else:
        try:
            grid = mask.detach().float().cpu() if isinstance(mask, torch.Tensor) else torch.as_tensor(mask).float()
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"mask must be a (num_layers, H) = ({L}, {H}) grid of 0/1 numbers or bools, got "
                             f"{mask!r:.80} ({err})") from None
        if tuple(grid.shape) != (L, H):
            raise ValueError(f"mask must have shape (num_layers, H) = ({L}, {H}), got {tuple(grid.shape)}")
        if not bool(((grid == 0) | (grid == 1)).all()):
            raise ValueError("mask must hold 0 (head off) and 1 (head on) only")
    was_training = bert.training
    bert.eval()
    try:
        reference = bert.sentence_embeddings(texts)  # (N, d), all heads on
        pruned = bert.sentence_embeddings(texts, head_mask=grid) if mask is not None else reference
        if mask is not None:
            out, batch = bert.encode_text([text], output_attentions=True, head_mask=grid)
            config["attentions"] = _layers_as_lists(out.attentions, 0, batch.lengths[0])
    finally:
        bert.train(was_training)
    scores = paraphrase_scores(pruned, reference, len(anchors))
    mrr_all = paraphrase_scores(reference, reference, len(anchors))["mrr"]
    ids = bert.tokenizer([text] + texts, warn=False).input_ids  # (N + 1, L), padded with the pad id
    config.update({"mask": grid.int().tolist(), "texts": texts, "num_anchors": len(anchors), **scores,
                   "mrr_all": mrr_all, "token_ids": sorted(set(ids.flatten().tolist()))})
    return config


# ----------------------------------------------------------------------------- in a kernel
#: Most rows (texts) one run message may hold: the prune view sends its sentence and its texts
#: (about 25); the limit keeps a stray message from asking the kernel for an enormous batch.
MAX_KERNEL_ROWS = 64
#: Most positions (rows x length, padding included) one run message may hold: the prune view's 25
#: texts at MiniLM's 256 tokens; a larger batch would hold the kernel for a minute.
MAX_KERNEL_TOKENS = 25 * 256
#: The browser code's modules in ``mha_lib/web/``, in the order :func:`widget_esm` joins them: each one
#: imports only modules above it, and ``mha_live.mjs`` (the page's entry: mounting, ``render``) is last.
WIDGET_MODULES = ("wordpiece.mjs", "checks.mjs", "contract.mjs", "layout.mjs", "text.mjs", "compute.mjs",
                  "integrity.mjs", "runtime_browser.mjs", "runtime_kernel.mjs", "dom.mjs", "draw.mjs", "styles.mjs",
                  "view.mjs", "layer_maps.mjs", "view_sentence.mjs", "view_toy_compare.mjs", "view_prune.mjs",
                  "mha_live.mjs")
_RELATIVE_IMPORT = re.compile(r'^import \{[^}]*\} from "\./([\w-]+\.mjs)";\n', re.M)
#: The lines of the modules that read a file beside them; in the widget's module they hold its text.
_INLINED = {"styles.mjs": ("const INLINE_CSS = null;", "mha_live.css"),
            "contract.mjs": ("const INLINE_CONTRACT = null;", "view_contract.json")}
_KERNEL_MODELS: Dict[str, Any] = {}  # model id -> loaded model, shared by every view of the kernel


@functools.lru_cache(maxsize=1)
def widget_esm() -> str:
    """The ES module of :class:`LiveWidget`: the modules of :data:`WIDGET_MODULES`, joined in that order.

    anywidget loads a widget's module from a ``blob:`` URL, where relative imports (``./dom.mjs``)
    cannot resolve and there is no folder to read ``mha_live.css`` or ``view_contract.json`` from, so
    the modules (package data, the same files the book copies to ``_static/live/``) become one text:
    each file without its ``import {...} from "./x.mjs";`` lines, and the stylesheet and the view
    contract written into the lines that would read them (``const INLINE_CSS = null;``,
    ``const INLINE_CONTRACT = null;``). No two modules define the same top-level name
    (tests/test_web.py checks it), and every relative import names an earlier module.

    Returns:
        the module text (str); its default export ``{render}`` is anywidget's entry point.

    Raises:
        RuntimeError: a module imports one that is not above it in :data:`WIDGET_MODULES`, a module
            of ``mha_lib/web/`` is not in the list, or a line to inline is not there exactly once.
    """
    web = resources.files("mha_lib") / "web"
    present = {p.name for p in web.iterdir() if p.name.endswith(".mjs")}
    if present != set(WIDGET_MODULES):
        raise RuntimeError(f"mha_lib/web/ holds {sorted(present)}, WIDGET_MODULES lists {sorted(WIDGET_MODULES)}")
    parts = []
    for i, name in enumerate(WIDGET_MODULES):
        text = (web / name).read_text(encoding="utf-8")
        later = [m for m in _RELATIVE_IMPORT.findall(text) if m not in WIDGET_MODULES[:i]]
        if later:
            raise RuntimeError(f"{name} imports {later}, which widget_esm would join after it")
        text = _RELATIVE_IMPORT.sub("", text)
        if 'from "./' in text:
            raise RuntimeError(f"{name} has a relative import that is not one line 'import {{...}} from \"./x.mjs\";'")
        if name in _INLINED:
            line, data = _INLINED[name]
            if text.count(line) != 1:
                raise RuntimeError(f"{name} must hold the line {line!r} once (widget_esm writes {data} there)")
            value = (web / data).read_text(encoding="utf-8")
            if data.endswith(".json"):
                value = json.loads(value)
            text = text.replace(line, f"{line.split(' = ')[0]} = {json.dumps(value, ensure_ascii=False)};")
        parts.append(f"// ---- mha_lib/web/{name}\n{text}")
    return "\n".join(parts)


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (Jupyter, Colab, VS Code, nbclient): a widget can be shown."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


@functools.lru_cache(maxsize=1)
def _widget_class():
    """:class:`LiveWidget`, defined on first use; None when ``anywidget`` is not installed."""
    try:
        import anywidget
        import traitlets
    except ImportError:
        return None

    class LiveWidget(anywidget.AnyWidget):
        """A live view in a kernel: ``mha_live.mjs`` draws it, the kernel computes it (mha_lib).

        Made by :meth:`LiveView.widget` (a cell shows it through :func:`live_view`'s output).
        The traits carry what the HTML element carries; run messages from the view are answered
        by :attr:`runner` (a :class:`KernelRunner`): results as binary float32 buffers, failures
        as an error message that the view shows -- a bad message never raises in the kernel.
        """

        _esm = widget_esm()
        live_view = traitlets.Unicode().tag(sync=True)
        live_model = traitlets.Unicode().tag(sync=True)
        live_config = traitlets.Dict().tag(sync=True)
        live_fallback = traitlets.Unicode().tag(sync=True)  # data:image/png;base64,... or ""
        live_alt = traitlets.Unicode().tag(sync=True)
        live_caption = traitlets.Unicode().tag(sync=True)

        def __init__(self, view: LiveView):
            super().__init__(live_view=view.view, live_model=view.model, live_config=view.config,
                             live_fallback=view.fallback_src, live_alt=view.alt, live_caption=view.caption)
            self.runner = KernelRunner(view.view, view.model, view.config)
            self.on_msg(self._answer)

        def _answer(self, _widget, content, buffers) -> None:
            reply, out = self.runner.answer(content)
            self.send(reply, out)

        def __repr__(self) -> str:
            return f"LiveWidget(view={self.live_view!r}, model={self.live_model!r})"

    LiveWidget.__module__, LiveWidget.__qualname__ = __name__, "LiveWidget"
    return LiveWidget


def __getattr__(name: str):
    # ``mha_lib.live.LiveWidget``: the anywidget class, made on first use (anywidget is optional)
    if name == "LiveWidget":
        cls = _widget_class()
        if cls is None:
            raise ImportError("mha_lib.live.LiveWidget needs anywidget: pip install 'mha_lib[viz]'")
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _kernel_model(model_id: str):
    """The mha_lib model behind a site model id, loaded once per kernel, in eval mode."""
    if model_id not in _KERNEL_MODELS:
        if model_id == MINILM_ID:
            model, _ = load_bert(verbose=False)
        else:
            model = tasks.load_trained(model_id)  # the spec's first seed: the site's model
        _KERNEL_MODELS[model_id] = model.eval()
    return _KERNEL_MODELS[model_id]


class KernelRunner:
    """Answers a live view's messages in the kernel with mha_lib's own models.

    The messages (sent by ``kernelBackend`` in ``mha_live.mjs``; every one carries ``request``,
    echoed in the answer):

    * ``{"op": "load", "model": id}`` -> ``{"op": "loaded", "info": {...}, "vocab": str or None}``:
      what onnxruntime-web's session would tell the view -- ``kind`` ("bert" or
      "token-classifier"), ``num_layers``, ``num_heads``, ``max_length``, ``inputs`` and
      ``outputs`` (the names of :mod:`mha_lib.export`), and MiniLM's vocabulary (vocab.txt).
    * ``{"op": "run", "model": id, "feeds": {name: {"type", "dims", "data"}}}`` with the
      inputs of the exported files, as plain lists: ``input_ids`` (B, L) ids,
      ``token_type_ids`` (B, L) (models with token types), ``key_padding_mask`` (B, L) 0/1,
      True = padding, ``head_mask`` (num_layers, H) numbers, 1 = keep -> ``{"op": "result",
      "outputs": {name: {"dims", "buffer": i}}}`` and buffer i holding that output as float32
      (little-endian): ``attentions`` (num_layers, B, H, L, L), the weights before the head
      mask, and ``sentence_embedding`` (B, d_model) for MiniLM (:meth:`BertEncoder.pool
      <mha_lib.pretrained.BertEncoder.pool>` of the last hidden state) or ``logits`` (B, L, C)
      for a toy model -- what the exported file computes, here by mha_lib in float32.
    * anything wrong -> ``{"op": "error", "message": ...}`` naming the offending value.

    Args:
        view: the view's kind (:data:`VIEWS`).
        model: its model id; ``config``: its configuration (a toy-compare view runs every model
            of ``config["models"]``; the others run ``model``). Only those models are loaded.
    """

    def __init__(self, view: str, model: str, config: Mapping[str, Any]):
        self.view = view
        self.models = list(config["models"]) if view == "toy-compare" else [model]

    def answer(self, content: Any) -> Tuple[dict, List[bytes]]:
        """The answer to one message: ``(content, buffers)``. Never raises: an error is an answer.

        Returns:
            ``({"op": "loaded" | "result" | "error", "request": ..., ...}, [bytes, ...])``.
        """
        request = None
        try:
            request = content.get("request") if isinstance(content, Mapping) else None
            if not (isinstance(request, str) and len(request) <= 100) and not (
                    isinstance(request, int) and not isinstance(request, bool)):
                request = None
            if not isinstance(content, Mapping):
                raise ValueError(f"a message must be an object, got {type(content).__name__}: {content!r:.60}")
            if request is None:
                raise ValueError(f"a message needs a request id (a str or an integer, at most 100 characters), got "
                                 f"{content.get('request')!r:.60}")
            op = content.get("op")
            if op == "load":
                return {"op": "loaded", "request": request, **self.load(content.get("model"))}, []
            if op == "run":
                outputs = self.run(content.get("model"), content.get("feeds"))
                names = list(outputs)
                return ({"op": "result", "request": request,
                         "outputs": {n: {"dims": list(outputs[n].shape), "buffer": i} for i, n in enumerate(names)}},
                        [np.ascontiguousarray(outputs[n].numpy(), dtype="<f4").tobytes() for n in names])
            raise ValueError(f"op must be 'load' or 'run', got {op!r:.60}")
        except Exception as err:  # noqa: BLE001 -- a message from the page must never raise in the kernel
            kind = "" if isinstance(err, ValueError) else f"{type(err).__name__}: "
            return {"op": "error", "request": request, "message": f"{kind}{err}"}, []

    def _model(self, model_id: Any):
        if not isinstance(model_id, str) or model_id not in self.models:
            raise ValueError(f"model {model_id!r:.60} is not one of this view's models {self.models}")
        return _kernel_model(model_id)

    def load(self, model_id: Any) -> dict:
        """``{"info": {...}, "vocab": ...}`` of a model of this view (loaded once per kernel).

        Raises:
            ValueError: ``model_id`` not one of this view's models.
        """
        return {"info": _model_info(self._model(model_id)), "vocab": _vocab_text(self._model(model_id))}

    @torch.no_grad()
    def run(self, model_id: Any, feeds: Any) -> Dict[str, torch.Tensor]:
        """mha_lib's outputs for one run message's ``feeds`` (see the class docstring).

        Returns:
            ``{"attentions": (num_layers, 1, H, L, L), "sentence_embedding": (B, d_model)}`` for
            MiniLM, ``{"logits": (B, L, C), "attentions": ...}`` for a toy model; float32, CPU.
            Only the first row's attentions are returned: a view draws that row's maps, and the
            other rows (the prune view's 24 texts) would make each answer megabytes.

        Raises:
            ValueError: a model not of this view; ``feeds`` not a dict of exactly the model's
                inputs; a feed without integer ``dims`` or with ``data`` of another length; B not
                in [1, :data:`MAX_KERNEL_ROWS`], L not in [1, max_length]; ids, token types,
                padding flags or head-mask values that are not integers in range, 0/1, or finite
                numbers (the message names the feed, the position and the value).
        """
        model = self._model(model_id)
        info = _model_info(model)
        x = _checked_feeds(feeds, info, _config_of(model))
        out = model(x["input_ids"], token_type_ids=x.get("token_type_ids"), key_padding_mask=x["key_padding_mask"],
                    head_mask=x["head_mask"], output_attentions=True)
        attentions = torch.stack(out.attentions)[:, :1].float().cpu()  # (num_layers, 1, H, L, L): row 0, drawn
        if info["kind"] == "bert":
            embedding = model.pool(out.last_hidden_state, x["key_padding_mask"])  # (B, d_model)
            return {"sentence_embedding": embedding.float().cpu(), "attentions": attentions}
        return {"logits": out.logits.float().cpu(), "attentions": attentions}


def _config_of(model):
    return model.config if isinstance(model, BertEncoder) else model.encoder.config


def _model_info(model) -> dict:
    """What the view reads of a model (as the exported file's manifest entry says it)."""
    bert = isinstance(model, BertEncoder)
    cfg = _config_of(model)
    heads = (model if bert else model.encoder).heads_per_layer
    if len(set(heads)) != 1:
        raise ValueError(f"the model has {heads} heads per layer: a live view needs one count in every layer")
    max_length = min(cfg.max_len, model.tokenizer.max_length) if bert else cfg.max_len
    inputs = ["input_ids", "token_type_ids", "key_padding_mask", "head_mask"]
    if not cfg.type_vocab_size:
        inputs.remove("token_type_ids")
    return {"kind": "bert" if bert else "token-classifier", "num_layers": len(heads), "num_heads": heads[0],
            "max_length": max_length, "inputs": inputs,
            "outputs": ["sentence_embedding", "attentions"] if bert else ["logits", "attentions"]}


def _vocab_text(model) -> Optional[str]:
    """MiniLM's vocab.txt (one token a line, line number = id), for the view's tokenizer; None for a toy."""
    if not isinstance(model, BertEncoder):
        return None
    vocab = model.tokenizer.backend.get_vocab()  # token -> id
    tokens = sorted(vocab, key=vocab.get)
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise ValueError("the tokenizer's ids are not 0..V-1: no vocab.txt can list them")
    return "\n".join(tokens) + "\n"


def _checked_feeds(feeds: Any, info: dict, cfg) -> Dict[str, torch.Tensor]:
    """The tensors of a run message's feeds; ValueError naming the feed, position and value."""
    if not isinstance(feeds, Mapping):
        raise ValueError(f"feeds must be an object {{input name: tensor}}, got {type(feeds).__name__}: {feeds!r:.60}")
    wanted = info["inputs"]
    if set(feeds) != set(wanted):
        raise ValueError(f"feeds must hold exactly the inputs {wanted}, got {sorted(map(repr, feeds))}")

    def values(name: str, dims_expected: Optional[Tuple[int, ...]] = None) -> Tuple[list, Tuple[int, ...]]:
        feed = feeds[name]
        if not isinstance(feed, Mapping):
            raise ValueError(f"feeds[{name!r}] must be an object {{type, dims, data}}, got {feed!r:.60}")
        dims, data = feed.get("dims"), feed.get("data")
        if (not isinstance(dims, list) or len(dims) != 2
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims)):
            raise ValueError(f"feeds[{name!r}].dims must be two integers >= 1, got {dims!r:.60}")
        if dims_expected is not None and tuple(dims) != dims_expected:
            raise ValueError(f"feeds[{name!r}].dims must be {list(dims_expected)}, got {dims}")
        if not isinstance(data, list) or len(data) != dims[0] * dims[1]:
            n = len(data) if isinstance(data, list) else type(data).__name__
            raise ValueError(f"feeds[{name!r}].data must be a list of {dims[0]} x {dims[1]} values, got {n}")
        return data, tuple(dims)

    def integers(name: str, dims: Tuple[int, ...], low: int, high: int, what: str) -> torch.Tensor:
        data, _ = values(name, dims)
        for i, v in enumerate(data):
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v < high:
                raise ValueError(f"feeds[{name!r}][{i // dims[1]}][{i % dims[1]}] = {v!r:.40} is not {what}")
        return torch.tensor(data, dtype=torch.long).view(dims)

    ids, (B, L) = values("input_ids")
    if B > MAX_KERNEL_ROWS:
        raise ValueError(f"feeds['input_ids'] has {B} rows; a view sends at most {MAX_KERNEL_ROWS}")
    if B * L > MAX_KERNEL_TOKENS:
        raise ValueError(f"feeds['input_ids'] is {B} x {L} = {B * L} positions; a view sends at most {MAX_KERNEL_TOKENS}")
    if L > info["max_length"]:
        raise ValueError(f"feeds['input_ids'] has {L} positions; the model reads at most {info['max_length']}")
    V = cfg.vocab_size
    out = {"input_ids": integers("input_ids", (B, L), 0, V, f"a token id in [0, {V})")}
    if "token_type_ids" in wanted:
        T = cfg.type_vocab_size
        out["token_type_ids"] = integers("token_type_ids", (B, L), 0, T, f"a token type in [0, {T})")
    out["key_padding_mask"] = integers("key_padding_mask", (B, L), 0, 2, "0 or 1 (1 = padding)").bool()
    NL, H = info["num_layers"], info["num_heads"]
    mask, _ = values("head_mask", (NL, H))
    for i, v in enumerate(mask):  # the page sends 0 (off) and 1 (on); a gate in between is allowed
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise ValueError(f"feeds['head_mask'][{i // H}][{i % H}] = {v!r:.40} is not a number in [0, 1]")
    out["head_mask"] = torch.tensor(mask, dtype=torch.float32).view(NL, H)
    return out
