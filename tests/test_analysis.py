"""Tests for mha_lib.analysis: relation shares (Clark et al. 2019) and the norm-based maps of
Kobayashi et al. 2020."""
from __future__ import annotations

import math

import pytest
import torch

from mha_lib.analysis import (
    RELATIONS,
    attention_contributions,
    encoder_norm_maps,
    find_heads,
    head_label,
    merge_tied_heads,
    norm_weighted_attention,
    relation_shares,
    tie_heads,
    value_norms,
)
from mha_lib.core import MultiHeadAttention
from mha_lib.model import Encoder, EncoderConfig


def toy_weights(n: int, pad_to: int) -> torch.Tensor:
    """(H=4, pad_to, pad_to) weights on n real tokens: previous, next, first token, uniform.
    Padding rows/columns hold junk (0.5) that the analysis must ignore."""
    w = torch.full((4, pad_to, pad_to), 0.5)
    w[:, :n, :n] = 0.0
    for i in range(n):
        w[0, i, max(i - 1, 0)] = 1.0  # previous token; token 0 looks at itself
        w[1, i, min(i + 1, n - 1)] = 1.0  # next token; the last token looks at itself
        w[2, i, 0] = 1.0  # [CLS]
        w[3, i, :n] = 1.0 / n
    return w


def toy_batch():
    tokens = [["[CLS]", "a", "b", "c", "[SEP]"], ["[CLS]", "x", "[SEP]"]]
    w = torch.stack([toy_weights(5, 5), toy_weights(3, 5)])  # (B=2, H=4, 5, 5)
    return w, tokens


def test_relation_shares_on_known_heads():
    w, tokens = toy_batch()
    s = relation_shares(w, tokens)  # (H, R)
    assert s.shape == (4, len(RELATIONS))
    r = {name: i for i, name in enumerate(RELATIONS)}
    # "previous" is averaged over queries that have a previous token: 4 + 2 of them, all 1.0.
    assert s[0, r["previous"]] == pytest.approx(1.0)
    # "next" over 4 + 2 queries; head 0 puts weight on i+1 nowhere
    assert s[0, r["next"]] == pytest.approx(0.0)
    # head 0's "same": only token 0 of each sequence (2 of 8 queries)
    assert s[0, r["same"]] == pytest.approx(2 / 8)
    assert s[1, r["next"]] == pytest.approx(1.0)
    assert s[1, r["same"]] == pytest.approx(2 / 8)
    assert s[2, r["[CLS]"]] == pytest.approx(1.0)
    assert s[2, r["previous"]] == pytest.approx(2 / 6)  # only queries at position 1 hit key 0
    # uniform head: share of [SEP] is 1/n per query: (5 * 1/5 + 3 * 1/3) / 8
    assert s[3, r["[SEP]"]] == pytest.approx(2 / 8)
    assert s[3, r["same"]] == pytest.approx((5 * 0.2 + 3 / 3) / 8)


def test_relation_shares_layers_tuple_stack_and_single_agree():
    w, tokens = toy_batch()
    layers = (w, w.flip(1))  # two layers, heads reversed in the second
    from_tuple = relation_shares(layers, tokens)
    from_stack = relation_shares(torch.stack(layers), tokens)
    assert from_tuple.shape == (2, 4, len(RELATIONS))
    torch.testing.assert_close(from_tuple, from_stack)
    torch.testing.assert_close(from_tuple[0], relation_shares(w, tokens))
    torch.testing.assert_close(from_tuple[1], relation_shares(w, tokens).flip(0))


def test_relation_for_absent_token_is_nan_and_custom_tokens_work():
    w, tokens = toy_batch()
    s = relation_shares(w, tokens, relations=["[MASK]", "a"])
    assert math.isnan(float(s[0, 0]))
    # only sequence 0 has "a" (key 1): head 0 puts weight 1 on key 1 from query 2 only -> 1/5
    assert s[0, 1] == pytest.approx(1 / 5)


def test_normalize_rows_rescales_unnormalised_maps():
    w, tokens = toy_batch()
    scaled = w * torch.arange(1.0, 6.0)[None, None, :, None]  # each row scaled differently
    torch.testing.assert_close(relation_shares(scaled, tokens, normalize_rows=True), relation_shares(w, tokens))


