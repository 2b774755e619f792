"""The live views on onnxruntime-web's WebGPU execution provider (issue 29, item 2), in Chromium, offline.

The page picks its provider once (``chooseProvider`` in ``runtime_browser.mjs``): WebGPU where the
browser gives a hardware GPU adapter, WebAssembly otherwise, and whatever ``?mha-ep=`` in the
page's address asks for. This machine has no GPU: Chromium with ``--enable-unsafe-webgpu`` gives
only SwiftShader, Vulkan emulated on the CPU, which WebGPU marks as a fallback adapter. So these
tests check the WebGPU *code path* (the WebGPU build of the runtime, its sessions, the same
numbers as mha_lib within each view's tolerance, the fallback to WebAssembly) and the choice of
provider; they say nothing of its speed, and they time nothing.

One page holds one view of each kind that runs a model (sentence, toy, prune, digit, induction,
translate), written with :mod:`mha_lib.live` and served on the built book's origin, as in the
other browser tests.
"""
from __future__ import annotations

import json

import pytest
import torch

from book_site import CHROMIUM, CHROMIUM_ARGS, HTML_ROOT, run_view
from test_live_views import MINILM, MINILM_TOLERANCE, REL, TOYS, _watch, bert, py_attentions  # noqa: F401 (bert: a fixture)

pytestmark = pytest.mark.browser

TOLERANCE = 1e-5  # the toy, digit, induction and translate models ship in fp32 (as in their own tests)
VIEW = "document.querySelector('[data-view=%s]')"
DIGITS = ["ch7-digits-h1", "ch7-digits-h2", "ch7-digits-h4", "ch7-digits-h8"]
INDUCTION = "ch5-induction-l2"
TOY_INPUT = {"ids": [i % 8 for i in range(16)], "types": [0] * 5 + [1] + [0] * 10}
NO_DEVICE = "if (self.GPUAdapter) GPUAdapter.prototype.requestDevice = () => Promise.reject(new Error('no device'));"
TEXT = "The trophy did not fit in the suitcase because it was too big."


@pytest.fixture(scope="module")
def page_html(bert):
    from mha_lib import live, tasks

    manifest = json.loads((HTML_ROOT / "_static" / "models" / "manifest.json").read_text())["models"]
    missing = [m for m in [MINILM, *TOYS, *DIGITS, "ch6-translation"] if m not in manifest]
    assert not missing, f"models/manifest.json lacks {missing}: `make book` exports them"
    pairs = json.loads((HTML_ROOT.parents[1] / "mha_lib" / "data" / "paraphrases.json").read_text())["pairs"][:4]
    batch = tasks.SHIPPED["ch1-h1"].make_task().dataset(1, seed=0)
    images, labels = tasks.SHIPPED["ch7-digits-h4"].make_task().images("test")
    repeat = tasks.SHIPPED[INDUCTION].make_task().dataset(1, seed=3).input_ids[0].tolist()
    induction = live.induction_config(INDUCTION, repeat)
    views = [
        live.live_view("sentence", MINILM, live.sentence_config(bert, "The cat sat on the mat.")),
        live.live_view("toy-compare", TOYS[0], live.toy_compare_config(TOYS, batch)),
        live.live_view("prune", MINILM, live.prune_config(bert, "She caught the last bus.", [p["a"] for p in pairs],
                                                         [p["b"] for p in pairs], [p["negative"] for p in pairs])),
        live.live_view("digit", "ch7-digits-h4", live.digit_config(DIGITS, images[:4], labels[:4], index=1)),
        live.live_view("induction", induction["models"][-1], induction),
        live.live_view("translate", "ch6-translation", live.translation_config("ch6-translation", [14, 3, 18, 19])),
    ]
    body = "".join(f"<section>{v.html}</section>" for v in views)
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><title>live views on WebGPU</title>'
            '<script src="../_static/mha_book.js"></script>'
            "<style>body{font-family:sans-serif;margin:0} main{max-width:720px;margin:0 auto;padding:0 12px}</style>"
            f"</head><body><main>{body}</main></body></html>")


