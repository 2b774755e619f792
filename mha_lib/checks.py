"""Argument checks: ONE policy for every public function of mha_lib.

Every check raises ``ValueError`` naming the argument and the offending value, and returns
the value in a canonical Python type. The policy:

* **Integers** (sizes, indices, seeds): Python ints, numpy integers and 0-d integer tensors are
  accepted and returned as ``int``. Bools (``True`` is not head 1), floats (even ``2.0``: a float
  index is usually a bug upstream), strings (``"12"`` is not heads 1 and 2) and None are refused,
  never truncated as ``int()`` would.
* **Seeds**: an integer in [0, 2**64 - 1] (:func:`seed`), what torch's generators take; every public
  function that seeds a generator checks its seed so, and names it.
* **Probabilities** (dropout): a real number in [0, 1); bools and NaN are refused.
* **Flags**: ``True`` or ``False`` only (``is_causal="no"`` is refused, not counted as True).
* **Finite reals** (scales, epsilons): int or float, finite; bools refused. A value that becomes
  a float32 tensor or scalar (a learning rate, a gate's start, a temperature) must also fit
  float32 (``float32=True``): magnitude <= 3.4e38, and a positive one >= 1.2e-38 (the smallest
  normal float32), so that it neither overflows to inf nor rounds to 0 (``learning_rate``).
* **Tensors** whose values a check reads are refused on the meta device (``has_values``): it
  holds shapes, no values.
* **Attention weights** handed to an analysis: a floating-point tensor of the stated rank,
  finite and >= 0 (a NaN weight is refused, never averaged into a NaN statistic).

These checks run at the API boundary, before any tensor work, so that forward passes contain
no Python branch on tensor values and export to ONNX unchanged. :func:`tracing` tells a
forward pass that an exporter or compiler is running, so that value checks (which would be
frozen into the graph) are skipped there.
"""
from __future__ import annotations

import math
import numbers
import operator
from typing import Any, Dict, Iterable, List, Mapping

import torch

__all__ = [
    "as_int", "positive_int", "nonnegative_int", "int_at_least", "head_sizes", "head_indices", "probability", "flag",
    "finite_real", "learning_rate", "heads_by_layer", "attention_weights", "attention_rows", "padding_mask",
    "has_values", "tracing", "seed", "SEED_MAX",
]


def _is_bool(value: Any) -> bool:
    return (
        isinstance(value, bool)
        or type(value).__name__ in ("bool_", "bool")  # numpy.bool_
        or (isinstance(value, torch.Tensor) and value.dtype == torch.bool)
    )


def as_int(value: Any, name: str) -> int:
    """``value`` as a Python int: ints, numpy integers and 0-d integer tensors.

    Raises:
        ValueError: ``value`` is a bool, a float, a string, None, a tensor with dimensions or
            anything else without ``__index__``; the message names ``name`` and the value.
    """
    if not _is_bool(value) and not (isinstance(value, torch.Tensor) and value.dim() != 0):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise ValueError(f"{name} must be an integer (int, numpy integer or 0-d integer tensor), got {value!r}")


def int_at_least(value: Any, name: str, minimum: int) -> int:
    """An integer >= ``minimum`` (see :func:`as_int`). Raises ValueError naming ``name`` and the value."""
    if minimum == 1:
        return positive_int(value, name)
    if minimum == 0:
        return nonnegative_int(value, name)
    out = _int_or_none(value)
    if out is None or out < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return out


def head_sizes(d_model: Any, num_heads: Any, num_kv_heads: Any = None) -> tuple:
    """``(d_model, H, H_kv, head_dim)`` checked: positive integers, H divides d_model, H_kv divides H.

    ``num_kv_heads=None`` means H (plain multi-head attention).

    Raises:
        ValueError: a size that is not a positive integer, or that does not divide as it must;
            the message names the values.
    """
    d_model = positive_int(d_model, "d_model")
    num_heads = positive_int(num_heads, "num_heads")
    num_kv_heads = positive_int(num_heads if num_kv_heads is None else num_kv_heads, "num_kv_heads")
    if d_model % num_heads != 0:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}: "
            f"each head needs d_model // num_heads features"
        )
    if num_heads % num_kv_heads != 0:
        raise ValueError(
            f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads} "
            f"(each key/value head serves a group of num_heads // num_kv_heads query heads)"
        )
    return d_model, num_heads, num_kv_heads, d_model // num_heads


