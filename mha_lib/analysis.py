"""Reading heads: where their weight goes, and how much their values actually move.

Two questions a reader asks of a trained model, each with one function family:

1. **Where does each head look?** :func:`relation_shares` measures, for every head, the average
   share of its attention weight that lands on the previous token, the next token, the same
   token, or on tokens such as ``[CLS]``, ``[SEP]`` or ``"."`` -- the statistics of Clark et al.
   2019, "What Does BERT Look At?", section 3. :func:`find_heads` lists the heads above a
   threshold, labelled ``L{layer}.H{head}`` (both 0-based).

2. **Are the heads really different?** :func:`tie_heads` forces every head of a
   :class:`MultiHeadAttention` to share one head's W^Q_i, W^K_i, W^V_i (kept tied during
   training), and :func:`merge_tied_heads` turns such a layer into the single head of width
   d_model/H that it equals: Concat(h, ..., h) W^O = h sum_i W^O_i. Chapter 2 uses the pair to
   show that multi-head attention is not H copies of one head.

3. **Does a large weight mean a large effect?** Not necessarily: a weight multiplies a value
   vector, and that vector can be short. Kobayashi et al. 2020, "Attention is Not Only a Weight:
   Analyzing Transformers with Vector Norms", split the attention output of query i into one
   vector per head h and key j,

       y_i = sum_h sum_j alpha_{h,ij} f_h(x_j) + b^O,    f_h(x) = (x W^V_h + b^V_h) W^O_h,

   and read ``||alpha_{h,ij} f_h(x_j)||`` (per head) or ``||sum_h alpha_{h,ij} f_h(x_j)||`` (per
   layer) instead of ``alpha``. :func:`value_norms`, :func:`norm_weighted_attention` and
   :func:`encoder_norm_maps` compute them from an mha_lib :class:`MultiHeadAttention` /
   :class:`Encoder`; :func:`attention_contributions` returns the vectors themselves, which sum
   (with ``b^O``) to the layer's output -- the identity the tests check.

4. **Which heads work together across layers?** :func:`previous_token_score` and
   :func:`induction_score` find previous-token and induction heads (Olsson et al. 2022);
   :func:`qk_circuit`, :func:`ov_circuit`, :func:`full_ov_circuit` and :func:`copying_score`
   read what a head matches and what it writes from its weights (Elhage et al. 2021).

5. **Heads over image patches.** :func:`attention_rollout` follows attention through the
   layers (Abnar and Zuidema 2020); :func:`offset_kernels` averages a head's weight by the
   key's offset from the query, a "kernel" per head (Cordonnier et al. 2020).

6. **Voita et al. 2019's statistics.** :func:`attention_confidence`, :func:`positional_offsets`
   and :func:`head_attention_stats`: how sharply a head attends, and whether it attends at a
   fixed offset (chapter 4 uses them as a pruning baseline).

Shapes: B batch, H heads (current, i.e. kept, heads after pruning), L queries, S keys,
d_model model width, hd head_dim. Everything works in the dtype of its inputs (float32 in the
book) and on their device.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from . import checks

__all__ = [
    "RELATIONS",
    "head_label",
    "relation_shares",
    "find_heads",
    "HeadFinding",
    "tie_heads",
    "merge_tied_heads",
    "value_norms",
    "attention_contributions",
    "norm_weighted_attention",
    "encoder_norm_maps",
    "previous_token_score",
    "induction_targets",
    "induction_score",
    "qk_circuit",
    "ov_circuit",
    "full_ov_circuit",
    "copying_score",
    "attention_rollout",
    "offset_kernels",
    "attention_confidence",
    "positional_offsets",
    "HeadStats",
    "head_attention_stats",
]

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


# ---------------------------------------------------------------------------------------------
# 2. Tied heads: multi-head attention with the heads' independence taken away
# ---------------------------------------------------------------------------------------------


class _RepeatHead(nn.Module):
    """Parametrization: store one head's rows (hd, ...) and use them for every head (n*hd, ...)."""

    def __init__(self, copies: int, head_dim: int, source: int):
        super().__init__()
        self.copies, self.head_dim, self.source = copies, head_dim, source

    def forward(self, rows: Tensor) -> Tensor:  # (hd, ...) -> (copies*hd, ...)
        return rows.repeat(self.copies, *([1] * (rows.dim() - 1)))

    def right_inverse(self, full: Tensor) -> Tensor:  # (copies*hd, ...) -> the source head's rows
        return full[self.source * self.head_dim:(self.source + 1) * self.head_dim]


