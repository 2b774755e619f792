"""Chapter 5's induction task, and the scores that find the heads solving it.

:class:`InductionTask` repeats a segment; a model predicts the second copy by an induction head
(Olsson et al. 2022) fed by a previous-token head. :func:`previous_token_score` and
:func:`induction_score` measure those two head types from attention weights (they are also
:mod:`mha_lib.analysis` names); the task logs them in its learning curves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

from .. import checks
from .batch import IGNORE_INDEX, TaskBatch, _SeededDataset
from .heads import attention_maps


@dataclass(frozen=True)
class InductionTask(_SeededDataset):
    """Continue a repeat: random tokens in which one segment occurs twice (chapter 5).

    Each sequence of length L holds tokens drawn independently and uniformly from
    {0, ..., V-1}. A segment of r tokens (r drawn per sequence from ``repeat_lengths``),
    starting at position s1, is copied to a later, non-overlapping start s2 >= s1 + r (both
    drawn per sequence), so the distance s2 - s1 varies and no fixed offset finds the copy.

    Labels: the model is asked for the next token only where the repeat makes it predictable,
    at positions i = s2 .. s2 + r - 2 (label x_{i+1}, which equals x_{s1 + (i - s2) + 1}); every
    other label is :data:`IGNORE_INDEX`. Found by the induction mechanism of Elhage et al. 2021
    and Olsson et al. 2022: a previous-token head lets a later head attend from x_i to the key
    *after* x_i's earlier occurrence and copy it. Without such a head (one layer) the label is
    uniform over V tokens, a loss of ln V nats, except where an earlier occurrence of the
    token happens by chance.

    Args:
        vocab_size: V >= 2.
        seq_len: L >= 4.
        repeat_lengths: the segment lengths r to draw from, each >= 2 with 2 r <= L.
        max_distance: None (the book's task: s2 anywhere after the first copy), or D >= every r:
            s2 - s1 <= D, so that every copy lies within D tokens (chapter 9's within-reach test
            of a window of D keys). Left out of :meth:`to_dict` when None.

    Raises:
        ValueError: on a V, L, r or D that breaks these bounds (naming it).
    """

    vocab_size: int = 64
    seq_len: int = 32
    repeat_lengths: Tuple[int, ...] = (3, 4, 5, 6, 7, 8)
    max_distance: Optional[int] = None

    relations = ("previous", "induction")
    kind = "induction"

    def __post_init__(self):
        checks.int_at_least(self.vocab_size, "vocab_size", 2)
        L = checks.int_at_least(self.seq_len, "seq_len", 4)
        if isinstance(self.repeat_lengths, (str, bytes)) or not self.repeat_lengths:
            raise ValueError(f"repeat_lengths must be a non-empty sequence of ints, got {self.repeat_lengths!r}")
        lengths = tuple(checks.int_at_least(r, "repeat_lengths", 2) for r in self.repeat_lengths)
        too_long = [r for r in lengths if 2 * r > L]
        if too_long:
            raise ValueError(f"repeat_lengths {too_long} do not fit twice in seq_len={L}")
        object.__setattr__(self, "repeat_lengths", lengths)
        if self.max_distance is not None:
            D = checks.int_at_least(self.max_distance, "max_distance", 2)
            if D < max(lengths):
                raise ValueError(f"max_distance={D} is shorter than repeat length {max(lengths)}: the copies "
                                 "would overlap")
            object.__setattr__(self, "max_distance", D)

    @property
    def num_classes(self) -> int:
        """C = V (the model predicts a token)."""
        return self.vocab_size

    def sample(self, batch_size: int, generator: Optional[torch.Generator] = None) -> TaskBatch:
        """Draw ``batch_size`` fresh sequences on the CPU (deterministic given ``generator``).

        Returns:
            a :class:`TaskBatch` with ``token_type_ids=None``, ``marked`` = s2 (where the repeat
            starts) and ``source`` = s1 (where the segment first occurs).

        Raises:
            ValueError: if ``batch_size`` is not an int >= 1.
        """
        B = checks.int_at_least(batch_size, "batch_size", 1)
        V, L = self.vocab_size, self.seq_len
        choices = torch.tensor(self.repeat_lengths)
        r = choices[torch.randint(0, len(choices), (B,), generator=generator)]  # (B,)
        s1 = (torch.rand(B, generator=generator) * (L - 2 * r + 1)).long()  # (B,) in [0, L - 2r]
        span = L - 2 * r - s1 + 1  # (B,) choices of s2 in [s1 + r, L - r] ...
        if self.max_distance is not None:  # ... and in [s1 + r, s1 + D]
            span = torch.minimum(span, self.max_distance - r + 1)
        s2 = s1 + r + (torch.rand(B, generator=generator) * span).long()
        x = torch.randint(0, V, (B, L), generator=generator)  # (B, L)
        rows = torch.arange(B)
        labels = torch.full((B, L), IGNORE_INDEX, dtype=torch.long)
        for k in range(int(r.max())):
            inside = k < r  # (B,) sequences whose segment has a k-th token
            x[rows[inside], s2[inside] + k] = x[rows[inside], s1[inside] + k]
        for k in range(int(r.max()) - 1):
            inside = k < r - 1
            labels[rows[inside], s2[inside] + k] = x[rows[inside], s2[inside] + k + 1]
        return TaskBatch(x, None, labels, s2, s1)

    def relation_targets(self, batch: TaskBatch) -> Tensor:
        """The key each relation points at, for every query.

        Returns:
            long tensor (B, R=2, L): ``[:, 0, i] = i - 1`` (previous token; -1 at i = 0) and
            ``[:, 1, i] = s1 + (i - s2) + 1`` (the token after the earlier occurrence) at the
            labelled positions i of the repeat, -1 elsewhere.
        """
        B, L = batch.input_ids.shape
        positions = torch.arange(L, device=batch.input_ids.device).expand(B, L)  # (B, L)
        induction = positions - (batch.marked - batch.source)[:, None] + 1  # (B, L)
        induction = torch.where(batch.labels != IGNORE_INDEX, induction, torch.full_like(induction, -1))
        return torch.stack([positions - 1, induction], dim=1)

    def curve_scores(self, model: torch.nn.Module, batch: TaskBatch) -> Dict[str, list]:
        """Per-layer, per-head previous-token and induction scores on ``batch``, for learning
        curves (:func:`mha_lib.analysis.previous_token_score`, :func:`mha_lib.analysis.induction_score`).

        Returns:
            ``{"previous": [[score of head h of layer l]], "induction": [[...]]}``: nested
            lists (num_layers, H) of floats in [0, 1], JSON-able.
        """
        maps = attention_maps(model, batch)  # per layer (B, H, L, L)
        return {"previous": [[round(float(v), 4) for v in previous_token_score(w)] for w in maps],
                "induction": [[round(float(v), 4) for v in induction_score(w, batch.input_ids)] for w in maps]}

    def tokens(self, batch: TaskBatch, index: int = 0) -> List[str]:
        """Token labels of sequence ``index`` for plot axes; the two copies of the segment are
        marked with a leading ``'`` (first) and ``"`` (second)."""
        ids = batch.input_ids[index].tolist()
        s1, s2 = int(batch.source[index]), int(batch.marked[index])
        r = int((batch.labels[index] != IGNORE_INDEX).sum()) + 1
        return [("'" if s1 <= j < s1 + r else '"' if s2 <= j < s2 + r else "") + str(t) for j, t in enumerate(ids)]

    def to_dict(self) -> dict:
        """JSON-able description, inverse of :func:`task_from_dict`."""
        out = {"kind": self.kind, "vocab_size": self.vocab_size, "seq_len": self.seq_len,
               "repeat_lengths": list(self.repeat_lengths)}
        if self.max_distance is not None:
            out["max_distance"] = self.max_distance
        return out


@torch.no_grad()
def accuracy_by_copy_distance(model: torch.nn.Module, batch: TaskBatch, edges, *,
                              attn_mask: Optional[Tensor] = None) -> Dict[str, Tensor]:
    """Next-token accuracy on :class:`InductionTask`'s labelled positions, split by how far back the copy is.

    Every labelled position of a sequence has its answer d = s2 - s1 tokens back (the distance between the
    two copies): a model that sees only the last w keys can copy it only when the key after the earlier
    occurrence, d - 1 back, is among them (chapter 9). Bin k holds the sequences with
    ``edges[k] <= d < edges[k + 1]``.

    Args:
        model: a causal :class:`~mha_lib.model.TokenClassifier`, run as it is (call ``eval()`` first).
        batch: a :class:`TaskBatch` of :class:`InductionTask` (``marked`` = s2, ``source`` = s1).
        edges: K + 1 ascending ints.
        attn_mask: an optional (L, L) pattern passed to the model (True = blocked).

    Returns:
        ``{"hits": (K,), "count": (K,)}`` long tensors: right predictions and labelled positions per bin.

    Raises:
        ValueError: edges not K + 1 >= 2 ascending ints, a batch without copies (naming what is wrong).
    """
    edges = [checks.as_int(e, "edges") for e in edges] if isinstance(edges, (list, tuple)) else edges
    if not isinstance(edges, list) or len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"edges must be at least two ascending ints, got {edges!r:.80}")
    if not isinstance(batch, TaskBatch) or batch.marked is None or batch.source is None:
        raise ValueError("batch must be an InductionTask batch (marked = s2, source = s1)")
    predicted = model(batch.input_ids, attn_mask=attn_mask).logits.argmax(-1)  # (B, L)
    labelled = batch.labels != IGNORE_INDEX                                      # (B, L)
    right = (predicted == batch.labels) & labelled
    d = (batch.marked - batch.source)[:, None].expand_as(labelled).contiguous()  # (B, L)
    which = torch.bucketize(d, torch.tensor(edges), right=True) - 1             # bin of each position
    inside = labelled & (which >= 0) & (which < len(edges) - 1)
    K = len(edges) - 1
    return {"hits": torch.bincount(which[inside & right], minlength=K),
            "count": torch.bincount(which[inside], minlength=K)}


