"""Chapter 9's live patterns view (issue 33, item 3) in Chromium, offline, against mha_lib in Python.

A test page of our own (one ``"patterns"`` view written by :func:`mha_lib.live.patterns_config`) is served on
the built book's origin, with the four ``*.pattern.onnx`` files that ``make book`` exports. Checked: the
page's maps, predictions and reach equal :func:`mha_lib.live.patterns_readings` for every kind of pattern and
each set of weights; the mask drawn is the pattern and the causal mask; the cache table reads
:func:`mha_lib.live.pattern_cache_bytes`; the controls drive the view; bad input is refused with the state
kept; 44 px targets and no sideways scroll at 390 px; no console error, no request off the local server.
"""
from __future__ import annotations

import pytest
import torch

from book_site import run_view
from test_live_views import _open, _require_models, _run_refused, _small_targets

pytestmark = pytest.mark.browser

VIEW = "document.querySelector('[data-view=patterns]')"
TOLERANCE = 1e-5  # the files ship exact (fp32)
FAR = [7, 41, 3, 12, 55, 9, 30, 18, 61, 2, 44, 27, 5, 36, 50, 13, 22, 7, 41, 3, 12, 55, 9, 30, 18, 8, 19, 33, 46, 58,
       1, 24]  # a segment repeated 17 tokens later


@pytest.fixture(scope="module")
def page_html():
    from mha_lib import live

    _require_models()
    config = live.patterns_config(FAR, {"kind": "window", "window": 8, "sinks": 0, "block": 4})
    view = live.live_view("patterns", config["models"][0], config)
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><title>patterns view</title>'
            '<script src="../_static/mha_book.js"></script>'
            "<style>body{font-family:sans-serif;margin:0} main{max-width:720px;margin:0 auto;padding:0 12px}</style>"
            f"</head><body><main><section>{view.html}</section></main></body></html>")


def expected(ids, model, pattern):
    from mha_lib import live

    return live.patterns_readings(live.pattern_model(list(live.patterns.PATTERN_FAMILIES)[model]), ids, pattern)


def assert_equal_readings(got, want):
    assert got["predictions"] == want["predictions"] and got["copyable"] == want["copyable"]
    assert got["reach"] == want["reach"] and got.get("accuracy") == want.get("accuracy")
    for key in ("attentions", "confidence", "previous"):
        diff = (torch.tensor(got[key]) - torch.tensor(want[key])).abs().max().item()
        assert diff <= TOLERANCE, f"{key}: {diff}"



def test_patterns_view_equals_mha_lib_for_every_pattern_and_weights_and_stays_offline(chromium_browser, book_url,
                                                                                       page_html):
    from mha_lib import live

    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        assert page.evaluate(f"{VIEW}.mhaLive.lastResult.source") == "config"
        cases = [({"pattern": {"kind": "full"}}, 0, {"kind": "full", "window": 8, "sinks": 0, "block": 4}),
                 ({"pattern": {"kind": "window", "window": 3, "sinks": 2}}, 0,
                  {"kind": "window", "window": 3, "sinks": 2, "block": 4}),
                 ({"model": 3, "pattern": {"kind": "sparse", "block": 4}}, 3,
                  {"kind": "sparse", "window": 3, "sinks": 2, "block": 4}),
                 ({"model": 1, "pattern": {"block": 8}}, 1, {"kind": "sparse", "window": 3, "sinks": 2, "block": 8}),
                 ({"model": 2, "pattern": {"kind": "window", "window": 32, "sinks": 0}}, 2,
                  {"kind": "window", "window": 32, "sinks": 0, "block": 8})]
        for x, model, pattern in cases:
            r = run_view(page, "patterns", x)
            assert r["source"] == "browser" and r["model"] == model and r["pattern"] == pattern
            assert_equal_readings(r, expected(FAR, model, pattern))
        # every earlier key: the copy 17 back is in sight; a window of 8 hides it
        assert all(run_view(page, "patterns", {"model": 0, "pattern": {"kind": "full"}})["reach"])
        assert not any(run_view(page, "patterns", {"pattern": {"kind": "window", "window": 8, "sinks": 0}})["reach"])
        # the mask drawn: the pattern and the causal mask; the cache table: pattern_cache_bytes
        drawn = page.evaluate(f"{VIEW}.mhaLive.lastResult.allowed")
        want = ~(live.reader_pattern_mask({"kind": "window", "window": 8, "sinks": 0, "block": 8}, 32, 32)
                 | torch.ones(32, 32, dtype=torch.bool).triu(1))
        assert drawn == want.int().tolist()
        cells = page.locator("[data-view=patterns] table td").all_text_contents()
        config = live.patterns_config(FAR)
        bytes_ = live.pattern_cache_bytes(config["cache"], {"kind": "window", "window": 8, "sinks": 0, "block": 8}, 32)
        for b in (bytes_["mha"], bytes_["pattern"], bytes_["mla"]):
            assert any(c.startswith(f"{b:,}") for c in cells), (b, cells)
        assert visit.console_errors == [] and visit.off_site == []
        got = {u.rsplit("/", 1)[-1] for m, u in visit.requests if u.endswith(".onnx")}
        assert got == {f"{n}.pattern.onnx" for n in live.patterns.PATTERN_FAMILIES}
    finally:
        context.close()


