"""The live views as a reader uses them (issue 29): a page that never freezes, maps that say whose they
are, a readout that never names a cell of other maps, honest [UNK] tokens, touch targets, long inputs,
and the maps exported in one click.

The same test page as tests/browser/test_live_views.py (a sentence, a toy-compare and a prune view on
the built book's origin, every request off the local server refused), its fixtures imported from there.

The long-task bound: while MiniLM downloads, compiles and runs (onnxruntime-web in its Web Worker)
and while the maps are drawn (six layers: one layer a task), no task of the page's main thread takes
more than 50 ms of CPU time (Chromium's trace).
"""
from __future__ import annotations

import csv
import io
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from book_site import HTML_ROOT, assert_a_quiet_visit_keeps_the_task_bound, run_view
from test_live_views import (  # noqa: F401  (fixtures: bert, configs, page_html)
    MINILM_TOLERANCE, VIEW, _open, _require_models, bert, configs, page_html, py_attentions)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from chromium_trace import main_thread_tasks  # noqa: E402

pytestmark = pytest.mark.browser

HINT = "Point at a cell to read"


def _longest_task_of_a_first_visit(browser, book_url, page_html) -> float:
    """A fresh page (MiniLM not yet downloaded): type, let it load and run, draw six layers, toggle a
    head; the longest stretch of its main thread meanwhile, in ms of CPU."""
    context, page, visit = _open(browser, book_url, page_html)
    try:
        view = VIEW % "sentence"
        page.wait_for_function(f"{view}.querySelector('.mha-live-status').textContent.includes(' MB')")
        browser.start_tracing(page=page, categories=["toplevel"])
        try:
            box = page.locator("[data-view=sentence] textarea")
            box.fill("")
            box.press_sequentially("Typing while the model downloads stays smooth.", delay=20)
            page.wait_for_function(f"{view}.mhaLive.lastResult.text === 'Typing while the model downloads stays smooth.'",
                                   timeout=60_000)
            page.locator("[data-view=sentence] .mha-live-check", has_text="all layers").click()  # all six layers: 72 maps
            page.wait_for_function(f"{view}.querySelectorAll('.mha-live-head canvas').length === 72")
            run_view(page, "sentence", "Six layers of maps are drawn one layer at a time.", packed=True)
            prune = VIEW % "prune"
            page.locator("[data-view=prune] .mha-live-toggles button").nth(5).click()
            page.wait_for_function(f"{prune}.mhaLive.lastResult.mask[0][5] === 0", timeout=60_000)
        finally:
            trace = browser.stop_tracing()
        tasks = main_thread_tasks(trace)
        assert len(tasks) > 100  # the trace saw the page's work
        assert page.evaluate(f"{view}.mhaLive.loaded") and page.evaluate("typeof Worker") == "function"
        assert visit.console_errors == [] and visit.off_site == []
        return tasks[0]
    finally:
        context.close()


def test_no_main_thread_task_over_50_ms_while_minilm_loads_runs_and_draws(chromium_browser, book_url, page_html):
    """Measured as CPU time per task (the trace's thread time), not as wall time: on a two-core machine
    shared with other tests the operating system pauses the page's thread, and a ``longtask`` observer
    would count those pauses too (benchmarks/bench_live.py reports the wall time). With onnxruntime-web on
    the page's thread (``env.wasm.proxy`` off) this test measured a task of 379 ms (the session's
    creation); drawing six layers in one task took 330 ms of wall time on chapter 2's page.

    The page's work is the same at every visit, but a machine busy with other tests slows it too (seen
    here: 130 ms once, beside another browser test; 31-47 ms when quiet): up to three visits, and the
    bound holds for the quietest. With the runtime on the page's thread every visit has the 379 ms task."""
    _require_models()
    assert_a_quiet_visit_keeps_the_task_bound(lambda: _longest_task_of_a_first_visit(chromium_browser, book_url, page_html))


