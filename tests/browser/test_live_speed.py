"""The live views answer at once and weigh little (issue 49), in Chromium, offline.

Each view of :func:`mha_lib.live.speed_views` alone on a page of our own on the built book's origin, driven by
``mha_lib/web/speed.mjs`` (the code benchmarks/bench_live.py and the reader's speed table run). Checked:

* no main-thread task over 50 ms of CPU while any view loads, runs and draws (Chromium's trace), for every view;
* MiniLM's first maps come after the runtime, the embeddings and the first layer's maps file only (on a throttled
  link: the layers' files arrive after them, and at most 10 MB gzip had arrived), and equal mha_lib within 0.01;
* one frame per layer: a new sentence's maps arrive layer by layer, and a head toggled in layer 4 recomputes
  layers 4 and 5 only (the page's recorded session.run calls);
* a second visit reads the models, the runtime's binary, the word vectors, the vocabulary and the manifest from
  the browser's Cache API, with all of them refused by the network;
* ``?mha-debug=1`` shows each update's parts under the view.

Times themselves are never asserted (a shared machine), only what work was done and when.
"""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest
import torch

from test_live_views import MINILM_TOLERANCE, _open, _require_models, bert, py_attentions  # noqa: F401 (fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from chromium_trace import main_thread_tasks  # noqa: E402
from book_site import assert_a_quiet_visit_keeps_the_task_bound  # noqa: E402

pytestmark = pytest.mark.browser

FIRST_MAP_MB_GZIP = 10.0
SPEED = "const m = await import(new URL('../_static/live/speed.mjs', location.href).href);"
VIEW = "document.querySelector('.mha-live-view')"


@pytest.fixture(scope="module")
def views(bert):
    from mha_lib import live

    # the timing view's own numbers are not measured here: any times do
    return {v.view: v for v in live.speed_views(bert, timing_ms=[2.8, 2.6, 3.0, 3.7, 5.1, 9.1, 25.2])}


def _html(*views) -> str:
    body = "".join(f"<section>{v.html}</section>" for v in views)
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>speed</title>'
            '<script src="../_static/mha_book.js"></script></head>'
            f"<body><main style='max-width:720px'>{body}</main></body></html>")


def _measure(page, warm: int) -> dict:
    return page.evaluate(f"async (warm) => {{ {SPEED} return m.measureView({VIEW}, {{warm}}); }}", warm)


def _longest_task_of_a_visit(browser, book_url, html, warm) -> float:
    context, page, visit = _open(browser, book_url, html)
    try:
        browser.start_tracing(page=page, categories=["toplevel"])
        try:
            result = _measure(page, warm)
        finally:
            trace = browser.stop_tracing()
        assert len(result["warm"]) == warm and result["cold"]["total_ms"] > 0
        assert visit.console_errors == [] and visit.off_site == []
        return main_thread_tasks(trace)[0]
    finally:
        context.close()


@pytest.mark.parametrize("kind", ["sentence", "prune", "toy-compare", "timing", "induction", "translate", "digit",
                                  "patterns"])
def test_no_main_thread_task_over_50_ms_while_a_view_loads_runs_and_draws(chromium_browser, book_url, views, kind):
    """A fresh page (nothing fetched yet), the view's cold update and warm ones with new inputs; the longest stretch
    of the page's main thread, in ms of CPU. A machine busy with other tests slows the page's work too: up to three
    visits, and the bound holds for the quietest (as tests/browser/test_live_reader.py)."""
    _require_models()
    updates = 1 if kind == "timing" else 3
    assert_a_quiet_visit_keeps_the_task_bound(
        lambda: _longest_task_of_a_visit(chromium_browser, book_url, _html(views[kind]), updates), f"{kind}: ")