def tie_heads(mha, source: int = 0):
    """Make every head of ``mha`` use head ``source``'s W^Q_i, W^K_i, W^V_i (and biases), in place.

    The projections are re-parametrised with ``torch.nn.utils.parametrize``: only the source
    head's rows are stored, and every head reads them, so the heads stay tied while the module
    trains. W^O is left alone. Every head then computes the same weights and output, and the layer
    equals one head of width d_model/H whose output projection is the sum of W^O's H blocks (see
    :func:`merge_tied_heads`). Under GQA/MQA the key/value projections are tied to the KV head
    that ``source`` reads. The state_dict keys become ``q_proj.parametrizations.weight.original``
    and so on; ``parametrize.remove_parametrizations`` unties (keeping the tied values). Do not
    prune a tied module: pruning replaces the projections and drops the tie.

    Args:
        mha: a :class:`mha_lib.attention.MultiHeadAttention`, not yet tied, with no pruned heads.
        source: the head whose projections every head gets (0-based, < num_heads).

    Returns:
        ``mha`` itself, tied.

    Raises:
        ValueError: ``source`` out of range, a module that is already tied, or one with pruned heads.
    """
    if not 0 <= source < mha.num_heads:
        raise ValueError(f"source={source} is out of range for num_heads={mha.num_heads}")
    if mha.pruned_heads:
        raise ValueError(f"tie_heads needs a module without pruned heads, got pruned_heads={sorted(mha.pruned_heads)}")
    if parametrize.is_parametrized(mha.q_proj):
        raise ValueError("this module's projections are already parametrized (tied?)")
    hd = mha.head_dim
    kv_source = mha._kv_index[source]  # a list: readable on the meta device too
    for proj, copies, src in ((mha.q_proj, mha.num_heads, source), (mha.k_proj, mha.num_kv_heads, kv_source),
                              (mha.v_proj, mha.num_kv_heads, kv_source)):
        for name in ("weight", "bias"):
            if getattr(proj, name) is not None:
                parametrize.register_parametrization(proj, name, _RepeatHead(copies, hd, src))
    return mha


@torch.no_grad()
def merge_tied_heads(mha):
    """The single head of width d_model/H that a tied layer (:func:`tie_heads`) equals.

    For tied heads, ``Concat(h, ..., h) W^O = h (W^O_1 + ... + W^O_H)``. The result is a new
    :class:`MultiHeadAttention` with the same d_model and every head but one pruned (so its
    head_dim stays d_model/H), holding the shared W^Q_i, W^K_i, W^V_i and the merged output
    projection ``sum_i W^O_i``. Its outputs equal ``mha``'s (to float rounding), with any mask.

    Args:
        mha: a MultiHeadAttention whose heads are tied (all heads' query, key and value rows
            equal, e.g. after :func:`tie_heads`).

    Returns:
        a new MultiHeadAttention (1 query head, 1 KV head), in ``mha``'s dtype, device and mode.

    Raises:
        ValueError: if the heads of ``mha`` are not tied.
    """
    from .attention import MultiHeadAttention

    H, H_kv, hd, d = mha.num_heads, mha.num_kv_heads, mha.head_dim, mha.d_model
    for proj, copies in ((mha.q_proj, H), (mha.k_proj, H_kv), (mha.v_proj, H_kv)):
        w = proj.weight.view(copies, hd, d)
        if not torch.equal(w, w[:1].expand_as(w)):
            raise ValueError("merge_tied_heads: the heads of this module are not tied (use tie_heads first)")
    single = MultiHeadAttention(d, H, num_kv_heads=H_kv, bias=mha.bias,
                                pruned_heads=range(1, H)).to(mha.out_proj.weight)
    for mine, theirs in ((single.q_proj, mha.q_proj), (single.k_proj, mha.k_proj), (single.v_proj, mha.v_proj)):
        mine.weight.copy_(theirs.weight[:hd])
        if theirs.bias is not None:
            mine.bias.copy_(theirs.bias[:hd])
    single.out_proj.weight.copy_(mha.out_proj.weight.view(d, H, hd).sum(1))  # (d_model, hd): sum_i W^O_i
    if mha.out_proj.bias is not None:
        single.out_proj.bias.copy_(mha.out_proj.bias)
    return single.train(mha.training)


