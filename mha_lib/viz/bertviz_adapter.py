"""mha_lib weights into bertviz's head view and model view (Vig 2019), as portable HTML.

JSON written inside a ``<script>`` escapes ``<``, ``>`` and ``&`` (:func:`_escape_script_json`).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import numbers
import re
from collections.abc import Iterable
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import torch

from .. import checks
from ._extras import _BERTVIZ_HINT
from .panels import _check_finite, _to_numpy


# ---------------------------------------------------------------------------------------------
# bertviz adapter
# ---------------------------------------------------------------------------------------------

# What bertviz 1.4 loads from cdnjs; the book can point these at its own copies by setting
# window.mhaLibScripts = {require: URL, paths: {d3: URL-without-.js, jquery: ...}} before.
_CDN_REQUIRE = "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"
_CDN_PATHS = {
    "d3": "https://cdnjs.cloudflare.com/ajax/libs/d3/5.7.0/d3.min",
    "jquery": "https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.0/jquery.min",
}
_REQUIRE_CONFIG = re.compile(r"require\.config\(\{\s*paths:\s*\{[^}]*\}\s*\}\);")
_BERTVIZ_ID = re.compile(r"bertviz-[0-9a-f]{32}")
_view_counter = itertools.count()

# Runs bertviz's script once require.js is there: loads it when missing (JupyterLab, VS Code,
# Colab and the book have no global `require`; bertviz's own `<script src>` + inline script
# races and fails there with "require is not defined"). In a page still loading, waits for
# `load`, so that require's global `define` cannot confuse other scripts of the page.
_LOADER = """
(function () {
  var cfg = window.mhaLibScripts || {};
  var requireUrl = cfg.require || %(require)s;
  var mhaPaths = Object.assign(%(paths)s, cfg.paths || {});
  function run() {
%(body)s
  }
  function whenRequire(cb) {
    if (typeof window.requirejs === "function") { cb(); return; }
    if (!window.__mhaRequireLoading) {
      window.__mhaRequireLoading = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = requireUrl; s.onload = resolve; s.onerror = reject;
        document.head.appendChild(s);
      });
    }
    window.__mhaRequireLoading.then(cb);
  }
  function start() { whenRequire(run); }
  if (document.readyState === "complete") { start(); } else { window.addEventListener("load", start); }
})();
"""


def _bertviz_layers(weights: Any, tokens: Sequence[str]) -> Tuple[list, List[str]]:
    """Checked per-layer float64 torch tensors (1, H, L, L), rounded to 4 decimals, and tokens."""
    if weights is None:
        raise ValueError("no attentions (weights is None): run the model with output_attentions=True "
                         "(mha_lib.MultiHeadAttention: need_weights=True)")
    if isinstance(weights, (list, tuple)):
        layers = list(weights)
        if len(layers) == 0:
            raise ValueError("no attentions (an empty sequence): run the model with output_attentions=True")
        if any(w is None for w in layers):
            raise ValueError("no attentions (a layer returned None): run the model with output_attentions=True")
    else:
        arr = weights
        ndim = len(arr.shape)
        if ndim == 3:
            layers = [arr[None]]
        elif ndim == 4:
            layers = [arr[i][None] for i in range(arr.shape[0])]
        else:
            raise ValueError(f"weights must be per-layer (1, H, L, L) tensors or (layers, H, L, L); "
                             f"got shape {tuple(arr.shape)}")
    out = []
    for i, w in enumerate(layers):
        a = _to_numpy(w, f"weights[{i}]")
        if a.ndim == 3:
            a = a[None]
        if a.ndim != 4:
            raise ValueError(f"weights[{i}] has shape {tuple(a.shape)}; bertviz needs (1, H, L, L) per layer")
        if a.shape[0] != 1:
            raise ValueError(f"bertviz shows one sequence, but weights[{i}] has batch size {a.shape[0]} "
                             f"(shape {tuple(a.shape)}); select one, e.g. [w[b:b + 1] for w in attentions]")
        if a.shape[2] != a.shape[3]:
            raise ValueError(f"weights[{i}] has L={a.shape[2]} queries and S={a.shape[3]} keys; "
                             "bertviz's self-attention views need L == S")
        _check_finite(a, f"weights[{i}]")
        out.append(a)
    heads = [a.shape[1] for a in out]
    if len(set(heads)) != 1:
        raise ValueError(f"bertviz needs the same number of heads in every layer; got {heads} (pruned heads?)")
    if heads[0] == 0:
        raise ValueError("the weights have 0 heads: nothing to show")
    lengths = {a.shape[2] for a in out}
    if len(lengths) != 1:
        raise ValueError(f"layers disagree on the sequence length: {sorted(lengths)}")
    n = lengths.pop()
    if isinstance(tokens, str) or tokens is None:
        raise ValueError("tokens must be a list of token strings")
    # A label is one line: control characters (a "\n" in a token) are shown escaped, as Python
    # writes them, instead of reaching the text renderer.
    tokens = ["".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in str(t))
              for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"tokens has {len(tokens)} entries but the attention covers {n} positions; "
                         "pass the tokens of the same (unpadded) sequence")
    # rounding keeps the page small; float64 keeps the JSON short (0.1234, not 0.12340000271797)
    return [torch.from_numpy(np.round(a, 4)) for a in out], tokens


def _checked_indices(name: str, values: Any, n: int, what: str) -> List[int]:
    """A list of ints in [0, n), or a ValueError naming ``name`` and the bad values."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list of ints, got {values!r}")
    values = list(values)
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in values):
        raise ValueError(f"{name} must be a list of ints, got {values!r}")
    bad = [int(v) for v in values if not 0 <= v < n]
    if bad:
        raise ValueError(f"{name} {bad} out of range: the weights have {n} {what} (0 to {n - 1})")
    return [int(v) for v in values]


