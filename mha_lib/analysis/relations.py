"""Where does each head look? Clark et al. 2019's relation shares, and the heads above a threshold.

:func:`relation_shares` measures, for every head, the average share of its attention weight
that lands on the previous token, the next token, the same token, or on tokens such as
``[CLS]``, ``[SEP]`` or ``"."`` (Clark et al. 2019, "What Does BERT Look At?", section 3).
:func:`find_heads` lists the heads above a threshold, labelled ``L{layer}.H{head}`` (0-based).
"""
from __future__ import annotations

from typing import List, NamedTuple, Sequence, Tuple, Union

import torch
from torch import Tensor

from .. import checks


#: The relations of Clark et al. 2019's first analyses: positional offsets and special tokens.
RELATIONS: Tuple[str, ...] = ("previous", "next", "same", "[CLS]", "[SEP]")
_POSITIONAL = {"previous": -1, "same": 0, "next": 1}


def head_label(layer: int, head: int) -> str:
    """The book's head label, ``"L{layer}.H{head}"``, both counted from 0 (Clark et al. count from 1)."""
    return f"L{int(layer)}.H{int(head)}"


# ---------------------------------------------------------------------------------------------
# 1. Where each head looks
# ---------------------------------------------------------------------------------------------


def _as_stack(weights: Union[Tensor, Sequence[Tensor]]) -> Tuple[Tensor, bool]:
    """(layers, B, H, L, S) from one (B, H, L, S) tensor, a (layers, B, H, L, S) tensor or a
    sequence of per-layer (B, H, L, S) tensors; and whether the input was a single layer."""
    if isinstance(weights, Tensor):
        if weights.dim() == 4:
            return weights.unsqueeze(0), True
        if weights.dim() == 5:
            return weights, False
        raise ValueError(
            f"weights must be (B, H, L, S) or (layers, B, H, L, S), got shape {tuple(weights.shape)}"
        )
    layers = list(weights)
    if not layers:
        raise ValueError("weights is an empty sequence: no layers to analyse")
    shapes = {tuple(w.shape) for w in layers}
    if any(w.dim() != 4 for w in layers):
        raise ValueError(f"each layer's weights must be (B, H, L, S), got shapes {sorted(shapes)}")
    if len(shapes) != 1:
        raise ValueError(
            f"layers have different shapes {sorted(shapes)} (pruned to different head counts?); "
            "call relation_shares on each layer's (B, H, L, S) tensor separately"
        )
    return torch.stack(layers), False


