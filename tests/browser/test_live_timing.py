"""Chapter 3's live timing view (issue 29, item 3) in Chromium, offline.

A test page of our own (one ``"timing"`` view written by :func:`mha_lib.live.timing_config`, small
shapes) on the built book's origin, with ``attention-core.onnx``. Checked: the file computes
:func:`mha_lib.attention` (run through the page's runtime on a known input), the view times every head
count and shows a number per row, the chart's image and alt text say both machines' ratios, the
downloads hold the numbers, a second click while timing does not start a second run, 44 px targets at
390 px, no console error, no request off the local server. Times themselves are never asserted.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from test_live_views import _open, _require_models, _small_targets

pytestmark = pytest.mark.browser

VIEW = "document.querySelector('[data-view=timing]')"


@pytest.fixture(scope="module")
def page_html():
    from mha_lib import live

    _require_models()
    config = live.timing_config((1, 2, 8, 32), d_model=64, seq_len=32, batch=2, repeats=2)
    view = live.live_view("timing", "attention-core", config)
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><title>timing view</title>'
            '<script src="../_static/mha_book.js"></script>'
            "<style>body{font-family:sans-serif;margin:0} main{max-width:720px;margin:0 auto;padding:0 12px}</style>"
            f"</head><body><main><section>{view.html}</section></main></body></html>")


def test_the_served_file_is_mha_libs_attention(chromium_browser, book_url, page_html):
    from mha_lib import attention

    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, 4, 6, 8, generator=g) for _ in range(3))
        got = page.evaluate("""async ([q, k, v]) => {
            const ort = await import(new URL('../_static/vendor/onnxruntime-web/ort.wasm.min.mjs', location.href).href);
            ort.env.wasm.numThreads = 1;
            ort.env.wasm.wasmPaths = new URL('../_static/vendor/onnxruntime-web/', location.href).href;
            const s = await ort.InferenceSession.create(new URL('../_static/models/attention-core.onnx', location.href).href);
            const t = (x) => new ort.Tensor('float32', Float32Array.from(x), [2, 4, 6, 8]);
            const out = await s.run({q: t(q), k: t(k), v: t(v)});
            return Array.from(out.out.data); }""", [q.flatten().tolist(), k.flatten().tolist(), v.flatten().tolist()])
        want = attention(q, k, v)[0].flatten().numpy()
        assert np.abs(np.array(got) - want).max() < 1e-5
        assert visit.off_site == []
    finally:
        context.close()


def test_timing_fills_every_row_and_the_downloads_hold_the_numbers(chromium_browser, book_url, page_html):
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        before = page.evaluate(f"{VIEW}.mhaLive.lastResult")
        assert before["seconds"] is None and before["source"] == "config"
        assert page.locator("[data-view=timing] td").nth(4).text_content() == "–"  # not timed yet
        first = page.evaluate(f"() => {{ const m = {VIEW}.mhaLive; const a = m.run(); const b = m.run(); "
                              "return Promise.all([a, b]).then(([x, y]) => [x, x === y]); }")
        r, same = first
        assert same, "a second click while timing joins the first run"
        assert r["source"] == "browser" and r["heads"] == [1, 2, 8, 32] and len(r["seconds"]) == 4
        assert all(t > 0 and np.isfinite(t) for t in r["seconds"]) and r["ratios"][0] == 1
        # issue 49: every round timed each head count; the median and the spread of the calls are shown
        assert r["rounds"] == 2 and [len(x) for x in r["samples"]] == [2, 2, 2, 2]
        assert all(lo <= m <= hi for (lo, hi), m in zip(r["spread"], r["seconds"])) and r["busy"] in (True, False)
        assert page.evaluate(f"{VIEW}.mhaLive.timings.first_curve_ms") > 0  # a curve after the first round
        cells = page.locator("[data-view=timing] tr td:last-child").all_text_contents()
        assert len(cells) == 4 and all("×) " in c for c in cells)  # the median, its multiple, the spread
        alt = page.locator("[data-view=timing] img.mha-live-chart").get_attribute("alt")
        assert "this device" in alt and "not timed" not in alt
        status = page.locator("[data-view=timing] .mha-live-status").text_content()
        assert ("Timed on this device" in status) != r["busy"] and ("too busy" in status) == r["busy"], status
        with page.expect_download() as info:
            page.locator("[data-view=timing] .mha-live-export button", has_text="JSON").click()
        data = json.loads(open(info.value.path(), encoding="utf-8").read())
        assert data["seconds"] == r["seconds"] and data["book_seconds"] == before["book_seconds"]
        assert before["book_seconds"] == pytest.approx([ms / 1e3 for ms in data["book_ms"]])
        with page.expect_download() as info:
            page.locator("[data-view=timing] .mha-live-export button", has_text="PNG").click()
        assert open(info.value.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        with page.expect_download() as info:
            page.locator("[data-view=timing] .mha-live-export button", has_text="CSV").click()
        assert open(info.value.path(), encoding="utf-8").read().splitlines()[0] == \
            "heads,head_dim,book_seconds,device_seconds,device_fastest_seconds,device_slowest_seconds"
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_on_a_phone_targets_are_44_px_and_nothing_scrolls_sideways(chromium_browser, book_url, page_html):
    context, page, visit = _open(chromium_browser, book_url, page_html, width=390, height=844, touch=True)
    try:
        small = _small_targets(page, VIEW, skip_grids=False)
        assert small == []
        page.evaluate(f"async () => await {VIEW}.mhaLive.run()")
        assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()
