"""Scaled dot-product attention and multi-head attention.

This module is the chapters' path to the core: it re-exports :mod:`mha_lib.core`, whose files
hold the code (read them in this order):

1. :func:`build_attention_mask` (``core/masks.py``): the ONE place where every kind of mask (key
   padding, ``attn_mask``, causal) becomes one additive float mask. Both paths use it.
2. :func:`attention` (``core/functional.py``): softmax(Q K^T / sqrt(d_k) + mask) V on tensors
   already split into heads.
3. :class:`KVCache` (``core/kv_cache.py``): keys and values of past positions, in a buffer that
   grows in chunks.
4. :class:`MultiHeadAttention` (``core/multi_head.py``): its ``_heads`` is the whole pass, in the
   paper's order: project -> split heads -> KV cache -> masks -> attend -> head_mask; ``forward``
   then merges the heads and applies W^O, ``head_outputs`` returns them. Its argument checks,
   pruning and ``from_torch`` follow the pass in the same file.

(The order of :mod:`mha_lib.core`: each file imports only the ones before it.)

Notation (used in every shape comment):
    B  batch size          L  query length        S  key/value length
    H  query heads         H_kv  key/value heads  hd  head_dim = d_k = d_model // num_heads
    G  query heads per key/value head = H // H_kv        d_model  model width

Conventions:
    * Batch first, always: (B, L, d_model).
    * A bool mask means True = blocked (not allowed to attend), as in
      ``torch.nn.MultiheadAttention``. Careful: ``F.scaled_dot_product_attention`` uses the
      opposite polarity (True = keep); that is why our functional form is named ``attention``.
    * A float mask is ADDED to the scores; ``-inf`` blocks, and so does any value at or below
      half the dtype's most negative number (the Hugging Face idiom ``torch.finfo(dtype).min``).
    * A query row whose keys are all blocked gets zero weights and a zero head output, never NaN.
    * Arguments are checked once, at the entry (``_check_*``, beside what they check); the pass has no
      Python branch on tensor values, so it exports to ONNX unchanged.

Names: ``mha_lib.attention`` is the FUNCTION (the package binds it over the submodule name);
``from mha_lib.attention import MultiHeadAttention`` imports from this module.

Papers followed:
    Vaswani et al. 2017, "Attention Is All You Need" (scaled dot-product and multi-head attention).
    Shazeer 2019, "Fast Transformer Decoding: One Write-Head is All You Need" (multi-query attention).
    Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from
    Multi-Head Checkpoints" (grouped-query attention).
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?" (head mask xi_h, head pruning).
"""
from __future__ import annotations

from .core.functional import attention
from .core.kv_cache import KVCache
from .core.masks import build_attention_mask
from .core.multi_head import MultiHeadAttention

__all__ = ["attention", "build_attention_mask", "MultiHeadAttention", "KVCache"]
