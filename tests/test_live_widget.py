"""mha_lib.live in a kernel: the anywidget (LiveWidget) and the messages its view sends.

Checked here: :class:`mha_lib.live.KernelRunner` answers a run message with what mha_lib computes
(MiniLM's attentions and sentence embeddings, with and without a head mask; a toy model's logits
and attentions), decoded from the float32 buffers the view receives; bad messages get an error
answer that names the value, and never raise; ``live_view``'s output holds text/html and, in a
kernel, the widget view (text/plain stable); the widget's ES module is one module holding both
files; ``tools/execute_notebooks.py`` keeps kernel-only widgets out of the stored notebook.
The view's side (``kernelBackend`` in mha_live.mjs) runs in Chromium in
tests/browser/test_live_views.py.
"""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from mha_lib import live, tasks
from mha_lib.pretrained import resolve_checkpoint

ROOT = Path(__file__).resolve().parents[1]
MINILM = "all-MiniLM-L6-v2"
TEXTS = ["The cat sat on the mat.", "Anna lost her keys, so she looked for them everywhere."]

pytest.importorskip("anywidget")


@pytest.fixture(scope="module")
def bert(minilm):
    return minilm[0]  # loaded once per session (tests/conftest.py)


def feeds_of(input_ids, token_type_ids, key_padding_mask, head_mask) -> dict:
    """A run message's feeds as the view sends them: plain lists, row-major."""
    def feed(kind, t):
        return {"type": kind, "dims": list(t.shape), "data": t.flatten().tolist()}

    out = {"input_ids": feed("int64", input_ids), "key_padding_mask": feed("bool", key_padding_mask.int()),
           "head_mask": feed("float32", head_mask)}
    if token_type_ids is not None:
        out["token_type_ids"] = feed("int64", token_type_ids)
    return out


def outputs_of(reply, buffers) -> dict:
    """The tensors of a result answer, read from its buffers as the view reads them (float32, little-endian)."""
    assert reply["op"] == "result", reply
    return {name: torch.from_numpy(np.frombuffer(buffers[o["buffer"]], dtype="<f4").copy()).view(o["dims"])
            for name, o in reply["outputs"].items()}


def run_bert(bert, texts, head_mask):
    batch = bert.tokenize(texts)
    runner = live.KernelRunner("prune", MINILM, {})
    message = {"op": "run", "request": "t-1", "model": MINILM,
               "feeds": feeds_of(batch.input_ids, batch.token_type_ids, batch.key_padding_mask, head_mask)}
    reply, buffers = runner.answer(json.loads(json.dumps(message)))  # as it arrives: JSON
    assert reply["request"] == "t-1"
    return outputs_of(reply, buffers), batch


@pytest.mark.parametrize("masked", [False, True], ids=["all-heads", "head-mask"])
def test_minilm_run_equals_mha_lib(bert, masked):
    grid = torch.ones(6, 12)
    if masked:
        grid[0, :6] = 0
        grid[3, [1, 4, 7]] = 0
        grid[5] = 0
    out, batch = run_bert(bert, TEXTS, grid)
    with torch.no_grad():
        ref, _ = bert.encode_text(TEXTS, output_attentions=True, head_mask=grid)
        embeddings = bert.sentence_embeddings(TEXTS, head_mask=grid)
    attentions = torch.stack(ref.attentions)  # (num_layers, B, H, L, L)
    assert out["attentions"].shape == (6, 1, *attentions.shape[2:])  # the first row's maps only: the ones drawn
    n = int((~batch.key_padding_mask[0]).sum())  # the view reads real query rows only
    torch.testing.assert_close(out["attentions"][:, 0, :, :n, :n], attentions[:, 0, :, :n, :n], atol=1e-5, rtol=0)
    torch.testing.assert_close(out["sentence_embedding"], embeddings, atol=1e-5, rtol=0)
    if masked:  # the mask changes what the kernel computes (not a no-op)
        full, _ = run_bert(bert, TEXTS, torch.ones(6, 12))
        assert (full["sentence_embedding"] - out["sentence_embedding"]).abs().max() > 1e-2