# ---------------------------------------------------------------------------------------------
# 3. Value-norm-weighted attention (Kobayashi et al. 2020)
# ---------------------------------------------------------------------------------------------


def _transformed_values(mha, x: Tensor) -> Tensor:
    """f_h(x_j) = (x_j W^V_h + b^V_h) W^O_h for every current head h: (B, H, S, d_model)."""
    if x.dim() != 3 or x.shape[-1] != mha.d_model:
        raise ValueError(f"x must be (B, S, d_model={mha.d_model}), got {tuple(x.shape)}")
    B, S, _ = x.shape
    H, hd = mha.num_heads, mha.head_dim
    v = mha.v_proj(x).view(B, S, mha.num_kv_heads, hd).transpose(1, 2)  # (B, H_kv, S, hd)
    v = v.index_select(1, mha.kv_head_index)  # (B, H, S, hd): head h reads kv_head_index[h]
    w_o = mha.out_proj.weight.view(mha.d_model, H, hd)  # (d_model, H, hd): column block h is W^O_h
    return torch.einsum("bhsk,ehk->bhse", v, w_o)  # (B, H, S, d_model)


def _check_weights(mha, x: Tensor, weights: Tensor) -> None:
    B, S, _ = x.shape
    if weights.dim() != 4 or weights.shape[0] != B or weights.shape[1] != mha.num_heads or weights.shape[3] != S:
        raise ValueError(
            f"weights must be (B, H, L, S) = ({B}, {mha.num_heads}, L, {S}) for x of shape {tuple(x.shape)}, "
            f"got {tuple(weights.shape)}"
        )


def value_norms(mha, x: Tensor) -> Tensor:
    """``||f_h(x_j)||``: how long a vector each key would send through each head at weight 1.

    ``f_h(x) = (x W^V_h + b^V_h) W^O_h`` is the transformed value vector of Kobayashi,
    Kuribayashi, Yokoi and Inui 2020, "Attention is Not Only a Weight: Analyzing Transformers
    with Vector Norms" (EMNLP, eq. 5); its norm is what their norm-based analysis weighs the
    attention weights by.

    Args:
        mha: a :class:`mha_lib.attention.MultiHeadAttention` (pruned or GQA heads are fine).
        x: (B, S, d_model), the key/value input the module sees (for a pre-LN block, the
            LayerNorm-ed input).

    Returns:
        (B, H, S) float, Euclidean norms in the units of the model's hidden states.

    Raises:
        ValueError: x of the wrong shape.
    """
    return _transformed_values(mha, x).norm(dim=-1)