def bertviz_view(
    weights: Any,
    tokens: Sequence[str],
    kind: str = "head",
    *,
    layer: Optional[int] = None,
    heads: Optional[Sequence[int]] = None,
    include_layers: Optional[Sequence[int]] = None,
    display: bool = False,
):
    """bertviz's head view or model view (Vig 2019) of mha_lib attention weights, batch 1.

    The HTML differs from bertviz's own, so that it works in more places:
    it loads require.js itself when the page has none (JupyterLab, VS Code, Colab and the
    book, where bertviz's plain display fails with "require is not defined"); it takes its
    script URLs from ``window.mhaLibScripts`` when a page sets it (the book serves its own
    copies) and from bertviz's CDN otherwise; and its element id is derived from the data,
    not a random uuid, so re-running a notebook gives the same output. And it reads well in a
    narrow column: the head view gives each of 12 heads its own colour (``HEAD_COLOURS``,
    where bertviz repeats its 10) and writes the head number on each colour swatch; the model
    view is laid out as wide as its box (320 to 970 px, where bertviz always draws 970 px), so
    every head is in view on a laptop or a phone.

    Args:
        weights: a sequence of per-layer (1, H, L, L) tensors (``output_attentions=True``),
            or a (layers, H, L, L) / (H, L, L) tensor or array. Same H in every layer. A 4-D
            tensor is ALWAYS read as (layers, H, L, L): the (B, H, L, L) weights of one
            batched layer must be indexed first, ``weights[b]``, or each batch row would be
            shown as a layer.
        tokens: the L token strings.
        kind: ``"head"`` (one layer, lines between tokens) or ``"model"`` (every layer x head).
        layer, heads: head view only: the layer and heads selected at first (0-based ints,
            in range).
        include_layers: layers to include, 0-based ints in range (default all).
        display: show it now (IPython ``display``) and return None.

    Returns:
        ``IPython.display.HTML`` (displayed when it is the last line of a cell), or None
        when ``display=True``.

    Raises:
        ValueError: no attentions, a batch above 1, L != S, a token count that is not L,
            ragged head counts, non-finite weights, an unknown ``kind``, or a ``layer``,
            ``heads`` or ``include_layers`` entry out of range (naming it).
        ImportError: bertviz missing (``pip install "mha_lib[bertviz]"``, its own extra).
    """
    if kind not in ("head", "model"):
        raise ValueError(f"kind must be 'head' or 'model', got {kind!r}")
    layers, tokens = _bertviz_layers(weights, tokens)
    try:
        from bertviz import head_view, model_view
    except ImportError as err:
        raise ImportError(f"bertviz_view needs bertviz: {_BERTVIZ_HINT}") from err
    from IPython.display import HTML
    from IPython.display import display as ipy_display

    n_layers, n_heads = len(layers), layers[0].shape[1]
    if include_layers is not None:
        include_layers = _checked_indices("include_layers", include_layers, n_layers, "layers")
    if heads is not None:
        heads = _checked_indices("heads", heads, n_heads, "heads per layer")
    if kind == "head":
        if layer is not None:
            layer = checks.as_int(layer, "layer")
        if layer is not None and not 0 <= layer < len(layers):
            raise ValueError(f"layer {layer} is out of range for {len(layers)} layers")
        raw = head_view(layers, tokens, layer=layer, heads=list(heads) if heads is not None else None,
                        include_layers=list(include_layers) if include_layers is not None else None,
                        html_action="return").data
    else:
        if layer is not None or heads is not None:
            raise ValueError("layer and heads apply to kind='head' only")
        raw = model_view(layers, tokens, include_layers=list(include_layers) if include_layers is not None else None,
                         html_action="return").data
    page = _portable_bertviz_html(raw, kind, layers, tokens)
    if display:
        ipy_display(HTML(page))
        return None
    return HTML(page)


