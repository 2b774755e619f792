"""FlashAttention's idea in plain PyTorch: attention in tiles with an online softmax (Dao et al. 2022).

Standard attention writes the (L, S) score matrix to memory, reads it back for the softmax, writes
the weights and reads them again for the product with V. FlashAttention never forms that matrix:
it walks over blocks of ``block_k`` keys for each block of ``block_q`` queries, keeping per query a
running maximum m, a running sum of exponentials l and an unnormalised output o, and rescales them
when a new block raises the maximum (the "online softmax", Milakov and Gimelshein 2018):

    m_new = max(m, rowmax(S_blk));  l = e^(m - m_new) l + rowsum(e^(S_blk - m_new))
    o = e^(m - m_new) o + e^(S_blk - m_new) V_blk;  at the end, out = o / l

:func:`tiled_attention` is that loop, written to be read: it runs on the CPU at Python speed, and
it is a teaching model of the algorithm, not a fast kernel (``F.scaled_dot_product_attention``
dispatches to the real ones). :func:`hbm_accesses` is the paper's count of slow-memory traffic.
"""
from __future__ import annotations

import math
from typing import Dict, Optional

import torch
from torch import Tensor

from .. import checks
from .windowed import _check

__all__ = ["tiled_attention", "hbm_accesses"]


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, *, block_q: int = 64, block_k: int = 64,
                    is_causal: bool = False, scale: Optional[float] = None) -> Tensor:
    """softmax(scale q k^T) v computed block by block with an online softmax (Dao et al. 2022, Algorithm 1).

    No (L, S) matrix is formed: the largest intermediate is one (block_q, block_k) tile of scores per
    batch and head. Equal to ``F.scaled_dot_product_attention`` within about 1e-6 in float32.

    Args:
        q: (B, H, L, d_k), floating point.
        k: (B, H, S, d_k), same dtype and heads.
        v: (B, H, S, d_v), same dtype.
        block_q: queries per tile (the paper's B_r), an int >= 1.
        block_k: keys per tile (the paper's B_c), an int >= 1.
        is_causal: block key j for query i when j > i + (S - L) (bottom-right aligned, as in
            :mod:`mha_lib.core`); key tiles wholly in the future are skipped, as the kernel does.
        scale: multiplies the scores; default 1 / sqrt(d_k).

    Returns:
        (B, H, L, d_v), ``q.dtype``; the running statistics are kept in float32 for 16-bit inputs.
        A query with no key (possible only with ``is_causal`` and S < L, which the argument checks refuse)
        cannot occur.

    Raises:
        ValueError: tensors that are not 4-D with matching batch, heads and d_k, S < L, dtypes that
            differ or are not floating point, or a block size or ``scale`` out of range.
    """
    _check(q, k, v)
    block_q = checks.positive_int(block_q, "block_q")
    block_k = checks.positive_int(block_k, "block_k")
    is_causal = checks.flag(is_causal, "is_causal")
    B, H, L, d_k = q.shape
    S = k.shape[2]
    scale = d_k ** -0.5 if scale is None else checks.finite_real(scale, "scale", positive=True)
    in_dtype = q.dtype
    work = torch.float32 if in_dtype in (torch.float16, torch.bfloat16) else in_dtype
    out = torch.empty(B, H, L, v.shape[-1], dtype=in_dtype, device=q.device)
    for q0 in range(0, L, block_q):
        q_blk = q[:, :, q0:q0 + block_q].to(work) * scale                       # (B, H, bq, d_k)
        bq = q_blk.shape[2]
        m = torch.full((B, H, bq, 1), float("-inf"), dtype=work, device=q.device)  # running row max
        l = torch.zeros(B, H, bq, 1, dtype=work, device=q.device)                # running sum of exp
        o = torch.zeros(B, H, bq, v.shape[-1], dtype=work, device=q.device)      # unnormalised output
        last_key = q0 + bq - 1 + (S - L)                                          # the block's last query sees up to here
        for k0 in range(0, S, block_k):
            if is_causal and k0 > last_key:
                break                                                             # every later tile is in the future
            s_blk = q_blk @ k[:, :, k0:k0 + block_k].to(work).transpose(-2, -1)  # (B, H, bq, bk)
            if is_causal:
                i = torch.arange(q0, q0 + bq, device=q.device)[:, None] + (S - L)
                j = torch.arange(k0, k0 + s_blk.shape[-1], device=q.device)[None, :]
                s_blk = s_blk.masked_fill(j > i, float("-inf"))
            m_new = torch.maximum(m, s_blk.amax(-1, keepdim=True))               # (B, H, bq, 1)
            p = torch.exp(s_blk - m_new)                                          # (B, H, bq, bk)
            correction = torch.exp(m - m_new)                                     # rescales what came before
            l = correction * l + p.sum(-1, keepdim=True)
            o = correction * o + p @ v[:, :, k0:k0 + block_k].to(work)
            m = m_new
        out[:, :, q0:q0 + bq] = (o / l).to(in_dtype)
    return out


def hbm_accesses(seq_len: int, head_dim: int, sram_elements: int) -> Dict[str, float]:
    """Slow-memory (HBM) traffic of one head's attention, in elements read and written, as Dao et al.
    2022 count it (Theorem 2): standard attention Theta(N d + N^2), FlashAttention Theta(N^2 d^2 / M).

    The counts follow the paper's algorithms term by term: standard attention (its Algorithm 0) reads
    Q and K (2 N d), writes S, reads it, writes P and reads it again (4 N^2), reads V (N d) and writes
    O (N d): 4 N d + 4 N^2. FlashAttention (Algorithm 1) reads K and V once (2 N d) and, for each of
    its T_c = ceil(N / B_c) key blocks of B_c = ceil(M / (4 d)) keys (the paper's block size), reads Q,
    reads O and writes O (3 N d): 2 N d + 3 N d T_c, about 12 N^2 d^2 / M. The running statistics l and m (2 N per block)
    are left out. A model of the traffic, not a measurement.

    Args:
        seq_len: N, an int >= 1.
        head_dim: d, an int >= 1.
        sram_elements: M, the on-chip memory in elements, an int >= 4 d (at least one key per block).

    Returns:
        ``{"standard": elements, "flash": elements, "ratio": standard / flash}`` (floats).

    Raises:
        ValueError: a size that is not an int in range (naming it).
    """
    N = checks.positive_int(seq_len, "seq_len")
    d = checks.positive_int(head_dim, "head_dim")
    M = checks.positive_int(sram_elements, "sram_elements")
    if M < 4 * d:
        raise ValueError(f"sram_elements={M} < 4 * head_dim = {4 * d}: a key block needs at least one key")
    standard = 4 * N * d + 4 * N * N
    blocks = math.ceil(N / math.ceil(M / (4 * d)))  # T_c = ceil(N / B_c), B_c = ceil(M / 4d)
    flash = 2 * N * d + 3 * N * d * blocks
    return {"standard": float(standard), "flash": float(flash), "ratio": standard / flash}