def positive_int(value: Any, name: str) -> int:
    """An integer >= 1 (see :func:`as_int`). Raises ValueError naming ``name`` and the value."""
    out = _int_or_none(value)
    if out is None or out < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return out


def nonnegative_int(value: Any, name: str) -> int:
    """An integer >= 0 (see :func:`as_int`). Raises ValueError naming ``name`` and the value."""
    out = _int_or_none(value)
    if out is None or out < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return out


#: The largest seed torch's generators take (``torch.Generator().manual_seed`` and ``torch.manual_seed`` read
#: an unsigned 64-bit integer (a larger one raises "Overflow when unpacking long").
SEED_MAX = 2**64 - 1


def seed(value: Any, name: str = "seed") -> int:
    """A random seed: an integer in [0, 2**64 - 1] (:data:`SEED_MAX`, what torch's generators take).
    Raises ValueError naming ``name``, the value and the range."""
    out = _int_or_none(value)
    if out is None or not 0 <= out <= SEED_MAX:
        raise ValueError(f"{name} must be an integer in [0, 2**64 - 1] (torch's generator seeds), got {value!r}")
    return out


def _int_or_none(value: Any):
    try:
        return as_int(value, "")
    except ValueError:
        return None


def head_indices(heads: Iterable[Any], name: str = "heads", *, upper: int = None,
                 upper_name: str = "") -> List[int]:
    """An iterable of head (or layer) indices -> a list of Python ints, each in [0, upper).

    Args:
        heads: e.g. ``[1, 5]``, ``{2}``, ``range(3)``, a 1-D integer tensor or numpy array.
        name: what to call it in an error.
        upper: exclusive upper bound, or None for no bound.
        upper_name: what to call the bound in an error, e.g. ``"num_heads"``.

    Raises:
        ValueError: ``heads`` is a single value (``1``, ``"12"``) or a mapping (``{layer: heads}``
            belongs to an encoder) rather than an iterable of indices, or an
            element is not an integer (``1.5``, ``True``, ``"1"``) or lies outside [0, upper).
            Nothing is truncated.
    """
    if isinstance(heads, (str, bytes, numbers.Number, Mapping)) or heads is None or (
        isinstance(heads, torch.Tensor) and heads.dim() == 0
    ):
        raise ValueError(
            f"{name} must be an iterable of head indices, e.g. [1] or {{1, 2}}; got the single value {heads!r}"
        )
    try:
        items = list(heads)
    except TypeError:
        raise ValueError(f"{name} must be an iterable of head indices, got {heads!r}") from None
    out = [as_int(h, f"{name}: index") for h in items]
    if upper is not None:
        bad = sorted({h for h in out if not 0 <= h < upper})
        if bad:
            bound = f"{upper_name}={upper}" if upper_name else str(upper)
            raise ValueError(f"{name}: indices {bad} are outside range({bound})")
    return out


def heads_by_layer(heads: Any, name: str, *, num_layers: int, num_heads) -> Dict[int, List[int]]:
    """``{layer: [heads]}`` -> ``{int layer: sorted int heads}``, every index checked.

    Args:
        heads: a mapping from layer index to an iterable of head indices (see :func:`as_int`
            and :func:`head_indices`: ``{0: [1.5]}``, ``{0: [True]}``, ``{0.9: [1]}`` and
            ``{1: "12"}`` are refused, never truncated).
        name: what to call it in an error.
        num_layers: layers are in [0, num_layers).
        num_heads: heads per layer, an int or a callable ``layer -> int``.

    Raises:
        ValueError: ``heads`` not a mapping, or a layer or head index that is not an integer or
            out of range; the message names it. Nothing is returned half-checked.
    """
    if not isinstance(heads, Mapping):
        raise ValueError(f"{name} must be a dict {{layer: [heads]}}, got {heads!r}")
    out: Dict[int, set] = {}
    for layer, hs in heads.items():
        layer_i = _int_or_none(layer)
        if layer_i is None:
            raise ValueError(f"{name}: layer {layer!r} is not an integer layer index")
        if not 0 <= layer_i < num_layers:
            raise ValueError(f"{name}: layer {layer!r} is out of range for num_layers={num_layers}")
        upper = num_heads(layer_i) if callable(num_heads) else num_heads
        hs_i = head_indices(hs, f"{name}[{layer!r}]")
        bad = sorted({h for h in hs_i if not 0 <= h < upper})
        if bad:
            raise ValueError(f"{name}: layer {layer_i} heads {bad} are out of range for num_heads={upper}")
        out.setdefault(layer_i, set()).update(hs_i)
    return {k: sorted(v) for k, v in sorted(out.items())}


