"""Sphinx extension: the book serves its own scripts, and loads each script once.

1. Vendored scripts. The built pages load require.js, the ipywidgets HTML manager, MathJax,
   d3, jquery and (the live views) onnxruntime-web from ``_static/vendor/`` instead of CDNs
   (cases.md item 18: readers behind networks that block CDNs otherwise see dead figures). The files come from the npm
   packages pinned in ``tests/browser/package-lock.json`` (``npm ci --prefix tests/browser``)
   and are copied into the HTML output when the build finishes -- not into the source
   ``_static/``, whose every .js file Jupyter Book would add to every page. _config.yml points
   ``nb_ipywidgets_js`` and ``mathjax_path`` at them, and ``_static/mha_book.js`` tells
   ``mha_lib.viz.bertviz_view`` where require.js, d3 and jquery are. The live views' ES modules
   (``mha_lib/web/*.mjs``, with ``mha_live.css`` and ``view_contract.json``: package data, since a
   kernel's widget, ``mha_lib.live.LiveWidget``, runs the same code) are copied to ``_static/live/``,
   where ``_static/mha_book.js`` imports ``mha_live.mjs``. The Chinese edition's font (Noto Sans SC,
   for readers with no Chinese font) goes to ``_static/vendor/noto-sans-sc/``.

2. Fresh static files. When no page is out of date, Sphinx 7 skips copying ``_static/``, so
   an edited ``_static/mha_book.js`` would stay stale in an incremental build; it is
   re-copied when it differs.

3. One copy of each script per page. sphinx-thebe 0.3 registers its inline configuration
   (``const THEBE_JS_URL = ...``) twice in a Jupyter Book 1.0.4 build, and the second copy
   throws "Identifier 'THEBE_JS_URL' has already been declared" on every page (cases.md
   item 19). Identical scripts are dropped from each page's script list.

4. No icon script. pydata-sphinx-theme 0.16 loads ``scripts/fontawesome.js`` (1.5 MB, 0.54 MB gzip, a
   blocking script in ``<head>`` that held a 1.2 s task on the book's slowest page) only so that a site can add
   icons of its own; its stylesheet already draws every icon the theme uses from the Font Awesome webfonts
   (``.fa-bars:before`` ...). The book adds no icons, so the script's tag is taken out of each written page
   (issue 50: a page's weight before the reader acts).
"""
from __future__ import annotations

import filecmp
import hashlib
import json
import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

