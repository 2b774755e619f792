"""Masks: the ONE place where every kind of mask becomes one additive float mask.

Key padding (B, S), ``attn_mask`` (bool True = blocked, or float added to the scores) and the
causal rule (bottom-right aligned: query i sees key j when j <= i + (S - L)) combine by OR over
blocked positions. Both paths of :class:`~mha_lib.core.multi_head.MultiHeadAttention` and
:func:`~mha_lib.core.functional.attention` use :func:`build_attention_mask`'s rule, and
``_check_masks`` is their one mask check. :func:`or_pattern` ORs a config's sparse pattern into a
caller's ``attn_mask`` (the encoder's), with the same check of the mask's kind.
"""
from __future__ import annotations

import math
import warnings
from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import checks
from .._runtime import user_stacklevel


# ---------------------------------------------------------------------------------------------
# Masks: one helper for every path
# ---------------------------------------------------------------------------------------------


def build_attention_mask(
    *,
    key_padding_mask: Optional[Tensor] = None,
    attn_mask: Optional[Tensor] = None,
    is_causal: bool = False,
    batch: int,
    heads: int,
    q_len: int,
    k_len: int,
    dtype: torch.dtype,
    device: torch.device,
) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """Turn every kind of mask into ONE additive float mask, plus a guard for empty rows.

    Masks combine by OR over blocked positions (float masks are summed, and -inf + x = -inf).
    A float value at or below half of ``dtype``'s most negative number counts as blocked, so
    Hugging Face's ``torch.finfo(dtype).min`` fill blocks like ``-inf`` (in fp16,
    ``finfo.min + score`` would otherwise overflow to -inf for scores below about -16, and a row
    of -inf gives NaN). The construction has no Python branch on tensor values.

    Args:
        key_padding_mask: (B, S); bool with True = padding (ignored key), or float, added.
        attn_mask: bool (True = blocked) or float (added; -inf blocks), of any shape
            broadcastable to (B, H, L, S), or torch.nn.MultiheadAttention's (B*H, L, S).
        is_causal: query i may attend key j only when j <= i + (S - L). With L == S this is the
            usual lower-triangular mask. With L != S it is aligned BOTTOM-RIGHT (the last query
            sees every key), as a KV-cache decode step needs and as FlashAttention-2 does (Dao
            2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work
            Partitioning", arXiv:2307.08691, causal masking for L != S). This
            differs from ``F.scaled_dot_product_attention(is_causal=True)``, which aligns
            top-left (query i sees keys 0..i whatever S is).
        batch, heads, q_len, k_len: B, H, L, S.
        dtype, device: of the scores (the query's dtype).

    Returns:
        ``(mask, empty_rows)``, both None when no mask is given. Otherwise ``mask`` is a float
        tensor of ``dtype`` broadcastable to (B, H, L, S), holding 0 for allowed, -inf for
        blocked and the user's float values; ``empty_rows`` is a bool tensor broadcastable to
        (B, H, L, 1), True for query rows whose keys were ALL blocked. For those rows key 0 is
        unblocked in ``mask`` (so every backend's softmax stays finite, values and gradients) and
        the caller must zero their weights and outputs. With S = 0 (no keys) every row is empty.
        This one guard works on CPU and CUDA, in fp32, fp16 and bf16, and needs no "-1e9" fill
        constant (which overflows to -inf in fp16).

    Raises:
        ValueError: a mask of the wrong shape or on the meta device; a dtype that is neither bool nor floating; a float
            mask holding NaN or +inf (also +inf after the cast to ``dtype``, e.g. 1e5 in fp16,
            or when the two float masks add up past ``dtype``'s range).

    Warns:
        UserWarning: a float mask holding only 0s and 1s (with at least one 1). It is added to the
            scores: a 1 raises that score by 1 and a 0 blocks nothing. It is NOT a keep mask or a
            causal mask. Use a bool mask with True = blocked (e.g. ``keep == 0``) instead.
    """
    if not checks.tracing():
        checks.flag(is_causal, "is_causal")
        for name, value in (("batch", batch), ("heads", heads), ("q_len", q_len), ("k_len", k_len)):
            checks.nonnegative_int(value, name)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating-point torch.dtype (the scores'), got {dtype!r}")
        _check_masks(key_padding_mask, attn_mask, batch, heads, q_len, k_len, dtype)
    return _build_mask(key_padding_mask, attn_mask, is_causal, batch, heads, q_len, k_len, dtype, device)


def _build_mask(key_padding_mask, attn_mask, is_causal, B, H, L, S, dtype, device):
    """:func:`build_attention_mask` without the checks (forward has run them already)."""
    parts = []
    if key_padding_mask is not None:
        parts.append(_additive(key_padding_mask.to(device), dtype)[:, None, None, :])  # (B, 1, 1, S)
    if attn_mask is not None:
        parts.append(_additive(_attn_mask_4d(attn_mask.to(device), B, H, L, S), dtype))
    if is_causal:  # keep j <= i + (S - L): bottom-right aligned
        keep = torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L)
        parts.append(_additive(~keep, dtype))  # (L, S)
    if not parts:
        return None, None
    mask = parts[0]
    for part in parts[1:]:
        mask = mask + part  # OR over blocked positions; broadcasts to the union of the shapes
    mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))  # 4-D
    mask = mask.expand(*mask.shape[:-1], S)  # a (..., 1) mask: one value for every key
    mask = mask.masked_fill(mask <= -torch.finfo(dtype).max / 2, -math.inf)  # sums that overflowed
    # Guard for query rows with no allowed key: unblock key 0 so softmax never sees all -inf
    # (which gives NaN, and NaN gradients), and report the rows so the caller zeroes them.
    empty_rows = torch.isneginf(mask).all(dim=-1, keepdim=True)  # (B|1, H|1, L|1, 1)
    first_key = torch.arange(S, device=device) == 0  # (S,)
    return mask.masked_fill(empty_rows & first_key, 0.0), empty_rows


