"""One self-attention sub-layer, stage by stage: :func:`attention_steps` (a block on its input) and
:func:`layer_steps` (layer ``l`` of a model on a sequence).

Every stage of Vaswani et al. 2017, "Attention Is All You Need", eq. 1 and 2 (section 3.2), as the
tensors a reader can print: for head h with ``d_k = head_dim``,

    Q_h = X W^Q_h + b^Q_h,   K_h = X W^K_h + b^K_h,   V_h = X W^V_h + b^V_h        (L, d_k) each
    S_h = Q_h K_h^T          (L, L)      the raw scores
    S_h / sqrt(d_k)          (L, L)      scaled
    + M                      (L, L)      the mask: 0 allowed, -inf blocked (returned as ``blocked``)
    A_h = softmax(...)       (L, L)      the weights (rows sum to 1; a row with no allowed key is 0)
    head_h = A_h V_h         (L, d_k)
    Concat(head_1, ..., head_H)                        (L, H d_k)
    out = Concat(...) W^O + b^O = sum_h head_h W^O_h + b^O                          (L, d_model)

The stages are computed from the module's own weights, one matrix product each, in float32, with the
mask built by :func:`mha_lib.core.build_attention_mask` (the one mask rule); ``weights`` equals what
:class:`~mha_lib.core.MultiHeadAttention` returns with ``need_weights=True`` and ``out`` its output
(tests/test_steps.py checks both). The pass has no Python branch on tensor values, so it traces to
ONNX unchanged (:func:`mha_lib.export.export_attention_steps`, which the live ``"steps"`` view runs).
"""
from __future__ import annotations

import math
from typing import Dict, Optional

import torch
from torch import Tensor

from .. import checks
from ..core.masks import build_attention_mask
from ..core.multi_head import MultiHeadAttention

#: The stages :func:`attention_steps` returns, in the order of the computation.
STAGES = ("x", "q", "k", "v", "scores", "scaled", "blocked", "weights", "head_out", "concat", "contributions", "out")


def _check_block(block) -> MultiHeadAttention:
    attn = getattr(block, "attn", None)
    if not isinstance(attn, MultiHeadAttention) or not hasattr(block, "norm1"):
        raise ValueError(f"block must be an mha_lib TransformerBlock whose self-attention is a MultiHeadAttention "
                         f"(not multi-head latent attention), got {type(block).__name__} with attn "
                         f"{type(attn).__name__}")
    return attn


def attention_steps(block, hidden: Tensor, *, key_padding_mask: Optional[Tensor] = None,
                    attn_mask: Optional[Tensor] = None, is_causal: bool = False) -> Dict[str, Tensor]:
    """Every stage of a block's self-attention sub-layer on the block's input ``hidden``.

    Args:
        block: an mha_lib :class:`~mha_lib.model.TransformerBlock` (``model.blocks[l]``) whose ``attn``
            is a :class:`~mha_lib.core.MultiHeadAttention` (MHA, GQA, MQA; pruned heads allowed).
        hidden: (B, L, d_model) float, the block's input (``output_hidden_states[l]``). A pre-LN block
            (``norm_first``) applies its first LayerNorm before attention; the stage ``x`` is what the
            attention reads.
        key_padding_mask: (B, L) bool, True = padding, or None.
        attn_mask: bool (True = blocked) or additive float, broadcastable to (B, H, L, L), or None.
        is_causal: block key j for query i when j > i.

    Returns:
        a dict of float32 tensors (``blocked`` bool), in the order of :data:`STAGES`: ``x`` (B, L,
        d_model); ``q``, ``k``, ``v`` (B, H, L, d_k) -- ``k`` and ``v`` given per query head (a GQA
        group's key/value head repeated); ``scores`` = Q K^T and ``scaled`` = Q K^T / sqrt(d_k) (B, H, L,
        L); ``blocked`` (B|1, H|1, L, L) bool, True where the mask holds -inf; ``weights`` (B, H, L, L),
        softmax of ``scaled`` + mask (a row with every key blocked is 0, as mha_lib returns it);
        ``head_out`` (B, H, L, d_k) = weights V; ``concat`` (B, L, H d_k); ``contributions`` (B, H, L,
        d_model), head h's term head_h W^O_h (no bias); ``out`` (B, L, d_model) = concat W^O + b^O.

    Raises:
        ValueError: ``block`` not a TransformerBlock with a MultiHeadAttention; ``hidden`` not (B, L,
            d_model) float; masks of the wrong shape or dtype (as :func:`mha_lib.core.build_attention_mask`).

    Source: Vaswani et al. 2017, eq. 1-2 (section 3.2); the head's blocks of W^O: chapter 2, section 3.
    """
    attn = _check_block(block)
    if not checks.tracing():
        if not isinstance(hidden, Tensor) or hidden.dim() != 3 or hidden.shape[-1] != attn.d_model \
                or not hidden.is_floating_point():
            raise ValueError(f"hidden must be a float (B, L, d_model={attn.d_model}) tensor, got "
                             f"{getattr(hidden, 'shape', type(hidden).__name__)}")
        checks.flag(is_causal, "is_causal")
    B, L, _ = hidden.shape
    H, hd = attn.num_heads, attn.head_dim
    x = (block.norm1(hidden) if block.norm_first else hidden).float()  # (B, L, d_model): what attention reads

    def project(linear, heads):  # (B, L, d_model) -> (B, heads, L, hd)
        y = x @ linear.weight.float().T
        if linear.bias is not None:
            y = y + linear.bias.float()
        return y.view(B, L, heads, hd).transpose(1, 2)

    q = project(attn.q_proj, H)  # (B, H, L, hd)
    kv_index = attn.kv_head_index  # (H,): the key/value head each query head reads
    k = project(attn.k_proj, attn.num_kv_heads).index_select(1, kv_index)  # (B, H, L, hd)
    v = project(attn.v_proj, attn.num_kv_heads).index_select(1, kv_index)  # (B, H, L, hd)
    scores = q @ k.transpose(-2, -1)  # (B, H, L, L)
    scaled = scores / math.sqrt(hd)  # (B, H, L, L)
    mask, empty = build_attention_mask(key_padding_mask=key_padding_mask, attn_mask=attn_mask, is_causal=is_causal,
                                       batch=B, heads=H, q_len=L, k_len=L, dtype=torch.float32, device=x.device)
    if mask is None:  # nothing blocked: a zero mask keeps the outputs' shapes (and the ONNX graph) one
        mask = torch.zeros(1, 1, L, L, device=x.device)
        empty = torch.zeros(1, 1, L, 1, dtype=torch.bool, device=x.device)
    blocked = torch.isneginf(mask) | empty  # (B|1, H|1, L, L): a row of all-blocked keys stays blocked
    weights = torch.softmax(scaled + mask, dim=-1).masked_fill(empty, 0.0)  # (B, H, L, L)
    head_out = weights @ v  # (B, H, L, hd)
    concat = head_out.transpose(1, 2).reshape(B, L, H * hd)  # (B, L, H hd)
    w_o = attn.out_proj.weight.float()  # (d_model, H hd): nn.Linear's (out, in)
    # head h's block of W^O: columns h hd .. (h+1) hd - 1 of out_proj.weight
    contributions = head_out @ w_o.T.reshape(H, hd, -1)  # (B, H, L, hd) @ (H, hd, d_model) -> (B, H, L, d_model)
    out = concat @ w_o.T
    if attn.out_proj.bias is not None:
        out = out + attn.out_proj.bias.float()  # (B, L, d_model)
    return {"x": x, "q": q, "k": k, "v": v, "scores": scores, "scaled": scaled, "blocked": blocked,
            "weights": weights, "head_out": head_out, "concat": concat, "contributions": contributions, "out": out}


