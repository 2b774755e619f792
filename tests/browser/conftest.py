"""Fixtures for the browser tests: the built book on 127.0.0.1, headless Chromium, no network.

* The book is the one `make book` built (``_build/html``; override with MHA_BOOK_HTML). It is
  served by ``http.server`` in a thread, on a free port of 127.0.0.1.
* Chromium is Debian's (/usr/bin/chromium; override with MHA_CHROMIUM), driven by Playwright.
* Requests off the local server go through one route handler: a request to a CDN that the book's
  pages are known to use (require.js, the ipywidgets HTML manager, MathJax, d3, jquery) is answered
  from the npm copies in ``tests/browser/node_modules`` (``npm ci --prefix tests/browser``); any other
  is aborted and recorded, and the tests fail on it: a page must not need the network. The book's HTML
  documents go through a second handler (below); the book's other files go straight to the local
  server, unrouted (routing every file through Python cost about 2 s a chapter page), and are counted
  from their responses: the status, and the size of the file on disk (gzip size computed once a file).
* ``integrity`` attributes are stripped from the HTML, since a local copy is not byte-identical
  to a CDN's minified file (npm's requirejs ships no .min.js). The book itself serves its own
  copies and has none; this only matters if a page falls back to a CDN URL.
"""
from __future__ import annotations

import collections
import functools
import gzip
import mimetypes
import re
import threading
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import List
from urllib.parse import unquote, urlsplit

import pytest
from playwright.sync_api import Error as PlaywrightError

from book_site import CDN_COPIES, CHROMIUM, CHROMIUM_ARGS, HTML_ROOT, INTEGRITY, NODE_MODULES, require_book


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture(scope="session")
def book_url():
    """Base URL of the built book, served from a thread on 127.0.0.1."""
    require_book()
    handler = functools.partial(_QuietHandler, directory=str(HTML_ROOT))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def chromium_browser():
    require_book()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class PageVisit:
    """What happened while one page loaded."""

    url: str
    console_errors: List[str] = field(default_factory=list)
    unanswered: List[str] = field(default_factory=list)   # requests nothing could answer
    from_cdn_copies: List[str] = field(default_factory=list)  # CDN requests answered locally
    broken: List[str] = field(default_factory=list)       # local responses >= 400
    bytes_loaded: int = 0        # as served here: uncompressed
    bytes_transferred: int = 0   # what a gzip-compressing server (GitHub Pages, a CDN) sends
    stripped_integrity: int = 0
    in_flight: object = None     # the page's InFlight: its requests not yet answered

    def count(self, body: bytes, content_type: str) -> None:
        self.add(*_wire_sizes(body, content_type))

    def add(self, loaded: int, transferred: int) -> None:
        self.bytes_loaded += loaded
        self.bytes_transferred += transferred


def _wire_sizes(body: bytes, content_type: str) -> tuple:
    """(bytes, bytes a gzip-compressing server sends) of one response: servers compress text; images and fonts
    (woff2 is compressed already) go as they are."""
    compressible = any(t in content_type for t in ("text", "javascript", "json", "svg", "xml"))
    return len(body), len(gzip.compress(body, 6)) if compressible else len(body)


