"""Tokens on the maps and the sentence view's lines (issue 50, item 2), in Chromium, offline.

A test page with one ``"sentence"`` view (all-MiniLM-L6-v2) on the built book's origin. Checked: a map with room
for its labels writes its row and column tokens (a short sentence's), a map without room does not (a long one's),
and pointing at any map shows a note by the pointer naming the query and key tokens; the "Lines (head view)" mode
draws one line per query-key pair and head above the opacity floor, with the layer slider's layer and the heads the
reader picks, says a token's strongest keys when it is pointed at, and exports the lines (SVG, PNG, CSV, JSON)
as they are shown; at 390 px nothing scrolls sideways and every control is 44 px; no console error.
"""
from __future__ import annotations

import json

import pytest
import torch

from test_live_views import MINILM, _open, _require_models, _small_targets

pytestmark = pytest.mark.browser

VIEW = "document.querySelector('[data-view=sentence]')"
SEL = "[data-view=sentence]"
SHORT = "The cat sat."
LONG = ("The keys that the man who lives next door lost yesterday were found under the sofa, and nobody in the "
        "house could say how they had got there.")


@pytest.fixture(scope="module")
def bert():
    from mha_lib.pretrained import load_bert

    model, _ = load_bert(verbose=False)
    return model


@pytest.fixture(scope="module")
def page_html(bert):
    from mha_lib import live

    view = live.live_view("sentence", MINILM, live.sentence_config(bert, SHORT, layer=3))
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><title>lines</title>'
            '<script src="../_static/mha_book.js"></script>'
            "<style>body{font-family:sans-serif;margin:0} main{max-width:720px;margin:0 auto;padding:0 12px}</style>"
            f"</head><body><main><section>{view.html}</section></main></body></html>")


def origins(page):
    """Each thumbnail's label margin (0: no labels)."""
    return page.evaluate(f"[...{VIEW}.querySelectorAll('.mha-live-grid .mha-live-head')].map(b => Number(b.dataset.origin))")


