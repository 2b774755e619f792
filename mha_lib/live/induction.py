"""The ``"induction"`` view's numbers (chapter 5): :func:`induction_config`, and
:func:`induction_readings`, what the page computes from one run of a checkpoint on the reader's
sequence (with some heads switched off)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import torch

from .. import tasks as T
from ..analysis import induction_score, induction_targets, previous_token_score
from ..model import TokenClassifier
from .configs import _check_toy_model

#: The separator of a checkpoint's model id: ``ch5-induction-l2.step600`` is step 600 of seed 0.
STEP_SEPARATOR = ".step"


def checkpoint_id(name: str, step: int) -> str:
    """The site's id of a training checkpoint: ``f"{name}.step{step}"`` (a file stem under ``_static/models/``)."""
    return f"{name}{STEP_SEPARATOR}{step}"


def copyable_positions(ids: Sequence[int]) -> List[int]:
    """Positions i whose next token a copy can give: an earlier j < i has x_j = x_i and x_{j+1} = x_{i+1}.

    On a sequence of :class:`~mha_lib.tasks.InductionTask` these are the task's labelled positions
    (the second copy of the segment, but its last token) and any repeat by chance. An induction head
    finds them (Olsson et al. 2022): it attends from x_i to the token after x_i's earlier occurrence.

    Args:
        ids: the token ids x_0 .. x_{L-1} (ints).

    Returns:
        the positions i in [0, L - 2], ascending.
    """
    ids = [int(t) for t in ids]
    seen = set()  # bigrams (x_j, x_{j+1}) met so far
    out = []
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) in seen:
            out.append(i)
        seen.add((ids[i], ids[i + 1]))
    return out


def _check_ids(ids: Any, vocab_size: int, max_len: int) -> List[int]:
    if isinstance(ids, torch.Tensor):
        ids = ids.tolist()
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)):
        raise ValueError(f"ids must be a list of token ids, got {type(ids).__name__}: {ids!r:.60}")
    if not 2 <= len(ids) <= max_len:
        raise ValueError(f"ids has {len(ids)} tokens; the model reads 2 to {max_len}")
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab_size:
            raise ValueError(f"ids[{i}] = {t!r:.40} is not a token id in [0, {vocab_size})")
    return list(ids)


def _check_causal_lm(model: Any) -> None:
    if not isinstance(model, TokenClassifier):
        raise ValueError(f"model must be a chapter-5 TokenClassifier (tasks.load_trained('ch5-induction-l2')), got "
                         f"{type(model).__name__}")
    cfg = model.encoder.config
    if not cfg.is_causal or cfg.type_vocab_size or cfg.patch_dim or model.num_classes != cfg.vocab_size:
        raise ValueError(f"model is not a causal language model on tokens (is_causal={cfg.is_causal}, "
                         f"type_vocab_size={cfg.type_vocab_size}, patch_dim={cfg.patch_dim}, "
                         f"{model.num_classes} classes for {cfg.vocab_size} tokens)")


@torch.no_grad()
def induction_readings(model, ids: Sequence[int], head_mask: Optional[Sequence[Sequence[float]]] = None, *,
                       attn_mask: Optional[torch.Tensor] = None) -> Dict[str, Any]:
    """What the ``"induction"`` view shows of one model on one sequence: the page computes the same.

    Args:
        model: a causal token model of chapter 5 (``tasks.load_trained("ch5-induction-l2", step=600)``).
        ids: L token ids, 2 <= L <= the model's ``max_len``.
        head_mask: (num_layers, H) of 0/1, 1 = head on (default all on); a head switched off has its
            output zeroed (``head_mask``), its own weights still drawn.
        attn_mask: an (L, L) bool pattern, True = blocked, ORed with the causal mask (chapter 9's view).

    Returns:
        a dict with ``attentions`` ([layer][head][query][key], causal), ``predictions`` (L: the
        next token each position predicts), ``confidence`` (L: its softmax probability),
        ``previous`` ([layer][head]: :func:`~mha_lib.analysis.previous_token_score` on this
        sequence), ``induction`` ([layer][head]: :func:`~mha_lib.analysis.induction_score`; the
        key is absent when no token occurs twice), ``copyable`` (:func:`copyable_positions`) and
        ``accuracy`` (the share of copyable positions predicted right; absent when there are none).

    Raises:
        ValueError: a model that is not a causal token classifier; ids not 2 to max_len integers in
            [0, vocab_size); a head_mask that is not a (num_layers, H) grid of 0/1.
    """
    _check_causal_lm(model)
    cfg = model.encoder.config
    ids = _check_ids(ids, cfg.vocab_size, cfg.max_len)
    NL, H = len(model.encoder.heads_per_layer), model.encoder.heads_per_layer[0]
    mask = torch.ones(NL, H)
    if head_mask is not None:
        try:
            mask = torch.as_tensor(head_mask).float()
        except (TypeError, ValueError, RuntimeError):
            mask = None
        if mask is None or tuple(mask.shape) != (NL, H) or not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError(f"head_mask must be a ({NL}, {H}) grid of 0/1, got {head_mask!r:.80}")
    was_training = model.training
    model.eval()
    try:
        out = model(torch.tensor([ids]), head_mask=mask, attn_mask=attn_mask, output_attentions=True)  # (1, L, V)
    finally:
        model.train(was_training)
    x = torch.tensor([ids])
    probs = out.logits[0].float().softmax(-1)  # (L, V)
    confidence, predictions = probs.max(-1)
    copyable = copyable_positions(ids)
    result = {"attentions": [w[0].float().tolist() for w in out.attentions], "predictions": predictions.tolist(),
              "confidence": confidence.tolist(),
              "previous": [previous_token_score(w).tolist() for w in out.attentions], "copyable": copyable}
    if bool(induction_targets(x).any()):
        result["induction"] = [induction_score(w, x).tolist() for w in out.attentions]
    if copyable:
        result["accuracy"] = sum(predictions[i].item() == ids[i + 1] for i in copyable) / len(copyable)
    return result


