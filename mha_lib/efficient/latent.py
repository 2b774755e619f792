"""Multi-head latent attention (MLA): a KV cache that stores one small latent vector per token.

DeepSeek-V2 (DeepSeek-AI 2024, section 2.1) compresses each token's keys and values jointly into a
latent c^KV of d_c numbers and caches only that (plus one small shared RoPE key), instead of
2 H d_h numbers per token (MHA) or 2 H_kv d_h (GQA/MQA). Per head, keys and values are
up-projected from the latent when attention needs them:

    c^KV = W^DKV h                      (d_c)        the cached latent
    k^C_i = W^UK_i c^KV, v_i = W^UV_i c^KV (d_h each)  per head, from the latent
    c^Q = W^DQ h, q^C_i = W^UQ_i c^Q    (queries compressed too, to save activations in training)
    q^R_i = RoPE(W^QR_i c^Q), k^R = RoPE(W^KR h)  (d_h^R; k^R is shared by every head and cached)
    head_i = softmax([q^C_i; q^R_i] [k^C_i; k^R]^T / sqrt(d_h + d_h^R)) v_i,  out = W^O [head_1 .. head_H]

The RoPE part is "decoupled" because a rotation between W^UK and the query would stop W^UK from being
folded into W^UQ at inference (the paper's reason). Cache per token and layer: d_c + d_h^R numbers.

:class:`MultiHeadLatentAttention` is causal (a decoder's self-attention) and written to be read: it
up-projects every cached latent at each step (the paper's absorbed form, which avoids that, is an
inference optimisation left out here). :func:`rotary` is the rotary position embedding (Su et al.
2021) it uses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from .. import checks
from ..core.functional import _attend
from ..core.masks import _check_masks, build_attention_mask

__all__ = ["MultiHeadLatentAttention", "LatentCache", "rotary", "latent_kv_cache_bytes", "DEEPSEEK_V2_MLA"]


def rotary(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """Rotary position embedding (Su et al. 2021, RoFormer): rotate feature pairs (i, i + d/2) of each
    position by the angle position * base^(-2i/d).

    Args:
        x: (..., T, d) floating point, d even.
        positions: (T,) integer positions.
        base: the frequency base, a finite number > 1 (RoFormer's 10,000); at 1 or below every pair turns at
            one speed (or grows past float range), and 0, a negative base or NaN gives NaN angles.

    Returns:
        a tensor shaped and typed like ``x``.

    Raises:
        ValueError: ``x`` not a floating-point tensor with an even last dim, ``positions`` not an integer
            (T,) tensor, or a ``base`` that is not a finite number > 1 (naming it).
    """
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.dim() < 2:
        raise ValueError(f"rotary rotates a floating-point (..., T, d) tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)} {tuple(getattr(x, 'shape', ()))}")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary needs an even feature size, got {d}")
    if not isinstance(positions, Tensor) or positions.dim() != 1 or positions.shape[0] != x.shape[-2] \
            or positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise ValueError(f"positions must be an integer ({x.shape[-2]},) tensor, got "
                         f"{getattr(positions, 'dtype', type(positions).__name__)} "
                         f"{tuple(getattr(positions, 'shape', ()))}")
    if not (checks.finite_real(base, "base") > 1):
        raise ValueError(f"base must be a finite number > 1 (the frequencies are base^(-2i/d)), got {base!r}")
    freqs = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)   # (d/2,)
    angles = positions.to(torch.float32)[:, None] * freqs[None, :]                       # (T, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


@dataclass
class LatentCache:
    """What MLA caches per layer: the joint latent and the shared RoPE key of every past token.

    Attributes:
        c_kv: (B, T, d_c) latents.
        k_rope: (B, T, d_h^R) rotated RoPE keys (one per token, shared by the heads).
    """

    c_kv: Tensor
    k_rope: Tensor

    @property
    def length(self) -> int:
        """T, the tokens cached."""
        return self.c_kv.shape[1]

    def nbytes(self) -> int:
        """Bytes held: B T (d_c + d_h^R) times the element size."""
        return self.c_kv.numel() * self.c_kv.element_size() + self.k_rope.numel() * self.k_rope.element_size()


class MultiHeadLatentAttention(nn.Module):
    """Causal multi-head latent attention (DeepSeek-V2, section 2.1) with a latent KV cache.

    Args:
        d_model: model width, an int >= 1.
        num_heads: H, an int >= 1.
        head_dim: d_h, the width of each head's content part of q, k and of v, an int >= 1.
        kv_rank: d_c, the latent's width (the cache holds it), an int >= 1.
        rope_dim: d_h^R, the decoupled RoPE part's width, an even int >= 2.
        q_rank: d_c', the query latent's width; None projects queries directly from the input.
        bias: biases on the projections (DeepSeek-V2 has none).

    Raises:
        ValueError: a size that is not an int in range (naming it).
    """

    def __init__(self, d_model: int, num_heads: int, head_dim: int, kv_rank: int, rope_dim: int, *,
                 q_rank: Optional[int] = None, bias: bool = False):
        super().__init__()
        self.d_model = checks.positive_int(d_model, "d_model")
        self.num_heads = checks.positive_int(num_heads, "num_heads")
        self.head_dim = checks.positive_int(head_dim, "head_dim")
        self.kv_rank = checks.positive_int(kv_rank, "kv_rank")
        self.rope_dim = checks.positive_int(rope_dim, "rope_dim")
        if self.rope_dim % 2:
            raise ValueError(f"rope_dim={rope_dim} must be even (RoPE rotates pairs)")
        self.q_rank = None if q_rank is None else checks.positive_int(q_rank, "q_rank")
        H, dh, dr = self.num_heads, self.head_dim, self.rope_dim
        q_in = self.d_model if self.q_rank is None else self.q_rank
        self.q_down = None if self.q_rank is None else nn.Linear(self.d_model, self.q_rank, bias=bias)  # W^DQ
        self.q_up = nn.Linear(q_in, H * (dh + dr), bias=bias)           # W^UQ and W^QR, stacked
        self.kv_down = nn.Linear(self.d_model, self.kv_rank, bias=bias)  # W^DKV
        self.k_rope = nn.Linear(self.d_model, dr, bias=bias)             # W^KR
        self.kv_up = nn.Linear(self.kv_rank, H * 2 * dh, bias=bias)      # W^UK and W^UV, stacked
        self.out_proj = nn.Linear(H * dh, self.d_model, bias=bias)       # W^O

    def forward(self, query: Tensor, key: Optional[Tensor] = None, *, key_padding_mask: Optional[Tensor] = None,
                attn_mask: Optional[Tensor] = None, is_causal: bool = True, head_mask: Optional[Tensor] = None,
                need_weights: bool = False, past_kv: Optional[LatentCache] = None, use_cache: bool = False):
        """Attend causally over the cached tokens and ``query``'s, with :class:`~mha_lib.core.MultiHeadAttention`'s
        call signature, so that a :class:`~mha_lib.model.TransformerBlock` runs either.

        Args:
            query: (B, L, d_model), floating point, the model's dtype; the next L tokens.
            key: None or ``query`` itself (self-attention only: the keys come from the latent).
            key_padding_mask: (B, S) bool, True = padding, over the S = cached + L keys.
            attn_mask: bool (True = blocked) or additive float, broadcastable to (B, H, L, S); combined
                with the causal mask by OR (a sliding window or a block-sparse pattern, for instance).
            is_causal: must be True: this module is a decoder's self-attention.
            head_mask: (H,) or (B, H) float, multiplies each head's output (Michel et al. 2019).
            need_weights: also return the (B, H, L, S) attention weights.
            past_kv: the earlier tokens' :class:`LatentCache`, or None at the start.
            use_cache: also return the cache extended with this call's tokens.

        Returns:
            ``(out, weights)``, or ``(out, weights, cache)`` with ``use_cache``: out (B, L, d_model);
            weights (B, H, L, S) or None without ``need_weights``.

        Raises:
            ValueError: ``query`` not (B, L, d_model) floating point, a ``key`` other than ``query``,
                ``is_causal=False``, a cache of another batch size, widths or dtype, or a mask or
                head mask of the wrong shape or dtype (naming it).
        """
        x, cache = query, past_kv
        if not checks.tracing():
            self._check(x, key, cache, key_padding_mask, attn_mask, is_causal, head_mask)
        B, L = x.shape[:2]
        H, dh, dr = self.num_heads, self.head_dim, self.rope_dim
        T0 = 0 if cache is None else cache.length
        positions = torch.arange(T0, T0 + L, device=x.device)

        q = self.q_up(x if self.q_down is None else self.q_down(x))        # (B, L, H (dh + dr))
        q = q.view(B, L, H, dh + dr).transpose(1, 2)                          # (B, H, L, dh + dr)
        q = torch.cat([q[..., :dh], rotary(q[..., dh:], positions)], -1)      # rotate the RoPE part
        c_kv = self.kv_down(x)                                                # (B, L, d_c): cached
        k_r = rotary(self.k_rope(x), positions)                               # (B, L, dr): cached
        if cache is not None:
            c_kv = torch.cat([cache.c_kv, c_kv], 1)                           # (B, S, d_c), S = T0 + L
            k_r = torch.cat([cache.k_rope, k_r], 1)                           # (B, S, dr)
        S = c_kv.shape[1]
        kv = self.kv_up(c_kv).view(B, S, H, 2 * dh).transpose(1, 2)           # (B, H, S, 2 dh): from the latent
        k = torch.cat([kv[..., :dh], k_r[:, None].expand(B, H, S, dr)], -1)   # (B, H, S, dh + dr)
        v = kv[..., dh:]                                                      # (B, H, S, dh)
        mask, empty = build_attention_mask(key_padding_mask=key_padding_mask, attn_mask=attn_mask, is_causal=True,
                                           batch=B, heads=H, q_len=L, k_len=S, dtype=q.dtype, device=x.device)
        heads, weights = _attend(q, k, v, mask, empty, 0.0, (dh + dr) ** -0.5)  # (B, H, L, dh), (B, H, L, S)
        if head_mask is not None:
            heads = heads * head_mask.to(heads.dtype).reshape(-1, H, 1, 1)    # (B or 1, H, 1, 1) gates
        out = self.out_proj(heads.transpose(1, 2).reshape(B, L, H * dh))      # (B, L, d_model)
        weights = weights if need_weights else None
        return (out, weights, LatentCache(c_kv, k_r)) if use_cache else (out, weights)

    @property
    def kept_heads(self) -> list:
        """Every head, ``[0, ..., H - 1]``, as MultiHeadAttention's (this module has no head pruning)."""
        return list(range(self.num_heads))

    def cache_bytes_per_token(self, bytes_per_element: int = 2) -> int:
        """Bytes this layer caches per token: (d_c + d_h^R) x ``bytes_per_element`` (2 for fp16/bf16).

        Raises:
            ValueError: ``bytes_per_element`` not a positive int (naming it).
        """
        return (self.kv_rank + self.rope_dim) * checks.positive_int(bytes_per_element, "bytes_per_element")

    def _check(self, x, key, cache, key_padding_mask, attn_mask, is_causal, head_mask) -> None:
        if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != self.d_model or not x.is_floating_point():
            raise ValueError(f"query must be a floating-point (B, L, d_model={self.d_model}) tensor, got "
                             f"{getattr(x, 'dtype', type(x).__name__)} {tuple(getattr(x, 'shape', ()))}")
        if key is not None and key is not x:
            raise ValueError("MultiHeadLatentAttention is self-attention: key must be None or the query tensor")
        if checks.flag(is_causal, "is_causal") is not True:
            raise ValueError("is_causal=False: MultiHeadLatentAttention here is a decoder's causal self-attention")
        B, L = x.shape[:2]
        if L == 0:
            raise ValueError("query has no token (L = 0)")
        T0 = 0
        if cache is not None:
            if not isinstance(cache, LatentCache):
                raise ValueError(f"past_kv must be a LatentCache, got {type(cache).__name__}")
            want = ((B, cache.length, self.kv_rank), (B, cache.length, self.rope_dim))
            if (tuple(cache.c_kv.shape), tuple(cache.k_rope.shape)) != want or cache.c_kv.dtype != x.dtype:
                raise ValueError(f"past_kv holds c_kv {tuple(cache.c_kv.shape)} {cache.c_kv.dtype} and k_rope "
                                 f"{tuple(cache.k_rope.shape)}; this layer and the query need {want} in {x.dtype}")
            T0 = cache.length
        _check_masks(key_padding_mask, attn_mask, B, self.num_heads, L, T0 + L, x.dtype)
        if head_mask is not None and (not isinstance(head_mask, Tensor) or not head_mask.is_floating_point()
                                      or tuple(head_mask.shape) not in ((self.num_heads,), (B, self.num_heads))):
            raise ValueError(f"head_mask must be a float ({self.num_heads},) or ({B}, {self.num_heads}) tensor, got "
                             f"{getattr(head_mask, 'dtype', type(head_mask).__name__)} "
                             f"{tuple(getattr(head_mask, 'shape', ()))}")


def latent_kv_cache_bytes(*, num_layers: int, kv_rank: int, rope_dim: int, seq_len: int,
                          batch: int = 1, dtype: torch.dtype = torch.float16) -> int:
    """Bytes of a multi-head latent attention (MLA) cache: layers x (d_c + d_h^R) x seq_len x batch x bytes/elt.

    MLA (DeepSeek-V2, DeepSeek-AI 2024, section 2.1) caches per token and layer one joint latent of
    d_c numbers and one RoPE key of d_h^R numbers shared by the heads, whatever the number of heads
    (:class:`MultiHeadLatentAttention`). Compare :func:`mha_lib.cost.kv_cache_bytes`, 2 H_kv hd
    numbers per token and layer. Example: DeepSeek-V2's published attention (:data:`DEEPSEEK_V2_MLA`:
    d_c = 512, d_h^R = 64, 128 heads of 128) caches 576 numbers per token and layer where MHA with
    the same heads would cache 2 x 128 x 128 = 32,768.

    Args:
        num_layers: layers (> 0).
        kv_rank: d_c, the latent's width (> 0).
        rope_dim: d_h^R, the shared RoPE key's width (>= 0).
        seq_len: cached positions (>= 0).
        batch: sequences decoded together (>= 0).
        dtype: element type of the cache, a floating-point ``torch.dtype``; default fp16.

    Returns:
        Bytes (int).

    Raises:
        ValueError: a size out of range, or a dtype that is not a floating-point torch.dtype.
    """
    n = checks.int_at_least(num_layers, "num_layers", 1)
    c = checks.int_at_least(kv_rank, "kv_rank", 1)
    r = checks.int_at_least(rope_dim, "rope_dim", 0)
    s = checks.int_at_least(seq_len, "seq_len", 0)
    b = checks.int_at_least(batch, "batch", 0)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    return n * (c + r) * s * b * torch.empty((), dtype=dtype).element_size()


#: DeepSeek-V2's attention as published (DeepSeek-AI 2024, "DeepSeek-V2", section 3.1.2): 60 layers,
#: 128 heads of d_h = 128, KV compression d_c = 512, query compression d_c' = 1536, decoupled RoPE
#: d_h^R = 64. Its MLA cache: 576 numbers per token and layer.
DEEPSEEK_V2_MLA = {"num_layers": 60, "num_heads": 128, "head_dim": 128, "kv_rank": 512, "q_rank": 1536,
                   "rope_dim": 64}