# destination under _static/vendor/  <-  source under node_modules/ (a folder copies its files)
VENDOR = {
    "requirejs/require.js": "requirejs/require.js",
    "d3/d3.min.js": "d3/dist/d3.min.js",
    "d3/LICENSE": "d3/LICENSE",
    "jquery/jquery.min.js": "jquery/dist/jquery.min.js",
    "jquery/LICENSE.txt": "jquery/LICENSE.txt",
    "html-manager/": "@jupyter-widgets/html-manager/dist/",
    "mathjax/": "mathjax/es5/",
    "mathjax/LICENSE": "mathjax/LICENSE",
    # onnxruntime-web for the live views (mha_lib/web/runtime_browser.mjs), two builds of the npm dist,
    # each an ES module, the Emscripten loader it imports and its SIMD WebAssembly binary -- the three
    # files a page fetches -- not the JSEP/JSPI/WebGL builds (about 100 MB more):
    # the WebAssembly build, what most readers get ...
    "onnxruntime-web/ort.wasm.min.mjs": "onnxruntime-web/dist/ort.wasm.min.mjs",
    "onnxruntime-web/ort-wasm-simd-threaded.mjs": "onnxruntime-web/dist/ort-wasm-simd-threaded.mjs",
    "onnxruntime-web/ort-wasm-simd-threaded.wasm": "onnxruntime-web/dist/ort-wasm-simd-threaded.wasm",
    # ... and the WebGPU build (its binary also runs the WebAssembly provider), fetched only on a
    # device whose browser gives a GPU adapter, or where the page's address asks for it (?mha-ep=webgpu)
    "onnxruntime-web/ort.webgpu.min.mjs": "onnxruntime-web/dist/ort.webgpu.min.mjs",
    "onnxruntime-web/ort-wasm-simd-threaded.asyncify.mjs": "onnxruntime-web/dist/ort-wasm-simd-threaded.asyncify.mjs",
    "onnxruntime-web/ort-wasm-simd-threaded.asyncify.wasm": "onnxruntime-web/dist/ort-wasm-simd-threaded.asyncify.wasm",
}
# The Chinese edition's font, for readers whose system has no Chinese font: Noto Sans SC (SIL OFL 1.1)
# from @fontsource/noto-sans-sc, regular and bold, split by unicode-range into about 100 WOFF2 files
# each, of which a page downloads only those holding its characters. noto-sans-sc.css is
# written from the package's 400.css and 700.css: the Chinese subsets only, without their WOFF
# (not WOFF2) fallbacks.
CJK_FONT = ("@fontsource/noto-sans-sc/", ("400.css", "700.css"), "noto-sans-sc/")
# The same font as one TrueType file (@expo-google-fonts/noto-sans-sc, SIL OFL 1.1), which the Chinese edition's
# figures are drawn with: matplotlib reads TTF, not WOFF2 (mha_lib.viz.bilingual, tools/execute_notebooks.py), and
# tools/diagrams.py embeds the glyphs its Chinese diagrams use. Not served.
DRAWING_FONT = "@expo-google-fonts/noto-sans-sc/400Regular/NotoSansSC_400Regular.ttf"
# The npm package of onnxruntime-web has no LICENSE file; its files say "Licensed under the MIT
# License", and this is the LICENSE of github.com/microsoft/onnxruntime ({version}: from its
# package.json at build time).
WRITTEN = {
    "onnxruntime-web/LICENSE": ("onnxruntime-web/package.json", """onnxruntime-web {version} (npm): ort.wasm.min.mjs,
ort-wasm-simd-threaded.mjs, ort-wasm-simd-threaded.wasm, ort.webgpu.min.mjs,
ort-wasm-simd-threaded.asyncify.mjs and ort-wasm-simd-threaded.asyncify.wasm, served unchanged.
https://github.com/microsoft/onnxruntime

MIT License

Copyright (c) 2018 - present Microsoft Corporation

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""),
}
# The live views' own files go to _static/live/: their ES modules (mha_lib/web/*.mjs, tested by node
# --test), the stylesheet styles.mjs links and the view contract contract.mjs reads.
LIVE_SOURCE = "mha_lib/web"
LIVE_FILES = ("*.mjs", "*.css", "*.json")
# Not needed by the pages: source maps, the AMD builds, MathJax's other combined components
# and its speech-rule engine (loaded only when a reader turns speech on in MathJax's menu).
SKIP_SUFFIXES = (".map",)
SKIP_NAMES = {"embed-amd.js", "libembed-amd.js"}
SKIP_MATHJAX = {"sre"}


def copy_cjk_font(root: Path, out: Path) -> None:
    """Write ``out``/noto-sans-sc/noto-sans-sc.css and copy the WOFF2 files it names, and the LICENSE."""
    package, sheets, folder = CJK_FONT
    css = []
    for sheet in sheets:
        text = (root / package / sheet).read_text(encoding="utf-8")
        # each rule is "/* noto-sans-sc-<subset>-<weight>-normal */ @font-face {...}"; keep the Chinese
        # subsets (numbered [0] to [119]), not latin, latin-ext, cyrillic or vietnamese: Latin text
        # keeps the page's own fonts even where Noto Sans SC comes first in the stack (mha_book.css)
        for rule in re.split(r"(?=/\* noto-sans-sc-)", text):
            if rule.startswith("/* noto-sans-sc-["):
                css.append(re.sub(r", url\([^)]*\.woff\) format\('woff'\)", "", rule))
    text = "".join(css)
    files = sorted(set(re.findall(r"url\(\./(files/[^)]+\.woff2)\)", text)))
    if not files or ".woff)" in text:
        raise ExtensionError(f"unexpected @font-face rules in {root / package}")
    for name in files:
        (out / folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / package / name, out / folder / name)
    (out / folder / "noto-sans-sc.css").write_text(text, encoding="utf-8")
    shutil.copy2(root / package / "LICENSE", out / folder / "LICENSE")


def _node_modules(app: Sphinx) -> Path:
    return Path(app.srcdir, app.config.mha_vendor_node_modules)


def check_vendor(app: Sphinx) -> None:
    """Fail early, with the fix, when the npm copies are missing."""
    if app.builder.format != "html":
        return
    root = _node_modules(app)
    missing = [src for src in (*VENDOR.values(), CJK_FONT[0], DRAWING_FONT) if not (root / src).exists()]
    if missing:
        raise ExtensionError(
            f"the book's vendored scripts are missing from {root} ({', '.join(missing[:3])}...): "
            "run  npm ci --prefix tests/browser"
        )


def _copy_tree(src: Path, dst: Path, top: bool) -> None:
    for item in src.iterdir():
        if item.name in SKIP_NAMES or item.suffix in SKIP_SUFFIXES:
            continue
        if item.is_dir():
            if item.name in SKIP_MATHJAX:
                continue
            _copy_tree(item, dst / item.name, False)
        elif not (top and src.name == "es5" and item.suffix == ".js" and item.name != "tex-mml-chtml.js"):
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copy2(item, dst / item.name)


def copy_vendor(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = _node_modules(app)
    out = Path(app.outdir, "_static", "vendor")
    for dst, src in VENDOR.items():
        source = root / src
        if src.endswith("/"):
            _copy_tree(source, out / dst, True)
        else:
            (out / dst).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / dst)
    copy_cjk_font(root, out)
    for dst, (package, text) in WRITTEN.items():
        version = json.loads((root / package).read_text(encoding="utf-8"))["version"]
        (out / dst).write_text(text.format(version=version), encoding="utf-8")
    write_runtime_files(out / "onnxruntime-web")
    live = Path(app.outdir, "_static", "live")
    live.mkdir(parents=True, exist_ok=True)
    for pattern in LIVE_FILES:
        for file in sorted(Path(app.srcdir, LIVE_SOURCE).glob(pattern)):
            shutil.copy2(file, live / file.name)


def write_runtime_files(folder: Path) -> None:
    """``folder``/files.json: ``{"files": {name: {"bytes", "sha256"}}}`` for each vendored runtime file. The page
    reads it for the size of the runtime it will fetch, checks the fetched binary against the digest and keeps it
    in the browser's Cache API under it (mha_lib/web/fetch_files.mjs): a new version is another digest."""
    files = {}
    for item in sorted(folder.iterdir()):
        if item.is_file() and item.name != "files.json":
            files[item.name] = {"bytes": item.stat().st_size, "sha256": hashlib.sha256(item.read_bytes()).hexdigest()}
    (folder / "files.json").write_text(json.dumps({"files": files}, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def refresh_static(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source = Path(app.srcdir, "_static")
    if not source.is_dir():
        return
    out = Path(app.outdir, "_static")
    for item in source.rglob("*"):
        if item.is_file():
            dest = out / item.relative_to(source)
            if not dest.exists() or not filecmp.cmp(item, dest, shallow=False):
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(item, dest)


def drop_duplicate_scripts(app: Sphinx, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen = set()
    unique = []
    for js in scripts:
        key = (getattr(js, "filename", None) or "", tuple(sorted(getattr(js, "attributes", {}).items())))
        if key in seen:
            continue
        seen.add(key)
        unique.append(js)
    scripts[:] = unique


ICON_SCRIPT = re.compile(r'[ \t]*<script src="[^"]*_static/scripts/fontawesome\.js(\?[^"]*)?"></script>\n?')


def drop_icon_script(app: Sphinx, exception) -> None:
    """Take pydata-sphinx-theme's ``fontawesome.js`` tag out of every HTML page written (item 4 above)."""
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        if page.is_relative_to(Path(app.outdir, "_static")):
            continue
        text = page.read_text(encoding="utf-8")
        if "scripts/fontawesome.js" in text:
            page.write_text(ICON_SCRIPT.sub("", text), encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.add_config_value("mha_vendor_node_modules", "tests/browser/node_modules", "html")
    app.connect("builder-inited", check_vendor)
    app.connect("build-finished", copy_vendor)
    app.connect("build-finished", refresh_static)
    app.connect("build-finished", drop_icon_script)
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
