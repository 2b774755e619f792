"""The live views (issue 17) in Chromium, offline, against mha_lib in Python.

A test page of our own, written here with :mod:`mha_lib.live` (a sentence view, a toy-compare view
and a prune view), is served on the built book's origin, so it loads the book's
``_static/mha_book.js``, ``_static/live/*.mjs``, the vendored onnxruntime-web and the models that
``make book`` exports into ``_static/models/``. It does not depend on the chapters.

Checked: the page draws from the notebook's numbers before any download; every view's
``element.mhaLive.run`` gives ``lastResult`` equal to mha_lib within 0.04 (MiniLM, quantised for
the web) or 1e-5 (the toy models, exact); head toggles equal mha_lib's ``head_mask``; keyboard
use; 390 px; bad input (empty, > 256 tokens, HTML in the text); a model that fails to load and a
browser without WebAssembly; no console error and no request off the local server. MiniLM is
loaded once for the module (one page, shared by the tests that run it).
"""
from __future__ import annotations

import json
from importlib import resources

import pytest
import torch

from book_site import CHROMIUM, HTML_ROOT, SCREENSHOTS

pytestmark = pytest.mark.browser

MINILM = "all-MiniLM-L6-v2"
# The quantised MiniLM (8-bit weights, int8 embedding table) against fp32 mha_lib, max abs: the build measures
# 0.026 on its 36 check sentences, and a 256-token text reaches 0.032. Issue 17 asked for 0.01, which no 8-bit
# recipe within 25 MB met (CHANGELOG, 0.3.0). The page itself is exact: it equals onnxruntime on the same file to 1e-4.
MINILM_TOLERANCE = 0.04
TOY_TOLERANCE = 1e-5  # the toy models ship exact (fp32)
TOYS = ["ch1-h1", "ch1-h2", "ch1-h4", "ch1-h8"]
REL = "chapters/_live_views_test.html"  # served from memory, on the book's origin
SENTENCES = [
    "The cat sat on the mat.",
    "Café owners in Zürich don't open before 9:00, naïvely hoping for tourists!",
    'Hello <img src=x onerror="window.__xss = 1"> and </script><script>window.__xss = 2</script> world',
]
VIEW = "document.querySelector('[data-view=%s]')"


def _require_models():
    manifest = HTML_ROOT / "_static" / "models" / "manifest.json"
    if not manifest.exists():
        pytest.fail(f"{manifest} is missing: `make book` exports the live views' models (tools/export_site_models.py)")
    models = json.loads(manifest.read_text())["models"]
    missing = [m for m in [MINILM, *TOYS] if m not in models]
    assert not missing, f"models/manifest.json lacks {missing}"


@pytest.fixture(scope="module")
def bert():
    from mha_lib.pretrained import load_bert

    model, _ = load_bert(verbose=False)
    return model


@pytest.fixture(scope="module")
def configs(bert):
    from mha_lib import live, tasks

    pairs = json.loads((resources.files("mha_lib") / "data" / "paraphrases.json").read_text(encoding="utf-8"))["pairs"][:8]
    batch = tasks.SHIPPED["ch1-h1"].make_task().dataset(1, seed=0)
    return {
        "sentence": live.sentence_config(bert, "The animal didn't cross the street because it was too tired."),
        "toy-compare": live.toy_compare_config(TOYS, batch),
        "prune": live.prune_config(bert, "She caught the last bus and did not have to walk home.",
                                   [p["a"] for p in pairs], [p["b"] for p in pairs], [p["negative"] for p in pairs]),
    }


@pytest.fixture(scope="module")
def page_html(configs):
    from mha_lib import live, viz

    sc = configs["sentence"]
    fig = viz.plot_heads(torch.tensor(sc["attentions"][0]), sc["tokens"], title="layer 0")
    views = [live.live_view("sentence", MINILM, sc, fallback=fig),
             live.live_view("toy-compare", TOYS[0], configs["toy-compare"]),
             live.live_view("prune", MINILM, configs["prune"])]
    body = "".join(f"<section>{v.html}</section>" for v in views)
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><title>live views</title>'
            '<script src="../_static/mha_book.js"></script>'
            "<style>body{font-family:sans-serif;margin:0} main{max-width:720px;margin:0 auto;padding:0 12px}</style>"
            f"</head><body><main>{body}</main></body></html>")


class Visit:
    def __init__(self):
        self.console_errors, self.off_site, self.requests = [], [], []


