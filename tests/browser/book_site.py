"""Where the built book is, and what the browser tests need to know about it.

Shared by conftest.py (fixtures) and test_book_in_browser.py. A module with its own name,
because tests/conftest.py and tests/browser/conftest.py would both import as ``conftest``.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[2]
BROWSER_DIR = Path(__file__).resolve().parent
HTML_ROOT = Path(os.environ.get("MHA_BOOK_HTML", ROOT / "_build" / "html")).resolve()
SCREENSHOTS = HTML_ROOT.parent / "screenshots"
# Screenshots are for a person to look at: the tests take the visible part of each page (0.1 s); a whole chapter
# page (25,000-34,000 px tall) takes 2-4 s, about 100 s of every `make test`, so it is taken when asked for:
# MHA_FULL_SCREENSHOTS=1 make test-browser.
FULL_PAGE_SCREENSHOTS = os.environ.get("MHA_FULL_SCREENSHOTS") == "1"
NODE_MODULES = BROWSER_DIR / "node_modules"
CHROMIUM = os.environ.get("MHA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]

# CDN URL pattern -> file under node_modules (\1 is the path inside the package).
CDN_COPIES = [
    (r"https://cdnjs\.cloudflare\.com/ajax/libs/require\.js/2\.[\d.]+/require(?:\.min)?\.js", "requirejs/require.js"),
    (r"https://cdn\.jsdelivr\.net/npm/requirejs@2[\d.]*/require(?:\.min)?\.js", "requirejs/require.js"),
    (r"https://(?:cdn\.jsdelivr\.net/npm|unpkg\.com)/@jupyter-widgets/html-manager@\^?1[^/]*/dist/([\w.-]+)",
     r"@jupyter-widgets/html-manager/dist/\1"),
    (r"https://cdn\.jsdelivr\.net/npm/mathjax@3[^/]*/es5/([\w./-]+)", r"mathjax/es5/\1"),
    (r"https://cdnjs\.cloudflare\.com/ajax/libs/d3/5\.[\d.]+/d3(?:\.min)?\.js", "d3/dist/d3.min.js"),
    # bertviz asks for jquery 2.0.0, which npm does not have; 2.2.4 stands in for it.
    (r"https://cdnjs\.cloudflare\.com/ajax/libs/jquery/2\.[\d.]+/jquery(?:\.min)?\.js", "jquery/dist/jquery.min.js"),
]
INTEGRITY = re.compile(rb'\s+integrity="[^"]*"')


def book_pages(edition: str = "en") -> List[str]:
    """Every HTML page of one edition of the built book, relative to the site's root (no search/index helpers).

    Args:
        edition: "en", the English book at the root, or "zh", the Chinese edition under zh/
            (tests/browser/test_zh_edition.py checks that one).
    """
    if not (HTML_ROOT / "index.html").exists():
        return []
    skip = {"search.html", "genindex.html", "py-modindex.html"}
    pages = []
    for p in HTML_ROOT.rglob("*.html"):
        parts = p.relative_to(HTML_ROOT).parts
        if edition == "zh":
            keep = parts[0] == "zh" and not parts[1].startswith("_")
        else:
            keep = parts[0] != "zh" and not parts[0].startswith("_")
        if keep and p.name not in skip:
            pages.append(str(p.relative_to(HTML_ROOT)))
    return sorted(pages)


# `make test` sets MHA_REQUIRE_BOOK=1: there a missing book, Chromium or npm copy fails the test. A bare
# `pytest` on a clone without a built book skips the browser tests instead, saying what to run.
REQUIRE_BOOK = os.environ.get("MHA_REQUIRE_BOOK", "") not in ("", "0")


def missing(what: str) -> None:
    """Fail (under ``make test``) or skip (a bare ``pytest``) a browser test that lacks ``what``."""
    (pytest.fail if REQUIRE_BOOK else pytest.skip)(what)


def require_book() -> None:
    if not (HTML_ROOT / "index.html").exists():
        missing(f"no built book at {HTML_ROOT}: run `make book` first (the browser tests reuse it)")
    if not NODE_MODULES.is_dir():
        missing(f"{NODE_MODULES} is missing: run `make book` (it runs `npm ci --prefix tests/browser`)")
    if not Path(CHROMIUM).exists():
        missing(f"Chromium not found at {CHROMIUM}: `make browser-deps` installs Debian's chromium")


def wait_for_live_views(page, timeout: int = 30_000) -> None:
    """Wait until every live view of the page has mounted and drawn its first result."""
    page.wait_for_function("[...document.querySelectorAll('.mha-live-view')].every(e => e.mhaLive && e.mhaLive.lastResult)",
                           timeout=timeout)


def settle_math(page) -> None:
    """Wait until MathJax (when the page has it) has typeset the page."""
    page.wait_for_function(
        "() => !window.MathJax || !MathJax.startup || !MathJax.startup.promise || "
        "MathJax.startup.promise.then(() => true)", timeout=20_000)
    page.wait_for_timeout(300)


MAIN_THREAD_TASK_MS = 50  # issue 29: no main-thread task over 50 ms of CPU while a model loads or runs


def _cpu_busy(seconds: float = 1.0) -> float:
    """The share (0-1) of the machine's CPU time spent busy over the next ``seconds`` (Linux /proc/stat; 0.0
    where there is none)."""
    def read():
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        return sum(ticks), ticks[3] + ticks[4]  # all, idle + iowait

    try:
        total0, idle0 = read()
        time.sleep(seconds)
        total1, idle1 = read()
    except OSError:
        return 0.0
    return 1.0 - (idle1 - idle0) / max(total1 - total0, 1)


def wait_for_a_quieter_machine(busy_below: float = 0.5, max_wait_s: float = 120.0) -> float:
    """Wait until the machine's CPUs are less than ``busy_below`` busy over a second (on two cores: together less
    than one core's worth), or ``max_wait_s`` seconds have passed: the share busy last measured."""
    deadline = time.monotonic() + max_wait_s
    while True:
        busy = _cpu_busy()
        if busy < busy_below or time.monotonic() > deadline:
            return busy


