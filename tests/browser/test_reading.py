"""How each chapter reads (issue 30): it shows before it tells, its code does not crowd out its
figures, and nothing is cut off on a phone.

On every chapter page of the built book:

* at 1280 x 800 the first figure (an image, a canvas or a live view) starts within the first
  1.2 screen heights;
* live first (issue 50): the chapter's first live view starts within the first 1.5 screen heights
  at 1280 x 800 and within the first 2 at 390 x 844, and so does the interactive-figures page's;
* code the reader sees (code cells not folded away) takes at most a quarter of the page's height
  at 1280 px;
* at 1280 px and at 390 px no visible code line is cut off: the code wraps or fits;
* at 390 px every display equation, table or printed output that is wider than its box scrolls
  inside that box, and the box says so (the class ``mha-scrolls``, which draws a "scroll the
  equation", "scroll the table sideways" or "scroll the output sideways" label), on the chapters, the
  intro and the interactive-figures page; at 1280 px the same holds for the chapters' tables and
  printed outputs;
* figure captions render their symbols: no raw TeX (``$``, ``\\command``) and no tag text such as
  ``<bos>`` outside code.
"""
from __future__ import annotations

import re

import pytest

from book_site import book_pages, settle_math

pytestmark = pytest.mark.browser

CHAPTERS = [p for p in book_pages() if p.startswith("chapters/0")] or ["<no built book>"]
READ_ON_A_PHONE = CHAPTERS + [p for p in book_pages() if p in ("intro.html", "chapters/interactive_figures.html")]
# Every chapter opens with its live view, and so does the page that explains the views.
LIVE_FIRST = CHAPTERS + [p for p in book_pages() if p == "chapters/interactive_figures.html"]
LIVE_BOUND = {1280: (800, 1.5), 390: (844, 2.0)}  # width: (screen height, screens within which the view starts)
# TODO(issue 50): chapters 1, 8 and 9 are being rewritten (issue 51); until their openings paste their live
# views, they keep the older bound (the first live view within the first third of the page). Remove each
# from this set when its rewrite lands, so that it meets LIVE_BOUND too.
LIVE_LATER: set = set()  # pages allowed a later live view (none: every chapter opens with one)

READING = """() => {
  const art = document.querySelector('.bd-article') || document.body;
  const H = document.documentElement.scrollHeight;
  const top = el => el.getBoundingClientRect().top + scrollY;
  const shown = el => {
    if (el.closest('details:not([open])')) return false;  // folded code and outputs
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const figures = [...art.querySelectorAll('img, canvas, .mha-live-view')]
    .filter(e => !e.closest('.mha-live-view') || e.classList.contains('mha-live-view')).filter(shown);
  const live = [...art.querySelectorAll('.mha-live-view')].filter(shown);
  let code = 0;
  for (const el of art.querySelectorAll('.cell_input')) if (shown(el)) code += el.getBoundingClientRect().height;
  const cut = [...art.querySelectorAll('.cell_input pre')].filter(shown)
    .filter(p => p.scrollWidth > p.clientWidth + 1).map(p => p.textContent.slice(0, 60));
  return {
    height: H,
    firstFigure: figures.length ? top(figures[0]) : null,
    firstLive: live.length ? top(live[0]) : null,
    code, cut,
  };
}"""

EQUATIONS = """() => [...document.querySelectorAll(
    '.bd-article mjx-container[display="true"], .bd-article table, .bd-article .cell_output pre')]
  .filter(m => !m.closest('details:not([open])'))
  .filter(m => m.getBoundingClientRect().width > 0)
  .map(m => ({wide: m.scrollWidth > m.clientWidth + 1, overflow: getComputedStyle(m).overflowX,
              hinted: m.classList.contains('mha-scrolls'), text: (m.textContent || '').slice(0, 40)}))"""

# a table's box (and the border the theme draws around it) against its widest row: as wide as its columns
TABLE_BOXES = """() => [...document.querySelectorAll('.bd-article table')]
  .filter(t => !t.closest('details:not([open])') && t.getBoundingClientRect().width > 0)
  .map(t => ({box: t.getBoundingClientRect().width, rows: Math.max(0, ...[...t.rows].map(r => r.getBoundingClientRect().width)),
              text: (t.textContent || '').trim().slice(0, 40)}))"""