@pytest.mark.parametrize(
    "weights, tokens, word",
    [
        (torch.rand(2, 3, 4), [["a"]], "shape"),
        (torch.rand(1, 2, 4, 4), [["a"], ["b"]], "batch size"),
        (torch.rand(1, 2, 4, 4), [["a"] * 5], "5 tokens"),
        ((torch.rand(1, 2, 4, 4), torch.rand(1, 3, 4, 4)), [["a"]], "separately"),
        (torch.rand(1, 2, 4, 4), [[]], "no tokens"),
    ],
)
def test_relation_shares_rejects_bad_input(weights, tokens, word):
    with pytest.raises(ValueError, match=word):
        relation_shares(weights, tokens)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.5])
def test_analyses_of_weights_refuse_nan_inf_and_negative_weights(bad):
    """relation_shares and attention_confidence returned NaN for NaN weights, where NaN already
    means "no key of that relation"; positional_offsets took the argmax of NaN. They refuse now,
    like their siblings (hardening 3, item 17)."""
    from mha_lib.analysis import attention_confidence, positional_offsets

    w = torch.softmax(torch.randn(1, 2, 4, 4, generator=torch.Generator().manual_seed(0)), -1)
    w[0, 1, 2, 3] = bad
    for call in (lambda: relation_shares(w, [["a", "b", "c", "d"]]),
                 lambda: relation_shares((w, w), [["a", "b", "c", "d"]]),
                 lambda: attention_confidence(w), lambda: positional_offsets(w)):
        with pytest.raises(ValueError, match="NaN or infinite|negative"):
            call()


def test_analyses_of_weights_refuse_integer_tensors():
    from mha_lib.analysis import attention_confidence

    with pytest.raises(ValueError, match="floating point"):
        attention_confidence(torch.ones(1, 1, 3, 3, dtype=torch.long))


def test_find_heads_threshold_order_and_labels():
    shares = torch.zeros(2, 3, 2)
    shares[1, 2, 0] = 0.9
    shares[0, 1, 0] = 0.6
    shares[0, 0, 1] = 0.5  # not above 0.5
    found = find_heads(shares, ["previous", "next"], threshold=0.5)
    assert [(f.relation, f.label) for f in found] == [("previous", "L1.H2"), ("previous", "L0.H1")]
    assert found[0].share == pytest.approx(0.9)
    assert find_heads(shares, ["previous", "next"], threshold=0.95) == []
    assert head_label(0, 11) == "L0.H11"
    with pytest.raises(ValueError, match="threshold"):
        find_heads(shares, ["previous", "next"], threshold=1.5)
    with pytest.raises(ValueError, match="R=3"):
        find_heads(shares, ["a", "b", "c"])


# ---------------------------------------------------------------------------------------------
# Kobayashi et al. 2020
# ---------------------------------------------------------------------------------------------


def make_mha(d_model=16, num_heads=4, seed=0, **kw):
    torch.manual_seed(seed)
    m = MultiHeadAttention(d_model, num_heads, **kw)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 1:
                p.uniform_(-0.5, 0.5)  # non-zero biases, so a dropped bias would show
    return m.eval()


@pytest.mark.parametrize(
    "kw, prune",
    [({}, ()), ({"num_kv_heads": 2}, ()), ({}, (1, 2)), ({"num_kv_heads": 2}, (0,))],
    ids=["mha", "gqa", "pruned", "gqa-pruned"],
)
def test_contributions_sum_to_the_layer_output(kw, prune):
    m = make_mha(**kw)
    m.prune_heads(prune)
    x = torch.randn(2, 5, 16)
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    out, w = m(x, key_padding_mask=kpm, need_weights=True)
    c = attention_contributions(m, x, w)  # (B, H, L, S, d_model)
    assert c.shape == (2, m.num_heads, 5, 5, 16)
    torch.testing.assert_close(c.sum((1, 3)) + m.out_proj.bias, out, atol=1e-5, rtol=1e-5)


