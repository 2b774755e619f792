"""Chapter 6's live translate view (issue 29, item 3) in Chromium, offline, against mha_lib in Python.

A test page of our own (one ``"translate"`` view written by :func:`mha_lib.live.translation_config`) is
served on the built book's origin, with ``ch6-translation.onnx``, the encoder-decoder that
:func:`mha_lib.export.export_onnx` writes. Checked: greedy decoding in the page (the file run once per
step) gives :meth:`~mha_lib.model.EncoderDecoder.generate`'s tokens, and its cross-attention, aligned
shares and probabilities equal :func:`mha_lib.live.translation_readings`, on short, long and repeated
sentences; typing, the step slider and "Play" drive the view; bad input is refused with the state
kept; 44 px targets and no sideways scroll at 390 px; no console error, no request off the local
server, no main-thread task over 50 ms.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from test_live_views import _open, _require_models, _run_refused, _small_targets

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from chromium_trace import main_thread_tasks  # noqa: E402
from book_site import assert_a_quiet_visit_keeps_the_task_bound  # noqa: E402

pytestmark = pytest.mark.browser

VIEW = "document.querySelector('[data-view=translate]')"
TOLERANCE = 1e-5  # the model ships exact (fp32)


@pytest.fixture(scope="module")
def page_html():
    from mha_lib import live

    _require_models()
    view = live.live_view("translate", "ch6-translation", live.translation_config("ch6-translation", [14, 3, 18, 19]))
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><title>translate view</title>'
            '<script src="../_static/mha_book.js"></script>'
            "<style>body{font-family:sans-serif;margin:0} main{max-width:720px;margin:0 auto;padding:0 12px}</style>"
            f"</head><body><main><section>{view.html}</section></main></body></html>")


def expected(words):
    from mha_lib import live, tasks

    spec = tasks.SHIPPED["ch6-translation"]
    return live.translation_readings(tasks.load_trained(spec), spec.make_task(), words)


def assert_equal_readings(got, want):
    for key in ("tokens", "source_ids", "expected"):
        assert got[key] == want[key], key
    for key in ("confidence", "cross", "aligned"):
        diff = (torch.tensor(got[key]) - torch.tensor(want[key])).abs().max().item()
        assert diff <= TOLERANCE, f"{key}: {diff}"


def test_translate_view_decodes_like_generate_and_stays_offline(chromium_browser, book_url, page_html):
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        assert page.evaluate(f"{VIEW}.mhaLive.lastResult.source") == "config"
        for words in ([5, 9, 0, 12, 3, 20], [0], list(range(12)), [7] * 8, [23, 22, 21, 20]):
            r = page.evaluate(f"async (w) => await {VIEW}.mhaLive.run({{words: w}})", words)
            assert r["source"] == "browser" and r["words"] == words
            assert_equal_readings(r, expected(words))
        assert visit.console_errors == [] and visit.off_site == []
        assert [u for m, u in visit.requests if u.endswith(".onnx")] == ["_static/models/ch6-translation.onnx"]
    finally:
        context.close()


def test_typing_the_slider_and_play_drive_the_view(chromium_browser, book_url, page_html):
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        box = page.locator("[data-view=translate] textarea")
        box.fill("s1 s2 s3 s4 s5")
        page.wait_for_function(f"{VIEW}.mhaLive.lastResult.words.length === 5", timeout=60_000)
        r = page.evaluate(f"{VIEW}.mhaLive.lastResult")
        assert_equal_readings(r, expected([1, 2, 3, 4, 5]))
        box.fill("s1 s2 s99")
        page.wait_for_function(f"{VIEW}.querySelector('.mha-live-status').textContent.includes('refused')")
        assert 'word 2 is "s99", not one of s0 .. s23' in page.locator("[data-view=translate] .mha-live-status").text_content()
        assert page.evaluate(f"{VIEW}.mhaLive.lastResult.words") == [1, 2, 3, 4, 5]
        T = len(r["tokens"])
        grid = page.locator("[data-view=translate] .mha-live-grid").first
        slider = page.locator("[data-view=translate] input[type=range]")
        slider.focus()
        page.keyboard.press("Home")
        assert slider.get_attribute("aria-valuetext").startswith(f"step 1 of {T}: wrote ")
        rows = page.evaluate(f"{VIEW}.querySelector('.mha-live-grid canvas').height")
        page.keyboard.press("End")
        assert page.evaluate(f"{VIEW}.querySelector('.mha-live-grid canvas').height") > rows  # a row per step
        assert grid.locator("button").count() == 4
        page.locator("[data-view=translate] button", has_text="Play the decoding").click()
        assert slider.input_value() == "0"
        page.wait_for_function(f"{VIEW}.querySelector('input[type=range]').value === '{T - 1}'", timeout=20_000)
        later = page.locator("[data-view=translate] .mha-live-later").count()
        assert later == 0  # every step taken is drawn undimmed at the end
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


@pytest.mark.parametrize("bad, message", [
    ({"words": []}, "words has 0 words; give 1 to 12"),
    ({"words": [1, 24]}, "words[1] = 24 is not a word number in 0..23"),
    ({"words": [1, 2], "steps": 3}, "run() takes {words: [word numbers]}"),
    ("s1 s2", 'run() takes {words: [word numbers]}, got "s1 s2"'),
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
        page.evaluate(f"async () => await {VIEW}.mhaLive.run({{words: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}})")
        assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def _longest_task_of_a_first_visit(browser, book_url, page_html) -> float:
    context, page, visit = _open(browser, book_url, page_html)
    try:
        browser.start_tracing(page=page, categories=["toplevel"])
        try:
            page.locator("[data-view=translate] textarea").fill("s0 s1 s2 s3 s4 s5 s6 s7 s8 s9 s10 s11")
            page.wait_for_function(f"{VIEW}.mhaLive.lastResult.words.length === 12 && "
                                   f"{VIEW}.mhaLive.lastResult.source === 'browser'", timeout=60_000)
            page.locator("[data-view=translate] input[type=range]").focus()
            for key in ("Home", "ArrowRight", "ArrowRight", "End"):
                page.keyboard.press(key)
        finally:
            trace = browser.stop_tracing()
        tasks = main_thread_tasks(trace)
        assert len(tasks) > 20
        assert visit.console_errors == [] and visit.off_site == []
        return tasks[0]
    finally:
        context.close()


def test_no_main_thread_task_over_50_ms_while_the_model_loads_decodes_and_draws(chromium_browser, book_url, page_html):
    """CPU time per task, up to three visits, the bound holding for the quietest (as test_live_reader.py)."""
    assert_a_quiet_visit_keeps_the_task_bound(lambda: _longest_task_of_a_first_visit(chromium_browser, book_url, page_html))
