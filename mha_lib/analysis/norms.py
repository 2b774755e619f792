"""Does a large weight mean a large effect? Kobayashi et al. 2020's norm-based attention maps.

A weight multiplies a value vector, and that vector can be short. Kobayashi et al. 2020,
"Attention is Not Only a Weight: Analyzing Transformers with Vector Norms", split the attention
output of query i into one vector per head h and key j,

    y_i = sum_h sum_j alpha_{h,ij} f_h(x_j) + b^O,    f_h(x) = (x W^V_h + b^V_h) W^O_h,

and read ``||alpha_{h,ij} f_h(x_j)||`` (per head) or ``||sum_h alpha_{h,ij} f_h(x_j)||`` (per
layer) instead of ``alpha``. :func:`attention_contributions` returns the vectors themselves,
which sum (with ``b^O``) to the layer's output.
"""
from __future__ import annotations

import torch
from torch import Tensor


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
        mha: a :class:`mha_lib.core.MultiHeadAttention` (pruned or GQA heads are fine).
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
        mha: a :class:`mha_lib.core.MultiHeadAttention`.
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
        mha: a :class:`mha_lib.core.MultiHeadAttention`.
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
    """Raw weights and norm-weighted maps for every layer of an mha_lib :class:`~mha_lib.model.Encoder`.

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
