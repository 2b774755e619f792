"""Live views: attention maps that the reader's browser recomputes, written from a notebook cell.

A live view is one HTML element, ``<div class="mha-live-view" data-view=... data-model=...
data-config=...>``, holding a static fallback figure. In the built book, ``_static/mha_book.js``
finds it and imports ``_static/live/mha_live.mjs`` (the source is ``web/mha_live.mjs``), which
draws the maps on canvas from the numbers in ``data-config`` -- computed here, by mha_lib, when
the notebook ran -- and loads the ONNX model (:mod:`mha_lib.export`, written to
``_static/models/`` by ``tools/export_site_models.py``) only at the reader's first action. Where
no script runs (a page without JavaScript, Jupyter), the fallback figure is what shows.

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
import html
import json
import math
import re
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import torch

from . import checks

__all__ = ["VIEWS", "LiveView", "live_view", "sentence_config", "toy_compare_config", "prune_config",
           "paraphrase_scores", "DECIMALS"]

#: The kinds of live view that ``web/mha_live.mjs`` draws.
VIEWS = ("sentence", "toy-compare", "prune")
#: Decimals kept for every float of a configuration (attention weights: 1e-4 is below what a
#: colour shows, and the readout prints 3 decimals).
DECIMALS = 4
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # a file stem under _static/models/
MINILM_ID = "all-MiniLM-L6-v2"


def _rounded(value: Any, where: str) -> Any:
    """A JSON-able copy of ``value`` with floats rounded to :data:`DECIMALS` (tensors -> lists)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().tolist()
    elif hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy arrays and scalars
        value = value.tolist()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
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
            out[k] = _rounded(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [_rounded(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise ValueError(f"{where} holds a {type(value).__name__} ({value!r:.60}): only numbers, str, bool, None, "
                     "lists, dicts and tensors go into a live view's config")


class LiveView:
    """The HTML of one live view; a notebook cell that returns it shows it (``text/html``).

    Attributes:
        view: one of :data:`VIEWS`.
        model: the model id (a file stem under ``_static/models/``).
        config: the rounded, JSON-able configuration (a dict).
        html: the element, ``<div class="mha-live-view" ...>`` with the fallback inside.
    """

    def __init__(self, view: str, model: str, config: dict, html_text: str):
        self.view, self.model, self.config, self.html = view, model, config, html_text

    def _repr_html_(self) -> str:
        return self.html

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/html": self.html, "text/plain": repr(self)}

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
        a :class:`LiveView` (``_repr_html_`` / ``_repr_mimebundle_``: ``text/html``).

    Raises:
        ValueError: an unknown ``view``, a ``model`` that is not a plain id, a ``config`` that is
            not a dict or holds NaN/inf or other objects, a ``fallback`` that is not PNG, or a
            fallback without alt text.
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    if not isinstance(model, str) or not _MODEL_ID.fullmatch(model):
        raise ValueError(f"model must be a model id (letters, digits, '_', '.', '-'), got {model!r}")
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict, got {type(config).__name__}")
    data = _rounded(dict(config), "config")
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
    note = ('<p class="mha-live-noscript">In the book\'s web pages this figure is live: your browser recomputes it '
            "(with JavaScript and WebAssembly SIMD: recent Chrome, Edge, Firefox or Safari). Here it shows what "
            "the notebook computed.</p>")
    cap = f'<p class="mha-live-caption">{html.escape(caption)}</p>' if caption else ""
    markup = (f'<div class="mha-live-view" data-view="{view}" data-model="{model}" '
              f'data-config="{html.escape(payload, quote=True)}">{figure}{note}{cap}</div>')
    return LiveView(view, model, data, markup)


# ----------------------------------------------------------------------------- configurations
def _layers_as_lists(attentions, row: int, n: int) -> list:
    """Per-layer (B, H, L, L) tensors -> [layer][head][query][key] lists of sequence ``row``, cut to n tokens."""
    return [a[row, :, :n, :n].float().tolist() for a in attentions]


def _check_text(text: Any, name: str) -> str:
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a str, got {type(text).__name__}: {text!r:.60}")
    if not text.strip():
        raise ValueError(f"{name} is empty: a live view needs a text to start from")
    return text


@torch.no_grad()
def sentence_config(bert, text: str, *, layer: int = 0) -> Dict[str, Any]:
    """The initial maps of a ``"sentence"`` view: every head of every layer of ``bert`` on ``text``.

    Args:
        bert: a :class:`~mha_lib.pretrained.BertEncoder` (all-MiniLM-L6-v2 in the book).
        text: the sentence shown first (the reader can type another).
        layer: the layer shown first, in [0, num_layers).

    Returns:
        ``{"text", "tokens": [L str], "truncated": bool, "layer": int, "num_layers", "num_heads",
        "attentions": [layer][head][query][key]}`` -- weights as mha_lib returns them, (L, L)
        per head, rows summing to 1.

    Raises:
        ValueError: ``text`` not a non-empty str, ``layer`` out of range, or a model whose
            layers have different head counts (pruned).
    """
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
        models: already loaded models by name (default: :func:`mha_lib.tasks.load_trained`).

    Returns:
        ``{"models": [names], "task": task.to_dict(), "ids": [L], "types": [L],
        "labels": [L] (the task's labels, -100 where none), "results": {name: {"attentions":
        [layer][head][query][key], "predictions": [L] (argmax of the logits), "confidence":
        [L] (its softmax probability)}}}``.

    Raises:
        ValueError: no names, an unknown name, models of different tasks, a task without
            token types, a batch that does not fit (naming the tensor), or ``index`` out of range.
    """
    from . import tasks as T

    names = list(spec_names) if not isinstance(spec_names, str) else [spec_names]
    if not names:
        raise ValueError("spec_names is empty: name at least one shipped model")
    specs = []
    for name in names:
        if name not in T.SHIPPED:
            raise ValueError(f"{name!r} is not a shipped model (mha_lib.tasks.SHIPPED)")
        specs.append(T.SHIPPED[name])
    task_dicts = {json.dumps(s.task, sort_keys=True) for s in specs}
    if len(task_dicts) != 1:
        raise ValueError(f"the models {names} were trained on different tasks: {sorted(task_dicts)}")
    task = specs[0].make_task()
    if getattr(batch, "token_type_ids", None) is None:
        raise ValueError("batch has no token_type_ids: a toy-compare view edits a task with a marked position")
    ids, types, labels = batch.input_ids, batch.token_type_ids, batch.labels
    if ids.dim() != 2 or types.shape != ids.shape or labels.shape != ids.shape:
        raise ValueError(f"batch tensors must all be (B, L); got input_ids {tuple(ids.shape)}, "
                         f"token_type_ids {tuple(types.shape)}, labels {tuple(labels.shape)}")
    index = checks.as_int(index, "index")
    if not 0 <= index < ids.shape[0]:
        raise ValueError(f"index={index} is out of range for a batch of {ids.shape[0]}")
    row = slice(index, index + 1)
    results = {}
    for name, spec in zip(names, specs):
        model = models[name] if models is not None and name in models else T.load_trained(spec, seed)
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


def paraphrase_scores(embeddings: torch.Tensor, reference: torch.Tensor, num_anchors: int) -> Dict[str, float]:
    """Fidelity and paraphrase ranking of (possibly pruned) sentence embeddings.

    The texts are ``anchors + paraphrases + distractors``: anchor i's paraphrase is text
    ``num_anchors + i``; the candidates of every anchor are all texts after the anchors.

    Args:
        embeddings: (N, d) float, unit rows (MiniLM's ``sentence_embeddings``).
        reference: (N, d) float, the unpruned model's embeddings of the same texts.
        num_anchors: A >= 1, with N >= 2 A.

    Returns:
        ``{"fidelity": mean over texts of cos(embedding, reference), "mrr": mean over anchors of
        1 / rank of its paraphrase among the candidates (1 = ranked first; ties count in the
        paraphrase's favour, as chapter 4's evaluation does)}`` -- the mean reciprocal rank of
        question answering (Voorhees 1999, TREC-8).

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
                 distractors: Sequence[str] = (), *, mask=None, layer: int = 0) -> Dict[str, Any]:
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
        distractors: further candidates (e.g. hard negatives).
        mask: the initial (num_layers, H) grid, 1 = head on (default all on); bools or floats.
        layer: the layer whose maps are shown first.

    Returns:
        ``{"text", "tokens", "truncated", "layer", "num_layers", "num_heads", "mask": [layer][head]
        (0/1), "texts": [N str], "num_anchors": A, "fidelity", "mrr" (for ``mask``, by mha_lib), "mrr_all" (all heads on),
        "attentions": [layer][head][query][key]}`` -- the maps with ``mask`` applied downstream
        (a head's own weights do not change when it is off: ``head_mask`` gates its output).

    Raises:
        ValueError: empty or non-str texts, ``len(paraphrases) != len(anchors)``, a ``mask``
            of the wrong shape or with values other than 0/1, or ``layer`` out of range.
    """
    text = _check_text(text, "text")
    anchors, paraphrases, distractors = list(anchors), list(paraphrases), list(distractors)
    if not anchors:
        raise ValueError("anchors is empty: the paraphrase score needs at least one anchor")
    if len(paraphrases) != len(anchors):
        raise ValueError(f"{len(anchors)} anchors but {len(paraphrases)} paraphrases: one paraphrase per anchor")
    texts = anchors + paraphrases + distractors
    for i, t in enumerate(texts):
        _check_text(t, f"texts[{i}]")
    config = sentence_config(bert, text, layer=layer)
    L, H = config["num_layers"], config["num_heads"]
    if mask is None:
        grid = torch.ones(L, H)
    else:
        grid = torch.as_tensor(mask).float() if not isinstance(mask, torch.Tensor) else mask.detach().float().cpu()
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
    config.update({"mask": grid.int().tolist(), "texts": texts, "num_anchors": len(anchors), **scores,
                   "mrr_all": mrr_all})
    return config
