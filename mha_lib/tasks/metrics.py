"""Running a model on a task's batches: the one loss/accuracy pair of every token classifier.

:func:`per_example_loss` and :func:`accuracy` serve training (:mod:`mha_lib.train`), pruning
(:mod:`mha_lib.pruning`'s ``loss_fn`` / ``metric_fn``) and the chapters alike.
"""
from __future__ import annotations

from typing import Mapping, Tuple

import torch
from torch import Tensor

from .. import checks
from .batch import EVAL_SEED, IGNORE_INDEX, TaskBatch
from .prev_marked import PrevMarkedTask


# ----------------------------------------------------------------------------- running a model
def _model_inputs(batch) -> Tuple[dict, Tensor]:
    """(forward keywords, labels) of a :class:`TaskBatch`, an ``(input_ids, labels[,
    key_padding_mask])`` tuple or a dict with those keys."""
    if isinstance(batch, TaskBatch):
        inputs = {"input_ids": batch.input_ids, **(batch.inputs or {})}
        if batch.token_type_ids is not None:
            inputs["token_type_ids"] = batch.token_type_ids
        return inputs, batch.labels
    if isinstance(batch, Mapping) and "input_ids" in batch and "labels" in batch:
        return {"input_ids": batch["input_ids"], "key_padding_mask": batch.get("key_padding_mask")}, batch["labels"]
    if isinstance(batch, (tuple, list)) and len(batch) in (2, 3) and all(isinstance(t, Tensor) for t in batch):
        return {"input_ids": batch[0], "key_padding_mask": batch[2] if len(batch) == 3 else None}, batch[1]
    raise ValueError(
        "a batch must be a TaskBatch, (input_ids, labels), (input_ids, labels, key_padding_mask) or a dict "
        f"with those keys; got {type(batch).__name__}"
    )


def logits(model: torch.nn.Module, batch, head_mask=None, **kwargs) -> Tensor:
    """Per-position class scores (B, L, C) of a TokenClassifier on a batch (see :func:`per_example_loss`).

    ``head_mask`` and any other keyword go to the model's forward."""
    inputs, _ = _model_inputs(batch)
    ids = inputs.pop("input_ids")
    return model(ids, **inputs, head_mask=head_mask, **kwargs).logits


def per_example_loss(model: torch.nn.Module, batch, head_mask=None) -> Tensor:
    """Each sequence's mean cross-entropy (nats) over its labelled positions: float (B,).

    A pooled classifier (logits (B, C), labels (B,)) gives each sequence's cross-entropy.

    The ONE loss of mha_lib's token classifiers. It has the ``loss_fn(model, batch,
    head_mask)`` signature of ``mha_lib.pruning.head_importance``.

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier`.
        batch: a :class:`TaskBatch`, or ``(input_ids (B, L) long, labels (B, L) long[,
            key_padding_mask (B, L) bool])``, or a dict with those keys. Labels equal to
            ``IGNORE_INDEX`` (-100) do not count.
        head_mask: per-layer gates, passed to the model.

    Raises:
        ValueError: a malformed batch; labels that are not an integer tensor of the logits'
            shape without C ((B, L), or (B,) pooled) or hold values outside [0, C) (other than
            ``IGNORE_INDEX`` per position), naming the shape or the values; a sequence with no
            labelled position, or logits holding
            NaN or inf (saying how many): a loss of them would be NaN, and so every gradient.
    """
    out = logits(model, batch, head_mask)  # (B, L, C), or (B, C) for a pooled classifier
    _check_finite_logits(out, "per_example_loss")
    _, labels = _model_inputs(batch)
    _check_labels(labels, out, "per_example_loss")
    if out.dim() == 2:  # one label per sequence (an image classifier)
        return torch.nn.functional.cross_entropy(out, labels, reduction="none")  # (B,)
    per_token = torch.nn.functional.cross_entropy(
        out.transpose(1, 2), labels, ignore_index=IGNORE_INDEX, reduction="none"
    )  # (B, L)
    counted = (labels != IGNORE_INDEX).sum(1)  # (B,)
    if bool((counted == 0).any()):
        raise ValueError("per_example_loss: a sequence has no position with a label")
    return per_token.sum(1) / counted