def attention_contributions(mha, x: Tensor, weights: Tensor) -> Tensor:
    """The vectors ``alpha_{h,ij} f_h(x_j)`` (Kobayashi et al. 2020, eq. 5 split by head).

    Summed over h and j, plus the output bias ``b^O``, they give the attention layer's output:
    ``attention_contributions(m, x, w).sum((1, 3)) + m.out_proj.bias == m(x)[0]`` (self-attention,
    no head_mask). Memory grows as B*H*L*S*d_model floats: use it on short sentences.

    Args:
        mha: a :class:`mha_lib.attention.MultiHeadAttention`.
        x: (B, S, d_model), the key/value input.
        weights: (B, H, L, S), the module's per-head weights for that input
            (``mha(x, need_weights=True)[1]``).

    Returns:
        (B, H, L, S, d_model) float.

    Raises:
        ValueError: x or weights of the wrong shape.
    """
    _check_weights(mha, x, weights)
    f = _transformed_values(mha, x)  # (B, H, S, d_model)
    return weights.unsqueeze(-1) * f.unsqueeze(2)  # (B, H, L, S, d_model)


def norm_weighted_attention(mha, x: Tensor, weights: Tensor, *, combine_heads: bool = False) -> Tensor:
    """Kobayashi et al. 2020's norm-based map, per head or for the whole layer.

    Per head (default): ``||alpha_{h,ij} f_h(x_j)|| = alpha_{h,ij} * ||f_h(x_j)||``.
    With ``combine_heads=True``: ``||sum_h alpha_{h,ij} f_h(x_j)||``, what the whole attention
    layer moves from key j to query i (heads can cancel, so this is not the sum of the per-head
    maps).

    Args:
        mha: a :class:`mha_lib.attention.MultiHeadAttention`.
        x: (B, S, d_model), the key/value input the module sees.
        weights: (B, H, L, S), the module's per-head weights for that input.
        combine_heads: return the layer-level map instead of per-head maps.

    Returns:
        (B, H, L, S), or (B, L, S) with ``combine_heads``; non-negative floats in hidden-state
        units. Rows do not sum to 1: divide by the row sum to compare shares with ``weights``.

    Raises:
        ValueError: x or weights of the wrong shape.
    """
    _check_weights(mha, x, weights)
    if not combine_heads:
        return weights * value_norms(mha, x).unsqueeze(2)  # (B, H, L, S)
    f = _transformed_values(mha, x)  # (B, H, S, d_model)
    summed = torch.einsum("bhls,bhse->blse", weights, f)  # (B, L, S, d_model): sum over heads
    return summed.norm(dim=-1)  # (B, L, S)


@torch.no_grad()
def encoder_norm_maps(encoder, input_ids: Tensor, *, combine_heads: bool = False, **forward_kwargs):
    """Raw weights and norm-weighted maps for every layer of an mha_lib :class:`Encoder`.

    Runs ``encoder(input_ids, output_attentions=True, output_hidden_states=True, ...)`` and, for
    each block, rebuilds the attention input (the block's input; LayerNorm-ed first for pre-LN
    blocks) to compute :func:`norm_weighted_attention`, the norm-based maps of Kobayashi et al.
    2020, "Attention is Not Only a Weight: Analyzing Transformers with Vector Norms" (EMNLP).

    Args:
        encoder: an :class:`mha_lib.model.Encoder` (or ``BertEncoder``) in eval mode.
        input_ids: (B, L) long.
        combine_heads: as in :func:`norm_weighted_attention`.
        **forward_kwargs: passed on (``token_type_ids``, ``key_padding_mask``, ``head_mask``, ...).
            A head_mask scales head outputs after the weights are taken, so the maps ignore it.

    Returns:
        ``(attentions, norm_maps)``: two tuples with one entry per layer; attentions
        (B, H_l, L, L) and norm maps (B, H_l, L, L), or (B, L, L) with ``combine_heads``.

    Raises:
        ValueError: from the encoder, on bad inputs.
    """
    out = encoder(input_ids, output_attentions=True, output_hidden_states=True, **forward_kwargs)
    maps = []
    for block, h, w in zip(encoder.blocks, out.hidden_states, out.attentions):
        x = block.norm1(h) if block.norm_first else h  # what the attention layer saw
        maps.append(norm_weighted_attention(block.attn, x, w, combine_heads=combine_heads))
    return out.attentions, tuple(maps)