# ---------------------------------------------------------------------------------------------
# The scores of the heads that solve the task: previous-token and induction heads
# ---------------------------------------------------------------------------------------------
#
# Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits", and Olsson et al.
# 2022, "In-context Learning and Induction Heads": in a causal model, a previous-token head
# (layer 0) writes x_{j-1} into position j; an induction head (layer 1) then matches its query
# token x_i against that and attends to the key j *after* an earlier occurrence of x_i, copying
# x_j. Row-vector convention, as everywhere in mha_lib: scores_ij = x_i W_QK x_j^T / sqrt(hd),
# a head adds alpha_ij x_j W_OV to position i.


def previous_token_score(weights: Tensor) -> Tensor:
    """Each head's mean attention weight on the previous token.

    The score averages ``weights[b, h, i, i-1]`` over every sequence b and query i >= 1: 1 for
    a head that always looks one position back, about 1/i at query i for a uniform causal head.
    It is the "previous" share of :func:`relation_shares` for one layer, as Elhage et al. 2021
    and Olsson et al. 2022 use it to find previous-token heads.

    Args:
        weights: (B, H, L, L) float attention weights of one layer (rows sum to 1), L >= 2.

    Returns:
        float32 tensor (H,) in [0, 1].

    Raises:
        ValueError: a tensor of another rank, non-square maps, L < 2, an empty batch, or
            values that are not attention weights (not float, not finite, negative, rows not
            summing to 1 or 0).
    """
    w = checks.attention_rows(weights)
    return w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))  # diagonal: (B, H, L-1)


