"""The Chinese edition of the built book (_build/html/zh/, issue 34): every page is there and linked
both ways, its prose is Chinese, its glued numbers are the English page's, it renders Chinese with a
served font at phone width (no empty boxes), and its live views run with a Chinese interface.

Threshold for untranslated prose: a Chinese chapter page may keep at most 2% of its article's
paragraphs in English (a paragraph of 8 or more English words and no Chinese character, outside
code, outputs and live views); quoted example sentences that a model reads stay English. The API
reference's pages (chapters/api/*) are the docstrings and stay English, which they say."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from book_site import HTML_ROOT, SCREENSHOTS, book_pages, settle_math, wait_for_live_views

pytestmark = pytest.mark.browser

ENGLISH = book_pages("en")
CHINESE = book_pages("zh")
CJK = re.compile(r"[\u4e00-\u9fff]")
MAX_ENGLISH_SHARE = 0.02
SWITCH = re.compile(r'<nav class="mha-lang-switch"[^>]*><a href="([^"]+)" hreflang="([^"]+)"')


def _switch(rel: str):
    text = (HTML_ROOT / rel).read_text(encoding="utf-8")
    found = SWITCH.search(text)
    assert found, f"{rel}: no language switch"
    target = (HTML_ROOT / rel).parent / found[1]
    return target.resolve(), found[2], text


def test_every_page_has_its_chinese_page_and_the_switch_leads_there_and_back():
    assert ENGLISH and len(CHINESE) == len(ENGLISH), (len(ENGLISH), len(CHINESE))
    for rel in ENGLISH:
        if "http-equiv" in (HTML_ROOT / rel).read_text(encoding="utf-8")[:500].lower():  # index.html: a redirect
            assert (HTML_ROOT / "zh" / rel).exists()
            continue
        target, lang, _ = _switch(rel)
        assert target == (HTML_ROOT / "zh" / rel).resolve() and target.exists() and lang == "zh-CN", rel
        back, lang, text = _switch("zh/" + rel)
        assert back == (HTML_ROOT / rel).resolve() and lang == "en", rel
        assert re.search(r'<html lang="zh-CN"', text), rel
        assert '<link rel="alternate" hreflang="en"' in text, rel
        colab = re.compile(r'href="(https://colab\.research\.google\.com/[^"]+)"')
        english = (HTML_ROOT / rel).read_text(encoding="utf-8")
        assert colab.findall(text) == colab.findall(english), rel  # the same notebooks open in Colab


def test_the_chinese_pages_load_the_shared_scripts_and_models_from_the_english_site():
    for rel in CHINESE:
        text = (HTML_ROOT / rel).read_text(encoding="utf-8")
        for ref in re.findall(r'(?:src|href)="([^"]*_static/[^"?#]+)', text):
            assert ((HTML_ROOT / rel).parent / ref).resolve().exists(), f"{rel}: {ref} is missing"
    assert not (HTML_ROOT / "zh" / "_static" / "models").exists()  # one copy of the models


class _Paragraphs(HTMLParser):
    """The text of each <p> in the article, outside code cells' outputs, live views and code."""

    SKIP = ("cell_output", "mha-live-view", "highlight", "citation", "mha-lang-switch", "caption")

    def __init__(self):
        super().__init__()
        self.stack, self.paragraphs, self.in_article = [], [], False

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class", "") or ""
        if tag == "article":
            self.in_article = True
        self.stack.append((tag, any(s in cls for s in self.SKIP) or tag in ("pre", "code", "script", "style")))
        if tag == "p" and self.in_article and not any(skip for _, skip in self.stack):
            self.paragraphs.append("")

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break
        if tag == "article":
            self.in_article = False

    def handle_data(self, data):
        if self.stack and self.stack[-1][0] == "p" and self.in_article and self.paragraphs \
                and not any(skip for _, skip in self.stack):
            self.paragraphs[-1] += data
        elif self.paragraphs and self.in_article and not any(skip for _, skip in self.stack) \
                and any(t == "p" for t, _ in self.stack):
            self.paragraphs[-1] += data


def _paragraphs(rel: str) -> list:
    parser = _Paragraphs()
    parser.feed((HTML_ROOT / rel).read_text(encoding="utf-8"))
    return [p.strip() for p in parser.paragraphs if p.strip()]


@pytest.mark.parametrize("rel", [p for p in CHINESE if "/api/" not in p and p != "zh/index.html"]
                         or ["<no Chinese edition>"])
