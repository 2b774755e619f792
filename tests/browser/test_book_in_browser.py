"""The built book in headless Chromium, with no network (see conftest.py).

For every page: no JavaScript error in the console, no request that only the network could
answer, at most ~5 MB loaded, and a full-page screenshot in _build/screenshots/ for review.
Pages with an attention explorer: moving each slider by mouse and by keyboard changes the
visible map (pixels compared before and after). Pages with bertviz views: every view draws its
SVG. Chapter pages: the Colab link has the form colab.research.google.com/github/<org>/<repo>/
blob/main/<path>.ipynb, with the configured org/repo and a path that git tracks. Every page:
no broken internal link, anchor or image.
"""
from __future__ import annotations

import base64
import io
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

import pytest
import yaml
from PIL import Image

from book_site import FULL_PAGE_SCREENSHOTS, HTML_ROOT, ROOT, SCREENSHOTS, book_pages, require_book, settle_math

pytestmark = pytest.mark.browser

MAX_PAGE_BYTES = 3_000_000  # issue 50: at most 3 MB gzip before the reader acts
PAGES = book_pages() or ["<no built book>"]
WIDTHS = {"laptop": (1280, 800), "phone": (390, 844)}  # (width, height)
PHONE_PANEL_SHARE = 0.5  # the least share of a multi-panel figure's pixels a 390 px phone shows


def _page_text(rel: str) -> str:
    path = HTML_ROOT / rel
    return path.read_text(encoding="utf-8") if path.exists() else ""


EXPLORER_PAGES = [p for p in PAGES if "mha-attention-explorer" in _page_text(p)]
BERTVIZ_PAGES = [p for p in PAGES if 'id="bertviz-' in _page_text(p)]
NOTEBOOK_PAGES = [p for p in PAGES if (HTML_ROOT / "_sources" / Path(p).with_suffix(".ipynb")).exists()]


# --- every page ------------------------------------------------------------------------------

@pytest.mark.parametrize("rel", PAGES, scope="module")
def test_page_loads_without_errors_or_network(loaded_page, rel):
    require_book()
    page, visit = loaded_page(rel, *WIDTHS["laptop"])
    page.wait_for_load_state("networkidle")  # the strict quiet (500 ms without a connection) before counting
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / (rel.replace("/", "__").removesuffix(".html") + ".png")), full_page=FULL_PAGE_SCREENSHOTS)
    assert not visit.console_errors, f"{rel}: JavaScript errors in the console: {visit.console_errors}"
    assert not visit.unanswered, f"{rel}: requests that needed the network: {visit.unanswered}"
    assert not visit.broken, f"{rel}: missing files: {visit.broken}"
    # Page weight = bytes a gzip-compressing server sends (GitHub Pages does). Uncompressed, the widget
    # manager alone is 1.9 MB (the theme's 1.5 MB icon script is left out: _ext/mha_book_assets.py).
    print(f"{rel}: {visit.bytes_transferred / 1e6:.2f} MB transferred, {visit.bytes_loaded / 1e6:.2f} MB uncompressed")
    assert visit.bytes_transferred <= MAX_PAGE_BYTES, (
        f"{rel}: {visit.bytes_transferred / 1e6:.2f} MB transferred ({visit.bytes_loaded / 1e6:.2f} MB uncompressed)")


def test_the_themes_icons_come_from_its_webfont_without_its_icon_script(loaded_page):
    """The theme's icons (menu, search, download ...) are drawn by its stylesheet's Font Awesome webfont; its
    1.5 MB fontawesome.js is not loaded (_ext/mha_book_assets.py, item 4)."""
    require_book()
    page, _ = loaded_page("chapters/02_multi_head_math.html", *WIDTHS["laptop"])
    scripts = page.evaluate("[...document.scripts].map(s => s.src).filter(Boolean)")
    assert scripts and not [s for s in scripts if "fontawesome" in s]
    icons = page.evaluate("""() => [...document.querySelectorAll('i.fa-solid, i.fas, i.fab')].map(i => {
        const before = getComputedStyle(i, '::before');
        return {cls: i.className, content: before.content, font: before.fontFamily, width: i.getBoundingClientRect().width,
                visible: i.getClientRects().length > 0};
    })""")
    assert len(icons) >= 5, icons
    for icon in icons:
        assert icon["content"] not in ("none", "normal", '""') and "Font Awesome" in icon["font"], icon
    assert any(icon["visible"] and icon["width"] > 0 for icon in icons)
    assert page.evaluate("document.fonts.check('900 16px \"Font Awesome 6 Free\"')")


