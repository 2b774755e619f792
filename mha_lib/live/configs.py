"""The initial numbers of each live view, computed by mha_lib when the notebook runs.

:func:`sentence_config` (MiniLM on a sentence), :func:`toy_compare_config` (chapter 1's toy models
side by side), :func:`prune_config` (MiniLM with head toggles; :func:`paraphrase_scores` ranks the
paraphrases as the page does). The views of chapters 3, 5, 6 and 7 have files of their own
(``timing.py``, ``induction.py``, ``translate.py``, ``digit.py``).
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, Mapping, Optional, Sequence

import torch

from .. import checks
from .. import tasks as T
from ..model import TokenClassifier
from ..pretrained import BertEncoder
from .values import _check_utf8


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
def sentence_config(bert, text: str, *, layer: int = 0,
                    roles: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The initial maps of a ``"sentence"`` view: every head of every layer of ``bert`` on ``text``.

    Args:
        bert: a :class:`~mha_lib.pretrained.BertEncoder` (all-MiniLM-L6-v2 in the book).
        text: the sentence shown first (the reader can type another).
        layer: the layer shown first, in [0, num_layers).
        roles: optional ``{"L3.H1": "det", ...}``: a short name (1 to 24 characters) the view writes
            beside a head's label, for the book's measured head roles (chapter 8). They belong to the
            book's model: the view drops them while it shows the reader's own.

    Returns:
        a dict with ``text``, ``tokens`` (L str), ``truncated`` (bool), ``layer`` (int),
        ``num_layers``, ``num_heads`` and ``attentions`` ([layer][head][query][key] lists): the
        weights as mha_lib returns them, (L, L) per head, rows summing to 1; with ``roles``, also
        ``roles``: a list of ``{"layer", "head", "role"}``.

    Raises:
        ValueError: ``bert`` not a BertEncoder, ``text`` not a non-empty str (or with a lone
            surrogate), ``layer`` out of range, a model whose layers have different head
            counts (pruned), or a role whose key is not ``"L<layer>.H<head>"`` of the model or
            whose name is not 1 to 24 characters (naming it).
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
    num_heads = heads.pop()
    config = {"text": text, "tokens": batch.tokens[0], "truncated": bool(batch.truncated[0]), "layer": layer,
              "num_layers": len(out.attentions), "num_heads": num_heads,
              "attentions": _layers_as_lists(out.attentions, 0, n)}
    if roles is not None:
        config["roles"] = _check_roles(roles, len(out.attentions), num_heads)
    return config


_ROLE_KEY = re.compile(r"L(\d+)\.H(\d+)")


def _check_roles(roles: Any, num_layers: int, num_heads: int) -> list:
    """``{"L3.H1": "det"}`` -> ``[{"layer": 3, "head": 1, "role": "det"}]``, every key and name checked."""
    if not isinstance(roles, Mapping):
        raise ValueError(f"roles must be a dict like {{'L3.H1': 'det'}}, got {type(roles).__name__}")
    out = []
    for key, role in roles.items():
        match = _ROLE_KEY.fullmatch(key) if isinstance(key, str) else None
        if not match or int(match[1]) >= num_layers or int(match[2]) >= num_heads:
            raise ValueError(f"roles: {key!r} is not a head of this model (L0.H0 to L{num_layers - 1}.H{num_heads - 1})")
        if not isinstance(role, str) or not 1 <= len(role.strip()) <= 24:
            raise ValueError(f"roles[{key!r}] = {role!r}: a role is a name of 1 to 24 characters")
        _check_utf8(role, f"roles[{key!r}]")
        out.append({"layer": int(match[1]), "head": int(match[2]), "role": role.strip()})
    return out


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
        anchors: A texts.
        paraphrases: A texts, the i-th saying what anchor i says.
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
