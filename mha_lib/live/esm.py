"""The ES module of the kernel's widget: the book's browser modules of ``mha_lib/web/``, joined."""
from __future__ import annotations

import functools
import json
import re
from importlib import resources

#: The browser code's modules in ``mha_lib/web/``, in the order :func:`widget_esm` joins them: each one
#: imports only modules above it, and ``mha_live.mjs`` (the page's entry: mounting, ``render``) is last.
WIDGET_MODULES = ("i18n_zh.mjs", "i18n.mjs", "wordpiece.mjs", "checks.mjs", "contract.mjs", "layout.mjs", "figure.mjs",
                  "text.mjs", "clock.mjs", "compute.mjs", "compute_toys.mjs", "compute_bert.mjs", "steps.mjs", "integrity.mjs", "onnx_file.mjs",
                  "fetch_files.mjs", "ort_runtime.mjs", "runtime_browser.mjs", "runtime_kernel.mjs", "dom.mjs", "draw.mjs",
                  "styles.mjs", "view_state.mjs", "view.mjs", "head_toggles.mjs", "layer_maps.mjs", "head_view.mjs", "view_sentence.mjs",
                  "view_toy_compare.mjs", "view_prune.mjs", "view_timing.mjs", "view_induction.mjs", "view_translate.mjs",
                  "view_digit.mjs", "view_patterns.mjs", "view_steps.mjs", "speed.mjs", "view_speed.mjs", "mha_live.mjs")
_RELATIVE_IMPORT = re.compile(r'^import \{[^}]*\} from "\./([\w-]+\.mjs)";\n', re.M)
#: The lines of the modules that read a file beside them; in the widget's module they hold its text.
_INLINED = {"styles.mjs": ("const INLINE_CSS = null;", "mha_live.css"),
            "contract.mjs": ("const INLINE_CONTRACT = null;", "view_contract.json")}


@functools.lru_cache(maxsize=1)
def widget_esm() -> str:
    """The ES module of ``LiveWidget``: the modules of ``WIDGET_MODULES``, joined in that order.

    anywidget loads a widget's module from a ``blob:`` URL, where relative imports (``./dom.mjs``)
    cannot resolve and there is no folder to read ``mha_live.css`` or ``view_contract.json`` from, so
    the modules (package data, the same files the book copies to ``_static/live/``) become one text:
    each file without its ``import {...} from "./x.mjs";`` lines, and the stylesheet and the view
    contract written into the lines that would read them (``const INLINE_CSS = null;``,
    ``const INLINE_CONTRACT = null;``). No two modules define the same top-level name
    (tests/test_web.py checks it), and every relative import names an earlier module.

    Returns:
        the module text (str); its default export ``{render}`` is anywidget's entry point.

    Raises:
        RuntimeError: a module imports one that is not above it in ``WIDGET_MODULES``, a module
            of ``mha_lib/web/`` is not in the list, or a line to inline is not there exactly once.
    """
    web = resources.files("mha_lib") / "web"
    present = {p.name for p in web.iterdir() if p.name.endswith(".mjs")}
    if present != set(WIDGET_MODULES):
        raise RuntimeError(f"mha_lib/web/ holds {sorted(present)}, WIDGET_MODULES lists {sorted(WIDGET_MODULES)}")
    parts = []
    for i, name in enumerate(WIDGET_MODULES):
        text = (web / name).read_text(encoding="utf-8")
        later = [m for m in _RELATIVE_IMPORT.findall(text) if m not in WIDGET_MODULES[:i]]
        if later:
            raise RuntimeError(f"{name} imports {later}, which widget_esm would join after it")
        text = _RELATIVE_IMPORT.sub("", text)
        if 'from "./' in text:
            raise RuntimeError(f"{name} has a relative import that is not one line 'import {{...}} from \"./x.mjs\";'")
        if name in _INLINED:
            line, data = _INLINED[name]
            if text.count(line) != 1:
                raise RuntimeError(f"{name} must hold the line {line!r} once (widget_esm writes {data} there)")
            value = (web / data).read_text(encoding="utf-8")
            if data.endswith(".json"):
                value = json.loads(value)
            text = text.replace(line, f"{line.split(' = ')[0]} = {json.dumps(value, ensure_ascii=False)};")
        parts.append(f"// ---- mha_lib/web/{name}\n{text}")
    return "\n".join(parts)
