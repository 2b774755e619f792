"""Sliding-window attention without an L x S mask: memory that grows with the window, not with L^2.

Each query reads only its ``window`` most recent keys (Mistral 7B, Jiang et al. 2023), plus the
first ``sinks`` keys if asked (StreamingLLM's attention sinks, Xiao et al. 2023). Instead of
scoring all S keys and masking most of them, :func:`sliding_window_attention` pads the keys on the
left and scores the queries in blocks of ``window``, each against the chunk of 2 window - 1 keys its
queries can reach (``Tensor.unfold``, a view): about (B, H, L, 2 window + sinks) scores instead of
(B, H, L, S), and no copy of the keys per query. The reference is
:func:`mha_lib.core.attention` with :func:`~mha_lib.efficient.patterns.sliding_window_mask`; the
tests check both give the same output.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import checks

__all__ = ["sliding_window_attention"]


def sliding_window_attention(q: Tensor, k: Tensor, v: Tensor, *, window: int, sinks: int = 0,
                             scale: Optional[float] = None) -> Tensor:
    """Causal attention over each query's last ``window`` keys (and the first ``sinks``), in O(L w) memory.

    The scores are computed in blocks of ``window`` queries, each against the 2 window - 1 keys its block
    can reach (Beltagy et al. 2020's sliding chunks); a wasted half of each chunk is masked.

    Query i stands at position p = i + S - L (bottom-right aligned, as ``is_causal``); it attends key
    j when ``p - window < j <= p``, or ``j < sinks`` and ``j <= p``, exactly as
    ``attention(q, k, v, attn_mask=sliding_window_mask(L, S, window=window, sinks=sinks))``.

    A window longer than the S keys is the causal mask: it is cut to S (the same output, at the cost of S
    keys per query, not of the window). No query (L = 0), batch or head gives an empty (B, H, L, d_v)
    tensor, as ``F.scaled_dot_product_attention`` does.

    Args:
        q: (B, H, L, d_k), floating point.
        k: (B, H, S, d_k), S >= L, same dtype and heads (expand grouped K/V heads first).
        v: (B, H, S, d_v), same dtype.
        window: keys per query, itself included; an int >= 1.
        sinks: leading keys every query may attend, an int in [0, S].
        scale: multiplies the scores; default 1 / sqrt(d_k).

    Returns:
        (B, H, L, d_v), ``q.dtype`` (scores and softmax in float32 for 16-bit inputs).

    Raises:
        ValueError: tensors that are not 4-D with matching batch, heads and d_k, S < L, dtypes that
            differ or are not floating point, or ``window``, ``sinks`` or ``scale`` out of range.
    """
    _check(q, k, v)
    B, H, L, d_k = q.shape
    S = k.shape[2]
    window = checks.positive_int(window, "window")
    sinks = checks.nonnegative_int(sinks, "sinks")
    if sinks > S:
        raise ValueError(f"sinks={sinks} is more than the S={S} keys")
    scale = d_k ** -0.5 if scale is None else checks.finite_real(scale, "scale", positive=True)
    if 0 in (B, H, L):  # nothing to score (unfold and the reshapes below refuse empty blocks)
        return q.new_empty(B, H, L, v.shape[-1])
    window = min(window, S)  # every key is in reach already: a longer window sees nothing more
    in_dtype = q.dtype
    work = torch.float32 if in_dtype in (torch.float16, torch.bfloat16) else in_dtype
    q, k, v = q.to(work), k.to(work), v.to(work)

    # Queries in blocks of `window`: block b's queries see keys from its first position - (window - 1) to its
    # last, a chunk of 2 window - 1 keys. Scores are (blocks, window, 2 window - 1): about 2 L window per head,
    # whatever L is, and no copy of the keys per query (Longformer's "sliding chunks").
    w = window
    nb = -(-L // w)                                                      # query blocks
    q_blk = F.pad(q, (0, 0, 0, nb * w - L)).view(B, H, nb, w, d_k)        # (B, H, nb, w, d_k)
    # keys padded w - 1 on the left (no key before position 0) and up to the last chunk's end on the right
    k_pad = F.pad(k, (0, 0, w - 1, nb * w - L))[:, :, S - L:]             # (B, H, nb w + w - 1, d_k)
    v_pad = F.pad(v, (0, 0, w - 1, nb * w - L))[:, :, S - L:]
    k_chunk = k_pad.unfold(2, 2 * w - 1, w)                               # (B, H, nb, d_k, 2w - 1): a view
    v_chunk = v_pad.unfold(2, 2 * w - 1, w).transpose(-2, -1)             # (B, H, nb, 2w - 1, d_v)
    scores = (q_blk @ k_chunk) * scale                                    # (B, H, nb, w, 2w - 1)
    i = torch.arange(w, device=q.device)[:, None]                         # query within its block
    c = torch.arange(2 * w - 1, device=q.device)[None, :]                 # key within the chunk
    key_pos = (torch.arange(nb, device=q.device) * w + (S - L) - (w - 1))[:, None, None] + c  # (nb, 1, 2w - 1)
    blocked = (c < i) | (c > i + w - 1) | (key_pos < 0)                   # (nb, w, 2w - 1): outside the window
    scores = scores.masked_fill(blocked, float("-inf"))
    p = torch.arange(L, device=q.device)[:, None] + (S - L)               # (L, 1): query positions

    if sinks:
        sink_scores = torch.einsum("bhld,bhjd->bhlj", q, k[:, :, :sinks]) * scale   # (B, H, L, sinks)
        j = torch.arange(sinks, device=q.device)[None, :]
        in_window_or_future = (j > p - window) | (j > p)                             # counted once, never ahead
        sink_scores = sink_scores.masked_fill(in_window_or_future, float("-inf"))
        sink_scores = F.pad(sink_scores, (0, 0, 0, nb * w - L), value=float("-inf")).view(B, H, nb, w, sinks)
        weights = torch.softmax(torch.cat([sink_scores, scores], -1), -1)          # (B, H, nb, w, sinks + 2w - 1)
        out = weights[..., :sinks] @ v[:, :, :sinks].unsqueeze(2) + weights[..., sinks:] @ v_chunk
    else:
        weights = torch.softmax(scores, -1)                                         # (B, H, nb, w, 2w - 1)
        out = weights @ v_chunk                                                     # (B, H, nb, w, d_v)
    out = out.reshape(B, H, nb * w, v.shape[-1])[:, :, :L]                                 # (B, H, L, d_v)
    return out.to(in_dtype)


def _check(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor) or t.dim() != 4 or not t.is_floating_point():
            raise ValueError(f"{name} must be a 4-D floating-point tensor (B, H, len, d), got "
                             f"{getattr(t, 'dtype', type(t).__name__)} {tuple(getattr(t, 'shape', ()))}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    (B, H, L, d), (Bk, Hk, S, dk), (Bv, Hv, Sv, _) = q.shape, k.shape, v.shape
    if (Bk, Hk, dk) != (B, H, d) or (Bv, Hv, Sv) != (B, H, S):
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: batch and heads must match, "
                         f"k's d_k must be q's and v's length k's")
    if S < L:
        raise ValueError(f"S={S} keys < L={L} queries: the queries are the last L of the S positions")
    if d == 0:
        raise ValueError("d_k = 0: a head needs at least one feature")
