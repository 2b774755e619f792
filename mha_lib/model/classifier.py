"""The :class:`TokenClassifier`: an :class:`~mha_lib.model.encoder.Encoder` and a linear head.

It reads every position (``pooling="token"``), the first (``"cls"``) or the mean (``"mean"``).
Shapes: B batch, L sequence length, C classes.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import torch
from torch import nn

from .. import checks
from ..core.masks import blocked_positions
from .config import EncoderConfig
from .encoder import Encoder, HeadMask, TokenClassifierOutput
from .io import _SaveLoadMixin, saved_class


# ----------------------------------------------------------------------------- classifier
_POOLINGS = ("token", "cls", "mean")


@saved_class
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
        cross_head_mask: HeadMask = None,
        caches: Optional[Sequence[dict]] = None,
        position_offset: Optional[int] = None,
    ) -> TokenClassifierOutput:
        """Same arguments as :meth:`Encoder.forward`, passed on unchanged (with ``caches``, the
        logits are those of the new positions; only ``pooling="token"`` reads them one by one).

        With ``pooling="mean"`` the mean runs over the positions that ``key_padding_mask``
        leaves to attention: bool True, or a float value attention treats as blocked (-inf, or
        at most -finfo.max / 2, as ``core.masks``), is padding; any other float value is a bias
        of the scores and its position counts.

        Returns:
            :class:`TokenClassifierOutput` with logits (B, L, C) float (``pooling="token"``), or
            (B, C) for the pooled readouts (``"cls"``, ``"mean"``).

        Raises:
            ValueError: as :meth:`Encoder.forward`: ids out of range, L > max_len, a non-bool
                or wrongly shaped key_padding_mask, a bad attn_mask or head_mask; with
                ``pooling="mean"``, a row whose every position is padding (naming the rows):
                its mean has no word and its logits would be the readout's bias.
        """
        if self.pooling == "mean" and not checks.tracing():
            self._check_mean_rows(key_padding_mask)
        if caches is not None and self.pooling != "token":
            raise ValueError(f"caches (decoding step by step) needs pooling='token', got pooling={self.pooling!r}: "
                             "a pooled readout reads the whole sequence")
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
            cross_head_mask=cross_head_mask,
            caches=caches,
            position_offset=position_offset,
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
                ~self._blocked(key_padding_mask, h.dtype)).to(h.dtype)  # (B, L), 1 = real position
            h = (h * keep[..., None]).sum(1) / keep.sum(1, keepdim=True).clamp(min=1)  # (B, d_model)
        logits = self.readout(h)  # (B, L, C), or (B, C) pooled
        return TokenClassifierOutput(logits, enc.last_hidden_state, enc.hidden_states, enc.attentions,
                                     enc.cross_attentions)

    @staticmethod
    def _blocked(key_padding_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """(B, L) bool, True = padding, read as attention reads the mask (the one rule of core.masks)."""
        return blocked_positions(key_padding_mask, dtype)

    def _check_mean_rows(self, key_padding_mask) -> None:
        """Refuse rows that are all padding (mean pooling over no position). Malformed masks are
        left to the encoder's checks, which name them."""
        if not (isinstance(key_padding_mask, torch.Tensor) and key_padding_mask.dim() == 2
                and (key_padding_mask.dtype == torch.bool or key_padding_mask.is_floating_point())):
            return
        checks.has_values(key_padding_mask, "key_padding_mask")
        dtype = next(self.parameters()).dtype
        empty = self._blocked(key_padding_mask, dtype).all(-1).nonzero().flatten().tolist()
        if empty:
            raise ValueError(f"key_padding_mask: row(s) {empty[:10]}{' ...' if len(empty) > 10 else ''} are all "
                             f"padding; pooling='mean' has no position to average there")

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