# ---------------------------------------------------------------------------------------------
# 4. Heads that work together: previous-token heads, induction heads and their circuits
# ---------------------------------------------------------------------------------------------
#
# Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits", and Olsson et al.
# 2022, "In-context Learning and Induction Heads": in a causal model, a previous-token head
# (layer 0) writes x_{j-1} into position j; an induction head (layer 1) then matches its query
# token x_i against that and attends to the key j *after* an earlier occurrence of x_i, copying
# x_j. Row-vector convention, as everywhere in mha_lib: scores_ij = x_i W_QK x_j^T / sqrt(hd),
# a head adds alpha_ij x_j W_OV to position i.


def _one_layer_weights(weights: Tensor, name: str = "weights") -> Tensor:
    """One layer's (B, H, L, L) attention weights, checked: float, finite, rows summing to 1
    (or to 0: a query with no allowed key)."""
    if not isinstance(weights, Tensor) or weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"{name} must be one layer's (B, H, L, L) tensor, got "
                         f"{tuple(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__}")
    if not weights.is_floating_point():
        raise ValueError(f"{name} must be floating point attention weights, got {weights.dtype}")
    if weights.shape[0] == 0 or weights.shape[1] == 0:
        raise ValueError(f"{name} has no sequence or no head: shape {tuple(weights.shape)}")
    if weights.shape[-1] < 2:
        raise ValueError(f"{name} needs L >= 2 positions, got L = {weights.shape[-1]}")
    w = weights.detach().float()
    if not bool(torch.isfinite(w).all()):
        raise ValueError(f"{name} holds NaN or infinite values")
    sums = w.sum(-1)
    if not bool(((sums - 1).abs() < 1e-3).logical_or(sums.abs() < 1e-6).all()) or bool((w < 0).any()):
        raise ValueError(f"{name} are not attention weights: rows must be >= 0 and sum to 1 (or 0), "
                         f"got row sums from {float(sums.min()):.3g} to {float(sums.max()):.3g}")
    return w


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
    w = _one_layer_weights(weights)
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
    w = _one_layer_weights(weights)
    targets = induction_targets(input_ids)  # (B, L, L)
    if targets.shape != (w.shape[0], w.shape[2], w.shape[3]):
        raise ValueError(f"input_ids {tuple(input_ids.shape)} does not match weights (B, H, L, L) = {tuple(w.shape)}")
    has_target = targets.any(-1)  # (B, L)
    if not bool(has_target.any()):
        raise ValueError("no query's token occurs earlier in its sequence: the induction score is undefined")
    on_targets = (w * targets[:, None].to(w.dtype)).sum(-1)  # (B, H, L)
    return (on_targets * has_target[:, None]).sum(dim=(0, 2)) / has_target.sum()  # (H,)


def _head_matrices(mha, head: int) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """W_Q, W_K, W_V (d_model, hd) and W_O (hd, d_model) of current head ``head`` (GQA-aware)."""
    from .attention import MultiHeadAttention

    if not isinstance(mha, MultiHeadAttention):
        raise ValueError(f"mha must be an mha_lib MultiHeadAttention, got {type(mha).__name__}")
    h = checks.as_int(head, "head")
    if not 0 <= h < mha.num_heads:
        raise ValueError(f"head={h} is outside range(num_heads={mha.num_heads}) of this layer")
    hd = mha.head_dim
    kv = int(mha.kv_head_index[h])  # the key/value head it reads (its group's, also after pruning)
    rows, kv_rows = slice(h * hd, (h + 1) * hd), slice(kv * hd, (kv + 1) * hd)
    w_q = mha.q_proj.weight[rows].T  # (d_model, hd)
    w_k = mha.k_proj.weight[kv_rows].T
    w_v = mha.v_proj.weight[kv_rows].T
    w_o = mha.out_proj.weight[:, rows].T  # (hd, d_model)
    return w_q, w_k, w_v, w_o


