"""The :class:`Encoder`: embeddings, a stack of :class:`~mha_lib.model.layers.TransformerBlock`, an optional final norm.

Shapes: B batch, L sequence length, d_model model width, H heads of a layer (after pruning, H_l
may differ from layer to layer).

Sources: Vaswani et al. 2017; Devlin et al. 2019 (BERT embeddings, post-LN); Michel et al. 2019
(``head_mask``, pruning).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, Union

import torch
from torch import nn

from .. import checks
from ..core.masks import or_pattern
from .config import EncoderConfig
from .io import _SaveLoadMixin, saved_class
from .layers import TransformerBlock, sinusoidal_positions


HeadMask = Union[torch.Tensor, Sequence[Optional[torch.Tensor]], None]
_ID_DTYPES = (torch.int64, torch.int32, torch.int16)  # token ids; bool and uint8 are refused
# The largest patch value accepted. Images are normalised to a few units (patchify's pixels in
# [0, 1], ImageNet's mean/std normalisation to about [-2.2, 2.7]); 1e6 leaves a margin of
# millions. Values near 1e19 and beyond square to more than float32's 3.4e38 in LayerNorm's
# variance (after the patch embedding), so torch gives NaN where an exporter's fused LayerNorm may
# not: one documented bound instead of two diverging answers.
PATCH_MAX = 1e6


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
@saved_class
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
        checks.has_values(input_ids, "input_ids" if not cfg.patch_dim else "patch inputs")
        checks.has_values(token_type_ids, "token_type_ids")
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
            largest = float(input_ids.detach().abs().max())
            if largest > PATCH_MAX:
                raise ValueError(
                    f"patch inputs hold a value of magnitude {largest:.3g}, beyond PATCH_MAX={PATCH_MAX:g}: images "
                    f"are normalised to a few units (see patchify); much larger values overflow LayerNorm's "
                    f"float32 variance into NaN")
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
                the same for every layer. A config with a sparse pattern (``attention_window``,
                ``sparse_block``) adds :meth:`EncoderConfig.attention_pattern` to it (OR).
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
                (or missing with it); patch inputs with no patch (N = 0), holding NaN or inf or a
                value beyond ``PATCH_MAX`` (1e6) in magnitude, or of another dtype than the
                parameters (naming both); inputs or masks on the meta device (naming them).
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
        L = x.shape[1]
        pattern = self.config.attention_pattern(L, cached + L, causal=is_causal, device=x.device)  # (L, S) or None
        if pattern is not None:  # the config's sparse pattern, ORed with the caller's attn_mask (checked there)
            attn_mask = or_pattern(attn_mask, pattern)
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
                heads given as a single value instead of a list; the message names it. A
                latent-attention model (``kv_rank > 0``) has no head pruning: any head to prune
                raises (naming ``kv_rank``); mask its heads with ``head_mask`` instead.
        """
        checked = self.config._checked_heads_to_prune(heads_to_prune, "prune_heads")
        if self.config.kv_rank and any(checked.values()):
            raise ValueError(f"prune_heads: this model's attention is multi-head latent attention (kv_rank="
                             f"{self.config.kv_rank}), whose heads share one latent and cannot prune heads; got "
                             f"{checked}. Switch heads off with head_mask instead")
        for layer_i, heads in checked.items():
            if not heads:  # nothing to prune in this layer
                continue
            attn = self.blocks[layer_i].attn
            attn.prune_heads(heads)
            pruned = sorted(int(h) for h in attn.pruned_heads)
            if pruned:
                self.config.pruned_heads[layer_i] = pruned
        self.config.pruned_heads = dict(sorted(self.config.pruned_heads.items()))

    def num_parameters(self) -> int:
        """Number of parameters (buffers excluded)."""
        return sum(p.numel() for p in self.parameters())
