"""The math: softmax(Q K^T / sqrt(d_k) + mask) V on tensors already split into heads.

:func:`attention` is the functional form (bool masks: True = blocked, as in
``torch.nn.MultiheadAttention``; deliberately not named ``scaled_dot_product_attention``, whose
bool masks mean the opposite); ``_attend`` is the teaching path that
:class:`~mha_lib.core.multi_head.MultiHeadAttention` uses when it returns weights.

Shapes: B batch, H query heads, H_kv key/value heads, G = H // H_kv, L queries, S keys, d_k head
width (see :mod:`mha_lib.core`).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import checks
from .masks import _build_mask, _check_masks


# ---------------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------------


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    scale: Optional[float] = None,
    is_causal: bool = False,
) -> Tuple[Tensor, Tensor]:
    r"""Scaled dot-product attention that also returns the attention weights.

    :math:`\mathrm{out} = \mathrm{dropout}\big(\mathrm{softmax}(s\, q k^\top + M)\big)\, v`, with the
    scale :math:`s = 1/\sqrt{d_k}` by default (Vaswani et al. 2017, eq. 1) and :math:`M` the
    additive mask. ``k`` and ``v`` may have fewer heads than ``q``: query head ``i``
    then uses key/value head ``i // (H // H_kv)`` (grouped-query attention, Ainslie et al. 2023;
    H_kv = 1 is multi-query attention, Shazeer 2019), as ``F.scaled_dot_product_attention(...,
    enable_gqa=True)`` does. Shared keys and values are never copied per query head.

    Args:
        q: (B, H, L, d_k), floating point, d_k >= 1.
        k: (B, H_kv, S, d_k), same dtype; H_kv must divide H.
        v: (B, H_kv, S, d_v), same dtype.
        attn_mask: optional, broadcastable to (B, H, L, S). ``bool``: True = blocked (the OPPOSITE
            of ``F.scaled_dot_product_attention``, which is why this function has another name).
            Floating point: cast to ``q.dtype`` and added to the scores; ``-inf`` blocks. A float
            mask holding only 0s and 1s warns (it is added, so it does not block anything).
        dropout_p: probability in [0, 1) of zeroing an attention weight before it multiplies
            ``v``. Applied whenever > 0 (like torch's function; pass 0.0 in eval).
        scale: multiplies the scores, a finite number > 0; default ``1 / sqrt(d_k)``.
        is_causal: block key j for query i when j > i + (S - L) (bottom-right aligned, see
            :func:`build_attention_mask`). Combined with ``attn_mask`` by OR.

    Returns:
        ``(out, weights)``: out (B, H, L, d_v) in ``q.dtype``; weights (B, H, L, S), taken BEFORE
        dropout, so each row sums to 1, or is all zero for a query whose keys are all blocked
        (that query's output is zero too). For float16/bfloat16 inputs the scores and softmax
        are computed in float32 (a score above 65504 stays finite), then cast back.

    Raises:
        ValueError: on tensors that are not 4-D, mismatched batch/head/feature sizes, d_k = 0,
            H_kv not dividing H, q/k/v of different dtypes (or not floating point), a mask of the
            wrong shape or dtype or holding NaN / +inf, ``dropout_p`` outside [0, 1), ``scale``
            not a finite positive number, or ``is_causal`` not a bool.
    """
    if not checks.tracing():
        _check_attention_args(q, k, v, attn_mask, dropout_p, scale, is_causal)
    B, H, L, d_k = q.shape
    mask, empty_rows = _build_mask(
        None, attn_mask, is_causal, B, H, L, k.shape[2], q.dtype, q.device
    )
    return _attend(q, k, v, mask, empty_rows, dropout_p, d_k**-0.5 if scale is None else scale)


def _attend(q, k, v, mask, empty_rows, dropout_p: float, scale: float) -> Tuple[Tensor, Tensor]:
    """The teaching path: softmax(q k^T * scale + mask) v, step by step.

    q (B, H, L, d_k); k (B, H_kv, S, d_k), v (B, H_kv, S, d_v) with query head i reading key/value
    head i // G. The G query heads of a group are stacked along the query axis, so that one
    matmul serves the whole group and K/V are never repeated (no copy for GQA/MQA).
    """
    B, H, L, d_k = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    if H_kv == 0:  # every head pruned: nothing to attend with
        return q.new_zeros(B, 0, L, v.shape[3]), q.new_zeros(B, 0, L, S)
    G = H // H_kv
    # Scores and softmax in at least float32: in float16 a score above 65504 is inf, and the
    # softmax of a row holding inf is NaN (the fused kernels accumulate in float32 too).
    acc = torch.promote_types(q.dtype, torch.float32)
    q = q.reshape(B, H_kv, G * L, d_k)  # (B, H_kv, G*L, d_k): a group's queries, one after another
    scores = ((q.to(acc) * scale) @ k.to(acc).transpose(-2, -1)).view(B, H, L, S)  # (B, H, L, S)
    if mask is not None:
        scores += mask  # 0 = allowed, -inf = blocked, other floats = the user's bias
    # (B, H, L, S), each row sums to 1; without autograd, in place (saves a (B, H, L, S) buffer)
    in_place = not (scores.requires_grad or checks.in_functorch_transform())
    weights = torch.softmax(scores, -1, out=scores) if in_place else scores.softmax(-1)
    weights = weights.to(q.dtype)  # in [0, 1]: fits every float dtype
    if empty_rows is not None:
        weights = weights.masked_fill(empty_rows, 0.0)  # rows with no allowed key: 0, not 1-hot
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    out = dropped.reshape(B, H_kv, G * L, S) @ v  # (B, H_kv, G*L, d_v)
    return out.view(B, H, L, v.shape[3]), weights  # (B, H, L, d_v), (B, H, L, S)


# ---------------------------------------------------------------------------------------------
# Argument checks of attention()
# ---------------------------------------------------------------------------------------------


def _check_attention_args(q, k, v, attn_mask, dropout_p, scale, is_causal) -> None:
    """The checks of :func:`attention`, in one place."""
    if not all(isinstance(t, Tensor) for t in (q, k, v)) or q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"attention expects 4-D (B, H, L, d_k) tensors, got q {tuple(getattr(q, 'shape', ()))}, "
            f"k {tuple(getattr(k, 'shape', ()))}, v {tuple(getattr(v, 'shape', ()))}"
        )
    B, H, L, d_k = q.shape
    H_kv = k.shape[1]
    if k.shape[0] != B or v.shape[0] != B or k.shape[3] != d_k or v.shape[1:3] != k.shape[1:3]:
        raise ValueError(
            f"attention: shapes do not fit together: q {tuple(q.shape)} (B, H, L, d_k), "
            f"k {tuple(k.shape)} (B, H_kv, S, d_k), v {tuple(v.shape)} (B, H_kv, S, d_v)"
        )
    if d_k == 0:
        raise ValueError(f"attention: d_k = 0 (q {tuple(q.shape)}); the scale 1/sqrt(d_k) is undefined")
    if H_kv == 0 or H % H_kv != 0:
        raise ValueError(f"attention: k/v have {H_kv} heads, which must divide q's {H} heads")
    if not q.is_floating_point() or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(
            f"attention: q, k, v must share one floating-point dtype, got q {q.dtype}, k {k.dtype}, "
            f"v {v.dtype}; cast them first (e.g. k.to(q.dtype))"
        )
    checks.probability(dropout_p, "dropout_p")
    if scale is not None:
        checks.finite_real(scale, "scale", positive=True)
        if not math.isfinite(float(torch.tensor(float(scale), dtype=q.dtype))):
            raise ValueError(f"scale={scale!r} is infinite in {q.dtype}")
    checks.flag(is_causal, "is_causal")
    _check_masks(None, attn_mask, B, H, L, k.shape[2], q.dtype)