def test_maps_of_an_earlier_text_are_dimmed_and_say_whose_they_are(chromium_browser, book_url, page_html, configs):
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        view = VIEW % "sentence"
        shown = page.locator("[data-view=sentence] .mha-live-shown")
        first = configs["sentence"]["text"]
        assert first.endswith(".") and shown.text_content() == f"The maps of “{first}”"  # one period, the text's
        page.locator("[data-view=sentence] textarea").fill("A new sentence arrives.")
        # the model is still downloading: the old maps stay, dimmed, named as the previous text's
        state = page.evaluate(f"""() => ({{stale: {view}.querySelector('.mha-live').classList.contains('mha-live-stale'),
            opacity: Number(getComputedStyle({view}.querySelector('.mha-live-grid')).opacity),
            loaded: {view}.mhaLive.loaded}})""")
        assert state["stale"] and not state["loaded"], state
        assert shown.text_content().startswith(f"Still the maps of “{first}”")
        page.wait_for_function(f"{view}.mhaLive.lastResult.text === 'A new sentence arrives.'", timeout=60_000)
        assert shown.text_content() == "The maps of “A new sentence arrives.”"
        assert page.evaluate(f"Number(getComputedStyle({view}.querySelector('.mha-live-grid')).opacity)") == 1
        assert state["opacity"] < 0.6
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_readout_is_cleared_when_the_text_or_the_layer_changes(chromium_browser, book_url, page_html):
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        readout = page.locator("[data-view=sentence] .mha-live-readout")

        def point():
            canvas = page.locator("[data-view=sentence] .mha-live-head canvas").first
            box = canvas.bounding_box()
            page.mouse.move(box["x"] + box["width"] * 0.9, box["y"] + box["height"] * 0.9)
            assert " → key " in readout.text_content()

        point()
        slider = page.locator("[data-view=sentence] input[type=range]")
        slider.focus()
        page.keyboard.press("ArrowRight")
        assert readout.text_content().startswith(HINT)  # the cell was one of layer 0's
        point()
        page.mouse.move(0, 0)
        run_view(page, "sentence", "Short.", packed=True)
        assert readout.text_content().startswith(HINT)  # a cell of the old text's maps
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_unknown_tokens_are_counted_and_the_english_vocabulary_said(chromium_browser, book_url, page_html, bert):
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        text = "小明把蛋糕递给小红因为她不饿了。"
        r = run_view(page, "sentence", text, packed=True)
        tokens, att = py_attentions(bert, text)
        assert r["tokens"] == tokens
        assert (torch.tensor(r["attentions"]) - att).abs().max().item() <= MINILM_TOLERANCE
        unknown = tokens.count("[UNK]")
        assert unknown > 0
        status = page.locator("[data-view=sentence] .mha-live-status").text_content()
        assert f" {unknown} of its {len(tokens) - 2} word pieces are [UNK]: the model's vocabulary is English" in status
        run_view(page, "sentence", "No unknown words here.", packed=True)
        assert "[UNK]" not in page.locator("[data-view=sentence] .mha-live-status").text_content()
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_every_control_is_a_44_px_touch_target_on_a_phone(chromium_browser, book_url, page_html):
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html, width=390, height=844, touch=True)
    try:
        # each control's target: the control, or the label that holds it (tapping the label works the control)
        small = page.evaluate("""() => [...document.querySelectorAll(
                '.mha-live button, .mha-live select, .mha-live input')].filter(e => e.offsetParent !== null)
            .map(e => { const t = e.closest('label') || e; const b = t.getBoundingClientRect();
                        return [e.getAttribute('aria-label') || e.textContent || e.type, Math.round(b.width), Math.round(b.height)]; })
            .filter(([, w, h]) => w < 44 || h < 44)""")
        assert small == [], f"controls smaller than 44 x 44 px at 390 px: {small[:8]}"
        count = page.evaluate("document.querySelectorAll('.mha-live button, .mha-live select, .mha-live input').length")
        assert count > 72 + 20  # the prune grid, the toy editor, the layer controls, the downloads
        over = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert over <= 0
        # the toy editor and every model's predictions scroll sideways together
        rows = "[data-view=toy-compare] .mha-live-sequence, [data-view=toy-compare] .mha-live-strip"
        page.evaluate("document.querySelector('[data-view=toy-compare] .mha-live-sequence').scrollLeft = 120")
        page.wait_for_timeout(200)
        lefts = page.evaluate(f"[...document.querySelectorAll('{rows}')].map(r => r.scrollLeft)")
        assert len(lefts) == 5 and lefts[0] > 0 and len(set(lefts)) == 1, lefts
        page.evaluate("document.querySelectorAll('[data-view=toy-compare] .mha-live-strip')[2].scrollLeft = 0")
        page.wait_for_timeout(200)
        assert set(page.evaluate(f"[...document.querySelectorAll('{rows}')].map(r => r.scrollLeft)")) == {0}
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_a_256_token_map_enlarges_readably_and_scrolls_in_its_box(chromium_browser, book_url, page_html, bert):
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html, width=390, height=844)
    try:
        view = "[data-view=sentence]"
        r = run_view(page, "sentence", " ".join(["attention"] * 300), packed=True)
        assert len(r["tokens"]) == 256
        page.locator(f"{view} .mha-live-head").nth(3).click()
        zoom = page.evaluate(f"""() => {{ const s = document.querySelector('{view} .mha-live-zoom-scroll');
            const c = s.querySelector('canvas').getBoundingClientRect();
            return {{canvas: c.width, box: s.clientWidth, boxHeight: s.getBoundingClientRect().height,
                     scrolls: s.scrollWidth > s.clientWidth && s.scrollHeight > s.clientHeight}}; }}""")
        assert zoom["canvas"] >= 256 * 12 and zoom["scrolls"], zoom  # 12 px a cell, every token labelled
        assert zoom["boxHeight"] <= 0.75 * 844 + 2, zoom  # 75vh and its border
        canvas = page.locator(f"{view} .mha-live-zoom canvas")
        canvas.focus()
        for _ in range(40):
            page.keyboard.press("ArrowRight")
        scroll = page.evaluate(f"document.querySelector('{view} .mha-live-zoom-scroll').scrollLeft")
        assert scroll > 0  # the cursor cell stayed in sight
        readout = page.locator(f"{view} .mha-live-readout").text_content()
        assert "(position 0) → key “attention” (position 40)" in readout, readout
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def _download(page, button):
    with page.expect_download() as info:
        button.click()
    download = info.value
    return download.suggested_filename, open(download.path(), "rb").read()


