"""Voita et al. 2019's head statistics: how sharply a head attends, and at which fixed offset.

:func:`attention_confidence`, :func:`positional_offsets` and :func:`head_attention_stats`
(chapter 4 uses them as a pruning baseline); :func:`local_share_and_spread`, how much weight a head
puts on the query's neighbours and how evenly it spreads the rest ("local" and "global" heads).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from .. import checks
from ..model.heads import attention_layers, kept_mask, num_heads_grid


# ---------------------------------------------------------------------------------------------
# 6. Voita et al. 2019's head statistics: confidence and positional heads
# ---------------------------------------------------------------------------------------------
def _real_queries(weights: Tensor, key_padding_mask: Optional[Tensor]) -> Tensor:
    """(B, L) bool: query rows to count (not padding, and with some weight)."""
    B, H, L, S = weights.shape
    if key_padding_mask is None:
        real = torch.ones(B, L, dtype=torch.bool, device=weights.device)
    else:
        checks.padding_mask(key_padding_mask, (B, S))
        if L != S:
            raise ValueError(f"key_padding_mask marks padded queries only for self-attention (L == S), got L={L}, S={S}")
        real = ~key_padding_mask.to(weights.device)
    # rows whose keys were all blocked have all-zero weights: no max to speak of
    return real & (weights.sum(-1) > 0).any(1)


def _check_map_weights(weights: Tensor) -> None:
    """One layer's (B, H, L, S) weights: floating point, finite, >= 0 (``checks.attention_weights``)."""
    checks.attention_weights(weights, "weights (one layer's (B, H, L, S))", dims=4)


def attention_confidence(weights: Tensor, key_padding_mask: Optional[Tensor] = None,
                         sink_keys: Optional[Tensor] = None) -> Tensor:
    """Voita et al. 2019's confidence: the mean over tokens of each head's largest attention
    weight, leaving out the weight on sink tokens.

    A head whose every query puts almost all its weight on one key has confidence near 1;
    a head that spreads its weight evenly over S keys has 1/S. Voita et al. exclude the
    end-of-sentence token, where their translation model's heads park weight they do not use;
    in BERT-family models [CLS] and [SEP] play that role (Clark et al. 2019), so pass them as
    ``sink_keys``. Without it, a head that parks most of its weight on [CLS] counts as
    confident.

    Args:
        weights: one layer's weights (B, H, L, S), rows summing to 1 (e.g.
            ``model(..., output_attentions=True).attentions[layer]``).
        key_padding_mask: optional (B, S) bool, True = padding; padded query rows are left
            out of the mean (self-attention, L == S). Rows with no allowed key are left out.
        sink_keys: optional (B, S) bool, True = a sink key whose weight does not count: the
            maximum is taken over the other keys.

    Returns:
        float32 tensor (H,), in [0, 1]; (0,) for a layer with no heads.

    Raises:
        ValueError: weights not 4-D; a bad key_padding_mask or sink_keys; no query row to
            average over.
    """
    _check_map_weights(weights)
    if weights.shape[1] == 0:  # a layer with every head pruned
        return torch.zeros(0)
    real = _real_queries(weights, key_padding_mask)  # (B, L)
    if not bool(real.any()):
        raise ValueError("attention_confidence: every query row is padding or fully blocked")
    top = _top_weight(weights.detach(), sink_keys)  # (B, H, L)
    return ((top * real[:, None]).sum((0, 2)) / real.sum()).float().cpu()


def _check_sinks(sink_keys: Optional[Tensor], B: int, S: int) -> None:
    if sink_keys is not None and (not isinstance(sink_keys, Tensor) or sink_keys.dtype != torch.bool
                                  or tuple(sink_keys.shape) != (B, S)):
        raise ValueError(
            f"sink_keys must be a bool tensor (B, S) = ({B}, {S}), True = sink; got "
            f"{getattr(sink_keys, 'dtype', type(sink_keys).__name__)} {tuple(getattr(sink_keys, 'shape', ()))}"
        )


def _top_weight(weights: Tensor, sink_keys: Optional[Tensor]) -> Tensor:
    """(B, H, L): each query's largest weight on a key that is not a sink."""
    if sink_keys is None:
        return weights.amax(-1)
    B, _, _, S = weights.shape
    _check_sinks(sink_keys, B, S)
    return weights.masked_fill(sink_keys.to(weights.device)[:, None, None, :], 0.0).amax(-1)