def test_the_models_a_runner_loads_follow_the_view_contract():
    """view_contract.json is the one list of views: a view whose model is picked from a list key ({"one_of":
    "models"}) loads every model of it, the others their own model; the steps view adds its layers' steps ids;
    a view the contract lacks is refused, naming it."""
    contract = live.view_contract()["views"]
    assert live.VIEWS == tuple(contract)
    assert live.KernelRunner("toy-compare", "ch1-h1", {"models": ["ch1-h1", "ch1-h4"]}).models == ["ch1-h1", "ch1-h4"]
    assert live.KernelRunner("timing", "attention-core", {"models": ["attention-core"]}).models == ["attention-core"]
    assert live.KernelRunner("prune", MINILM, {}).models == [MINILM]
    steps = live.KernelRunner("steps", "ch1-h1", {"models": ["ch1-h1"], "num_layers": 2}).models
    assert steps == ["ch1-h1", live.steps_id("ch1-h1", 0), live.steps_id("ch1-h1", 1)]
    picked = {v for v, spec in contract.items() if "one_of" in spec["model"]}
    assert {"toy-compare", "induction", "translate", "digit", "patterns", "speed", "steps"} == picked
    with pytest.raises(ValueError, match="view must be one of .*'heatmap'"):
        live.KernelRunner("heatmap", "ch1-h1", {})