@torch.no_grad()
def qk_circuit(mha, head: int) -> Tensor:
    """W_QK = W_Q W_K^T of one head (Elhage et al. 2021): scores_ij = x_i W_QK x_j^T / sqrt(hd),
    biases aside.

    Args:
        mha: a :class:`~mha_lib.attention.MultiHeadAttention`.
        head: a current head index in range(mha.num_heads).

    Returns:
        (d_model, d_model) tensor in the module's dtype, of rank <= head_dim.

    Raises:
        ValueError: ``mha`` not a MultiHeadAttention, or a head index that is not an int in range.
    """
    w_q, w_k, _, _ = _head_matrices(mha, head)
    return w_q @ w_k.T


@torch.no_grad()
def ov_circuit(mha, head: int) -> Tensor:
    """W_OV = W_V W_O of one head (Elhage et al. 2021): the head adds sum_j alpha_ij x_j W_OV to
    position i, biases aside.

    Args, returns and errors as :func:`qk_circuit`.
    """
    _, _, w_v, w_o = _head_matrices(mha, head)
    return w_v @ w_o


@torch.no_grad()
def full_ov_circuit(model, layer: int, head: int) -> Tensor:
    """Token to logit through one head alone: W_E diag(g_l) W_OV diag(g_f) W_U, (V, V).

    Row t is how much the head, attending fully to a token t (through the direct path from the
    embedding, not through earlier layers), raises each output logit. Approximation: each
    LayerNorm is replaced by its elementwise gain g (its centring and its per-position factor
    1/sigma are dropped; the latter rescales rows and can move eigenvalues a little);
    position embeddings and biases are left out, as in Elhage et al. 2021. Pre-LN models
    without an embedding LayerNorm only.

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier` with a token front-end and
            ``num_classes == vocab_size`` (a language model).
        layer: block index; head: current head index of that block.

    Returns:
        float tensor (V, V).

    Raises:
        ValueError: a model without token embeddings or with num_classes != vocab_size, a
            post-LN model or one with an embedding LayerNorm (where the approximation does not
            hold), or a layer or head out of range.
    """

    encoder = model.encoder
    if encoder.token_embedding is None or model.num_classes != encoder.config.vocab_size:
        raise ValueError("full_ov_circuit needs a language model: token embeddings and num_classes == vocab_size")
    if not encoder.config.norm_first or encoder.config.embedding_norm:
        raise ValueError("full_ov_circuit replaces pre-LN LayerNorms by their gains; this model is post-LN or has an "
                         "embedding LayerNorm (norm_first=False or embedding_norm=True)")
    l = checks.as_int(layer, "layer")
    if not 0 <= l < len(encoder.blocks):
        raise ValueError(f"layer={l} is outside range(num_layers={len(encoder.blocks)})")
    block = encoder.blocks[l]
    w_e = encoder.token_embedding.weight  # (V, d_model)
    gain_in = block.norm1.weight if block.norm_first else torch.ones_like(w_e[0])
    gain_out = encoder.final_norm.weight if encoder.final_norm is not None else torch.ones_like(w_e[0])
    w_u = model.readout.weight.T  # (d_model, V)
    return (w_e * gain_in) @ ov_circuit(block.attn, head) @ (gain_out[:, None] * w_u)


def copying_score(matrix: Tensor) -> float:
    """Elhage et al. 2021's copying score: sum of the eigenvalues over the sum of their absolute
    values, ``sum(eig) / sum(abs(eig))``, real part.

    Near 1 when the circuit maps each token mostly to itself (copying: the identity scores 1),
    near -1 when it suppresses it (-identity scores -1), near 0 without a preference.

    Args:
        matrix: a square (n, n) float tensor, e.g. :func:`full_ov_circuit`.

    Returns:
        a float in [-1, 1].

    Raises:
        ValueError: not a square 2-D float tensor, non-finite entries, or all eigenvalues 0.
    """
    if not isinstance(matrix, Tensor) or matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] \
            or not matrix.is_floating_point():
        raise ValueError(f"matrix must be a square 2-D float tensor, got "
                         f"{tuple(matrix.shape) if isinstance(matrix, Tensor) else type(matrix).__name__}")
    if not bool(torch.isfinite(matrix).all()):
        raise ValueError("matrix holds NaN or infinite values")
    eig = torch.linalg.eigvals(matrix.detach().double())  # complex (n,)
    total = float(eig.abs().sum())
    if total == 0.0:
        raise ValueError("every eigenvalue is 0: the copying score is undefined")
    return float(eig.sum().real) / total