@pytest.mark.parametrize("rel", [p for p in PAGES if p in EXPLORER_PAGES or p in BERTVIZ_PAGES] or ["<none>"],
                         scope="module")
def test_book_serves_its_own_scripts(loaded_page, rel):
    """Widget and bertviz pages load require.js, the widget manager, MathJax, d3 and jquery
    from the book itself (_static/vendor/), not from a CDN (cases.md 18)."""
    require_book()
    page, visit = loaded_page(rel, *WIDTHS["laptop"])
    assert not visit.from_cdn_copies, f"{rel}: scripts requested from CDNs: {visit.from_cdn_copies}"


def test_cdn_requests_are_answered_from_npm_copies(open_page):
    """The safety net itself: what a stock page asks the CDNs for loads from tests/browser's npm
    copies, whatever its integrity attribute says; anything else is refused and recorded."""
    require_book()
    content = """<html><head>
      <script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.4/require.min.js"
              integrity="sha256-Ae2Vz/4ePdIu6ZyI/5ZGsYnb+m0JlOmKPjt6XZ9JJkA=" crossorigin="anonymous"></script>
      <script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>
    </head><body><p>\\(x^2\\)</p><img src="https://example.org/not-in-the-book.png"></body></html>"""
    page, visit = open_page("_mha_cdn_test.html", content=content)
    versions = page.evaluate("""() => new Promise((resolve, reject) => {
        require.config({paths: {d3: "https://cdnjs.cloudflare.com/ajax/libs/d3/5.7.0/d3.min",
                                jquery: "https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.0/jquery.min"}});
        require(["d3", "jquery"], (d3, $) => resolve([d3.version, $.fn.jquery]), reject);
    })""")
    assert versions == ["5.7.0", "2.2.4"]  # jquery 2.2.4 stands in for bertviz's 2.0.0
    page.wait_for_function("() => window.MathJax && window.MathJax.version && document.querySelector('mjx-container')")
    assert page.evaluate("MathJax.version").startswith("3.")
    assert visit.unanswered == ["https://example.org/not-in-the-book.png"]
    assert any("require.js/2.3.4" in url for url in visit.from_cdn_copies)
    assert visit.stripped_integrity == 1  # npm's require.js is not cdnjs's minified file


# --- explorers -------------------------------------------------------------------------------

def _visible_map(explorer) -> bytes:
    image = explorer.locator("img:visible")
    assert image.count() == 1, "an explorer must show exactly one image"
    return image.screenshot()


def _readout(explorer) -> str:
    return explorer.locator(".widget-readout").first.inner_text().strip()


@pytest.mark.parametrize("rel", EXPLORER_PAGES or ["<no explorer in the book>"])
def test_explorer_sliders_change_the_map_by_mouse_and_keyboard(open_page, rel):
    require_book()
    assert EXPLORER_PAGES, "no page of the built book has an attention explorer"
    page, visit = open_page(rel)
    explorers = page.locator(".mha-attention-explorer")
    assert explorers.count() >= 1
    for i in range(explorers.count()):
        explorer = explorers.nth(i)
        explorer.scroll_into_view_if_needed()
        handle = explorer.locator(".noUi-handle").first
        track = explorer.locator(".noUi-target").first

        # mouse: drag the handle to the far end of its track (right, or left if it starts at the right)
        before, label_before = _visible_map(explorer), _readout(explorer)
        hbox, tbox = handle.bounding_box(), track.bounding_box()
        centre = hbox["x"] + hbox["width"] / 2
        at_right = centre > tbox["x"] + tbox["width"] / 2
        target = tbox["x"] + 1 if at_right else tbox["x"] + tbox["width"] - 1
        page.mouse.move(centre, hbox["y"] + hbox["height"] / 2)
        page.mouse.down()
        page.mouse.move(target, hbox["y"] + hbox["height"] / 2, steps=12)
        page.mouse.up()
        page.wait_for_timeout(200)
        after, label_after = _visible_map(explorer), _readout(explorer)
        assert label_after != label_before, f"explorer {i}: dragging did not move the slider"
        if after == before:  # (not `assert`: pytest would print both PNGs)
            pytest.fail(f"{rel}, explorer {i}: the slider moved ({label_before} -> {label_after}) "
                        "but the map did not change")

        # keyboard: focus the handle, one step back towards where it started
        handle.focus()
        page.keyboard.press("ArrowRight" if at_right else "ArrowLeft")
        page.wait_for_timeout(200)
        keyed, label_keyed = _visible_map(explorer), _readout(explorer)
        assert label_keyed != label_after, f"explorer {i}: the arrow key did not move the slider"
        if keyed == after:
            pytest.fail(f"{rel}, explorer {i}: the slider moved by keyboard ({label_after} -> {label_keyed}) "
                        "but the map did not change")
    assert not visit.console_errors, f"{rel}: JavaScript errors in the console: {visit.console_errors}"


