"""The :class:`EncoderDecoder`: two stacks of the one block (the decoder's config has ``is_causal``
and ``cross_attention``), and greedy decoding with a KV cache per decoder self-attention.

Source: Vaswani et al. 2017 (the encoder-decoder Transformer).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from .. import checks
from ..core.masks import blocked_positions
from .config import EncoderConfig
from .encoder import Encoder, EncoderOutput


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
        or dtype are left to the encoder's checks, which name them. A patch source (ViT,
        ``patch_dim > 0``: (B, N, patch_dim), positions N, or N + 1 with [CLS]) gets the same
        refusal; it has no padding id."""
        cfg = self.source_encoder.config
        if mask is None and cfg.pad_token_id is not None and isinstance(src_ids, torch.Tensor) and not cfg.patch_dim:
            mask = src_ids == cfg.pad_token_id
        if not checks.tracing() and isinstance(src_ids, torch.Tensor) and src_ids.dim() == (3 if cfg.patch_dim else 2):
            checks.has_values(mask, "src_key_padding_mask")
            blocked = self._blocked_source(self._source_positions(src_ids), src_ids.device, mask)  # (B, S) bool, True = no real token there
            empty = blocked.all(-1).nonzero().flatten().tolist()  # rows with no real position (all of them if S = 0)
            if empty:
                raise ValueError(
                    f"source row(s) {empty[:10]}{' ...' if len(empty) > 10 else ''} of src_ids {tuple(src_ids.shape)} "
                    f"are all padding (or empty): nothing to translate"
                )
        return mask

    def _source_positions(self, src_ids: torch.Tensor) -> tuple:
        """(B, S): the source encoder's positions, S = L for tokens, N (+ 1 with [CLS]) for patches."""
        cfg = self.source_encoder.config
        if cfg.patch_dim:
            return (src_ids.shape[0], src_ids.shape[1] + int(cfg.cls_token))
        return tuple(src_ids.shape)

    def _blocked_source(self, shape: tuple, device, mask) -> torch.Tensor:
        """(B, S) bool, True where the source has no real position: ``mask``'s blocked positions
        (as attention reads it, in the encoder's dtype), or none when there is no usable mask."""
        if not (isinstance(mask, torch.Tensor) and tuple(mask.shape) == tuple(shape)
                and (mask.dtype == torch.bool or mask.is_floating_point())):
            return torch.zeros(shape, dtype=torch.bool, device=device)
        dtype = next(self.source_encoder.parameters()).dtype
        return blocked_positions(mask, dtype)  # the one rule of what a mask blocks

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
        :class:`~mha_lib.core.KVCache` of its self-attention (one position more per step)
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
        for _ in range(steps):
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