@torch.no_grad()
def layer_steps(model, layer: int, input_ids: Tensor, *, token_type_ids: Optional[Tensor] = None,
                key_padding_mask: Optional[Tensor] = None, causal: bool = False) -> Dict[str, Tensor]:
    """:func:`attention_steps` of layer ``layer`` of ``model`` on a sequence: the model runs up to that layer
    (in eval mode, its training flag restored after) and the layer's self-attention is taken apart.

    Args:
        model: an mha_lib :class:`~mha_lib.model.Encoder` (a :class:`~mha_lib.pretrained.BertEncoder`, e.g.
            all-MiniLM-L6-v2) or a :class:`~mha_lib.model.TokenClassifier` (chapter 1's toy models), on
            token ids, without a sparse pattern of its own.
        layer: 0-based, in [0, num_layers).
        input_ids: (B, L) long.
        token_type_ids, key_padding_mask: as the model takes them ((B, L) each), or None.
        causal: apply a causal mask in this layer (the earlier layers run as the model does); a model whose
            config is causal has one anyway.

    Returns:
        the dict of :func:`attention_steps` (the stages of :data:`STAGES`), plus ``hidden`` (B, L,
        d_model), the layer's input.

    Raises:
        ValueError: a model of another kind or with a sparse pattern, a layer out of range, ``causal`` not a
            bool; the model's own errors on bad inputs.
    """
    encoder = getattr(model, "encoder", model)
    blocks = getattr(encoder, "blocks", None)
    if blocks is None or not hasattr(encoder, "config") or encoder.config.patch_dim:
        raise ValueError(f"model must be an mha_lib Encoder, BertEncoder or TokenClassifier on token ids, got "
                         f"{type(model).__name__}")
    cfg = encoder.config
    if cfg.attention_window or cfg.sparse_block or cfg.cross_attention:
        raise ValueError("layer_steps takes a model without a sparse pattern or cross-attention, got attention_window="
                         f"{cfg.attention_window}, sparse_block={cfg.sparse_block}, cross_attention={cfg.cross_attention}")
    layer = checks.as_int(layer, "layer")
    if not 0 <= layer < len(blocks):
        raise ValueError(f"layer={layer} is outside [0, {len(blocks)}) (the model has {len(blocks)} layers)")
    causal = checks.flag(causal, "causal")
    was_training = encoder.training
    encoder.eval()
    try:
        out = encoder(input_ids, token_type_ids=token_type_ids, key_padding_mask=key_padding_mask,
                      output_hidden_states=True)
        hidden = out.hidden_states[layer]  # (B, L, d_model): the block's input
        steps = attention_steps(blocks[layer], hidden, key_padding_mask=key_padding_mask,
                                is_causal=causal or bool(cfg.is_causal))
    finally:
        encoder.train(was_training)
    return {"hidden": hidden.float(), **steps}
