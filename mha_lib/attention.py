"""Deprecated since 0.3.0: the module ``mha_lib.attention``; import from :mod:`mha_lib.core`.

``mha_lib.attention`` has one meaning now, the function (``from mha_lib import attention``), and
the core's files live in ``mha_lib/core/`` (``masks.py``, ``functional.py``, ``kv_cache.py``,
``multi_head.py``): ``from mha_lib.core import MultiHeadAttention, KVCache, build_attention_mask``.
Importing this module still works, with a DeprecationWarning; it will be removed in 0.4.0.
"""
from __future__ import annotations

import warnings

from . import _runtime
from .core import KVCache, MultiHeadAttention, attention, build_attention_mask

__all__ = ["attention", "build_attention_mask", "MultiHeadAttention", "KVCache"]

warnings.warn("the module mha_lib.attention is deprecated since 0.3.0 and will be removed in 0.4.0: import "
              "MultiHeadAttention, KVCache and build_attention_mask from mha_lib.core (mha_lib.attention is the "
              "function)", DeprecationWarning, stacklevel=_runtime.user_stacklevel())