# The head view's head colours. bertviz cycles d3.schemeCategory10, so in a 12-head layer heads 0
# and 10, and 1 and 11, look the same. These are the first 12 colours of colorcet's
# glasbey_category10: category10, then the colours farthest from every colour already chosen
# (Glasbey et al. 2007, "Colour displays for categorical images"). A 13th head reuses colour 0;
# the number on its swatch still tells it apart.
HEAD_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#3a0183", "#004301")

# The head view: head i gets HEAD_COLOURS[i]; each colour swatch shows its head number, in black
# or white, whichever contrasts more with the swatch (WCAG relative luminance), and a tooltip.
_HEAD_NUMBERS = """.attr("height", CHECKBOX_SIZE);
        // mha_lib: the head number on each swatch, and a tooltip
        checkbox.append("title").text((d, i) => "head " + i);
        checkboxContainer.selectAll("text").data(config.headVis).enter().append("text")
            .text((d, i) => i)
            .attr("x", (d, i) => (i + 0.5) * CHECKBOX_SIZE)
            .attr("y", top + CHECKBOX_SIZE / 2)
            .attr("dy", "0.35em")
            .attr("text-anchor", "middle")
            .attr("font-size", "11px")
            .style("pointer-events", "none")
            .style("user-select", "none");
        function mhaInk(colour) {
            const c = d3.rgb(colour);
            const lin = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
            return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b) > 0.179 ? "#000" : "#fff";
        }"""
_HEAD_NUMBER_INK = """.attr("fill", (d, i) => d ? headColors(i): lighten(headColors(i)));
            checkboxContainer.selectAll("text").data(config.headVis)
                .attr("fill", (d, i) => mhaInk(d ? headColors(i) : lighten(headColors(i))));"""

# The model view: bertviz draws it 970 px wide, which a book column (688 px on a laptop, 358 px
# on a phone) cuts off. It is laid out as wide as its box at drawing time instead (320 to 970 px;
# 970 when the box has no width yet, e.g. hidden), with a viewBox so that it scales if the box
# changes later; the detail panel of a clicked head stays inside the view.
_MODEL_WIDTH = """const DIV_WIDTH = (function () {  // mha_lib: as wide as its box, 320 to 970 px
            const root = document.getElementById(params['root_div_id']);
            const width = root ? Math.floor(root.getBoundingClientRect().width) : 0;
            return width >= 320 ? Math.min(970, width) : 970;
        })();"""

