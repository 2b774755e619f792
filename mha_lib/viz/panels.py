"""Input checking: every picture turns its weights into rows of labelled 2-D panels.

Shapes: one layer (H, L, S); several layers (layers, H, L, S) or a sequence of per-layer tensors
(H_l, L, S) / (1, H_l, L, S), ragged after pruning. Torch tensors or NumPy arrays.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np


DEFAULT_CMAP = "viridis"  # perceptually uniform and readable with the common colour-vision deficiencies

# ---------------------------------------------------------------------------------------------
# Input checking: every public function turns its weights into rows of labelled 2-D panels.
# ---------------------------------------------------------------------------------------------

Panel = Tuple[str, np.ndarray]  # ("L0.H3", (L, S) float64)


def _to_numpy(x: Any, what: str = "weights") -> np.ndarray:
    """A float64 NumPy copy of a torch tensor, NumPy array or nested list."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch
        x = x.detach().cpu().float().numpy()
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{what} must be a tensor or array of numbers, got {type(x).__name__}") from err
    return arr


def _check_finite(arr: np.ndarray, what: str) -> None:
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        raise ValueError(f"{what} contain {bad} non-finite values (NaN or inf); attention weights must be finite")


def _layer_rows(weights: Any, layer: int) -> List[Tuple[int, np.ndarray]]:
    """Split ``weights`` into ``[(layer_index, (H_l, L, S) array), ...]``."""
    if isinstance(weights, (list, tuple)):
        if len(weights) == 0:
            raise ValueError("weights is an empty sequence: no layers to show")
        rows = []
        for i, w in enumerate(weights):
            arr = _to_numpy(w, f"weights[{i}]")
            if arr.ndim == 4:
                if arr.shape[0] != 1:
                    raise ValueError(
                        f"weights[{i}] has shape {tuple(arr.shape)}: a batch of {arr.shape[0]}; "
                        "pass one sequence, e.g. [w[b:b + 1] for w in weights]"
                    )
                arr = arr[0]
            if arr.ndim != 3:
                raise ValueError(
                    f"weights[{i}] has shape {tuple(arr.shape)}; each layer must be (H, L, S) or (1, H, L, S)"
                )
            rows.append((layer + i, arr))
        return rows
    arr = _to_numpy(weights)
    if arr.ndim == 3:
        return [(layer, arr)]
    if arr.ndim == 4:
        return [(layer + i, arr[i]) for i in range(arr.shape[0])]
    hint = " (one head? use weights[None])" if arr.ndim == 2 else ""
    raise ValueError(
        f"weights must have shape (H, L, S) or (layers, H, L, S); got shape {tuple(arr.shape)}{hint}"
    )


def _check_tokens(tokens: Sequence[str], n: int, name: str, axis: str) -> List[str]:
    if tokens is None:
        raise ValueError(f"{name} is required")
    if isinstance(tokens, str):
        raise ValueError(f"{name} must be a list of token strings, not one string ({tokens[:30]!r})")
    # A label is one line: control characters (a "\n" in a token) are shown escaped, as Python
    # writes them, instead of reaching the text renderer.
    tokens = ["".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in str(t))
              for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"{name} has {len(tokens)} entries but the weights have {axis}={n}")
    return tokens