def _open(browser, book_url, html, width=1280, height=900, routes=None, init_script=None):
    """A page showing ``html`` at REL; every request off the local server is refused and recorded."""
    context = browser.new_context(viewport={"width": width, "height": height}, service_workers="block")
    page = context.new_page()
    visit = Visit()
    url = book_url + REL

    def route(r):
        u = r.request.url
        visit.requests.append((r.request.method, u[len(book_url):] if u.startswith(book_url) else u))
        if u == url:
            r.fulfill(status=200, body=html, content_type="text/html")
        elif routes and any(u.endswith(s) for s in routes):
            r.fulfill(status=routes[next(s for s in routes if u.endswith(s))], body="not here")
        elif u.startswith(book_url) or u.startswith("data:") or u.startswith("blob:"):
            r.continue_()
        else:
            visit.off_site.append(u)
            r.abort("blockedbyclient")

    page.route("**/*", route)
    page.on("console", lambda m: visit.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: visit.console_errors.append(f"uncaught: {e}"))
    if init_script:
        page.add_init_script(init_script)
    page.goto(url, wait_until="load")
    page.wait_for_function("[...document.querySelectorAll('.mha-live-view')].every(e => e.mhaLive)", timeout=30_000)
    return context, page, visit


@pytest.fixture(scope="module")
def shared(chromium_browser, book_url, page_html):
    """One page for the module: MiniLM is downloaded and compiled once."""
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html)
    yield page, visit
    context.close()


def run(page, view, arg):
    return page.evaluate(f"async (x) => {{ const r = await {VIEW % view}.mhaLive.run(x); return r; }}", arg)


def py_attentions(bert, text, mask=None):
    with torch.no_grad():
        out, batch = bert.encode_text([text], output_attentions=True, head_mask=mask)
    return batch.tokens[0], torch.stack([a[0] for a in out.attentions])


def test_views_draw_from_the_notebook_numbers_before_any_download(shared, configs):
    page, visit = shared
    page.wait_for_function("[...document.querySelectorAll('.mha-live-status')].every(s => s.textContent.includes(' MB'))",
                           timeout=30_000)  # the download size, said before fetching
    got = [(m, r) for m, r in visit.requests if r.endswith(".onnx") or (r.endswith(".wasm") and m == "GET")]
    assert got == [], f"downloaded before any action: {got}"
    for view, config in configs.items():
        state = page.evaluate(f"""() => {{ const e = {VIEW % view};
            return {{model: e.mhaLive.model, result: e.mhaLive.lastResult, canvases: e.querySelectorAll('canvas').length,
                     fallbackHidden: [...e.querySelectorAll('.mha-live-fallback')].every(i => i.hidden),
                     status: e.querySelector('.mha-live-status').textContent}}; }}""")
        assert state["fallbackHidden"]
        if view == "toy-compare":
            assert state["model"] == TOYS[0] and set(state["result"]["models"]) == set(TOYS)
            expected = config["results"][TOYS[0]]["attentions"]
        else:
            assert state["model"] == MINILM and state["result"]["tokens"] == config["tokens"]
            expected = config["attentions"]
        diff = (torch.tensor(state["result"]["attentions"]) - torch.tensor(expected)).abs().max().item()
        assert diff <= 5e-5 + 1e-6  # the notebook's numbers, rounded to 4 decimals in data-config
        assert state["canvases"] >= 2
    assert visit.console_errors == [] and visit.off_site == []


def test_sentence_view_equals_mha_lib(shared, bert):
    page, visit = shared
    for text in SENTENCES:
        r = run(page, "sentence", text)
        tokens, att = py_attentions(bert, text)
        assert r["tokens"] == tokens
        diff = (torch.tensor(r["attentions"]) - att).abs().max().item()
        assert diff <= MINILM_TOLERANCE, f"{text!r}: attention maps differ from mha_lib by {diff:.4f}"
    assert page.evaluate("window.__xss") is None  # the HTML in the text stayed text
    assert page.evaluate(f"{VIEW % 'sentence'}.querySelectorAll('.mha-live img, .mha-live script').length") == 0
    assert visit.console_errors == [] and visit.off_site == []