def probability(value: Any, name: str) -> float:
    """A real number in [0, 1) (a dropout rate), as float. ValueError otherwise (bools, NaN, 1.0)."""
    if _is_bool(value) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name} must be a float in [0, 1), got {value!r}")
    return float(value)


def flag(value: Any, name: str) -> bool:
    """``True`` or ``False`` (numpy bools too). ValueError for anything else, e.g. ``"no"`` or 1."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")


_F32 = torch.finfo(torch.float32)


def finite_real(value: Any, name: str, *, positive: bool = False, float32: bool = False) -> float:
    """A finite int or float (``> 0`` when ``positive``), as float. ValueError for NaN, inf, bools.

    With ``float32``, the value must also be representable as a float32 number: ``|value| <=
    3.4028e38`` (finfo.max), and when ``positive``, ``value >= 1.1755e-38`` (finfo.tiny, the
    smallest normal float32; smaller values lose their precision or round to 0). The message says
    the range."""
    if _is_bool(value) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and not float(value) > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if float32 and (abs(float(value)) > _F32.max or (positive and float(value) < _F32.tiny)):
        bounds = (f"[{_F32.tiny:.5g}, {_F32.max:.5g}]" if positive else f"[-{_F32.max:.5g}, {_F32.max:.5g}]")
        raise ValueError(f"{name} must be a float32-representable number in {bounds}, got {value!r}")
    return float(value)


def learning_rate(value: Any, name: str = "lr", *, beta1: float = 0.9) -> float:
    """An Adam/AdamW learning rate: positive, float32-representable (:func:`finite_real`), and
    with ``value / (1 - beta1) <= 3.4e38``: Adam's first step size is ``lr / (1 - beta1)``
    (its bias correction), a float32 scalar, which must not overflow (torch would raise a bare
    RuntimeError). For beta1 = 0.9 the largest learning rate is 3.4e37. ValueError naming
    ``name`` and the range otherwise."""
    lr = finite_real(value, name, positive=True, float32=True)
    if lr / (1.0 - beta1) > _F32.max:
        raise ValueError(f"{name} must be in [{_F32.tiny:.5g}, {_F32.max * (1.0 - beta1):.5g}]: Adam's first step "
                         f"{name} / (1 - beta1={beta1}) must fit float32; got {value!r}")
    return lr


def has_values(tensor: Any, name: str) -> Any:
    """``tensor`` unchanged, unless it is a tensor on the meta device (shapes, no values), which a
    check cannot read and a model cannot compute with: ValueError naming ``name``."""
    if isinstance(tensor, torch.Tensor) and tensor.device.type == "meta":
        raise ValueError(f"{name} is on the meta device (a shape without values, {tuple(tensor.shape)} "
                         f"{tensor.dtype}): move it to a real device first")
    return tensor


def attention_weights(weights: Any, name: str = "weights", *, dims: int = 4) -> "torch.Tensor":
    """``weights`` checked as attention weights: a floating-point tensor with ``dims``
    dimensions (e.g. 4 for one layer's (B, H, L, S)), every value finite and >= 0.

    Returns the tensor unchanged. Raises ValueError naming ``name`` and what is wrong: not a
    tensor, the shape, the dtype, or how many values are NaN/inf or negative."""
    if not isinstance(weights, torch.Tensor):
        raise ValueError(f"{name} must be a tensor of attention weights, got {type(weights).__name__}")
    if weights.dim() != dims:
        raise ValueError(f"{name} must have {dims} dimensions, got shape {tuple(weights.shape)}")
    if not weights.is_floating_point():
        raise ValueError(f"{name} must be floating point attention weights, got {weights.dtype}")
    w = weights.detach()
    bad = int((~torch.isfinite(w)).sum())
    if bad:
        raise ValueError(f"{name} holds {bad} NaN or infinite value(s) of {w.numel()}: not attention weights")
    negative = int((w < 0).sum())
    if negative:
        raise ValueError(f"{name} holds {negative} negative value(s) (min {float(w.min()):.3g}): not attention weights")
    return weights


def attention_rows(weights: Any, name: str = "weights") -> "torch.Tensor":
    """One layer's (B, H, L, L) self-attention weights, checked: float, finite, >= 0, rows summing
    to 1 (or to 0: a query with no allowed key), B, H >= 1 and L >= 2.

    "Summing to 1" follows the weights' dtype: within ``max(1e-3, finfo(dtype).eps)``. Rounding each
    weight of a row to the dtype moves the row's sum by at most half an eps (the weights are >= 0 and
    sum to 1), so a bf16 model's rows (eps 2^-7: sums 0.998 to 1.002 seen) pass and fp16's and
    float32's keep the 1e-3 of before.

    Returns them detached, as float32. Raises ValueError naming ``name`` and what is wrong."""
    if not isinstance(weights, torch.Tensor) or weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"{name} must be one layer's (B, H, L, L) tensor, got "
                         f"{tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__}")
    attention_weights(weights, name, dims=4)  # floating point, finite, >= 0
    if weights.shape[0] == 0 or weights.shape[1] == 0:
        raise ValueError(f"{name} has no sequence or no head: shape {tuple(weights.shape)}")
    if weights.shape[-1] < 2:
        raise ValueError(f"{name} needs L >= 2 positions, got L = {weights.shape[-1]}")
    tolerance = max(1e-3, torch.finfo(weights.dtype).eps)
    w = weights.detach().float()
    sums = w.sum(-1)
    if not bool(((sums - 1).abs() < tolerance).logical_or(sums.abs() < 1e-6).all()):
        raise ValueError(f"{name} are not attention weights: rows must be >= 0 and sum to 1 (or 0) within "
                         f"{tolerance:.3g} ({weights.dtype}), got row sums from {float(sums.min()):.4g} to "
                         f"{float(sums.max()):.4g}")
    return w


def padding_mask(mask: Any, shape: tuple, name: str = "key_padding_mask", axes: str = "B, S") -> "torch.Tensor":
    """``mask`` checked as a bool padding mask (True = padding) of exactly ``shape``.

    The rule of every function that reads WHICH positions are padding (the statistics of
    :mod:`mha_lib.analysis`, sentence pooling); attention itself also accepts float masks, added
    to the scores (``mha_lib.core.masks``). Returns the mask unchanged. Raises ValueError naming
    ``name``, the expected ``(axes) = shape`` and what was given."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != tuple(shape):
        raise ValueError(f"{name} must be a bool tensor of shape ({axes}) = {tuple(shape)}, True = padding; got "
                         f"{getattr(mask, 'dtype', type(mask).__name__)} {tuple(getattr(mask, 'shape', ()))}")
    return mask


def tracing() -> bool:
    """True while torch.onnx, torch.jit, torch.compile or a torch.func transform (vmap, grad)
    runs the code: value checks are skipped then (the caller checked its inputs before)."""
    return bool(
        torch.jit.is_tracing()
        or torch.onnx.is_in_onnx_export()
        or (hasattr(torch, "compiler") and torch.compiler.is_compiling())
        or in_functorch_transform()
    )


def in_functorch_transform() -> bool:
    """True inside ``torch.func.vmap`` / ``grad`` (where a tensor's values cannot be read)."""
    functorch = getattr(torch._C, "_functorch", None)
    return functorch is not None and functorch.peek_interpreter_stack() is not None
