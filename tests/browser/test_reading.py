"""How each chapter reads (issue 30): it shows before it tells, its code does not crowd out its
figures, and nothing is cut off on a phone.

On every chapter page of the built book:

* at 1280 x 800 the first figure (an image, a canvas or a live view) starts within the first
  1.2 screen heights, and the chapter's first live view, where it has one, within the first third
  of the page;
* code the reader sees (code cells not folded away) takes at most a quarter of the page's height
  at 1280 px;
* at 1280 px and at 390 px no visible code line is cut off: the code wraps or fits;
* at 390 px every display equation or table that is wider than its box scrolls inside that box,
  and the box says so (the class ``mha-scrolls``, which draws a "scroll the equation" or "scroll
  the table sideways" label), on the chapters, the intro and the interactive-figures page;
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

EQUATIONS = """() => [...document.querySelectorAll('.bd-article mjx-container[display="true"], .bd-article table')]
  .filter(m => m.getBoundingClientRect().width > 0)
  .map(m => ({wide: m.scrollWidth > m.clientWidth + 1, overflow: getComputedStyle(m).overflowX,
              hinted: m.classList.contains('mha-scrolls'), text: (m.textContent || '').slice(0, 40)}))"""

CAPTIONS = """() => [...document.querySelectorAll('.bd-article figcaption')].map(c => {
  const copy = c.cloneNode(true);
  copy.querySelectorAll('code, mjx-container, .headerlink').forEach(e => e.remove());
  return copy.textContent;
})"""


@pytest.mark.parametrize("rel", CHAPTERS)
def test_chapter_shows_before_it_tells(open_page, rel):
    page, _ = open_page(rel, width=1280, height=800)
    settle_math(page)
    m = page.evaluate(READING)
    assert m["firstFigure"] is not None, f"{rel} has no figure"
    assert m["firstFigure"] <= 1.2 * 800, \
        f"{rel}: the first figure starts {m['firstFigure']:.0f} px down, past 1.2 screens (960 px)"
    if m["firstLive"] is not None:
        assert m["firstLive"] <= m["height"] / 3, \
            f"{rel}: the first live view starts at {m['firstLive'] / m['height']:.0%} of the page, past the first third"
    share = m["code"] / m["height"]
    assert share <= 0.25, f"{rel}: visible code is {share:.0%} of the page height at 1280 px (at most 25%)"
    assert not m["cut"], f"{rel}: code lines cut off at 1280 px: {m['cut']}"


@pytest.mark.parametrize("rel", READ_ON_A_PHONE)
def test_phone_keeps_code_equations_and_tables_in_reach(open_page, rel):
    page, _ = open_page(rel, width=390, height=844)
    settle_math(page)
    m = page.evaluate(READING)
    assert not m["cut"], f"{rel}: code lines cut off at 390 px: {m['cut']}"
    for eq in page.evaluate(EQUATIONS):
        if eq["wide"]:
            assert eq["overflow"] in ("auto", "scroll"), f"{rel}: {eq['text']!r} is cut off at 390 px"
            assert eq["hinted"], f"{rel}: {eq['text']!r} scrolls at 390 px without the scroll hint"


@pytest.mark.parametrize("rel", CHAPTERS)
def test_captions_render_their_symbols(open_page, rel):
    page, _ = open_page(rel, width=1280, height=800)
    settle_math(page)
    for text in page.evaluate(CAPTIONS):
        assert "$" not in text, f"{rel}: raw TeX in a caption: {text[:120]!r}"
        assert not re.search(r"\\[a-zA-Z]+", text), f"{rel}: a TeX command in a caption: {text[:120]!r}"
        assert not re.search(r"<[a-z/][^>]*>", text), f"{rel}: tag text in a caption: {text[:120]!r}"