def test_norm_maps_equal_a_per_head_loop():
    m = make_mha(num_kv_heads=2)
    x = torch.randn(1, 6, 16)
    _, w = m(x, need_weights=True)
    per_head = norm_weighted_attention(m, x, w)
    layer = norm_weighted_attention(m, x, w, combine_heads=True)
    hd = m.head_dim
    expected = torch.zeros(1, 4, 6, 6)
    summed = torch.zeros(1, 6, 6, 16)
    for h in range(4):
        g = h // 2  # the KV head that query head h reads
        v_h = x @ m.v_proj.weight[g * hd:(g + 1) * hd].T + m.v_proj.bias[g * hd:(g + 1) * hd]  # (1, 6, hd)
        f_h = v_h @ m.out_proj.weight[:, h * hd:(h + 1) * hd].T  # (1, 6, d_model)
        expected[:, h] = w[:, h] * f_h.norm(dim=-1)[:, None, :]
        summed += w[:, h, :, :, None] * f_h[:, None, :, :]
    torch.testing.assert_close(per_head, expected)
    torch.testing.assert_close(layer, summed.norm(dim=-1))
    assert value_norms(m, x).shape == (1, 4, 6)


def test_norm_maps_reject_bad_shapes():
    m = make_mha()
    x = torch.randn(1, 6, 16)
    with pytest.raises(ValueError, match="x must be"):
        value_norms(m, torch.randn(6, 16))
    with pytest.raises(ValueError, match="weights must be"):
        norm_weighted_attention(m, x, torch.rand(1, 3, 6, 6))


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_encoder_norm_maps_use_what_each_attention_layer_saw(norm_first):
    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=20, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=8,
                        norm_first=norm_first)
    enc = Encoder(cfg).eval()
    ids = torch.randint(1, 20, (2, 6))
    attns, maps = encoder_norm_maps(enc, ids)
    assert len(maps) == 2 and maps[0].shape == (2, 4, 6, 6)
    # recompute layer 1 by hand
    with torch.no_grad():
        out = enc(ids, output_hidden_states=True)
        h = out.hidden_states[1]
        x = enc.blocks[1].norm1(h) if norm_first else h
        _, w = enc.blocks[1].attn(x, need_weights=True)
        torch.testing.assert_close(attns[1], w)
        torch.testing.assert_close(maps[1], w * value_norms(enc.blocks[1].attn, x)[:, :, None, :])
    _, combined = encoder_norm_maps(enc, ids, combine_heads=True)
    assert combined[0].shape == (2, 6, 6)


# ---------------------------------------------------------------------------------------------
# Tied heads
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [{}, {"num_kv_heads": 2}, {"bias": False}], ids=["mha", "gqa", "no-bias"])
@pytest.mark.parametrize("source", [0, 3])
def test_tied_heads_equal_one_narrow_head(kw, source):
    m = make_mha(16, 4, **kw)
    x = torch.randn(2, 5, 16)
    q_rows = m.q_proj.weight[source * 4:(source + 1) * 4].clone()
    tie_heads(m, source)
    assert torch.equal(m.q_proj.weight, q_rows.repeat(4, 1))  # every head got the source's rows
    kpm = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    for need_weights in (False, True):
        with torch.no_grad():
            out, w = m(x, key_padding_mask=kpm, need_weights=True)
            single = merge_tied_heads(m)
            out_single, _ = single(x, key_padding_mask=kpm, need_weights=need_weights)
        assert single.num_heads == 1 and single.head_dim == 4
        assert all(torch.equal(w[:, 0], w[:, h]) for h in range(4))
        torch.testing.assert_close(out_single, out, atol=1e-6, rtol=1e-5)


@pytest.mark.slow
def test_tied_heads_stay_tied_while_training():
    m = make_mha(16, 4).train()
    tie_heads(m)
    n_stored = sum(p.numel() for p in m.parameters())
    assert n_stored == 3 * (16 * 4 + 4) + 16 * 16 + 16  # one head's W^Q, W^K, W^V, all of W^O
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.randn(3, 6, 16)
    for _ in range(3):
        loss = m(x)[0].pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    w = m.q_proj.weight.view(4, 4, 16)
    assert torch.equal(w, w[:1].expand_as(w))
    merge_tied_heads(m)  # still mergeable
    state = m.state_dict()
    assert "q_proj.parametrizations.weight.original" in state
    fresh = tie_heads(make_mha(16, 4, seed=1))
    fresh.load_state_dict(state)
    with torch.no_grad():
        torch.testing.assert_close(fresh(x)[0], m(x)[0])