def _panels(
    weights: Any,
    tokens: Sequence[str],
    key_tokens: Optional[Sequence[str]],
    *,
    layer: int = 0,
    head_labels: Optional[Sequence[str]] = None,
    ncols: Optional[int] = None,
) -> Tuple[List[List[Panel]], List[str], List[str]]:
    """Rows of ``(label, (L, S) array)`` panels plus the checked query and key tokens.

    One layer (H, L, S) is wrapped into rows of ``ncols`` heads (default 4; 8 above 16 heads).
    Several layers give one row per layer.
    """
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or layer < 0:
        raise ValueError(f"layer must be a non-negative int, got {layer!r}")
    layer_rows = _layer_rows(weights, int(layer))
    shapes = {arr.shape[1:] for _, arr in layer_rows}
    if len(shapes) != 1:
        raise ValueError(f"every layer must have the same (L, S); got {sorted(shapes)}")
    (L, S), = shapes
    if L == 0 or S == 0:
        raise ValueError(f"weights have L={L}, S={S}: nothing to show")
    n_heads = sum(arr.shape[0] for _, arr in layer_rows)
    if n_heads == 0:
        raise ValueError("weights have 0 heads (every head pruned?): nothing to show")
    for li, arr in layer_rows:
        _check_finite(arr, f"weights of layer {li}")
    tokens = _check_tokens(tokens, L, "tokens", "L")
    key_tokens = tokens if key_tokens is None and S == L else key_tokens
    if key_tokens is None:
        raise ValueError(f"weights have S={S} keys but L={L} queries: pass key_tokens (S strings)")
    key_tokens = _check_tokens(key_tokens, S, "key_tokens", "S")

    labels = [f"L{li}.H{h}" for li, arr in layer_rows for h in range(arr.shape[0])]
    if head_labels is not None:
        head_labels = [str(s) for s in head_labels]
        if len(head_labels) != n_heads:
            raise ValueError(f"head_labels has {len(head_labels)} entries for {n_heads} heads")
        labels = head_labels
    it = iter(labels)
    if len(layer_rows) == 1:
        arr = layer_rows[0][1]
        H = arr.shape[0]
        if ncols is None:
            ncols = H if H <= 4 else (4 if H <= 16 else 8)
        if ncols < 1:
            raise ValueError(f"ncols must be >= 1, got {ncols}")
        flat = [(next(it), arr[h]) for h in range(H)]
        rows = [flat[i:i + ncols] for i in range(0, H, ncols)]
    else:
        rows = [[(next(it), arr[h]) for h in range(arr.shape[0])] for _, arr in layer_rows]
        rows = [r for r in rows if r]  # a fully pruned layer has no panel
    return rows, tokens, key_tokens


def _check_colour_limits(vmin: Any, vmax: Any) -> None:
    """vmin a finite number, vmax None or a finite number (NaN would give a blank or garbled map)."""
    for name, v in (("vmin", vmin), ("vmax", vmax)):
        if v is None and name == "vmax":
            continue
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")


def _check_cell(cell: Any) -> None:
    """cell None (automatic) or an int >= 1 (pixels per attention entry)."""
    if cell is None:
        return
    if isinstance(cell, bool) or not isinstance(cell, numbers.Integral) or cell < 1:
        raise ValueError(f"cell must be a positive int (pixels per attention entry) or None, got {cell!r}")


def _value_range(rows: List[List[Panel]], vmin: float, vmax: Optional[float]) -> Tuple[float, float]:
    _check_colour_limits(vmin, vmax)
    if vmax is None:
        vmax = max(float(a.max()) for row in rows for _, a in row)
    if not (math.isfinite(vmin) and math.isfinite(vmax)) or vmax <= vmin:
        vmax = vmin + 1.0 if not vmax > vmin else vmax
    return float(vmin), float(vmax)


def _alt_text(rows: List[List[Panel]], tokens: List[str], key_tokens: List[str], vmin: float, vmax: float,
              cmap: str) -> str:
    """A description for readers who cannot see the figure, computed from the data.

    Besides layout and tokens it says, per key token, which heads give it their highest
    mean weight (the commonest pattern in trained models is "everything on [CLS]/[SEP]").
    """
    panels = [p for row in rows for p in row]
    first, last = panels[0][0], panels[-1][0]
    span = first if len(panels) == 1 else f"{first} to {last}"
    groups: Dict[str, List[str]] = {}
    for label, a in panels:
        groups.setdefault(key_tokens[int(np.argmax(a.mean(axis=0)))], []).append(label)
    parts = []
    for key, labels in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        who = ", ".join(labels) if len(labels) <= 6 else f"{len(labels)} heads"
        parts.append(f"{key} ({who})")
    return (
        f"Grid of {len(panels)} attention heat maps, one per head ({span}). "
        f"Rows are query tokens, columns are key tokens: {' '.join(tokens)}"
        + ("" if key_tokens == tokens else f" (keys: {' '.join(key_tokens)})")
        + f". Colour scale {cmap}, dark = {vmin:.2g}, bright = {vmax:.2g}. "
        f"Key token with the highest mean weight, per head: {'; '.join(parts)}."
    )