def test_chinese_page_prose_is_translated(rel):
    paragraphs = _paragraphs(rel)
    assert paragraphs, f"{rel}: no paragraph found"
    english = [p for p in paragraphs if len(re.findall(r"[A-Za-z]{2,}", p)) >= 8 and not CJK.search(p)]
    assert len(english) <= MAX_ENGLISH_SHARE * len(paragraphs), f"{rel}: English paragraphs: {[p[:80] for p in english]}"


def _pasted(rel: str) -> list:
    text = (HTML_ROOT / rel).read_text(encoding="utf-8")
    return re.findall(r'<span class="pasted-text">([^<]*)</span>', text)


@pytest.mark.parametrize("rel", [p for p in ENGLISH if p.startswith("chapters/0")] or ["<no built book>"])
def test_chinese_chapter_pastes_the_same_computed_numbers(rel):
    english, chinese = _pasted(rel), _pasted("zh/" + rel)
    assert english, f"{rel}: no glued value"
    numbers = [v for v in english if re.fullmatch(r"[-+−]?\d[\d.,]*%?", v)]
    assert sorted(numbers) == sorted(v for v in chinese if v in numbers)  # each number, as often
    assert len(chinese) == len(english)  # no glued value lost in a translated paragraph
    assert not [v for v in chinese if v == ""]


# --- in the browser -------------------------------------------------------------------------------

TOFU = """async () => {
  await document.fonts.ready;
  const draw = (font, text) => {
    const c = document.createElement('canvas'); c.width = 400; c.height = 40;
    const g = c.getContext('2d'); g.font = font; g.fillText(text, 4, 30); return c.toDataURL();
  };
  const out = [];
  for (const el of document.querySelectorAll('.mha-lang-switch a, .logo__title, h1, .bd-article p, .bd-article [lang|="zh"], .bd-sidebar-primary a.reference')) {
    const text = (el.textContent.match(/[\\u4e00-\\u9fff]{2,4}/) || [])[0];
    if (!text || el.getBoundingClientRect().width === 0) continue;
    const s = getComputedStyle(el);
    const font = `${s.fontWeight} 24px ${s.fontFamily}`;
    await document.fonts.load(font, text);
    // the same stack without its Chinese fonts draws empty boxes (the notdef glyph of the same Latin
    // font); the page's stack must draw something else
    const latin = s.fontFamily.split(',').filter(f => !/Noto Sans SC|PingFang|Hiragino|YaHei/.test(f)).join(',');
    if (latin === s.fontFamily) continue;  // an English stack (the text's Chinese is in a lang="zh-CN" child)
    out.push({text, same: draw(font, text) === draw(`${s.fontWeight} 24px ${latin || 'sans-serif'}`, text)});
    if (out.length > 12) break;
  }
  return out;
}"""


@pytest.mark.parametrize("rel", ["zh/intro.html", "zh/chapters/06_cross_attention.html", "zh/chapters/glossary.html",
                                 "chapters/glossary.html", "chapters/notation.html"])
def test_chinese_renders_without_empty_boxes_at_phone_width(open_page, rel):
    """Chinese text, on the Chinese pages and where the English pages show it (their "中文" switch, the
    glossary), is drawn with glyphs, not the boxes of a font without Chinese (the test machine has no
    Chinese system font: the served one must do)."""
    page, visit = open_page(rel, width=390, height=844)
    settle_math(page)
    checked = page.evaluate(TOFU)
    chinese = rel.startswith("zh/")
    assert len(checked) >= (3 if chinese else 1) and not [c for c in checked if c["same"]], checked
    assert not chinese or page.evaluate("document.fonts.check('16px \"Noto Sans SC\"', '多头注意力')")
    english_labels = page.locator('[title="Link to this heading"], [aria-label="Toggle primary sidebar"], '
                                  '[title="Toggle primary sidebar"], [aria-label="Color mode"], [title="Color mode"]')
    assert not chinese or english_labels.count() == 0  # the theme's labels, in Chinese (mha_book.js)
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    switch = page.locator(".mha-lang-switch a")
    box = switch.bounding_box()
    assert switch.is_visible() and box["height"] >= 44 and switch.inner_text() == ("English" if chinese else "中文"), box
    assert visit.console_errors == [] and visit.broken == [], (visit.console_errors, visit.broken)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{rel.replace('/', '__')}.phone.png"))