def test_toy_run_equals_mha_lib():
    task = tasks.SHIPPED["ch1-h4"].make_task()
    batch = task.dataset(3, seed=1)
    model = tasks.load_trained("ch1-h4")
    runner = live.KernelRunner("toy-compare", "ch1-h1", {"models": ["ch1-h1", "ch1-h4"]})
    B, L = batch.input_ids.shape
    reply, buffers = runner.answer({"op": "run", "request": 7, "model": "ch1-h4", "feeds": feeds_of(
        batch.input_ids, batch.token_type_ids, torch.zeros(B, L, dtype=torch.bool), torch.ones(1, 4))})
    out = outputs_of(reply, buffers)
    with torch.no_grad():
        logits, attentions = tasks.logits_and_attentions(model, batch)
    torch.testing.assert_close(out["logits"], logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(out["attentions"], torch.stack(attentions)[:, :1], atol=1e-6, rtol=0)
    assert reply["request"] == 7


def test_load_says_what_the_view_needs(bert):
    reply, buffers = live.KernelRunner("sentence", MINILM, {}).answer({"op": "load", "request": "a", "model": MINILM})
    assert reply["op"] == "loaded" and buffers == []
    assert reply["info"] == {"kind": "bert", "num_layers": 6, "num_heads": 12, "max_length": 256,
                             "inputs": ["input_ids", "token_type_ids", "key_padding_mask", "head_mask"],
                             "outputs": ["sentence_embedding", "attentions"]}
    folder, _ = resolve_checkpoint()
    assert reply["vocab"] == (Path(folder) / "vocab.txt").read_text(encoding="utf-8")  # the site's vocab.txt
    toy, _ = live.KernelRunner("toy-compare", "ch1-h1", {"models": ["ch1-h1", "ch1-h8"]}).answer(
        {"op": "load", "request": "b", "model": "ch1-h8"})
    assert toy["vocab"] is None and toy["info"]["num_heads"] == 8 and toy["info"]["max_length"] == 16
    assert "token_type_ids" in toy["info"]["inputs"]  # chapter 1 marks a position with a token type


def good_toy_feeds() -> dict:
    return feeds_of(torch.zeros(1, 16, dtype=torch.long), torch.zeros(1, 16, dtype=torch.long),
                    torch.zeros(1, 16, dtype=torch.bool), torch.ones(1, 1))


def with_feed(name, **changes) -> dict:
    feeds = good_toy_feeds()
    feeds[name] = {**feeds[name], **changes}
    return {"op": "run", "request": "r", "model": "ch1-h1", "feeds": feeds}


def with_value(name, index, value) -> dict:
    message = with_feed(name)
    message["feeds"][name]["data"][index] = value
    return message


@pytest.mark.parametrize("message, match", [
    ("run", "a message must be an object, got str: 'run'"),
    ({"op": "run", "model": "ch1-h1"}, "needs a request id"),
    ({"op": "train", "request": "r"}, "op must be 'load' or 'run', got 'train'"),
    ({"op": "load", "request": "r", "model": "ch1-h4"}, "model 'ch1-h4' is not one of this view's models"),
    ({"op": "load", "request": "r", "model": "../../etc/passwd"}, "'../../etc/passwd' is not one of"),
    ({"op": "run", "request": "r", "model": "ch1-h1", "feeds": [1, 2]}, "feeds must be an object"),
    ({"op": "run", "request": "r", "model": "ch1-h1", "feeds": {"input_ids": {}}},
     "feeds must hold exactly the inputs"),
    (with_value("input_ids", 3, 8), r"feeds\['input_ids'\]\[0\]\[3\] = 8 is not a token id in \[0, 8\)"),
    (with_value("input_ids", 0, -1), r"\[0\]\[0\] = -1 is not a token id"),
    (with_value("input_ids", 5, 2.5), r"\[0\]\[5\] = 2.5 is not a token id"),
    (with_value("input_ids", 5, True), r"\[0\]\[5\] = True is not a token id"),
    (with_value("input_ids", 5, "3"), r"\[0\]\[5\] = '3' is not a token id"),
    (with_value("token_type_ids", 2, 2), r"feeds\['token_type_ids'\]\[0\]\[2\] = 2 is not a token type in \[0, 2\)"),
    (with_value("key_padding_mask", 1, 7), r"feeds\['key_padding_mask'\]\[0\]\[1\] = 7 is not 0 or 1"),
    (with_value("head_mask", 0, float("nan")), r"feeds\['head_mask'\]\[0\]\[0\] = nan is not a number in \[0, 1\]"),
    (with_value("head_mask", 0, None), r"= None is not a number in \[0, 1\]"),
    (with_value("head_mask", 0, 1e30), r"= 1e\+30 is not a number in \[0, 1\]"),  # finite, but NaN downstream
    (with_value("head_mask", 0, 10**400), r"= 1000000000.* is not a number in \[0, 1\]"),
    (with_feed("head_mask", dims=[2, 1], data=[1, 1]), r"feeds\['head_mask'\].dims must be \[1, 1\], got \[2, 1\]"),
    (with_feed("input_ids", data=[0] * 15), r"feeds\['input_ids'\].data must be a list of 1 x 16 values, got 15"),
    (with_feed("input_ids", dims=[1, 17], data=[0] * 17), "has 17 positions; the model reads at most 16"),
    (with_feed("input_ids", dims=[65, 16], data=[0] * 65 * 16), "has 65 rows; a view sends at most 64"),
    (with_feed("input_ids", dims=[1, 0], data=[]), r"dims must be two integers >= 1, got \[1, 0\]"),
    (with_feed("token_type_ids", dims=[1, 15]), r"token_type_ids'\].dims must be \[1, 16\]"),
])
def test_bad_messages_get_an_error_naming_the_value(message, match):
    runner = live.KernelRunner("toy-compare", "ch1-h1", {"models": ["ch1-h1"]})
    reply, buffers = runner.answer(message)  # never raises
    assert reply["op"] == "error" and buffers == []
    assert re.search(match, reply["message"]), reply["message"]


def test_widget_answers_through_its_comm_and_carries_the_view():
    batch = tasks.SHIPPED["ch1-h1"].make_task().dataset(1, seed=0)
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
    view = live.live_view("toy-compare", "ch1-h1", live.toy_compare_config(["ch1-h1", "ch1-h2"], batch),
                          fallback=png, alt="the static maps", caption="a <caption>")
    widget = view.widget()
    assert widget is view.widget()  # one widget per view
    assert isinstance(widget, live.LiveWidget) and widget._esm == live.widget_esm()
    assert (widget.live_view, widget.live_model, widget.live_config) == ("toy-compare", "ch1-h1", view.config)
    assert widget.live_fallback == "data:image/png;base64," + base64.b64encode(png).decode()
    assert (widget.live_alt, widget.live_caption) == ("the static maps", "a <caption>")
    sent = []
    widget.send = lambda content, buffers=None: sent.append((content, buffers))
    widget._answer(widget, {"op": "run", "request": "w-1", "model": "ch1-h2", "feeds": feeds_of(
        batch.input_ids, batch.token_type_ids, torch.zeros(1, 16, dtype=torch.bool), torch.ones(1, 2))}, [])
    widget._answer(widget, {"op": "run", "request": "w-2", "model": "ch1-h2", "feeds": None}, [])
    (reply, buffers), (error, _) = sent
    with torch.no_grad():
        logits, _ = tasks.logits_and_attentions(tasks.load_trained("ch1-h2"), batch)
    torch.testing.assert_close(outputs_of(reply, buffers)["logits"], logits, atol=1e-5, rtol=0)
    assert error == {"op": "error", "request": "w-2", "message": "feeds must be an object {input name: tensor}, "
                     "got NoneType: None"}


def test_output_is_html_and_in_a_kernel_also_the_widget(monkeypatch):
    view = live.live_view("sentence", MINILM, {"text": "a", "tokens": ["[CLS]", "a", "[SEP]"],
                                               "attentions": [[[[1, 0, 0], [0, 1, 0], [0, 0, 1]]]]})
    assert view._repr_mimebundle_() == {"text/plain": "LiveView(view='sentence', model='all-MiniLM-L6-v2')",
                                        "text/html": view.html}  # outside a kernel: no widget
    monkeypatch.setattr(live.element, "_in_kernel", lambda: True)  # where LiveView looks it up
    data, metadata = view._repr_mimebundle_()
    assert data["text/html"] == view.html and data["text/plain"] == repr(view)  # stable for nbval
    assert data[live.WIDGET_VIEW_MIME]["model_id"] == view.widget().model_id
    assert metadata == {}  # outside Colab (there, anywidget's custom widget manager)
    monkeypatch.setattr(live.element, "_widget_class", lambda: None)  # anywidget not installed
    bare = live.live_view("sentence", MINILM, view.config)
    assert bare.widget() is None and set(bare._repr_mimebundle_()) == {"text/plain", "text/html"}


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_widget_module_is_one_module_with_the_tokenizer_and_render(tmp_path):
    esm = live.widget_esm()
    assert "./wordpiece.mjs" not in esm
    path = tmp_path / "widget.mjs"
    path.write_text(esm, encoding="utf-8")
    script = (f"const m = await import({json.dumps(path.as_uri())});"
              "console.log(JSON.stringify([typeof m.default.render, typeof m.kernelBackend, typeof m.WordPieceTokenizer,"
              " m.URLS.models === null || typeof m.URLS.models]));")
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["function", "function", "function", "string"]


def test_execute_notebooks_keeps_kernel_widgets_out_of_the_stored_notebook():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from execute_notebooks import WIDGET_STATE, WIDGET_VIEW, drop_kernel_widgets
    finally:
        sys.path.pop(0)

    def model(module, name, **state):
        return {"model_module": module, "model_name": name, "model_module_version": "*", "state": state}

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("display_data", data={
        "text/html": "<div>live</div>", "text/plain": "LiveView()", WIDGET_VIEW: {"model_id": "a1"}})]),
        nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("display_data", data={
            "text/plain": "IntSlider()", WIDGET_VIEW: {"model_id": "b1"}})])]
    state = {"a1": model("anywidget", "AnyModel", layout="IPY_MODEL_a2"),
             "a2": model("@jupyter-widgets/base", "LayoutModel"),
             "b1": model("@jupyter-widgets/controls", "IntSliderModel", layout="IPY_MODEL_b2", style="IPY_MODEL_s"),
             "b2": model("@jupyter-widgets/base", "LayoutModel"),
             "s": model("@jupyter-widgets/controls", "SliderStyleModel")}
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    assert drop_kernel_widgets(nb) == 2
    assert sorted(nb.metadata["widgets"][WIDGET_STATE]["state"]) == ["b1", "b2", "s"]
    assert set(nb.cells[0].outputs[0]["data"]) == {"text/html", "text/plain"}  # the book shows the HTML
    assert WIDGET_VIEW in nb.cells[1].outputs[0]["data"]  # a standard widget stays
    only_live = nbformat.v4.new_notebook()
    only_live.metadata["widgets"] = {WIDGET_STATE: {"state": {k: state[k] for k in ("a1", "a2")}}}
    assert drop_kernel_widgets(only_live) == 2 and "widgets" not in only_live.metadata  # no empty state for embed.js


