"""mha_lib.efficient against its references: the dense-mask path, SDPA, the full forward pass."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from mha_lib.core import attention
from mha_lib.efficient import (LatentCache, MultiHeadLatentAttention, block_sparse_mask, hbm_accesses, rotary,
                               sliding_window_attention, sliding_window_mask, tiled_attention)


def _qkv(B=2, H=3, L=29, S=None, d=8, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    S = L if S is None else S
    return (torch.randn(B, H, L, d, generator=g, dtype=dtype), torch.randn(B, H, S, d, generator=g, dtype=dtype),
            torch.randn(B, H, S, d, generator=g, dtype=dtype))


# ----------------------------------------------------------------------------- patterns
def test_sliding_window_mask_worked_out_by_hand():
    m = sliding_window_mask(4, window=2)
    assert (~m).int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    m = sliding_window_mask(4, window=2, sinks=1)
    assert (~m).int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 1, 1]]
    m = sliding_window_mask(4, window=2, causal=False)
    assert (~m).int().tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]
    decode = sliding_window_mask(1, 6, window=3)  # one query at position 5 sees keys 3, 4, 5
    assert (~decode).int().tolist() == [[0, 0, 0, 1, 1, 1]]


def test_a_window_as_long_as_the_sequence_is_the_causal_mask():
    L = 9
    causal = torch.ones(L, L, dtype=torch.bool).triu(1)
    assert torch.equal(sliding_window_mask(L, window=L), causal)


def test_block_sparse_mask_has_its_band_globals_and_seeded_random_blocks():
    m = block_sparse_mask(24, block=4, local_blocks=1, global_blocks=1, random_blocks=1, seed=3)
    seen = ~m[::4, ::4]  # one entry per block pair
    n = 6
    for r in range(n):
        for c in range(n):
            if abs(r - c) <= 1 or r == 0 or c == 0:
                assert seen[r, c], (r, c)
    assert seen[2:].sum(1).tolist() == [5, 5, 5, 4]  # band of 3 blocks (2 at the end) + the global one + 1 random
    assert torch.equal(m, block_sparse_mask(24, block=4, seed=3)) and not torch.equal(m, block_sparse_mask(24, block=4, seed=4))
    assert torch.equal(m[:4], m[:4].all(0, keepdim=True).expand(4, -1)) and not m[:4].any()  # the global block sees all


@pytest.mark.parametrize("call, message", [
    (lambda: sliding_window_mask(4, window=0), "window"),
    (lambda: sliding_window_mask(4, 3, window=2), "k_len=3 < q_len=4"),
    (lambda: sliding_window_mask(4, window=2, sinks=5), "sinks=5"),
    (lambda: block_sparse_mask(10, block=4), "seq_len=10 is not a multiple of block=4"),
    (lambda: block_sparse_mask(8, block=4, local_blocks=-1), "local_blocks"),
])
def test_patterns_refuse_bad_sizes_by_name(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# ----------------------------------------------------------------------------- sliding window without a mask
@pytest.mark.parametrize("window, sinks", [(1, 0), (4, 0), (4, 2), (29, 0), (40, 0), (3, 29)])
def test_sliding_window_attention_equals_the_dense_masked_path(window, sinks):
    q, k, v = _qkv()
    ref, _ = attention(q, k, v, attn_mask=sliding_window_mask(29, window=window, sinks=sinks))
    assert torch.allclose(sliding_window_attention(q, k, v, window=window, sinks=sinks), ref, atol=1e-12)


def test_sliding_window_attention_decodes_bottom_right_aligned():
    q, k, v = _qkv(L=3, S=17)
    ref, _ = attention(q, k, v, attn_mask=sliding_window_mask(3, 17, window=5, sinks=2))
    assert torch.allclose(sliding_window_attention(q, k, v, window=5, sinks=2), ref, atol=1e-12)


def test_sliding_window_attention_in_half_precision_stays_close_and_keeps_the_dtype():
    q, k, v = _qkv(dtype=torch.float32)
    out = sliding_window_attention(q.half(), k.half(), v.half(), window=6)
    ref, _ = attention(q, k, v, attn_mask=sliding_window_mask(29, window=6))
    assert out.dtype == torch.float16 and (out.float() - ref).abs().max() < 1e-2


def test_sliding_window_attention_scores_grow_with_l_times_the_window_not_l_squared():
    """What the softmax sees: (B, H, L / w, w, 2w - 1) scores, twice as many when L doubles (the dense path
    would see four times as many)."""
    seen = []
    original = torch.softmax

    def spy(x, *args, **kwargs):
        seen.append(tuple(x.shape))
        return original(x, *args, **kwargs)

    torch.softmax = spy
    try:
        for L in (64, 128):
            sliding_window_attention(*_qkv(B=1, H=2, L=L), window=8)
    finally:
        torch.softmax = original
    assert seen == [(1, 2, 8, 8, 15), (1, 2, 16, 8, 15)]


@pytest.mark.parametrize("call, message", [
    (lambda q, k, v: sliding_window_attention(q, k, v, window=0), "window"),
    (lambda q, k, v: sliding_window_attention(q, k, v, window=2, sinks=99), "sinks=99"),
    (lambda q, k, v: sliding_window_attention(q, k[:, :, :5], v[:, :, :5], window=2), "S=5 keys < L=29"),
    (lambda q, k, v: sliding_window_attention(q, k.float(), v, window=2), "share a dtype"),
    (lambda q, k, v: sliding_window_attention(q[0], k, v, window=2), "q must be a 4-D"),
    (lambda q, k, v: sliding_window_attention(q, k, v, window=2, scale=0.0), "scale"),
])
def test_sliding_window_attention_refuses_bad_input_by_name(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call(*_qkv())


# ----------------------------------------------------------------------------- tiles and the online softmax
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("block_q, block_k", [(1, 1), (7, 5), (16, 64), (64, 16)])
def test_tiled_attention_equals_sdpa_in_float32(is_causal, block_q, block_k):
    q, k, v = _qkv(L=45, d=16, dtype=torch.float32)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    out = tiled_attention(q, k, v, block_q=block_q, block_k=block_k, is_causal=is_causal)
    assert (out - ref).abs().max() <= 1e-5


def test_tiled_attention_causal_decode_is_bottom_right_aligned():
    q, k, v = _qkv(L=3, S=20)
    ref, _ = attention(q, k, v, is_causal=True)
    assert torch.allclose(tiled_attention(q, k, v, block_q=2, block_k=6, is_causal=True), ref, atol=1e-12)


def test_tiled_attention_survives_scores_that_overflow_a_naive_exponential():
    q, k, v = _qkv(L=12, dtype=torch.float32)
    q = q * 300.0  # exp(score) overflows float32; the running maximum keeps it finite
    out = tiled_attention(q, k, v, block_q=4, block_k=5)
    assert torch.isfinite(out).all()
    assert (out - F.scaled_dot_product_attention(q, k, v)).abs().max() <= 1e-4


def test_hbm_accesses_follow_the_papers_counts():
    n, d, M = 1024, 64, 100_000
    out = hbm_accesses(n, d, M)
    assert out["standard"] == 4 * n * d + 4 * n * n
    blocks = -(-n // -(-M // (4 * d)))  # T_c = ceil(N / B_c), B_c = ceil(M / 4d) (Algorithm 1)
    assert out["flash"] == 2 * n * d + 3 * n * d * blocks and out["ratio"] == out["standard"] / out["flash"]
    # the paper's ceil, not floor: at N = 8,192, B_c = 391 keys gives 21 blocks (floor's 390 would give 22)
    long = hbm_accesses(8192, d, M)
    assert long["flash"] == 2 * 8192 * d + 3 * 8192 * d * 21 and round(long["ratio"], 2) == 7.94
    # more on-chip memory, fewer passes over Q and O: the traffic falls as M grows, to the 2-pass floor
    assert hbm_accesses(n, d, 4 * d)["flash"] > out["flash"] > hbm_accesses(n, d, 4 * d * n)["flash"] == 5 * n * d
    with pytest.raises(ValueError, match="sram_elements=100 < 4 \\* head_dim = 256"):
        hbm_accesses(n, d, 100)


# ----------------------------------------------------------------------------- multi-head latent attention
def _mla(**kw):
    torch.manual_seed(0)
    args = dict(d_model=32, num_heads=4, head_dim=8, kv_rank=16, rope_dim=4, q_rank=12)
    args.update(kw)
    return MultiHeadLatentAttention(**args).double()


def _mla_by_hand(mla, x):
    """The paper's equations one head at a time, keys and values up-projected explicitly."""
    B, L, _ = x.shape
    H, dh, dr = mla.num_heads, mla.head_dim, mla.rope_dim
    pos = torch.arange(L)
    c_q = x if mla.q_down is None else mla.q_down(x)
    q_all = mla.q_up(c_q).view(B, L, H, dh + dr)
    c_kv = mla.kv_down(x)
    k_r = rotary(mla.k_rope(x), pos)
    kv = mla.kv_up(c_kv).view(B, L, H, 2 * dh)
    heads = []
    for i in range(H):
        q_i = torch.cat([q_all[:, :, i, :dh], rotary(q_all[:, :, i, dh:], pos)], -1)
        k_i = torch.cat([kv[:, :, i, :dh], k_r], -1)
        scores = q_i @ k_i.transpose(1, 2) / (dh + dr) ** 0.5
        scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
        heads.append(torch.softmax(scores, -1) @ kv[:, :, i, dh:])
    return mla.out_proj(torch.cat(heads, -1))


