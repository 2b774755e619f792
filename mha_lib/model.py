"""One configurable Transformer block, and the encoders built from it.

The toy models of chapters 1-4 and the pretrained BERT encoder of ``mha_lib.pretrained``
are the same classes. What differs is configuration (:class:`EncoderConfig`):

=====================  ==========================  ==================================
setting                toy models (typical)        BERT (Devlin et al. 2019)
=====================  ==========================  ==================================
``norm_first``         True  (pre-LN)              False (post-LN)
``activation``         ``"relu"`` or ``"gelu"``    ``"gelu"`` (exact, erf-based)
``positional``         ``"sinusoidal"``/learned    ``"learned"``
``type_vocab_size``    0 (no token types)          2 (sentence A / B)
``embedding_norm``     False                       True (LayerNorm + dropout)
``final_norm``         True (pre-LN needs it)      False
``layer_norm_eps``     1e-5                        1e-12
``is_causal``          False (chapter 6: True)     False
``d_ff``               256 (0 = attention-only)    3072 (MiniLM: 1536)
``cross_attention``    False (a decoder: True)     False
``patch_dim``          0 (token ids; images: > 0)  0
=====================  ==========================  ==================================

A decoder-only language model is ``is_causal=True``; an attention-only model (Elhage et al.
2021) is ``d_ff=0``; a decoder block of an encoder-decoder adds ``cross_attention=True``; a
Vision Transformer front-end (Dosovitskiy et al. 2021) is ``patch_dim=C*p*p`` with
``cls_token=True`` (and ``vocab_size=0``), fed by :func:`patchify`.

Read top to bottom: config, MLP, :class:`TransformerBlock`, :class:`Encoder`,
:class:`TokenClassifier`, then saving and loading (safetensors + JSON, never pickle).

Shapes: B batch, L sequence length, d_model model width, H heads of a layer (after
pruning, H_l may differ from layer to layer), d_ff MLP width, C classes.

Sources: Vaswani et al. 2017 (block, sinusoidal positions, cross-attention); Devlin et al.
2019 (BERT embeddings, post-LN, GELU); Dosovitskiy et al. 2021 (patches, [CLS]); Xiong et al. 2020 "On Layer Normalization in the
Transformer Architecture" (pre-LN); Michel et al. 2019 (``head_mask``, pruning).
"""
from __future__ import annotations

import copy
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Callable, Mapping, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import nn

from . import checks
from .core.multi_head import MultiHeadAttention
from .core.masks import _additive as _additive_mask  # bool or float mask -> 0 / -inf, attention's own rule

__all__ = [
    "EncoderConfig",
    "EncoderOutput",
    "TokenClassifierOutput",
    "TransformerBlock",
    "Encoder",
    "TokenClassifier",
    "EncoderDecoder",
    "EncoderDecoderOutput",
    "sinusoidal_positions",
    "patchify",
    "unpatchify",
    "load",
    "CONFIG_NAME",
    "WEIGHTS_NAME",
]

CONFIG_NAME = "mha_lib_config.json"  # not "config.json": that name belongs to transformers' checkpoints
WEIGHTS_NAME = "model.safetensors"
_FORMAT_VERSION = 1

_ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),  # exact, erf-based: BERT's "gelu"
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
    "relu": F.relu,
    "silu": F.silu,
}
_POSITIONALS = ("learned", "sinusoidal", "none")

HeadMask = Union[torch.Tensor, Sequence[Optional[torch.Tensor]], None]
_ID_DTYPES = (torch.int64, torch.int32, torch.int16)  # token ids; bool and uint8 are refused