class _Hostile(dict):
    def get(self, *args):
        raise RuntimeError("a mapping whose get fails")


def test_a_message_that_fails_to_be_read_is_answered_not_raised():
    reply, buffers = live.KernelRunner("toy-compare", "ch1-h1", {"models": ["ch1-h1"]}).answer(_Hostile(op="run"))
    assert reply["op"] == "error" and "a mapping whose get fails" in reply["message"] and buffers == []


def test_a_batch_too_large_for_the_kernel_is_refused_before_running(bert):
    B, L = 26, 256  # 26 rows are allowed, but 26 x 256 positions are more than a view sends
    feeds = {name: {"type": "int64", "dims": [B, L], "data": [0] * (B * L)}
             for name in ("input_ids", "token_type_ids", "key_padding_mask")}
    feeds["head_mask"] = {"type": "float32", "dims": [6, 12], "data": [1] * 72}
    reply, _ = live.KernelRunner("sentence", MINILM, {}).answer({"op": "run", "request": 1, "model": MINILM,
                                                                 "feeds": feeds})
    assert reply["op"] == "error" and f"at most {live.MAX_KERNEL_TOKENS}" in reply["message"], reply


def _patch_message(pixels, model="ch7-digits-h4", H=4, **changes):
    feeds = {"patches": {"type": "float32", "dims": [1, len(pixels), 1], "data": list(pixels)},
             "head_mask": {"type": "float32", "dims": [2, H], "data": [1.0] * (2 * H)}}
    for name, change in changes.items():
        feeds[name] = {**feeds[name], **change}
    return {"op": "run", "request": "d", "model": model, "feeds": feeds}