def _additive(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """bool (True = blocked) or float mask -> float mask of ``dtype``: 0 allowed, -inf blocked.

    Float values at or below -finfo(dtype).max / 2 (Hugging Face's finfo.min fill among them)
    become -inf, so that adding a score can never overflow a blocked position into a NaN row."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, -math.inf)
    mask = mask.to(dtype)
    return mask.masked_fill(mask <= -torch.finfo(dtype).max / 2, -math.inf)


def blocked_positions(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """bool tensor of ``mask``'s shape, True where attention in ``dtype`` blocks: bool True, or a
    float value that :func:`_additive` turns into -inf (-inf, or at most -finfo(dtype).max / 2).
    The one rule for code that must read a mask as attention does (pooling, source padding)."""
    return torch.isneginf(_additive(mask, dtype))


def _attn_mask_4d(attn_mask: Tensor, B: int, H: int, L: int, S: int) -> Tensor:
    """torch's (B*H, L, S) layout -> (B, H, L, S); any other (checked) shape as it is."""
    if attn_mask.dim() == 3 and attn_mask.shape[0] == B * H and attn_mask.shape[0] not in (1, H):
        return attn_mask.view(B, H, L, S)
    return attn_mask


def or_pattern(attn_mask: Optional[Tensor], pattern: Tensor) -> Tensor:
    """A caller's ``attn_mask`` ORed with a sparse pattern (an :class:`~mha_lib.model.EncoderConfig`'s):
    blocked where either blocks.

    Args:
        attn_mask: None, or a bool (True = blocked) or float (added; -inf blocks) mask whose shape
            broadcasts against ``pattern``'s; checked first, with the words of every mask check
            (``_check_mask_kind``), so that an integer mask is refused as it is without a pattern.
        pattern: (L, S) bool, True = blocked.

    Returns:
        ``pattern`` when ``attn_mask`` is None; else bool ``attn_mask | pattern``, or the float mask with
        -inf where ``pattern`` blocks; its shape is the two shapes broadcast.

    Raises:
        ValueError: ``attn_mask`` not a tensor, on the meta device, of a dtype neither bool nor floating,
            or of a shape that does not broadcast against (L, S) (naming it).
    """
    if attn_mask is None:
        return pattern
    if not checks.tracing():
        _check_mask_kind("attn_mask", attn_mask)
        try:
            torch.broadcast_shapes(attn_mask.shape, pattern.shape)
        except RuntimeError:
            raise ValueError(f"attn_mask has shape {tuple(attn_mask.shape)}; it must broadcast to (..., L, S) = "
                             f"(..., {pattern.shape[0]}, {pattern.shape[1]})") from None
    if attn_mask.dtype == torch.bool:
        return attn_mask | pattern.to(attn_mask.device)
    return torch.where(pattern.to(attn_mask.device), torch.tensor(-math.inf, dtype=attn_mask.dtype), attn_mask)


def _check_mask_kind(name: str, mask) -> None:
    """A mask is a bool or floating-point tensor with values (not on the meta device); ValueError naming it."""
    if not isinstance(mask, Tensor):
        raise ValueError(f"{name} must be a bool or float tensor, got {type(mask).__name__}")
    checks.has_values(mask, name)
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise ValueError(
            f"{name} has dtype {mask.dtype}; use bool (True = blocked) or a float mask (added to the scores)"
        )


def _check_masks(key_padding_mask, attn_mask, B: int, H: int, L: int, S: int, dtype: torch.dtype) -> None:
    """Shapes, dtypes and values of the two masks; ValueError naming the mask."""
    largest = 0.0  # the float masks' maxima add up to at most this (they are summed)
    for name, mask in (("key_padding_mask", key_padding_mask), ("attn_mask", attn_mask)):
        if mask is None:
            continue
        _check_mask_kind(name, mask)
        shape = tuple(mask.shape)
        if name == "key_padding_mask" and shape != (B, S):
            raise ValueError(f"key_padding_mask must have shape (B, S) = ({B}, {S}), got {shape}")
        if name == "attn_mask" and not _attn_mask_shape_ok(shape, B, H, L, S):
            raise ValueError(
                f"attn_mask has shape {shape}; it must broadcast to (B, H, L, S) = {(B, H, L, S)} "
                f"(e.g. (L, S), (B, 1, L, S), (B, H, L, S)) or be (B*H, L, S) = ({B * H}, {L}, {S})"
            )
        if mask.dtype == torch.bool:
            continue
        if bool(torch.isnan(mask).any()):
            raise ValueError(f"{name} contains NaN; a float mask is added to the scores, use -inf to block")
        if bool(torch.isposinf(mask.to(dtype)).any()):
            raise ValueError(
                f"{name} contains +inf (or a value too large for {dtype}, max {torch.finfo(dtype).max:.3g}); "
                "a float mask is added to the scores, use -inf to block"
            )
        if mask.numel():
            largest += max(float(mask.float().max()), 0.0)
        if mask.numel() and bool(((mask == 0) | (mask == 1)).all()) and bool((mask == 1).any()):
            warnings.warn(
                f"float {name} holds only 0s and 1s. A float mask is ADDED to the scores, so a 1 raises "
                "a score by 1 and nothing is blocked: this is not a keep mask and not a causal mask. "
                "Use a bool mask with True = blocked (e.g. keep == 0), or -inf in a float mask.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
    if largest > torch.finfo(dtype).max / 2:  # half the range is left for the scores themselves
        raise ValueError(
            f"key_padding_mask and attn_mask add up to {largest:.6g}, more than half of {dtype}'s max "
            f"{torch.finfo(dtype).max:.6g}: adding the scores could reach +inf and the softmax NaN"
        )


def _attn_mask_shape_ok(shape: tuple, B: int, H: int, L: int, S: int) -> bool:
    if len(shape) == 3 and shape[0] == B * H and shape[0] not in (1, H) and shape[1:] == (L, S):
        return True  # torch.nn.MultiheadAttention's layout
    return len(shape) <= 4 and all(m in (1, t) for m, t in zip(reversed(shape), reversed((B, H, L, S))))
