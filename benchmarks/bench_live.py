"""How fast the live views are in a real browser, and how much each page weighs (issue 17).

Headless Chromium (Debian's ``/usr/bin/chromium``) on the built book (``make book``), served by a
local ``http.server``; onnxruntime-web at one thread, as readers get it from a static host (no
cross-origin-isolation headers). A page of our own with one view of each kind is served on the
book's origin, so it loads the book's script, ``_static/live/mha_live.mjs``, the vendored runtime
and the exported models, exactly as a chapter does.

Measured (medians over the runs; the view's own ``mhaLive.timings``, from ``run()`` to the last
canvas drawn, the debounce delay excluded):

* first model load (runtime + MiniLM + session), a fresh browser context: target <= 5 s;
* MiniLM, about 16 tokens, a new sentence each run, one 12-head layer drawn: target <= 100 ms
  (it includes fetching, from the local server, the word vectors of words no earlier run had);
* the same sentences with all six layers drawn (their word vectors already fetched): target <= 300 ms;
* a head toggle in the prune view (every text's embedding, fidelity, paraphrase ranking, the
  maps): target <= 1 s;
* the reference, in the same run: mha_lib's forward pass in PyTorch on one thread for the same
  sentences, so the browser is also reported as a ratio against it;
* every page of the book before any interaction: bytes transferred, and their gzip size (what a
  compressing server would send): target <= 3 MB gzip;
* the longest main-thread task of each phase (first load, one layer, six layers, toggles, the toy
  view): its wall time (the page's ``longtask`` observer, which also counts time the operating system
  gave other processes) and its CPU time (Chromium's trace, tools/chromium_trace.py); target <= 50 ms.
  onnxruntime-web runs in its Web Worker (``env.wasm.proxy``), so the model's compile and runs are not
  on the page's thread.
* both execution providers (issue 29, item 2): the views' first run and warm runs with the page's
  address asking for WebAssembly (``?mha-ep=wasm``) and for WebGPU (``?mha-ep=webgpu``, Chromium
  with ``--enable-unsafe-webgpu``), and the provider each view ran on (its status line). This
  machine has no GPU: its only WebGPU adapter is SwiftShader, Vulkan emulated on the CPU, so the
  WebGPU column measures the WebGPU code path on a CPU and says nothing of a GPU; a reader's page
  picks WebGPU only on a hardware adapter. MiniLM's float16 weights need shader-f16, which
  SwiftShader lacks: there the sentence view falls back to WebAssembly, and the table says so.

* chapters 5, 6 and 7's views (on a second page; the first of them also loads the runtime): the first run (the models downloaded, compiled and
  run: the twelve induction checkpoints, the encoder-decoder, the four ViTs), a warm run (median: the
  induction view at a new checkpoint and mask, a greedy translation of a new sentence, a new drawing read
  by four models) and the longest main-thread task of each.

Run:  python benchmarks/bench_live.py [--runs N]   (or `make bench`). Prints a table; asserts
nothing. These are CPU figures of this machine's Chromium; a reader's laptop or phone differs.
"""
from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import statistics
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from mha_lib import live  # noqa: E402
from mha_lib.pretrained import load_bert  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from chromium_trace import main_thread_tasks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
CHROMIUM = os.environ.get("MHA_CHROMIUM", "/usr/bin/chromium")
PAGE = "chapters/_bench_live.html"
TARGETS = {"load_s": 5.0, "one_layer_ms": 100.0, "six_layers_ms": 300.0, "toggle_ms": 1000.0, "page_mb_gzip": 3.0,
           "task_ms": 50.0}
LONG_TASKS = """window.__longTasks = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longTasks.push(e.duration); })
  .observe({ type: "longtask", buffered: true });"""
