"""The ``"steps"`` view's numbers (chapter 2): :func:`steps_config`, and :func:`steps_readings`, what the page
shows of one head of one layer, stage by stage, on the reader's sentence (all-MiniLM-L6-v2) or sequence
(chapter 1's toy models).

The page runs the model's file with ``layer_inputs`` (:func:`mha_lib.export.export_onnx`) for the layer's
input, then the layer's steps file (:func:`mha_lib.export.export_attention_steps`, ``<model>.attn<l>.onnx``)
for every stage of :func:`mha_lib.analysis.attention_steps`; the kernel answers both from mha_lib.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import torch

from .. import checks
from .. import tasks as T
from ..analysis.steps import layer_steps
from ..model import TokenClassifier
from ..pretrained import BertEncoder, load_bert
from .configs import _check_bert, _check_text

MINILM_ID = "all-MiniLM-L6-v2"
#: The suffix of a layer's steps file: ``all-MiniLM-L6-v2.attn3`` is layer 3's (``.attn3.onnx`` on the site).
STEPS_SUFFIX = ".attn"
#: What the view shows of one head, in the order of the computation (``blocked``: 1 where the mask holds -inf).
HEAD_STAGES = ("x", "q", "k", "v", "scores", "scaled", "blocked", "weights", "head_out", "concat", "contribution",
               "out")


def steps_id(model_id: str, layer: int) -> str:
    """The id of layer ``layer``'s steps file of ``model_id``: ``"all-MiniLM-L6-v2.attn3"``.

    Raises:
        ValueError: ``layer`` not an int >= 0 (naming it).
    """
    return f"{model_id}{STEPS_SUFFIX}{checks.nonnegative_int(layer, 'layer')}"


def _toy_sequence(sequence: Any, task) -> tuple:
    """{"ids": [...], "types": [...]} of chapter 1's task -> (ids, types) lists, checked; ValueError naming the value."""
    if not isinstance(sequence, Mapping) or set(sequence) != {"ids", "types"}:
        raise ValueError(f"a toy model's sequence is {{'ids': [...], 'types': [...]}}, got {sequence!r:.80}")
    ids, types = sequence["ids"], sequence["types"]
    ids = ids.tolist() if isinstance(ids, torch.Tensor) else ids
    types = types.tolist() if isinstance(types, torch.Tensor) else types
    if not isinstance(ids, (list, tuple)) or not 1 <= len(ids) <= task.seq_len:
        raise ValueError(f"ids must be a list of 1 to {task.seq_len} token ids, got {ids!r:.60}")
    if not isinstance(types, (list, tuple)) or len(types) != len(ids):
        raise ValueError(f"types must be a list of {len(ids)} values 0/1 (one per token), got {types!r:.60}")
    for i, v in enumerate(ids):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < task.vocab_size:
            raise ValueError(f"ids[{i}] = {v!r:.40} is not a token id in [0, {task.vocab_size})")
    for i, v in enumerate(types):
        if v not in (0, 1) or isinstance(v, bool):
            raise ValueError(f"types[{i}] = {v!r:.40} is not 0 or 1")
    if list(types).count(1) != 1:
        raise ValueError(f"types must mark exactly one position with 1, got {list(types)}")
    return list(ids), list(types)


@torch.no_grad()
def steps_readings(model, sequence, *, layer: int, head: int, causal: bool = False) -> Dict[str, Any]:
    """What the ``"steps"`` view shows: head ``head`` of layer ``layer`` of ``model`` on ``sequence``, stage by stage.

    Args:
        model: a :class:`~mha_lib.pretrained.BertEncoder` (all-MiniLM-L6-v2) or a chapter-1
            :class:`~mha_lib.model.TokenClassifier` (``tasks.load_trained("ch1-h4")``).
        sequence: the text (a BertEncoder; cut at its tokenizer's ``max_length``) or ``{"ids": [...],
            "types": [...]}`` of chapter 1's task (a toy model: ids in [0, V), exactly one type 1, at most
            ``seq_len`` tokens).
        layer: in [0, num_layers); head: in [0, num_heads).
        causal: mask the keys after each query in this layer (the earlier layers run as the model does).

    Returns:
        a dict of lists (floats in float32): ``tokens`` (L str), ``x`` (L, d_model), ``q``, ``k``, ``v`` (L, d_k),
        ``scores`` = Q K^T and ``scaled`` = Q K^T / sqrt(d_k) (L, L), ``blocked`` (L, L) of 0/1 (1: the mask holds
        -inf there), ``weights`` (L, L), ``head_out`` (L, d_k), ``concat`` (L, H d_k), ``contribution`` (L,
        d_model): the head's term head W^O_h, and ``out`` (L, d_model) = concat W^O + b^O
        (:func:`mha_lib.analysis.attention_steps`, batch row 0, one head).

    Raises:
        ValueError: a model of another kind; an empty text; a toy sequence that is not the task's (naming the
            value); ``layer`` or ``head`` out of range; ``causal`` not a bool.
    """
    if isinstance(model, BertEncoder):
        text = _check_text(sequence, "sequence")
        batch = model.tokenizer([text], warn=False)
        tokens = batch.tokens[0]
        inputs = dict(input_ids=batch.input_ids, token_type_ids=batch.token_type_ids)
    elif isinstance(model, TokenClassifier) and model.encoder.config.type_vocab_size:
        cfg = model.encoder.config
        task = T.PrevMarkedTask(vocab_size=cfg.vocab_size, seq_len=cfg.max_len)
        ids, types = _toy_sequence(sequence, task)
        tokens = [("*" if m else "") + str(i) for i, m in zip(ids, types)]
        inputs = dict(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types]))
    else:
        raise ValueError(f"model must be all-MiniLM-L6-v2 (a BertEncoder) or a chapter-1 toy model (a TokenClassifier "
                         f"with token types), got {type(model).__name__}")
    encoder = getattr(model, "encoder", model)
    H = encoder.blocks[0].attn.num_heads if encoder.blocks else 0
    head = checks.as_int(head, "head")
    layer = checks.as_int(layer, "layer")
    if 0 <= layer < len(encoder.blocks):
        H = encoder.blocks[layer].attn.num_heads
    if not 0 <= head < H:
        raise ValueError(f"head={head} is outside [0, {H}) (the layer has {H} heads)")
    steps = layer_steps(model, layer, **inputs, causal=checks.flag(causal, "causal"))
    blocked = steps["blocked"].expand(1, H, -1, -1)  # (1, H, L, L)
    one = {"x": steps["x"][0], "q": steps["q"][0, head], "k": steps["k"][0, head], "v": steps["v"][0, head],
           "scores": steps["scores"][0, head], "scaled": steps["scaled"][0, head], "blocked": blocked[0, head].int(),
           "weights": steps["weights"][0, head], "head_out": steps["head_out"][0, head], "concat": steps["concat"][0],
           "contribution": steps["contributions"][0, head], "out": steps["out"][0]}
    return {"tokens": list(tokens), **{name: one[name].tolist() for name in HEAD_STAGES}}