def test_language_switch_navigates_both_ways(open_page):
    page, _ = open_page("chapters/05_induction_heads.html", width=1280)
    page.locator(".mha-lang-switch a").click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/zh/chapters/05_induction_heads.html")
    assert CJK.search(page.locator("h1").first.inner_text())
    page.locator(".mha-lang-switch a").click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/chapters/05_induction_heads.html") and "/zh/" not in page.url


def test_sentence_view_speaks_chinese_and_shows_what_minilm_sees_of_chinese(open_page):
    """Chapter 2's sentence view on its Chinese page: Chinese interface, the note that MiniLM's vocabulary is
    English, and a Chinese sentence run as the model sees it (one token per character, [UNK] outside the
    vocabulary)."""
    page, visit = open_page("zh/chapters/02_multi_head_math.html", width=390, height=844)
    wait_for_live_views(page)
    view = page.locator('.mha-live-view[data-view="sentence"]').first
    note = view.locator(".mha-live-language")
    assert note.is_visible() and "[UNK]" in note.inner_text() and CJK.search(note.inner_text())
    buttons = [b for b in view.locator("button").all_inner_texts() if b.strip()]
    english = [b for b in buttons if re.search(r"[A-Za-z][a-z]{2,}", b) and not CJK.search(b)]  # not L3.H0, PNG
    assert buttons and not english, english
    result = view.evaluate("async (e) => await e.mhaLive.run('小明把蛋糕递给小红因为她不饿了。')")
    tokens = result["tokens"]
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "[UNK]" in tokens
    assert all(len(t) == 1 or t in ("[CLS]", "[SEP]", "[UNK]") for t in tokens), tokens
    status = view.locator(".mha-live-status").inner_text()
    assert CJK.search(status) and "[UNK]" in view.inner_text(), status
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    assert visit.console_errors == [] and visit.broken == [], (visit.console_errors, visit.broken)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    view.screenshot(path=str(SCREENSHOTS / "zh__chapters__02_multi_head_math.html.live.phone.png"))


def test_toy_view_runs_with_a_chinese_interface(open_page):
    """Chapter 1's view on its Chinese page runs the reader's sequence like the English page, in Chinese."""
    results = {}
    for rel in ("chapters/01_single_head_limits.html", "zh/chapters/01_single_head_limits.html"):
        page, visit = open_page(rel, width=1280)
        wait_for_live_views(page)
        view = page.locator(".mha-live-view").first
        results[rel] = view.evaluate("async (e) => { const c = JSON.parse(e.dataset.config); "
                                     "const r = await e.mhaLive.run({ids: c.ids, types: c.types}); "
                                     "return Object.values(r.models).map(m => m.predictions); }")
        status = view.locator(".mha-live-status").inner_text()
        assert bool(CJK.search(status)) == rel.startswith("zh/"), status
        assert visit.console_errors == [], visit.console_errors
    assert results["zh/chapters/01_single_head_limits.html"] == results["chapters/01_single_head_limits.html"]


# The book's terms a Chinese reader searches for, and the chapters that explain each (the glossary's
# "explained in", and for the KV cache also chapter 6, whose section "Decoding with a KV cache" is about it):
# one of them must come among the first three results.
SEARCHES = {"多头注意力": {"02_multi_head_math"}, "剪枝": {"04_head_pruning"}, "归纳头": {"05_induction_heads"},
            "交叉注意力": {"06_cross_attention"}, "KV 缓存": {"03_cost_of_more_heads", "06_cross_attention"}}


@pytest.mark.parametrize("query", SEARCHES)
def test_chinese_search_finds_the_chapter_that_explains_a_term(open_page, query):
    """The Chinese site's own search (Sphinx's index, segmented by jieba with the glossary's terms kept
    whole: tools/build_zh.py) lands on the chapter that explains the term, in Chinese."""
    page, visit = open_page(f"zh/search.html?q={query}", width=1280)
    page.wait_for_function("() => document.querySelector('#search-results')?.dataset.mhaDone || "
                           "document.querySelectorAll('#search-results ul.search li').length > 0 || "
                           "/\\d/.test(document.querySelector('#search-results p.search-summary')?.innerText || '')",
                           timeout=30_000)
    page.wait_for_timeout(500)  # the list fills in as Sphinx scores each page
    links = page.eval_on_selector_all("#search-results ul.search li a", "as => as.map(a => a.href)")
    chapters = [re.search(r"/zh/chapters/([\w/-]+)\.html", h).group(1) for h in links if "/zh/chapters/" in h]
    assert chapters, f"{query!r}: no page found on the Chinese site"
    assert SEARCHES[query] & set(chapters[:3]), f"{query!r}: {chapters[:6]}"
    assert all("/zh/" in h for h in links), "a Chinese search must stay in the Chinese edition"
    assert visit.console_errors == [], visit.console_errors