def test_maps_with_room_show_their_tokens_and_every_map_names_the_cell_by_the_pointer(chromium_browser, book_url, page_html):
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        assert all(o > 0 for o in origins(page)) and len(origins(page)) == 12  # 5 tokens: room for the labels
        box = page.locator(f"{SEL} .mha-live-grid .mha-live-head canvas").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] - 3, box["y"] + box["height"] - 3)  # the last query, the last key
        tip = page.locator(f"{SEL} .mha-live-tip")
        assert tip.is_visible()
        assert "[SEP]" in tip.text_content() and tip.text_content() == page.locator(f"{SEL} .mha-live-readout").text_content()
        page.evaluate(f"async (x) => {{ await {VIEW}.mhaLive.run(x); }}", LONG)  # its maps stay in the page
        assert all(o == 0 for o in origins(page))  # too many tokens for labels at this width
        box = page.locator(f"{SEL} .mha-live-grid .mha-live-head canvas").nth(2).bounding_box()
        page.mouse.move(box["x"] + 2, box["y"] + 2)
        assert "[CLS]" in tip.text_content()  # still named by the pointer
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_lines_draw_the_layer_shown_and_the_heads_picked_and_export_as_shown(chromium_browser, book_url, page_html, bert,
                                                                           tmp_path):
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        page.locator(f"{SEL} button", has_text="Lines (head view)").click()
        assert page.locator(f"{SEL} .mha-live-lines-canvas").is_visible()
        assert not page.locator(f"{SEL} .mha-live-grid").first.is_visible()
        heads = page.locator(f"{SEL} .mha-live-line-head")
        assert heads.count() == 12
        # the slider's layer: 3 (the config's); move it to 4
        slider = page.locator(f"{SEL} input[type=range]")
        slider.focus()
        page.keyboard.press("ArrowRight")
        assert "layer 4" in page.locator(f"{SEL} .mha-live-lines-canvas").get_attribute("aria-label")
        heads.nth(0).click()  # turn H0 off
        assert heads.nth(0).get_attribute("aria-pressed") == "false"
        # point at the first query token: its strongest key per head, for the 11 heads shown
        canvas = page.locator(f"{SEL} .mha-live-lines-canvas")
        box = canvas.bounding_box()
        page.mouse.move(box["x"] + 20, box["y"] + 8 + 11)
        readout = page.locator(f"{SEL} .mha-live-readout").text_content()
        assert readout.startswith("Query “[CLS]”") and "L4.H0" not in readout and "L4.H1 →" in readout
        page.mouse.move(0, 0)  # the lines of every query again (a token pointed at is not pinned)
        # the export: the 11 heads' lines of layer 4, as the page computed them
        with page.expect_download() as info:
            page.locator(f"{SEL} .mha-live-export button", has_text="JSON").click()
        data = json.loads(open(info.value.path(), encoding="utf-8").read())
        assert data["mode"] == "lines" and data["layer"] == 4 and len(data["heads"]) == 11
        with torch.no_grad():
            out, batch = bert.encode_text([SHORT], output_attentions=True)
        want = out.attentions[4][0, 1:]
        got = torch.tensor([h["attention"] for h in data["heads"]])
        assert (got - want).abs().max() <= 1e-4  # the config's maps (4 decimals)
        with page.expect_download() as info:
            page.locator(f"{SEL} .mha-live-export button", has_text="SVG").click()
        svg = open(info.value.path(), encoding="utf-8").read()
        drawn = sum(w > 0.005 for h in data["heads"] for row in h["attention"] for w in row)
        assert svg.count("<line ") == drawn  # every pair above the floor, every head shown
        with page.expect_download() as info:
            page.locator(f"{SEL} .mha-live-export button", has_text="CSV").click()
        n = len(data["tokens"])
        assert len(open(info.value.path(), encoding="utf-8").read().strip().split("\n")) == 1 + 11 * n * n
        with page.expect_download() as info:
            page.locator(f"{SEL} .mha-live-export button", has_text="PNG").click()
        assert open(info.value.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        # a new sentence redraws the lines; "Maps" brings the grid back
        page.evaluate(f"async (x) => {{ await {VIEW}.mhaLive.run(x); }}", "Dogs bark at night.")  # its maps stay in the page
        assert "over 7 tokens" in canvas.get_attribute("aria-label")
        page.locator(f"{SEL} button", has_text="Maps").click()
        assert page.locator(f"{SEL} .mha-live-grid").first.is_visible() and not canvas.is_visible()
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_lines_on_a_phone_fit_and_keep_44_px_targets(chromium_browser, book_url, page_html):
    context, page, visit = _open(chromium_browser, book_url, page_html, width=390, height=844, touch=True)
    try:
        # the two modes' buttons stay side by side, one toggle, even where their label takes a line of its own
        # (measured once the views' stylesheet applies: a fresh-clone run measured before it did, tops 313 and 328)
        page.wait_for_function(f"getComputedStyle(document.querySelector('{SEL} .mha-live-pair')).display.endsWith('flex')",
                               timeout=30_000)
        a, b = (page.locator(f"{SEL} button", has_text=name).bounding_box() for name in ("Maps", "Lines (head view)"))
        one_line = a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"] and a["x"] + a["width"] <= b["x"]
        assert one_line, f"the Maps / Lines buttons split over two lines at 390 px: {a}, {b}"
        page.locator(f"{SEL} button", has_text="Lines (head view)").tap()
        # a check box's target is its label, counted itself
        assert [t for t in _small_targets(page, VIEW) if t != "INPUT 24x24"] == []
        page.evaluate(f"async (x) => {{ await {VIEW}.mhaLive.run(x); }}", LONG)  # its maps stay in the page
        assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
        canvas = page.locator(f"{SEL} .mha-live-lines-canvas")
        # its first rows 300 px down the window: clear of the sticky readout above (the canvas may be taller)
        canvas.evaluate("c => window.scrollBy(0, c.getBoundingClientRect().top - 300)")
        box = canvas.bounding_box()
        assert box["width"] <= 390
        row = 30 if page.evaluate("matchMedia('(pointer: coarse)').matches") else 22
        page.touchscreen.tap(box["x"] + 15, box["y"] + 8 + 2.5 * row)  # a tap pins the third query token
        assert page.locator(f"{SEL} .mha-live-readout").text_content().startswith("Query “keys”")
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()
