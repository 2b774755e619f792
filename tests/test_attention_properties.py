"""Property-based tests: the batched MultiHeadAttention equals a plain per-example, per-head loop
that follows the paper's formula (Vaswani et al. 2017, eq. 1 and section 3.2.2; GQA per Ainslie et
al. 2023; head mask per Michel et al. 2019), over random B, L, S, H, H_kv, head_dim and masks."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_lib.core import MultiHeadAttention, attention

pytestmark = pytest.mark.usefixtures("single_thread")


def loop_reference(m: MultiHeadAttention, query, key, blocked, bias, head_mask):
    """out[b] = concat_h(xi_h * softmax_allowed(Q_h K_g^T / sqrt(hd) + bias) V_g) W^O^T + b^O.

    blocked: (B, H, L, S) bool; bias: (B, H, L, S) float; a row with no allowed key gives 0.
    """
    B, L, _ = query.shape
    S = key.shape[1]
    hd = m.head_dim
    W = {n: getattr(m, n).weight for n in ("q_proj", "k_proj", "v_proj")}
    bvec = {n: getattr(m, n).bias for n in ("q_proj", "k_proj", "v_proj")}
    out = torch.zeros(B, L, m.d_model, dtype=query.dtype)
    weights = torch.zeros(B, m.num_heads, L, S, dtype=query.dtype)
    for b in range(B):
        heads = []
        for h in range(m.num_heads):
            g = int(m.kv_head_index[h])
            rows_q, rows_kv = slice(h * hd, (h + 1) * hd), slice(g * hd, (g + 1) * hd)
            Q = query[b] @ W["q_proj"][rows_q].T + bvec["q_proj"][rows_q]  # (L, hd)
            K = key[b] @ W["k_proj"][rows_kv].T + bvec["k_proj"][rows_kv]  # (S, hd)
            V = key[b] @ W["v_proj"][rows_kv].T + bvec["v_proj"][rows_kv]  # (S, hd)
            head = torch.zeros(L, hd, dtype=query.dtype)
            for i in range(L):
                allowed = ~blocked[b, h, i]
                if not allowed.any():
                    continue  # no key to attend: zero weights, zero output
                s = (K[allowed] @ Q[i]) / math.sqrt(hd) + bias[b, h, i][allowed]
                p = torch.exp(s - s.max())
                p = p / p.sum()
                weights[b, h, i, allowed] = p
                head[i] = p @ V[allowed]
            xi = 1.0 if head_mask is None else head_mask[b, h] if head_mask.dim() == 2 else head_mask[h]
            heads.append(xi * head)
        concat = torch.cat(heads, dim=-1) if heads else torch.zeros(L, 0, dtype=query.dtype)
        out[b] = concat @ m.out_proj.weight.T + m.out_proj.bias
    return out, weights


@st.composite
def attention_problems(draw):
    B = draw(st.integers(1, 3))
    L = draw(st.integers(1, 5))
    S = draw(st.integers(1, 5))
    num_kv_heads = draw(st.integers(1, 3))
    num_heads = num_kv_heads * draw(st.integers(1, 3))
    head_dim = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)

    kpm = None
    if draw(st.booleans()):
        kpm = torch.rand(B, S, generator=g) < draw(st.sampled_from([0.2, 0.6, 1.0]))
    attn_mask = None
    kind = draw(st.sampled_from(["none", "bool_LS", "bool_BHLS", "bool_BxH", "float_LS", "float_B1LS"]))
    if kind == "bool_LS":
        attn_mask = torch.rand(L, S, generator=g) < 0.4
    elif kind == "bool_BHLS":
        attn_mask = torch.rand(B, num_heads, L, S, generator=g) < 0.4
    elif kind == "bool_BxH":
        attn_mask = torch.rand(B * num_heads, L, S, generator=g) < 0.4
    elif kind.startswith("float"):
        shape = (L, S) if kind == "float_LS" else (B, 1, L, S)
        attn_mask = torch.randn(*shape, generator=g, dtype=torch.float64)
        attn_mask[torch.rand(*shape, generator=g) < 0.3] = -math.inf
    is_causal = draw(st.booleans())
    head_mask = None
    if draw(st.booleans()):
        shape = (num_heads,) if draw(st.booleans()) else (B, num_heads)
        head_mask = torch.rand(*shape, generator=g, dtype=torch.float64) * 2
    self_attention = L == S and draw(st.booleans())
    return dict(
        B=B, L=L, S=S, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, seed=seed,
        kpm=kpm, attn_mask=attn_mask, is_causal=is_causal, head_mask=head_mask,
        self_attention=self_attention,
    )


def blocked_and_bias(p):
    B, H, L, S = p["B"], p["num_heads"], p["L"], p["S"]
    blocked = torch.zeros(B, H, L, S, dtype=torch.bool)
    bias = torch.zeros(B, H, L, S, dtype=torch.float64)
    if p["kpm"] is not None:
        blocked |= p["kpm"][:, None, None, :]
    am = p["attn_mask"]
    if am is not None:
        am = am.reshape(B, H, L, S) if am.dim() == 3 else am
        if am.dtype == torch.bool:
            blocked |= am
        else:
            blocked |= torch.isneginf(am)
            bias = bias + torch.where(torch.isneginf(am), 0.0, am)
    if p["is_causal"]:
        i, j = torch.arange(L)[:, None], torch.arange(S)[None, :]
        blocked |= j > i + (S - L)
    return blocked, bias


@pytest.mark.slow
@settings(max_examples=150)
@given(p=attention_problems(), need_weights=st.booleans())
def test_batched_module_equals_per_head_loop(p, need_weights):
    torch.manual_seed(p["seed"])
    d_model = p["num_heads"] * p["head_dim"]
    m = MultiHeadAttention(d_model, p["num_heads"], num_kv_heads=p["num_kv_heads"]).double().eval()
    with torch.no_grad():
        for prm in m.parameters():
            if prm.dim() == 1:
                prm.uniform_(-1, 1)
    g = torch.Generator().manual_seed(p["seed"] + 1)
    query = torch.randn(p["B"], p["L"], d_model, generator=g, dtype=torch.float64)
    key = query if p["self_attention"] else torch.randn(p["B"], p["S"], d_model, generator=g, dtype=torch.float64)

    out, w = m(
        query, key, key_padding_mask=p["kpm"], attn_mask=p["attn_mask"], is_causal=p["is_causal"],
        head_mask=p["head_mask"], need_weights=need_weights,
    )
    blocked, bias = blocked_and_bias(p)
    ref_out, ref_w = loop_reference(m, query, key, blocked, bias, p["head_mask"])
    torch.testing.assert_close(out, ref_out, atol=1e-10, rtol=1e-9)
    if need_weights:
        torch.testing.assert_close(w, ref_w, atol=1e-12, rtol=1e-10)
    else:
        assert w is None


@settings(max_examples=40)
@given(p=attention_problems())
def test_functional_attention_equals_per_head_loop(p):
    """mha_lib.attention on split heads: same weights as the loop (masks via attn_mask only)."""
    B, H, H_kv, L, S, hd = p["B"], p["num_heads"], p["num_kv_heads"], p["L"], p["S"], p["head_dim"]
    g = torch.Generator().manual_seed(p["seed"])
    q = torch.randn(B, H, L, hd, generator=g, dtype=torch.float64)
    k = torch.randn(B, H_kv, S, hd, generator=g, dtype=torch.float64)
    v = torch.randn(B, H_kv, S, hd, generator=g, dtype=torch.float64)
    blocked, bias = blocked_and_bias({**p, "kpm": None, "is_causal": False})
    am = p["attn_mask"]
    if am is not None and am.dim() == 3:  # (B*H, L, S) is a module layout; give the 4-D form here
        am = am.reshape(B, H, L, S)
    out, w = attention(q, k, v, attn_mask=am)
    for b in range(B):
        for h in range(H):
            kv_h = h // (H // H_kv)
            for i in range(L):
                allowed = ~blocked[b, h, i]
                if not allowed.any():
                    assert (w[b, h, i] == 0).all() and (out[b, h, i] == 0).all()
                    continue
                s = k[b, kv_h][allowed] @ q[b, h, i] / math.sqrt(hd) + bias[b, h, i][allowed]
                ref = torch.softmax(s, 0)
                torch.testing.assert_close(w[b, h, i][allowed], ref, atol=1e-12, rtol=1e-10)
                torch.testing.assert_close(out[b, h, i], ref @ v[b, kv_h][allowed], atol=1e-12, rtol=1e-10)