# ---------------------------------------------------------------------------------------------
# 5. Heads over image patches: rollout and relative-offset kernels
# ---------------------------------------------------------------------------------------------


def attention_rollout(attentions: Sequence[Tensor]) -> Tensor:
    """Attention rollout of Abnar and Zuidema 2020 ("Quantifying Attention Flow in Transformers").

    Each layer's weights are averaged over heads, the residual connection is added as an
    identity, ``A_l = (mean_h W_l + I) / 2`` (rows sum to 1 again), and the layers are
    multiplied, later layers on the left: ``R = A_n ... A_2 A_1``. Row i of R says how much of
    each input position flows into position i at the top of the stack, through every path.

    Args:
        attentions: per layer (B, H, L, L) float weights (e.g. a model's ``attentions``
            output), all with the same B and L.

    Returns:
        float32 tensor (B, L, L), rows summing to 1 (a query row that no layer lets attend,
        e.g. padding, sums to less).

    Raises:
        ValueError: an empty sequence, or layers that are not (B, H, L, L) attention weights
            of one shape.
    """
    if isinstance(attentions, Tensor) or not isinstance(attentions, (list, tuple)) or not attentions:
        raise ValueError("attentions must be a non-empty list of per-layer (B, H, L, L) tensors")
    layers = [_one_layer_weights(w, f"attentions[{i}]") for i, w in enumerate(attentions)]
    if len({tuple(w.shape[:1] + w.shape[2:]) for w in layers}) != 1:
        raise ValueError(f"layers differ in B or L: {[tuple(w.shape) for w in layers]}")
    B, _, L, _ = layers[0].shape
    eye = torch.eye(L, device=layers[0].device)
    rollout = eye.expand(B, L, L)
    for w in layers:
        a = 0.5 * w.mean(1) + 0.5 * eye  # (B, L, L), rows sum to 1
        rollout = a @ rollout
    return rollout


def offset_kernels(weights: Tensor, grid: int, *, first_patch: int = 1, margin: int = 0) -> Tensor:
    """Each head's mean attention weight as a function of the key's offset from the query, on a
    square grid of patches: a small 2-D "kernel" per head (the view of Cordonnier et al. 2020,
    "On the Relationship between Self-Attention and Convolutional Layers").

    Queries are the patches at least ``margin`` patches away from every border (interior
    queries see every offset up to ``margin`` on all sides); keys are all patches (a [CLS]
    position before them is left out). Each offset is averaged over the queries that have a
    key there, so far offsets, which few queries have, are not shrunk towards 0; within
    ``margin`` every query counts.

    Args:
        weights: (B, H, L, L) float attention weights of one layer, with L = first_patch +
            grid**2 positions, patches in row-major order (as :func:`mha_lib.model.patchify`).
        grid: patches per side, >= 1.
        first_patch: index of the first patch (1 after a [CLS] token, 0 without).
        margin: queries closer than this to a border are skipped; 0 <= 2 margin < grid.

    Returns:
        float32 tensor (H, 2 grid - 1, 2 grid - 1): entry [h, dy + grid - 1, dx + grid - 1] is
        head h's mean weight on the key dy rows and dx columns away from the query, averaged
        over the queries (and sequences) that have a key at that offset; 0 where none has.

    Raises:
        ValueError: weights that are not attention weights, L != first_patch + grid**2, or a
            bad grid, first_patch or margin.
    """

    w = _one_layer_weights(weights)
    g = checks.positive_int(grid, "grid")
    first = checks.nonnegative_int(first_patch, "first_patch")
    m = checks.nonnegative_int(margin, "margin")
    if w.shape[-1] != first + g * g:
        raise ValueError(f"weights have L = {w.shape[-1]} positions, expected first_patch + grid**2 = {first + g * g}")
    if 2 * m >= g:
        raise ValueError(f"margin={m} leaves no interior query on a {g} x {g} grid")
    H = w.shape[1]
    patches = w[:, :, first:, first:].reshape(w.shape[0], H, g, g, g, g)  # (B, H, qy, qx, ky, kx)
    kernel = torch.zeros(H, 2 * g - 1, 2 * g - 1, dtype=w.dtype, device=w.device)
    count = torch.zeros(2 * g - 1, 2 * g - 1, dtype=w.dtype, device=w.device)
    for qy in range(m, g - m):
        for qx in range(m, g - m):
            # keys at offsets (ky - qy, kx - qx) land at rows g-1-qy .. 2g-2-qy of the kernel
            window = (slice(g - 1 - qy, 2 * g - 1 - qy), slice(g - 1 - qx, 2 * g - 1 - qx))
            kernel[(slice(None), *window)] += patches[:, :, qy, qx].mean(0)
            count[window] += 1
    return kernel / count.clamp(min=1)