def _first_maps_on_a_slow_link(context, page, text: str):
    """Type ``text`` into the page's sentence view on a link of 40 Mbit/s; when the first new maps are drawn:
    (the layer drawn, the requests ended by then, their bytes gzip)."""
    ended = []
    page.on("requestfinished", lambda req: ended.append(req))
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 10, "downloadThroughput": 5e6,
                                                  "uploadThroughput": 5e6})
    page.evaluate("""(text) => { window.__first = null;
        new PerformanceObserver((l) => { const m = l.getEntries().find(e => e.name === 'mha-layer-drawn');
          if (m && window.__first === null) window.__first = m.detail; }).observe({ type: 'mark' });
        const box = document.querySelector('[data-view=sentence] textarea');
        box.value = text; box.dispatchEvent(new Event('input')); }""", text)
    page.wait_for_function("window.__first !== null", timeout=120_000, polling=20)
    arrived = list(ended)  # the responses ended by now
    packed = sum(len(gzip.compress(r.response().body(), 6)) for r in arrived if r.response() is not None)
    return page.evaluate("window.__first"), [r.url.rsplit("/", 1)[-1] for r in arrived], packed


def test_the_first_minilm_maps_wait_for_the_runtime_the_embeddings_and_the_first_maps_file(chromium_browser, book_url, views, bert):
    """On a link of 40 Mbit/s: when layer 0's new maps are drawn (from the first maps file), no layer's file but
    layer 0's (which streams next) has arrived, and everything that has weighs at most 10 MB gzip (what a compressing
    server sends), the page included. The maps of every layer, once in, are mha_lib's."""
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, _html(views["sentence"]))
    try:
        text = "A sentence typed on a slow link."
        first, names, packed = _first_maps_on_a_slow_link(context, page, text)
        assert first == 0  # layer 0's maps came first
        layers = sorted(n for n in names if ".layer" in n)
        assert layers in ([], ["all-MiniLM-L6-v2.layer0.onnx"]), names  # at most layer 0, which streams next
        assert {"ort-wasm-simd-threaded.wasm", "all-MiniLM-L6-v2.embed.onnx", "all-MiniLM-L6-v2.maps0.onnx"} <= set(names)
        assert not any("asyncify" in n or "webgpu" in n for n in names)  # only the WebAssembly build's files
        assert packed <= FIRST_MAP_MB_GZIP * 1e6, f"{packed / 1e6:.2f} MB gzip before the first maps"
        page.wait_for_function(f"{VIEW}.mhaLive.lastResult.text === {text!r}", timeout=240_000)
        tokens, want = py_attentions(bert, text)
        r = page.evaluate(f"{VIEW}.mhaLive.lastResult")
        assert r["tokens"] == tokens
        assert (torch.tensor(r["attentions"]) - want).abs().max().item() <= MINILM_TOLERANCE
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_a_view_opened_on_layer_3_draws_the_readers_text_once_the_first_maps_file_is_in(chromium_browser, book_url, bert):
    """Chapter 2's view opens on layer 3, whose maps need the files of layers 0-3 (21 MB gzip with the runtime).
    On the first run, on a link of 40 Mbit/s, the reader's text is drawn after the first maps file as layer 0,
    titled as standing in for layer 3, with at most layer 0's file in and at most 10 MB gzip; then layer 3's own
    maps replace it (the title hidden again, the slider still on layer 3), equal to mha_lib's."""
    from mha_lib.live import live_view, sentence_config
    from mha_lib.live.speed import _MINILM, _SENTENCE

    _require_models()
    view = live_view("sentence", _MINILM, sentence_config(bert, _SENTENCE, layer=3))
    context, page, visit = _open(chromium_browser, book_url, _html(view))
    try:
        title = f"{VIEW}.querySelector('.mha-live-layer-title')"

        def heads():  # the captions of the maps drawn ("L3.H1", "L3.H1 · role")
            return page.evaluate(f"[...{VIEW}.querySelectorAll('.mha-live-head span')].map(s => s.textContent)")

        assert page.evaluate(f"{title}.hidden") and page.evaluate(f"{VIEW}.querySelector('input[type=range]').value") == "3"
        text = "A sentence typed on a slow link."
        first, names, packed = _first_maps_on_a_slow_link(context, page, text)
        assert first == 0, first  # layer 0 stands in
        assert sorted(n for n in names if ".layer" in n) in ([], ["all-MiniLM-L6-v2.layer0.onnx"]), names
        assert packed <= FIRST_MAP_MB_GZIP * 1e6, f"{packed / 1e6:.2f} MB gzip before the first maps"
        assert heads() and all(label.startswith("L0.") for label in heads()), heads()
        said = page.evaluate(f"[{title}.hidden, {title}.textContent]")
        assert said == [False, "Layer 0 of your text, shown until layer 3 arrives (its file and those before it are on "
                               "their way)."], said
        page.wait_for_function(f"{VIEW}.mhaLive.lastResult.text === {text!r}", timeout=240_000)
        assert page.evaluate(f"{title}.hidden") and page.evaluate(f"{VIEW}.querySelector('input[type=range]').value") == "3"
        assert page.evaluate(f"{VIEW}.querySelectorAll('.mha-live-layer-title').length") == 1
        tokens, want = py_attentions(bert, text)
        r = page.evaluate(f"{VIEW}.mhaLive.lastResult")
        assert r["tokens"] == tokens
        assert (torch.tensor(r["attentions"]) - want).abs().max().item() <= MINILM_TOLERANCE
        assert heads() and all(label.startswith("L3.") for label in heads()), heads()
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_one_frame_per_layer_and_a_toggle_recomputes_from_its_layer(chromium_browser, book_url, views):
    """All six layers shown: a new sentence is drawn layer by layer (one mark per layer, in order) and the update
    ran the embeddings and each layer once. A head toggled in layer 4 of the prune view reruns layers 4 and 5 only,
    for the sentence's maps and for every batch of the texts of the scores; the debug readout (?mha-debug=1) says so."""
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, _html(views["sentence"], views["prune"]))
    try:
        debug = page.url + "?mha-debug=1"
        page.route(debug, lambda r: r.fulfill(status=200, body=_html(views["sentence"], views["prune"]),
                                              content_type="text/html"))
        page.goto(debug)
        page.wait_for_function("[...document.querySelectorAll('.mha-live-view')].every(e => e.mhaLive)")
        sentence = "document.querySelector('[data-view=sentence]')"
        page.locator("[data-view=sentence] .mha-live-check", has_text="all layers").click()
        page.evaluate(f"{sentence}.mhaLive.run('Warm up: the model loads.')")
        page.wait_for_function(f"{sentence}.mhaLive.lastResult.text === 'Warm up: the model loads.'", timeout=120_000)
        marks = page.evaluate(f"""async () => {{ performance.clearMarks('mha-layer-drawn');
            await {sentence}.mhaLive.run('Six layers, one at a time.');
            return performance.getEntriesByName('mha-layer-drawn').map(m => m.detail); }}""")
        assert marks == [0, 1, 2, 3, 4, 5]
        parts = page.evaluate(f"{sentence}.mhaLive.timings.parts")
        files = [c["file"] for c in parts["calls"]]
        assert files == ["all-MiniLM-L6-v2.embed.onnx"] + [f"all-MiniLM-L6-v2.layer{i}.onnx" for i in range(6)]
        assert parts["run_ms"] > 0 and parts["draw_ms"] > 0 and len(parts["runs"]) == 7
        debug = page.locator("[data-view=sentence] .mha-live-debug").text_content()
        assert "feeds" in debug and "run" in debug and "(7 calls:" in debug and "draw" in debug, debug
        prune = "document.querySelector('[data-view=prune]')"
        mask = [[1] * 12 for _ in range(6)]
        page.evaluate(f"async (m) => await {prune}.mhaLive.run({{mask: m}})", mask)  # the reference, the first run
        mask[4][3] = 0
        r = page.evaluate(f"async (m) => await {prune}.mhaLive.run({{mask: m}})", mask)
        assert r["mask"][4][3] == 0
        calls = page.evaluate(f"{prune}.mhaLive.timings.parts")["calls"]
        files = [c["file"].rsplit(".", 2)[1] for c in calls]
        # the sentence, then the scores' texts in batches of near lengths (compute_bert.lengthGroups): each batch
        # reruns layers 4 and 5 only, and the batches hold every text once
        assert len(files) >= 6 and files == ["layer4", "layer5"] * (len(files) // 2), files
        assert calls[0]["dims"]["hidden"][0] == 1
        texts = views["prune"].config["texts"]
        assert sum(c["dims"]["hidden"][0] for c in calls[2::2]) == len(texts), calls
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_a_second_visit_reads_every_file_from_the_cache_with_the_network_refusing_them(chromium_browser, book_url,
                                                                                      views, bert):
    """First visit: the sentence view downloads and runs. Second visit, same browser profile, with every model file,
    the runtime's binary, the word vectors, the vocabulary, the manifest and the runtime's files.json refused by the
    network: it runs all the same, from the Cache API (checked against the same digests), mha_lib's maps. The files
    kept under their digest are not asked of the network at all; the manifest is (network first), and read from the
    cache when refused."""
    _require_models()
    html = _html(views["sentence"])
    context, page, visit = _open(chromium_browser, book_url, html)
    try:
        text = "Read from the cache next time."
        page.evaluate(f"async (t) => await {VIEW}.mhaLive.run(t)", text)
        page.wait_for_timeout(1500)  # the files are stored in the background, after the page has them
        refused = []

        def offline(route):
            refused.append(route.request.url.rsplit("/", 1)[-1])
            route.abort("internetdisconnected")

        for pattern in ("**/*.onnx", "**/*.wasm", "**/*.bin", "**/*vocab.txt", "**/models/manifest.json",
                        "**/onnxruntime-web/files.json"):
            context.route(pattern, offline)
        again = context.new_page()
        again.route(page.url, lambda r: r.fulfill(status=200, body=html, content_type="text/html"))
        again.goto(page.url, wait_until="load")
        again.wait_for_function(f"{VIEW}.mhaLive", timeout=30_000)
        second = "Read from the cache."  # its words' vectors were fetched by the first visit
        r = again.evaluate(f"async (t) => await {VIEW}.mhaLive.run(t)", second)
        tokens, want = py_attentions(bert, second)
        assert r["tokens"] == tokens
        assert (torch.tensor(r["attentions"]) - want).abs().max().item() <= MINILM_TOLERANCE
        files = again.evaluate("import(new URL('../_static/live/fetch_files.mjs', location.href).href)"
                               ".then(m => m.fetchedFiles.map(f => [f.url.split('/').pop(), f.cached]))")
        assert files and all(cached for _, cached in files), files
        names = {name for name, _ in files}
        assert {"ort-wasm-simd-threaded.wasm", "all-MiniLM-L6-v2.embed.onnx", "all-MiniLM-L6-v2.layer0.onnx"} <= names
        # the checked files were not even asked of the network; the manifest was (it may change), and refused
        assert set(refused) <= {"manifest.json", "files.json"} and "manifest.json" in refused, refused
        assert visit.off_site == []
    finally:
        context.close()


def _small_speed_view(views, kinds=("toy-compare", "digit")):
    """A speed view timing two small views (the book's page times every kind: minutes on a busy machine)."""
    from mha_lib import live

    chosen = [views[k] for k in kinds]
    models = sorted({m for v in chosen for m in v.config.get("models", [v.model])})
    config = {"models": models, "views": [{"view": v.view, "model": v.model, "config": v.config} for v in chosen],
              "book": {"machine": "the book's machine", "load_average": [1.5, 1.2, 1.0], "runs": 8,
                       "rows": [{"view": k, "cold_ms": 1900.0 + i, "warm_ms": 25.0 + i} for i, k in enumerate(kinds)]}}
    return live.live_view("speed", models[0], config)


def test_the_speed_table_times_its_views_on_this_device_beside_the_books(chromium_browser, book_url, views):
    """Issue 49, item 5: the table shows the book's times per view; its button mounts the views below it and times
    each with speed.mjs (a first update and the median of later ones), fills this device's column, keeps it for the
    next visit (per execution provider) and downloads the numbers."""
    import json

    _require_models()
    speed = _small_speed_view(views)
    context, page, visit = _open(chromium_browser, book_url, _html(speed))
    try:
        table = page.locator("[data-view=speed] table")
        assert table.locator("tr").count() == 3  # the header, a row per view
        assert "1.9 s" in table.locator("tr").nth(1).text_content() and "25 ms" in table.locator("tr").nth(1).text_content()
        assert page.evaluate("document.querySelectorAll('[data-view=speed] .mha-live-view').length") == 0  # none mounted yet
        note = page.locator("[data-view=speed] .mha-live-note").nth(1)
        page.wait_for_function("document.querySelectorAll('[data-view=speed] .mha-live-note')[1].textContent.includes('WebAssembly')")
        assert "Here the views run on WebAssembly." in note.text_content()
        r = page.evaluate("async () => await document.querySelector('[data-view=speed]').mhaLive.run()")
        assert r["provider"] == "wasm" and r["source"] == "browser" and [x["view"] for x in r["rows"]] == ["toy-compare", "digit"]
        assert all(x["cold_ms"] > 0 and x["warm_ms"] > 0 for x in r["rows"])
        assert page.evaluate("document.querySelectorAll('[data-view=speed] .mha-live-view[data-view]').length") == 2
        header = table.locator("tr").first.text_content()
        assert "this device (WebAssembly): first" in header
        kept = json.loads(page.evaluate("localStorage.getItem('mha-live-speed')"))
        assert [x["view"] for x in kept["wasm"]] == ["toy-compare", "digit"]
        with page.expect_download() as info:
            page.get_by_label("Download the table of times as CSV").click()
        lines = open(info.value.path(), encoding="utf-8").read().splitlines()
        assert lines[0] == "view,machine,provider,first_ms,then_ms" and len(lines) == 5
        own = "[data-view=speed] > .mha-live > .mha-live-export button"  # not the timed views' own bars
        assert page.locator(own).all_text_contents() == ["CSV", "JSON"]  # no figure to download
        # a second visit shows this device's column at once, from the times kept
        again = context.new_page()
        again.route(page.url, lambda route: route.fulfill(status=200, body=_html(speed), content_type="text/html"))
        again.goto(page.url, wait_until="load")
        again.wait_for_function("document.querySelector('[data-view=speed]').mhaLive")
        assert "this device (WebAssembly): first" in again.locator("[data-view=speed] table tr").first.text_content()
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_in_a_kernel_the_speed_table_shows_the_books_times_and_times_nothing(chromium_browser, book_url, views):
    pytest.importorskip("anywidget")
    from test_live_views import KERNEL_REL, MOUNT_WIDGETS, _watch

    widget = _small_speed_view(views).widget()
    context = chromium_browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    try:
        page = context.new_page()
        url = book_url + KERNEL_REL
        visit = _watch(page, book_url, {url: '<!doctype html><html lang="en"><head><meta charset="utf-8">'
                                             "<title>kernel</title></head><body><main></main></body></html>"})
        page.goto(url, wait_until="load")
        traits = {name: getattr(widget, name) for name in ("live_view", "live_model", "live_config", "live_fallback",
                                                            "live_alt", "live_caption")}
        page.evaluate(MOUNT_WIDGETS, {"esm": widget._esm, "views": {"speed": traits}})
        view = "document.querySelector('#kernel-speed .mha-live-view')"
        page.wait_for_function(f"{view}.mhaLive")
        words = page.evaluate(f"{view}.textContent")
        assert "the kernel computes the views" in words and "1.9 s" in words
        assert page.locator("#kernel-speed button", has_text="Time the views").count() == 0
        err = page.evaluate(f"async () => {{ try {{ await {view}.mhaLive.run(); return null; }} catch (e) {{ return e.message; }} }}")
        assert err and "times the views of the book's pages" in err
        assert visit.console_errors == [] and visit.off_site == []
        assert [r for _, r in visit.requests] == [KERNEL_REL], "the kernel's speed table fetches no file"
    finally:
        context.close()