CAPTIONS = """() => [...document.querySelectorAll('.bd-article figcaption')].map(c => {
  const copy = c.cloneNode(true);
  copy.querySelectorAll('code, mjx-container, .headerlink').forEach(e => e.remove());
  return copy.textContent;
})"""


@pytest.mark.parametrize("rel", CHAPTERS, scope="module")
def test_chapter_shows_before_it_tells(loaded_page, rel):
    page, _ = loaded_page(rel, width=1280, height=800)
    settle_math(page)
    m = page.evaluate(READING)
    assert m["firstFigure"] is not None, f"{rel} has no figure"
    assert m["firstFigure"] <= 1.2 * 800, \
        f"{rel}: the first figure starts {m['firstFigure']:.0f} px down, past 1.2 screens (960 px)"
    if m["firstLive"] is not None and rel in LIVE_LATER:
        assert m["firstLive"] <= m["height"] / 3, \
            f"{rel}: the first live view starts at {m['firstLive'] / m['height']:.0%} of the page, past the first third"
    share = m["code"] / m["height"]
    assert share <= 0.25, f"{rel}: visible code is {share:.0%} of the page height at 1280 px (at most 25%)"
    assert not m["cut"], f"{rel}: code lines cut off at 1280 px: {m['cut']}"


@pytest.mark.parametrize("width", sorted(LIVE_BOUND))
@pytest.mark.parametrize("rel", LIVE_FIRST, scope="module")
def test_page_opens_with_its_live_view(loaded_page, rel, width):
    """Live first: the view starts within 1.5 screens at 1280 x 800 and 2 at 390 x 844, on every chapter page."""
    height, screens = LIVE_BOUND[width]
    page, _ = loaded_page(rel, width=width, height=height)
    settle_math(page)
    m = page.evaluate(READING)
    assert m["firstLive"] is not None, f"{rel} has no live view"
    if rel in LIVE_LATER:
        pytest.skip(f"{rel}: live view at {m['firstLive'] / height:.1f} screens; its rewrite (issue 51) brings it up")
    assert m["firstLive"] <= screens * height, \
        f"{rel}: the first live view starts {m['firstLive'] / height:.2f} screens down at {width} px (at most {screens})"


def _scroll_hints(page, rel, width):
    for box in page.evaluate(EQUATIONS):
        if box["wide"]:
            assert box["overflow"] in ("auto", "scroll"), f"{rel}: {box['text']!r} is cut off at {width} px"
            assert box["hinted"], f"{rel}: {box['text']!r} scrolls at {width} px without the scroll hint"


@pytest.mark.parametrize("rel", READ_ON_A_PHONE, scope="module")
def test_phone_keeps_code_equations_and_tables_in_reach(loaded_page, rel):
    page, _ = loaded_page(rel, width=390, height=844)
    settle_math(page)
    m = page.evaluate(READING)
    assert not m["cut"], f"{rel}: code lines cut off at 390 px: {m['cut']}"
    _scroll_hints(page, rel, 390)


@pytest.mark.parametrize("rel", CHAPTERS, scope="module")
def test_wide_tables_and_outputs_say_they_scroll_at_1280(loaded_page, rel):
    page, _ = loaded_page(rel, width=1280, height=800)
    settle_math(page)
    _scroll_hints(page, rel, 1280)
    for table in page.evaluate(TABLE_BOXES):  # a narrow table's border box hugs its columns
        assert table["box"] <= table["rows"] + 4, f"{rel}: the box of {table['text']!r} is {table['box']:.0f} px " \
            f"wide around rows of {table['rows']:.0f} px"


@pytest.mark.parametrize("rel", CHAPTERS, scope="module")
def test_captions_render_their_symbols(loaded_page, rel):
    page, _ = loaded_page(rel, width=1280, height=800)
    settle_math(page)
    for text in page.evaluate(CAPTIONS):
        assert "$" not in text, f"{rel}: raw TeX in a caption: {text[:120]!r}"
        assert not re.search(r"\\[a-zA-Z]+", text), f"{rel}: a TeX command in a caption: {text[:120]!r}"
        assert not re.search(r"<[a-z/][^>]*>", text), f"{rel}: tag text in a caption: {text[:120]!r}"
