"""The core: attention itself, with no model around it.

Read the files in this order; each imports only the ones before it (and ``mha_lib.checks``):

* ``masks.py``: :func:`build_attention_mask`, the ONE rule turning key padding, ``attn_mask`` and
  the causal rule into one additive float mask;
* ``functional.py``: :func:`attention`, softmax(Q K^T / sqrt(d_k) + mask) V on heads;
* ``kv_cache.py``: :class:`KVCache`, past keys and values for decoding;
* ``multi_head.py``: :class:`MultiHeadAttention` (project, split heads, cache, masks, attend,
  head_mask, merge, W^O; GQA/MQA; pruning; ``from_torch``).

Notation (every shape comment): B batch, L queries, S keys, H query heads, H_kv key/value heads,
G = H // H_kv, hd = d_k = d_model // num_heads.

Conventions: batch first, (B, L, d_model); a bool mask means True = blocked (as in
``torch.nn.MultiheadAttention``; ``F.scaled_dot_product_attention`` uses the opposite polarity,
which is why the functional form is named ``attention``); a float mask is ADDED to the scores
(``-inf`` blocks, as does any value at or below half the dtype's most negative number); a query
row whose keys are all blocked gets zero weights and a zero output, never NaN; arguments are
checked once, at the entry, and the pass has no Python branch on tensor values (ONNX-exportable).
"""
from __future__ import annotations

from .functional import attention
from .kv_cache import KVCache
from .masks import build_attention_mask
from .multi_head import MultiHeadAttention

__all__ = ["attention", "build_attention_mask", "MultiHeadAttention", "KVCache"]