@pytest.mark.parametrize("q_rank", [12, None])
def test_mla_equals_the_papers_equations_head_by_head(q_rank):
    mla = _mla(q_rank=q_rank)
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    out, weights = mla(x)
    assert weights is None and torch.allclose(out, _mla_by_hand(mla, x), atol=1e-12)


def test_mla_decoding_with_its_latent_cache_equals_the_full_pass():
    mla = _mla()
    x = torch.randn(2, 10, 32, dtype=torch.float64)
    full, _ = mla(x)
    out, _, cache = mla(x[:, :6], use_cache=True)
    steps = [out]
    for t in range(6, 10):
        out, _, cache = mla(x[:, t:t + 1], past_kv=cache, use_cache=True)
        steps.append(out)
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-12)
    assert isinstance(cache, LatentCache) and cache.length == 10
    assert cache.nbytes() == 2 * 10 * mla.cache_bytes_per_token(bytes_per_element=8)  # (d_c + d_h^R) per token


def test_mla_weights_masks_and_head_mask_follow_multi_head_attentions_rules():
    mla = _mla()
    x = torch.randn(2, 8, 32, dtype=torch.float64)
    out, w = mla(x, need_weights=True)
    assert w.shape == (2, 4, 8, 8) and torch.allclose(w.sum(-1), torch.ones(2, 4, 8, dtype=torch.float64))
    assert (w.triu(1) == 0).all()                                        # causal
    window = sliding_window_mask(8, window=3)
    _, w3 = mla(x, attn_mask=window, need_weights=True)
    assert (w3[..., window] == 0).all() and not torch.allclose(w3, w)   # the pattern is ORed with causal
    pad = torch.zeros(2, 8, dtype=torch.bool)
    pad[1, 2] = True
    _, wp = mla(x, key_padding_mask=pad, need_weights=True)
    assert (wp[1, :, :, 2] == 0).all() and torch.allclose(wp[0], w[0])
    gate = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    gated, _ = mla(x, head_mask=gate)
    cut = mla.out_proj.weight.clone()
    with torch.no_grad():
        mla.out_proj.weight[:, 8:16] = 0                                  # head 1's columns of W^O
    assert torch.allclose(gated, mla(x)[0], atol=1e-12)
    with torch.no_grad():
        mla.out_proj.weight.copy_(cut)


