"""The ``"patterns"`` view's numbers (chapter 9): a sparse attention pattern the reader picks, run on the
weights of chapter 9's models, with the mask, the maps and the bytes a KV cache would hold.

Chapter 9's models differ only in the mask their attention was trained with (chapter 5's model saw every
earlier key; ``ch9-window4``, ``ch9-window8`` and ``ch9-sparse4`` a pattern), so each runs under any
pattern as an ``attn_mask``: :func:`pattern_model` loads one without its pattern, :func:`reader_pattern_mask`
builds the mask the page builds, and :func:`patterns_readings` is what the page computes from one run.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Optional, Sequence

import torch

from .. import checks
from .. import tasks as T
from ..efficient import block_sparse_mask, sliding_window_mask
from ..model import EncoderConfig, TokenClassifier
from .induction import _check_ids, induction_readings

#: The suffix of a site model id whose file takes the pattern as an input: ``ch9-window8.pattern``.
PATTERN_SUFFIX = ".pattern"
#: The families the view offers, chapter 5's full-attention model first, with their labels.
PATTERN_FAMILIES = {"ch5-induction-l2": "trained on every earlier key (chapter 5's model)",
                    "ch9-window4": "trained with a window of 4", "ch9-window8": "trained with a window of 8",
                    "ch9-sparse4": "trained block-sparse, blocks of 4"}
#: The block sizes the view offers for BigBird's pattern (each divides chapter 5's 32 positions).
SPARSE_BLOCKS = (2, 4, 8)
_PATTERN_FIELDS = ("attention_window", "attention_sinks", "sparse_block")


def pattern_model(name: str, seed: int = 0) -> TokenClassifier:
    """A shipped family's model with its pattern removed from the config (same weights): it then attends
    to every earlier key unless an ``attn_mask`` says otherwise. What ``export_onnx(..., pattern_input=True)``
    writes for the page.

    Args:
        name: one of ``PATTERN_FAMILIES``: ``"ch5-induction-l2"`` (full causal attention),
            ``"ch9-window4"``, ``"ch9-window8"``, ``"ch9-sparse4"``.
        seed: a shipped seed of that family.

    Returns:
        a :class:`~mha_lib.model.TokenClassifier` in eval mode, float32 on the CPU.

    Raises:
        ValueError: a name that is not one of ``PATTERN_FAMILIES`` (or a seed that was not shipped).
    """
    if name not in PATTERN_FAMILIES:
        raise ValueError(f"name {name!r:.60} is not one of the pattern view's families {list(PATTERN_FAMILIES)}")
    trained = T.load_trained(name, seed)
    cfg = EncoderConfig.from_dict({**trained.encoder.config.to_dict(), **{f: 0 for f in _PATTERN_FIELDS}})
    model = TokenClassifier(cfg, trained.num_classes)
    model.load_state_dict(trained.state_dict())
    return model.eval()


def trained_pattern(name: str) -> dict:
    """The pattern a family was trained with, as the view's pattern dict (see :func:`reader_pattern_mask`):
    its ``attention_window`` and ``attention_sinks``, its ``sparse_block``, or every key.

    Raises:
        KeyError: a name that is not in :data:`mha_lib.tasks.SHIPPED`.
    """
    m = T.SHIPPED[name].model
    if m.get("attention_window"):
        return {"kind": "window", "window": m["attention_window"], "sinks": m.get("attention_sinks", 0), "block": 4}
    if m.get("sparse_block"):
        return {"kind": "sparse", "window": 8, "sinks": 0, "block": m["sparse_block"]}
    return {"kind": "full", "window": 8, "sinks": 0, "block": 4}


def _check_pattern(pattern: Any, seq_len: int) -> dict:
    if not isinstance(pattern, Mapping) or set(pattern) != {"kind", "window", "sinks", "block"}:
        raise ValueError(f"pattern must be {{kind, window, sinks, block}}, got {pattern!r:.80}")
    if pattern["kind"] not in ("full", "window", "sparse"):
        raise ValueError(f"pattern['kind'] = {pattern['kind']!r:.40} is not 'full', 'window' or 'sparse'")
    window = checks.positive_int(pattern["window"], "pattern['window']")
    sinks = checks.nonnegative_int(pattern["sinks"], "pattern['sinks']")
    block = checks.positive_int(pattern["block"], "pattern['block']")
    if window > seq_len or sinks > seq_len or block not in SPARSE_BLOCKS:
        raise ValueError(f"pattern {dict(pattern)} is out of range: window 1 to {seq_len}, sinks 0 to {seq_len}, "
                         f"block one of {list(SPARSE_BLOCKS)}")
    return {"kind": pattern["kind"], "window": window, "sinks": sinks, "block": block}


def reader_pattern_mask(pattern: Mapping, length: int, seq_len: int) -> torch.Tensor:
    """The (L, L) bool mask (True = blocked) of a pattern dict, as the page builds it.

    ``{"kind": "full" | "window" | "sparse", "window": w, "sinks": s, "block": b}``: every key (the causal
    mask is the model's own); :func:`~mha_lib.efficient.sliding_window_mask` with w keys and s sinks; or
    BigBird's :func:`~mha_lib.efficient.block_sparse_mask` on blocks of b, built for ``seq_len`` (seed 0, as
    :meth:`~mha_lib.model.EncoderConfig.attention_pattern`) and cut to the first L positions.

    Raises:
        ValueError: a pattern not of that form or out of range, naming it.
    """
    p = _check_pattern(pattern, seq_len)
    L = checks.positive_int(length, "length")
    if p["kind"] == "window":
        return sliding_window_mask(L, window=p["window"], sinks=p["sinks"])
    if p["kind"] == "sparse":
        return block_sparse_mask(seq_len, block=p["block"], seed=0)[:L, :L]
    return torch.zeros(L, L, dtype=torch.bool)


def sparse_layouts(seq_len: int) -> List[dict]:
    """BigBird's block layout for each of :data:`SPARSE_BLOCKS`: ``{"block": b, "seen": n x n of 0/1}`` (row r
    sees block column c, n = seq_len / b), from which the page builds the token mask (the random blocks come
    from torch's generator, which a page cannot repeat). Built as :meth:`~mha_lib.model.EncoderConfig.attention_pattern`
    builds it (one band block each side, one global block, one random block, seed 0; Zaheer et al. 2020).

    Raises:
        ValueError: a ``seq_len`` that is not a multiple of every block size (from ``block_sparse_mask``).
    """
    out = []
    for b in SPARSE_BLOCKS:
        full = ~block_sparse_mask(seq_len, block=b, seed=0)
        out.append({"block": b, "seen": full[::b, ::b].int().tolist()})
    return out


def pattern_cache_bytes(cfg: Mapping, pattern: Mapping, length: int) -> Dict[str, int]:
    """Bytes a decoder's KV cache holds after ``length`` tokens, every layer, in float16, for the view's
    table: ``"mha"`` (2 H d_k numbers a token), ``"pattern"`` (the window keeps only its last w tokens and
    its s sinks; BigBird's global and random blocks reach back anywhere, so it keeps all), ``"gqa"`` (half the
    key/value heads), ``"mqa"`` (one) and ``"mla"`` (the latent and the RoPE key, chapter 9's latent model).
    Equal to :func:`mha_lib.cost.kv_cache_bytes` and :func:`mha_lib.efficient.latent_kv_cache_bytes`.

    Args:
        cfg: ``{"num_layers", "num_heads", "head_dim", "kv_rank", "rope_dim"}`` (a view config's ``cache``).
        pattern: a pattern dict (:func:`reader_pattern_mask`).
        length: tokens cached, an int >= 1.

    Returns:
        ``{"mha", "pattern", "gqa", "mqa", "mla"}``: bytes (ints).

    Raises:
        ValueError: a length that is not an int >= 1.
    """
    L = checks.positive_int(length, "length")
    per_head = 2 * cfg["head_dim"] * 2 * cfg["num_layers"]  # keys and values, 2 bytes each, every layer
    kept = min(L, pattern["window"] + pattern["sinks"]) if pattern["kind"] == "window" else L
    return {"mha": L * cfg["num_heads"] * per_head, "pattern": kept * cfg["num_heads"] * per_head,
            "gqa": L * (cfg["num_heads"] // 2) * per_head, "mqa": L * per_head,
            "mla": L * (cfg["kv_rank"] + cfg["rope_dim"]) * 2 * cfg["num_layers"]}


@torch.no_grad()
def patterns_readings(model: TokenClassifier, ids: Sequence[int], pattern: Mapping) -> Dict[str, Any]:
    """What the ``"patterns"`` view shows of one model under one pattern: :func:`~mha_lib.live.induction_readings`
    with the pattern's mask (``attentions``, ``predictions``, ``confidence``, ``previous``, ``induction``,
    ``copyable``, ``accuracy``), and ``reach``: for each copyable position i, whether the key a copy needs
    (the one after the earlier occurrence) is visible to query i under the pattern, the causal mask included.

    Raises:
        ValueError: bad ids or pattern (naming them), a model that is not a causal token classifier.
    """
    seq_len = model.encoder.config.max_len
    ids = _check_ids(ids, model.encoder.config.vocab_size, seq_len)
    mask = reader_pattern_mask(pattern, len(ids), seq_len)
    out = induction_readings(model, ids, attn_mask=mask)
    first = {}
    for j in range(len(ids) - 1):
        first.setdefault((ids[j], ids[j + 1]), j)
    out["reach"] = [int(not mask[i, first[(ids[i], ids[i + 1])] + 1]) for i in out["copyable"]]
    return out


def patterns_config(ids: Sequence[int], pattern: Optional[Mapping] = None, *, model: int = 0,
                    models: Optional[Dict[str, TokenClassifier]] = None) -> Dict[str, Any]:
    """The initial state of a ``"patterns"`` view.

    The page shows the reader's sequence (token ids), a choice of weights (``PATTERN_FAMILIES``), a
    pattern (every key, a window of w keys with s sinks, or BigBird's blocks of b), and for them the mask,
    every head's map, the predictions and the bytes a KV cache would hold.

    Args:
        ids: the sequence shown first (2 to 32 token ids of chapter 5's task).
        pattern: the pattern shown first (default: the chosen family's own).
        model: the index of the family shown first.
        models: already loaded :func:`pattern_model` models by family name (default: loaded here).

    Returns:
        a dict with ``models`` (the site ids, ``<family>.pattern``), ``labels``, ``trained`` (each family's
        own pattern), ``model``, ``pattern``, ``layouts`` (``sparse_layouts``: one ``{"block", "seen"}`` per block size), ``task``, ``cache`` (the
        sizes :func:`pattern_cache_bytes` reads), ``ids`` and the keys of :func:`patterns_readings`.

    Raises:
        ValueError: bad ids, pattern or model index (naming them).
    """
    names = list(PATTERN_FAMILIES)
    index = checks.nonnegative_int(model, "model")
    if index >= len(names):
        raise ValueError(f"model={index} is not an index of the view's {len(names)} families")
    task = T.SHIPPED[names[0]].make_task()
    pattern = copy.deepcopy(dict(pattern)) if pattern is not None else trained_pattern(names[index])
    pattern = _check_pattern(pattern, task.seq_len)
    chosen = (models or {}).get(names[index]) or pattern_model(names[index])
    spec = T.SHIPPED["ch9-latent"].model
    cache = {"num_layers": spec["num_layers"], "num_heads": spec["num_heads"],
             "head_dim": spec["d_model"] // spec["num_heads"], "kv_rank": spec["kv_rank"], "rope_dim": spec["rope_dim"]}
    return {"models": [n + PATTERN_SUFFIX for n in names], "labels": [PATTERN_FAMILIES[n] for n in names],
            "trained": [trained_pattern(n) for n in names], "model": index, "pattern": pattern,
            "layouts": sparse_layouts(task.seq_len), "task": {"vocab_size": task.vocab_size, "seq_len": task.seq_len},
            "cache": cache, "ids": list(ids), **patterns_readings(chosen, ids, pattern)}