SENTENCES = [  # 14-18 tokens with [CLS] and [SEP]; a new text at every run, as a reader typing gives
    "The animal didn't cross the street because it was too tired.",
    "A small dog barked at the mailman until he finally walked away.",
    "She read the letter twice before she put it back in the drawer.",
    "The committee approved the plan after a long and heated debate.",
    "My brother fixed the old bicycle that we found in the garage.",
    "The storm knocked out the power for most of the town last night.",
    "He forgot his umbrella, so he waited for the rain to stop.",
    "The children built a castle of sand near the edge of the water.",
    "Our teacher explained the problem again because nobody understood it.",
    "The museum opens early on Sundays and closes late on Fridays.",
    "They painted the kitchen yellow and the hallway a pale blue.",
    "The pilot told the passengers that the flight would land soon.",
]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(directory: Path) -> tuple:
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def _test_page(bert) -> str:
    from mha_lib import tasks

    pairs = json.loads((ROOT / "mha_lib" / "data" / "paraphrases.json").read_text(encoding="utf-8"))["pairs"][:8]
    toys = ["ch1-h1", "ch1-h2", "ch1-h4", "ch1-h8"]
    views = [
        live.live_view("sentence", "all-MiniLM-L6-v2", live.sentence_config(bert, SENTENCES[0])),
        live.live_view("toy-compare", toys[0], live.toy_compare_config(toys, tasks.SHIPPED["ch1-h1"].make_task().dataset(1, seed=0))),
        live.live_view("prune", "all-MiniLM-L6-v2", live.prune_config(
            bert, "She caught the last bus and did not have to walk home.",
            [p["a"] for p in pairs], [p["b"] for p in pairs], [p["negative"] for p in pairs])),
    ]
    body = "".join(f"<section>{v.html}</section>" for v in views)
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>bench</title>'
            '<script src="../_static/mha_book.js"></script></head>'
            f"<body><main style='max-width:720px'>{body}</main></body></html>")


def _chapter_page() -> str:
    """Chapters 5, 6 and 7's views (the induction checkpoints, the encoder-decoder, the ViTs) on one page."""
    from mha_lib import tasks

    repeat = tasks.SHIPPED["ch5-induction-l2"].make_task().dataset(1, seed=3).input_ids[0].tolist()
    induction = live.induction_config("ch5-induction-l2", repeat)
    images, labels = tasks.SHIPPED["ch7-digits-h4"].make_task().images("test")
    digits = [f"ch7-digits-h{h}" for h in (1, 2, 4, 8)]
    views = [live.live_view("induction", induction["models"][-1], induction),
             live.live_view("translate", "ch6-translation", live.translation_config("ch6-translation", [14, 3, 18, 19])),
             live.live_view("digit", "ch7-digits-h4", live.digit_config(digits, images[:10], labels[:10]))]
    body = "".join(f"<section>{v.html}</section>" for v in views)
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>bench</title>'
            '<script src="../_static/mha_book.js"></script></head>'
            f"<body><main style='max-width:720px'>{body}</main></body></html>")


def _chapter_views(browser, base: str, runs: int) -> list:
    """[(view, first run ms, warm runs ms, longest task (wall, CPU))] for chapters 5-7's views, one fresh page."""
    import random

    context, page = _open(browser, base, _chapter_page())
    rng = random.Random(0)
    inputs = {
        "induction": lambda i: {"checkpoint": i % 12, "mask": [[int((i + h) % 5 != 0) for h in range(4)] for _ in range(2)]},
        "translate": lambda i: {"words": [rng.randrange(24) for _ in range(4 + i % 9)]},
        "digit": lambda i: [float(rng.random() < 0.3) for _ in range(64)],
    }
    rows = []
    for view, make in inputs.items():
        def first(view=view, make=make):
            t = _run(page, view, make(0))
            return t["load_ms"] + t["run_ms"]

        first_ms, task_first = _phase(browser, page, first)
        warm, task_warm = _phase(browser, page, lambda view=view, make=make: [
            _run(page, view, make(i))["run_ms"] for i in range(1, runs + 1)])
        rows.append((view, first_ms, warm, max(task_first, task_warm, key=lambda x: x[1])))
    context.close()
    return rows


def _open(browser, base: str, html: str, query: str = ""):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    page = context.new_page()
    page.add_init_script(LONG_TASKS)
    page.route(base + PAGE + query, lambda r: r.fulfill(status=200, body=html, content_type="text/html"))
    page.goto(base + PAGE + query, wait_until="load")
    page.wait_for_function("[...document.querySelectorAll('.mha-live-view')].every(e => e.mhaLive)", timeout=30_000)
    return context, page


def _run(page, view: str, arg) -> dict:
    return page.evaluate(
        "async ([v, x]) => { const e = document.querySelector(`[data-view=${v}]`); await e.mhaLive.run(x);"
        " return e.mhaLive.timings; }", [view, arg])


def _phase(browser, page, work):
    """Run ``work()``; return its result and the longest main-thread task meanwhile: (wall ms, CPU ms)."""
    page.evaluate("window.__longTasks = []")
    browser.start_tracing(page=page, categories=["toplevel"])
    try:
        result = work()
    finally:
        trace = browser.stop_tracing()
    wall = max(page.evaluate("window.__longTasks"), default=0.0)  # only tasks over 50 ms are reported
    return result, (wall, main_thread_tasks(trace)[0])