def test_sentence_view_equals_onnxruntime_on_the_served_file(shared, bert):
    """The browser's part alone (tokenizer, onnxruntime-web at one thread, result shaping): the
    served file run by onnxruntime in Python gives the same maps, to float32 rounding."""
    import numpy as np
    import onnxruntime

    page, _ = shared
    session = onnxruntime.InferenceSession(str(HTML_ROOT / "_static" / "models" / f"{MINILM}.onnx"),
                                           providers=["CPUExecutionProvider"])
    for text in SENTENCES:
        r = run(page, "sentence", text)
        batch = bert.tokenize([text])
        ids = batch.input_ids.numpy()
        att = session.run(["attentions"], {"input_ids": ids, "token_type_ids": np.zeros_like(ids),
                                           "key_padding_mask": np.zeros(ids.shape, bool),
                                           "head_mask": np.ones((6, 12), np.float32)})[0][:, 0]
        assert r["tokens"] == batch.tokens[0]
        assert np.abs(np.array(r["attentions"]) - att).max() <= 1e-4


def test_typing_recomputes_and_bad_input_keeps_the_maps(shared, bert):
    page, _ = shared
    box = page.locator("[data-view=sentence] textarea")
    box.fill("")
    box.type("Dogs bark at night.")
    page.wait_for_function(f"{VIEW % 'sentence'}.mhaLive.lastResult.text === 'Dogs bark at night.'", timeout=30_000)
    assert page.evaluate(f"{VIEW % 'sentence'}.mhaLive.lastResult.tokens") == py_attentions(bert, "Dogs bark at night.")[0]
    before = page.evaluate(f"{VIEW % 'sentence'}.mhaLive.lastResult.tokens")
    rejected = page.evaluate(f"async () => {{ try {{ await {VIEW % 'sentence'}.mhaLive.run('  '); return null; }} "
                             "catch (e) { return String(e); } }")
    assert rejected and "empty" in rejected
    assert "empty" in page.locator("[data-view=sentence] .mha-live-status").text_content()
    assert page.evaluate(f"{VIEW % 'sentence'}.mhaLive.lastResult.tokens") == before
    long = " ".join(["attention"] * 300)
    r = run(page, "sentence", long)
    assert len(r["tokens"]) == 256 and r["truncated"]
    status = page.locator("[data-view=sentence] .mha-live-status").text_content()
    assert "302 tokens" in status and "256" in status
    tokens, att = py_attentions(bert, long)
    assert r["tokens"] == tokens
    diff = (torch.tensor(r["attentions"]) - att).abs().max().item()
    assert diff <= MINILM_TOLERANCE, f"256 tokens: attention maps differ from mha_lib by {diff:.4f}"


def test_toy_compare_equals_mha_lib(shared):
    from mha_lib import tasks

    page, visit = shared
    task = tasks.SHIPPED["ch1-h1"].make_task()
    batch = task.dataset(3, seed=11)
    models = {name: tasks.load_trained(name) for name in TOYS}
    for b in range(3):
        x = {"ids": batch.input_ids[b].tolist(), "types": batch.token_type_ids[b].tolist()}
        r = run(page, "toy-compare", x)
        labels = batch.labels[b].tolist()
        for name in TOYS:
            with torch.no_grad():
                logits, att = tasks.logits_and_attentions(models[name], batch[b:b + 1])
            got = r["models"][name]
            assert (torch.tensor(got["attentions"]) - torch.stack([a[0] for a in att])).abs().max().item() <= TOY_TOLERANCE
            assert got["predictions"] == logits[0].argmax(-1).tolist()
            assert got["correct"] == [None] + [p == y for p, y in zip(got["predictions"][1:], labels[1:])]
        assert r["tokens"] == task.tokens(batch, b)
    # a reader's edit: move the mark with the keyboard, change a token with the keyboard
    page.locator("[data-view=toy-compare] input[type=radio]").nth(2).focus()
    page.keyboard.press("Space")
    page.wait_for_function(f"{VIEW % 'toy-compare'}.mhaLive.lastResult.types[2] === 1", timeout=30_000)
    select = page.locator("[data-view=toy-compare] select").nth(5)
    old = int(select.input_value())
    select.focus()
    page.keyboard.press("ArrowDown" if old < task.vocab_size - 1 else "ArrowUp")
    page.wait_for_function(f"{VIEW % 'toy-compare'}.mhaLive.lastResult.ids[5] !== {old}", timeout=30_000)
    r = page.evaluate(f"{VIEW % 'toy-compare'}.mhaLive.lastResult")
    edited = tasks.TaskBatch(torch.tensor([r["ids"]]), torch.tensor([r["types"]]), torch.zeros(1, 16, dtype=torch.long),
                             torch.tensor([2]))
    with torch.no_grad():
        logits, _ = tasks.logits_and_attentions(models["ch1-h8"], edited)
    assert r["models"]["ch1-h8"]["predictions"] == logits[0].argmax(-1).tolist()
    assert visit.console_errors == [] and visit.off_site == []


