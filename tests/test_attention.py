"""Tests for mha_lib.attention: torch equality, masks, GQA/MQA, KV cache, head_mask, gradients,
and cases reported from the field. Pruning is in test_attention_pruning.py; the
property-based comparison with a per-head loop is in test_attention_properties.py."""
from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from mha_lib.core import MultiHeadAttention, attention, build_attention_mask

pytestmark = pytest.mark.usefixtures("single_thread")

BOTH_PATHS = pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "explicit"])


def seeded(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0, device="cpu", dtype=torch.float32):
    return torch.randn(*shape, generator=seeded(seed)).to(device=device, dtype=dtype)


def make_mha(d_model=32, num_heads=4, seed=0, device="cpu", dtype=torch.float32, **kw):
    torch.manual_seed(seed)
    m = MultiHeadAttention(d_model, num_heads, **kw).to(device=device, dtype=dtype)
    with torch.no_grad():  # non-zero biases, so a test would notice a missing bias
        for p in m.parameters():
            if p.dim() == 1:
                p.uniform_(-0.5, 0.5)
    return m.eval()


def padding_mask(lengths, max_len, device="cpu"):
    """(B, S) bool, True on pads."""
    return torch.arange(max_len, device=device)[None, :] >= torch.tensor(lengths, device=device)[:, None]


def assert_no_nan(*tensors):
    for t in tensors:
        if t is not None:
            assert torch.isfinite(t).all(), "non-finite values"


# ------------------------------------------------------------------------------------------
# Equality with torch.nn.MultiheadAttention after from_torch
# ------------------------------------------------------------------------------------------


def torch_masks(kind, B, H, L, S, device):
    """(key_padding_mask, attn_mask) in conventions both modules share."""
    g = seeded(7)
    if kind == "none":
        return None, None
    if kind == "padding":
        return padding_mask([S, max(S - 2, 1), 1][:B], S, device), None
    if kind == "bool2d":
        return None, (torch.rand(L, S, generator=g) < 0.4).to(device)
    if kind == "bool_bh":  # torch's (B*H, L, S) layout
        return None, (torch.rand(B * H, L, S, generator=g) < 0.4).to(device)
    if kind == "float_bh":
        m = torch.randn(B * H, L, S, generator=g)
        m[torch.rand(B * H, L, S, generator=g) < 0.3] = -math.inf
        return None, m.to(device)
    if kind == "padding+float2d":
        m = torch.randn(L, S, generator=g)
        m[torch.rand(L, S, generator=g) < 0.3] = -math.inf
        return padding_mask([S, max(S - 2, 1), 1][:B], S, device), m.to(device)
    raise AssertionError(kind)


def allowed_rows(kpm, attn_mask, B, H, L, S, device):
    """(B, H, L) bool: query rows with at least one allowed key."""
    blocked = torch.zeros(B, H, L, S, dtype=torch.bool, device=device)
    if kpm is not None:
        blocked |= kpm[:, None, None, :]
    if attn_mask is not None:
        am = attn_mask if attn_mask.dtype == torch.bool else torch.isneginf(attn_mask)
        blocked |= am.reshape(B, H, L, S) if am.dim() == 3 else am
    return ~blocked.all(-1)