def local_share_and_spread(weights: Tensor, key_padding_mask: Optional[Tensor] = None,
                           sink_keys: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """How local and how spread out each head is: the share of its weight on the tokens next to the
    query, and the entropy of its rows as a fraction of the most they could have.

    For query i, the share on its neighbours within 1 is the weight on keys i - 1 and i + 1, within 2
    on keys i - 2 ... i + 2 except i; the spread is the row's entropy, -sum_j a_ij log a_ij, divided
    by log(n), n the number of keys it may attend to (so 1 for a uniform row, 0 for a one-hot one).
    With ``sink_keys`` ([CLS], [SEP], "." in BERT-family models, Clark et al. 2019), each row is first
    renormalised over the other keys: a head that parks most of its weight on [SEP] and spreads the
    rest evenly then counts as spread, not as sharp (rows with no weight left are left out). Means are
    over the real query rows of the batch.

    Args:
        weights: one layer's self-attention weights (B, H, L, L), rows summing to 1.
        key_padding_mask: optional (B, L) bool, True = padding: padded keys do not count in n and
            padded query rows are left out.
        sink_keys: optional (B, L) bool, True = a sink key left out as above.

    Returns:
        ``(within_1, within_2, spread)``: three float32 tensors (H,), each in [0, 1].

    Raises:
        ValueError: weights not (B, H, L, L) attention weights; a bad key_padding_mask or sink_keys;
            no query row left to average over.
    """
    _check_map_weights(weights)
    B, H, L, S = weights.shape
    if L != S:
        raise ValueError(f"local_share_and_spread needs self-attention maps (L == S), got L={L}, S={S}")
    _check_sinks(sink_keys, B, S)
    real = _real_queries(weights, key_padding_mask)  # (B, L)
    allowed = torch.ones(B, S, dtype=torch.bool, device=weights.device)
    if key_padding_mask is not None:
        allowed &= ~key_padding_mask.to(weights.device)
    w = weights.detach().double()
    if sink_keys is not None:
        allowed &= ~sink_keys.to(weights.device)
        w = w.masked_fill(~allowed[:, None, None, :], 0.0)
        total = w.sum(-1, keepdim=True)               # (B, H, L, 1)
        real = real & (total.squeeze(-1) > 0).all(1)  # a row with no weight off the sinks: left out
        w = w / total.clamp_min(1e-300)
    if not bool(real.any()):
        raise ValueError("local_share_and_spread: no query row left (padding, blocked rows or only sink weight)")
    offset = (torch.arange(S, device=w.device)[None, :] - torch.arange(L, device=w.device)[:, None]).abs()  # (L, S)
    within_1 = (w * (offset == 1)).sum(-1)                      # (B, H, L)
    within_2 = (w * ((offset >= 1) & (offset <= 2))).sum(-1)
    entropy = -(w * torch.log(w.clamp_min(1e-300))).sum(-1)      # 0 log 0 = 0
    n = allowed.sum(-1).double()                                  # (B,) keys a row may attend to
    spread = entropy / torch.log(n.clamp_min(2))[:, None, None]   # one allowed key: entropy 0, spread 0
    rows = real[:, None, :].double()                              # (B, 1, L)
    mean = lambda x: ((x * rows).sum((0, 2)) / rows.sum((0, 2))).float().cpu()  # noqa: E731
    return mean(within_1), mean(within_2), mean(spread).clamp(0.0, 1.0)


def _offset_counts(weights: Tensor, key_padding_mask: Optional[Tensor]) -> Tuple[List[Counter], int]:
    """Per head, a Counter of (argmax key - query position) over real query rows; and the row count."""
    B, H, L, S = weights.shape
    real = _real_queries(weights, key_padding_mask)  # (B, L)
    # Bottom-right alignment (as mha_lib's is_causal): query i sits at key position i + S - L.
    pos = torch.arange(L, device=weights.device) + (S - L)
    offsets = weights.detach().argmax(-1) - pos  # (B, H, L)
    counts = []
    for h in range(H):
        values, n = torch.unique(offsets[:, h][real], return_counts=True)
        counts.append(Counter(dict(zip(values.tolist(), n.tolist()))))
    return counts, int(real.sum())


def _top_offsets(counts: List[Counter], rows: int) -> Tuple[Tensor, Tensor]:
    offset = torch.zeros(len(counts), dtype=torch.long)
    fraction = torch.zeros(len(counts))
    for h, c in enumerate(counts):
        if c and rows:
            # most frequent offset; ties go to the offset nearest 0, then the negative one
            best = min(c.items(), key=lambda kv: (-kv[1], abs(kv[0]), kv[0]))
            offset[h], fraction[h] = best[0], best[1] / rows
    return offset, fraction


def positional_offsets(weights: Tensor, key_padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Voita et al. 2019's positional-head test, for one layer.

    For every real query position i, take the key j that gets the head's largest weight
    and its relative offset j - i. A head is *positional* when one fixed offset (in their
    paper, -1 or +1: the previous or next token) wins at least 90% of the time.

    Args:
        weights: one layer's weights (B, H, L, S). When L != S, query i is aligned with key
            i + S - L (a KV-cache step).
        key_padding_mask: optional (B, S) bool, True = padding (query rows left out too).

    Returns:
        ``(offset, fraction)``: long (H,) the most frequent offset per head (ties: nearest
        0), and float32 (H,) the fraction of query rows whose argmax is at that offset.
        ``fraction >= 0.9`` is Voita's criterion.

    Raises:
        ValueError: as :func:`attention_confidence`.
    """
    _check_map_weights(weights)
    counts, rows = _offset_counts(weights, key_padding_mask)
    if rows == 0:
        raise ValueError("positional_offsets: every query row is padding or fully blocked")
    return _top_offsets(counts, rows)


@dataclass
class HeadStats:
    """Per-head attention statistics over a data set (from :func:`head_attention_stats`).

    Attributes (all (num_layers, H), original head numbers; NaN / 0 at pruned heads):
        confidence: float32, Voita et al.'s confidence (mean max weight).
        offset: long, the most frequent relative offset of the argmax key (j - i).
        offset_fraction: float32, how often the argmax lands on ``offset``.
        num_tokens: number of query rows counted (per layer; the same for every layer).
    """

    confidence: Tensor
    offset: Tensor
    offset_fraction: Tensor
    num_tokens: int

    def positional(self, threshold: float = 0.9, offsets: Optional[Sequence[int]] = None) -> Tensor:
        """The positional heads: those whose argmax sits on one fixed offset >= ``threshold`` of the time.

        Args:
            threshold: the fraction of query rows, in (0, 1] (Voita et al. 2019: 0.9).
            offsets: the offsets that count (Voita et al. report -1 and +1); None (default):
                any, including 0 = the token itself.

        Returns:
            bool (num_layers, H); False at pruned heads.

        Raises:
            ValueError: ``threshold`` outside (0, 1] (naming it).
        """
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        ok = self.offset_fraction >= threshold
        if offsets is not None:
            ok &= torch.isin(self.offset, torch.tensor(list(offsets), dtype=torch.long))
        return ok


@torch.no_grad()
def head_attention_stats(
    model: nn.Module,
    batches: Iterable[Any],
    attentions_fn: Callable[[nn.Module, Any], Tuple[Sequence[Tensor], Optional[Tensor]]],
) -> HeadStats:
    """Confidence and positional statistics of every head, pooled over a data set.

    The two criteria of Voita, Talbot, Moiseev, Sennrich and Titov 2019, "Analyzing
    Multi-Head Self-Attention: Specialized Heads Do the Heavy Lifting, the Rest Can Be
    Pruned" (ACL): a head's confidence is the mean over tokens of its largest attention
    weight, and a head is positional when one relative offset is its most-attended key for
    most tokens (at least 90% of them in the paper). See :func:`attention_confidence` and
    :func:`positional_offsets` for the per-batch versions.

    Args:
        model: see :func:`~mha_lib.pruning.attention_layers`.
        batches: iterable of batches passed to ``attentions_fn``.
        attentions_fn: ``attentions_fn(model, batch) -> (attentions, key_padding_mask)``
            or ``(attentions, key_padding_mask, sink_keys)``: the per-layer weights (each
            (B, H_l, L, L), kept-head order, e.g. ``model(x, output_attentions=True).attentions``),
            a (B, L) bool padding mask or None, and optionally a (B, L) bool mask of sink
            tokens whose weight the confidence leaves out (Voita et al. leave out EOS; for
            BERT-family models pass [CLS] and [SEP]; see :func:`attention_confidence`).

    Returns:
        :class:`HeadStats`. Every token of every batch counts once (batches are pooled,
        not averaged).

    Raises:
        ValueError: no batches; a layer count or head count that does not match the model.
    """
    layers = attention_layers(model)
    n, H = num_heads_grid(model)
    conf_sum = torch.zeros(n, H, dtype=torch.float64)
    counts = [[Counter() for _ in range(H)] for _ in range(n)]
    rows = [0] * n  # query rows counted per layer (the same in every layer with heads)
    seen = False
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            seen = True
            returned = attentions_fn(model, batch)
            attentions, kpm = returned[0], returned[1]
            sinks = returned[2] if len(returned) > 2 else None
            if attentions is None or len(attentions) != n:
                raise ValueError(
                    f"attentions_fn returned {0 if attentions is None else len(attentions)} layers, "
                    f"the model has {n}"
                )
            for i, (a, w) in enumerate(zip(layers, attentions)):
                _check_map_weights(w)
                if w.shape[1] != len(a.kept_heads):
                    raise ValueError(f"layer {i}: weights have {w.shape[1]} heads, the layer keeps {len(a.kept_heads)}")
                if not a.kept_heads:
                    continue
                real = _real_queries(w, kpm)  # (B, L)
                conf_sum[i, a.kept_heads] += (_top_weight(w, sinks) * real[:, None]).sum((0, 2)).double().cpu()
                c, r = _offset_counts(w, kpm)
                rows[i] += r
                for j, h in enumerate(a.kept_heads):
                    counts[i][h].update(c[j])
    finally:
        model.train(was_training)
    if not seen or max(rows) == 0:
        raise ValueError("head_attention_stats got no batches (or no real tokens)")
    exists = kept_mask(model)
    denom = torch.tensor(rows, dtype=torch.float64).clamp_min(1)[:, None]
    confidence = (conf_sum / denom).float()
    offset = torch.zeros(n, H, dtype=torch.long)
    fraction = torch.zeros(n, H)
    for i in range(n):
        offset[i], fraction[i] = _top_offsets(counts[i], rows[i])
    confidence[exists == 0] = float("nan")
    fraction[exists == 0] = float("nan")
    return HeadStats(confidence, offset, fraction, max(rows))