def test_each_view_exports_png_svg_csv_and_json_of_the_maps_shown(chromium_browser, book_url, page_html):
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        text = 'Tom said "<b>hi</b>", then =1+1 & left.'
        r = run_view(page, "sentence", text, packed=True)
        bar = page.locator("[data-view=sentence] .mha-live-export button")
        assert bar.count() == 4
        files = {name.rsplit(".", 1)[1]: (name, body) for name, body in (_download(page, bar.nth(i)) for i in range(4))}
        assert set(files) == {"png", "svg", "csv", "json"}
        assert files["png"][0] == "all-MiniLM-L6-v2_L0.png"
        png = files["png"][1]
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert width >= 800 and height >= 400, (width, height)
        svg = ET.fromstring(files["svg"][1])  # the reader's text is escaped: the SVG parses
        ns = "{http://www.w3.org/2000/svg}"
        n = len(r["tokens"])
        assert len(svg.findall(f".//{ns}rect")) == 1 + 12 * n * n
        texts = [t.text for t in svg.iter(f"{ns}text")]
        assert f"Input: “{text}”" in texts and "L0.H11" in texts and texts[0].startswith("all-MiniLM-L6-v2: attention of layer L0")
        rows = list(csv.DictReader(io.StringIO(files["csv"][1].decode("utf-8-sig"))))
        assert len(rows) == 12 * n * n
        weights = torch.tensor([float(row["weight"]) for row in rows]).reshape(12, n, n)
        assert (weights - torch.tensor(r["attentions"][0])).abs().max().item() <= 1e-6
        keys = {row["key_token"] for row in rows}
        assert "'=" in keys and "=" not in keys and "&" in keys  # "=" is shown by a spreadsheet, never computed
        data = json.loads(files["json"][1])
        assert data["text"] == text and data["tokens"] == r["tokens"] and len(data["heads"]) == 12
        shown = torch.tensor(r["attentions"][0][3])  # float32: the page's weights, exactly
        assert torch.equal(torch.tensor(data["heads"][3]["attention"], dtype=torch.float32), shown)
        # the toy view: every model's heads, the sequence named
        toy = page.locator("[data-view=toy-compare] .mha-live-export button")
        name, body = _download(page, toy.nth(3))
        toys = json.loads(body)
        state = page.evaluate(f"{VIEW % 'toy-compare'}.mhaLive.lastResult")
        assert name.startswith("toy_") and toys["ids"] == state["ids"] and set(toys["results"]) == set(state["models"])
        name, body = _download(page, toy.nth(1))
        heads = sum(len(layer) for m in state["models"] for layer in state["models"][m]["attentions"])
        assert len(ET.fromstring(body).findall(f".//{ns}rect")) == 1 + heads * len(state["ids"]) ** 2
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def test_a_reader_adds_their_own_exported_model_to_the_toy_view(chromium_browser, book_url, page_html):
    """The file is one that mha_lib.export.export_onnx wrote (the site's own chapter-1 model with two
    heads), picked from disk: it must give exactly that model's maps and predictions, and never travel
    to the server. Files that do not fit are refused with the reason, the view unchanged."""
    _require_models()
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        view = VIEW % "toy-compare"
        picker = page.locator("[data-view=toy-compare] input[type=file]")
        status = page.locator("[data-view=toy-compare] .mha-live-status")
        sections = page.locator("[data-view=toy-compare] .mha-live-model")
        assert sections.count() == 4
        # not ONNX at all
        picker.set_input_files(files=[{"name": "notes.onnx", "mimeType": "application/octet-stream",
                                       "buffer": b"<script>window.__xss = 1</script> not a model"}])
        page.wait_for_function(f"{view}.querySelector('.mha-live-status').textContent.includes('not added')",
                               timeout=60_000)
        assert "“notes.onnx” could not be read as an ONNX model" in status.text_content()
        # ONNX, but not a toy model of the view's contract: MiniLM's embeddings file, whose inputs differ
        picker.set_input_files(str(HTML_ROOT / "_static" / "models" / "all-MiniLM-L6-v2.embed.onnx"))
        page.wait_for_function(f"{view}.querySelector('.mha-live-status').textContent.includes('has the inputs')",
                               timeout=60_000)
        assert "the toy view runs models with the inputs [input_ids, token_type_ids, key_padding_mask, head_mask]" \
            in status.text_content()
        assert sections.count() == 4 and page.evaluate("window.__xss") is None
        # the real thing: an exported chapter-1 model
        own = "ch1-h2.onnx"
        picker.set_input_files(str(HTML_ROOT / "_static" / "models" / own))
        page.wait_for_function(f"!!({view}.mhaLive.lastResult.models || {{}})['{own}']", timeout=60_000)
        result = page.evaluate(f"{view}.mhaLive.lastResult")
        assert sections.count() == 5 and set(result["models"]) == {"ch1-h1", "ch1-h2", "ch1-h4", "ch1-h8", own}
        mine, shipped = result["models"][own], result["models"]["ch1-h2"]
        assert mine["predictions"] == shipped["predictions"] and mine["correct"] == shipped["correct"]
        assert (torch.tensor(mine["attentions"]) - torch.tensor(shipped["attentions"])).abs().max().item() == 0
        assert "runs in your browser beside the book's; its file was not uploaded" in status.text_content()
        # an edit reruns it with the others; the file never went to the server
        ids = result["ids"][1:] + result["ids"][:1]
        after = page.evaluate(f"async (x) => await {view}.mhaLive.run(x)", {"ids": ids, "types": result["types"]})
        assert after["models"][own]["predictions"] == after["models"]["ch1-h2"]["predictions"]
        assert [m for m, _ in visit.requests if m not in ("GET", "HEAD")] == []  # nothing sent
        assert [r for _, r in visit.requests if r.endswith("ch1-h2.onnx")] == ["_static/models/ch1-h2.onnx"]  # the site's
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


