"""Chapter 9's ``"patterns"`` view: the Python side (config, readings, the kernel's answers, the export with a
pattern input) and the page's pure functions (``patternMask``, ``patternCacheBytes``, ``patternReach`` in
``mha_lib/web/compute_toys.mjs``) against the same numbers from mha_lib, run by node."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from mha_lib import live, tasks
from mha_lib.efficient import block_sparse_mask, sliding_window_mask

WEB = Path(__file__).resolve().parents[1] / "mha_lib" / "web"
NODE = shutil.which("node")
FAR = [7, 41, 3, 12, 55, 9, 30, 18, 61, 2, 44, 27, 5, 36, 50, 13, 22, 7, 41, 3, 12, 55, 9, 30, 18, 8]
PATTERNS = [{"kind": "full", "window": 8, "sinks": 0, "block": 4},
            {"kind": "window", "window": 3, "sinks": 0, "block": 4},
            {"kind": "window", "window": 5, "sinks": 2, "block": 2},
            {"kind": "sparse", "window": 8, "sinks": 0, "block": 2},
            {"kind": "sparse", "window": 8, "sinks": 0, "block": 4},
            {"kind": "sparse", "window": 8, "sinks": 0, "block": 8}]


def test_reader_masks_are_mha_libs_patterns_cut_to_the_sequence():
    assert torch.equal(live.reader_pattern_mask(PATTERNS[2], 20, 32), sliding_window_mask(20, window=5, sinks=2))
    assert torch.equal(live.reader_pattern_mask(PATTERNS[4], 20, 32), block_sparse_mask(32, block=4, seed=0)[:20, :20])
    assert not live.reader_pattern_mask(PATTERNS[0], 20, 32).any()
    # the trained sparse model's own pattern is the view's "sparse, blocks of 4"
    cfg = tasks.SHIPPED["ch9-sparse4"].encoder_config()
    assert torch.equal(cfg.attention_pattern(32, 32, causal=True), live.reader_pattern_mask(PATTERNS[4], 32, 32))


def test_a_pattern_model_under_its_own_mask_is_the_trained_model():
    for name in ("ch9-window4", "ch9-sparse4"):
        trained, stripped = tasks.load_trained(name).eval(), live.pattern_model(name)
        assert not stripped.encoder.config.attention_window and not stripped.encoder.config.sparse_block
        ids = torch.tensor([FAR])
        own = trained.encoder.config.attention_pattern(len(FAR), len(FAR), causal=True)
        with torch.no_grad():
            assert torch.allclose(stripped(ids, attn_mask=own).logits, trained(ids).logits, atol=1e-6)
            assert not torch.allclose(stripped(ids).logits, trained(ids).logits, atol=1e-3)


def test_reach_says_whether_the_copys_key_is_in_sight():
    model = live.pattern_model("ch5-induction-l2")
    full = live.patterns_readings(model, FAR, PATTERNS[0])
    window = live.patterns_readings(model, FAR, PATTERNS[1])
    assert full["copyable"] == list(range(17, 24)) and full["reach"] == [1] * 7  # the copy is 17 back
    assert window["reach"] == [0] * 7
    near = live.patterns_readings(model, [5, 6, 7, 5, 6, 7, 9], PATTERNS[1])  # 3 back, a window of 3
    assert near["copyable"] == [3, 4] and near["reach"] == [1, 1]
    assert full["accuracy"] > window["accuracy"]


def test_the_config_passes_the_contract_and_the_cache_bytes_are_the_formulas():
    config = live.patterns_config(FAR, PATTERNS[2], model=1)
    assert config["models"][1] == "ch9-window4.pattern" and config["pattern"] == PATTERNS[2]
    live.live_view("patterns", config["models"][1], config)  # checked against view_contract.json
    c = config["cache"]
    assert (c["num_layers"], c["num_heads"], c["head_dim"], c["kv_rank"], c["rope_dim"]) == (2, 4, 16, 29, 8)
    b = live.pattern_cache_bytes(c, PATTERNS[2], 26)
    from mha_lib.cost import kv_cache_bytes
    from mha_lib.efficient import latent_kv_cache_bytes

    assert b["mha"] == kv_cache_bytes(num_layers=2, num_kv_heads=4, head_dim=16, seq_len=26)
    assert b["pattern"] == kv_cache_bytes(num_layers=2, num_kv_heads=4, head_dim=16, seq_len=5 + 2)
    assert b["mqa"] == kv_cache_bytes(num_layers=2, num_kv_heads=1, head_dim=16, seq_len=26)
    assert b["mla"] == latent_kv_cache_bytes(num_layers=2, kv_rank=29, rope_dim=8, seq_len=26)


@pytest.mark.parametrize("pattern, message", [
    ({"kind": "dilated", "window": 8, "sinks": 0, "block": 4}, "'dilated' is not 'full', 'window' or 'sparse'"),
    ({"kind": "window", "window": 0, "sinks": 0, "block": 4}, "pattern['window']"),
    ({"kind": "window", "window": 40, "sinks": 0, "block": 4}, "out of range"),
    ({"kind": "sparse", "window": 8, "sinks": 0, "block": 3}, "block one of [2, 4, 8]"),
    ({"kind": "full"}, "pattern must be {kind, window, sinks, block}"),
])
def test_bad_patterns_are_refused_by_name(pattern, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        live.patterns_config(FAR, pattern)


def test_the_kernel_runs_a_pattern_model_with_the_attn_mask_feed():
    config = live.patterns_config(FAR)
    runner = live.KernelRunner("patterns", config["models"][0], config)
    loaded, _ = runner.answer({"op": "load", "request": 1, "model": "ch9-window8.pattern"})
    assert loaded["info"]["inputs"] == ["input_ids", "attn_mask", "head_mask"]
    mask = live.reader_pattern_mask(PATTERNS[1], len(FAR), 32)
    feeds = {"input_ids": {"type": "int64", "dims": [1, len(FAR)], "data": FAR},
             "attn_mask": {"type": "bool", "dims": [len(FAR), len(FAR)], "data": mask.int().flatten().tolist()},
             "head_mask": {"type": "float32", "dims": [2, 4], "data": [1] * 8}}
    reply, buffers = runner.answer({"op": "run", "request": 2, "model": "ch9-window8.pattern", "feeds": feeds})
    assert reply["op"] == "result", reply
    import numpy as np

    logits = np.frombuffer(buffers[reply["outputs"]["logits"]["buffer"]], dtype="<f4")
    want = live.patterns_readings(live.pattern_model("ch9-window8"), FAR, PATTERNS[1])
    assert logits.reshape(len(FAR), -1).argmax(-1).tolist() == want["predictions"]
    bad = dict(feeds, attn_mask={"type": "bool", "dims": [len(FAR), len(FAR)], "data": [2] * len(FAR) ** 2})
    reply, _ = runner.answer({"op": "run", "request": 3, "model": "ch9-window8.pattern", "feeds": bad})
    assert reply["op"] == "error" and "feeds['attn_mask'][0][0] = 2 is not 0 or 1 (1 = blocked)" in reply["message"]


@pytest.mark.slow
def test_export_with_a_pattern_input_equals_mha_lib_and_refuses_a_model_with_its_own_pattern(tmp_path):
    pytest.importorskip("onnxruntime")
    from mha_lib import export

    model = live.pattern_model("ch9-window4")
    info = export.export_onnx(model, tmp_path / "w.onnx", pattern_input=True)
    assert info.inputs == ("input_ids", "attn_mask", "head_mask")
    session = export.onnx_session(tmp_path / "w.onnx")
    for n, pattern in ((26, PATTERNS[1]), (9, PATTERNS[3])):
        mask = live.reader_pattern_mask(pattern, n, 32)
        ids = torch.tensor([FAR[:n]])
        got = export.run_onnx(session, input_ids=ids, attn_mask=mask)
        with torch.no_grad():
            want = model(ids, attn_mask=mask, output_attentions=True)
        assert abs(got["logits"] - want.logits.numpy()).max() < 1e-4
        assert abs(got["attentions"] - torch.stack(want.attentions).numpy()).max() < 1e-5
    with pytest.raises(ValueError, match="attn_mask must be \\(26, 26\\)"):
        export.run_onnx(session, input_ids=torch.tensor([FAR]), attn_mask=torch.zeros(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="attention_window=4"):
        export.export_onnx(tasks.load_trained("ch9-window4"), tmp_path / "x.onnx", pattern_input=True)


@pytest.mark.slow
@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_pages_masks_reach_and_cache_bytes_equal_mha_libs(tmp_path):
    config = live.patterns_config(FAR)
    cases = []
    for pattern in PATTERNS:
        for ids in (FAR, FAR[:9], [1, 2, 1, 2, 3, 1, 2, 3]):
            readings = live.patterns_readings(live.pattern_model("ch5-induction-l2"), ids, pattern)
            cases.append({"pattern": pattern, "ids": ids, "copyable": readings["copyable"], "reach": readings["reach"],
                          "mask": live.reader_pattern_mask(pattern, len(ids), 32).int().flatten().tolist(),
                          "bytes": live.pattern_cache_bytes(config["cache"], pattern, len(ids))})
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"layouts": config["layouts"], "cache": config["cache"], "cases": cases}))
    script = (f"import {{ patternMask, patternReach, patternCacheBytes }} from {json.dumps((WEB / 'compute_toys.mjs').as_uri())};"
              "import fs from 'node:fs';"
              f"const f = JSON.parse(fs.readFileSync({json.dumps(str(path))}, 'utf8'));"
              "console.log(JSON.stringify(f.cases.map((c) => { const m = patternMask(c.pattern, c.ids.length, f.layouts);"
              "  return {mask: Array.from(m), reach: patternReach(c.ids, c.copyable, m),"
              "          bytes: patternCacheBytes(f.cache, c.pattern, c.ids.length)}; })));")
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    for want, got in zip(cases, json.loads(out.stdout)):
        assert got["mask"] == want["mask"], want["pattern"]
        assert got["reach"] == want["reach"] and got["bytes"] == want["bytes"], want["pattern"]
