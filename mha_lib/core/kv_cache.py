"""The KV cache: keys and values of past positions, in a buffer that grows in chunks.

A decode step writes its new keys and values after the past ones and copies nothing of the past.
Shapes: each buffer (B, H_kv, capacity, hd), of which the first ``length`` positions are filled.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .. import checks


# ---------------------------------------------------------------------------------------------
# The KV cache
# ---------------------------------------------------------------------------------------------


class KVCache:
    """Keys and values of past positions, for decoding one token at a time.

    Held in preallocated buffers (B, H_kv, capacity, hd) with a write position ``length``:
    appending S_new positions writes them in place, so a decode step copies nothing of the
    past. When the buffer is full it grows by whole chunks of ``chunk`` positions (one copy
    every ``chunk`` steps). Under autograd (new keys that require grad) it appends by
    concatenation instead, since in-place writes would break the backward pass.

    ``k, v = cache`` (or ``cache.keys``, ``cache.values``) gives the valid part, each
    (B, H_kv, length, hd), as views of the buffers. :meth:`MultiHeadAttention.forward` writes
    into a cache it is given, in place: to branch (e.g. beam search) take :meth:`copy` first.

    Args:
        keys, values: (B, H_kv, capacity, hd) buffers of one floating dtype and device.
        length: how many positions hold data (default: all ``capacity``).
        chunk: growth step in positions (default 256).

    Raises:
        ValueError: buffers that are not 4-D tensors of one shape, dtype and device, or a length
            outside [0, capacity].
    """

    def __init__(self, keys: Tensor, values: Tensor, length: Optional[int] = None, chunk: int = 256):
        if not (isinstance(keys, Tensor) and isinstance(values, Tensor) and keys.dim() == 4 and keys.is_floating_point()
                and keys.shape == values.shape and keys.dtype == values.dtype and keys.device == values.device):
            raise ValueError(
                "KVCache needs two 4-D floating-point tensors (B, H_kv, S, hd) of one shape, dtype and device, got "
                f"{getattr(keys, 'shape', keys)!r} and {getattr(values, 'shape', values)!r}"
            )
        length = keys.shape[2] if length is None else checks.nonnegative_int(length, "length")
        if length > keys.shape[2]:
            raise ValueError(f"KVCache length={length} exceeds the buffers' capacity {keys.shape[2]}")
        self._k, self._v, self.length = keys, values, length
        self.chunk = checks.positive_int(chunk, "chunk")

    @classmethod
    def empty(cls, batch: int, num_kv_heads: int, head_dim: int, capacity: int, *,
              dtype: torch.dtype = torch.float32, device=None) -> "KVCache":
        """An empty cache with buffers for ``capacity`` positions (bytes: 2 * B * H_kv * capacity
        * hd * element size)."""
        shape = tuple(checks.nonnegative_int(v, n) for v, n in ((batch, "batch"), (num_kv_heads, "num_kv_heads"),
                                                                 (capacity, "capacity"), (head_dim, "head_dim")))
        return cls(torch.empty(shape, dtype=dtype, device=device),
                   torch.empty(shape, dtype=dtype, device=device), length=0)

    @classmethod
    def wrap(cls, past_kv, *, like: Tensor) -> "KVCache":
        """A cache to append to: ``past_kv`` itself if it is a KVCache, a new one holding a
        ``(k, v)`` pair's data, or an empty one shaped like ``like``, (B, H_kv, S, hd), when None."""
        if isinstance(past_kv, KVCache):
            return past_kv
        B, H_kv, _, hd = like.shape
        cache = cls.empty(B, H_kv, hd, 0, dtype=like.dtype, device=like.device)
        return cache if past_kv is None else cache.append(*past_kv)  # one copy, into a chunked buffer

    @property
    def keys(self) -> Tensor:
        """(B, H_kv, length, hd), a view of the key buffer."""
        return self._k[:, :, : self.length]

    @property
    def values(self) -> Tensor:
        """(B, H_kv, length, hd), a view of the value buffer."""
        return self._v[:, :, : self.length]

    @property
    def capacity(self) -> int:
        """Positions the buffers hold before they must grow."""
        return self._k.shape[2]

    def __iter__(self):
        return iter((self.keys, self.values))

    def __getitem__(self, index: int) -> Tensor:
        return (self.keys, self.values)[index]

    def __repr__(self) -> str:
        B, H_kv, _, hd = self._k.shape
        return f"KVCache(B={B}, H_kv={H_kv}, hd={hd}, length={self.length}, capacity={self.capacity})"

    def append(self, k: Tensor, v: Tensor) -> "KVCache":
        """Write (B, H_kv, S_new, hd) keys and values after the current ones; returns ``self``.

        Raises:
            ValueError: ``k``/``v`` not of the cache's (B, H_kv, S_new, hd) shape, dtype and device.
        """
        B, H_kv, _, hd = self._k.shape
        for name, t in (("k", k), ("v", v)):
            if (not isinstance(t, Tensor) or t.dim() != 4 or (t.shape[0], t.shape[1], t.shape[3]) != (B, H_kv, hd)
                    or t.shape[2] != k.shape[2] or t.dtype != self._k.dtype or t.device != self._k.device):
                raise ValueError(
                    f"KVCache.append: {name} must be ({B}, {H_kv}, S_new, {hd}) {self._k.dtype} on {self._k.device} "
                    f"like the cache, got {tuple(getattr(t, 'shape', ()))} {getattr(t, 'dtype', type(t).__name__)}"
                )
        end = self.length + k.shape[2]
        if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad or self._k.requires_grad):
            self._k, self._v = torch.cat([self.keys, k], 2), torch.cat([self.values, v], 2)
        else:
            if end > self.capacity:  # grow by whole chunks: one copy every `chunk` positions
                grown = -(-end // self.chunk) * self.chunk
                self._k = torch.cat([self.keys, self._k.new_empty(*k.shape[:2], grown - self.length, k.shape[3])], 2)
                self._v = torch.cat([self.values, self._v.new_empty(*v.shape[:2], grown - self.length, v.shape[3])], 2)
            self._k[:, :, self.length:end] = k
            self._v[:, :, self.length:end] = v
        self.length = end
        return self

    def crop(self, length: int) -> "KVCache":
        """Forget every position from ``length`` on (e.g. to time one decode step again and again
        at a fixed context length); returns ``self``. Raises ValueError outside [0, length]."""
        length = checks.nonnegative_int(length, "length")
        if length > self.length:
            raise ValueError(f"crop length={length} exceeds the cache's length {self.length}")
        self.length = length
        return self

    def copy(self) -> "KVCache":
        """An independent cache with the same contents (buffers cloned up to ``length``)."""
        return KVCache(self.keys.clone(), self.values.clone(), chunk=self.chunk)


def _check_past_kv(past_kv, B: int, H_kv: int, hd: int, dtype: torch.dtype, device: torch.device) -> int:
    """Check a KVCache or (k, v) pair against the module; return its length S_past."""
    if isinstance(past_kv, KVCache):
        past_k, past_v = past_kv
    elif isinstance(past_kv, (tuple, list)) and len(past_kv) == 2:
        past_k, past_v = past_kv
    else:
        raise ValueError("past_kv must be a KVCache or a (k, v) pair, as returned with use_cache=True")
    for name, t in (("past_kv[0]", past_k), ("past_kv[1]", past_v)):
        if not isinstance(t, Tensor) or t.dim() != 4 or (t.shape[0], t.shape[1], t.shape[3]) != (B, H_kv, hd):
            raise ValueError(
                f"{name} must have shape (B, H_kv, S_past, head_dim) = "
                f"({B}, {H_kv}, S_past, {hd}), got {tuple(getattr(t, 'shape', ()))}"
            )
        if t.dtype != dtype or t.device != device:
            raise ValueError(
                f"{name} is {t.dtype} on {t.device}, but the query is {dtype} on {device}; "
                f"a cache must come from the same module in the same dtype (or cast it: k.to(dtype))"
            )
    if past_k.shape != past_v.shape:
        raise ValueError(f"past_kv shapes differ: {tuple(past_k.shape)} vs {tuple(past_v.shape)}")
    return past_k.shape[2]