def _edited(source: Path, dest: Path, change) -> Path:
    """A copy of the ONNX file ``source`` with ``change(graph)`` applied: a hostile reader's file."""
    import onnx

    model = onnx.load(source)
    change(model.graph)
    onnx.save(model, dest)
    return dest


def _reroute(graph, name: str, node) -> str:
    """Make ``node`` the producer of ``name``: the old producer now writes ``name + "_inner"``, which ``node``
    reads (its first input), and every other reader of ``name`` reads the inner value too."""
    inner = name + "_inner"
    for n in graph.node:
        n.output[:] = [inner if o == name else o for o in n.output]
        n.input[:] = [inner if i == name else i for i in n.input]
    node.input[0] = inner
    graph.node.append(node)
    return inner


def _nan_weight_half_outputs(graph):
    """Issue 47, item 2: a NaN weight, and logits and attentions in float16 (the page checked only 32- and
    64-bit float outputs, and drew 512 NaN cells)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weight = max((t for t in graph.initializer if t.data_type == TensorProto.FLOAT), key=lambda t: int(np.prod(t.dims)))
    values = numpy_helper.to_array(weight).copy()
    values.flat[0] = np.nan
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    for out in graph.output:
        _reroute(graph, out.name, helper.make_node("Cast", ["?"], [out.name], to=TensorProto.FLOAT16))
        out.type.tensor_type.elem_type = TensorProto.FLOAT16


def _sixty_four_heads(graph):
    """Issue 47, item 3: the head_mask says 2 heads; the attentions output repeats them 32 times (64 maps)."""
    from onnx import helper

    graph.node.append(helper.make_node("Constant", [], ["repeats"], value=helper.make_tensor(
        "repeats", 7, [5], [1, 1, 32, 1, 1])))
    _reroute(graph, "attentions", helper.make_node("Tile", ["?", "repeats"], ["attentions"]))
    out = next(o for o in graph.output if o.name == "attentions")
    out.type.tensor_type.shape.dim[2].dim_value = 64


def _huge_head_mask(graph):
    """Issue 47, item 3: a (4096, 4096) head_mask for a 2-head model ("4096 layers, 4096 heads" was announced);
    the graph reads its first (1, 2) corner."""
    from onnx import helper

    mask = next(i for i in graph.input if i.name == "head_mask")
    for dim, size in zip(mask.type.tensor_type.shape.dim, (4096, 4096)):
        dim.dim_value = size
    for name, values in (("cut_start", [0, 0]), ("cut_end", [1, 2])):
        graph.node.append(helper.make_node("Constant", [], [name], value=helper.make_tensor(name, 7, [2], values)))
    for n in graph.node:
        n.input[:] = ["head_mask_cut" if i == "head_mask" else i for i in n.input]
    graph.node.append(helper.make_node("Slice", ["head_mask", "cut_start", "cut_end"], ["head_mask_cut"]))


def test_an_own_model_that_computes_nan_or_lies_about_its_heads_is_refused_before_drawing(
        chromium_browser, book_url, page_html, tmp_path):
    """Issue 47: the toy view drew a float16 file's NaN maps ("2 of 15 positions right"), 64 maps of a file
    declaring 2 heads, and announced "4096 layers, 4096 heads" for a (4096, 4096) head_mask. Each file is
    refused with the reason before anything is drawn: the view keeps its four models and their maps."""
    _require_models()
    source = HTML_ROOT / "_static" / "models" / "ch1-h2.onnx"
    files = [(_edited(source, tmp_path / "nan-half.onnx", _nan_weight_half_outputs),
              "the model nan-half.onnx computed non-finite"),
             (_edited(source, tmp_path / "liar.onnx", _sixty_four_heads),
              "the model liar.onnx returned attentions of dims [1,1,64,"),
             (_edited(source, tmp_path / "huge.onnx", _huge_head_mask),
              "“huge.onnx” declares 4096 layers of 4096 heads; the page draws at most 48 layers, 64 heads a layer "
              "and 1024 maps")]
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        view = VIEW % "toy-compare"
        picker = page.locator("[data-view=toy-compare] input[type=file]")
        status = page.locator("[data-view=toy-compare] .mha-live-status")
        maps = page.locator("[data-view=toy-compare] .mha-live-head canvas")
        before = maps.count()
        for path, reason in files:
            picker.set_input_files(str(path))
            page.wait_for_function(f"{view}.querySelector('.mha-live-status').textContent.includes('not added')",
                                   timeout=60_000)
            text = status.text_content()
            assert text.startswith("Your model was not added: ") and reason in text, text
            assert page.locator("[data-view=toy-compare] .mha-live-model").count() == 4
            assert maps.count() == before
            assert set(page.evaluate(f"Object.keys({view}.mhaLive.lastResult.models)")) == {
                "ch1-h1", "ch1-h2", "ch1-h4", "ch1-h8"}
            page.evaluate(f"{view}.querySelector('.mha-live-status').textContent = ''")
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()


@pytest.fixture(scope="module")
def own_bert(bert, tmp_path_factory):
    """A small BertEncoder with MiniLM's vocabulary and tokenizer (2 layers of 3 heads, d_model 48, seeded
    random weights), exported by mha_lib.export.export_onnx: what a reader's own file is."""
    import dataclasses

    from mha_lib import export
    from mha_lib.pretrained import BertEncoder

    torch.manual_seed(0)
    config = dataclasses.replace(bert.config, d_model=48, num_heads=3, num_layers=2, d_ff=96)
    model = BertEncoder(config, bert.tokenizer).eval()
    path = tmp_path_factory.mktemp("own") / "my-bert.onnx"
    export.export_onnx(model, path)
    return model, path