# ---------------------------------------------------------------------------------------------
# 6. Voita et al. 2019's head statistics: confidence and positional heads
# ---------------------------------------------------------------------------------------------
def _real_queries(weights: Tensor, key_padding_mask: Optional[Tensor]) -> Tensor:
    """(B, L) bool: query rows to count (not padding, and with some weight)."""
    B, H, L, S = weights.shape
    if key_padding_mask is None:
        real = torch.ones(B, L, dtype=torch.bool, device=weights.device)
    else:
        if key_padding_mask.dtype != torch.bool or tuple(key_padding_mask.shape) != (B, S):
            raise ValueError(
                f"key_padding_mask must be bool (B, S) = ({B}, {S}), True = padding; got "
                f"{key_padding_mask.dtype} {tuple(key_padding_mask.shape)}"
            )
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
    if key_padding_mask is not None and not isinstance(key_padding_mask, Tensor):
        raise ValueError(f"key_padding_mask must be a bool tensor (B, S), got {type(key_padding_mask).__name__}")
    real = _real_queries(weights, key_padding_mask)  # (B, L)
    if not bool(real.any()):
        raise ValueError("attention_confidence: every query row is padding or fully blocked")
    top = _top_weight(weights.detach(), sink_keys)  # (B, H, L)
    return ((top * real[:, None]).sum((0, 2)) / real.sum()).float().cpu()


def _top_weight(weights: Tensor, sink_keys: Optional[Tensor]) -> Tensor:
    """(B, H, L): each query's largest weight on a key that is not a sink."""
    if sink_keys is None:
        return weights.amax(-1)
    B, _, _, S = weights.shape
    if not isinstance(sink_keys, Tensor) or sink_keys.dtype != torch.bool or tuple(sink_keys.shape) != (B, S):
        raise ValueError(
            f"sink_keys must be a bool tensor (B, S) = ({B}, {S}), True = sink; got "
            f"{getattr(sink_keys, 'dtype', type(sink_keys).__name__)} {tuple(getattr(sink_keys, 'shape', ()))}"
        )
    return weights.masked_fill(sink_keys.to(weights.device)[:, None, None, :], 0.0).amax(-1)


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
        """bool (num_layers, H): heads whose argmax sits on one fixed offset >= ``threshold`` of
        the time (Voita et al. 2019: 90%). ``offsets`` restricts which offsets count (Voita
        et al. report -1 and +1; default: any, including 0 = the token itself)."""
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
        model: see :func:`attention_layers`.
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
    from .pruning import attention_layers, kept_mask, num_heads_grid

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