@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("L,S", [(6, 6), (4, 7)], ids=["self", "cross"])
@pytest.mark.parametrize("masks", ["none", "padding", "bool2d", "bool_bh", "float_bh", "padding+float2d"])
@pytest.mark.parametrize("batch_first", [True, False])
@BOTH_PATHS
def test_matches_torch_multihead_attention(B, L, S, masks, batch_first, need_weights, device):
    d, H = 32, 4
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(d, H, batch_first=batch_first, device=device).eval()
    with torch.no_grad():
        ref.in_proj_bias.uniform_(-0.5, 0.5)
        ref.out_proj.bias.uniform_(-0.5, 0.5)
    m = MultiHeadAttention.from_torch(ref)
    assert not m.training
    q = randn(B, L, d, seed=1, device=device)
    kv = q if L == S else randn(B, S, d, seed=2, device=device)
    kpm, am = torch_masks(masks, B, H, L, S, device)

    out, w = m(q, kv, kv, key_padding_mask=kpm, attn_mask=am, need_weights=need_weights)
    t_in = (q, kv, kv) if batch_first else (q.transpose(0, 1), kv.transpose(0, 1), kv.transpose(0, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation note on mixed mask dtypes
        with torch.no_grad():
            ref_out, ref_w = ref(*t_in, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)
            _, ref_avg = ref(*t_in, key_padding_mask=kpm, attn_mask=am, average_attn_weights=True)
    if not batch_first:
        ref_out = ref_out.transpose(0, 1)

    ok = allowed_rows(kpm, am, B, H, L, S, device)  # torch gives NaN on the other rows
    row_ok = ok.all(1)  # (B, L): a query row where every head has an allowed key
    assert row_ok.any()
    torch.testing.assert_close(out[row_ok], ref_out[row_ok], atol=2e-6, rtol=1e-5)
    assert_no_nan(out, w)
    if need_weights:
        assert w.shape == (B, H, L, S)
        torch.testing.assert_close(w[ok], ref_w[ok], atol=2e-6, rtol=1e-5)
        torch.testing.assert_close(w.mean(1)[row_ok], ref_avg[row_ok], atol=2e-6, rtol=1e-5)
        assert (w[~ok] == 0).all()
    else:
        assert w is None


@pytest.mark.parametrize("bias", [True, False])
def test_from_torch_without_bias_and_with_dropout(bias):
    ref = torch.nn.MultiheadAttention(16, 2, bias=bias, dropout=0.25, batch_first=True)
    m = MultiHeadAttention.from_torch(ref)
    assert m.dropout == 0.25 and m.training and (m.q_proj.bias is None) == (not bias)
    ref.eval(), m.eval()
    x = randn(2, 5, 16)
    torch.testing.assert_close(m(x)[0], ref(x, x, x)[0], atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs,word",
    [({"add_bias_kv": True}, "add_bias_kv"), ({"add_zero_attn": True}, "add_zero_attn"),
     ({"kdim": 8}, "kdim"), ({"vdim": 8}, "vdim")],
)
def test_from_torch_rejects_what_it_cannot_copy(kwargs, word):
    ref = torch.nn.MultiheadAttention(16, 2, **kwargs)
    with pytest.raises(ValueError, match=word):
        MultiHeadAttention.from_torch(ref)
    with pytest.raises(ValueError, match="Linear"):
        MultiHeadAttention.from_torch(torch.nn.Linear(2, 2))


def test_the_docstrings_differences_from_torch_hold_for_the_installed_torch():
    """Each difference the class docstring lists, checked against torch's real module."""
    import inspect

    doc = MultiHeadAttention.__doc__
    assert ":meth:`from_torch`" in doc and "batch_first=False" in doc and "bottom-right" in doc
    ref = torch.nn.MultiheadAttention(8, 2, dropout=0.5)
    assert ref.batch_first is False  # torch: (L, B, E) by default
    defaults = inspect.signature(ref.forward).parameters
    assert defaults["need_weights"].default is True and defaults["average_attn_weights"].default is True
    assert inspect.signature(MultiHeadAttention.forward).parameters["need_weights"].default is False
    m = MultiHeadAttention.from_torch(ref)
    x = randn(1, 3, 8)  # (B, L, E) for us; torch gets x.transpose(0, 1)
    xt = x.transpose(0, 1)
    # polarity: True = ignored, in both (and F.scaled_dot_product_attention's bool mask is the opposite)
    ref.eval(), m.eval()
    kpm = torch.tensor([[False, False, True]])
    blocked = torch.tensor([[False, True, False]] * 3)
    _, w_ref = ref(xt, xt, xt, key_padding_mask=kpm, attn_mask=blocked, average_attn_weights=False)
    _, w = m(x, key_padding_mask=kpm, attn_mask=blocked, need_weights=True)
    assert w.shape == w_ref.shape == (1, 2, 3, 3)  # per head; torch's default averages them
    assert (w_ref[..., 1:] == 0).all() and (w[..., 1:] == 0).all()
    torch.testing.assert_close(w, w_ref, atol=2e-6, rtol=1e-5)
    # is_causal: a hint torch's module refuses alone; here a bottom-right mask (L=2 queries, S=4 keys)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        ref(xt, xt, xt, is_causal=True)
    q, kv = randn(1, 2, 8, seed=3), randn(1, 4, 8, seed=4)
    _, w = m(q, kv, need_weights=True, is_causal=True)
    assert (w[0, 0, 0] > 0).tolist() == [True, True, True, False]  # SDPA's top-left would allow key 0 only
    # a query with every key blocked: NaN in torch, zeros here
    all_blocked = torch.zeros(3, 3, dtype=torch.bool)
    all_blocked[0] = True
    assert torch.isnan(ref(xt, xt, xt, attn_mask=all_blocked)[0][0]).all()
    out, w = m(x, attn_mask=all_blocked, need_weights=True)
    assert not out.isnan().any() and (w[0, :, 0] == 0).all()
    # in training, torch returns weights after dropout; ours are before it (rows sum to 1)
    ref.train(), m.train()
    torch.manual_seed(0)
    _, w_ref = ref(xt, xt, xt, average_attn_weights=False)
    _, w = m(x, need_weights=True)
    assert not torch.allclose(w_ref.sum(-1), torch.ones(1, 2, 3))
    torch.testing.assert_close(w.sum(-1), torch.ones(1, 2, 3))


# ------------------------------------------------------------------------------------------
# The functional form
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("H_kv", [4, 2, 1])
def test_functional_attention_matches_sdpa(H_kv, device):
    B, H, L, S, dk = 2, 4, 5, 6, 8
    q = randn(B, H, L, dk, seed=1, device=device)
    k = randn(B, H_kv, S, dk, seed=2, device=device)
    v = randn(B, H_kv, S, dk + 3, seed=3, device=device)  # d_v may differ from d_k
    blocked = (torch.rand(B, 1, L, S, generator=seeded(4)) < 0.3).to(device)
    blocked[..., 0] = False  # every row keeps a key, so SDPA itself is finite
    out, w = attention(q, k, v, attn_mask=blocked)
    # torch's SDPA uses the opposite bool polarity: True = keep
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked, enable_gqa=True)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert w.shape == (B, H, L, S)
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, L, device=device))
    assert (w[blocked.expand(B, H, L, S)] == 0).all()
    out2, _ = attention(q, k, v, attn_mask=blocked, scale=0.3)
    ref2 = F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked, enable_gqa=True, scale=0.3)
    torch.testing.assert_close(out2, ref2, atol=1e-5, rtol=1e-5)


def test_functional_weights_are_taken_before_dropout():
    q, k, v = randn(1, 2, 6, 4, seed=1), randn(1, 2, 6, 4, seed=2), randn(1, 2, 6, 4, seed=3)
    torch.manual_seed(0)
    out, w = attention(q, k, v, dropout_p=0.5)
    out0, w0 = attention(q, k, v)
    torch.testing.assert_close(w, w0)  # weights: before dropout, rows sum to 1
    assert not torch.allclose(out, out0)  # but the output did use dropout


