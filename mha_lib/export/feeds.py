"""A file's inputs checked before onnxruntime runs (it would cast, wrap or clamp some mistakes silently)."""
from __future__ import annotations

from typing import Dict, Mapping, Optional

import numpy as np
import torch

from .common import _read_metadata


def _as_array(value, name: str) -> np.ndarray:
    """``value`` (an input named ``name``) as a numpy array: the one conversion of every feed, torch or not.

    A torch tensor is read on the CPU; float16, bfloat16 (which numpy lacks) and the float8 types
    become float32, exactly (each of their values is one in float32). A tensor without data (on the
    meta device, a fake or other subclass numpy cannot read), a sparse, nested or quantised one is a
    ValueError naming the input, as is anything numpy makes no numeric array of."""
    if isinstance(value, torch.Tensor):
        return _tensor_array(value, name)
    try:
        out = np.asarray(value)
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as err:  # ragged lists, lists of meta tensors
        raise ValueError(f"{name} must be an array, got {value!r:.60} ({err})") from None
    if out.dtype == object:
        raise ValueError(f"{name} must be a numeric array, got {value!r:.60}")
    return out


def _tensor_array(t: torch.Tensor, name: str) -> np.ndarray:
    """A torch tensor as numpy (see ``_as_array``)."""
    what = f"{name} is a {t.dtype} tensor"
    if t.layout != torch.strided:
        raise ValueError(f"{what} of layout {t.layout}: give a dense tensor (tensor.to_dense())")
    if t.is_nested:
        raise ValueError(f"{what} that is nested: give one (B, ...) tensor, padded")
    if t.is_meta or t.device.type == "meta":
        raise ValueError(f"{what} on the meta device, shape {tuple(t.shape)}: it holds no data")
    if t.is_quantized:
        raise ValueError(f"{what} that is quantised: give its values (tensor.dequantize())")
    t = t.detach()
    if t.dtype.is_floating_point and t.dtype.itemsize < 4:  # float16, bfloat16, float8: all exact in float32
        t = t.float()
    try:
        return t.cpu().resolve_conj().resolve_neg().numpy()
    except (TypeError, RuntimeError, NotImplementedError) as err:  # a fake tensor, a dtype numpy lacks
        raise ValueError(f"{what} that numpy cannot read ({type(err).__name__}: {err})") from None