def _providers(pw, base: str, bert, runs: int) -> list:
    """[(asked, view, ran on, first run ms, warm runs ms)]: every model-running view, a fresh browser per provider."""
    import random

    rng = random.Random(1)
    toy = {"ids": [i % 8 for i in range(16)], "types": [0] * 5 + [1] + [0] * 10}
    inputs = {
        "sentence": (_test_page(bert), lambda i: SENTENCES[i % len(SENTENCES)] + " " * (i // len(SENTENCES))),
        "toy-compare": (None, lambda i: {"ids": toy["ids"][i:] + toy["ids"][:i], "types": toy["types"]}),
        "induction": (_chapter_page(), lambda i: {"checkpoint": i % 12, "mask": [[1, 1, 1, 1], [1, 1, 1, 1]]}),
        "translate": (None, lambda i: {"words": [rng.randrange(24) for _ in range(4 + i % 9)]}),
        "digit": (None, lambda i: [float(rng.random() < 0.3) for _ in range(64)]),
    }
    rows = []
    for ep in ("wasm", "webgpu"):
        args = ["--no-sandbox", "--headless"] + (["--enable-unsafe-webgpu"] if ep == "webgpu" else [])
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=args)
        page = None
        for view, (html, make) in inputs.items():
            if html is not None:  # a new page: its runtime and models load afresh
                if page is not None:
                    page.context.close()
                _, page = _open(browser, base, html, f"?mha-ep={ep}")
            t = _run(page, view, make(0))
            first_ms = t["load_ms"] + t["run_ms"]
            warm = [_run(page, view, make(i))["run_ms"] for i in range(1, runs + 1)]
            status = page.evaluate(f"document.querySelector('[data-view={view}] .mha-live-status').textContent")
            ran = "WebGPU" if "(WebGPU)" in status else "WebAssembly" if "(WebAssembly)" in status else "?"
            rows.append((ep, view, ran, first_ms, warm))
        page.context.close()
        browser.close()
    return rows


def _torch_ms(bert, sentences) -> list:
    out = []
    for s in sentences:
        t0 = time.perf_counter()
        with torch.no_grad():
            bert.encode_text([s], output_attentions=True)
        out.append(1e3 * (time.perf_counter() - t0))
    return out


def _page_weights(browser, base: str) -> list:
    pages = sorted(str(p.relative_to(HTML)) for p in HTML.rglob("*.html")
                   if not p.relative_to(HTML).parts[0].startswith("_")
                   and p.name not in {"search.html", "genindex.html", "py-modindex.html"})
    rows = []
    for rel in pages:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
        page = context.new_page()
        bodies = []
        page.on("requestfinished", bodies.append)
        page.goto(base + rel, wait_until="load")
        page.wait_for_timeout(1500)  # late scripts (MathJax fonts, widget manager)
        raw = packed = 0
        for req in bodies:
            resp = req.response()
            if resp is None or not req.url.startswith(base):
                continue
            try:
                body = resp.body()
            except Exception:  # a redirect or an aborted request has no body
                continue
            raw += len(body)
            packed += len(gzip.compress(body, 6))
        rows.append((rel, raw, packed))
        context.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=len(SENTENCES), help="sentences timed per setting")
    ap.add_argument("--skip-pages", action="store_true", help="skip the page-weight table")
    ap.add_argument("--skip-providers", action="store_true", help="skip the WebAssembly/WebGPU table")
    args = ap.parse_args()
    if not (HTML / "_static" / "models" / "manifest.json").exists():
        print(f"no built book with models at {HTML}: run `make book` first")
        return 1
    from playwright.sync_api import sync_playwright

    torch.set_num_threads(1)
    bert, _ = load_bert(verbose=False)
    bert.eval()
    html = _test_page(bert)
    server, base = _serve(HTML)
    sentences = (SENTENCES * 3)[1:args.runs + 1]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless"])
        context, page = _open(browser, base, html)
        tasks = {}
        first, tasks["first load and run"] = _phase(browser, page, lambda: _run(
            page, "sentence", "Warm up: the first run loads the model."))
        one, tasks["one layer"] = _phase(browser, page, lambda: [_run(page, "sentence", s)["run_ms"] for s in sentences])

        def all_layers():
            page.evaluate("() => { const c = document.querySelector('[data-view=sentence] input[type=checkbox]');"
                          " c.checked = true; c.dispatchEvent(new Event('change')); }")
            return [_run(page, "sentence", s + " ")["run_ms"] for s in sentences]

        six, tasks["six layers"] = _phase(browser, page, all_layers)
        mask = [[1] * 12 for _ in range(6)]

        def toggle_heads():
            out = []
            for i in range(args.runs):
                mask[i % 6][(5 * i) % 12] ^= 1
                out.append(_run(page, "prune", {"mask": mask})["run_ms"])
            return out

        toggles, tasks["head toggles"] = _phase(browser, page, toggle_heads)
        start = page.evaluate("document.querySelector('[data-view=toy-compare]').mhaLive.lastResult")
        ids, types = start["ids"], start["types"]  # rotated: new sequences of the task's length and vocabulary
        _, tasks["toy view (four models)"] = _phase(browser, page, lambda: [_run(
            page, "toy-compare", {"ids": ids[i:] + ids[:i], "types": types[i:] + types[:i]}) for i in range(1, args.runs + 1)])
        context.close()
        chapters = _chapter_views(browser, base, args.runs)
        rows = [] if args.skip_pages else _page_weights(browser, base)
        browser.close()
        providers = [] if args.skip_providers else _providers(pw, base, bert, args.runs)
    server.shutdown()
    ref = _torch_ms(bert, sentences)
    med = statistics.median
    print(f"Chromium {CHROMIUM}, onnxruntime-web at one thread; {len(sentences)} runs each; "
          f"torch {torch.__version__} at one thread as the reference")
    print(f"{'measure':<46} {'median':>10} {'min-max':>17} {'target':>9}")
    print(f"{'first model load (runtime + MiniLM), s':<46} {first['load_ms'] / 1e3:>10.2f} {'':>17} "
          f"{TARGETS['load_s']:>9.1f}")
    for name, xs, target in [("run() -> one 12-head layer drawn, ms", one, TARGETS["one_layer_ms"]),
                             ("run() -> all six layers drawn, ms", six, TARGETS["six_layers_ms"]),
                             ("head toggle -> fidelity, ranking, maps, ms", toggles, TARGETS["toggle_ms"]),
                             ("reference: mha_lib forward in torch, ms", ref, float("nan"))]:
        print(f"{name:<46} {med(xs):>10.1f} {min(xs):>8.1f}-{max(xs):<8.1f} {target:>9.0f}")
    print(f"browser (one layer) / torch forward: {med(one) / med(ref):.2f}x")
    print(f"\n{'longest main-thread task, ms':<46} {'wall':>10} {'CPU':>10} {'target':>9}")
    for name, (wall, cpu) in tasks.items():
        print(f"{name:<46} {(f'{wall:.0f}' if wall else '< 50'):>10} {cpu:>10.1f} {TARGETS['task_ms']:>9.0f}")
    print(f"\n{'chapters 5-7 (one page, fresh)':<22} {'first run ms':>13} {'warm median ms':>15} {'min-max':>15} "
          f"{'longest task wall/CPU ms':>25}")
    for view, first_ms, warm, (wall, cpu) in chapters:
        print(f"{view:<22} {first_ms:>13.0f} {med(warm):>15.1f} {min(warm):>7.1f}-{max(warm):<7.1f} "
              f"{(f'{wall:.0f}' if wall else '< 50'):>14} / {cpu:>6.1f}")
    if providers:
        print(f"\n{'execution provider asked (?mha-ep=)':<36} {'view':<12} {'ran on':<12} {'first run ms':>13} "
              f"{'warm median ms':>15} {'warm / wasm':>12}")
        wasm = {v: med(w) for ep, v, _, _, w in providers if ep == "wasm"}
        for ep, view, ran, first_ms, warm in providers:
            print(f"{ep + (' (SwiftShader: a CPU)' if ep == 'webgpu' else ''):<36} {view:<12} {ran:<12} {first_ms:>13.0f} "
                  f"{med(warm):>15.1f} {med(warm) / wasm[view]:>11.2f}x")
    if rows:
        print(f"\n{'page (before any interaction)':<44} {'bytes':>12} {'gzip':>12}")
        for rel, raw, packed in rows:
            print(f"{rel:<44} {raw:>12,d} {packed:>12,d}")
        worst = max(rows, key=lambda r: r[2])
        print(f"heaviest page: {worst[0]}, {worst[2] / 1e6:.2f} MB gzip (target <= {TARGETS['page_mb_gzip']} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
