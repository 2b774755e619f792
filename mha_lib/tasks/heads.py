"""Head specialisation on a task: each head's share of weight on each relation's target key.
"""
from __future__ import annotations

from typing import List, Tuple

import torch
from torch import Tensor

from .metrics import _model_inputs


# ----------------------------------------------------------------------------- head specialisation
def target_shares(weights: Tensor, targets: Tensor) -> Tensor:
    """Each head's average share of attention weight on each relation's target key.

    For query i of sequence b, head h and relation r, the share is ``weights[b, h, i,
    targets[b, r, i]]``: the weight that lands on the key relation r points at. The result
    averages it over every query that has such a key (targets >= 0). A head that takes one
    relation has share near 1 on it; a head that blends two relations evenly has about 1/2
    on each. Queries where two relations point at the same key count for both. This is the
    task-specific analogue of the per-head statistics of Clark et al. 2019, sec. 3 (see
    ``mha_lib.analysis.relation_shares`` for their token-string relations). Named
    ``relation_shares`` before 0.2.0 (that name still works, with a DeprecationWarning).

    Args:
        weights: (B, H, L, S) float attention weights of one layer (rows sum to 1).
        targets: (B, R, L) long key positions in [0, S), or -1 where a query has no target
            (e.g. :meth:`PrevMarkedTask.relation_targets`).

    Returns:
        float32 tensor (H, R) in [0, 1]; NaN in a column whose relation has no target at all.

    Raises:
        ValueError: on wrong ranks, mismatched B or L, or a target outside [-1, S).
    """
    if weights.dim() != 4:
        raise ValueError(f"weights must be (B, H, L, S), got shape {tuple(weights.shape)}")
    if targets.dim() != 3:
        raise ValueError(f"targets must be (B, R, L), got shape {tuple(targets.shape)}")
    B, H, L, S = weights.shape
    if targets.shape[0] != B or targets.shape[2] != L:
        raise ValueError(
            f"targets shape {tuple(targets.shape)} does not match weights (B, H, L, S) = {tuple(weights.shape)}"
        )
    if targets.numel() and (int(targets.min()) < -1 or int(targets.max()) >= S):
        raise ValueError(f"targets must lie in [-1, S={S}), got min {int(targets.min())} max {int(targets.max())}")
    valid = targets >= 0  # (B, R, L)
    index = targets.clamp_min(0)  # (B, R, L)
    w = weights.detach().float()
    # gathered[b, h, r, i] = weights[b, h, i, targets[b, r, i]]
    idx = index.permute(0, 2, 1)[:, None].expand(B, H, L, -1)  # (B, H, L, R)
    gathered = torch.gather(w, 3, idx).permute(0, 1, 3, 2)  # (B, H, R, L)
    mask = valid[:, None].to(w.dtype)  # (B, 1, R, L)
    total = (gathered * mask).sum(dim=(0, 3))  # (H, R)
    count = mask.sum(dim=(0, 3))  # (1, R)
    return total / count  # 0/0 -> NaN for a relation without targets


@torch.no_grad()
def attention_maps(model: torch.nn.Module, batch, head_mask=None) -> Tuple[Tensor, ...]:
    """Per-layer, per-head attention weights of a token classifier on a batch.

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier` (or anything taking the same inputs).
        batch: as for :func:`per_example_loss`.
        head_mask: per-layer gates (the weights are taken before them).

    Returns:
        A tuple with one (B, H_l, L, L) float tensor per layer, rows summing to 1.

    Raises:
        ValueError: a malformed batch (as :func:`per_example_loss`).
    """
    return logits_and_attentions(model, batch, head_mask)[1]


def logits_and_attentions(model, batch, head_mask=None) -> Tuple[Tensor, Tuple[Tensor, ...]]:
    """``(logits (B, L, C), attentions)`` in one forward pass; see :func:`attention_maps`."""
    inputs, _ = _model_inputs(batch)
    ids = inputs.pop("input_ids")
    out = model(ids, **inputs, head_mask=head_mask, output_attentions=True)
    return out.logits, out.attentions


def best_heads(shares: Tensor) -> Tuple[List[int], List[float]]:
    """For each relation, the head with the largest share, and that share.

    Args:
        shares: (H, R) from :func:`target_shares`.

    Returns:
        ``(heads, values)``: two lists of length R. ``len(set(heads)) == R`` says that the
        relations are taken by different heads.

    Raises:
        ValueError: if ``shares`` is not (H, R) with H >= 1.
    """
    if shares.dim() != 2 or shares.shape[0] < 1:
        raise ValueError(f"shares must be (H, R) with H >= 1, got shape {tuple(shares.shape)}")
    values, heads = shares.max(dim=0)
    return [int(h) for h in heads], [float(v) for v in values]
