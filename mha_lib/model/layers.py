"""The pieces of a model: positions, image patches, the MLP and the one :class:`TransformerBlock`.

Shapes: B batch, L sequence length, d_model model width, d_ff MLP width.

Sources: Vaswani et al. 2017 (block, sinusoidal positions, cross-attention); Dosovitskiy et al.
2021 (patches); Xiong et al. 2020 (pre-LN).
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import torch
from torch import nn

from .. import checks
from ..core.multi_head import MultiHeadAttention
from ..efficient import MultiHeadLatentAttention
from .config import EncoderConfig, _ACTIVATIONS


# ----------------------------------------------------------------------------- pieces
def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    """Fixed position encodings of Vaswani et al. 2017, section 3.5.

    PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same).

    Returns:
        float32 tensor (max_len, d_model).
    """
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angles = pos * freq  # (max_len, ceil(d_model/2))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut images into non-overlapping square patches, each flattened to a vector (Dosovitskiy
    et al. 2021, "An Image is Worth 16x16 Words", section 3.1).

    Args:
        images: (B, H, W) or (B, C, H, W) float; H and W divisible by ``patch_size``.
        patch_size: p >= 1, in pixels.

    Returns:
        (B, N, C*p*p) with N = (H/p) * (W/p) patches in row-major order (left to right, then
        top to bottom); within a patch the values are ordered channel, row, column.

    Raises:
        ValueError: a non-tensor, a tensor that is not 3-D or 4-D floating point, a bad
            ``patch_size``, an image smaller than one patch (e.g. 0x0) or without channels (naming
            the size), or a side not divisible by ``patch_size`` (naming the side).
    """
    p = checks.positive_int(patch_size, "patch_size")
    if not isinstance(images, torch.Tensor) or images.dim() not in (3, 4) or not images.is_floating_point():
        raise ValueError(
            "images must be a float tensor (B, H, W) or (B, C, H, W), got "
            + (f"{tuple(images.shape)} {images.dtype}" if isinstance(images, torch.Tensor) else type(images).__name__)
        )
    x = images if images.dim() == 4 else images[:, None]  # (B, C, H, W)
    B, C, H, W = x.shape
    if H < p or W < p or C == 0:  # zero patches, or patches of no values: nothing for a model to see
        raise ValueError(f"image size {H}x{W} (C={C}) holds no {p}x{p} patch: each side must be at least "
                         f"patch_size={p}, with at least one channel")
    for side, size in (("height", H), ("width", W)):
        if size % p:
            raise ValueError(f"image {side} {size} is not divisible by patch_size={p}")
    x = x.reshape(B, C, H // p, p, W // p, p)  # (B, C, H/p, p, W/p, p)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, H/p, W/p, C, p, p)
    return x.reshape(B, (H // p) * (W // p), C * p * p)  # (B, N, C*p*p)


def unpatchify(patches: torch.Tensor, height: int, width: int, patch_size: int) -> torch.Tensor:
    """The inverse of :func:`patchify`: (B, N, C*p*p) patches back to images (B, C, H, W).

    Args:
        patches: (B, N, C*p*p) float, N = (H/p) * (W/p) in row-major order.
        height, width: the image's size in pixels, divisible by ``patch_size``.
        patch_size: p >= 1.

    Returns:
        (B, C, H, W) float.

    Raises:
        ValueError: a shape that does not fit the sizes (naming them).
    """
    p = checks.positive_int(patch_size, "patch_size")
    H, W = checks.positive_int(height, "height"), checks.positive_int(width, "width")
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not divisible by patch_size={p}")
    if not isinstance(patches, torch.Tensor) or patches.dim() != 3 or not patches.is_floating_point():
        raise ValueError(f"patches must be a float (B, N, C*p*p) tensor, got "
                         f"{getattr(patches, 'dtype', type(patches).__name__)} {tuple(getattr(patches, 'shape', ()))}")
    B, N, D = patches.shape
    if N != (H // p) * (W // p) or D % (p * p):
        raise ValueError(f"patches of shape {tuple(patches.shape)} do not tile a {H}x{W} image with {p}x{p} patches")
    C = D // (p * p)
    x = patches.reshape(B, H // p, W // p, C, p, p).permute(0, 3, 1, 4, 2, 5)  # (B, C, H/p, p, W/p, p)
    return x.reshape(B, C, H, W)


class MLP(nn.Module):
    """Position-wise feed-forward: Linear(d_model, d_ff) -> activation -> Linear(d_ff, d_model)."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.fc_in = nn.Linear(config.d_model, config.d_ff)
        self.fc_out = nn.Linear(config.d_ff, config.d_model)
        self.act = _ACTIVATIONS[config.activation]
        self.activation = config.activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, L, d_model) -> (B, L, d_model)
        return self.fc_out(self.act(self.fc_in(x)))  # via (B, L, d_ff)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


# ----------------------------------------------------------------------------- block
class TransformerBlock(nn.Module):
    """Self-attention, then optionally cross-attention and an MLP; each sub-layer has a residual
    connection and a LayerNorm.

    ``config.norm_first=True`` (pre-LN, Xiong et al. 2020), for each sub-layer f::

        x = x + drop(f(norm(x)))

    ``config.norm_first=False`` (post-LN, Vaswani et al. 2017, BERT)::

        x = norm(x + drop(f(x)))

    The sub-layers, in order: ``attn`` (self-attention over x, causal when asked); ``cross_attn``
    (queries from x, keys and values from ``memory``, the encoder's output; only when
    ``config.cross_attention``, as in the decoder of Vaswani et al. 2017); ``mlp`` (absent when
    ``config.d_ff == 0``: an attention-only block, as in Elhage et al. 2021). With ``config.kv_rank``
    the self-attention is a :class:`~mha_lib.efficient.MultiHeadLatentAttention` (DeepSeek-V2), called
    the same way; its cache entry is then a :class:`~mha_lib.efficient.LatentCache`.

    Args:
        config: the :class:`EncoderConfig`.
        layer_index: which layer this is, to look up ``config.pruned_heads`` (they apply to the
            self-attention).
    """

    def __init__(self, config: EncoderConfig, layer_index: int = 0):
        super().__init__()
        self.norm_first = config.norm_first
        attn_dropout = config.dropout if config.attention_dropout is None else config.attention_dropout

        def attention(pruned=(), latent=False):
            if latent:  # multi-head latent attention (DeepSeek-V2): the cache holds a latent per token
                return MultiHeadLatentAttention(config.d_model, config.num_heads, config.head_dim, config.kv_rank,
                                                config.rope_dim, bias=config.bias)
            return MultiHeadAttention(config.d_model, config.num_heads, num_kv_heads=config.num_kv_heads,
                                      dropout=attn_dropout, bias=config.bias, pruned_heads=tuple(pruned))

        def norm():
            return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

        self.attn = attention(config.pruned_heads.get(layer_index, ()), latent=config.kv_rank > 0)
        self.norm1 = norm()
        self.cross_attn = attention() if config.cross_attention else None
        self.norm_cross = norm() if config.cross_attention else None
        self.mlp = MLP(config) if config.d_ff > 0 else None
        self.norm2 = norm() if config.d_ff > 0 else None
        self.drop = nn.Dropout(config.dropout)

    @staticmethod
    def _attend_cached(attn: MultiHeadAttention, cache: Optional[dict], name: str, query, key, **kwargs):
        """attn(query, key) -> (out, weights); with a cache, read and update ``cache[name]``."""
        if cache is None:
            return attn(query, key, **kwargs)
        if name == "cross":
            cache.setdefault("memory", key)  # forward checked that it is this memory
            if name in cache:
                key = key[:, :0]  # memory's keys and values are in the cache already: add none
        out, weights, cache[name] = attn(query, key, past_kv=cache.get(name), use_cache=True, **kwargs)
        return out, weights

    def _residual(self, x: torch.Tensor, sublayer: Callable, norm: nn.Module):
        """x + drop(f(norm(x))) (pre-LN) or norm(x + drop(f(x))) (post-LN); f returns (out, extra)."""
        out, extra = sublayer(norm(x) if self.norm_first else x)  # (B, L, d_model)
        x = x + self.drop(out)
        return (x if self.norm_first else norm(x)), extra

    def forward(
        self,
        x: torch.Tensor,
        *,
        key_padding_mask: Optional[torch.Tensor] = None,
        attn_mask: Optional[torch.Tensor] = None,
        is_causal: bool = False,
        head_mask: Optional[torch.Tensor] = None,
        need_weights: bool = False,
        memory: Optional[torch.Tensor] = None,
        memory_key_padding_mask: Optional[torch.Tensor] = None,
        cross_head_mask: Optional[torch.Tensor] = None,
        cache: Optional[dict] = None,
    ):
        """Run one block.

        Args:
            x: (B, L, d_model) float.
            key_padding_mask: (B, L) bool, True = padding (never attended to).
            attn_mask: bool (True = blocked) or additive float, broadcastable to (B, H, L, L).
            is_causal: position i attends only to j <= i (self-attention only).
            head_mask: (H,) or (B, H) float over the *kept* self-attention heads; multiplies each
                head's output (Michel et al. 2019). 1 keep, 0 drop.
            need_weights: also return the per-head attention weights.
            memory: (B, S, d_model), the sequence cross-attention reads (the encoder's output);
                required exactly when the block has a cross-attention sub-layer.
            memory_key_padding_mask: (B, S) bool, True = padded memory position.
            cross_head_mask: (H,) or (B, H) float gates of the cross-attention heads.
            cache: for step-by-step decoding, a dict this block fills in place: ``"self"``, the
                :class:`~mha_lib.core.KVCache` of its self-attention (grows by L positions
                per call), and ``"cross"``, the keys and values of ``memory``, projected on the
                first call and reused after it (``memory`` is not read again; passing another
                memory tensor with the same cache raises ValueError). Pass the same dict at every
                step; start with ``{}``.

        Returns:
            ``(x, weights, cross_weights)``: x (B, L, d_model); weights (B, H, L, L) and
            cross_weights (B, H, L, S), before dropout and head_mask, or None (without
            ``need_weights``, or without a cross-attention sub-layer).

        Raises:
            ValueError: ``memory`` given to a block without cross-attention or missing for one
                with it; from MultiHeadAttention, on masks of the wrong shape or dtype.
        """
        if (memory is None) != (self.cross_attn is None):
            raise ValueError(
                "memory must be given exactly when the block has cross-attention "
                f"(config.cross_attention={self.cross_attn is not None}), got memory={type(memory).__name__}"
            )
        if cache is not None and memory is not None and cache.get("memory", memory) is not memory:
            raise ValueError("this cache holds another memory's keys and values: start a new cache ({}) "
                             "for every source")  # checked before anything is written to the cache
        x, weights = self._residual(x, lambda h: self._attend_cached(
            self.attn, cache, "self", h, h, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
            is_causal=is_causal, head_mask=head_mask, need_weights=need_weights), self.norm1)  # (B, L, d_model)
        cross_weights = None
        if self.cross_attn is not None:
            x, cross_weights = self._residual(x, lambda h: self._attend_cached(
                self.cross_attn, cache, "cross", h, memory, key_padding_mask=memory_key_padding_mask,
                head_mask=cross_head_mask, need_weights=need_weights), self.norm_cross)  # (B, H, L, S) weights
        if self.mlp is not None:
            x, _ = self._residual(x, lambda h: (self.mlp(h), None), self.norm2)
        return x, weights, cross_weights
