"""One head, step by step (issue 50, item 3): mha_lib.analysis.attention_steps / layer_steps, the live "steps"
view's numbers (mha_lib.live.steps_config, steps_readings), the kernel's answers for it, and the files the page
runs (mha_lib.export.export_attention_steps, export_onnx(..., layer_inputs=True)).

Checked: every stage is the module's own computation (the weights equal MultiHeadAttention's, the output its
forward, the heads' W^O terms sum to it with the bias, S / sqrt(d_k) is the scaled S, the mask blocks what it
must: a causal triangle, padding, a fully padded row gives zero weights), for MHA, GQA and pruned heads, post-LN
(MiniLM) and pre-LN (chapter 1's models); the view's config passes the contract; the kernel answers the layer
inputs and a layer's stages and names bad feeds; the exported files equal mha_lib (the toys exactly). Hostile
inputs at the end.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from mha_lib import MultiHeadAttention, live, tasks
from mha_lib.analysis import STAGES, attention_steps, layer_steps
from mha_lib.model import EncoderConfig, TransformerBlock

TOY = "ch1-h4"
SEQUENCE = {"ids": [3, 1, 4, 1, 5, 2, 6], "types": [0, 0, 1, 0, 0, 0, 0]}


def _block(num_heads=4, num_kv_heads=None, norm_first=False, pruned=()):
    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=11, d_model=32, num_heads=num_heads, num_kv_heads=num_kv_heads, num_layers=1,
                        d_ff=16, max_len=16, norm_first=norm_first, pruned_heads={0: list(pruned)} if pruned else {})
    block = TransformerBlock(cfg, 0).eval()
    with torch.no_grad():  # non-zero biases: a forgotten bias would show
        for p in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj, block.attn.out_proj):
            p.bias.uniform_(-0.5, 0.5)
    return block


@pytest.mark.parametrize("kind", ["mha", "gqa", "pruned", "pre-ln"])
def test_every_stage_is_the_modules_own_computation(kind):
    block = {"mha": lambda: _block(), "gqa": lambda: _block(num_kv_heads=2),
             "pruned": lambda: _block(pruned=(1, 2)), "pre-ln": lambda: _block(norm_first=True)}[kind]()
    hidden = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        s = attention_steps(block, hidden)
        x = block.norm1(hidden) if kind == "pre-ln" else hidden
        out, weights = block.attn(x, need_weights=True)
    attn = block.attn
    H, hd = attn.num_heads, attn.head_dim
    assert list(s) == list(STAGES)
    torch.testing.assert_close(s["x"], x)
    torch.testing.assert_close(s["weights"], weights)
    torch.testing.assert_close(s["out"], out, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(s["scaled"], s["scores"] / math.sqrt(hd))
    torch.testing.assert_close(s["scores"], s["q"] @ s["k"].transpose(-2, -1))
    torch.testing.assert_close(s["head_out"], s["weights"] @ s["v"])
    torch.testing.assert_close(s["concat"], s["head_out"].transpose(1, 2).reshape(2, 6, H * hd))
    torch.testing.assert_close(s["contributions"].sum(1) + attn.out_proj.bias, s["out"], atol=1e-6, rtol=1e-5)
    assert not s["blocked"].any()
    # Q is X W^Q_h + b^Q_h: head h's rows of q_proj
    h = H - 1
    rows = slice(h * hd, (h + 1) * hd)
    torch.testing.assert_close(s["q"][:, h], x @ attn.q_proj.weight[rows].T + attn.q_proj.bias[rows])
    if kind == "gqa":  # query heads 0 and 1 read key/value head 0
        torch.testing.assert_close(s["k"][:, 0], s["k"][:, 1])


def test_masks_block_what_they_must_and_a_row_with_no_key_has_no_weight():
    block = _block()
    hidden = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        s = attention_steps(block, hidden, is_causal=True)
        _, weights = block.attn(hidden, need_weights=True, is_causal=True)
    torch.testing.assert_close(s["weights"], weights)
    assert torch.equal(s["blocked"][0, 0], torch.ones(5, 5, dtype=torch.bool).triu(1))
    assert (s["weights"][..., s["blocked"][0, 0]] == 0).all()
    padding = torch.tensor([[False] * 5, [True] * 5])  # the second sequence is all padding
    with torch.no_grad():
        s = attention_steps(block, hidden, key_padding_mask=padding)
    assert s["blocked"][1].all() and not s["blocked"][0].any()
    assert (s["weights"][1] == 0).all()
    torch.testing.assert_close(s["weights"][0].sum(-1), torch.ones(4, 5))


def test_layer_steps_of_a_toy_model_and_its_maps():
    model = tasks.load_trained(TOY)
    ids, types = torch.tensor([SEQUENCE["ids"]]), torch.tensor([SEQUENCE["types"]])
    s = layer_steps(model, 0, ids, token_type_ids=types)
    with torch.no_grad():
        out = model(ids, token_type_ids=types, output_attentions=True, output_hidden_states=True)
    torch.testing.assert_close(s["hidden"], out.hidden_states[0])
    torch.testing.assert_close(s["weights"], out.attentions[0])
    torch.testing.assert_close(s["x"], model.encoder.blocks[0].norm1(out.hidden_states[0]))  # pre-LN
    causal = layer_steps(model, 0, ids, token_type_ids=types, causal=True)
    assert causal["blocked"][0, 0, 0, 1] and not causal["blocked"][0, 0, 1, 0]


def test_layer_steps_restores_the_training_flag():
    model = tasks.load_trained(TOY).train()
    layer_steps(model, 0, torch.tensor([SEQUENCE["ids"]]), token_type_ids=torch.tensor([SEQUENCE["types"]]))
    assert model.training


def test_the_views_config_holds_one_head_and_passes_the_contract():
    config = live.steps_config(TOY, SEQUENCE, head=2, causal=True)
    assert config["models"] == [TOY] and config["kind"] == "toy" and config["tokens"][2] == "*4"
    assert (config["num_layers"], config["num_heads"], config["d_model"], config["d_k"]) == (1, 4, 64, 16)
    L = len(SEQUENCE["ids"])
    assert np.array(config["q"]).shape == (L, 16) and np.array(config["weights"]).shape == (L, L)
    assert np.array(config["contribution"]).shape == (L, 64) and np.array(config["concat"]).shape == (L, 64)
    assert config["blocked"][0] == [0] + [1] * (L - 1)
    view = live.live_view("steps", TOY, config)
    assert 'data-view="steps"' in view.html
    readings = live.steps_readings(tasks.load_trained(TOY), SEQUENCE, layer=0, head=2, causal=True)
    assert readings["weights"] == config["weights"]


def test_kernel_answers_the_layer_inputs_and_a_layers_stages():
    from mha_lib.live.kernel import KernelRunner

    config = live.steps_config(TOY, SEQUENCE, head=1)
    runner = KernelRunner("steps", TOY, config)
    L = len(SEQUENCE["ids"])
    base = {"input_ids": {"dims": [1, L], "data": SEQUENCE["ids"]},
            "token_type_ids": {"dims": [1, L], "data": SEQUENCE["types"]},
            "key_padding_mask": {"dims": [1, L], "data": [0] * L}, "head_mask": {"dims": [1, 4], "data": [1] * 4}}
    reply, buffers = runner.answer({"op": "run", "request": 1, "model": TOY, "feeds": base})
    assert reply["op"] == "result", reply
    spec = reply["outputs"]["layer_inputs"]
    hidden = np.frombuffer(buffers[spec["buffer"]], dtype="<f4").reshape(spec["dims"])
    assert spec["dims"] == [1, 1, L, 64]
    reply, _ = runner.answer({"op": "load", "request": 2, "model": live.steps_id(TOY, 0)})
    assert reply["info"]["inputs"] == ["hidden", "attn_mask"] and reply["info"]["outputs"] == list(STAGES)
    feeds = {"hidden": {"dims": [1, L, 64], "data": hidden[0, 0].flatten().tolist()},
             "attn_mask": {"dims": [L, L], "data": [0] * (L * L)}}
    reply, buffers = runner.answer({"op": "run", "request": 3, "model": live.steps_id(TOY, 0), "feeds": feeds})
    assert reply["op"] == "result", reply
    out = {n: np.frombuffer(buffers[o["buffer"]], dtype="<f4").reshape(o["dims"]) for n, o in reply["outputs"].items()}
    np.testing.assert_allclose(out["weights"][0, 1], np.array(config["weights"]), atol=1e-6)
    np.testing.assert_allclose(out["contributions"][0, 1], np.array(config["contribution"]), atol=1e-5)


@pytest.mark.slow
def test_the_exported_files_equal_mha_lib(tmp_path):
    pytest.importorskip("onnxruntime")
    from mha_lib import export

    model = tasks.load_trained(TOY)
    info = export.export_onnx(model, tmp_path / "toy.onnx", layer_inputs=True)
    assert info.outputs == ("logits", "attentions", "layer_inputs")
    batch = tasks.SHIPPED[TOY].make_task().dataset(3, seed=1)
    worst = export.compare_onnx(model, export.onnx_session(tmp_path / "toy.onnx"),
                                {"input_ids": batch.input_ids, "token_type_ids": batch.token_type_ids,
                                 "key_padding_mask": torch.zeros_like(batch.input_ids, dtype=torch.bool)})
    assert worst["layer_inputs"] <= 1e-6 and worst["attentions"] <= 1e-5
    info = export.export_attention_steps(model, 0, tmp_path / "toy.attn0.onnx")
    assert info.kind == "attention-steps" and info.outputs == STAGES and info.num_heads == 4
    session = export.onnx_session(tmp_path / "toy.attn0.onnx")
    ids, types = batch.input_ids[:1], batch.token_type_ids[:1]
    L = ids.shape[1]
    for causal in (False, True):
        want = layer_steps(model, 0, ids, token_type_ids=types, causal=causal)
        mask = np.triu(np.ones((L, L), dtype=bool), 1) if causal else np.zeros((L, L), dtype=bool)
        got = dict(zip(STAGES, session.run(list(STAGES), {"hidden": want["hidden"].numpy(), "attn_mask": mask})))
        for stage in STAGES:
            expected = want[stage].float().numpy()
            # float32 in a different summation order: the error grows with the stage's scale (the toy's
            # scores reach about 60, where 1.5e-5 apart was measured), so 1e-5 or 1e-6 of its largest value
            atol = max(1e-5, 1e-6 * float(np.abs(expected).max()))
            np.testing.assert_allclose(got[stage].astype(np.float32), expected, atol=atol, err_msg=stage)


# --- hostile inputs ------------------------------------------------------------------------------

def test_bad_blocks_inputs_layers_and_sequences_are_refused_by_name():
    block = _block()
    with pytest.raises(ValueError, match="block must be an mha_lib TransformerBlock"):
        attention_steps(MultiHeadAttention(32, 4), torch.randn(1, 3, 32))
    with pytest.raises(ValueError, match=r"hidden must be a float \(B, L, d_model=32\)"):
        attention_steps(block, torch.randn(3, 32))
    with pytest.raises(ValueError, match="is_causal"):
        attention_steps(block, torch.randn(1, 3, 32), is_causal=1)
    model = tasks.load_trained(TOY)
    ids = torch.tensor([SEQUENCE["ids"]])
    with pytest.raises(ValueError, match=r"layer=1 is outside \[0, 1\)"):
        layer_steps(model, 1, ids)
    with pytest.raises(ValueError, match="causal"):
        layer_steps(model, 0, ids, causal="yes")
    with pytest.raises(ValueError, match="must be an mha_lib Encoder"):
        layer_steps(torch.nn.Linear(2, 2), 0, ids)
    for bad, match in [({"ids": [1, 9], "types": [1, 0]}, r"ids\[1\] = 9 is not a token id in \[0, 8\)"),
                       ({"ids": [1, 2], "types": [1, 1]}, "exactly one position"),
                       ({"ids": [1] * 17, "types": [1] + [0] * 16}, "1 to 16 token ids"),
                       ({"ids": [1, 2]}, "a toy model's sequence is"), ("1 2 3", "a toy model's sequence is")]:
        with pytest.raises(ValueError, match=match):
            live.steps_readings(model, bad, layer=0, head=0)
    with pytest.raises(ValueError, match=r"head=4 is outside \[0, 4\)"):
        live.steps_readings(model, SEQUENCE, layer=0, head=4)
    with pytest.raises(ValueError, match="name must be 'all-MiniLM-L6-v2' or a shipped chapter-1 model"):
        live.steps_config("nope", SEQUENCE)
    with pytest.raises(ValueError, match="a steps view runs MiniLM or chapter 1's models"):
        live.steps_config("ch5-induction-l2", SEQUENCE)


def test_the_kernel_refuses_bad_steps_feeds_by_name():
    from mha_lib.live.kernel import KernelRunner

    runner = KernelRunner("steps", TOY, live.steps_config(TOY, SEQUENCE))
    steps = live.steps_id(TOY, 0)
    for feeds, match in [({"hidden": {"dims": [1, 2, 64], "data": [0.0] * 128}}, "exactly the inputs"),
                         ({"hidden": {"dims": [1, 2, 63], "data": [0.0] * 126}, "attn_mask": {"dims": [2, 2], "data": [0] * 4}},
                          r"dims must be \[1, L, 64\]"),
                         ({"hidden": {"dims": [1, 2, 64], "data": [float("nan")] + [0.0] * 127},
                           "attn_mask": {"dims": [2, 2], "data": [0] * 4}}, r"\[0\]\[0\]\[0\] = nan is not a finite number"),
                         ({"hidden": {"dims": [1, 2, 64], "data": [0.0] * 128}, "attn_mask": {"dims": [2, 2], "data": [0, 2, 0, 0]}},
                          r"attn_mask'\]\[0\]\[1\] = 2 is not 0 or 1")]:
        reply, _ = runner.answer({"op": "run", "request": 1, "model": steps, "feeds": feeds})
        assert reply["op"] == "error" and re.search(match, reply["message"]), reply
    reply, _ = runner.answer({"op": "load", "request": 1, "model": live.steps_id(TOY, 1)})
    assert reply["op"] == "error" and "is not one of this view's models" in reply["message"]