@pytest.fixture(scope="module")
def webgpu_browser(chromium_browser):
    """Chromium with WebGPU on (a second browser of the same Playwright): here its one adapter is SwiftShader."""
    args = [a for a in CHROMIUM_ARGS if a != "--disable-gpu"] + ["--enable-unsafe-webgpu"]
    browser = chromium_browser.browser_type.launch(executable_path=CHROMIUM, args=args)
    yield browser
    browser.close()


def _open(browser, book_url, html, query=""):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    page = context.new_page()
    url = book_url + REL + query
    visit = _watch(page, book_url, {url: html})
    page.goto(url, wait_until="load")
    page.wait_for_function("[...document.querySelectorAll('.mha-live-view')].every(e => e.mhaLive)", timeout=30_000)
    return context, page, visit



def _runtime_files(visit):
    """The runtime builds' files fetched (not the licence, nor files.json: the sizes and digests of all of them)."""
    return sorted({u.rsplit("/", 1)[-1] for m, u in visit.requests
                   if m == "GET" and "/onnxruntime-web/" in u and not u.endswith(("LICENSE", "files.json"))})


def _status(page, view):
    return page.evaluate(f"{VIEW % view}.querySelector('.mha-live-status').textContent")


def _diff(a, b):
    return (torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)).abs().max().item()