def test_digit_run_equals_mha_lib():
    from mha_lib.model import patchify

    images, _ = tasks.SHIPPED["ch7-digits-h4"].make_task().images("test")
    runner = live.KernelRunner("digit", "ch7-digits-h4", {"models": ["ch7-digits-h1", "ch7-digits-h4"]})
    info, _ = runner.answer({"op": "load", "request": 1, "model": "ch7-digits-h4"})
    assert info["info"]["inputs"] == ["patches", "head_mask"] and info["info"]["max_length"] == 65
    reply, buffers = runner.answer(_patch_message(images[5].flatten().tolist()))
    out = outputs_of(reply, buffers)
    model = tasks.load_trained("ch7-digits-h4")
    with torch.no_grad():
        ref = model(patchify(images[5:6], 1), output_attentions=True)
    torch.testing.assert_close(out["logits"], ref.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(out["attentions"], torch.stack(ref.attentions), atol=1e-6, rtol=0)


@pytest.mark.parametrize("changes, match", [
    ({"patches": {"dims": [1, 65, 1], "data": [0.0] * 65}}, r"dims must be \[1, N, 1\] with 1 <= N <= 64"),
    ({"patches": {"dims": [2, 64, 1], "data": [0.0] * 128}}, r"dims must be \[1, N, 1\]"),
    ({"patches": {"dims": [1, 64], "data": [0.0] * 64}}, r"dims must be \[1, N, 1\]"),
    ({"patches": {"data": [0.0] * 63}}, "data must be a list of 64 numbers, got 63"),
    ({"patches": {"data": [float("nan")] + [0.0] * 63}}, r"feeds\['patches'\]\[0\]\[0\] = nan is not a finite number"),
    ({"patches": {"data": ["0"] + [0.0] * 63}}, r"\[0\]\[0\] = '0' is not a finite number"),
    ({"head_mask": {"dims": [1, 4]}}, r"feeds\['head_mask'\] must be \{dims: \[2, 4\], data: 8 numbers\}"),
    ({"head_mask": {"data": [2.0] * 8}}, r"feeds\['head_mask'\]\[0\]\[0\] = 2.0 is not a number in \[0, 1\]"),
])
def test_bad_digit_messages_get_an_error_naming_the_value(changes, match):
    runner = live.KernelRunner("digit", "ch7-digits-h4", {"models": ["ch7-digits-h4"]})
    reply, buffers = runner.answer(_patch_message([0.0] * 64, **changes))
    assert reply["op"] == "error" and buffers == []
    assert re.search(match, reply["message"]), reply["message"]
    extra = _patch_message([0.0] * 64)
    extra["feeds"]["input_ids"] = extra["feeds"]["patches"]
    assert "exactly the inputs ['patches', 'head_mask']" in runner.answer(extra)[0]["message"]


def test_induction_checkpoints_run_in_the_kernel_like_mha_lib():
    ids = [5, 9, 3, 5, 9, 3, 7, 1]
    runner = live.KernelRunner("induction", "ch5-induction-l2.step600",
                               {"models": ["ch5-induction-l2.step600", "ch5-induction-l2.step2000"]})
    info, _ = runner.answer({"op": "load", "request": 1, "model": "ch5-induction-l2.step600"})
    assert info["info"]["inputs"] == ["input_ids", "key_padding_mask", "head_mask"]
    mask = torch.tensor([[1.0, 0, 1, 1], [1, 1, 1, 1]])
    reply, buffers = runner.answer({"op": "run", "request": 2, "model": "ch5-induction-l2.step600", "feeds": feeds_of(
        torch.tensor([ids]), None, torch.zeros(1, len(ids), dtype=torch.bool), mask)})
    out = outputs_of(reply, buffers)
    model = tasks.load_trained("ch5-induction-l2", step=600)
    with torch.no_grad():
        ref = model(torch.tensor([ids]), head_mask=mask, output_attentions=True)
    torch.testing.assert_close(out["logits"], ref.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(out["attentions"], torch.stack(ref.attentions), atol=1e-6, rtol=0)
    bad, _ = runner.answer({"op": "load", "request": 3, "model": "ch5-induction-l2.step700"})
    assert bad["op"] == "error" and "not one of this view's models" in bad["message"]


def test_the_encoder_decoder_runs_in_the_kernel_like_mha_lib():
    runner = live.KernelRunner("translate", "ch6-translation", {"models": ["ch6-translation"]})
    info, _ = runner.answer({"op": "load", "request": 1, "model": "ch6-translation"})
    assert info["info"]["kind"] == "encoder-decoder" and info["info"]["inputs"] == ["src_ids", "input_ids", "head_mask"]
    assert (info["info"]["num_layers"], info["info"]["num_heads"], info["info"]["max_length"]) == (6, 4, 13)
    src, tgt = [17, 6, 21, 9, 2], [1, 12, 24]
    feeds = {"src_ids": {"type": "int64", "dims": [1, 5], "data": src},
             "input_ids": {"type": "int64", "dims": [1, 3], "data": tgt},
             "head_mask": {"type": "float32", "dims": [6, 4], "data": [1.0] * 24}}
    reply, buffers = runner.answer({"op": "run", "request": 2, "model": "ch6-translation", "feeds": feeds})
    out = outputs_of(reply, buffers)
    model = tasks.load_trained("ch6-translation")
    with torch.no_grad():
        ref = model(torch.tensor([tgt]), src_ids=torch.tensor([src]), output_attentions=True)
    torch.testing.assert_close(out["logits"], ref.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(out["cross_attentions"], torch.stack(ref.cross_attentions), atol=1e-6, rtol=0)
    for name, change, match in [("src_ids", {"data": [17, 6, 27, 9, 2]}, r"feeds\['src_ids'\]\[0\]\[2\] = 27 is not a token id"),
                                ("input_ids", {"dims": [1, 14], "data": [1] * 14}, r"dims must be \[1, n\] with 1 <= n <= 13"),
                                ("src_ids", {"data": [1, 2]}, r"data must be a list of 5 ids, got 2")]:
        bad = {**feeds, name: {**feeds[name], **change}}
        reply, _ = runner.answer({"op": "run", "request": 3, "model": "ch6-translation", "feeds": bad})
        assert reply["op"] == "error" and re.search(match, reply["message"]), reply["message"]