def steps_config(name: str, sequence, *, layer: int = 0, head: int = 0, causal: bool = False,
                 model: Optional[torch.nn.Module] = None) -> Dict[str, Any]:
    """The initial state of a ``"steps"`` view: one head of one layer, every stage of its computation.

    Args:
        name: ``"all-MiniLM-L6-v2"`` or a name of :data:`mha_lib.tasks.SHIPPED` trained on chapter 1's
            :class:`~mha_lib.tasks.PrevMarkedTask` (``"ch1-h4"``; the site ships seed 0).
        sequence: the text (MiniLM) or ``{"ids", "types"}`` (a toy model), as :func:`steps_readings`.
        layer, head: shown first; causal: as :func:`steps_readings`.
        model: the loaded model (MiniLM: ``load_bert()``'s; a toy: ``tasks.load_trained(name)``), or None to load it.

    Returns:
        a dict with ``models`` (``[name]``), ``kind`` ("bert" or "toy"), ``num_layers``, ``num_heads``,
        ``d_model``, ``d_k``, ``max_tokens`` (the most tokens the model reads), ``layer``, ``head``, ``causal``,
        ``text`` (MiniLM) or ``ids``, ``types`` and ``task`` (``{vocab_size, seq_len, op}``, a toy), and the
        keys of :func:`steps_readings`.

    Raises:
        ValueError: an unknown name or one of another task; a ``model`` that is not the named one's kind;
            bad ``sequence``, ``layer``, ``head`` or ``causal`` (as :func:`steps_readings`).
    """
    if name == MINILM_ID:
        if model is None:
            model, _ = load_bert(verbose=False)
        _check_bert(model)
        extra = {"kind": "bert", "text": _check_text(sequence, "sequence"), "max_tokens": model.tokenizer.max_length}
    elif isinstance(name, str) and name in T.SHIPPED:
        spec = T.SHIPPED[name]
        task = spec.make_task()
        if not isinstance(task, T.PrevMarkedTask):
            raise ValueError(f"{name!r} was trained on {task.to_dict()}: a steps view runs MiniLM or chapter 1's models")
        model = T.load_trained(spec) if model is None else model
        if not isinstance(model, TokenClassifier):
            raise ValueError(f"model must be {name!r}'s TokenClassifier, got {type(model).__name__}")
        ids, types = _toy_sequence(sequence, task)
        extra = {"kind": "toy", "ids": ids, "types": types, "max_tokens": task.seq_len,
                 "task": {"vocab_size": task.vocab_size, "seq_len": task.seq_len, "op": task.op}}
        sequence = {"ids": ids, "types": types}
    else:
        raise ValueError(f"name must be {MINILM_ID!r} or a shipped chapter-1 model (mha_lib.tasks.SHIPPED), got "
                         f"{name!r:.60}")
    encoder = getattr(model, "encoder", model)
    attn = encoder.blocks[0].attn
    readings = steps_readings(model, sequence, layer=layer, head=head, causal=causal)
    return {"models": [name], "num_layers": len(encoder.blocks), "num_heads": attn.num_heads,
            "d_model": attn.d_model, "d_k": attn.head_dim, "layer": int(layer), "head": int(head),
            "causal": bool(causal), **extra, **readings}



def parse_steps_id(model_id: Any) -> Optional[tuple]:
    """``(base id, layer)`` of a steps file's id (``"all-MiniLM-L6-v2.attn3"`` -> ``("all-MiniLM-L6-v2", 3)``), or None."""
    if not isinstance(model_id, str):
        return None
    base, sep, layer = model_id.rpartition(STEPS_SUFFIX)
    if sep and base and layer.isascii() and layer.isdigit() and len(layer) <= 3:
        return base, int(layer)
    return None