def test_rotary_keeps_norms_and_makes_scores_depend_on_the_offset_only():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 8, generator=g, dtype=torch.float64), torch.randn(1, 8, generator=g, dtype=torch.float64)
    rq = lambda p: rotary(q, torch.tensor([p]))  # noqa: E731
    rk = lambda p: rotary(k, torch.tensor([p]))  # noqa: E731
    assert torch.allclose(rq(5).norm(), q.norm())
    assert torch.allclose(rq(7) @ rk(3).T, rq(14) @ rk(10).T)  # offset 4 both times


@pytest.mark.parametrize("call, message", [
    (lambda: MultiHeadLatentAttention(32, 4, 8, kv_rank=16, rope_dim=3), "rope_dim=3 must be even"),
    (lambda: MultiHeadLatentAttention(32, 0, 8, kv_rank=16, rope_dim=4), "num_heads"),
    (lambda: _mla()(torch.randn(2, 3, 31, dtype=torch.float64)), "d_model=32"),
    (lambda: _mla()(torch.randn(2, 0, 32, dtype=torch.float64)), "L = 0"),
    (lambda: _mla()(torch.randn(2, 3, 32, dtype=torch.float64),
                    past_kv=LatentCache(torch.zeros(1, 2, 16, dtype=torch.float64), torch.zeros(1, 2, 4, dtype=torch.float64))),
     "past_kv holds c_kv (1, 2, 16)"),
    (lambda: _mla()(torch.randn(2, 3, 32, dtype=torch.float64), is_causal=False), "is_causal=False"),
    (lambda: _mla()(torch.randn(2, 3, 32, dtype=torch.float64), torch.randn(2, 3, 32, dtype=torch.float64)),
     "self-attention"),
    (lambda: _mla()(torch.randn(2, 3, 32, dtype=torch.float64), head_mask=torch.ones(3, dtype=torch.float64)),
     "head_mask must be a float (4,)"),
    (lambda: _mla()(torch.randn(2, 3, 32, dtype=torch.float64), attn_mask=torch.zeros(5, 5, dtype=torch.bool)),
     "attn_mask"),
    (lambda: rotary(torch.randn(3, 5), torch.arange(3)), "even feature size"),
])
def test_mla_refuses_bad_input_by_name(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_latent_cache_bytes_match_the_module_and_deepseek_v2s_published_ratio():
    from mha_lib.cost import kv_cache_bytes
    from mha_lib.efficient import DEEPSEEK_V2_MLA, latent_kv_cache_bytes

    mla = _mla()
    _, _, cache = mla(torch.randn(3, 7, 32, dtype=torch.float64), use_cache=True)
    assert cache.nbytes() == latent_kv_cache_bytes(num_layers=1, kv_rank=16, rope_dim=4, seq_len=7, batch=3,
                                                   dtype=torch.float64)
    c = DEEPSEEK_V2_MLA
    mla_bytes = latent_kv_cache_bytes(num_layers=c["num_layers"], kv_rank=c["kv_rank"], rope_dim=c["rope_dim"],
                                      seq_len=1)
    mha_bytes = kv_cache_bytes(num_layers=c["num_layers"], num_kv_heads=c["num_heads"], head_dim=c["head_dim"],
                               seq_len=1)
    assert mla_bytes == 60 * 576 * 2 and mha_bytes / mla_bytes == pytest.approx(32768 / 576)
    with pytest.raises(ValueError, match="kv_rank"):
        latent_kv_cache_bytes(num_layers=1, kv_rank=0, rope_dim=4, seq_len=1)
    with pytest.raises(ValueError, match="floating-point torch.dtype"):
        latent_kv_cache_bytes(num_layers=1, kv_rank=4, rope_dim=4, seq_len=1, dtype="float16")


# ----------------------------------------------------------------------------- hostile inputs (issue 47)
@pytest.mark.parametrize("base", [0, -2, 1, 0.5, float("nan"), float("inf"), True, "10000"])
def test_rotary_refuses_a_base_that_is_not_a_finite_number_above_1(base):
    x = torch.randn(2, 3, 4, 8)
    with pytest.raises(ValueError, match=r"base"):
        rotary(x, torch.arange(4), base=base)


@pytest.mark.parametrize("call, message", [
    (lambda: rotary(torch.arange(8).view(1, 8), torch.arange(1)), "floating-point"),
    (lambda: rotary(torch.randn(2, 8), torch.tensor([0.5, 1.5])), "integer"),
])
def test_rotary_refuses_integer_features_and_fractional_positions_by_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_window_longer_than_the_keys_costs_what_the_keys_cost():
    """Issue 47: window 4,096 over 8 queries scored 8 x (2 x 4,096 - 1) keys for the output of window 8."""
    q, k, v = _qkv(B=1, H=2, L=8, d=4)
    seen = []
    original = torch.softmax

    def spy(x, *args, **kwargs):
        seen.append(x.numel())
        return original(x, *args, **kwargs)

    torch.softmax = spy
    try:
        long = sliding_window_attention(q, k, v, window=4096, sinks=2)
    finally:
        torch.softmax = original
    assert torch.equal(long, sliding_window_attention(q, k, v, window=8, sinks=2))
    ref, _ = attention(q, k, v, is_causal=True)
    assert torch.allclose(long, ref, atol=1e-12)
    assert seen and max(seen) <= 2 * 8 * (2 + 2 * 8)  # (B, H, blocks, w, sinks + 2w - 1) with w <= S


@pytest.mark.parametrize("B, H, L, S", [(2, 3, 0, 0), (2, 3, 0, 5), (0, 3, 4, 4), (2, 0, 4, 4)])
def test_sliding_window_attention_of_no_query_is_empty_like_sdpa(B, H, L, S):
    q, k, v = _qkv(B=B, H=H, L=L, S=S, d=4)
    v = v[..., :3]  # d_v may differ from d_k
    out = sliding_window_attention(q, k, v, window=4, sinks=min(S, 1))
    want = F.scaled_dot_product_attention(q, k, v)
    assert out.shape == want.shape == (B, H, L, 3) and out.dtype == q.dtype


@pytest.mark.parametrize("seed", [2**64, 2**70, -1])
def test_block_sparse_mask_names_a_seed_out_of_the_generators_range(seed):
    with pytest.raises(ValueError, match=r"seed"):
        block_sparse_mask(8, block=4, seed=seed)
    assert block_sparse_mask(8, block=4, seed=2**64 - 1).shape == (8, 8)  # the largest seed torch takes