def test_a_reader_reads_the_sentence_with_their_own_exported_bert(chromium_browser, book_url, page_html, own_bert,
                                                                  tmp_path):
    """The sentence view with a file from the reader's disk: refused with the reason when it is not an
    mha_lib BertEncoder export of MiniLM's vocabulary size (the maps stay MiniLM's); otherwise its maps of
    the text equal the model's own in PyTorch, the layer slider follows its layer count, the export names
    it, the file never travels to the server, and "Back to the book's model" brings MiniLM's maps back."""
    from mha_lib import export

    model, path = own_bert
    context, page, visit = _open(chromium_browser, book_url, page_html)
    try:
        view = VIEW % "sentence"
        picker = page.locator("[data-view=sentence] input[type=file]")
        status = page.locator("[data-view=sentence] .mha-live-status")
        refused = lambda: page.wait_for_function(  # noqa: E731
            f"{view}.querySelector('.mha-live-status').textContent.includes('not used')", timeout=60_000)
        before = page.evaluate(f"{view}.mhaLive.lastResult.tokens")
        # not ONNX
        picker.set_input_files(files=[{"name": "a.onnx", "mimeType": "application/octet-stream",
                                       "buffer": b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"}])
        refused()
        assert "“a.onnx” could not be read as an ONNX model" in status.text_content()
        # ONNX from mha_lib, but a toy model
        picker.set_input_files(str(HTML_ROOT / "_static" / "models" / "ch1-h2.onnx"))
        page.wait_for_function(f"{view}.querySelector('.mha-live-status').textContent.includes('token-classifier')",
                               timeout=60_000)
        assert "is an mha_lib token-classifier model; the sentence view runs an export of a pretrained.BertEncoder" \
            in status.text_content()
        # a BertEncoder of another vocabulary size
        import dataclasses

        from mha_lib.pretrained import BertEncoder
        small = BertEncoder(dataclasses.replace(model.config, vocab_size=1000), model.tokenizer).eval()
        other = tmp_path / "other-vocab.onnx"
        export.export_onnx(small, other)
        picker.set_input_files(str(other))
        page.wait_for_function(f"{view}.querySelector('.mha-live-status').textContent.includes('vocabulary of 1000')",
                               timeout=60_000)
        assert "MiniLM's uncased English WordPiece vocabulary of 30522" in status.text_content()
        assert page.evaluate(f"{view}.mhaLive.lastResult.tokens") == before
        # the real thing
        text = "The trophy did not fit in the suitcase because it was too big."
        page.locator("[data-view=sentence] textarea").fill(text)
        page.wait_for_function(f"{view}.mhaLive.lastResult.text === {json.dumps(text)}", timeout=60_000)
        picker.set_input_files(str(path))
        page.wait_for_function(f"{view}.mhaLive.lastResult.model === 'my-bert.onnx'", timeout=60_000)
        r = page.evaluate(f"{view}.mhaLive.lastResult")
        with torch.no_grad():
            out, batch = model.encode_text([text], output_attentions=True)
        want = torch.stack([a[0] for a in out.attentions])
        assert r["tokens"] == batch.tokens[0] and len(r["attentions"]) == 2 and len(r["attentions"][0]) == 3
        assert (torch.tensor(r["attentions"]) - want).abs().max().item() <= 1e-5  # fp32, as exported
        assert "Your model “my-bert.onnx” (2 layers, 3 heads each)" in status.text_content()
        assert "by your model “my-bert.onnx”" in page.locator("[data-view=sentence] .mha-live-shown").text_content()
        assert page.locator("[data-view=sentence] input[type=range]").get_attribute("max") == "1"
        name, body = _download(page, page.locator("[data-view=sentence] .mha-live-export button", has_text="json"))
        assert name.startswith("my-bert") and json.loads(body)["model"] == "my-bert.onnx"
        # typing reruns the reader's model
        page.locator("[data-view=sentence] textarea").fill("It was too big.")
        page.wait_for_function(f"{view}.mhaLive.lastResult.text === 'It was too big.'", timeout=60_000)
        assert page.evaluate(f"{view}.mhaLive.lastResult.model") == "my-bert.onnx"
        # two picks in quick succession: the later one wins, whichever loads first
        second = tmp_path / "second.onnx"
        second.write_bytes(path.read_bytes())
        picker.set_input_files(str(path))
        picker.set_input_files(str(second))
        page.wait_for_function(f"{view}.mhaLive.lastResult.model === 'second.onnx'", timeout=60_000)
        page.wait_for_timeout(1500)  # the first pick's load has ended by now: it must not take over
        assert page.evaluate(f"{view}.mhaLive.lastResult.model") == "second.onnx"
        assert "Your model “second.onnx”" in status.text_content()
        # back to MiniLM
        page.locator("[data-view=sentence] button", has_text="Back to the book's model").click()
        page.wait_for_function(f"{view}.mhaLive.lastResult.model === 'all-MiniLM-L6-v2'", timeout=60_000)
        assert len(page.evaluate(f"{view}.mhaLive.lastResult.attentions")) == 6
        assert page.locator("[data-view=sentence] input[type=range]").get_attribute("max") == "5"
        # with the box empty, the model is taken for the next text, and the way back is shown
        page.locator("[data-view=sentence] textarea").fill("")
        picker.set_input_files(str(path))
        page.wait_for_function(f"{view}.querySelector('.mha-live-status').textContent.includes('next text you type')",
                               timeout=60_000)
        assert page.locator("[data-view=sentence] button", has_text="Back to the book's model").is_visible()
        page.locator("[data-view=sentence] textarea").fill("A new sentence.")
        page.wait_for_function(f"{view}.mhaLive.lastResult.model === 'my-bert.onnx'", timeout=60_000)
        assert len(page.evaluate(f"{view}.mhaLive.lastResult.attentions")) == 2
        assert [m for m, _ in visit.requests if m not in ("GET", "HEAD")] == []  # nothing sent
        assert not [u for _, u in visit.requests if "my-bert" in u or "other-vocab" in u]
        assert visit.console_errors == [] and visit.off_site == []
    finally:
        context.close()