def assert_a_quiet_visit_keeps_the_task_bound(visit, what: str = "") -> None:
    """The live views' main-thread bound: ``visit()`` makes one visit and returns its longest main-thread task
    (ms of CPU, tools/chromium_trace.py). A machine busy with other tests slows a visit (the same visit measured
    19-44 ms quiet and 51-86 ms while the other test worker's sweeps or browser filled the cores: the CPU time of a
    frame's canvas painting grows with contention), so up to four visits are made, stopping at the first within the
    bound, and the bound must hold for the quietest. The first visit does not wait (waiting before every visit kept a
    test worker idle for up to two minutes a test); each retry starts once the machine is mostly idle (less than half
    its CPU busy over a second: wait_for_a_quieter_machine, at most two minutes)."""
    longest, busy = [], []
    for attempt in range(4):
        busy.append(round(wait_for_a_quieter_machine(), 2) if attempt else "not waited")
        longest.append(visit())
        if longest[-1] <= MAIN_THREAD_TASK_MS:
            break
    assert min(longest) <= MAIN_THREAD_TASK_MS, (
        f"{what}the longest main-thread task of each visit, ms of CPU: {longest} (the machine's CPUs busy before "
        f"each: {busy})")


# A view's result carries its maps as nested arrays ([layer][head][query][key]): 4.7 million numbers for a
# 256-token MiniLM sentence, which Playwright's JSON path took tens of seconds to carry (and Python to rebuild as
# lists). PACK_MAPS, a JavaScript function of a result, carries every "attentions" array instead as float32 bytes
# (base64, with its shape; the maps are float32 outputs, so nothing is lost); unpack_maps rebuilds them here as
# numpy arrays. page.evaluate(f"async (x) => ({PACK_MAPS})(await view.mhaLive.run(x))", arg) is the pattern.
PACK_MAPS = """(value) => {
  const pack = (maps) => {
    const shape = [];
    for (let x = maps; Array.isArray(x); x = x[0]) shape.push(x.length);
    const bytes = new Uint8Array(Float32Array.from(maps.flat(Infinity)).buffer);
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return { __float32__: btoa(text), shape };
  };
  const walk = (v) => {
    if (Array.isArray(v)) return v.map(walk);
    if (!v || typeof v !== "object") return v;
    return Object.fromEntries(Object.entries(v).map(([k, x]) =>
      [k, k === "attentions" && Array.isArray(x) && x.length ? pack(x) : walk(x)]));
  };
  return walk(value);
}"""


def run_view(page, view: str, arg=None, *, packed: bool = False):
    """``mhaLive.run(arg)`` of the live view whose ``data-view`` is ``view`` (or of the element the JavaScript
    expression ``view`` selects, when it starts with ``document``): its result. ``packed=True`` brings the maps
    across as float32 bytes (PACK_MAPS) and returns them as numpy arrays (unpack_maps); the default returns the
    result as the page's JSON."""
    element = view if view.startswith("document") else f"document.querySelector('[data-view={view}]')"
    if not packed:
        return page.evaluate(f"async (x) => await {element}.mhaLive.run(x)", arg)
    return unpack_maps(page.evaluate(f"async (x) => ({PACK_MAPS})(await {element}.mhaLive.run(x))", arg))


def unpack_maps(value):
    """``value`` from PACK_MAPS with each packed map array as a float32 numpy array of its shape."""
    import base64

    import numpy as np

    if isinstance(value, list):
        return [unpack_maps(v) for v in value]
    if isinstance(value, dict):
        if "__float32__" in value:
            return np.frombuffer(base64.b64decode(value["__float32__"]), np.float32).reshape(value["shape"])
        return {k: unpack_maps(v) for k, v in value.items()}
    return value