def _fitting_float32(a: np.ndarray, what: str) -> np.ndarray:
    """``a`` cast to float32, the dtype the file takes, and checked AFTER the cast: a float64 1e39 is
    finite but becomes inf there (and NaN logits after). bool becomes 0/1; ``what`` starts the message."""
    if not (a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise ValueError(f"{what}: got dtype {a.dtype}")
    with np.errstate(over="ignore", invalid="ignore"):
        cast = a.astype(np.float32, copy=False)
    bad = int(cast.size - np.count_nonzero(np.isfinite(cast)))
    if bad:
        raise ValueError(f"{what}: got dtype {a.dtype} with {bad} value{'s' if bad > 1 else ''} NaN, infinite or "
                         f"beyond float32's range (|x| <= {float(np.finfo(np.float32).max):.4g})")
    return cast


def _check_fixed_sizes(feeds: Mapping[str, np.ndarray], expected: Mapping) -> None:
    """Every input's rank and fixed sizes (the axes the file does not leave dynamic) as the file declares them."""
    for name, a in feeds.items():
        shape = getattr(expected.get(name), "shape", None)
        if shape is None:
            continue
        if a.ndim != len(shape) or any(isinstance(n, int) and n != m for n, m in zip(shape, a.shape)):
            raise ValueError(f"{name} has shape {a.shape}: the file takes {tuple(shape)} (names are free sizes)")


def _checked_feeds(session, inputs: Mapping) -> Dict[str, np.ndarray]:
    """The inputs of ``session`` checked and cast to the file's dtypes (see :func:`run_onnx`)."""
    if not isinstance(inputs, Mapping):
        raise ValueError(f"inputs must be a dict {{input name: tensor}}, got {type(inputs).__name__}")
    expected = {i.name: i for i in session.get_inputs()}
    meta = _read_metadata(session)
    feeds = {k: _as_array(v, k) for k, v in inputs.items()}
    rows = getattr(session, "mha_lib_token_rows", None) if "token_rows" in expected else None
    if "token_rows" in expected:  # a split file: the caller gives input_ids, TokenRows makes the two inputs
        if rows is None:
            raise ValueError("this file reads its token rows from files: open it with onnx_session(path), which "
                             "finds them")
        given = sorted(set(feeds) & {"token_rows", "token_index"})
        if given:
            raise ValueError(f"inputs {given} are made from input_ids: pass input_ids instead")
        expected = {k: v for k, v in expected.items() if k not in ("token_rows", "token_index")}
        expected["input_ids"] = None  # checked below as for any file
    if "head_mask" in expected and "head_mask" not in feeds:
        feeds["head_mask"] = np.ones(expected["head_mask"].shape, dtype=np.float32)
    unknown, missing = sorted(set(feeds) - set(expected)), sorted(set(expected) - set(feeds))
    if unknown or missing:
        raise ValueError(f"inputs {sorted(feeds)} do not match the file's {list(expected)} "
                         f"(unknown {unknown}, missing {missing})")

    def number(key):
        return int(meta[key]) if key in meta else None

    def integers(name: str, upper: Optional[int], upper_name: str) -> None:
        a = feeds[name]
        if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"{name} must hold integers (int64), got dtype {a.dtype} (float ids are refused, not "
                             "truncated)")
        if a.size and (a.min() < 0 or (upper is not None and a.max() >= upper)):
            raise ValueError(f"{name} holds values in [{a.min()}, {a.max()}], outside [0, {upper_name}={upper}) "
                             "(onnxruntime's Gather wraps a negative id around)" if upper is not None else
                             f"{name} holds negative values (min {a.min()}): onnxruntime's Gather wraps them around")

    seq = "input_ids" if "input_ids" in expected else "patches" if "patches" in expected else None
    if seq is not None:
        a = feeds[seq]
        if a.ndim != (2 if seq == "input_ids" else 3) or a.shape[0] < 1:
            raise ValueError(f"{seq} must be {'(B, L)' if seq == 'input_ids' else '(B, N, patch_dim)'} with B >= 1, "
                             f"got shape {a.shape}")
        L, room = a.shape[1], number("max_length")
        room = None if room is None else room - (number("cls_token") or 0)
        if L < 1 or (room is not None and L > room):
            raise ValueError(f"{seq} has length {L}: the file takes 1 to {room if room is not None else 'any'} "
                             "positions")
        for other in ("token_type_ids", "key_padding_mask"):
            if other in feeds and feeds[other].shape != a.shape[:2]:
                raise ValueError(f"{other} has shape {feeds[other].shape}, {seq} {a.shape}: they must be (B, L) alike")
    if "input_ids" in expected:
        integers("input_ids", number("vocab_size"), "vocab_size")
    if "src_ids" in expected:  # an encoder-decoder's source: (B, S), S within max_length, ids of its vocabulary
        a = feeds["src_ids"]
        room = number("max_length")
        if a.ndim != 2 or a.shape[0] != feeds["input_ids"].shape[0] or not 1 <= a.shape[1] <= (room or a.shape[1]):
            raise ValueError(f"src_ids must be (B, S) with the B of input_ids and 1 <= S <= {room}, got shape {a.shape}")
        integers("src_ids", number("source_vocab_size"), "source_vocab_size")
    if "token_type_ids" in expected:
        integers("token_type_ids", number("type_vocab_size"), "type_vocab_size")
    if "patches" in expected:
        width = expected["patches"].shape[-1]
        if isinstance(width, int) and feeds["patches"].shape[-1] != width:
            raise ValueError(f"patches are {feeds['patches'].shape[-1]} wide (shape {feeds['patches'].shape}): the "
                             f"file takes patch_dim={width}")
        feeds["patches"] = _fitting_float32(feeds["patches"], "patches must hold finite real numbers that fit float32")
    if "key_padding_mask" in expected:
        a = feeds["key_padding_mask"]
        if a.dtype != np.bool_ and (not np.issubdtype(a.dtype, np.number) or not np.isin(a, (0, 1)).all()):
            raise ValueError(f"key_padding_mask must be bool (True = padding) or 0/1, got dtype {a.dtype} with "
                             f"values {np.unique(a)[:6].tolist() if a.dtype != object else '?'}")
    if "attn_mask" in expected:  # a pattern (export_onnx(..., pattern_input=True)): (L, L), True = blocked
        a, L = feeds["attn_mask"], feeds["input_ids"].shape[1]
        if a.shape != (L, L) or (a.dtype != np.bool_ and (not np.issubdtype(a.dtype, np.number)
                                                         or not np.isin(a, (0, 1)).all())):
            raise ValueError(f"attn_mask must be ({L}, {L}) for input_ids of length {L}, bool (True = blocked) or "
                             f"0/1, got shape {a.shape}, dtype {a.dtype}")
    if "head_mask" in expected:
        a, shape = feeds["head_mask"], expected["head_mask"].shape
        if a.shape != tuple(shape):
            raise ValueError(f"head_mask must have shape (num_layers, H) = {tuple(shape)}, got {a.shape}")
        feeds["head_mask"] = _fitting_float32(a, "head_mask must hold finite float32 numbers (1 keep, 0 drop)")
    for name, a in feeds.items():  # any other float input, as patches and head_mask: finite once cast
        if name not in ("patches", "head_mask") and getattr(expected[name], "type", None) == "tensor(float)":
            feeds[name] = _fitting_float32(a, f"{name} must hold finite real numbers that fit float32")
    _check_fixed_sizes(feeds, expected)
    dtypes = {"tensor(int64)": np.int64, "tensor(bool)": np.bool_, "tensor(float)": np.float32}
    made = rows.feeds(feeds.pop("input_ids")) if rows is not None else {}  # a split file: token_rows, token_index
    return {**{k: v.astype(dtypes.get(expected[k].type, v.dtype), copy=False) for k, v in feeds.items()}, **made}
