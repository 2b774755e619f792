"""The page foundations, on every page of the built book, at 1280 px (a laptop) and 390 px (a
phone): nothing is wider than the screen, every display equation fits its column on a laptop,
every content image has real alt text, the phone's navigation button opens the sidebar, and no
console error. Screenshots of both widths go to _build/screenshots/ for a person to look at."""
from __future__ import annotations

import pytest

from book_site import SCREENSHOTS, book_pages

pytestmark = pytest.mark.browser

PAGES = book_pages() or ["<no built book>"]
WIDTHS = {"laptop": (1280, 800), "phone": (390, 844)}

MEASURE = """() => {
  const clipped = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden') return true;
    }
    return false;
  };
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width && r.right > width + 1 && getComputedStyle(el).position !== 'fixed' && !clipped(el))
      wide.push(el.tagName + ' ' + (el.textContent || '').trim().slice(0, 40));
    if (wide.length > 4) break;
  }
  const math = [...document.querySelectorAll('mjx-container[display="true"]')]
    .filter(m => m.scrollWidth > m.clientWidth + 1)
    .map(m => (m.textContent || '').slice(0, 50));
  const badAlt = [...document.querySelectorAll('.bd-article img')]
    .filter(i => i.getBoundingClientRect().width > 0)
    .filter(i => !i.alt || i.alt.length < 8 || /\\.(png|jpe?g|svg|gif)$/i.test(i.alt) || i.alt.includes('/'))
    .map(i => i.src.slice(-60));
  return {scrollWidth: document.documentElement.scrollWidth, width, wide, math, badAlt};
}"""


def _settle_math(page) -> None:
    page.wait_for_function(
        "() => !window.MathJax || !MathJax.startup || !MathJax.startup.promise || "
        "MathJax.startup.promise.then(() => true)", timeout=20_000)
    page.wait_for_timeout(300)


@pytest.mark.parametrize("device", WIDTHS)
@pytest.mark.parametrize("rel", PAGES)
def test_page_reads_at_laptop_and_phone_width(open_page, rel, device):
    width, height = WIDTHS[device]
    page, visit = open_page(rel, width=width, height=height)
    _settle_math(page)
    m = page.evaluate(MEASURE)
    assert m["scrollWidth"] <= m["width"], f"{rel} is {m['scrollWidth']} px wide at {width} px: {m['wide']}"
    assert not m["wide"], f"{rel}: elements past the right edge at {width} px: {m['wide']}"
    if device == "laptop":
        assert not m["math"], f"{rel}: display equations wider than the column at {width} px: {m['math']}"
    assert not m["badAlt"], f"{rel}: images without real alt text: {m['badAlt']}"
    assert visit.console_errors == [], visit.console_errors
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{rel.replace('/', '__')}.{device}.png"), full_page=False)


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
