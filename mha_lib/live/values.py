"""The numbers of a live view's config: JSON that a browser reads back exactly.

:func:`_rounded` is the one conversion of every config (tensors and numpy to lists, floats to
:data:`DECIMALS` decimals; NaN, infinity, integers beyond 2**53 - 1 and lone surrogates refused).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import torch

#: Decimals kept for every float of a configuration (attention weights: 1e-4 is below what a
#: colour shows, and the readout prints 3 decimals).
DECIMALS = 4


_MAX_SAFE_INTEGER = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER


def _check_utf8(text: str, where: str) -> str:
    """``text`` if it can be written as UTF-8 (no lone surrogate, e.g. ``"\\ud800"``); ValueError otherwise."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{where} holds {text[err.start:err.end]!r} at index {err.start}, a lone surrogate: "
                         "not a character, it cannot be written as UTF-8") from None
    return text


def _rounded(value: Any, where: str) -> Any:
    """A JSON-able copy of ``value`` with floats rounded to :data:`DECIMALS` (tensors -> lists)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().tolist()
    elif hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy arrays and scalars
        value = value.tolist()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return _check_utf8(value, where)
    if isinstance(value, int):
        if abs(value) > _MAX_SAFE_INTEGER:
            raise ValueError(f"{where} holds the integer {value!r:.60}, beyond 2**53 - 1: a browser's JSON.parse "
                             "would change it (or make it Infinity)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} holds a non-finite number ({value!r}): the config must be finite")
        r = round(value, DECIMALS)
        return 0.0 if r == 0 else r  # no "-0.0"
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{where}: keys must be str, got {k!r}")
            _check_utf8(k, f"{where}: key")
            out[k] = _rounded(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [_rounded(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise ValueError(f"{where} holds a {type(value).__name__} ({value!r:.60}): only numbers, str, bool, None, "
                     "lists, dicts and tensors go into a live view's config")