# (kind, bertviz's text, replacement): each must occur exactly once (bertviz 1.4's head_view.js
# and model_view.js); a missing one raises instead of silently showing bertviz's layout.
_BERTVIZ_PATCHES = (
    ("head", "d3.scaleOrdinal(d3.schemeCategory10)",
     "(function (i) { const c = %s; return c[(+i) %% c.length]; })" % json.dumps(list(HEAD_COLOURS))),
    ("head", '.attr("height", CHECKBOX_SIZE);', _HEAD_NUMBERS),
    ("head", '.attr("fill", (d, i) => d ? headColors(i): lighten(headColors(i)));', _HEAD_NUMBER_INK),
    ("model", "const DIV_WIDTH = 970;", _MODEL_WIDTH),
    ("model", '.attr("width", DIV_WIDTH)',
     '.attr("width", DIV_WIDTH)\n                .attr("viewBox", "0 0 " + DIV_WIDTH + " " + config.divHeight)'),
    ("model", "var posLeftText = x;",
     "x = Math.max(MIN_X, Math.min(x, maxX - DETAIL_WIDTH));  // mha_lib: inside a narrow view\n"
     "            var posLeftText = x;"),
)


def _patch_bertviz_js(body: str, kind: str) -> str:
    """Apply :data:`_BERTVIZ_PATCHES` for ``kind`` ("head" or "model") to bertviz's script."""
    for patch_kind, old, new in _BERTVIZ_PATCHES:
        if patch_kind != kind:
            continue
        if body.count(old) != 1:
            raise RuntimeError(f"bertviz's {kind} view script has {body.count(old)} copies of {old!r}, "
                               "expected 1; mha_lib.viz supports bertviz 1.4")
        body = body.replace(old, new)
    return body


# bertviz writes its params (tokens included) on this line, twice: as code and in a comment.
_PARAMS = re.compile(r"(const params = )([^\n]*)")


def _escape_script_json(body: str) -> str:
    """Escape ``<``, ``>`` and ``&`` in the JSON line bertviz writes into its ``<script>`` (tokens come
    from readers' text): a token ``</script><script>...`` must not end the tag.
    ``\u003c`` is the same character to JavaScript, so the view shows the token as it was."""
    match = _PARAMS.search(body)
    if match is None:
        raise RuntimeError("bertviz's params literal was not found; mha_lib.viz supports bertviz 1.4")
    params = match.group(2)
    for char, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                       ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        params = params.replace(char, code)
    return body[: match.start(2)] + params + body[match.end(2):]


def _portable_bertviz_html(raw: str, kind: str, layers: list, tokens: List[str]) -> str:
    # The id comes from what the view shows (kind, tokens, shapes), never from the weights' float
    # bytes, which differ in the last bit between CPUs; the counter keeps two views apart.
    digest = hashlib.sha1(json.dumps([kind, tokens, [list(a.shape) for a in layers]]).encode())
    view_id = f"bertviz-{kind}-{digest.hexdigest()[:12]}-{next(_view_counter)}"
    raw = _BERTVIZ_ID.sub(view_id, raw)
    raw = re.sub(r'<script src="[^"]*require(\.min)?\.js"></script>', "", raw, count=1)
    opening = '<script type="text/javascript">'
    start = raw.rfind(opening)
    end = raw.rfind("</script>")
    if start < 0 or end < start:
        raise RuntimeError("unexpected bertviz HTML layout; mha_lib.viz supports bertviz 1.4")
    markup, body = raw[:start], raw[start + len(opening):end]
    body = _escape_script_json(body)
    body = _patch_bertviz_js(body, kind)
    body, n = _REQUIRE_CONFIG.subn("require.config({paths: mhaPaths});", body, count=1)
    if n != 1:
        raise RuntimeError("bertviz's require.config block was not found; mha_lib.viz supports bertviz 1.4")
    script = _LOADER % {"require": json.dumps(_CDN_REQUIRE), "paths": json.dumps(_CDN_PATHS), "body": body}
    return markup.strip() + '\n<script type="text/javascript">' + script + "</script>\n"