def _content_type(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


@functools.lru_cache(maxsize=None)
def _file_sizes(path: Path, mtime_ns: int) -> tuple:
    """_wire_sizes of one of the book's files, computed once a file (and version)."""
    return _wire_sizes(path.read_bytes(), _content_type(path))


def _is_document(url: str) -> bool:
    """An HTML document of the book (a page, a frame): its integrity attributes are stripped as it is served."""
    return urlsplit(url).path.endswith((".html", "/"))


def _answer_from_npm(url: str):
    for pattern, target in CDN_COPIES:
        m = re.fullmatch(pattern, url.split("?")[0])
        if m:
            path = NODE_MODULES / m.expand(target)
            if path.is_file():
                return path
    return None


def open_book_page(browser, book_url: str, rel: str, width: int = 1280, height: int = 900, content: str = None):
    """(context, page, PageVisit): ``rel`` of the book loaded in a new context of ``browser``, widgets drawn."""
    context = browser.new_context(viewport={"width": width, "height": height}, service_workers="block")
    page = context.new_page()
    visit = PageVisit(url=book_url + rel)

    def document(route):
        url = route.request.url
        if content is not None and url == visit.url:  # the test page, as if the server sent it
            body, n = INTEGRITY.subn(b"", content.encode())
            visit.stripped_integrity += n
            visit.count(body, "text/html")
            route.fulfill(status=200, body=body, content_type="text/html")
            return
        try:
            response = route.fetch()
            body = response.body()
        except PlaywrightError as err:
            # a page closing while its request is in flight (its test over, the next one running):
            # nothing to answer, and no reason to fail the test that happens to be running
            if "disposed" in str(err) or "closed" in str(err):
                return
            raise
        if response.status >= 400:
            visit.broken.append(f"{response.status} {url}")
        if "text/html" in response.headers.get("content-type", ""):
            body, n = INTEGRITY.subn(b"", body)
            visit.stripped_integrity += n
        visit.count(body, response.headers.get("content-type", ""))
        route.fulfill(response=response, body=body)

    def off_site(route):
        url = route.request.url
        if url.startswith("data:") or url.startswith("blob:"):
            route.continue_()
            return
        local = _answer_from_npm(url)
        if local is not None:
            body = local.read_bytes()
            visit.from_cdn_copies.append(url)
            visit.count(body, _content_type(local))
            route.fulfill(status=200, body=body, content_type=_content_type(local),
                          headers={"Access-Control-Allow-Origin": "*"})
            return
        visit.unanswered.append(url)
        route.abort("blockedbyclient")

    def served(response):  # the book's other files, straight from the local server
        url = response.url
        if not url.startswith(book_url) or url == visit.url or _is_document(url):
            return
        if response.status >= 400:
            visit.broken.append(f"{response.status} {url}")
            return
        path = HTML_ROOT / unquote(urlsplit(url).path.lstrip("/"))
        if path.is_file():
            visit.add(*_file_sizes(path, path.stat().st_mtime_ns))

    visit.in_flight = InFlight(page)
    page.route(lambda url: url == visit.url or (url.startswith(book_url) and _is_document(url)), document)
    page.route(lambda url: not url.startswith(book_url), off_site)
    page.on("response", served)
    page.on("console", lambda msg: visit.console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda err: visit.console_errors.append(f"uncaught: {err}"))
    try:
        page.goto(visit.url, wait_until="load")
        settle(page, visit.in_flight)
    except BaseException:
        context.close()  # nobody else holds it yet
        raise
    return context, page, visit


@pytest.fixture
def open_page(chromium_browser, book_url):
    """``open_page("chapters/x.html") -> (page, PageVisit)``, loaded and with widgets drawn.

    ``content=...`` serves that HTML at ``rel`` instead of the book's file (a test page of
    our own, on the book's origin, through the same request handling).
    """
    contexts = []

    def _open(rel: str, width: int = 1280, height: int = 900, content: str = None):
        context, page, visit = open_book_page(chromium_browser, book_url, rel, width, height, content)
        contexts.append(context)
        return page, visit

    yield _open
    for context in contexts:
        context.close()


KEPT_PAGES = 2  # loaded pages a worker keeps for loaded_page (a page at both widths)


@pytest.fixture(scope="session")
def _kept_pages(chromium_browser):
    kept = collections.OrderedDict()  # (rel, width, height) -> (context, page, visit), the last used last
    yield kept
    for context, _, _ in kept.values():
        context.close()


@pytest.fixture
def loaded_page(_kept_pages, chromium_browser, book_url):
    """``loaded_page(rel, width, height) -> (page, PageVisit)``, as open_page, for tests that only read a page.

    The worker keeps the last KEPT_PAGES pages loaded: a test asking for one of them gets it again, scrolled
    to the top, its visit holding everything seen since it loaded. A test must not change such a page (no
    clicks, typing, routes or viewport changes): use open_page for that. Parametrize ``rel`` with
    ``scope="module"`` so that pytest runs the tests of one page one after another.
    """
    def _load(rel: str, width: int = 1280, height: int = 900):
        key = (rel, width, height)
        if key in _kept_pages:
            _kept_pages.move_to_end(key)
            _, page, visit = _kept_pages[key]
            page.evaluate("window.scrollTo(0, 0)")
            return page, visit
        _kept_pages[key] = open_book_page(chromium_browser, book_url, rel, width, height)
        while len(_kept_pages) > KEPT_PAGES:
            _kept_pages.popitem(last=False)[1][0].close()
        return _kept_pages[key][1:]

    return _load


def _content(page) -> str:
    # index.html redirects (meta refresh) to the first page; wait until navigation is over
    for _ in range(50):
        try:
            page.wait_for_load_state("load")
            return page.content()
        except PlaywrightError:
            page.wait_for_timeout(100)
    return page.content()


class InFlight:
    """The requests of a page (and its frames) not yet answered; data: and blob: URLs are no network."""

    def __init__(self, page):
        self.open = set()
        page.on("request", lambda r: None if r.url.startswith(("data:", "blob:")) else self.open.add(r))
        page.on("requestfinished", lambda r: self.open.discard(r))
        page.on("requestfailed", lambda r: self.open.discard(r))


QUIET_MS = 150  # settle(): no request open for this long once the page's math and fonts are in


# The page's own late loads: MathJax (its script is async) typesets, then its fonts load when laid out.
MATH_AND_FONTS = """async () => {
  const started = () => window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
  if (document.querySelector('script[src*="mathjax" i]'))
    for (let i = 0; i < 300 && !started(); i++) await new Promise(r => setTimeout(r, 50));
  if (started()) await window.MathJax.startup.promise;
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  await document.fonts.ready;
  return true;
}"""


def settle(page, in_flight: InFlight) -> None:
    """Wait until widgets and bertviz views have drawn and the network is quiet.

    Quiet means: MathJax has typeset, the fonts are in, and no request of the page's ``InFlight`` has been open
    for QUIET_MS (Playwright's ``networkidle``, 500 ms without a connection, took about 350 ms longer a page
    load, over ~300 loads a run; it still decides after 30 s of requests that never go quiet).
    """
    html = _content(page)
    if "application/vnd.jupyter.widget-state+json" in html:
        page.wait_for_selector(".jupyter-widgets, .widget-box, .lm-Widget", state="attached", timeout=30_000)
    if ".mha-attention-explorer" in html or "mha-attention-explorer" in html:
        page.wait_for_selector(".mha-attention-explorer img", state="visible", timeout=30_000)
    for view_id in re.findall(r'id="(bertviz-[\w-]+)"', html):
        page.wait_for_function(
            "id => { const d = document.getElementById(id); return d && d.querySelector('svg *'); }",
            arg=view_id, timeout=30_000,
        )
    page.evaluate(MATH_AND_FONTS)
    quiet = 0
    for _ in range(600):  # at most ~30 s: then as before, Playwright's networkidle decides
        page.wait_for_timeout(50)  # lets Playwright deliver the request events
        quiet = quiet + 50 if not in_flight.open else 0
        if quiet >= QUIET_MS:
            return
    page.wait_for_load_state("networkidle")
