"""The live views of chapters 2 (steps), 5, 6, 7 and 9 in a kernel (the anywidget ``LiveWidget``), in Chromium.

As ``test_kernel_widget_draws_what_the_kernel_computes`` of test_live_views.py: the widget's own ES module
(``widget_esm``) mounts each view with the kernel backend, and every widget message is answered by
:class:`mha_lib.live.KernelRunner` in this process. Checked: the induction view (a checkpoint id, a head
mask), the translate view (the encoder-decoder, a step per message), the digit view (patches) and the patterns
view (a ``.pattern`` model with its ``attn_mask`` feed) and chapter 2's steps view (the model's layer inputs, then a
layer's ``.attn<l>`` stages) give what mha_lib computes; their texts say the kernel computes; no file is fetched.
"""
from __future__ import annotations

import base64
import json

import pytest
import torch

from test_live_views import KERNEL_REL, MOUNT_WIDGETS, _watch

pytestmark = pytest.mark.browser
pytest.importorskip("anywidget")
STEPS_SEQUENCE = {"ids": [3, 1, 4, 1, 5, 2], "types": [0, 0, 1, 0, 0, 0]}


def test_kernel_widgets_of_chapters_2_5_6_7_9_draw_what_the_kernel_computes(chromium_browser, book_url):
    from mha_lib import live, tasks

    images, labels = tasks.SHIPPED["ch7-digits-h4"].make_task().images("test")
    repeat = tasks.SHIPPED["ch5-induction-l2"].make_task().dataset(1, seed=3).input_ids[0].tolist()
    induction = live.induction_config("ch5-induction-l2", repeat)
    views = {"induction": live.live_view("induction", induction["models"][-1], induction),
             "translate": live.live_view("translate", "ch6-translation",
                                         live.translation_config("ch6-translation", [14, 3, 18, 19])),
             "digit": live.live_view("digit", "ch7-digits-h2",
                                     live.digit_config(["ch7-digits-h1", "ch7-digits-h2"], images[:3], labels[:3])),
             "patterns": live.live_view("patterns", "ch5-induction-l2.pattern", live.patterns_config(repeat)),
             "steps": live.live_view("steps", "ch1-h4", live.steps_config("ch1-h4", STEPS_SEQUENCE, head=1))}
    widgets = {key: v.widget() for key, v in views.items()}

    def kernel(key, text):
        content, sent = json.loads(text), []
        widget = widgets[key]
        widget.send = lambda c, buffers=None: sent.append((c, buffers or []))
        widget._answer(widget, content, [])
        reply, buffers = sent[0]
        return json.dumps({"reply": reply, "buffers": [base64.b64encode(b).decode() for b in buffers]})

    context = chromium_browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    try:
        page = context.new_page()
        url = book_url + KERNEL_REL
        visit = _watch(page, book_url, {url: '<!doctype html><html lang="en"><head><meta charset="utf-8">'
                                             "<title>kernel</title></head><body><main></main></body></html>"})
        page.expose_function("mhaKernel", kernel)
        page.goto(url, wait_until="load")
        traits = {key: {name: getattr(w, name) for name in ("live_view", "live_model", "live_config", "live_fallback",
                                                             "live_alt", "live_caption")} for key, w in widgets.items()}
        page.evaluate(MOUNT_WIDGETS, {"esm": widgets["digit"]._esm, "views": traits})
        at = "document.querySelector('#kernel-%s .mha-live-view')"

        def run_view(key, arg):
            return page.evaluate(f"async (x) => await {at % key}.mhaLive.run(x)", arg)

        mask = [[1, 0, 1, 1], [1, 1, 1, 0]]
        r = run_view("induction", {"checkpoint": 4, "mask": mask})
        model = tasks.load_trained("ch5-induction-l2", step=tasks.SHIPPED["ch5-induction-l2"].checkpoints[4])
        want = live.induction_readings(model, repeat, mask)
        assert r["source"] == "kernel" and r["predictions"] == want["predictions"]
        assert (torch.tensor(r["attentions"]) - torch.tensor(want["attentions"])).abs().max() <= 1e-5
        r = run_view("translate", {"words": [5, 9, 0, 12, 3, 20]})
        spec = tasks.SHIPPED["ch6-translation"]
        want = live.translation_readings(tasks.load_trained(spec), spec.make_task(), [5, 9, 0, 12, 3, 20])
        assert r["source"] == "kernel" and r["tokens"] == want["tokens"]
        assert (torch.tensor(r["cross"]) - torch.tensor(want["cross"])).abs().max() <= 1e-5
        pixels = images[2].flatten().tolist()
        r = run_view("digit", pixels)
        for name in ("ch7-digits-h1", "ch7-digits-h2"):
            want = live.digit_readings(tasks.load_trained(name), images[2])
            assert r["models"][name]["prediction"] == want["prediction"]
            assert (torch.tensor(r["models"][name]["cls"]) - torch.tensor(want["cls"])).abs().max() <= 1e-5
        # chapter 2's steps view: the model's layer inputs, then the layer's stages, each a message
        sequence = {"ids": [7, 0, 6, 2, 2], "types": [0, 1, 0, 0, 0]}
        r = run_view("steps", {**sequence, "head": 3, "causal": True})
        want = live.steps_readings(tasks.load_trained("ch1-h4"), sequence, layer=0, head=3, causal=True)
        assert r["source"] == "kernel" and r["tokens"] == want["tokens"] and r["head"] == 3
        for stage in ("x", "q", "k", "v", "scores", "scaled", "blocked", "weights", "head_out", "concat", "contribution", "out"):
            diff = (torch.tensor(r["stages"][stage], dtype=torch.float64) - torch.tensor(want[stage], dtype=torch.float64))
            assert diff.abs().max() <= 1e-5 * max(1.0, float(torch.tensor(want[stage]).abs().max())), stage
        pattern = {"kind": "window", "window": 3, "sinks": 2, "block": 4}
        r = run_view("patterns", {"model": 2, "pattern": pattern})
        want = live.patterns_readings(live.pattern_model("ch9-window8"), repeat, pattern)
        assert r["source"] == "kernel" and r["predictions"] == want["predictions"] and r["reach"] == want["reach"]
        assert (torch.tensor(r["attentions"]) - torch.tensor(want["attentions"])).abs().max() <= 1e-5
        for key in views:
            words = page.evaluate(f"{at % key}.textContent")
            assert "kernel" in words, key
            for wrong in ("your browser", "MB", "onnxruntime", "WebAssembly"):
                assert wrong not in words, (key, wrong)
        assert visit.console_errors == [] and visit.off_site == []
        assert [r for _, r in visit.requests] == [KERNEL_REL], "the kernel's views fetch no file"
    finally:
        context.close()
