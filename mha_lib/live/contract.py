"""The view contract: what each view's drawing reads of its config (``mha_lib/web/view_contract.json``).

:func:`view_contract` reads the file (package data); :func:`_check_config` checks a config against
it in Python, as ``checkConfig`` of ``mha_lib/web/contract.mjs`` does in the page.
"""
from __future__ import annotations

import functools
import json
import math
from importlib import resources


@functools.lru_cache(maxsize=1)
def view_contract() -> dict:
    """``mha_lib/web/view_contract.json``: per view, the keys its drawing reads and their shapes.

    The one description of a view's configuration: :func:`_check_config` here and ``checkConfig`` of
    ``mha_lib/web/contract.mjs`` (the page) both read it, and word their refusals alike.
    """
    return json.loads((resources.files("mha_lib") / "web" / "view_contract.json").read_text(encoding="utf-8"))


def _size_of(spec, config: dict) -> int:
    """A size of the contract: a number, a key (its length, or its integer value) or ``"N*key"``."""
    if isinstance(spec, int):
        return spec
    factor, _, key = spec.rpartition("*")
    value = config[key]
    return int(factor or 1) * (len(value) if isinstance(value, list) else int(value))


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_integer(v) -> bool:
    """An integer as the page's JSON.parse reads it (``2.0`` is the number 2 there)."""
    return _is_number(v) and float(v).is_integer()


def _quoted(values) -> str:
    return ", ".join(json.dumps(x, ensure_ascii=False) for x in values)


def _check_rule(value, rule: dict, path: str, config: dict, fail) -> None:
    """``value`` (at ``path``, e.g. ``'texts'[3]``) against a rule of the contract; as ``checkRule`` in contract.mjs."""

    def must(ok: bool, what: str) -> None:
        if not ok:
            fail(f"{path} must be {what}, got {value!r:.80}")

    kind = rule["type"]
    if kind == "str":
        must(isinstance(value, str), "a string")
    elif kind == "number":
        must(_is_number(value), "a number")
    elif kind == "int":
        bounds, ok = [], _is_integer(value)
        if "min" in rule:
            bounds.append(f">= {rule['min']}")
            ok = ok and value >= rule["min"]
        if "below" in rule:
            top = _size_of(rule["below"], config)
            bounds.append(f"< {top} (the length of '{rule['below']}')")
            ok = ok and value < top
        must(ok, "an integer" + (" " + " and ".join(bounds) if bounds else ""))
    elif kind == "enum":
        must(any(value == x and isinstance(value, bool) == isinstance(x, bool)
                 and isinstance(value, str) == isinstance(x, str) for x in rule["values"]),
             f"one of {_quoted(rule['values'])}")
    elif kind == "object":
        must(isinstance(value, dict), "an object")
        for key, inner in rule.get("keys", {}).items():
            if not (inner.get("optional") and key not in value):
                _check_rule(value.get(key), inner, f"{path}[{key!r}]", config, fail)
    elif kind == "list":
        what, ok = "a list", isinstance(value, list)
        if "min_length" in rule:
            n = _size_of(rule["min_length"], config)
            what = "a non-empty list" if n == 1 else f"a list of at least {n} items"
            what += f" ({rule['min_length']})" if isinstance(rule["min_length"], str) else ""
            ok = ok and len(value) >= n
        if "length" in rule:
            n = _size_of(rule["length"], config)
            what = f"a list of {n} items" + (f" ({rule['length']})" if isinstance(rule["length"], str) else "")
            ok = ok and len(value) == n
        must(ok, what)
        for i, v in enumerate(value if "items" in rule else []):
            _check_rule(v, rule["items"], f"{path}[{i}]", config, fail)
    elif kind == "maps":
        square = "side" in rule  # else rows and cols: a map that is not square (cross-attention)
        n = _size_of(rule["side"] if square else rule["rows"], config)
        width = _size_of(rule["side"] if square else rule["cols"], config)
        shape = (f"a {n} x {n} map (one row and column per item of '{rule['side']}')" if square
                 else f"a {n} x {width} map (rows: '{rule['rows']}', columns: '{rule['cols']}')")
        must(isinstance(value, list) and len(value) > 0, "a non-empty [layer][head][query][key] list")
        for i, layer in enumerate(value):
            if not isinstance(layer, list) or not layer:
                fail(f"{path}[{i}] must be a non-empty list of heads, got {layer!r:.80}")
            for j, m in enumerate(layer):
                if (not isinstance(m, list) or len(m) != n
                        or any(not isinstance(row, list) or len(row) != width for row in m)):
                    fail(f"{path}[{i}][{j}] must be {shape}, got {m!r:.80}")
    elif kind == "head_mask":
        maps = config[rule["like"]]
        must(isinstance(value, list) and len(value) == len(maps),
             f"a list of {len(maps)} rows, one per layer of '{rule['like']}'")
        for l, row in enumerate(value):
            if not isinstance(row, list) or len(row) != len(maps[l]):
                fail(f"{path}[{l}] must be a list of {len(maps[l])} values, one per head of "
                     f"'{rule['like']}'[{l}], got {row!r:.80}")
            for h, v in enumerate(row):
                if not (isinstance(v, bool) or (_is_number(v) and v in (0, 1))):
                    fail(f"{path}[{l}][{h}] must be 0, 1 or a boolean, got {v!r:.80}")
    elif kind == "per_item":
        must(isinstance(value, dict), "an object")
        for name in config[rule["of"]]:
            _check_rule(value.get(name), rule["value"], f"{path}[{name!r}]", config, fail)
    else:
        raise RuntimeError(f"view_contract.json: unknown rule type {kind!r} at {path}")


def _check_config(view: str, model: str, config: dict) -> None:
    """``config`` (already rounded: lists, dicts, numbers, str) and ``model`` against :func:`view_contract`,
    before the page is written: what ``checkConfig`` of ``mha_lib/web/contract.mjs`` checks, with the
    same words. ValueError naming the key path, e.g. ``'results'['ch1-h1']['attentions'][0][0]``."""

    def fail(what: str):
        raise ValueError(f"config of a {view!r} view: {what}")

    spec = view_contract()["views"][view]
    for key, rule in spec["keys"].items():
        if not (rule.get("optional") and key not in config):
            _check_rule(config.get(key), rule, f"{key!r}", config, fail)
    if "equals" in spec["model"] and model != spec["model"]["equals"]:
        fail(f"model must be {json.dumps(spec['model']['equals'])}, got {model!r}")
    if "one_of" in spec["model"] and model not in config[spec["model"]["one_of"]]:
        key = spec["model"]["one_of"]
        fail(f"model must be one of '{key}' [{_quoted(config[key])}], got {model!r}")