def induction_config(spec_name: str, ids: Sequence[int], *, models: Optional[Dict[int, torch.nn.Module]] = None
                     ) -> Dict[str, Any]:
    """The initial state of an ``"induction"`` view: a shipped family's checkpoints on a sequence.

    The page shows the reader's sequence (edited as numbers), a slider over the training
    checkpoints, a toggle per head, and for the checkpoint chosen every head's map with its
    previous-token and induction scores on the sequence, and the next-token predictions.

    Args:
        spec_name: a name of :data:`mha_lib.tasks.SHIPPED` with ``checkpoints``, trained on
            :class:`~mha_lib.tasks.InductionTask` (chapter 5: ``"ch5-induction-l2"``); the site
            ships the checkpoints of its first seed as ``checkpoint_id(name, step)``.
        ids: the sequence shown first (2 to ``seq_len`` token ids).
        models: already loaded checkpoints ``{step: model}`` (default: each loaded with
            :func:`mha_lib.tasks.load_trained`); only the last step's is run.

    Returns:
        a dict with ``models`` (the checkpoint ids, in step order), ``steps`` (ints),
        ``checkpoint`` (the index of the one shown first: the last), ``task`` (``vocab_size``, ``seq_len``), ``ids``,
        ``mask`` (all heads on) and the keys of :func:`induction_readings` of the last checkpoint
        (``attentions``, ``predictions``, ...).

    Raises:
        ValueError: an unknown name, a family without checkpoints or of another task; bad ids (as
            :func:`induction_readings`); ``models`` not a dict of steps to models of this family.
    """
    if not isinstance(spec_name, str) or spec_name not in T.SHIPPED:
        raise ValueError(f"spec_name {spec_name!r:.60} is not a shipped model (mha_lib.tasks.SHIPPED)")
    spec = T.SHIPPED[spec_name]
    task = spec.make_task()
    if not isinstance(task, T.InductionTask) or not spec.checkpoints:
        raise ValueError(f"{spec_name!r} has no training checkpoints on chapter 5's InductionTask: an induction view "
                         "moves through a family's checkpoints")
    if models is not None and (not isinstance(models, dict) or any(s not in spec.checkpoints for s in models)):
        raise ValueError(f"models must be a dict {{step: model}} with steps from {list(spec.checkpoints)}, got "
                         f"{models!r:.80}")
    for step, given in (models or {}).items():
        _check_toy_model(given, spec, f"models[{step}]", TokenClassifier)
    last = spec.checkpoints[-1]
    model = (models or {}).get(last) or T.load_trained(spec, step=last)
    ids = _check_ids(ids, task.vocab_size, task.seq_len)
    NL, H = spec.model["num_layers"], spec.model["num_heads"]
    return {"models": [checkpoint_id(spec_name, s) for s in spec.checkpoints], "steps": list(spec.checkpoints),
            "checkpoint": len(spec.checkpoints) - 1, "task": {"vocab_size": task.vocab_size, "seq_len": task.seq_len},
            "ids": ids, "mask": [[1] * H for _ in range(NL)], **induction_readings(model, ids)}