def test_prune_toggles_equal_head_mask(shared, bert, configs):
    from mha_lib import live

    page, visit = shared
    c = configs["prune"]
    A = c["num_anchors"]
    toggles = page.locator("[data-view=prune] .mha-live-toggles button")
    for l, h in [(0, 0), (0, 3), (2, 7), (5, 11)]:  # a reader turns heads off, with the keyboard
        toggles.nth(l * 12 + h).focus()
        page.keyboard.press("Enter")
    page.wait_for_function(f"(() => {{ const r = {VIEW % 'prune'}.mhaLive.lastResult; "
                           "return r.source === 'browser' && r.mask.flat().filter(v => !v).length === 4; })()",
                           timeout=60_000)
    r = page.evaluate(f"{VIEW % 'prune'}.mhaLive.lastResult")
    mask = torch.ones(6, 12)
    for l, h in [(0, 0), (0, 3), (2, 7), (5, 11)]:
        mask[l, h] = 0
        assert toggles.nth(l * 12 + h).get_attribute("aria-pressed") == "false"
    assert r["mask"] == mask.int().tolist()
    py = live.prune_config(bert, c["text"], c["texts"][:A], c["texts"][A:2 * A], c["texts"][2 * A:], mask=mask)
    assert abs(r["fidelity"] - py["fidelity"]) <= 0.005, (r["fidelity"], py["fidelity"])
    assert abs(r["mrr"] - py["mrr"]) <= 0.5 / A + 1e-6, (r["mrr"], py["mrr"])  # at most one rank moved by one place
    scores = page.locator("[data-view=prune] .mha-live-scores").text_content()
    assert f"{r['fidelity']:.3f}" in scores and "68 of 72 heads on" in scores
    assert visit.console_errors == [] and visit.off_site == []
    diff = (torch.tensor(r["attentions"]) - torch.tensor(py["attentions"])).abs().max().item()
    assert diff <= MINILM_TOLERANCE, f"maps with the head mask differ from mha_lib by {diff:.4f}"


def test_keyboard_reaches_layers_heads_and_the_enlarged_map(shared):
    page, _ = shared
    slider = page.locator("[data-view=sentence] input[type=range]")
    slider.focus()
    page.keyboard.press("ArrowRight")
    assert slider.get_attribute("aria-valuetext") == "layer 1 (2 of 6)"
    assert page.locator("[data-view=sentence] .mha-live-head span").first.text_content() == "L1.H0"
    page.keyboard.press("Tab")  # the "all layers" switch
    page.keyboard.press("Tab")  # the first head
    focused = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert focused.startswith("L1.H0"), focused
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.tagName") == "CANVAS"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    readout = page.locator("[data-view=sentence] .mha-live-readout").text_content()
    tokens = page.evaluate(f"{VIEW % 'sentence'}.mhaLive.lastResult.tokens")
    weight = page.evaluate(f"{VIEW % 'sentence'}.mhaLive.lastResult.attentions[1][0][1][1]")
    assert readout.startswith("L1.H0") and f"“{tokens[1]}” (position 1)" in readout and f"{weight:.3f}" in readout
    page.keyboard.press("Escape")
    assert page.locator("[data-view=sentence] .mha-live-zoom").is_hidden()
    assert page.evaluate("document.activeElement.getAttribute('aria-label')").startswith("L1.H0")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # a visible focus ring


def test_phone_width_no_sideways_scroll(chromium_browser, book_url, page_html):
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html, width=390, height=844)
    try:
        page.locator("[data-view=sentence] .mha-live-head").nth(4).click()  # a tap enlarges a head
        over = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert over <= 0, f"{over} px of sideways scroll at 390 px"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "live_views.phone.png"), full_page=True)
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_a_model_that_fails_to_load_says_so_and_the_figure_stays(chromium_browser, book_url, page_html):
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html, routes={f"{MINILM}.onnx": 404})
    try:
        err = page.evaluate(f"async () => {{ try {{ await {VIEW % 'sentence'}.mhaLive.run('A cat.'); return null; }} "
                            "catch (e) { return String(e); } }")
        assert err and "404" in err
        status = page.locator("[data-view=sentence] .mha-live-status")
        assert "could not be loaded" in status.text_content() and "404" in status.text_content()
        assert page.locator("[data-view=sentence] .mha-live-fallback").is_visible()
        assert all("404" in e for e in visit.console_errors), visit.console_errors  # the browser logs the 404 itself
    finally:
        context.close()