def _check_finite_logits(scores: Tensor, where: str) -> None:
    """Refuse NaN or inf logits (a diverged or corrupted model): their arg-max and their loss mean
    nothing. Skipped inside torch.func transforms and exporters, which cannot read values."""
    if checks.tracing():
        return
    bad = int((~torch.isfinite(scores.detach())).sum())
    if bad:
        raise ValueError(f"{where}: {bad} of {scores.numel()} logits are non-finite (NaN or inf); the model's "
                         f"weights or inputs hold non-finite values, or its training diverged")


def _check_labels(labels: Tensor, scores: Tensor, where: str) -> None:
    """The labels of logits ``scores`` (B, L, C) per position, or (B, C) pooled: an integer tensor
    of shape ``scores.shape[:-1]`` ((B, L), or (B,)), each value a class in [0, C) or, per
    position only, ``IGNORE_INDEX`` (-100: not counted). ValueError naming the shape or the values
    otherwise: broadcasting (B, 1) or (L,) labels, or comparing float, bool or out-of-range labels
    with the arg-max, would give an accuracy that means nothing (even above 1)."""
    C = scores.shape[-1]
    shape = tuple(scores.shape[:-1])
    axes = "(B,)" if scores.dim() == 2 else "(B, L)"
    if not isinstance(labels, Tensor) or tuple(labels.shape) != shape or labels.is_floating_point() \
            or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"{where}: labels must be an integer tensor of shape {axes} = {shape} (the logits' "
                         f"{tuple(scores.shape)} without C), got {getattr(labels, 'dtype', type(labels).__name__)} "
                         f"{tuple(getattr(labels, 'shape', ()))}")
    checks.has_values(labels, "labels")
    if checks.tracing() or not labels.numel():
        return
    ignored = (labels == IGNORE_INDEX) if scores.dim() == 3 else torch.zeros_like(labels, dtype=torch.bool)
    bad = ((labels < 0) | (labels >= C)) & ~ignored
    if bool(bad.any()):
        values = sorted(set(labels[bad].tolist()))[:5]
        allowed = f"[0, {C})" + (f" or IGNORE_INDEX={IGNORE_INDEX}" if scores.dim() == 3 else "")
        raise ValueError(f"{where}: labels must lie in {allowed}; got {int(bad.sum())} other value(s), e.g. {values}")


@torch.no_grad()
def accuracy(model: torch.nn.Module, batch, head_mask=None, batch_size: int = 1024) -> float:
    """Fraction of labelled positions whose arg-max class is right, in [0, 1].

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier`, run in its current mode (call
            ``model.eval()`` first when it has dropout).
        batch: one batch as for :func:`per_example_loss`, or a list of them. A
            :class:`TaskBatch` runs in chunks of ``batch_size`` sequences on the model's device.
        head_mask: per-layer gates, passed to the model.
        batch_size: a positive integer.

    Raises:
        ValueError: a malformed batch, labels as :func:`per_example_loss` refuses them, a
            ``batch_size`` that is not a positive integer, no labelled position at all, or logits holding NaN or inf
            (saying how many): the arg-max of NaN is an arbitrary class, not a prediction.
    """
    batch_size = checks.positive_int(batch_size, "batch_size")
    device = next(model.parameters()).device
    if isinstance(batch, TaskBatch):
        batches = [batch[i : i + batch_size].to(device) for i in range(0, batch.batch_size, batch_size)]
    elif isinstance(batch, list) and batch and not isinstance(batch[0], Tensor):
        batches = batch
    else:
        batches = [batch]
    correct = total = 0
    for chunk in batches:
        scores = logits(model, chunk, head_mask)  # (b, L, C), or (b, C) pooled
        _check_finite_logits(scores, "accuracy")
        pred = scores.argmax(-1)
        _, labels = _model_inputs(chunk)
        _check_labels(labels, scores, "accuracy")
        keep = labels != IGNORE_INDEX
        correct += int(((pred == labels) & keep).sum())
        total += int(keep.sum())
    if total == 0:
        raise ValueError("accuracy: the batch has no labelled position")
    return correct / total


def evaluate(
    model: torch.nn.Module, task: PrevMarkedTask, num_sequences: int = 2048, seed: int = EVAL_SEED
) -> float:
    """Accuracy on a fixed evaluation set (``task.dataset(num_sequences, seed)``), in eval mode.

    The model's train/eval mode is restored afterwards. Returns a float in [0, 1].
    """
    was_training = model.training
    model.eval()
    try:
        return accuracy(model, task.dataset(num_sequences, seed))
    finally:
        model.train(was_training)