# --- bertviz ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rel", BERTVIZ_PAGES or ["<no bertviz view in the book>"], scope="module")
def test_every_bertviz_view_draws_its_svg(loaded_page, rel):
    require_book()
    assert BERTVIZ_PAGES, "no page of the built book has a bertviz view"
    page, visit = loaded_page(rel, *WIDTHS["laptop"])
    views = page.locator("div[id^='bertviz-']")
    assert views.count() >= 1
    for i in range(views.count()):
        view = views.nth(i)
        n_shapes = view.locator("svg *").count()
        n_text = view.locator("svg text").count()
        assert n_shapes > 20 and n_text > 0, f"{rel}: bertviz view {i} drew {n_shapes} SVG elements"
    assert not visit.console_errors, f"{rel}: JavaScript errors in the console: {visit.console_errors}"


# --- every page at a laptop's and a phone's width (issue 21) ------------------------------

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
  // multi-panel figures (plot_heads grids, figure_pair): the rendering chosen and the share of its pixels shown
  const panels = [...document.querySelectorAll('.bd-article img.mha-heads-figure, .bd-article picture.mha-figure-pair img')]
    .filter(i => !i.closest('.mha-live-view') && i.naturalWidth && i.getBoundingClientRect().width > 0)
    .map(i => ({alt: i.alt.slice(0, 60), shown: +(i.getBoundingClientRect().width / i.naturalWidth).toFixed(2),
                narrow: i.parentElement.tagName === 'PICTURE' && i.currentSrc !== i.src}));
  return {scrollWidth: document.documentElement.scrollWidth, width, wide, math, badAlt, panels};
}"""


@pytest.mark.parametrize("device", WIDTHS)
@pytest.mark.parametrize("rel", PAGES, scope="module")
def test_page_reads_at_laptop_and_phone_width(loaded_page, rel, device):
    """Nothing is wider than the screen, every display equation fits its column on a laptop, every content
    image has real alt text, no console error; a screenshot of the first screen at each width goes to
    _build/screenshots/ for a person to look at."""
    width, height = WIDTHS[device]
    page, visit = loaded_page(rel, width=width, height=height)
    settle_math(page)
    m = page.evaluate(MEASURE)
    assert m["scrollWidth"] <= m["width"], f"{rel} is {m['scrollWidth']} px wide at {width} px: {m['wide']}"
    assert not m["wide"], f"{rel}: elements past the right edge at {width} px: {m['wide']}"
    if device == "laptop":
        assert not m["math"], f"{rel}: display equations wider than the column at {width} px: {m['math']}"
    assert not m["badAlt"], f"{rel}: images without real alt text: {m['badAlt']}"
    # issue 50: a multi-panel figure has a phone layout, chosen by the page: on a phone it shows at least half
    # its pixels (the wide grids showed 0.24-0.41), on a laptop its wide layout
    if device == "phone":
        small = [p for p in m["panels"] if p["shown"] < PHONE_PANEL_SHARE]
        assert not small, f"{rel}: multi-panel figures shown below {PHONE_PANEL_SHARE} of their pixels: {small}"
    else:
        assert not any(p["narrow"] for p in m["panels"]), f"{rel}: a phone layout at {width} px: {m['panels']}"
    assert visit.console_errors == [], visit.console_errors
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{rel.replace('/', '__')}.{device}.png"), full_page=False)



# --- Colab links -----------------------------------------------------------------------------

def _config_repository():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    url = config["repository"]["url"].rstrip("/")
    org, repo = urlsplit(url).path.strip("/").split("/")[:2]
    return org, repo


def _tracked(path: str) -> bool:
    result = subprocess.run(["git", "ls-files", "--error-unmatch", path], cwd=ROOT, capture_output=True)
    return result.returncode == 0


COLAB = re.compile(r"https://colab\.research\.google\.com/github/([\w.-]+)/([\w.-]+)/blob/([\w.-]+)/(.+\.ipynb)")


@pytest.mark.parametrize("rel", NOTEBOOK_PAGES or ["<no notebook page>"])
def test_colab_link_points_at_the_committed_notebook(rel):
    require_book()
    links = sorted(set(re.findall(r'href="(https://colab\.research\.google\.com[^"]*)"', _page_text(rel))))
    assert links, f"{rel}: no Colab link"
    org, repo = _config_repository()
    for link in links:
        m = COLAB.fullmatch(link)
        assert m, f"{rel}: Colab link of the wrong form: {link}"
        assert (m.group(1), m.group(2)) == (org, repo), f"{rel}: {link} is not {org}/{repo}"
        assert m.group(3) == "main", f"{rel}: {link} is not on branch main"
        assert (ROOT / m.group(4)).is_file(), f"{rel}: {m.group(4)} does not exist"
        assert _tracked(m.group(4)), f"{rel}: {m.group(4)} is not committed, so Colab cannot open it"


# --- internal links and images -------------------------------------------------------------

class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links, self.images = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href") is not None:
            self.links.append(attrs["href"])
        elif tag == "link" and attrs.get("href") and attrs.get("rel") in ("stylesheet", "prev", "next", "index", "search"):
            self.links.append(attrs["href"])
        elif tag == "script" and attrs.get("src"):
            self.links.append(attrs["src"])
        elif tag == "img" and attrs.get("src"):
            self.images.append((attrs["src"], attrs.get("alt")))


_PARSED: dict = {}


def _refs(rel: str) -> _Refs:
    if rel not in _PARSED:
        parser = _Refs()
        parser.feed(_page_text(rel))
        _PARSED[rel] = parser
    return _PARSED[rel]


def _is_external(url: str) -> bool:
    return bool(urlsplit(url).scheme) or url.startswith("//")


@pytest.mark.parametrize("rel", PAGES)
def test_no_broken_internal_link_or_image(rel):
    require_book()
    refs = _refs(rel)
    page_dir = (HTML_ROOT / rel).parent
    problems = []
    for href in refs.links:
        if not href or _is_external(href) or href.startswith(("mailto:", "javascript:")):
            continue
        target, fragment = urldefrag(href)
        target = target.split("?")[0]
        if target:
            path = (page_dir / unquote(target)).resolve()
            if path.is_dir():
                path = path / "index.html"
            if not path.is_file() or HTML_ROOT not in path.parents:
                problems.append(f"link to a missing file: {href}")
                continue
            target_rel = str(path.relative_to(HTML_ROOT))
        else:
            target_rel = rel
        if fragment and target_rel.endswith(".html") and fragment not in _refs(target_rel).ids:
            problems.append(f"link to a missing anchor: {href}")
    for src, _alt in refs.images:
        if src.startswith("data:"):
            try:
                Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).verify()
            except Exception as err:  # a corrupt inline image
                problems.append(f"inline image that does not decode: {err}")
            continue
        if _is_external(src):
            problems.append(f"image from another site (needs the network): {src}")
            continue
        if not (page_dir / unquote(src.split("?")[0])).is_file():
            problems.append(f"missing image: {src}")
    assert problems == [], f"{rel}: " + "; ".join(problems)


def test_static_head_grids_carry_alt_text():
    require_book()
    found = []
    for rel in PAGES:
        # one <img>, or a <picture> of a wide and a phone layout (its <img> inside)
        for alt in re.findall(r'<(?:img class="mha-heads-figure"|picture class="mha-figure-pair mha-heads-figure">'
                              r'<source[^>]*><img)[^>]*alt="([^"]*)"', _page_text(rel)):
            found.append((rel, alt))
    assert found, "no plot_heads figure in the built book"
    for rel, alt in found:
        assert alt.startswith("Grid of ") and "heat map" in alt, f"{rel}: alt text {alt[:80]!r}"


# --- hostile tokens (cases.md 20) --------------------------------------------------------------

HOSTILE_TOKENS = ["[CLS]", "</script><script>window.__pwned = 1</script>",
                  '"><img src=x onerror="window.__pwned = 2">', "<!--", "&amp;", "[SEP]"]


@pytest.mark.parametrize("kind", ["head", "model"])
def test_hostile_tokens_in_bertviz_views_run_nothing_and_show_as_text(open_page, kind):
    import torch

    from mha_lib.viz import bertviz_view

    n = len(HOSTILE_TOKENS)
    weights = torch.rand(2, 3, n, n, generator=torch.Generator().manual_seed(0)).softmax(-1)
    view = bertviz_view(weights, HOSTILE_TOKENS, kind=kind).data
    content = f"<!doctype html><html><head><meta charset='utf-8'></head><body>{view}</body></html>"
    page, visit = open_page(f"_mha_hostile_{kind}.html", content=content)
    assert page.evaluate("window.__pwned") is None
    if kind == "model":  # the model view writes the tokens when a head's thumbnail is clicked
        page.locator("svg rect[style*='opacity: 0']").first.click()
    shown = page.eval_on_selector_all("svg text", "els => els.map(e => e.textContent)")
    for token in HOSTILE_TOKENS:
        assert token in shown, (token, shown[:12])
    assert visit.console_errors == [] and visit.unanswered == []