# --- issue 52: diagrams, citations and the sidebar in Chinese ------------------------------------------------------

DIAGRAM_GLYPHS = """async () => {
  const out = [];
  const draw = async (text, w, h) => {
    const img = new Image();
    img.src = 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(text);
    await img.decode();
    const c = document.createElement('canvas'); c.width = w; c.height = h;
    c.getContext('2d').drawImage(img, 0, 0, w, h);
    return c.toDataURL();
  };
  for (const img of document.querySelectorAll('.bd-article img')) {
    if (!/\\.svg$/.test(new URL(img.src).pathname)) continue;
    const text = await (await fetch(img.src)).text();
    const w = img.naturalWidth, h = img.naturalHeight;
    // the same drawing without its embedded font: what a machine without a Chinese font draws (empty boxes)
    const bare = text.replace(/<style>[\\s\\S]*?<\\/style>/, '');
    out.push({src: img.getAttribute('src'), shown: img.complete && w > 0 && img.getBoundingClientRect().width > 0,
              chinese: /[\\u4e00-\\u9fff]/.test(text.replace(/<desc[\\s\\S]*?<\\/desc>|<title[\\s\\S]*?<\\/title>/g, '')),
              fontMatters: (await draw(text, w, h)) !== (await draw(bare, w, h))});
  }
  return out;
}"""


@pytest.mark.parametrize("rel", ["zh/intro.html", "zh/chapters/02_multi_head_math.html"])
def test_chinese_pages_show_chinese_diagrams_drawn_with_their_own_glyphs_at_phone_width(open_page, rel):
    """The diagrams of the Chinese pages are the Chinese copies (tools/diagrams.py, name.zh_CN.svg), whose text is
    Chinese and drawn with the glyphs they embed: without them, this machine (no Chinese system font) would draw
    empty boxes, so the drawing must change when they are taken out. The English pages keep the English ones."""
    page, visit = open_page(rel, width=390, height=844)
    diagrams = page.evaluate(DIAGRAM_GLYPHS)
    assert diagrams and all(".zh_CN.svg" in d["src"] for d in diagrams), diagrams
    assert all(d["shown"] and d["chinese"] and d["fontMatters"] for d in diagrams), diagrams
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    assert visit.console_errors == [] and visit.broken == [], (visit.console_errors, visit.broken)
    english = (HTML_ROOT / rel.removeprefix("zh/")).read_text(encoding="utf-8")
    assert "diagrams" in english or "_images/mha_dataflow.svg" in english
    assert ".zh_CN.svg" not in english
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{rel.replace('/', '__')}.diagrams.phone.png"), full_page=False)


CITATION = re.compile(r'<a class="reference internal" href="[^"]*bibliography\.html#[^"]*"[^>]*>(.*?)</a>', re.S)


def test_chinese_citations_say_deng_ren_not_et_al():
    """{cite:t} and {cite:p} in the Chinese pages: "Vaswani 等人（2017）", never "et al." (the English pages keep it)."""
    chinese = english = 0
    for rel in CHINESE:
        labels = [re.sub(r"<[^>]+>", "", m) for m in CITATION.findall((HTML_ROOT / rel).read_text(encoding="utf-8"))]
        assert not [label for label in labels if "et al" in label], rel
        chinese += sum("等人" in label for label in labels)
    for rel in ENGLISH:
        english += sum("et al" in m for m in CITATION.findall((HTML_ROOT / rel).read_text(encoding="utf-8")))
    assert chinese >= 50 and english >= 50, (chinese, english)
    intro = re.sub(r"<[^>]+>", "", (HTML_ROOT / "zh" / "intro.html").read_text(encoding="utf-8"))
    assert re.search(r"[A-Z][a-z]+ 等人（\d{4}）|（[A-Z][a-z]+ 等人，\d{4}", intro)


def test_the_chinese_sidebar_names_the_api_pages_in_chinese():
    """The 16 API pages stay English (their docstrings), but the sidebar of a Chinese page lists them in Chinese."""
    text = (HTML_ROOT / "zh" / "chapters" / "01_single_head_limits.html").read_text(encoding="utf-8")
    entries = re.findall(r'<a class="reference internal" href="api/[^"]+">(.*?)</a>', text, re.S)
    assert len(entries) == 16, entries
    assert all(CJK.search(re.sub(r"<[^>]+>", "", e)) for e in entries), entries