def test_tie_and_merge_reject_bad_input():
    with pytest.raises(ValueError, match="source=4"):
        tie_heads(make_mha(16, 4), source=4)
    m = make_mha(16, 4)
    m.prune_heads([1])
    with pytest.raises(ValueError, match="pruned"):
        tie_heads(m)
    with pytest.raises(ValueError, match="already"):
        tie_heads(tie_heads(make_mha(16, 4)))
    with pytest.raises(ValueError, match="not tied"):
        merge_tied_heads(make_mha(16, 4))


def test_wilson_interval_known_values_and_edges():
    from mha_lib.stats import wilson_interval

    low, high = wilson_interval(5, 10)
    assert abs(low - 0.2366) < 1e-4 and abs(high - 0.7634) < 1e-4  # the textbook example, z = 1.96
    assert wilson_interval(0, 10)[0] == 0.0 and 0.27 < wilson_interval(0, 10)[1] < 0.28
    assert wilson_interval(10, 10)[1] == 1.0 and 0.72 < wilson_interval(10, 10)[0] < 0.73
    for k in range(11):
        low, high = wilson_interval(k, 10)
        assert 0 <= low <= k / 10 <= high <= 1
    for bad in [dict(successes=11, n=10), dict(successes=1, n=0), dict(successes=1.0, n=10),
                dict(successes=1, n=10, confidence=1.0)]:
        with pytest.raises(ValueError):
            wilson_interval(**bad)


# ----------------------------------------------------------------- hostile inputs
def test_attention_confidence_of_no_heads_is_empty():
    from mha_lib.analysis import attention_confidence

    assert attention_confidence(torch.zeros(1, 0, 3, 3)).shape == (0,)


def test_holm_adjusted_known_values_and_refusals():
    from mha_lib.stats import holm_adjusted

    # sorted 0.005 (x4), 0.01 (x3), 0.03 (x2), 0.04 (x1, raised to the running max 0.06)
    assert holm_adjusted([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjusted([0.2]) == [0.2]  # one test: nothing to correct
    assert holm_adjusted([0.5, 0.6, 0.9]) == pytest.approx([1.0, 1.0, 1.0])  # capped at 1
    raw = [0.001, 0.2, 0.049, 0.012, 0.3]
    adj = holm_adjusted(raw)
    assert all(a >= r for a, r in zip(adj, raw))
    assert [a < 0.05 for a in adj] == [True, False, False, True, False]  # 0.049 alone would pass
    for bad in ([], [0.1, 1.5], [float("nan")], [-0.01], ["0.1"]):
        with pytest.raises(ValueError):
            holm_adjusted(bad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_analyses_read_mha_libs_own_16_bit_attention_weights(dtype):
    """Issue 47: a bf16 model's weights, whose rows sum to 0.998-1.002 after rounding, were refused by a fixed
    1e-3 tolerance; the tolerance follows the dtype (its eps), and the scores are those of the rows rescaled."""
    from mha_lib.analysis import attention_rollout, induction_score, previous_token_score

    torch.manual_seed(0)
    model = Encoder(EncoderConfig(vocab_size=16, d_model=32, num_heads=4, num_layers=2, d_ff=0, max_len=64,
                                  is_causal=True, pad_token_id=None)).eval().to(dtype)
    ids = torch.randint(0, 16, (2, 64), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        att = model(ids, output_attentions=True).attentions
    assert att[0].dtype == dtype
    sums = att[0].float().sum(-1)
    if dtype == torch.bfloat16:
        assert (sums - 1).abs().max() > 1e-3  # what the old check refused
    exact = [a.float() / a.float().sum(-1, keepdim=True) for a in att]  # the rows rescaled to sum to 1
    assert torch.allclose(attention_rollout(att), attention_rollout(exact), atol=1e-2)
    assert torch.allclose(previous_token_score(att[0]), previous_token_score(exact[0]), atol=1e-2)
    assert torch.allclose(induction_score(att[1], ids), induction_score(exact[1], ids), atol=1e-2, equal_nan=True)
    with pytest.raises(ValueError, match="sum to 1"):
        previous_token_score(att[0] * 1.05)  # beyond bf16's rounding: still refused