# ----------------------------------------------------------------------------- config
@dataclass
class EncoderConfig:
    """Everything that defines an :class:`Encoder`; JSON-able through ``to_dict``/``from_dict``.

    The fields cover the encoder of Vaswani et al. 2017 ("Attention Is All You Need"), BERT's
    variant (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for
    Language Understanding": post-LN, learned positions, token types, embedding LayerNorm)
    and the pre-LN placement of Xiong et al. 2020 ("On Layer Normalization in the Transformer
    Architecture"). Integer fields accept Python and numpy integers (stored as int); bools,
    floats and strings are rejected rather than converted.

    Raises:
        ValueError: on any out-of-range or wrongly typed field, naming the field and its
            value (e.g. ``d_model=10`` with ``num_heads=3``, an unknown ``activation``, a
            pruned head index outside ``range(num_heads)`` or not an integer, ``pad_token_id``
            outside [0, vocab_size), a non-bool ``norm_first``, a ``layer_norm_eps`` that is
            not finite and > 0, a ``dropout`` that is not a number in [0, 1)).
    """

    vocab_size: int  # number of token ids; input_ids must lie in [0, vocab_size); 0 with a patch front-end
    d_model: int  # width of the residual stream
    num_heads: int  # query heads per layer before pruning; d_model % num_heads == 0
    num_layers: int  # number of TransformerBlocks
    d_ff: int  # hidden width of each block's MLP (4 * d_model is usual); 0 = attention-only (no MLP)
    max_len: int  # longest sequence; size of the learned position table
    num_kv_heads: Optional[int] = None  # GQA/MQA key/value heads; None = num_heads (plain MHA)
    dropout: float = 0.0  # dropout on embeddings and on each residual branch
    attention_dropout: Optional[float] = None  # dropout on attention weights; None = `dropout`
    norm_first: bool = True  # True: pre-LN (x + f(LN(x))); False: post-LN (LN(x + f(x))), as BERT
    activation: str = "gelu"  # MLP nonlinearity: "gelu" (exact erf), "gelu_tanh", "relu", "silu"
    layer_norm_eps: float = 1e-5  # LayerNorm epsilon (BERT: 1e-12)
    positional: str = "sinusoidal"  # "learned" table, fixed "sinusoidal" (Vaswani et al.), or "none"
    type_vocab_size: int = 0  # token-type (segment) embeddings; 0 = none, BERT: 2
    embedding_norm: bool = False  # LayerNorm after summing embeddings, as BERT
    final_norm: bool = True  # LayerNorm after the last block (pre-LN stacks need it; BERT: False)
    pad_token_id: Optional[int] = 0  # id of the padding token (its embedding gets no gradient)
    bias: bool = True  # biases in attention projections
    pruned_heads: dict = field(default_factory=dict)  # {layer: [original head ids]} removed by pruning
    is_causal: bool = False  # default of forward's is_causal: position i sees only j <= i (a decoder)
    cross_attention: bool = False  # each block also attends to a `memory` sequence (encoder-decoder)
    patch_dim: int = 0  # 0: inputs are token ids; > 0: (B, N, patch_dim) float vectors (image patches)
    cls_token: bool = False  # prepend a learned [CLS] vector to patch inputs (ViT); patch front-end only

    def __post_init__(self):
        for name in ("num_layers", "max_len"):
            setattr(self, name, checks.positive_int(getattr(self, name), f"EncoderConfig.{name}"))
        for name in ("vocab_size", "d_ff", "patch_dim"):
            setattr(self, name, checks.nonnegative_int(getattr(self, name), f"EncoderConfig.{name}"))
        if self.patch_dim == 0 and self.vocab_size == 0:
            raise ValueError("EncoderConfig.vocab_size=0: a token front-end needs vocab_size >= 1")
        if self.patch_dim > 0 and self.vocab_size != 0:
            raise ValueError(
                f"EncoderConfig.vocab_size={self.vocab_size} with patch_dim={self.patch_dim}: a patch front-end "
                f"has no vocabulary, set vocab_size=0"
            )
        try:
            self.d_model, self.num_heads, kv, _ = checks.head_sizes(self.d_model, self.num_heads, self.num_kv_heads)
        except ValueError as err:
            raise ValueError(f"EncoderConfig: {err}") from None
        self.num_kv_heads = None if self.num_kv_heads is None else kv
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if value is not None or name == "dropout":
                setattr(self, name, checks.probability(value, f"EncoderConfig.{name}"))
        for name in ("norm_first", "embedding_norm", "final_norm", "bias", "is_causal", "cross_attention",
                     "cls_token"):
            setattr(self, name, checks.flag(getattr(self, name), f"EncoderConfig.{name}"))
        if not isinstance(self.activation, str) or self.activation not in _ACTIVATIONS:
            raise ValueError(
                f"EncoderConfig.activation={self.activation!r} is not one of {sorted(_ACTIVATIONS)}"
            )
        if not isinstance(self.positional, str) or self.positional not in _POSITIONALS:
            raise ValueError(
                f"EncoderConfig.positional={self.positional!r} is not one of {list(_POSITIONALS)}"
            )
        self.layer_norm_eps = checks.finite_real(self.layer_norm_eps, "EncoderConfig.layer_norm_eps", positive=True)
        self.type_vocab_size = checks.nonnegative_int(self.type_vocab_size, "EncoderConfig.type_vocab_size")
        if self.patch_dim > 0 and (self.type_vocab_size or self.pad_token_id is not None):
            raise ValueError(
                f"EncoderConfig: a patch front-end (patch_dim={self.patch_dim}) takes no token types or padding "
                f"id; got type_vocab_size={self.type_vocab_size}, pad_token_id={self.pad_token_id!r}"
            )
        if self.cls_token and self.patch_dim == 0:
            raise ValueError("EncoderConfig.cls_token=True needs a patch front-end (patch_dim > 0); token inputs "
                             "carry their own [CLS] id")
        if self.pad_token_id is not None:
            pad = checks.as_int(self.pad_token_id, "EncoderConfig.pad_token_id")
            if not 0 <= pad < self.vocab_size:
                raise ValueError(
                    f"EncoderConfig.pad_token_id={pad!r} is outside [0, vocab_size={self.vocab_size})"
                )
            self.pad_token_id = pad
        self.pruned_heads = self._normalise_pruned(self.pruned_heads)

    def _checked_heads_to_prune(self, pruned, where: str) -> dict:
        """Validate ``{layer: [heads]}`` completely (``checks.heads_by_layer``); change nothing."""
        return checks.heads_by_layer(pruned, where, num_layers=self.num_layers, num_heads=self.num_heads)

    def _normalise_pruned(self, pruned) -> dict:
        # JSON turns int keys into strings: only here, digit strings are read back as layers.
        if isinstance(pruned, Mapping):
            pruned = {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in pruned.items()}
        out = self._checked_heads_to_prune(pruned, "EncoderConfig.pruned_heads")
        return dict(sorted((k, v) for k, v in out.items() if v))

    @property
    def head_dim(self) -> int:
        """d_k = d_model // num_heads."""
        return self.d_model // self.num_heads

    def to_dict(self) -> dict:
        """A JSON-able dict (pruned-head layer keys become strings)."""
        d = asdict(self)
        d["pruned_heads"] = {str(k): list(v) for k, v in self.pruned_heads.items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "EncoderConfig":
        """Inverse of :meth:`to_dict`. Raises ValueError naming unknown keys."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"EncoderConfig.from_dict: unknown keys {unknown}")
        return cls(**dict(d))


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
    ``config.d_ff == 0``: an attention-only block, as in Elhage et al. 2021).

    Args:
        config: the :class:`EncoderConfig`.
        layer_index: which layer this is, to look up ``config.pruned_heads`` (they apply to the
            self-attention).
    """

    def __init__(self, config: EncoderConfig, layer_index: int = 0):
        super().__init__()
        self.norm_first = config.norm_first
        attn_dropout = config.dropout if config.attention_dropout is None else config.attention_dropout

        def attention(pruned=()):
            return MultiHeadAttention(config.d_model, config.num_heads, num_kv_heads=config.num_kv_heads,
                                      dropout=attn_dropout, bias=config.bias, pruned_heads=tuple(pruned))

        def norm():
            return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

        self.attn = attention(config.pruned_heads.get(layer_index, ()))
        self.norm1 = norm()
        self.cross_attn = attention() if config.cross_attention else None
        self.norm_cross = norm() if config.cross_attention else None
        self.mlp = MLP(config) if config.d_ff > 0 else None
        self.norm2 = norm() if config.d_ff > 0 else None
        self.drop = nn.Dropout(config.dropout)

    @staticmethod
    def _attend(attn: MultiHeadAttention, cache: Optional[dict], name: str, query, key, **kwargs):
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
                :class:`~mha_lib.attention.KVCache` of its self-attention (grows by L positions
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
        x, weights = self._residual(x, lambda h: self._attend(
            self.attn, cache, "self", h, h, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
            is_causal=is_causal, head_mask=head_mask, need_weights=need_weights), self.norm1)  # (B, L, d_model)
        cross_weights = None
        if self.cross_attn is not None:
            x, cross_weights = self._residual(x, lambda h: self._attend(
                self.cross_attn, cache, "cross", h, memory, key_padding_mask=memory_key_padding_mask,
                head_mask=cross_head_mask, need_weights=need_weights), self.norm_cross)  # (B, H, L, S) weights
        if self.mlp is not None:
            x, _ = self._residual(x, lambda h: (self.mlp(h), None), self.norm2)
        return x, weights, cross_weights


# ----------------------------------------------------------------------------- outputs
@dataclass
class EncoderOutput:
    """What :meth:`Encoder.forward` returns.

    Attributes:
        last_hidden_state: (B, L, d_model).
        hidden_states: with ``output_hidden_states``, a tuple of num_layers + 1 tensors
            (B, L, d_model): the embeddings, then each block's output (before
            ``final_norm``; the last entry equals last_hidden_state when there is no
            final norm). Else None.
        attentions: with ``output_attentions``, a tuple of num_layers tensors
            (B, H_l, L, L), one per layer; H_l is that layer's number of kept heads, so
            the tuple is ragged after pruning. Else None.
        cross_attentions: with ``output_attentions`` and a ``memory``, a tuple of num_layers
            tensors (B, H, L, S), the cross-attention weights of each layer. Else None.
    """

    last_hidden_state: torch.Tensor
    hidden_states: Optional[tuple] = None
    attentions: Optional[tuple] = None
    cross_attentions: Optional[tuple] = None


@dataclass
class TokenClassifierOutput:
    """What :meth:`TokenClassifier.forward` returns.

    Attributes:
        logits: (B, L, C) float, one score per class at every position, or (B, C) with a
            pooled readout (``pooling="cls"`` or ``"mean"``).
        last_hidden_state, hidden_states, attentions, cross_attentions: as in
            :class:`EncoderOutput`.
    """

    logits: torch.Tensor
    last_hidden_state: torch.Tensor
    hidden_states: Optional[tuple] = None
    attentions: Optional[tuple] = None
    cross_attentions: Optional[tuple] = None


# ----------------------------------------------------------------------------- encoder
class _SaveLoadMixin:
    """safetensors weights + a JSON config; never pickle.

    A subclass that only adds helpers (e.g. ``mha_lib.pretrained.BertEncoder``) sets
    ``_saved_class = "Encoder"`` so that its files load with :func:`load` too.
    """

    def _extra_config(self) -> dict:
        return {}

    def save_pretrained(self, path: Union[str, os.PathLike]) -> str:
        """Write ``mha_lib_config.json`` and ``model.safetensors`` into folder ``path``.

        Pruned heads are recorded in the config, so the weights load into a model built
        from it. Returns the folder path. Raises OSError if the folder cannot be written.
        """
        from safetensors.torch import save_file

        from . import __version__

        os.makedirs(path, exist_ok=True)
        meta = {
            "format": "mha_lib",
            "format_version": _FORMAT_VERSION,
            "mha_lib_version": __version__,
            "model_class": getattr(self, "_saved_class", type(self).__name__),
            "config": self.config.to_dict(),
            **self._extra_config(),
        }
        with open(os.path.join(path, CONFIG_NAME), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        save_file(state, os.path.join(path, WEIGHTS_NAME), metadata={"format": "pt"})
        return str(path)

    @classmethod
    def from_pretrained(cls, path: Union[str, os.PathLike], map_location: str = "cpu"):
        """Build the model saved by :meth:`save_pretrained` in folder ``path``.

        Raises:
            ValueError: if the folder lacks the files, was saved from another class, or a
                tensor is missing, unexpected or of the wrong shape (naming the key).
        """
        meta = _read_meta(path)
        if meta["model_class"] != getattr(cls, "_saved_class", cls.__name__):
            raise ValueError(
                f"{path} holds a {meta['model_class']!r}, not a {cls.__name__!r}; use mha_lib.model.load()"
            )
        return load(path, map_location=map_location)


class Encoder(_SaveLoadMixin, nn.Module):
    """Token (+ position, + token-type) embeddings followed by num_layers TransformerBlocks.

    The toy models and the pretrained BERT encoder (``mha_lib.pretrained.load_bert``) are
    both this class; see the module docstring for the settings that differ. It follows the
    encoder of Vaswani et al. 2017 ("Attention Is All You Need"), with BERT's embeddings
    and post-LN when configured so (Devlin et al. 2019) and pre-LN otherwise (Xiong et al.
    2020); ``head_mask`` and ``prune_heads`` follow Michel et al. 2019.

    Shapes and dtypes: ``input_ids`` and ``token_type_ids`` (B, L) integer (long);
    ``key_padding_mask`` (B, L) bool, True = padding; the output ``last_hidden_state``
    (B, L, d_model) in the parameters' dtype (float32 unless converted); per-layer
    attention weights (B, H_l, L, L), H_l the kept heads of layer l.

    Args:
        config: an :class:`EncoderConfig`; the encoder keeps a deep copy.

    Raises:
        ValueError: ``config`` is not an :class:`EncoderConfig`. Bad inputs to
            :meth:`forward` and :meth:`prune_heads` raise ValueError there.
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        if not isinstance(config, EncoderConfig):
            raise ValueError(f"config must be an EncoderConfig, got {type(config).__name__}: {config!r}")
        self.config = copy.deepcopy(config)  # prune_heads edits it; never the caller's object
        config = self.config
        if config.patch_dim:  # image patches: a linear map of each patch vector, as ViT
            self.token_embedding = None
            self.patch_embedding = nn.Linear(config.patch_dim, config.d_model)
        else:
            self.token_embedding = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
            self.patch_embedding = None
        self.cls_embedding = nn.Parameter(torch.zeros(1, 1, config.d_model)) if config.cls_token else None
        if config.positional == "learned":
            self.position_embedding = nn.Embedding(config.max_len, config.d_model)
        else:
            self.position_embedding = None
        if config.positional == "sinusoidal":
            # a fixed function of position: not saved with the weights
            self.register_buffer("sinusoid", sinusoidal_positions(config.max_len, config.d_model), persistent=False)
        else:
            self.sinusoid = None
        self.token_type_embedding = (
            nn.Embedding(config.type_vocab_size, config.d_model) if config.type_vocab_size > 0 else None
        )
        self.embedding_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.embedding_norm else None
        )
        self.embedding_dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(TransformerBlock(config, i) for i in range(config.num_layers))
        self.final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.final_norm else None

    # -- embeddings
    def embed(self, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor] = None,
              position_offset: int = 0) -> torch.Tensor:
        """The front-end: token ids (B, L) long, or patch vectors (B, N, patch_dim) float (then
        L = N, or N + 1 with the [CLS] vector first) -> embeddings (B, L, d_model): token or patch
        embedding + position + token type, then the optional embedding LayerNorm and dropout.

        ``position_offset``: the position of the first input (decoding one token at a time).

        Raises ValueError on bad ids or patches, or positions past max_len."""
        if not checks.tracing():
            self._check_inputs(input_ids, token_type_ids, position_offset)
        if self.patch_embedding is not None:
            x = self.patch_embedding(input_ids)  # (B, N, d_model)
            if self.cls_embedding is not None:
                x = torch.cat([self.cls_embedding.expand(x.shape[0], 1, -1), x], dim=1)  # (B, N + 1, d_model)
        else:
            x = self.token_embedding(input_ids)  # (B, L, d_model)
        positions = slice(position_offset, position_offset + x.shape[1])
        if self.position_embedding is not None:
            x = x + self.position_embedding.weight[positions]  # (L, d_model) broadcast over B
        elif self.sinusoid is not None:
            x = x + self.sinusoid[positions].to(x.dtype)
        if self.token_type_embedding is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embedding(token_type_ids)
        if self.embedding_norm is not None:
            x = self.embedding_norm(x)
        return self.embedding_dropout(x)

    def _check_inputs(self, input_ids, token_type_ids, position_offset: int = 0) -> None:
        cfg = self.config
        offset = checks.nonnegative_int(position_offset, "position_offset")
        if cfg.patch_dim:
            if not (isinstance(input_ids, torch.Tensor) and input_ids.dim() == 3 and input_ids.is_floating_point()
                    and input_ids.shape[-1] == cfg.patch_dim):
                raise ValueError(
                    f"patch inputs must be a float tensor (B, N, patch_dim={cfg.patch_dim}) (see patchify), got "
                    + (f"{tuple(input_ids.shape)} {input_ids.dtype}" if isinstance(input_ids, torch.Tensor)
                       else repr(type(input_ids)))
                )
            expected = self.patch_embedding.weight.dtype
            if input_ids.dtype != expected and not torch.is_autocast_enabled(input_ids.device.type):
                # F.linear would raise a bare RuntimeError on the mix (autocast casts it instead)
                raise ValueError(f"patch inputs have dtype {input_ids.dtype}, the model's parameters are {expected}: "
                                 f"convert them with .to({expected}) (or convert the model)")
            if input_ids.shape[1] == 0:
                raise ValueError(f"patch inputs {tuple(input_ids.shape)} hold no patch: an image smaller than one "
                                 f"patch has nothing to classify")
            L = input_ids.shape[1] + int(cfg.cls_token)
            if L > cfg.max_len and cfg.positional != "none":
                raise ValueError(f"{L} positions (patches{' + [CLS]' if cfg.cls_token else ''}) exceed max_len={cfg.max_len}")
            if not bool(torch.isfinite(input_ids).all()):
                raise ValueError("patch inputs hold NaN or infinite values")
            if token_type_ids is not None:
                raise ValueError("token_type_ids given, but this encoder has a patch front-end")
            return
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.dtype not in _ID_DTYPES:
            raise ValueError(
                "input_ids must be an integer tensor of shape (B, L), got "
                + (f"{tuple(input_ids.shape)} {input_ids.dtype}" if isinstance(input_ids, torch.Tensor) else repr(type(input_ids)))
            )
        B, L = input_ids.shape
        if offset + L > cfg.max_len and cfg.positional != "none":
            raise ValueError(f"sequence length {L} (from position {offset}) exceeds max_len={cfg.max_len}"
                             if offset else f"sequence length {L} exceeds max_len={cfg.max_len}")
        if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= cfg.vocab_size):
            raise ValueError(
                f"input_ids must lie in [0, vocab_size={cfg.vocab_size}), got min {int(input_ids.min())} "
                f"max {int(input_ids.max())}"
            )
        if self.token_type_embedding is not None and token_type_ids is not None:
            if not isinstance(token_type_ids, torch.Tensor) or token_type_ids.dtype not in _ID_DTYPES:
                raise ValueError(f"token_type_ids must be an integer tensor (long), got {token_type_ids!r:.80}")
            if token_type_ids.shape != input_ids.shape:
                raise ValueError(
                    f"token_type_ids shape {tuple(token_type_ids.shape)} != input_ids shape {tuple(input_ids.shape)}"
                )
            elif token_type_ids.numel() and (
                int(token_type_ids.min()) < 0 or int(token_type_ids.max()) >= cfg.type_vocab_size
            ):
                raise ValueError(
                    f"token_type_ids must lie in [0, type_vocab_size={cfg.type_vocab_size}), got max "
                    f"{int(token_type_ids.max())}"
                )
        elif token_type_ids is not None and self.token_type_embedding is None:
            raise ValueError("token_type_ids given, but this encoder has type_vocab_size=0")

    # -- head masks
    def _layer_head_masks(self, head_mask: HeadMask) -> list:
        """Split a head_mask into one entry per layer ((H_l,), (B, H_l) or None)."""
        n = self.config.num_layers
        if head_mask is None:
            return [None] * n
        if isinstance(head_mask, torch.Tensor):
            if head_mask.dim() not in (2, 3) or head_mask.shape[0] != n:
                raise ValueError(
                    f"head_mask tensor must be (num_layers={n}, H) or (num_layers={n}, B, H), got "
                    f"{tuple(head_mask.shape)}; for pruned layers with different head counts pass a "
                    f"list of per-layer (H_l,) or (B, H_l) masks"
                )
            return list(head_mask.unbind(0))
        if not isinstance(head_mask, (list, tuple)):
            raise ValueError(f"head_mask must be a tensor or a list of per-layer masks, got {head_mask!r:.80}")
        masks = list(head_mask)
        if len(masks) != n:
            raise ValueError(f"head_mask has {len(masks)} per-layer entries, expected num_layers={n}")
        return masks

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        token_type_ids: Optional[torch.Tensor] = None,
        key_padding_mask: Optional[torch.Tensor] = None,
        attn_mask: Optional[torch.Tensor] = None,
        is_causal: Optional[bool] = None,
        head_mask: HeadMask = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        memory: Optional[torch.Tensor] = None,
        memory_key_padding_mask: Optional[torch.Tensor] = None,
        cross_head_mask: HeadMask = None,
        caches: Optional[Sequence[dict]] = None,
        position_offset: Optional[int] = None,
    ) -> EncoderOutput:
        """Encode a batch of token ids.

        Args:
            input_ids: (B, L) long, in [0, vocab_size).
            token_type_ids: (B, L) long in [0, type_vocab_size); default all 0. Only for
                encoders with token types (BERT's sentence A = 0 / B = 1).
            key_padding_mask: (B, L) bool, True = padding. Padded keys are never attended
                to, so real positions do not depend on padding. Note the polarity is the
                opposite of transformers' ``attention_mask`` (1 = keep): pass
                ``attention_mask == 0``. Not inferred from ``pad_token_id``.
            attn_mask: bool (True = blocked) or additive float, broadcastable to (B, H, L, L);
                the same for every layer.
            is_causal: position i attends only to j <= i; None (default) takes
                ``config.is_causal``.
            head_mask: Michel et al. 2019's xi: (num_layers, H) or (num_layers, B, H)
                float, or a sequence of num_layers per-layer masks (H_l,)/(B, H_l)/None
                (needed once layers are pruned to different head counts). Indexes the
                *kept* heads of each layer. 1 keep, 0 drop.
            output_attentions: return per-layer per-head weights.
            output_hidden_states: return the embeddings and every block's output.
            memory: (B, S, d_model) float, what the cross-attention sub-layers read (an encoder's
                ``last_hidden_state``); only for ``config.cross_attention``.
            memory_key_padding_mask: (B, S) bool, True = padded memory position.
            cross_head_mask: gates of the cross-attention heads, shaped like ``head_mask``.
            caches: for decoding step by step, one dict per block (start with ``[{} for _ in
                model.blocks]``), filled in place by :meth:`TransformerBlock.forward`; then
                ``input_ids`` holds only the new positions and ``position_offset`` says where
                they start.
            position_offset: position of ``input_ids[:, 0]``; default: the number of positions
                already in ``caches`` (0 without). A value that differs from it raises ValueError.

        Returns:
            :class:`EncoderOutput` (last_hidden_state (B, L, d_model), hidden_states,
            attentions (per layer (B, H_l, L, L)), cross_attentions (per layer (B, H, L, S))).

        Raises:
            ValueError: on ids out of range, L > max_len, a non-bool key_padding_mask,
                a head_mask of the wrong shape, or ``memory`` given without cross-attention
                (or missing with it); patch inputs with no patch (N = 0), holding NaN or inf, or
                of another dtype than the parameters (naming both).
        """
        layer_masks = self._layer_head_masks(head_mask)
        cross_masks = self._layer_head_masks(cross_head_mask)
        if caches is not None and (not isinstance(caches, (list, tuple)) or len(caches) != len(self.blocks)
                                   or not all(isinstance(c, dict) for c in caches)):
            raise ValueError(f"caches must be a list of {len(self.blocks)} dicts (one per block), got {caches!r:.80}")
        cached = 0
        if caches is not None and "self" in caches[0]:
            cached = caches[0]["self"].length
        if position_offset is None:
            position_offset = cached
        elif caches is not None and checks.nonnegative_int(position_offset, "position_offset") != cached:
            raise ValueError(f"position_offset={position_offset} but the caches hold {cached} positions")
        x = self.embed(input_ids, token_type_ids, position_offset)  # (B, L, d_model)
        if key_padding_mask is not None and not checks.tracing() and (
            not isinstance(key_padding_mask, torch.Tensor) or tuple(key_padding_mask.shape) != tuple(x.shape[:2])
        ):  # its dtype and values are checked by MultiHeadAttention, like every mask
            raise ValueError(
                f"key_padding_mask must be a (B, L) tensor, L = {x.shape[1]} positions (bool, "
                f"True = padding, or float, added), got {getattr(key_padding_mask, 'shape', key_padding_mask)!r}; "
                f"from a transformers attention_mask (1 = keep) pass attention_mask == 0"
            )
        is_causal = self.config.is_causal if is_causal is None else checks.flag(is_causal, "is_causal")
        hidden_states = [x] if output_hidden_states else None
        attentions, cross_attentions = ([], []) if output_attentions else (None, None)
        for i, (block, hm, cross_hm) in enumerate(zip(self.blocks, layer_masks, cross_masks)):
            x, weights, cross = block(
                x,
                key_padding_mask=key_padding_mask,
                attn_mask=attn_mask,
                is_causal=is_causal,
                head_mask=hm,
                need_weights=output_attentions,
                memory=memory,
                memory_key_padding_mask=memory_key_padding_mask,
                cross_head_mask=cross_hm,
                cache=None if caches is None else caches[i],
            )  # (B, L, d_model), (B, H_l, L, L) or None, (B, H, L, S) or None
            if output_hidden_states:
                hidden_states.append(x)
            if output_attentions:
                attentions.append(weights)
                cross_attentions.append(cross)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return EncoderOutput(
            last_hidden_state=x,
            hidden_states=tuple(hidden_states) if output_hidden_states else None,
            attentions=tuple(attentions) if output_attentions else None,
            cross_attentions=tuple(cross_attentions) if output_attentions and memory is not None else None,
        )

    # -- pruning
    @property
    def heads_per_layer(self) -> list:
        """Number of kept heads in each layer, e.g. [12, 10, 12, ...]."""
        return [len(block.attn.kept_heads) for block in self.blocks]

    def prune_heads(self, heads_to_prune: Mapping[int, Sequence[int]]) -> None:
        """Remove heads for good: ``{layer: [head, ...]}``, heads in *original* numbering.

        Pruning an already-pruned head does nothing. The pruned heads are recorded in
        ``config.pruned_heads``, so :meth:`save_pretrained` output loads back. Michel et
        al. 2019: masking a head with ``head_mask`` and pruning it give the same output.

        Atomic: every layer and head index is checked before anything is pruned, so on an
        error no layer is pruned and ``config.pruned_heads`` is unchanged.

        Raises:
            ValueError: a layer outside range(num_layers), a head outside
                range(num_heads), a bool or non-integer index (e.g. ``1.5``), or a layer's
                heads given as a single value instead of a list; the message names it.
        """
        checked = self.config._checked_heads_to_prune(heads_to_prune, "prune_heads")
        for layer_i, heads in checked.items():
            attn = self.blocks[layer_i].attn
            attn.prune_heads(heads)
            pruned = sorted(int(h) for h in attn.pruned_heads)
            if pruned:
                self.config.pruned_heads[layer_i] = pruned
        self.config.pruned_heads = dict(sorted(self.config.pruned_heads.items()))

    def num_parameters(self) -> int:
        """Number of parameters (buffers excluded)."""
        return sum(p.numel() for p in self.parameters())


# ----------------------------------------------------------------------------- classifier
_POOLINGS = ("token", "cls", "mean")


class TokenClassifier(_SaveLoadMixin, nn.Module):
    """An :class:`Encoder` plus a linear readout: logits (B, L, C) per position, or (B, C) pooled.

    Chapter 1's synthetic tasks predict a label at every position (``pooling="token"``); a
    causal language model is the same with C = vocab_size and ``config.is_causal``. A sequence
    classifier reads one vector per sequence: the first position's (``"cls"``, BERT's and ViT's
    [CLS]) or the mean over non-padded positions (``"mean"``).

    Args:
        config: an :class:`EncoderConfig`.
        num_classes: C >= 1.
        pooling: ``"token"`` (default), ``"cls"`` or ``"mean"``.

    Raises:
        ValueError: if num_classes is not a positive int, or an unknown ``pooling``.
    """

    def __init__(self, config: EncoderConfig, num_classes: int, pooling: str = "token"):
        super().__init__()
        self.num_classes = checks.positive_int(num_classes, "num_classes")
        if not isinstance(pooling, str) or pooling not in _POOLINGS:
            raise ValueError(f"pooling={pooling!r} is not one of {list(_POOLINGS)}")
        self.pooling = pooling
        self.encoder = Encoder(config)
        self.readout = nn.Linear(config.d_model, num_classes)

    @property
    def config(self) -> EncoderConfig:
        """The encoder's config (one object, so pruning records show up here too)."""
        return self.encoder.config

    def _extra_config(self) -> dict:
        return {"num_classes": self.num_classes, "pooling": self.pooling}

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        token_type_ids: Optional[torch.Tensor] = None,
        key_padding_mask: Optional[torch.Tensor] = None,
        attn_mask: Optional[torch.Tensor] = None,
        is_causal: Optional[bool] = None,
        head_mask: HeadMask = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        memory: Optional[torch.Tensor] = None,
        memory_key_padding_mask: Optional[torch.Tensor] = None,
    ) -> TokenClassifierOutput:
        """Same arguments as :meth:`Encoder.forward`.

        Returns:
            :class:`TokenClassifierOutput` with logits (B, L, C) float.

        Raises:
            ValueError: as :meth:`Encoder.forward`: ids out of range, L > max_len, a non-bool
                or wrongly shaped key_padding_mask, a bad attn_mask or head_mask.
        """
        enc = self.encoder(
            input_ids,
            token_type_ids=token_type_ids,
            key_padding_mask=key_padding_mask,
            attn_mask=attn_mask,
            is_causal=is_causal,
            head_mask=head_mask,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            memory=memory,
            memory_key_padding_mask=memory_key_padding_mask,
        )
        h = enc.last_hidden_state  # (B, L, d_model)
        causal = self.config.is_causal if is_causal is None else is_causal
        if self.pooling == "cls" and causal is True:
            raise ValueError("pooling='cls' reads position 0, which a causal model lets see only itself; "
                             "use pooling='mean' or is_causal=False")
        if self.pooling == "cls":
            h = h[:, 0]  # (B, d_model)
        elif self.pooling == "mean":
            keep = torch.ones(h.shape[:2], dtype=h.dtype, device=h.device) if key_padding_mask is None else (
                (~key_padding_mask).to(h.dtype) if key_padding_mask.dtype == torch.bool
                else (key_padding_mask == 0).to(h.dtype))  # (B, L), 1 = real position
            h = (h * keep[..., None]).sum(1) / keep.sum(1, keepdim=True).clamp(min=1)  # (B, d_model)
        logits = self.readout(h)  # (B, L, C), or (B, C) pooled
        return TokenClassifierOutput(logits, enc.last_hidden_state, enc.hidden_states, enc.attentions,
                                     enc.cross_attentions)

    @property
    def heads_per_layer(self) -> list:
        """Number of kept heads in each layer."""
        return self.encoder.heads_per_layer

    def prune_heads(self, heads_to_prune: Mapping[int, Sequence[int]]) -> None:
        """See :meth:`Encoder.prune_heads`."""
        self.encoder.prune_heads(heads_to_prune)

    def num_parameters(self) -> int:
        """Number of parameters (buffers excluded)."""
        return sum(p.numel() for p in self.parameters())


# ----------------------------------------------------------------------------- encoder-decoder
@dataclass
class EncoderDecoderOutput:
    """What :meth:`EncoderDecoder.forward` returns.

    Attributes:
        logits: (B, T, C) float, a score per target class at every decoder position.
        encoder_attentions: with ``output_attentions``, per encoder layer (B, H, S, S).
        attentions: with ``output_attentions``, per decoder layer (B, H, T, T), causal.
        cross_attentions: with ``output_attentions``, per decoder layer (B, H, T, S).
    """

    logits: torch.Tensor
    encoder_attentions: Optional[tuple] = None
    attentions: Optional[tuple] = None
    cross_attentions: Optional[tuple] = None


class EncoderDecoder(nn.Module):
    """The encoder-decoder of Vaswani et al. 2017, built from two stacks of the one block.

    ``source_encoder`` is an :class:`Encoder` over the source ids (bidirectional);
    ``decoder`` is an :class:`Encoder` whose config has ``is_causal=True`` and
    ``cross_attention=True``: each of its blocks attends causally to the target so far, then
    to the encoder's output (cross-attention: queries from the target, keys and values from
    the source), then applies its MLP. A linear readout gives (B, T, num_classes) logits.

    Head masks: ``head_mask`` is a sequence with one gate per attention module, in the order
    of ``model.modules()`` (what ``mha_lib.pruning.attention_layers`` returns): the encoder's
    layers, then for each decoder layer its self-attention and its cross-attention. Each entry
    is (H,), (B, H) or None.

    Args:
        encoder: :class:`EncoderConfig` of the source stack (``cross_attention=False``).
        decoder: :class:`EncoderConfig` of the target stack (``is_causal=True``,
            ``cross_attention=True``, same ``d_model``).
        num_classes: C >= 1, the target vocabulary.

    Raises:
        ValueError: configs that break these rules (naming the field), or a num_classes that is
            not a positive int or exceeds the decoder's vocab_size.
    """

    def __init__(self, encoder: EncoderConfig, decoder: EncoderConfig, num_classes: int):
        super().__init__()
        for name, cfg in (("encoder", encoder), ("decoder", decoder)):
            if not isinstance(cfg, EncoderConfig):
                raise ValueError(f"{name} must be an EncoderConfig, got {type(cfg).__name__}")
        if encoder.cross_attention or not (decoder.cross_attention and decoder.is_causal):
            raise ValueError("an EncoderDecoder needs encoder.cross_attention=False and decoder.cross_attention="
                             f"decoder.is_causal=True; got {encoder.cross_attention}, {decoder.cross_attention}, "
                             f"{decoder.is_causal}")
        if encoder.d_model != decoder.d_model:
            raise ValueError(f"encoder.d_model={encoder.d_model} != decoder.d_model={decoder.d_model}")
        self.num_classes = checks.positive_int(num_classes, "num_classes")
        if decoder.patch_dim or self.num_classes > decoder.vocab_size:  # outputs are fed back as decoder inputs
            raise ValueError(f"num_classes={self.num_classes} must not exceed the decoder's vocab_size="
                             f"{decoder.vocab_size}: every output id is fed back to the decoder")
        self.source_encoder = Encoder(encoder)
        self.decoder = Encoder(decoder)
        self.readout = nn.Linear(decoder.d_model, self.num_classes)

    def _split_head_mask(self, head_mask) -> tuple:
        """(encoder masks, decoder self masks, decoder cross masks), lists of per-layer entries."""
        n_enc, n_dec = len(self.source_encoder.blocks), len(self.decoder.blocks)
        if head_mask is None:
            return None, None, None
        masks = list(head_mask.unbind(0)) if isinstance(head_mask, torch.Tensor) else head_mask
        if not isinstance(masks, (list, tuple)) or len(masks) != n_enc + 2 * n_dec:
            raise ValueError(
                f"head_mask needs {n_enc + 2 * n_dec} entries (encoder layers, then self and cross for each "
                f"decoder layer), got {head_mask!r:.80}"
            )
        masks = list(masks)
        return masks[:n_enc], masks[n_enc::2], masks[n_enc + 1::2]

    def _source_padding(self, src_ids, mask):
        """The source's padding mask: the one given, else ``src_ids == pad_token_id`` (when the
        encoder has a padding id); refuses sources with no real position.

        Every form of mask reaches the same refusal: bool (True = padding) and float (added to
        the scores; -inf, or anything attention treats as blocked, is padding), and an empty
        source (S = 0), which has no real position whatever the mask. Masks of the wrong shape
        or dtype are left to the encoder's checks, which name them."""
        if mask is None and self.source_encoder.config.pad_token_id is not None and isinstance(src_ids, torch.Tensor):
            mask = src_ids == self.source_encoder.config.pad_token_id
        if not checks.tracing() and isinstance(src_ids, torch.Tensor) and src_ids.dim() == 2:
            blocked = self._blocked_source(src_ids, mask)  # (B, S) bool, True = no real token there
            empty = blocked.all(-1).nonzero().flatten().tolist()  # rows with no real position (all of them if S = 0)
            if empty:
                raise ValueError(
                    f"source row(s) {empty[:10]}{' ...' if len(empty) > 10 else ''} of src_ids {tuple(src_ids.shape)} "
                    f"are all padding (or empty): nothing to translate"
                )
        return mask

    def _blocked_source(self, src_ids: torch.Tensor, mask) -> torch.Tensor:
        """(B, S) bool, True where the source has no real token: ``mask``'s blocked positions
        (as attention reads it, in the encoder's dtype), or none when there is no usable mask."""
        if not (isinstance(mask, torch.Tensor) and tuple(mask.shape) == tuple(src_ids.shape)
                and (mask.dtype == torch.bool or mask.is_floating_point())):
            return torch.zeros(src_ids.shape, dtype=torch.bool, device=src_ids.device)
        dtype = next(self.source_encoder.parameters()).dtype
        return torch.isneginf(_additive_mask(mask, dtype))  # the one rule of what a mask blocks

    def encode(self, src_ids: torch.Tensor, src_key_padding_mask: Optional[torch.Tensor] = None,
               head_mask=None, output_attentions: bool = False) -> EncoderOutput:
        """The source stack alone: src_ids (B, S) long -> :class:`EncoderOutput` (memory (B, S, d_model))."""
        return self.source_encoder(src_ids, key_padding_mask=src_key_padding_mask, head_mask=head_mask,
                                   output_attentions=output_attentions)

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        src_ids: torch.Tensor,
        src_key_padding_mask: Optional[torch.Tensor] = None,
        head_mask=None,
        output_attentions: bool = False,
    ) -> EncoderDecoderOutput:
        """Teacher-forced pass: the target so far (``input_ids``, (B, T) long, starting with a
        begin-of-sequence id) given the source (``src_ids``, (B, S) long).

        Args:
            input_ids: (B, T) long target-side inputs.
            src_ids: (B, S) long source ids.
            src_key_padding_mask: (B, S) bool, True = padding: never attended to, by the encoder
                nor by cross-attention. Default: ``src_ids == pad_token_id`` of the encoder's config
                (no mask when it has none).
            head_mask: per attention module gates (see the class docstring), or None.
            output_attentions: also return all three kinds of per-head weights.

        Returns:
            :class:`EncoderDecoderOutput` with logits (B, T, C).

        Raises:
            ValueError: bad ids or masks (as :meth:`Encoder.forward`), a source row that is all
                padding (bool True or float -inf) or empty (S = 0), or a head_mask of the wrong length.
        """
        enc_masks, self_masks, cross_masks = self._split_head_mask(head_mask)
        src_key_padding_mask = self._source_padding(src_ids, src_key_padding_mask)
        enc = self.encode(src_ids, src_key_padding_mask, enc_masks, output_attentions)  # (B, S, d_model)
        dec = self.decoder(input_ids, memory=enc.last_hidden_state, memory_key_padding_mask=src_key_padding_mask,
                           head_mask=self_masks, cross_head_mask=cross_masks,
                           output_attentions=output_attentions)  # (B, T, d_model)
        return EncoderDecoderOutput(self.readout(dec.last_hidden_state), enc.attentions, dec.attentions,
                                    dec.cross_attentions)

    @torch.no_grad()
    def generate(
        self,
        src_ids: torch.Tensor,
        *,
        bos_id: int,
        max_new_tokens: int,
        src_key_padding_mask: Optional[torch.Tensor] = None,
        eos_id: Optional[int] = None,
        use_cache: bool = True,
        output_attentions: bool = False,
    ):
        """Greedy decoding: at each step, the arg-max class becomes the next input.

        With ``use_cache`` (default) the source is encoded once, each decoder layer keeps a
        :class:`~mha_lib.attention.KVCache` of its self-attention (one position more per step)
        and projects the encoder's keys and values for cross-attention once, on the first step;
        a step then runs the decoder on one position. ``use_cache=False`` reruns the decoder on
        the whole prefix at every step (the same tokens, slower; for checking).

        Args:
            src_ids: (B, S) long; src_key_padding_mask: (B, S) bool, True = padding, or float,
                added to the scores, -inf = padding (default as in :meth:`forward`).
            bos_id: the first input id of every target; max_new_tokens: steps, >= 1, at most
                the decoder's max_len.
            eos_id: once a sequence has produced it, its later outputs are ``eos_id`` too.
            output_attentions: also return, per step, the decoder's self- and
                cross-attention weights of the new position.

        Returns:
            ``tokens`` (B, max_new_tokens) long, or ``(tokens, steps)`` with
            ``output_attentions``: ``steps[t] = (self_weights, cross_weights)``, per layer
            (B, H, 1, t + 1) and (B, H, 1, S).

        Raises:
            ValueError: a bad id or length (naming it), ids rejected by the encoders, or a source
                row that is all padding (True in a bool mask, -inf in a float one) or empty (S = 0),
                naming the rows.
        """
        bos = checks.nonnegative_int(bos_id, "bos_id")
        steps = checks.positive_int(max_new_tokens, "max_new_tokens")
        if steps > self.decoder.config.max_len:  # inputs at positions 0 .. steps - 1
            raise ValueError(f"max_new_tokens={steps} needs {steps} decoder positions, max_len is "
                             f"{self.decoder.config.max_len}")
        eos = None if eos_id is None else checks.nonnegative_int(eos_id, "eos_id")
        for name, value in (("bos_id", bos), ("eos_id", eos)):
            if value is not None and value >= self.decoder.config.vocab_size:
                raise ValueError(f"{name}={value} is outside the decoder's vocabulary [0, {self.decoder.config.vocab_size})")
        use_cache = checks.flag(use_cache, "use_cache")
        src_key_padding_mask = self._source_padding(src_ids, src_key_padding_mask)
        memory = self.encode(src_ids, src_key_padding_mask).last_hidden_state  # (B, S, d_model), once
        B = src_ids.shape[0]
        tokens = torch.full((B, 1), bos, dtype=torch.long, device=src_ids.device)  # (B, 1 + t)
        caches = [{} for _ in self.decoder.blocks] if use_cache else None
        done = torch.zeros(B, dtype=torch.bool, device=src_ids.device)
        record = []
        for t in range(steps):
            new = tokens[:, -1:] if use_cache else tokens  # (B, 1) or (B, 1 + t)
            out = self.decoder(new, memory=memory, memory_key_padding_mask=src_key_padding_mask, caches=caches,
                               output_attentions=output_attentions)  # positions follow the caches
            next_id = self.readout(out.last_hidden_state[:, -1]).argmax(-1)  # (B,)
            if eos is not None:
                next_id = torch.where(done, torch.full_like(next_id, eos), next_id)
                done = done | (next_id == eos)
            tokens = torch.cat([tokens, next_id[:, None]], dim=1)
            if output_attentions:
                record.append((tuple(w[:, :, -1:] for w in out.attentions),
                               tuple(w[:, :, -1:] for w in out.cross_attentions)))
        return (tokens[:, 1:], record) if output_attentions else tokens[:, 1:]


# ----------------------------------------------------------------------------- loading
_CLASSES = {"Encoder": Encoder, "TokenClassifier": TokenClassifier}


MAX_JSON_BYTES = 2**26  # 64 MiB: mha_lib's JSON files (configs, records) are kilobytes


def read_json(path: Union[str, os.PathLike], kind: type = dict):
    """The JSON value in ``path``, which must be a ``kind`` (dict: an object; list: an array).

    Raises:
        ValueError: the file is missing, larger than :data:`MAX_JSON_BYTES`, not valid JSON (or
            not UTF-8, or nested deeper than Python's parser goes: 100,000 ``[`` raise
            RecursionError inside ``json``, or an integer of more than 4300 digits), or its
            top level is not a ``kind``; the message names the file.
    """
    try:
        size = os.path.getsize(path)
        if size > MAX_JSON_BYTES:
            raise ValueError(f"{size:,} bytes, more than the {MAX_JSON_BYTES:,} a JSON config may have")
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except RecursionError:  # json's parser recurses once per nested [ or {
        raise ValueError(f"{path} is not valid JSON: nested too deeply for Python's JSON parser") from None
    except (OSError, ValueError) as err:  # ValueError: JSONDecodeError, UnicodeDecodeError, huge ints, size
        raise ValueError(f"{path} is not valid JSON: {type(err).__name__}: {err}") from None
    if not isinstance(value, kind):
        what = "a JSON object {...}" if kind is dict else "a JSON array [...]"
        raise ValueError(f"{path} must hold {what}, got {type(value).__name__}: {str(value)[:80]}")
    return value


# The largest sizes a config FILE may ask for (load, load_bert, load_trained, the training
# cache). Far above every real BERT-family checkpoint: vocabularies reach about 250,000 ids
# (XLM-R 250,002; mBERT 119,547), widths 4096, 64 heads, 48 layers, feed-forward 16,384,
# 8192 positions (long-context BERTs), 16 token types. Far below 2**63, where torch's sizes
# overflow (a TypeError from inside nn.Embedding instead of a ValueError naming the field).
CONFIG_SIZE_LIMITS = {
    "vocab_size": 2**24, "d_model": 2**16, "num_heads": 2**12, "num_kv_heads": 2**12, "num_layers": 2**12,
    "d_ff": 2**18, "max_len": 2**20, "type_vocab_size": 2**10, "patch_dim": 2**20, "num_classes": 2**24,
}


def check_config_sizes(sizes: Mapping[str, Optional[int]], source: str,
                       names: Optional[Mapping[str, str]] = None) -> None:
    """Refuse a config file's size above its bound in :data:`CONFIG_SIZE_LIMITS`.

    Args:
        sizes: ``{EncoderConfig field (or "num_classes"): int or None}``, already checked to be
            integers (``mha_lib.checks``; :class:`EncoderConfig` does it).
        source: the file, for the message.
        names: how the file calls a field (e.g. ``{"d_model": "hidden_size"}``), for the message.

    Raises:
        ValueError: naming the file, the field as the file calls it, the value and the bound.
    """
    for name, value in sizes.items():
        limit = CONFIG_SIZE_LIMITS[name]
        if value is not None and checks.as_int(value, name) > limit:
            raise ValueError(f"{source}: {(names or {}).get(name, name)}={value} is more than {limit:,}, "
                             f"far beyond any real checkpoint; the file is broken")


def _config_sizes(config: EncoderConfig) -> dict:
    """The bounded integer fields of ``config`` (see :data:`CONFIG_SIZE_LIMITS`)."""
    return {name: getattr(config, name) for name in CONFIG_SIZE_LIMITS if name != "num_classes"}


def _read_meta(path) -> dict:
    cfg_path = os.path.join(path, CONFIG_NAME)
    w_path = os.path.join(path, WEIGHTS_NAME)
    if not (os.path.isfile(cfg_path) and os.path.isfile(w_path)):
        found = sorted(os.listdir(path)) if os.path.isdir(path) else "no such folder"
        raise ValueError(f"no mha_lib model in {path}: need {CONFIG_NAME} and {WEIGHTS_NAME}, found {found}")
    meta = read_json(cfg_path)
    if meta.get("format") != "mha_lib" or not isinstance(meta.get("model_class"), str) or \
            meta.get("model_class") not in _CLASSES:
        raise ValueError(
            f"{cfg_path} is not an mha_lib model config (format={meta.get('format')!r}, "
            f"model_class={meta.get('model_class')!r})"
        )
    version = meta.get("format_version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"{cfg_path}: format_version must be an integer, got {version!r}")
    if version > _FORMAT_VERSION:
        raise ValueError(
            f"{cfg_path} has format_version={meta['format_version']}, newer than this mha_lib "
            f"understands ({_FORMAT_VERSION}); upgrade mha_lib"
        )
    return meta


def read_weights(
    path: Union[str, os.PathLike],
    expected: Mapping[str, torch.Tensor],
    *,
    rename: Optional[Callable[[list], Mapping[str, str]]] = None,
    prefix: str = "",
    source: Optional[str] = None,
) -> dict:
    """Read a safetensors file into tensors named and shaped as ``expected``, safely.

    The ONE loading path of mha_lib (``load``, ``from_pretrained``, ``load_bert``,
    ``tasks.load_trained``, the training cache). The file's header (names, shapes, dtypes) is
    compared with ``expected`` BEFORE any tensor data is read, and ``expected`` is meant to
    come from a model built on the meta device, so a ``config.json`` asking for sizes its
    weights do not have is refused without allocating them.

    Args:
        path: the ``.safetensors`` file.
        expected: ``{name: tensor}`` with the model's names, shapes and dtypes (a
            ``state_dict``, e.g. of a model built under ``torch.device("meta")``).
        rename: optional ``file names -> {file name: model name}`` (names it leaves out are
            skipped), e.g. to map transformers' BERT names.
        prefix: read only the file's names that start with it, without the prefix.
        source: how to name the file in errors (default ``path``).

    Returns:
        ``{model name: tensor}``, each in ``expected``'s dtype, on the CPU.

    Raises:
        ValueError: the file is missing or not a readable safetensors file; a tensor missing,
            unexpected, of the wrong shape, or of a non-floating dtype (integer, bool, complex)
            where the model has a float; a tensor holding NaN or inf. The message names the
            file and the tensor.
    """
    from safetensors import safe_open

    source = str(source or path)
    try:
        with safe_open(str(path), framework="pt") as f:
            names = [k for k in f.keys() if k.startswith(prefix)]
            stripped = {k: k[len(prefix):] for k in names}
            mapping = dict(rename(list(stripped.values()))) if rename else {v: v for v in stripped.values()}
            by_model = {mapping[v]: k for k, v in stripped.items() if v in mapping}
            header = {m: (tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype()) for m, k in by_model.items()}
            _compare_header(header, expected, source)
            state = {m: f.get_tensor(k) for m, k in by_model.items()}
    except ValueError:
        raise
    except Exception as err:  # safetensors' SafetensorError, OSError, ...
        raise ValueError(f"{source} is not a readable safetensors file: {type(err).__name__}: {err}") from None
    for name, tensor in state.items():
        tensor = tensor.to(expected[name].dtype)  # checked after the cast: 1e300 in fp64 is inf in fp32
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise ValueError(
                f"{source}: tensor {name!r} holds {bad} NaN or inf values (in {expected[name].dtype}); "
                f"refusing to load it"
            )
        state[name] = tensor
    return state


_FLOAT_DTYPES = {"F16", "BF16", "F32", "F64"}


def _compare_header(header: Mapping[str, tuple], expected: Mapping[str, torch.Tensor], source: str) -> None:
    missing = [k for k in expected if k not in header]
    unexpected = [k for k in header if k not in expected]
    if missing:
        raise ValueError(f"{source}: missing tensor(s) {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    if unexpected:
        raise ValueError(
            f"{source}: unexpected tensor(s) {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}"
        )
    for k, t in expected.items():
        shape, dtype = header[k]
        if shape != tuple(t.shape):
            raise ValueError(f"{source}: tensor {k!r} has shape {shape}, the model expects {tuple(t.shape)}")
        if t.is_floating_point() and dtype not in _FLOAT_DTYPES:
            raise ValueError(f"{source}: tensor {k!r} has dtype {dtype}; the model needs floating point")


def _check_layer_count(path, num_layers: int, pattern: str, source: str) -> None:
    """Refuse a config whose layer count the file cannot have, before building anything."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            found = {int(m.group(1)) for k in f.keys() for m in [re.search(pattern, k)] if m}
    except Exception as err:
        raise ValueError(f"{source} is not a readable safetensors file: {type(err).__name__}: {err}") from None
    if len(found) != num_layers:
        raise ValueError(f"{source}: the config asks for {num_layers} layers, the file holds {len(found)}")


MAX_DERIVED_BUFFER_BYTES = 2**29  # 512 MiB: a sinusoidal table of 8192 positions x 4096 features is 128 MiB


def build_checked(build: Callable[[], nn.Module], path, *, layers: Optional[int] = None,
                  layer_pattern: str = "", rename=None, prefix: str = "",
                  source: Optional[str] = None) -> nn.Module:
    """``build()`` a model and fill it from safetensors ``path``, checking before allocating.

    The layer count (when ``layers`` is given, i.e. when it came from a config file) and then
    every name and shape are compared with the file first (the
    model is built on the meta device for that), so nothing the config asks for is
    allocated unless the file holds it. See :func:`read_weights` for the checks.

    Raises:
        ValueError: as :func:`read_weights`, or a layer count the file does not have.
    """
    source = str(source or path)
    if not os.path.isfile(path):
        raise ValueError(f"{source}: no such file")
    if layers is not None:  # the config came from a file: its layer count is checked first
        _check_layer_count(path, layers, layer_pattern, source)
    try:
        with torch.device("meta"):
            skeleton = build()
    except (RuntimeError, OverflowError, TypeError) as err:  # e.g. sizes past int64, or whose product overflows
        raise ValueError(f"{source}: the config asks for a model that cannot be built: {err}") from None
    expected = skeleton.state_dict()
    extra = sum(b.numel() * b.element_size() for n, b in skeleton.named_buffers() if n not in expected)
    if extra > MAX_DERIVED_BUFFER_BYTES:  # buffers the config sizes but the file does not hold
        raise ValueError(
            f"{source}: the config asks for {extra:,} bytes of derived buffers (e.g. a sinusoidal position "
            f"table of max_len rows), more than {MAX_DERIVED_BUFFER_BYTES:,}; check max_len in the config"
        )
    state = read_weights(path, expected, rename=rename, prefix=prefix, source=source)
    model = build()
    model.load_state_dict(state, strict=True)  # read_weights matched every name, shape and dtype already
    return model


def load(path: Union[str, os.PathLike], map_location: str = "cpu") -> nn.Module:
    """Load an :class:`Encoder` or :class:`TokenClassifier` saved with ``save_pretrained``.

    Reads ``mha_lib_config.json`` (JSON) and ``model.safetensors``; never unpickles.
    Pruned models come back pruned. The model is returned in eval mode.

    Raises:
        ValueError: if the files are missing or do not match (naming the key).
    """
    meta = _read_meta(path)
    try:
        config = EncoderConfig.from_dict(meta["config"])
        num_classes = checks.positive_int(meta["num_classes"], "num_classes") if meta["model_class"] == "TokenClassifier" else None
        pooling = meta.get("pooling", "token")
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{os.path.join(path, CONFIG_NAME)}: {type(err).__name__}: {err}") from None
    check_config_sizes({**_config_sizes(config), "num_classes": num_classes}, os.path.join(path, CONFIG_NAME))

    def build():
        return Encoder(config) if num_classes is None else TokenClassifier(config, num_classes, pooling)

    model = build_checked(build, os.path.join(path, WEIGHTS_NAME), layers=config.num_layers,
                          layer_pattern=_LAYER_PATTERN)
    return model.to(map_location).eval()


_LAYER_PATTERN = r"(?:^|\.)blocks\.(\d+)\."  # an mha_lib encoder's per-layer tensor names