def test_without_webassembly_the_figure_stays(chromium_browser, book_url, page_html):
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html, init_script="delete window.WebAssembly;")
    try:
        for view in ("sentence", "toy-compare", "prune"):
            status = page.locator(f"[data-view={view}] .mha-live-status").text_content()
            assert "WebAssembly" in status, status
        assert page.locator("[data-view=sentence] .mha-live-fallback").is_visible()
        assert page.locator("[data-view=sentence] .mha-live-head").count() == 12  # the notebook's maps still draw
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


# --- the chapters' own views ---------------------------------------------------------------------

def _live_pages():
    from book_site import book_pages

    return [rel for rel in book_pages() if "mha-live-view" in (HTML_ROOT / rel).read_text(encoding="utf-8")]


LIVE_PAGES = _live_pages()


@pytest.mark.parametrize("rel", LIVE_PAGES or ["<no live view in the book>"])
def test_chapter_live_views_mount_and_show_the_notebook_numbers(chromium_browser, book_url, rel):
    """Every live view of the built book mounts, draws the maps its notebook computed, hides its
    static figure, downloads nothing before the reader acts, and logs no error."""
    assert LIVE_PAGES, "no page of the built book has a live view"
    _require_models()
    context = chromium_browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    page = context.new_page()
    visit = Visit()

    def route(r):
        u = r.request.url
        visit.requests.append((r.request.method, u[len(book_url):] if u.startswith(book_url) else u))
        if u.startswith(book_url) or u.startswith("data:") or u.startswith("blob:"):
            r.continue_()
        else:
            visit.off_site.append(u)
            r.abort("blockedbyclient")

    page.route("**/*", route)
    page.on("console", lambda m: visit.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: visit.console_errors.append(f"uncaught: {e}"))
    try:
        page.goto(book_url + rel, wait_until="load")
        page.wait_for_function("[...document.querySelectorAll('.mha-live-view')].every(e => e.mhaLive && e.mhaLive.lastResult)",
                               timeout=30_000)
        views = page.evaluate("""() => [...document.querySelectorAll('.mha-live-view')].map(e => ({
            view: e.dataset.view, config: JSON.parse(e.dataset.config), result: e.mhaLive.lastResult,
            canvases: e.querySelectorAll('canvas').length,
            fallbackHidden: [...e.querySelectorAll('.mha-live-fallback')].every(i => i.hidden)}))""")
        assert views
        for v in views:
            assert v["fallbackHidden"] and v["canvases"] >= 1, v["view"]
            if v["view"] == "toy-compare":
                first = v["config"]["models"][0]
                expected, tokens = v["config"]["results"][first]["attentions"], None
            else:
                expected, tokens = v["config"]["attentions"], v["config"]["tokens"]
                assert v["result"]["tokens"] == tokens
            assert torch.tensor(v["result"]["attentions"]).shape == torch.tensor(expected).shape
            assert torch.equal(torch.tensor(v["result"]["attentions"]), torch.tensor(expected))
        page.wait_for_timeout(500)
        got = [r for m, r in visit.requests if r.endswith(".onnx") or (r.endswith(".wasm") and m == "GET")]
        assert got == [], f"{rel}: downloaded before any action: {got}"
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_chapter_1_view_runs_the_readers_sequence_like_mha_lib(chromium_browser, book_url):
    """Chapter 1's view, on the page itself: an edited sequence gives mha_lib's maps and predictions."""
    from mha_lib import tasks

    rel = "chapters/01_single_head_limits.html"
    context = chromium_browser.new_context(viewport={"width": 390, "height": 844}, service_workers="block")
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(book_url + rel, wait_until="load")
        page.wait_for_function("document.querySelector('.mha-live-view') && document.querySelector('.mha-live-view').mhaLive",
                               timeout=30_000)
        task = tasks.SHIPPED["ch1-h1"].make_task()
        batch = task.dataset(1, seed=21)
        x = {"ids": batch.input_ids[0].tolist(), "types": batch.token_type_ids[0].tolist()}
        r = page.evaluate("async (x) => await document.querySelector('.mha-live-view').mhaLive.run(x)", x)
        for name in TOYS:
            with torch.no_grad():
                logits, att = tasks.logits_and_attentions(tasks.load_trained(name), batch)
            got = r["models"][name]
            assert (torch.tensor(got["attentions"]) - torch.stack([a[0] for a in att])).abs().max().item() <= TOY_TOLERANCE
            assert got["predictions"] == logits[0].argmax(-1).tolist()
        assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
        assert errors == []
    finally:
        context.close()