def test_the_controls_drive_the_view(chromium_browser, book_url, page_html):
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        page.locator("[data-view=patterns] select").nth(1).select_option("sparse")
        page.wait_for_function(f"{VIEW}.mhaLive.lastResult.pattern.kind === 'sparse' && "
                               f"{VIEW}.mhaLive.lastResult.source === 'browser'", timeout=60_000)
        page.locator("[data-view=patterns] select").nth(0).select_option("3")
        page.wait_for_function(f"{VIEW}.mhaLive.lastResult.model === 3", timeout=30_000)
        page.locator("[data-view=patterns] button", has_text="learned with").click()
        page.wait_for_function(f"{VIEW}.mhaLive.lastResult.pattern.block === 4 && "
                               f"{VIEW}.mhaLive.lastResult.pattern.kind === 'sparse'", timeout=30_000)
        r = page.evaluate(f"{VIEW}.mhaLive.lastResult")
        assert_equal_readings(r, expected(FAR, 3, r["pattern"]))
        box = page.locator("[data-view=patterns] textarea")
        box.fill("1 2 3 4 1 2 3 4")
        page.wait_for_function(f"{VIEW}.mhaLive.lastResult.ids.length === 8", timeout=30_000)
        assert page.evaluate(f"{VIEW}.mhaLive.lastResult.copyable") == [4, 5, 6]
        box.fill("1 2 99")
        page.wait_for_function(f"{VIEW}.querySelector('.mha-live-status').textContent.includes('refused')")
        assert 'token 2 is "99", not a number in 0..63' in page.locator("[data-view=patterns] .mha-live-status").text_content()
        assert page.evaluate(f"{VIEW}.mhaLive.lastResult.ids") == [1, 2, 3, 4, 1, 2, 3, 4]
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


@pytest.mark.parametrize("bad, message", [
    ({"ids": [1]}, "ids has 1 tokens; the model reads 2 to 32"),
    ({"model": 4}, "model = 4 is not an index in 0..3"),
    ({"pattern": {"kind": "dilated"}}, 'pattern.kind = "dilated" is not one of full, window, sparse'),
    ({"pattern": {"window": 0}}, "pattern.window = 0 is not an integer in 1..32"),
    ({"pattern": {"sinks": 9}}, "pattern.sinks = 9 is not an integer in 0..8"),
    ({"pattern": {"block": 3}}, "pattern.block = 3 is not one of 2,4,8"),
    ({"pattern": {"stride": 2}}, "pattern has unknown keys [stride]"),
    ({"steps": 1}, "run() takes {ids, model, pattern}, got the keys [steps]"),
])
def test_bad_input_is_refused_and_the_state_stays(chromium_browser, book_url, page_html, bad, message):
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        before = page.evaluate(f"{VIEW}.mhaLive.lastResult")
        got = _run_refused(page, VIEW, bad)
        assert message in got
        assert page.evaluate(f"{VIEW}.mhaLive.lastResult") == before
        assert visit.console_errors == []
    finally:
        context.close()


def test_on_a_phone_targets_are_44_px_and_nothing_scrolls_sideways(chromium_browser, book_url, page_html):
    context, page, visit = _open(chromium_browser, book_url, page_html, width=390, height=844, touch=True)
    try:
        small = _small_targets(page, VIEW)
        assert small == []
        assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()
