"""The identities that chapter 2 ("The math of multi-head attention") states, as unit tests of mha_lib.

Section 2: the batched reshape/transpose implementation equals a plain per-head loop that follows
           Vaswani et al. 2017, and every step has the documented shape.
Section 3: Concat(head_1..head_H) W^O = sum_i head_i W^O_i.
Section 4: tying every head's W^Q_i, W^K_i, W^V_i collapses the layer to one head of width
           d_model/H with the merged output projection sum_i W^O_i.
Section 5: 4 d_model^2 + 4 d_model parameters for every H; GQA shrinks only W^K and W^V.
Section 6: from_torch matches torch.nn.MultiheadAttention; bool-mask polarity versus SDPA; torch's
           NaN on rows with no allowed key, mha_lib's zeros.
Section 7: a causal mask does not leak the future.
"""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from mha_lib import MultiHeadAttention, attention
from mha_lib.cost import attention_params

BOTH_PATHS = pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])


def make_mha(d_model=8, num_heads=2, seed=0, bias=True, **kw):
    torch.manual_seed(seed)
    m = MultiHeadAttention(d_model, num_heads, bias=bias, **kw).eval()
    if bias:
        with torch.no_grad():  # non-zero biases, so a forgotten bias would show
            for proj in (m.q_proj, m.k_proj, m.v_proj, m.out_proj):
                proj.bias.uniform_(-0.5, 0.5)
    return m


def mha_by_the_paper(xq, xkv, m):
    """Vaswani et al. 2017, one sequence and one head at a time."""
    H, d_k = m.num_heads, m.head_dim
    projs = {"q": m.q_proj, "k": m.k_proj, "v": m.v_proj, "o": m.out_proj}
    W = {n: p.weight.T for n, p in projs.items()}  # q, k, v: (d_model, H d_k); o: (H d_k, d_model)
    b = {n: p.bias for n, p in projs.items()}
    outs = []
    for Xq, Xkv in zip(xq, xkv):
        heads = []
        for i in range(H):
            cols = slice(i * d_k, (i + 1) * d_k)
            q = Xq @ W["q"][:, cols] + (0 if b["q"] is None else b["q"][cols])  # (L, d_k)
            k = Xkv @ W["k"][:, cols] + (0 if b["k"] is None else b["k"][cols])  # (S, d_k)
            v = Xkv @ W["v"][:, cols] + (0 if b["v"] is None else b["v"][cols])  # (S, d_k)
            heads.append(torch.softmax(q @ k.T / math.sqrt(d_k), dim=-1) @ v)  # (L, d_k)
        outs.append(torch.cat(heads, -1) @ W["o"] + (0 if b["o"] is None else b["o"]))
    return torch.stack(outs)  # (B, L, d_model)


# --- section 2 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model,H", [(8, 2), (16, 4), (12, 3), (8, 1), (8, 8)])
@pytest.mark.parametrize("L,S", [(5, 5), (3, 7)], ids=["self", "cross"])
@pytest.mark.parametrize("bias", [True, False])
@BOTH_PATHS
def test_batched_equals_per_head_loop(d_model, H, L, S, bias, need_weights):
    m = make_mha(d_model, H, bias=bias)
    g = torch.Generator().manual_seed(1)
    xq, xkv = torch.randn(2, L, d_model, generator=g), torch.randn(2, S, d_model, generator=g)
    with torch.no_grad():
        out, _ = m(xq, xkv, need_weights=need_weights)
        expected = mha_by_the_paper(xq, xkv, m)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)


def test_shape_at_every_step():
    B, L, S, d_model, H = 2, 5, 7, 8, 2
    m = make_mha(d_model, H)
    xq, xkv = torch.randn(B, L, d_model), torch.randn(B, S, d_model)
    head_out, weights = m.head_outputs(xq, xkv, need_weights=True)
    assert head_out.shape == (B, H, L, d_model // H)
    assert weights.shape == (B, H, L, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, L))
    out, _ = m(xq, xkv)
    assert out.shape == (B, L, d_model)


