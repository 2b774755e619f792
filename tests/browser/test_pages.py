"""The page foundations at 1280 px (a laptop) and 390 px (a phone): the phone's navigation button
opens the sidebar, one search box, sliders that say their value, big figures at full size, bertviz
views in the column, no console error. (Every page's width, equations, alt text and screenshots at
both widths: test_book_in_browser.py, which reads them from the page load its other checks read.)"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

WIDTHS = {"laptop": (1280, 800), "phone": (390, 844)}


@pytest.mark.parametrize("rel", ["intro.html", "chapters/02_multi_head_math.html"])
def test_phone_navigation_button_opens_the_sidebar(open_page, rel):
    page, _ = open_page(rel, width=390, height=844)
    sidebar = page.locator("#pst-primary-sidebar, .bd-sidebar-primary").first
    assert not sidebar.is_visible() or sidebar.bounding_box()["x"] < -10  # closed on a phone
    toggles = page.locator("button.primary-toggle, label.primary-toggle, .primary-toggle")
    visible = [toggles.nth(i) for i in range(toggles.count()) if toggles.nth(i).is_visible()]
    assert visible, "no visible navigation button at 390 px"
    visible[0].click()
    page.wait_for_timeout(400)
    box = sidebar.bounding_box()
    assert sidebar.is_visible() and box and box["x"] >= -1 and box["width"] > 200, box
    assert page.locator(".bd-sidebar-primary a.reference").first.is_visible()


# --- issue 21: one search box, sliders that say their value, big figures at full size, bertviz ---

SEARCH_CONTROLS = """() => [...document.querySelectorAll(
    '.search-button__button, input[type=search], form.bd-search input')]
  .filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0
                 && getComputedStyle(e).visibility !== 'hidden'; }).length"""


@pytest.mark.parametrize("device", WIDTHS)
@pytest.mark.parametrize("rel", ["intro.html", "chapters/02_multi_head_math.html", "search.html?q=heads"])
def test_one_search_box_per_page(open_page, rel, device):
    width, height = WIDTHS[device]
    page, visit = open_page(rel, width=width, height=height)
    assert page.evaluate(SEARCH_CONTROLS) == 1, f"{rel} at {width} px: not exactly one visible search box"
    if rel.startswith("search.html"):  # the page's own field is the one, and it still searches
        assert page.locator(".bd-search-container input").is_visible()
        page.wait_for_selector("#search-results li", timeout=20_000)
        page.wait_for_load_state("networkidle")
    assert visit.console_errors == [], visit.console_errors


SLIDER_PAGES = ["chapters/03_cost_of_more_heads.html"]  # the explorers left once live views replaced the rest


@pytest.mark.parametrize("rel", SLIDER_PAGES)
def test_explorer_sliders_show_their_ends_and_announce_the_readout(open_page, rel):
    page, visit = open_page(rel)
    rows = page.locator(".mha-attention-explorer .mha-slider-row")
    assert rows.count() >= 1
    for i in range(rows.count()):
        row = rows.nth(i)
        row.scroll_into_view_if_needed()
        handle, track = row.locator(".noUi-handle"), row.locator(".noUi-target")
        readout, name = row.locator(".mha-slider-readout"), row.locator(".mha-slider-name")
        left, right = row.locator(".mha-slider-end").nth(0), row.locator(".mha-slider-end").nth(1)
        assert left.is_visible() and right.is_visible()
        lbox, tbox, rbox = left.bounding_box(), track.bounding_box(), right.bounding_box()
        # the ends flank the track
        assert lbox["x"] + lbox["width"] <= tbox["x"] and tbox["x"] + tbox["width"] <= rbox["x"]
        assert handle.get_attribute("aria-label") == name.inner_text().strip()
        for key, end in (("Home", left), ("ArrowRight", None), ("End", right)):
            handle.focus()
            page.keyboard.press(key)
            page.wait_for_timeout(200)
            shown = readout.inner_text().strip()
            if end is not None:  # the end labels tell the truth: Home/End reach the values they name
                assert shown == end.inner_text().strip(), f"{rel}, slider {i}: {key} shows {shown!r}"
            assert handle.get_attribute("aria-valuetext") == shown, f"{rel}, slider {i} after {key}"
    assert visit.console_errors == [], visit.console_errors


BIG_IMAGES = """() => [...document.querySelectorAll('.bd-article img')]
  .filter(i => !i.closest('.jupyter-widgets, .mha-live-view') && i.naturalWidth
               && i.getBoundingClientRect().width < 0.8 * i.naturalWidth)
  .map(i => ({linked: !!(i.closest('a.mha-full-size') && i.closest('a.mha-full-size').href),
              alt: i.alt, natural: [i.naturalWidth, i.naturalHeight]}))"""


@pytest.mark.parametrize("device", WIDTHS)
def test_big_figures_link_to_the_full_size_image(open_page, device):
    width, height = WIDTHS[device]
    page, visit = open_page("chapters/02_multi_head_math.html", width=width, height=height)
    big = page.evaluate(BIG_IMAGES)
    assert len(big) >= 3, big  # the 72-head grids at least
    assert all(b["linked"] and len(b["alt"]) > 20 for b in big), big
    # the last figure (the heads grid of chapter 1's models, a data: URL) opens by keyboard, full size
    link = page.locator("a.mha-full-size:not(.mha-full-size-widget)").last
    link.scroll_into_view_if_needed()
    natural = link.locator("img").evaluate("i => [i.naturalWidth, i.naturalHeight]")
    with page.context.expect_page() as opened:
        link.focus()
        page.keyboard.press("Enter")
    tab = opened.value
    tab.wait_for_load_state()
    shown = tab.evaluate("() => { const i = document.querySelector('img'); return [i.naturalWidth, i.naturalHeight]; }")
    assert shown == natural
    tab.close()
    assert visit.console_errors == [], visit.console_errors


def test_shrunk_explorer_frames_link_to_the_frame_shown(open_page):
    """On a phone, an explorer's frame (drawn for the largest head count) gets a link to itself,
    and the link follows the slider."""
    page, visit = open_page("chapters/03_cost_of_more_heads.html", width=WIDTHS["phone"][0], height=WIDTHS["phone"][1])
    explorer = page.locator(".mha-attention-explorer").first
    explorer.scroll_into_view_if_needed()
    area = explorer.locator("xpath=ancestor::div[contains(@class, 'cell_output')]").first
    widget_link = area.locator("a.mha-full-size-widget.mha-full-size-shrunk")
    assert widget_link.count() == 1 and widget_link.is_visible()
    assert widget_link.get_attribute("href") == explorer.locator("img:visible").get_attribute("src")
    explorer.locator(".noUi-handle").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_timeout(300)
    assert widget_link.get_attribute("href") == explorer.locator("img:visible").get_attribute("src")
    assert visit.console_errors == [], visit.console_errors


@pytest.mark.parametrize("device", WIDTHS)
def test_bertviz_views_show_every_head_in_the_column(open_page, device):
    width, height = WIDTHS[device]
    page, visit = open_page("chapters/02_multi_head_math.html", width=width, height=height)
    model = page.locator("div[id^='bertviz-model']")
    model.scroll_into_view_if_needed()
    box = model.bounding_box()
    svg = model.locator("svg").first.bounding_box()
    assert svg["x"] >= box["x"] - 1 and svg["x"] + svg["width"] <= box["x"] + box["width"] + 1, (svg, box)
    # the 12 head numbers over the columns, each inside the view
    labels = model.locator("svg > text").evaluate_all(
        "ts => ts.filter(t => /^\\d+$/.test(t.textContent)).map(t => { const r = t.getBoundingClientRect();"
        " return [t.textContent, r.x, r.x + r.width]; })")
    heads = sorted({int(t) for t, x0, x1 in labels if box["x"] <= x0 and x1 <= box["x"] + box["width"]})
    assert heads[-1] == 11 and set(range(12)) <= set(heads), labels
    # the head view: 12 swatches of 12 different colours, each with its number
    swatches = page.locator("div[id^='bertviz-head'] svg rect:has(> title)")
    assert swatches.count() == 12
    fills = swatches.evaluate_all("rs => rs.map(r => getComputedStyle(r).fill)")
    assert len(set(fills)) == 12, fills
    numbers = page.locator("div[id^='bertviz-head'] svg text[font-size='11px']").evaluate_all(
        "ts => ts.map(t => t.textContent)")
    assert numbers == [str(h) for h in range(12)], numbers
    assert visit.console_errors == [], visit.console_errors