def induction_targets(input_ids: Tensor) -> Tensor:
    """Where an induction head should look: key j is a target of query i when j < i and the
    token *before* j is query i's token (x_{j-1} = x_i), i.e. j follows an earlier occurrence.

    Keys j = i (x_{i-1} = x_i) are excluded: the "next token" of that occurrence is the query
    itself.

    Args:
        input_ids: (B, L) integer token ids.

    Returns:
        bool tensor (B, L, L): ``[b, i, j]`` True when key j is an induction target of query i.

    Raises:
        ValueError: not a 2-D integer tensor, or negative ids.
    """
    if not isinstance(input_ids, Tensor) or input_ids.dim() != 2 or input_ids.is_floating_point() \
            or input_ids.is_complex() or input_ids.dtype == torch.bool:
        raise ValueError(f"input_ids must be a (B, L) integer tensor, got "
                         f"{tuple(input_ids.shape) if isinstance(input_ids, Tensor) else type(input_ids).__name__}"
                         f"{' ' + str(input_ids.dtype) if isinstance(input_ids, Tensor) else ''}")
    if input_ids.numel() and int(input_ids.min()) < 0:
        raise ValueError(f"input_ids must be >= 0 (token ids), got {int(input_ids.min())}")
    B, L = input_ids.shape
    before = torch.full_like(input_ids, -1)
    before[:, 1:] = input_ids[:, :-1]  # (B, L): the token before each key, -1 at key 0
    same = input_ids[:, :, None] == before[:, None, :]  # (B, L_query, L_key): x_i == x_{j-1}
    earlier = torch.ones(L, L, dtype=torch.bool, device=input_ids.device).tril(-1)  # j < i
    return same & earlier


def induction_score(weights: Tensor, input_ids: Tensor) -> Tensor:
    """Each head's mean attention weight on induction targets (:func:`induction_targets`).

    For every query i whose token occurred before (at some j - 1 with j < i), the head's
    summed weight on all such keys j; averaged over those queries. On a sequence whose second
    half repeats its first, this is the score of Olsson et al. 2022 (attention from the second
    copy to the token after the first copy); here it also works on a repeat of any length at
    any place, and on a reader's own sequence.

    Args:
        weights: (B, H, L, L) float attention weights of one layer.
        input_ids: (B, L) integer token ids of the same batch.

    Returns:
        float32 tensor (H,) in [0, 1].

    Raises:
        ValueError: on mismatched shapes, weights that are not attention weights (as
            :func:`previous_token_score`), or when no query has an earlier occurrence of its
            token (nothing to score).
    """
    w = checks.attention_rows(weights)
    targets = induction_targets(input_ids)  # (B, L, L)
    if targets.shape != (w.shape[0], w.shape[2], w.shape[3]):
        raise ValueError(f"input_ids {tuple(input_ids.shape)} does not match weights (B, H, L, L) = {tuple(w.shape)}")
    has_target = targets.any(-1)  # (B, L)
    if not bool(has_target.any()):
        raise ValueError("no query's token occurs earlier in its sequence: the induction score is undefined")
    on_targets = (w * targets[:, None].to(w.dtype)).sum(-1)  # (B, H, L)
    return (on_targets * has_target[:, None]).sum(dim=(0, 2)) / has_target.sum()  # (H,)