def test_functional_rejects_bad_shapes():
    q = randn(1, 4, 3, 8)
    with pytest.raises(ValueError, match=r"k \(4, 3, 8\)"):
        attention(q, q[0], q)
    with pytest.raises(ValueError, match="3 heads, which must divide q's 4"):
        attention(q, randn(1, 3, 3, 8), randn(1, 3, 3, 8))
    with pytest.raises(ValueError, match="d_k"):
        attention(q, randn(1, 4, 3, 7), randn(1, 4, 3, 7))


# ------------------------------------------------------------------------------------------
# Cases from the field
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["train", "eval"])
@BOTH_PATHS
def test_case1_fully_padded_sequence(mode, need_weights, device):
    """Lengths [5, 3, 1, 0]: no NaN in outputs or gradients; the empty sequence gets zero
    weights and a zero head output; every other sequence matches its run alone."""
    lengths, L, d = [5, 3, 1, 0], 5, 32
    m = make_mha(d, 4, device=device, dropout=0.1 if mode == "train" else 0.0)
    m.train(mode == "train")
    x = randn(4, L, d, device=device).requires_grad_(True)
    kpm = padding_mask(lengths, L, device)
    out, w = m(x, key_padding_mask=kpm, need_weights=need_weights)
    head_out, _ = m.head_outputs(x, key_padding_mask=kpm)
    out.square().sum().backward()
    assert_no_nan(out, w, x.grad, *[p.grad for p in m.parameters()])
    assert (head_out[3] == 0).all()  # no key at all: zero head output ...
    torch.testing.assert_close(out[3], m.out_proj.bias.expand(L, d))  # ... so out = W^O's bias
    if need_weights:
        assert (w[3] == 0).all()
        torch.testing.assert_close(w[:3].sum(-1), torch.ones(3, 4, L, device=device))
        assert (w[kpm[:, None, None, :].expand_as(w)] == 0).all()

    if mode == "eval":  # with dropout, "the same output as alone" is not defined
        for b, n in enumerate(lengths[:3]):
            alone, _ = m(x[b:b + 1, :n], need_weights=need_weights)
            torch.testing.assert_close(out[b:b + 1, :n], alone, atol=2e-6, rtol=1e-5)


def test_case1_train_mode_without_dropout_matches_alone(device):
    lengths, L, d = [5, 3, 1, 0], 5, 32
    m = make_mha(d, 4, device=device).train()
    x = randn(4, L, d, device=device)
    out, _ = m(x, key_padding_mask=padding_mask(lengths, L, device))
    for b, n in enumerate(lengths[:3]):
        torch.testing.assert_close(out[b:b + 1, :n], m(x[b:b + 1, :n])[0], atol=2e-6, rtol=1e-5)


HALF_TOL = {torch.float16: 1e-2, torch.bfloat16: 6e-2}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@BOTH_PATHS
def test_case2_masks_in_half_precision(dtype, need_weights, device):
    """Same masked input in fp32 and fp16/bf16: no error, no NaN (outputs and grads), and close to
    fp32. Covers padding (incl. an empty sequence), causal, a user float mask with a huge finite
    fill (-1e9 overflows to -inf in fp16) and a fully blocked attn_mask row."""
    B, L, d = 3, 6, 32
    m32 = make_mha(d, 4, device=device)
    x32 = randn(B, L, d, device=device)
    kpm = padding_mask([6, 2, 0], L, device)
    fill = torch.zeros(L, L)
    fill[:, 3] = -1e9
    fill[2, :] = -1e9  # a row blocked only by a huge constant: finite in fp32/bf16, -inf in fp16
    fill[4, :] = -math.inf  # a row blocked by -inf: empty row
    fill = fill.to(device)
    kwargs = dict(key_padding_mask=kpm, is_causal=True, need_weights=need_weights)

    out32, w32 = m32(x32, attn_mask=fill, **kwargs)
    m = make_mha(d, 4, device=device).to(dtype)
    x = x32.to(dtype).requires_grad_(True)
    out, w = m(x, attn_mask=fill, **kwargs)
    out.float().square().sum().backward()
    assert out.dtype == dtype
    assert_no_nan(out, w, x.grad, *[p.grad for p in m.parameters()])
    # Row 2 differs by design: -1e9 is a finite bias in fp32 (and bf16), where all of row 2's scores
    # shift equally, but it is -inf in fp16, where row 2 becomes an empty row (zero output).
    # Compare every other row; row 2 must simply be finite (checked above).
    rows = [i for i in range(L) if i != 2]
    tol = HALF_TOL[dtype]
    torch.testing.assert_close(out[:, rows].float(), out32[:, rows], atol=tol * 4, rtol=tol)
    if need_weights:
        torch.testing.assert_close(w[:, :, rows].float(), w32[:, :, rows], atol=tol, rtol=tol)
        assert (w[:, :, 4] == 0).all() and (w[2] == 0).all()  # -inf row; empty sequence
        if dtype == torch.float16:
            assert (w[:, :, 2] == 0).all()