# --- section 3 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model,H", [(8, 2), (16, 4), (24, 6)])
def test_concat_then_project_is_a_sum_over_heads(d_model, H):
    m = make_mha(d_model, H)
    x = torch.randn(2, 5, d_model)
    d_k = d_model // H
    with torch.no_grad():
        head_out, _ = m.head_outputs(x)  # (B, H, L, d_k)
        W_O = m.out_proj.weight.T  # (H d_k, d_model)
        concat = head_out.transpose(1, 2).reshape(2, 5, H * d_k) @ W_O
        summed = sum(head_out[:, i] @ W_O[i * d_k:(i + 1) * d_k] for i in range(H))
        out, _ = m(x)
    torch.testing.assert_close(concat, summed)
    torch.testing.assert_close(summed + m.out_proj.bias, out)
    torch.testing.assert_close(m.merge_heads(head_out), out)


# --- section 4 ---------------------------------------------------------------------------------


def tie_heads(m, source=0):
    tied = copy.deepcopy(m)
    rows = slice(source * m.head_dim, (source + 1) * m.head_dim)
    with torch.no_grad():
        for proj in (tied.q_proj, tied.k_proj, tied.v_proj):
            proj.weight.copy_(proj.weight[rows].repeat(m.num_heads, 1))
            proj.bias.copy_(proj.bias[rows].repeat(m.num_heads))
    return tied


@pytest.mark.parametrize("H", [2, 4, 8])
@pytest.mark.parametrize("source", [0, 1])
@BOTH_PATHS
def test_tied_heads_collapse_to_one_narrow_head(H, source, need_weights):
    d_model = 16
    m = make_mha(d_model, H)
    tied = tie_heads(m, source)
    d_k = d_model // H
    single = MultiHeadAttention(d_model, H, pruned_heads=[h for h in range(H) if h != source]).eval()
    assert single.num_heads == 1 and single.head_dim == d_k
    rows = slice(source * d_k, (source + 1) * d_k)
    with torch.no_grad():
        for mine, theirs in zip((single.q_proj, single.k_proj, single.v_proj), (tied.q_proj, tied.k_proj, tied.v_proj)):
            mine.weight.copy_(theirs.weight[rows])
            mine.bias.copy_(theirs.bias[rows])
        single.out_proj.weight.copy_(tied.out_proj.weight.view(d_model, H, d_k).sum(1))  # sum_i W^O_i
        single.out_proj.bias.copy_(tied.out_proj.bias)
    x = torch.randn(2, 6, d_model)
    kpm = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    with torch.no_grad():
        out_tied, _ = tied(x, key_padding_mask=kpm, need_weights=need_weights)
        out_single, _ = single(x, key_padding_mask=kpm, need_weights=need_weights)
        _, w_tied = tied(x, need_weights=True)
        _, w_untied = m(x, need_weights=True)
    torch.testing.assert_close(out_tied, out_single, atol=1e-6, rtol=1e-5)
    assert all(torch.equal(w_tied[:, 0], w_tied[:, h]) for h in range(H))
    assert not torch.allclose(w_untied[:, 0], w_untied[:, 1], atol=1e-3)  # untied heads differ


# --- section 5 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [64, 512])
@pytest.mark.parametrize("H", [1, 2, 4, 8, 16, 32])
def test_parameter_count_does_not_depend_on_heads(d_model, H):
    n = sum(p.numel() for p in MultiHeadAttention(d_model, H).parameters())
    assert n == 4 * d_model**2 + 4 * d_model == attention_params(d_model, H)
    n_nobias = sum(p.numel() for p in MultiHeadAttention(d_model, H, bias=False).parameters())
    assert n_nobias == 4 * d_model**2


