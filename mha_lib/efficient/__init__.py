"""Cheaper attention (issue 33, the library part): what the field does to the cost of more heads.

Read in this order; each file imports only the ones before it (and :mod:`mha_lib.checks`; `latent.py` also :mod:`mha_lib.core`'s masks and teaching path):

* ``patterns.py``: sparse patterns as explicit masks, the reference: :func:`sliding_window_mask`
  (Mistral, Longformer; attention sinks, Xiao et al. 2023) and :func:`block_sparse_mask` (BigBird; its
  blocks: :func:`block_sparse_layout`);
* ``windowed.py``: :func:`sliding_window_attention`, the same window without an L x S mask;
* ``tiled.py``: :func:`tiled_attention`, FlashAttention's tiles and online softmax written to be read,
  and :func:`hbm_accesses`, the paper's count of slow-memory traffic (Dao et al. 2022);
* ``latent.py``: :class:`MultiHeadLatentAttention`, DeepSeek-V2's joint low-rank KV compression with a
  decoupled RoPE key, its :class:`LatentCache` and :func:`latent_kv_cache_bytes`.

Cache sizes: :func:`mha_lib.cost.kv_cache_bytes` (MHA, GQA, MQA) and :func:`latent_kv_cache_bytes` (MLA).
"""
from __future__ import annotations

from .latent import DEEPSEEK_V2_MLA, LatentCache, MultiHeadLatentAttention, latent_kv_cache_bytes, rotary
from .patterns import block_sparse_layout, block_sparse_mask, sliding_window_mask
from .tiled import hbm_accesses, tiled_attention
from .windowed import sliding_window_attention
from . import latent as _latent

#: DeepSeek-V2's attention as published (DeepSeek-AI 2024, "DeepSeek-V2", section 3.1.2), 60 layers,
#: 128 heads of d_h = 128, KV compression d_c = 512, query compression d_c' = 1536, decoupled RoPE
#: d_h^R = 64; its MLA cache holds 576 numbers per token and layer
#: (``latent_kv_cache_bytes(num_layers=60, kv_rank=512, rope_dim=64, seq_len=..., ...)``).
DEEPSEEK_V2_MLA = _latent.DEEPSEEK_V2_MLA

__all__ = ["sliding_window_mask", "block_sparse_layout", "block_sparse_mask", "sliding_window_attention", "tiled_attention",
           "hbm_accesses", "MultiHeadLatentAttention", "LatentCache", "rotary", "latent_kv_cache_bytes",
           "DEEPSEEK_V2_MLA"]