def test_no_large_fill_constants_in_code():
    """The whole kind of fault: the code has no numeric literal like -1e9, 1e4 or 10000 to fill
    masked scores with (docstrings may mention them), and no finfo(...).min fill."""
    import importlib
    import inspect
    import io
    import tokenize

    # Every module of the core (mha_lib.core.*), where the masks are built and applied.
    sources = {name: inspect.getsource(importlib.import_module(f"mha_lib.core.{name}"))
               for name in ("functional", "masks", "kv_cache", "multi_head")}
    assert "class MultiHeadAttention" in sources["multi_head"] and "def build_attention_mask" in sources["masks"]
    for source in sources.values():
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        numbers = [float(t.string.replace("_", "")) for t in tokens if t.type == tokenize.NUMBER and "j" not in t.string]
        assert numbers and max(abs(n) for n in numbers) < 1e4
        names = [t.string for t in tokens if t.type == tokenize.NAME]
        assert "finfo" not in names or "min" not in names


@pytest.mark.parametrize(
    "how", ["is_causal", "bool_attn_mask", "float_attn_mask", "bool_bh_attn_mask"]
)
@BOTH_PATHS
def test_case3_causal_mask_does_not_leak(how, need_weights, device):
    B, L, d, H = 2, 6, 32, 4
    m = make_mha(d, H, device=device)
    x = randn(B, L, d, device=device)
    x2 = x.clone()
    x2[:, 1:] = randn(B, L - 1, d, seed=9, device=device)  # change tokens 1..L-1
    future = torch.ones(L, L, dtype=torch.bool, device=device).triu(1)  # True = blocked
    kwargs = {
        "is_causal": {"is_causal": True},
        "bool_attn_mask": {"attn_mask": future},
        "float_attn_mask": {"attn_mask": torch.zeros(L, L, device=device).masked_fill(future, -math.inf)},
        "bool_bh_attn_mask": {"attn_mask": future.expand(B * H, L, L)},
    }[how]
    out, w = m(x, need_weights=need_weights, **kwargs)
    out2, _ = m(x2, need_weights=need_weights, **kwargs)
    torch.testing.assert_close(out[:, 0], out2[:, 0], atol=0, rtol=0)  # position 0 is untouched
    assert not torch.allclose(out[:, 1:], out2[:, 1:])  # (the test can see a change)
    for i in range(1, L):  # and position i only depends on 0..i
        x3 = x.clone()
        x3[:, i + 1:] = 0
        torch.testing.assert_close(m(x3, **kwargs)[0][:, i], out[:, i], atol=2e-6, rtol=1e-5)
    if need_weights:
        assert (w[future.expand_as(w)] == 0).all()


@BOTH_PATHS
def test_case3_float_01_mask_is_added_not_a_causal_mask(need_weights):
    """A lower-triangular 0/1 float "keep" mask by mistake: it warns, and it is ADDED to the
    scores (the 1s raise those scores by 1; nothing is blocked), so the future leaks."""
    B, L, d, H = 2, 5, 32, 4
    m = make_mha(d, H)
    x = randn(B, L, d)
    keep01 = torch.ones(L, L).tril()
    with pytest.warns(UserWarning, match="only 0s and 1s.*ADDED"):
        out, w = m(x, attn_mask=keep01, need_weights=need_weights)

    # What it does: plain softmax(QK^T/sqrt(hd) + keep01) V.
    q, k, v = (p(x).view(B, L, H, 8).transpose(1, 2) for p in (m.q_proj, m.k_proj, m.v_proj))
    w_ref = (q @ k.transpose(-2, -1) / math.sqrt(8) + keep01).softmax(-1)
    out_ref = m.out_proj((w_ref @ v).transpose(1, 2).reshape(B, L, d))
    torch.testing.assert_close(out, out_ref, atol=2e-6, rtol=1e-5)
    if need_weights:
        torch.testing.assert_close(w, w_ref, atol=2e-6, rtol=1e-5)
        assert (w[..., 0, 1:] > 0).all()  # query 0 attends the future: not causal
    x2 = x.clone()
    x2[:, 1:] += 1.0
    with pytest.warns(UserWarning):
        out2, _ = m(x2, attn_mask=keep01, need_weights=need_weights)
    assert not torch.allclose(out[:, 0], out2[:, 0])  # position 0 sees the changed future
    with pytest.warns(UserWarning, match="key_padding_mask"):
        m(x, key_padding_mask=torch.tensor([[0.0, 0, 0, 1, 1], [0, 0, 0, 0, 0]]))


