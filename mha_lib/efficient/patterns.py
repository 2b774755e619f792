"""Sparse attention patterns as explicit bool masks (True = blocked, as everywhere in mha_lib).

* :func:`sliding_window_mask`: each query sees the ``window`` most recent keys, itself included
  (Mistral 7B's sliding window, Jiang et al. 2023; Longformer's local attention, Beltagy et al. 2020,
  is the two-sided form, ``causal=False``), optionally plus the first ``sinks`` keys, which stay
  visible to every query (StreamingLLM's attention sinks, Xiao et al. 2023).
* :func:`block_sparse_mask` (from :func:`block_sparse_layout`, its blocks): BigBird's pattern (Zaheer et al. 2020) on blocks of ``block`` tokens:
  a band of neighbouring blocks, a few global blocks that see and are seen by everything, and a few
  random blocks per block row.

These masks are the reference: :func:`~mha_lib.efficient.windowed.sliding_window_attention` computes
the sliding window without ever building one, and its tests compare it with these. Both are
bottom-right aligned, as ``is_causal`` is in :mod:`mha_lib.core` (query i stands at position
i + S - L), so a decode step (L = 1) sees the last keys.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .. import checks

__all__ = ["sliding_window_mask", "block_sparse_layout", "block_sparse_mask"]


def sliding_window_mask(q_len: int, k_len: Optional[int] = None, *, window: int, causal: bool = True,
                        sinks: int = 0, device=None) -> Tensor:
    """The sliding-window pattern as a bool mask, True = blocked.

    Query i (at position p = i + S - L) may attend key j when ``p - window < j <= p`` (causal), or
    ``|j - p| < window`` (``causal=False``, a two-sided window of 2 window - 1 keys), or when
    ``j < sinks``, and, if causal, ``j <= p``.

    Args:
        q_len: L, an int >= 1.
        k_len: S >= L, an int; default L.
        window: how many keys a query sees on its side, itself included; an int >= 1.
        causal: one-sided (a decoder) or two-sided (an encoder).
        sinks: the first keys every query may attend (0 to S), an int >= 0.
        device: where to build the mask.

    Returns:
        (L, S) bool tensor; it broadcasts against (B, H, L, S) as an ``attn_mask``.

    Raises:
        ValueError: a size that is not an int in range (naming it), or S < L.
    """
    L = checks.positive_int(q_len, "q_len")
    S = L if k_len is None else checks.positive_int(k_len, "k_len")
    if S < L:
        raise ValueError(f"k_len={S} < q_len={L}: the queries are the last {L} of the {S} positions")
    window = checks.positive_int(window, "window")
    sinks = checks.nonnegative_int(sinks, "sinks")
    if sinks > S:
        raise ValueError(f"sinks={sinks} is more than the k_len={S} keys")
    causal = checks.flag(causal, "causal")
    p = torch.arange(L, device=device)[:, None] + (S - L)   # (L, 1): each query's position
    j = torch.arange(S, device=device)[None, :]              # (1, S)
    seen = (j > p - window) & (j <= p) if causal else (j - p).abs() < window
    seen |= j < sinks
    if causal:
        seen &= j <= p
    return ~seen


def block_sparse_layout(num_blocks: int, *, local_blocks: int = 1, global_blocks: int = 1, random_blocks: int = 1,
                        seed: int = 0) -> Tensor:
    """BigBird's pattern (Zaheer et al. 2020, section 2) on blocks: which block column each block row sees.

    Block row r sees block columns r - local_blocks .. r + local_blocks (the band), the first
    ``global_blocks`` columns, and ``random_blocks`` other columns drawn with ``seed``; the first
    ``global_blocks`` rows see every column (global tokens attend everywhere and are attended from
    everywhere). :func:`block_sparse_mask` is this layout spread over the tokens of each block; a model
    keeps the layout (n x n) and reads the token mask of any rows from it
    (:meth:`mha_lib.model.EncoderConfig.attention_pattern`).

    Args:
        num_blocks: n, an int >= 1.
        local_blocks: the band's half-width in blocks, an int >= 0.
        global_blocks: global blocks at the start, an int >= 0.
        random_blocks: random blocks per row, an int >= 0 (fewer where the row has fewer free columns).
        seed: the random blocks' seed (a torch.Generator on the CPU), an int in [0, 2**64 - 1]: the same
            seed gives the same layout (one ``torch.randperm`` per row after the global ones).

    Returns:
        (n, n) bool tensor on the CPU, True = seen (the opposite of a mask).

    Raises:
        ValueError: a size that is not an int in range, or a ``seed`` outside [0, 2**64 - 1] (naming it).
    """
    n = checks.positive_int(num_blocks, "num_blocks")
    local_blocks = checks.nonnegative_int(local_blocks, "local_blocks")
    global_blocks = checks.nonnegative_int(global_blocks, "global_blocks")
    random_blocks = checks.nonnegative_int(random_blocks, "random_blocks")
    seed = checks.seed(seed, "seed")
    r = torch.arange(n)[:, None]
    c = torch.arange(n)[None, :]
    seen = ((r - c).abs() <= local_blocks) | (c < global_blocks) | (r < global_blocks)   # (n, n) blocks
    generator = torch.Generator().manual_seed(seed)
    for row in range(global_blocks, n):
        free = (~seen[row]).nonzero().flatten()
        pick = free[torch.randperm(len(free), generator=generator)[:random_blocks]]
        seen[row, pick] = True
    return seen


def block_sparse_mask(seq_len: int, *, block: int, local_blocks: int = 1, global_blocks: int = 1,
                      random_blocks: int = 1, seed: int = 0, device=None) -> Tensor:
    """BigBird's block-sparse pattern (Zaheer et al. 2020, section 2) as a bool mask, True = blocked.

    The sequence is cut into ``n = seq_len / block`` blocks, and token (i, j) is blocked where block row
    i // block does not see block column j // block in :func:`block_sparse_layout` (the band, the global
    blocks, the seeded random ones).

    Args:
        seq_len: L, an int, a multiple of ``block``.
        block: tokens per block, an int >= 1.
        local_blocks, global_blocks, random_blocks, seed: as :func:`block_sparse_layout`.
        device: where to put the mask.

    Returns:
        (L, L) bool tensor.

    Raises:
        ValueError: a size that is not an int in range, ``seq_len`` not a multiple of ``block``
            (naming both), or a ``seed`` outside [0, 2**64 - 1] (naming it).
    """
    L = checks.positive_int(seq_len, "seq_len")
    block = checks.positive_int(block, "block")
    if L % block:
        raise ValueError(f"seq_len={L} is not a multiple of block={block}")
    seen = block_sparse_layout(L // block, local_blocks=local_blocks, global_blocks=global_blocks,
                               random_blocks=random_blocks, seed=seed)                 # (n, n) blocks
    seen = seen.repeat_interleave(block, 0).repeat_interleave(block, 1)                  # (L, L) tokens
    return ~seen.to(device)