def relation_shares(
    weights: Union[Tensor, Sequence[Tensor]],
    tokens: Sequence[Sequence[str]],
    relations: Sequence[str] = RELATIONS,
    *,
    normalize_rows: bool = False,
) -> Tensor:
    """Average share of each head's attention that goes to each relation.

    For a query token i of sequence b, the share of a relation is the weight on the keys it names:
    ``"previous"`` key i-1, ``"next"`` key i+1, ``"same"`` key i; any other string names every key
    whose token equals it (e.g. ``"[CLS]"``, ``"[SEP]"``, ``"."``). The result averages these
    shares over all real query tokens of all sequences, each token counting once; a query for
    which the relation names no key (position 0 has no previous token, a sentence without ``"."``)
    is left out of that relation's average. This follows the per-head statistics of Clark et al.
    2019, section 3 (their figures average over many Wikipedia segments; ours over what you pass).

    Args:
        weights: attention weights, float, rows summing to 1 over real keys: one layer
            (B, H, L, S), a stack (layers, B, H, L, S), or a tuple of per-layer (B, H, L, S) tensors
            of one shape (what ``Encoder(..., output_attentions=True).attentions`` gives). Self-
            attention is assumed: key j and query j are the same token, S >= the real lengths.
        tokens: B lists of token strings, unpadded (``TokenBatch.tokens``); sequence b's real
            length is ``len(tokens[b])``, and its padding rows and columns are ignored.
        relations: names as above; default :data:`RELATIONS`.
        normalize_rows: divide each query row (over real keys) by its sum first. Use it for
            maps whose rows do not sum to 1, such as :func:`norm_weighted_attention`.

    Returns:
        float tensor (H, R) for one layer, or (layers, H, R), in ``relations`` order; NaN where no
        query had a key of that relation (e.g. ``"[CLS]"`` with no [CLS] token anywhere).

    Raises:
        ValueError: a weights shape that is not (B, H, L, S)/(layers, B, H, L, S), a ragged tuple
            of layers, ``len(tokens) != B``, a sequence longer than L or S, no relations, or an
            empty sequence.
    """
    stack, single = _as_stack(weights)  # (layers, B, H, L, S)
    checks.attention_weights(stack, "weights", dims=5)  # NaN here would read as "no key of that relation"
    n_layers, B, H, L, S = stack.shape
    if len(tokens) != B:
        raise ValueError(f"tokens has {len(tokens)} sequences but weights have batch size B={B}")
    relations = list(relations)
    if not relations:
        raise ValueError("relations is empty: name at least one, e.g. 'previous' or '[SEP]'")
    stack = stack.float()
    totals = torch.zeros(n_layers, H, len(relations))
    counts = torch.zeros(len(relations))
    for b, toks in enumerate(tokens):
        n = len(toks)
        if n == 0:
            raise ValueError(f"sequence {b} has no tokens")
        if n > L or n > S:
            raise ValueError(f"sequence {b} has {n} tokens but the weights are only (L, S) = ({L}, {S})")
        w = stack[:, b, :, :n, :n]  # (layers, H, n, n): real queries x real keys
        if normalize_rows:
            w = w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
        for r, rel in enumerate(relations):
            target = torch.zeros(n, n, dtype=w.dtype)  # target[i, j] = 1 if key j is in relation to query i
            if rel in _POSITIONAL:
                offset = _POSITIONAL[rel]
                target = torch.diag(torch.ones(n - abs(offset), dtype=w.dtype), offset)  # key i + offset
            else:
                hits = torch.tensor([t == rel for t in toks], dtype=w.dtype)  # (n,)
                if hits.sum() == 0:
                    continue
                target[:] = hits
            has_key = target.sum(-1) > 0  # (n,): queries for which the relation names a key
            share = (w * target).sum(-1)  # (layers, H, n)
            totals[:, :, r] += share[..., has_key].sum(-1)
            counts[r] += has_key.sum()
    shares = totals / counts  # 0 / 0 -> NaN for relations that never applied
    return shares[0] if single else shares


class HeadFinding(NamedTuple):
    """One head that :func:`find_heads` found: relation, layer, head, share, and its label."""

    relation: str
    layer: int
    head: int
    share: float

    @property
    def label(self) -> str:
        """The head's label, ``"L{layer}.H{head}"`` (0-based, as :func:`head_label`), a str."""
        return head_label(self.layer, self.head)


def find_heads(
    shares: Tensor, relations: Sequence[str] = RELATIONS, *, threshold: float = 0.5
) -> List[HeadFinding]:
    """Heads whose average share of one relation exceeds ``threshold``.

    Args:
        shares: (layers, H, R) or (H, R) (one layer, reported as layer 0), as returned by
            :func:`relation_shares` with the same ``relations``.
        relations: the R relation names, in the order of the last axis.
        threshold: a share in [0, 1]; Clark et al. 2019 use "more than half" (0.5) when they count
            previous- and next-token heads.

    Returns:
        A list of :class:`HeadFinding`, grouped by relation (in ``relations`` order), highest share
        first within a relation. Empty when no head passes.

    Raises:
        ValueError: a shares shape that does not end in R = len(relations), or a threshold outside
            [0, 1].
    """
    if shares.dim() == 2:
        shares = shares.unsqueeze(0)
    relations = list(relations)
    if shares.dim() != 3 or shares.shape[-1] != len(relations):
        raise ValueError(
            f"shares must be (layers, H, R={len(relations)}) for relations {relations}, got {tuple(shares.shape)}"
        )
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    found = []
    for r, rel in enumerate(relations):
        s = shares[..., r]
        hits = [(float(s[l, h]), l, h) for l, h in zip(*torch.nonzero(s > threshold, as_tuple=True))]
        for share, l, h in sorted(hits, key=lambda t: (-t[0], t[1], t[2])):
            found.append(HeadFinding(rel, int(l), int(h), share))
    return found