@BOTH_PATHS
def test_case4_per_head_weights_sum_to_one_and_average_like_torch(need_weights):
    B, L, S, d, H = 2, 4, 6, 32, 4
    ref = torch.nn.MultiheadAttention(d, H, batch_first=True).eval()
    m = MultiHeadAttention.from_torch(ref)
    q, kv = randn(B, L, d, seed=1), randn(B, S, d, seed=2)
    kpm = padding_mask([6, 4], S)
    _, w = m(q, kv, key_padding_mask=kpm, need_weights=True)
    out_any, _ = m(q, kv, key_padding_mask=kpm, need_weights=need_weights)
    assert w.shape == (B, H, L, S)
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, L))
    _, avg = ref(q, kv, kv, key_padding_mask=kpm)  # torch default: averaged over heads
    torch.testing.assert_close(w.mean(dim=1), avg, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(out_any, ref(q, kv, kv, key_padding_mask=kpm)[0], atol=2e-6, rtol=1e-5)


@BOTH_PATHS
def test_case5_scores_divided_by_sqrt_head_dim(need_weights, device):
    """d_model=512, 8 heads: divide by sqrt(64) = 8, not sqrt(512) and not sqrt(8)."""
    B, L, d, H = 2, 5, 512, 8
    m = make_mha(d, H, device=device)
    assert m.head_dim == 64
    x = randn(B, L, d, device=device)
    q, k, v = (p(x).view(B, L, H, 64).transpose(1, 2) for p in (m.q_proj, m.k_proj, m.v_proj))
    head_out, w = m.head_outputs(x, need_weights=need_weights)
    per_head = [F.scaled_dot_product_attention(q[:, h:h + 1], k[:, h:h + 1], v[:, h:h + 1]) for h in range(H)]
    torch.testing.assert_close(head_out, torch.cat(per_head, 1), atol=2e-6, rtol=1e-5)
    for wrong in (math.sqrt(512), math.sqrt(8)):  # the test can tell the scales apart
        other = F.scaled_dot_product_attention(q, k, v, scale=1 / wrong)
        assert not torch.allclose(head_out, other, atol=1e-4)
    if need_weights:
        torch.testing.assert_close(w, (q @ k.transpose(-2, -1) / 8).softmax(-1), atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize(
    "args,kwargs,pattern",
    [
        ((10, 3), {}, r"d_model=10.*num_heads=3"),
        ((8, 0), {}, r"num_heads.*0"),
        ((8, -2), {}, r"num_heads.*-2"),
        ((0, 2), {}, r"d_model.*0"),
        ((8.0, 2), {}, r"d_model.*8\.0"),
        ((8, 4), {"num_kv_heads": 3}, r"num_kv_heads=3.*num_heads=4"),
        ((8, 4), {"num_kv_heads": 0}, r"num_kv_heads.*0"),
        ((8, 4), {"dropout": 1.5}, r"dropout.*1\.5"),
        ((8, 4), {"pruned_heads": [4]}, r"\[4\].*original_num_heads=4"),
    ],
)
def test_case6_bad_constructor_arguments(args, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        MultiHeadAttention(*args, **kwargs)


def bad_forward_calls(B=2, L=3, S=4, d=16, H=4):
    x, kv = randn(B, L, d), randn(B, S, d)
    return [
        ("query 2-D", dict(query=x[0]), r"query must have shape.*\(3, 16\)"),
        ("wrong d_model", dict(query=randn(B, L, d + 1)), r"d_model=16.*\(2, 3, 17\)"),
        ("int query", dict(query=torch.ones(B, L, d, dtype=torch.long)), "floating point.*int64"),
        ("batch differs", dict(query=x, key=randn(B + 1, S, d)), r"batch sizes differ"),
        ("kv lengths differ", dict(query=x, key=kv, value=randn(B, S + 1, d)), "lengths differ"),
        ("kpm shape", dict(query=x, key=kv, key_padding_mask=torch.zeros(B, L, dtype=torch.bool)),
         r"key_padding_mask must have shape \(B, S\) = \(2, 4\), got \(2, 3\)"),
        ("kpm dtype", dict(query=x, key=kv, key_padding_mask=torch.zeros(B, S, dtype=torch.long)),
         "key_padding_mask has dtype torch.int64"),
        ("attn_mask shape", dict(query=x, key=kv, attn_mask=torch.zeros(L, L, dtype=torch.bool)),
         r"attn_mask has shape \(3, 3\)"),
        ("attn_mask (B*H+1)", dict(query=x, attn_mask=torch.zeros(B * H + 1, L, L, dtype=torch.bool)),
         r"\(9, 3, 3\)"),
        ("attn_mask 5-D", dict(query=x, attn_mask=torch.zeros(1, 1, 1, L, L, dtype=torch.bool)),
         r"\(1, 1, 1, 3, 3\)"),
        ("attn_mask uint8", dict(query=x, attn_mask=torch.zeros(L, L, dtype=torch.uint8)), "torch.uint8"),
        ("nan", dict(query=x, attn_mask=torch.tensor(float("nan")).expand(L, L)), "attn_mask contains NaN"),
        ("+inf", dict(query=x, attn_mask=torch.full((L, L), math.inf)), r"attn_mask contains \+inf"),
        ("kpm +inf", dict(query=x, key_padding_mask=torch.full((B, L), math.inf)),
         r"key_padding_mask contains \+inf"),
        ("head_mask shape", dict(query=x, head_mask=torch.ones(H + 1)), r"head_mask must have shape.*\(5,\)"),
        ("head_mask (B,H,1)", dict(query=x, head_mask=torch.ones(B, H, 1)), r"\(2, 4, 1\)"),
        ("head_mask bool", dict(query=x, head_mask=torch.ones(H, dtype=torch.bool)), "torch.bool"),
        ("past_kv heads", dict(query=x, past_kv=(randn(B, H + 1, 2, 4), randn(B, H + 1, 2, 4))),
         r"past_kv\[0\].*\(2, 5, 2, 4\)"),
        ("past_kv not pair", dict(query=x, past_kv=randn(B, H, 2, 4)), r"\(k, v\) pair"),
    ]


@pytest.mark.parametrize("case", bad_forward_calls(), ids=lambda c: c[0])
@BOTH_PATHS
def test_case6_bad_forward_arguments(case, need_weights):
    _, kwargs, pattern = case
    m = make_mha(16, 4)
    with pytest.raises(ValueError, match=pattern):
        m(**kwargs, need_weights=need_weights)


def test_fp16_overflowing_float_mask_is_rejected():
    """1e5 is finite in fp32 but +inf in fp16: that would give NaN, so it is an error."""
    m = make_mha(16, 4).half()
    x = randn(1, 3, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"\+inf.*too large for torch.float16"):
        m(x, attn_mask=torch.full((3, 3), 1e5))


# ------------------------------------------------------------------------------------------
# Causal alignment, GQA / MQA, KV cache
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("L,S", [(3, 5), (5, 3), (4, 4), (1, 6)])
def test_causal_mask_is_bottom_right_aligned(L, S):
    mask, empty = build_attention_mask(
        is_causal=True, batch=1, heads=1, q_len=L, k_len=S, dtype=torch.float32, device=torch.device("cpu")
    )
    i, j = torch.arange(L)[:, None], torch.arange(S)[None, :]
    allowed = j <= i + (S - L)
    rows_empty = ~allowed.any(-1)
    expect = torch.zeros(L, S).masked_fill(~allowed, -math.inf)
    expect[rows_empty, 0] = 0.0  # the guard unblocks key 0 of empty rows ...
    torch.testing.assert_close(mask[0, 0], expect)
    assert torch.equal(empty[0, 0, :, 0], rows_empty)  # ... and reports them (all False if none)


@BOTH_PATHS
def test_causal_with_more_queries_than_keys_gives_zero_rows(need_weights):
    m = make_mha(16, 2)
    q, kv = randn(1, 5, 16, seed=1), randn(1, 3, 16, seed=2)
    head_out, w = m.head_outputs(q, kv, is_causal=True, need_weights=need_weights)
    assert (head_out[:, :, :2] == 0).all() and (head_out[:, :, 2:] != 0).any()  # queries 0, 1 see nothing


def gqa_reference(m, x, kv, keep_mask):
    """Same projections, then F.scaled_dot_product_attention(..., enable_gqa=True)."""
    B, L, _ = x.shape
    S = kv.shape[1]
    hd = m.head_dim
    q = m.q_proj(x).view(B, L, m.num_heads, hd).transpose(1, 2)
    k = m.k_proj(kv).view(B, S, m.num_kv_heads, hd).transpose(1, 2)
    v = m.v_proj(kv).view(B, S, m.num_kv_heads, hd).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep_mask, enable_gqa=True)
    return m.out_proj(o.transpose(1, 2).reshape(B, L, -1))


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4, 8], ids=["mqa", "gqa2", "gqa4", "mha"])
@pytest.mark.parametrize("cross", [False, True])
@BOTH_PATHS
def test_gqa_mqa_match_sdpa_enable_gqa(num_kv_heads, cross, need_weights, device):
    B, L, d, H = 2, 5, 64, 8
    S = 7 if cross else L
    m = make_mha(d, H, num_kv_heads=num_kv_heads, device=device)
    assert m.k_proj.out_features == num_kv_heads * 8
    assert m.kv_head_index.tolist() == [i // (H // num_kv_heads) for i in range(H)]
    x = randn(B, L, d, seed=1, device=device)
    kv = randn(B, S, d, seed=2, device=device) if cross else x
    kpm = padding_mask([S, S - 2], S, device)
    causal = None if cross else torch.ones(L, L, dtype=torch.bool, device=device).tril()
    keep = ~kpm[:, None, None, :] if causal is None else (~kpm[:, None, None, :] & causal)
    out, w = m(x, kv, key_padding_mask=kpm, is_causal=not cross, need_weights=need_weights)
    torch.testing.assert_close(out, gqa_reference(m, x, kv, keep), atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@BOTH_PATHS
def test_kv_cache_decode_loop_equals_full_causal_pass(num_kv_heads, need_weights, device):
    B, T, P, d, H = 2, 7, 3, 32, 4
    m = make_mha(d, H, num_kv_heads=num_kv_heads, device=device)
    x = randn(B, T, d, device=device)
    full, full_w = m(x, is_causal=True, need_weights=True)

    out, w, cache = m(x[:, :P], is_causal=True, need_weights=need_weights, use_cache=True)  # prompt
    outs = [out]
    for t in range(P, T):  # one token per step; bottom-right causal lets it see every cached key
        out, w, cache = m(x[:, t:t + 1], past_kv=cache, is_causal=True, need_weights=need_weights, use_cache=True)
        assert cache[0].shape == cache[1].shape == (B, num_kv_heads, t + 1, d // H)
        outs.append(out)
        if need_weights:
            torch.testing.assert_close(w[:, :, 0], full_w[:, :, t, : t + 1], atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=2e-6, rtol=1e-5)


def test_kv_cache_with_key_padding_over_all_keys():
    """key_padding_mask covers the cached keys too: (B, S_past + S_new)."""
    m = make_mha(16, 2)
    x = randn(2, 5, 16)
    kpm = padding_mask([5, 3], 5)
    full, _ = m(x, key_padding_mask=kpm, is_causal=True)
    _, _, cache = m(x[:, :4], key_padding_mask=kpm[:, :4], is_causal=True, use_cache=True)
    last, _ = m(x[:, 4:], past_kv=cache, key_padding_mask=kpm, is_causal=True)
    torch.testing.assert_close(last, full[:, 4:], atol=2e-6, rtol=1e-5)


# ------------------------------------------------------------------------------------------
# head_mask, per-head outputs, weights before dropout
# ------------------------------------------------------------------------------------------


@BOTH_PATHS
def test_head_outputs_and_head_mask(need_weights, device):
    B, L, d, H = 2, 4, 32, 4
    m = make_mha(d, H, device=device)
    x = randn(B, L, d, device=device)
    head_out, w = m.head_outputs(x, need_weights=True)
    assert head_out.shape == (B, H, L, d // H)
    v = m.v_proj(x).view(B, L, H, d // H).transpose(1, 2)
    torch.testing.assert_close(head_out, w @ v, atol=2e-6, rtol=1e-5)  # head_h = A_h V_h
    torch.testing.assert_close(m.merge_heads(head_out), m(x, need_weights=need_weights)[0])

    xi = torch.tensor([1.0, 0.0, 0.5, 2.0], device=device)
    out, w_masked = m(x, head_mask=xi, need_weights=need_weights)
    torch.testing.assert_close(out, m.merge_heads(head_out * xi[:, None, None]), atol=2e-6, rtol=1e-5)
    if need_weights:
        torch.testing.assert_close(w_masked, w)  # weights are taken before head_mask


def test_per_example_head_mask_gives_per_example_importance_in_one_backward():
    """A (B, H) head_mask: grad[b, h] equals the gradient of example b's loss alone."""
    B, L, d, H = 3, 4, 32, 4
    m = make_mha(d, H)
    x = randn(B, L, d)
    xi = torch.ones(B, H, requires_grad=True)
    out, _ = m(x, head_mask=xi)
    out.square().sum().backward()
    for b in range(B):
        xi_b = torch.ones(H, requires_grad=True)
        m(x[b:b + 1], head_mask=xi_b)[0].square().sum().backward()
        torch.testing.assert_close(xi.grad[b], xi_b.grad, atol=1e-5, rtol=1e-5)
    assert (xi.grad != 0).all()


def test_module_weights_are_taken_before_dropout():
    m = make_mha(16, 2, dropout=0.5).train()
    x = randn(2, 6, 16)
    torch.manual_seed(0)
    out, w = m(x, need_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 6))
    torch.testing.assert_close(w, m.eval()(x, need_weights=True)[1])
    assert not torch.allclose(out, m(x)[0])  # dropout was applied to the output


# ------------------------------------------------------------------------------------------
# Gradients
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("masks", ["none", "masks", "masks+empty_row"])
@BOTH_PATHS
def test_gradcheck_float64(masks, need_weights):
    B, L, S, d, H = 2, 3, 4, 8, 2
    m = make_mha(d, H, num_kv_heads=1, dtype=torch.float64)
    q = randn(B, L, d, seed=1, dtype=torch.float64).requires_grad_(True)
    kv = randn(B, S, d, seed=2, dtype=torch.float64).requires_grad_(True)
    xi = torch.tensor([[0.7, 1.3], [1.0, 0.2]], dtype=torch.float64, requires_grad=True)
    kw = {}
    if masks != "none":
        am = randn(L, S, seed=3, dtype=torch.float64)
        am[0, 1] = -math.inf
        kw = {"key_padding_mask": padding_mask([4, 2], S), "attn_mask": am}
        if masks == "masks+empty_row":
            am[2, :] = -math.inf  # query 2 has no key: zero output, zero (not NaN) gradient

    def f(q, kv, xi):
        out, w = m(q, kv, head_mask=xi, need_weights=need_weights, **kw)
        return (out, w) if need_weights else out

    assert torch.autograd.gradcheck(f, (q, kv, xi))  # full Jacobians for the inputs
    params = dict(m.named_parameters())

    def g(*ps):
        return torch.func.functional_call(m, dict(zip(params, ps)), (q.detach(), kv.detach()), {"head_mask": xi.detach(), **kw})[0]

    ps = tuple(p.detach().requires_grad_(True) for p in params.values())
    assert torch.autograd.gradcheck(g, ps, fast_mode=True)  # parameters: random projections suffice


@BOTH_PATHS
def test_no_grad_and_inference_mode_give_the_same_numbers(need_weights, device):
    """Without autograd the explicit path normalises in place; the numbers must not change."""
    m = make_mha(32, 4, device=device)
    x, kv = randn(2, 5, 32, seed=1, device=device), randn(2, 6, 32, seed=2, device=device)
    am = randn(5, 6, seed=3, device=device)
    am[1] = -math.inf  # an empty row
    kwargs = dict(key_padding_mask=padding_mask([6, 3], 6, device), attn_mask=am, need_weights=need_weights)
    out, w = m(x, kv, **kwargs)
    assert out.requires_grad
    for ctx in (torch.no_grad, torch.inference_mode):
        with ctx():
            out2, w2 = m(x, kv, **kwargs)
        torch.testing.assert_close(out2, out, atol=1e-7, rtol=1e-6)
        if need_weights:
            torch.testing.assert_close(w2, w, atol=1e-7, rtol=1e-6)
            assert (w2[:, :, 1] == 0).all()


@pytest.mark.slow
@pytest.mark.parametrize(
    "code",
    [
        "import mha_lib; a = mha_lib.attention; b = mha_lib.attention",
        "import mha_lib; from mha_lib.core import MultiHeadAttention; a = b = mha_lib.attention",
        "import mha_lib, mha_lib.model; a = b = mha_lib.attention",
    ],
    ids=["twice", "after_submodule_import", "after_model_import"],
)
def test_mha_lib_attention_is_the_function_whatever_the_import_order(code):
    """The contract's ``mha_lib.attention(q, k, v)`` must stay the function even after the
    submodule of the same name is imported (the import system sets the package attribute)."""
    import subprocess
    import sys

    check = code + "; from mha_lib.core import attention as f; assert a is b is f, (a, b)"
    subprocess.run([sys.executable, "-c", check], check=True, capture_output=True)


@pytest.mark.slow
def test_the_module_mha_lib_attention_is_deprecated_and_the_name_stays_the_function():
    """One meaning for the name: ``mha_lib.attention`` is the function; the module of that name
    (the core's files re-exported) warns and still works, without taking the name."""
    import subprocess
    import sys

    code = ("import warnings, mha_lib, mha_lib.core as core\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    from mha_lib.attention import MultiHeadAttention, KVCache, build_attention_mask\n"
            "assert any(issubclass(x.category, DeprecationWarning) and 'mha_lib.core' in str(x.message) for x in w), w\n"
            "assert MultiHeadAttention is core.MultiHeadAttention and KVCache is core.KVCache\n"
            "assert mha_lib.attention is core.attention and callable(mha_lib.attention)\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


@pytest.mark.parametrize("mask_kind", ["none", "is_causal", "key_padding_mask", "attn_mask", "all"])
@BOTH_PATHS
def test_zero_keys_gives_bias_not_an_error(mask_kind, need_weights):
    """S = 0 (no keys) with any mask: zero weights, zero head output, out = W^O's bias."""
    B, L, d, H = 2, 3, 16, 4
    m = make_mha(d, H)
    q, kv = randn(B, L, d), randn(B, 0, d, seed=1)
    kw = {}
    if mask_kind in ("is_causal", "all"):
        kw["is_causal"] = True
    if mask_kind in ("key_padding_mask", "all"):
        kw["key_padding_mask"] = torch.zeros(B, 0, dtype=torch.bool)
    if mask_kind in ("attn_mask", "all"):
        kw["attn_mask"] = torch.zeros(L, 0)
    out, w = m(q, kv, need_weights=need_weights, **kw)
    torch.testing.assert_close(out, m.out_proj.bias.expand(B, L, d))
    head_out, _ = m.head_outputs(q, kv, need_weights=need_weights, **kw)
    assert head_out.shape == (B, H, L, d // H) and (head_out == 0).all()
    if need_weights:
        assert w.shape == (B, H, L, 0)
    o, w2 = attention(randn(B, H, L, 4), randn(B, H, 0, 4), randn(B, H, 0, 4), is_causal=True)
    assert o.shape == (B, H, L, 4) and (o == 0).all() and w2.shape == (B, H, L, 0)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(dropout="0.1"), "dropout.*'0.1'"),
        (dict(dropout=None), "dropout.*None"),
        (dict(dropout=float("nan")), "dropout.*nan"),
        (dict(dropout=True), "dropout.*True"),
        (dict(bias="no"), "bias.*'no'"),
    ],
)
def test_constructor_bad_types_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(8, 2, **kwargs)


def test_constructor_accepts_numpy_integers():
    np = pytest.importorskip("numpy")
    m = MultiHeadAttention(np.int64(16), np.int32(4), num_kv_heads=np.int64(2))
    assert (m.d_model, m.num_heads, m.num_kv_heads, m.head_dim) == (16, 4, 2, 4)
    assert all(type(v) is int for v in (m.d_model, m.num_heads, m.num_kv_heads, m.head_dim))
    assert m(randn(1, 3, 16))[0].shape == (1, 3, 16)


def test_head_mask_list_is_a_clear_error():
    m = make_mha(8, 2)
    with pytest.raises(ValueError, match="head_mask must be a float tensor.*list"):
        m(randn(1, 3, 8), head_mask=[1.0, 0.0])


def test_dtype_mismatch_names_the_dtypes():
    m = make_mha(8, 2)
    x = randn(1, 3, 8)
    with pytest.raises(ValueError, match="query torch.float32, key torch.float64"):
        m(x, x.double())
    with pytest.raises(ValueError, match="value torch.float64"):
        m(x, x, x.double())
    q = randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match="q torch.float16, k torch.float32"):
        attention(q.half(), q, q)
    with pytest.raises(ValueError, match="v torch.float64"):
        attention(q, q, q.double())


def test_01_float_mask_warning_points_at_the_callers_line():
    """The warning names the user's file, whichever entry point reached the mask helper."""
    from mha_lib.model import Encoder, EncoderConfig

    m = make_mha(8, 2)
    x, keep01 = randn(1, 3, 8), torch.ones(3, 3).tril()
    q = randn(1, 2, 3, 4)
    enc = Encoder(EncoderConfig(vocab_size=5, d_model=8, num_heads=2, num_layers=1, d_ff=8, max_len=3))
    calls = [
        lambda: m(x, attn_mask=keep01),
        lambda: m(x, attn_mask=keep01, need_weights=True),
        lambda: attention(q, q, q, attn_mask=keep01),
        lambda: enc(torch.ones(1, 3, dtype=torch.long), attn_mask=keep01),
    ]
    for call in calls:
        with pytest.warns(UserWarning, match="only 0s and 1s") as record:
            call()
        assert [r.filename for r in record] == [__file__]


def test_merge_heads_checks_its_input():
    m = make_mha(8, 2)
    with pytest.raises(ValueError, match=r"\(B, 2, L, 4\).*\(1, 3, 5, 4\)"):
        m.merge_heads(torch.zeros(1, 3, 5, 4))


# ----------------------------------------------------------------- hostile inputs
def test_second_pass_attention_cases():
    from mha_lib.core import KVCache, MultiHeadAttention, attention

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




def test_build_attention_mask_names_its_bad_arguments():
    for kwargs, match in [(dict(batch=True), "batch must be"), (dict(q_len=-1), "q_len must be"),
                          (dict(dtype=torch.long), "floating-point torch.dtype")]:
        args = dict(batch=1, heads=1, q_len=2, k_len=2, dtype=torch.float32, device=torch.device("cpu"), is_causal=True)
        with pytest.raises(ValueError, match=match):
            build_attention_mask(**{**args, **kwargs})