@pytest.mark.parametrize("kv_heads", [8, 4, 2, 1])
def test_gqa_shrinks_only_key_and_value_projections(kv_heads):
    d, H = 512, 8
    d_k = d // H
    m = MultiHeadAttention(d, H, num_kv_heads=kv_heads)
    n = sum(p.numel() for p in m.parameters())
    assert n == 2 * d * d + 2 * d + 2 * (d * kv_heads * d_k + kv_heads * d_k) == attention_params(d, H, kv_heads)
    assert m.q_proj.weight.shape == (d, d) and m.out_proj.weight.shape == (d, d)
    assert m.k_proj.weight.shape == m.v_proj.weight.shape == (kv_heads * d_k, d)
    _, _, (k, v) = m(torch.randn(1, 3, d), use_cache=True)
    assert k.shape == v.shape == (1, kv_heads, 3, d_k)  # the KV cache: 2 * H_kv * d_k numbers per token


# --- section 6 ---------------------------------------------------------------------------------


@BOTH_PATHS
def test_from_torch_matches_to_float32_rounding(need_weights):
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs).eval()
    x = torch.randn(2, 5, 8)
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        out_t, w_t = theirs(x, x, x, key_padding_mask=kpm, average_attn_weights=False)
        out_o, w_o = ours(x, key_padding_mask=kpm, need_weights=True)
        out_fast, _ = ours(x, key_padding_mask=kpm, need_weights=need_weights)
    assert float((out_t - out_o).abs().max()) < 1e-5
    assert float((out_t - out_fast).abs().max()) < 1e-5
    assert float((w_t - w_o).abs().max()) < 1e-5


def test_bool_mask_polarity_is_the_opposite_of_sdpa():
    q, k, v = (torch.randn(2, 2, 5, 4, generator=torch.Generator().manual_seed(i)) for i in range(3))
    blocked = torch.ones(5, 5, dtype=torch.bool).triu(1)
    ours, _ = attention(q, k, v, attn_mask=blocked)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked))
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert not torch.allclose(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=blocked), atol=1e-3)


def test_torch_gives_nan_on_rows_with_no_key_and_mha_lib_gives_zeros():
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs).eval()
    kpm = torch.tensor([[False] * 5, [True] * 5])
    x = torch.randn(2, 5, 8, requires_grad=True)
    out_t, w_t = theirs(x, x, x, key_padding_mask=kpm, average_attn_weights=False)
    out_t.sum().backward()
    # the chapter's claim about torch (if torch changes this, the chapter must change too)
    assert out_t.isnan().any() and w_t.isnan().any() and x.grad.isnan().any()
    x.grad = None
    out_o, w_o = ours(x, key_padding_mask=kpm, need_weights=True)
    out_o.sum().backward()
    assert torch.isfinite(out_o).all() and torch.isfinite(w_o).all() and torch.isfinite(x.grad).all()
    assert float(w_o[1].detach().abs().max()) == 0.0
    torch.testing.assert_close(out_o[1], ours.out_proj.bias.expand(5, 8))
    torch.testing.assert_close(out_o[0], out_t[0])  # the other sequence is unaffected


# --- section 7 ---------------------------------------------------------------------------------


@BOTH_PATHS
def test_causal_mask_does_not_leak_and_padding_does_not_matter(need_weights):
    m = make_mha(8, 2)
    x = torch.randn(2, 5, 8)
    x_new = x.clone()
    x_new[:, 3:] = torch.randn(2, 2, 8)
    with torch.no_grad():
        before, _ = m(x, is_causal=True, need_weights=need_weights)
        after, _ = m(x_new, is_causal=True, need_weights=need_weights)
        padded, _ = m(x, key_padding_mask=torch.tensor([[False] * 5, [False] * 3 + [True] * 2]),
                      need_weights=need_weights)
        alone, _ = m(x[1:, :3], need_weights=need_weights)
    assert torch.equal(before[:, :3], after[:, :3])
    assert float((before[:, 3:] - after[:, 3:]).abs().max()) > 0.1
    torch.testing.assert_close(padded[1, :3], alone[0])