@pytest.mark.parametrize("where, query, want", [
    ("no GPU (--disable-gpu)", "", "WebAssembly"),
    ("a software adapter only", "", "WebAssembly"),
    ("the address asks for WebAssembly", "?mha-ep=wasm", "WebAssembly"),
    ("the address asks for WebGPU", "?mha-ep=webgpu", "WebGPU"),
])
def test_the_provider_is_picked_per_device_and_the_address_can_ask(chromium_browser, webgpu_browser, book_url,
                                                                    page_html, where, query, want):
    browser = chromium_browser if where.startswith("no GPU") else webgpu_browser
    context, page, visit = _open(browser, book_url, page_html, query)
    try:
        r = run_view(page, "toy-compare", TOY_INPUT)
        assert r["source"] == "browser"
        assert f"in your browser ({want})" in _status(page, "toy-compare")
        build = ({"ort.webgpu.min.mjs", "ort-wasm-simd-threaded.asyncify.mjs", "ort-wasm-simd-threaded.asyncify.wasm"}
                 if want == "WebGPU" else
                 {"ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm"})
        assert set(_runtime_files(visit)) == build, _runtime_files(visit)  # one build fetched, not both
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_on_webgpu_every_view_equals_mha_lib(webgpu_browser, book_url, page_html, bert):
    from mha_lib import live, tasks

    context, page, visit = _open(webgpu_browser, book_url, page_html, "?mha-ep=webgpu")
    try:
        # MiniLM's float16 weights need WebGPU's shader-f16, which SwiftShader lacks: its first run fails there,
        # and it runs on WebAssembly (with a warning, no error); on a GPU with shader-f16 it stays on WebGPU
        f16 = page.evaluate("async () => (await navigator.gpu.requestAdapter()).features.has('shader-f16')")
        r = run_view(page, "sentence", TEXT)
        tokens, att = py_attentions(bert, TEXT)
        assert r["tokens"] == tokens
        assert _diff(r["attentions"], att) <= MINILM_TOLERANCE
        assert f"in your browser ({'WebGPU' if f16 else 'WebAssembly'})" in _status(page, "sentence")
        mask = [[1] * 12 for _ in range(6)]
        mask[0][3] = mask[2][0] = mask[5][11] = 0
        r = run_view(page, "prune", {"mask": mask})
        _, att = py_attentions(bert, "She caught the last bus.", torch.tensor(mask, dtype=torch.float32))
        assert _diff(r["attentions"], att) <= MINILM_TOLERANCE
        # the toy models: maps and predictions
        task = tasks.SHIPPED["ch1-h1"].make_task()
        batch = task.dataset(1, seed=11)
        r = run_view(page, "toy-compare", {"ids": batch.input_ids[0].tolist(), "types": batch.token_type_ids[0].tolist()})
        for name in TOYS:
            with torch.no_grad():
                logits, att = tasks.logits_and_attentions(tasks.load_trained(name), batch)
            assert _diff(r["models"][name]["attentions"], torch.stack([a[0] for a in att])) <= TOLERANCE, name
            assert r["models"][name]["predictions"] == logits[0].argmax(-1).tolist(), name
        # the ViTs on a drawn stroke
        pixels = [1.0 if (i % 8) in (3, 4) else 0.0 for i in range(64)]
        r = run_view(page, "digit", pixels)
        image = torch.tensor(pixels).view(8, 8)
        for name in DIGITS:
            want = live.digit_readings(tasks.load_trained(name), image)
            assert r["models"][name]["prediction"] == want["prediction"], name
            for key in ("probabilities", "cls", "rollout"):
                assert _diff(r["models"][name][key], want[key]) <= TOLERANCE, (name, key)
        # an induction checkpoint with heads off
        ids, mask = list(range(12)) * 2, [[1, 0, 1, 1], [1, 1, 0, 1]]
        r = run_view(page, "induction", {"ids": ids, "checkpoint": 11, "mask": mask})
        spec = tasks.SHIPPED[INDUCTION]
        want = live.induction_readings(tasks.load_trained(INDUCTION, step=spec.checkpoints[11]), ids, mask)
        assert r["predictions"] == want["predictions"]
        assert _diff(r["attentions"], want["attentions"]) <= TOLERANCE
        # greedy decoding, one decoder run per step
        words = [5, 9, 0, 12, 3, 20]
        r = run_view(page, "translate", {"words": words})
        spec = tasks.SHIPPED["ch6-translation"]
        want = live.translation_readings(tasks.load_trained(spec), spec.make_task(), words)
        assert r["tokens"] == want["tokens"]
        assert _diff(r["cross"], want["cross"]) <= TOLERANCE
        for view in ("toy-compare", "digit", "induction", "translate"):  # fp32 models: they ran on WebGPU
            assert "in your browser (WebGPU)" in _status(page, view), view
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_where_webgpu_gives_no_device_the_page_runs_on_webassembly(webgpu_browser, book_url, page_html):
    """An adapter whose device is refused (probed on the page before any runtime loads): WebAssembly,
    even where the address asks for WebGPU; only the WebAssembly build is fetched."""
    context = webgpu_browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    context.add_init_script(NO_DEVICE)
    page = context.new_page()
    url = book_url + REL + "?mha-ep=webgpu"
    visit = _watch(page, book_url, {url: page_html})
    try:
        page.goto(url, wait_until="load")
        page.wait_for_function("[...document.querySelectorAll('.mha-live-view')].every(e => e.mhaLive)", timeout=30_000)
        r = run_view(page, "toy-compare", TOY_INPUT)
        assert r["source"] == "browser"
        assert "in your browser (WebAssembly)" in _status(page, "toy-compare")
        assert _runtime_files(visit) == ["ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm", "ort.wasm.min.mjs"]
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_where_webgpu_cannot_make_a_session_the_page_runs_on_webassembly(webgpu_browser, book_url, page_html):
    """The page's probe finds a device, but the runtime's worker is refused one (its module, which the
    worker loads too, is served with requestDevice broken): the model, and every later one, loads on the
    WebAssembly build, in a worker of its own; the views run and say on what."""
    context = webgpu_browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    page = context.new_page()
    url = book_url + REL + "?mha-ep=webgpu"
    visit = _watch(page, book_url, {url: page_html})

    def runtime_without_device(route):  # this route comes first: it records the request itself
        visit.requests.append((route.request.method, route.request.url[len(book_url):]))
        response = route.fetch()
        route.fulfill(response=response, body=NO_DEVICE + "\n" + response.text())

    page.route("**/ort.webgpu.min.mjs", runtime_without_device)
    try:
        page.goto(url, wait_until="load")
        page.wait_for_function("[...document.querySelectorAll('.mha-live-view')].every(e => e.mhaLive)", timeout=30_000)
        r = run_view(page, "toy-compare", TOY_INPUT)
        assert r["source"] == "browser" and len(r["models"]) == len(TOYS)
        assert "in your browser (WebAssembly)" in _status(page, "toy-compare")
        r = run_view(page, "digit", [0.5] * 64)  # a later view's models load on WebAssembly at once
        assert "in your browser (WebAssembly)" in _status(page, "digit")
        assert {"ort.webgpu.min.mjs", "ort.wasm.min.mjs", "ort-wasm-simd-threaded.wasm"} <= set(_runtime_files(visit))
        assert visit.off_site == []
    finally:
        context.close()
