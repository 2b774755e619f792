"""The core redesign and its hardening: fp16 masks at finfo.min, masks that add up past the
range, branch-free checks at the boundary, grouped-query attention without copies, the
preallocated KV cache, and causal attention without a mask tensor on the fused path."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import importlib

from mha_lib import checks, measure
from mha_lib.core import KVCache, MultiHeadAttention, attention

multi_head_module = importlib.import_module("mha_lib.core.multi_head")  # where the warning threshold lives

pytestmark = pytest.mark.usefixtures("single_thread")
BOTH_PATHS = pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "explicit"])


def make(d_model=32, num_heads=4, dtype=torch.float32, seed=0, **kw):
    torch.manual_seed(seed)
    return MultiHeadAttention(d_model, num_heads, **kw).to(dtype).eval()


# ------------------------------------------------------------------ fp16 masks
@BOTH_PATHS
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_finfo_min_fill_blocks_like_minus_inf(dtype, need_weights):
    """Hugging Face fills blocked positions with finfo(dtype).min. Scores below about -16 used to
    reach -inf in fp16 and give NaN rows; now finfo.min counts as blocked, on both paths."""
    m = make(dtype=dtype)
    with torch.no_grad():
        m.q_proj.weight.mul_(40.0)  # large scores, many far below -16
    x = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(1)).to(dtype)
    fill = torch.finfo(dtype).min
    hf = torch.zeros(2, 1, 5, 5, dtype=dtype)
    hf[1, :, :, 2:] = fill  # sequence 1 sees only keys 0, 1
    hf[0, :, 3, :] = fill  # query 3 of sequence 0 sees nothing
    blocked = hf == fill
    with torch.no_grad():
        out_hf, w_hf = m(x, attn_mask=hf, need_weights=need_weights)
        out_bool, w_bool = m(x, attn_mask=blocked, need_weights=need_weights)
    assert torch.isfinite(out_hf).all()
    torch.testing.assert_close(out_hf, out_bool, rtol=0, atol=0)
    if need_weights:
        assert (w_hf[0, :, 3] == 0).all() and (w_hf[1, :, :, 2:] == 0).all()


def test_finfo_min_fill_in_functional_attention_is_finite_and_equals_bool():
    q = torch.randn(1, 2, 4, 8, generator=torch.Generator().manual_seed(2)).half() * 30
    k = torch.randn(1, 2, 4, 8, generator=torch.Generator().manual_seed(3)).half() * 30
    fill = torch.full((4, 4), torch.finfo(torch.float16).min, dtype=torch.float16).triu(1)
    out, w = attention(q, k, k, attn_mask=fill)
    out_b, w_b = attention(q, k, k, attn_mask=fill != 0)
    assert torch.isfinite(out).all() and torch.equal(out, out_b) and torch.equal(w, w_b)


@BOTH_PATHS
def test_two_accepted_masks_that_add_past_fp16_range_are_refused(need_weights):
    m = make(dtype=torch.float16)
    x = torch.randn(1, 3, 32).half()
    kpm = torch.full((1, 3), 20000.0)
    am = torch.full((3, 3), 20000.0)
    m(x, key_padding_mask=kpm, need_weights=need_weights)  # each alone is fine
    m(x, attn_mask=am, need_weights=need_weights)
    with pytest.raises(ValueError, match=r"add up to 40000.*float16"):
        m(x, key_padding_mask=kpm, attn_mask=am, need_weights=need_weights)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_scores_beyond_the_dtypes_range_stay_finite_on_both_paths(dtype):
    """Scores above 65504 are inf in float16; the explicit path used to return all NaN there while
    the fused kernel (float32 accumulation) stayed finite. Both paths now agree (hardening 3, 1)."""
    m = make(dtype=dtype)
    x = (torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(4)) * 300).to(dtype)
    with torch.no_grad():
        q = m._project(x, x, x)[0].float()
        assert (q @ m._project(x, x, x)[1].float().transpose(-2, -1) * m.head_dim**-0.5).abs().max() > 65504
        fused, _ = m(x, need_weights=False)
        explicit, w = m(x, need_weights=True)
        _, w_fn = attention(*m._project(x, x, x))
    assert torch.isfinite(explicit).all() and torch.isfinite(w).all() and w.dtype == dtype
    torch.testing.assert_close(w.float().sum(-1), torch.ones(2, 4, 5), atol=1e-2, rtol=0)
    torch.testing.assert_close(explicit.float(), fused.float(), atol=0.05 * float(fused.abs().max()), rtol=0)
    assert torch.equal(w_fn, w)


def test_large_negative_sums_block_instead_of_overflowing():
    """-40000 + -40000 overflows fp16 to -inf: that position is blocked, and a row of them is
    an empty row (zeros), not NaN."""
    m = make(dtype=torch.float16)
    x = torch.randn(1, 3, 32).half()
    kpm = torch.full((1, 3), -40000.0)
    am = torch.full((3, 3), -40000.0)
    for nw in (False, True):
        out, _ = m(x, key_padding_mask=kpm, attn_mask=am, need_weights=nw)
        assert torch.isfinite(out).all()


# ------------------------------------------------------------------ one policy at the boundary
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(is_causal="no"), r"is_causal must be True or False, got 'no'"),
        (dict(need_weights=1), r"need_weights must be True or False, got 1"),
        (dict(head_mask=torch.tensor([1.0, float("nan"), 1.0, 1.0])), r"head_mask holds NaN"),
        (dict(head_mask=torch.tensor([1.0, float("inf"), 1.0, 1.0])), r"head_mask holds NaN or inf"),
    ],
)
def test_module_flags_and_head_mask_values_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make()(torch.randn(1, 3, 32), **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dropout_p=1.0), r"dropout_p must be a float in \[0, 1\), got 1.0"),
        (dict(dropout_p=True), r"dropout_p.*True"),
        (dict(scale=float("nan")), r"scale must be a finite number, got nan"),
        (dict(scale=0.0), r"scale must be > 0"),
        (dict(is_causal="yes"), r"is_causal must be True or False"),
    ],
)
def test_functional_attention_checks_scalars(kwargs, match):
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match=match):
        attention(q, q, q, **kwargs)


def test_functional_attention_refuses_zero_width_heads():
    q = torch.randn(1, 2, 3, 0)
    with pytest.raises(ValueError, match=r"d_k = 0"):
        attention(q, q, q)


def test_query_of_another_dtype_than_the_weights_is_named():
    m = make()
    with pytest.raises(ValueError, match=r"query is torch.float64.*weights are torch.float32"):
        m(torch.randn(1, 3, 32, dtype=torch.float64))


@pytest.mark.parametrize("value", [1, 2, 7])
def test_policy_accepts_ints_numpy_and_0d_tensors(value):
    np = pytest.importorskip("numpy")
    for v in (value, np.int64(value), torch.tensor(value)):
        assert checks.as_int(v, "x") == value


@pytest.mark.parametrize("value", [True, 2.0, 1.5, "2", None, torch.tensor([1]), torch.tensor(1.0)])
def test_policy_refuses_bools_floats_strings_none(value):
    with pytest.raises(ValueError, match=r"x must be an integer"):
        checks.as_int(value, "x")


def test_the_four_disagreements_are_gone():
    """Issue: prune_heads(1.5 / "12"), TokenClassifier with numpy ints, attention(dropout_p=1),
    Encoder with a float key_padding_mask: each answer is now the same everywhere."""
    np = pytest.importorskip("numpy")
    from mha_lib.model import Encoder, EncoderConfig, TokenClassifier
    from mha_lib import pruning

    cfg = EncoderConfig(vocab_size=5, d_model=8, num_heads=2, num_layers=2, d_ff=8, max_len=4)
    for heads in ({0: [1.5]}, {1: "12"}, {0: [True]}, {0.9: [1]}):
        model = TokenClassifier(cfg, 3)
        with pytest.raises(ValueError):
            pruning.prune_heads(model, heads)
        with pytest.raises(ValueError):
            model.prune_heads(heads)
        assert model.heads_per_layer == [2, 2]
    assert TokenClassifier(cfg, np.int64(3)).num_classes == 3
    with pytest.raises(ValueError, match="dropout"):
        MultiHeadAttention(8, 2, dropout=1.0)
    enc = Encoder(cfg).eval()
    ids = torch.tensor([[1, 2, 3, 0]])
    pad_bool = torch.tensor([[False, False, False, True]])
    pad_float = torch.tensor([[0.0, 0.0, 0.0, -math.inf]])
    torch.testing.assert_close(
        enc(ids, key_padding_mask=pad_float).last_hidden_state, enc(ids, key_padding_mask=pad_bool).last_hidden_state
    )


# ------------------------------------------------------------------ resource guard
def test_need_weights_warns_with_the_size_in_bytes(monkeypatch):
    monkeypatch.setattr(multi_head_module, "WEIGHTS_WARN_BYTES", 1000)
    m = make()
    with pytest.warns(UserWarning, match=r"\(1, 4, 16, 16\): 4,096 bytes.*need_weights=False"):
        m(torch.randn(1, 16, 32), need_weights=True)


# ------------------------------------------------------------------ KV cache
def test_kv_cache_of_another_dtype_is_named():
    m = make(dtype=torch.bfloat16)
    x = torch.randn(1, 2, 32).bfloat16()
    past = (torch.randn(1, 4, 3, 8), torch.randn(1, 4, 3, 8))  # float32 cache, bf16 module
    with pytest.raises(ValueError, match=r"past_kv\[0\] is torch.float32.*query is torch.bfloat16"):
        m(x, past_kv=past)


@BOTH_PATHS
@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
def test_decode_writes_in_place_and_equals_the_full_pass(num_kv_heads, need_weights):
    m = make(num_kv_heads=num_kv_heads)
    x = torch.randn(2, 12, 32, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full, _ = m(x, is_causal=True)
        cache = m.new_kv_cache(batch=2, capacity=16)
        buffer = cache._k.data_ptr()
        outs = []
        for t in range(12):
            out, _, cache = m(x[:, t:t + 1], past_kv=cache, use_cache=True, is_causal=True, need_weights=need_weights)
            outs.append(out)
        assert cache._k.data_ptr() == buffer  # no reallocation: nothing of the past was copied
    assert cache.length == 12 and cache.capacity == 16
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)


def test_cache_grows_in_chunks_and_a_pair_is_never_mutated():
    m = make()
    x = torch.randn(1, 5, 32)
    with torch.no_grad():
        _, _, cache = m(x, use_cache=True)
        assert (cache.length, cache.capacity) == (5, 256)
        k0, v0 = cache
        pair = (k0.clone(), v0.clone())
        _, _, grown = m(x[:, :1], past_kv=pair, use_cache=True)
        assert pair[0].shape[2] == 5 and grown.length == 6
        big = KVCache(torch.zeros(1, 4, 3, 8), torch.zeros(1, 4, 3, 8), chunk=4)
        big.append(torch.ones(1, 4, 2, 8), torch.ones(1, 4, 2, 8))
        assert (big.length, big.capacity) == (5, 8)
        branch = big.copy()
        big.append(torch.ones(1, 4, 1, 8), torch.ones(1, 4, 1, 8))
        assert branch.length == 5 and big.length == 6
        assert big.crop(2).length == 2
    with pytest.raises(ValueError, match="crop length=9"):
        big.crop(9)


def test_cache_under_autograd_appends_functionally():
    m = make().train()
    x = torch.randn(1, 4, 32, requires_grad=True)
    _, _, cache = m(x[:, :3], use_cache=True, is_causal=True)
    out, _, cache = m(x[:, 3:], past_kv=cache, use_cache=True, is_causal=True)
    out.sum().backward()  # no "modified by an inplace operation" error
    assert x.grad is not None and torch.isfinite(x.grad).all()


# ------------------------------------------------------------------ GQA without copies
@BOTH_PATHS
@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_grouped_query_attention_copies_no_keys(num_kv_heads, need_weights, monkeypatch):
    m = make(num_heads=8, num_kv_heads=num_kv_heads)
    x = torch.randn(2, 6, 32)
    expected, _ = m(x, need_weights=need_weights)

    def refuse(*args, **kwargs):
        raise AssertionError("K/V were repeated per query head")

    monkeypatch.setattr(torch.Tensor, "repeat_interleave", refuse)
    monkeypatch.setattr(torch.Tensor, "index_select", refuse)
    monkeypatch.setattr(torch.Tensor, "expand", refuse)
    out, _ = m(x, need_weights=need_weights)
    torch.testing.assert_close(out, expected)


# ------------------------------------------------------------------ causal without a mask tensor
def test_plain_causal_attention_reaches_sdpa_without_a_mask(monkeypatch):
    seen = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **kw):
        seen.append((attn_mask, is_causal))
        return real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    m = make()
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        out, _ = m(x, is_causal=True)
        ref, _ = m(x, is_causal=True, need_weights=True)
        _, _, cache = m(x, is_causal=True, use_cache=True)
        m(x[:, :1], past_kv=cache, is_causal=True)  # a decode step: L = 1 sees every key
    assert seen == [(None, True), (None, True), (None, False)]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_causal_peak_memory_stays_close_to_no_mask():
    """L = S = 8192: an (L, S) float mask alone would be 256 MiB."""
    m = make(d_model=16, num_heads=1)
    x = torch.randn(1, 8192, 16)
    with torch.no_grad():
        causal = measure.measure_peak_memory(lambda: m(x, is_causal=True))
        plain = measure.measure_peak_memory(lambda: m(x))
    assert causal < plain + 32 * 2**20, (causal, plain)
    assert causal < 64 * 2**20
