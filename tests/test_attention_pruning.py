"""Pruning and head masks, with MHA, GQA and MQA, both paths."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from mha_lib.core import MultiHeadAttention

pytestmark = pytest.mark.usefixtures("single_thread")

BOTH_PATHS = pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "explicit"])
ATOL, RTOL = 2e-6, 1e-5


def make_mha(d_model=32, num_heads=8, num_kv_heads=None, seed=0, device="cpu", dtype=torch.float32, **kw):
    torch.manual_seed(seed)
    m = MultiHeadAttention(d_model, num_heads, num_kv_heads=num_kv_heads, **kw).to(device=device, dtype=dtype)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 1:
                p.uniform_(-0.5, 0.5)
    return m.eval()


def inputs(B=2, L=5, S=6, d=32, device="cpu", dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, L, d, generator=g).to(device=device, dtype=dtype)
    kv = torch.randn(B, S, d, generator=g).to(device=device, dtype=dtype)
    kpm = (torch.arange(S)[None, :] >= torch.tensor([S, S - 2])[:, None]).to(device)
    return x, kv, kpm


def keep_vector(num_heads, pruned, device="cpu"):
    xi = torch.ones(num_heads, device=device)
    xi[list(pruned)] = 0.0
    return xi


# ------------------------------------------------------------------------------------------
# Case 8: masking equals pruning
# ------------------------------------------------------------------------------------------

KV_LAYOUTS = pytest.mark.parametrize("num_kv_heads", [8, 4, 2, 1], ids=["mha", "gqa4", "gqa2", "mqa"])
PRUNE_SETS = pytest.mark.parametrize(
    "pruned", [{3}, {0, 1}, {1, 2, 5}, {0, 1, 2, 3, 4, 5, 6}], ids=["one", "first_group", "uneven", "all_but_one"]
)


@KV_LAYOUTS
@PRUNE_SETS
@BOTH_PATHS
def test_case8_head_mask_equals_pruning(num_kv_heads, pruned, need_weights, device):
    m = make_mha(num_kv_heads=num_kv_heads, device=device)
    x, kv, kpm = inputs(device=device)
    kwargs = dict(key_padding_mask=kpm, need_weights=need_weights)
    out_full, w_full = m(x, kv, **kwargs)
    out_masked, _ = m(x, kv, head_mask=keep_vector(8, pruned, device), **kwargs)
    assert not torch.allclose(out_masked, out_full, atol=1e-4)  # masking changes the output

    m.prune_heads(pruned)
    kept = [h for h in range(8) if h not in pruned]
    assert m.kept_heads == kept and m.pruned_heads == pruned and m.num_heads == len(kept)
    out_pruned, w_pruned = m(x, kv, **kwargs)
    torch.testing.assert_close(out_pruned, out_masked, atol=ATOL, rtol=RTOL)
    if need_weights:  # surviving heads keep their weights, listed in kept_heads order
        torch.testing.assert_close(w_pruned, w_full[:, kept], atol=ATOL, rtol=RTOL)


@KV_LAYOUTS
def test_gqa_pruning_removes_a_kv_head_with_its_last_query_head(num_kv_heads):
    group = 8 // num_kv_heads
    m = make_mha(num_kv_heads=num_kv_heads)
    k_w = m.k_proj.weight.detach().clone()
    hd = m.head_dim
    m.prune_heads(range(group - 1))  # all but the last query head of KV group 0
    assert m.num_kv_heads == num_kv_heads and m.kept_kv_heads == list(range(num_kv_heads))
    m.prune_heads([group - 1])  # the last reader of KV head 0 goes: so does KV head 0
    assert m.num_kv_heads == num_kv_heads - 1 and m.kept_kv_heads == list(range(1, num_kv_heads))
    assert m.k_proj.out_features == m.v_proj.out_features == (num_kv_heads - 1) * hd
    torch.testing.assert_close(m.k_proj.weight, k_w[hd:])
    assert m.kv_head_index.tolist() == [i // group for i in range(m.num_heads)]


def test_uneven_groups_use_index_select_and_stay_correct():
    m = make_mha(num_kv_heads=2)  # groups {0,1,2,3} -> kv 0, {4,5,6,7} -> kv 1
    x, _, _ = inputs()
    ref, _ = m(x, head_mask=keep_vector(8, {0, 1, 2}))
    m.prune_heads({0, 1, 2})
    assert m.kv_head_index.tolist() == [0, 1, 1, 1, 1]  # 1 head in group 0, 4 in group 1
    assert not m._regular_groups  # so SDPA's enable_gqa cannot be used
    for need_weights in (False, True):
        torch.testing.assert_close(m(x, need_weights=need_weights)[0], ref, atol=ATOL, rtol=RTOL)


@settings(max_examples=50)
@given(
    num_kv_heads=st.sampled_from([1, 2, 3, 6]),
    steps=st.lists(st.sets(st.integers(0, 5), max_size=6), min_size=1, max_size=3),
    need_weights=st.booleans(),
)
def test_property_pruning_in_steps_equals_masking(num_kv_heads, steps, need_weights):
    """Any sequence of prune_heads calls, under any GQA layout, equals masking their union."""
    m = make_mha(24, 6, num_kv_heads=num_kv_heads)
    x, kv, kpm = inputs(d=24)
    union = set().union(*steps)
    ref, _ = m(x, kv, key_padding_mask=kpm, head_mask=keep_vector(6, union))
    for step in steps:
        m.prune_heads(step)
    assert m.pruned_heads == union and m.kept_heads == sorted(set(range(6)) - union)
    out, w = m(x, kv, key_padding_mask=kpm, need_weights=need_weights)
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=RTOL)
    if need_weights:
        assert w.shape == (2, 6 - len(union), 5, 6)


# ------------------------------------------------------------------------------------------
# Case 7: pruning every head, idempotence, save and load
# ------------------------------------------------------------------------------------------


@KV_LAYOUTS
@BOTH_PATHS
@pytest.mark.parametrize("bias", [True, False])
def test_case7_pruning_every_head(num_kv_heads, need_weights, bias, device):
    m = make_mha(num_kv_heads=num_kv_heads, device=device, bias=bias)
    x, kv, kpm = inputs(device=device)
    m.prune_heads(range(8))
    assert m.num_heads == 0 and m.num_kv_heads == 0 and m.kept_heads == [] and m.kept_kv_heads == []
    assert m.q_proj.weight.shape == (0, 32) and m.out_proj.weight.shape == (32, 0)
    out, w, (k, v) = m(x, kv, key_padding_mask=kpm, need_weights=need_weights, use_cache=True)
    expected = m.out_proj.bias.expand(2, 5, 32) if bias else torch.zeros(2, 5, 32, device=device)
    torch.testing.assert_close(out, expected)  # documented: W^O's bias, broadcast
    assert k.shape == v.shape == (2, 0, 6, 4)
    if need_weights:
        assert w.shape == (2, 0, 5, 6)
    else:
        assert w is None
    # still trainable: the bias gets its gradient, nothing is NaN
    if bias:
        out.sum().backward()
        torch.testing.assert_close(m.out_proj.bias.grad, torch.full((32,), 10.0, device=device))
    # and it equals masking every head
    fresh = make_mha(num_kv_heads=num_kv_heads, device=device, bias=bias)
    torch.testing.assert_close(fresh(x, kv, head_mask=torch.zeros(8, device=device))[0], out)


@BOTH_PATHS
def test_case7_pruning_is_idempotent_and_uses_original_numbering(need_weights):
    x, kv, kpm = inputs()
    a = make_mha(num_kv_heads=4)
    a.prune_heads({1})
    a.prune_heads({1, 2})  # prunes head 2 as well; head 1 (already gone) is left alone
    a.prune_heads({2})  # nothing left to do
    b = make_mha(num_kv_heads=4)
    b.prune_heads({1, 2})
    assert a.pruned_heads == b.pruned_heads == {1, 2}
    assert a.kept_heads == b.kept_heads == [0, 3, 4, 5, 6, 7]
    assert a.q_proj.weight.shape == (24, 32)  # not 5 heads
    oa, wa = a(x, kv, key_padding_mask=kpm, need_weights=need_weights)
    ob, wb = b(x, kv, key_padding_mask=kpm, need_weights=need_weights)
    torch.testing.assert_close(oa, ob, atol=0, rtol=0)
    if need_weights:
        torch.testing.assert_close(wa, wb, atol=0, rtol=0)


@pytest.mark.parametrize("num_kv_heads", [8, 2])
@BOTH_PATHS
def test_case7_pruned_state_dict_round_trips(num_kv_heads, need_weights):
    """Saved (safetensors, no pickle) and loaded into MultiHeadAttention(..., pruned_heads=same)."""
    x, kv, kpm = inputs()
    m = make_mha(num_kv_heads=num_kv_heads)
    m.prune_heads({0, 1, 2, 5})
    blob = st_save({k: v.contiguous() for k, v in m.state_dict().items()})
    loaded = MultiHeadAttention(32, 8, num_kv_heads=num_kv_heads, pruned_heads={5, 0, 1, 2}).eval()
    loaded.load_state_dict(st_load(blob))
    assert loaded.kept_heads == m.kept_heads and torch.equal(loaded.kv_head_index, m.kv_head_index)
    o1, w1 = m(x, kv, key_padding_mask=kpm, need_weights=need_weights)
    o2, w2 = loaded(x, kv, key_padding_mask=kpm, need_weights=need_weights)
    torch.testing.assert_close(o1, o2, atol=0, rtol=0)
    if need_weights:
        torch.testing.assert_close(w1, w2, atol=0, rtol=0)
    with pytest.raises(RuntimeError, match="size mismatch"):  # an unpruned module refuses it loudly
        MultiHeadAttention(32, 8, num_kv_heads=num_kv_heads).load_state_dict(st_load(blob))


def test_head_mask_indexes_current_heads_after_pruning():
    x, _, _ = inputs()
    m = make_mha()
    m.prune_heads({0, 2})
    with pytest.raises(ValueError, match=r"\(6,\)"):
        m(x, head_mask=torch.ones(8))
    xi = torch.ones(6)
    xi[0] = 0.0  # current head 0 is original head 1
    ref = make_mha()
    torch.testing.assert_close(m(x, head_mask=xi)[0], ref(x, head_mask=keep_vector(8, {0, 1, 2}))[0], atol=ATOL, rtol=RTOL)


def test_prune_rejects_out_of_range_heads_and_changes_nothing():
    m = make_mha()
    for bad in ([8], [-1], [0, 9]):
        with pytest.raises(ValueError, match=rf"{bad[-1]}.*original_num_heads=8"):
            m.prune_heads(bad)
    assert m.num_heads == 8 and m.pruned_heads == set()


def test_pruned_parameters_keep_device_dtype_and_train():
    m = make_mha(dtype=torch.float64, num_kv_heads=2).train()
    m.prune_heads({3})
    assert all(p.dtype == torch.float64 and p.requires_grad for p in m.parameters())
    x = torch.randn(2, 4, 32, dtype=torch.float64)
    m(x)[0].sum().backward()
    assert all(p.grad is not None for p in m.parameters())


# ------------------------------------------------------------------------------------------
# Head indices must be integers: never truncated, never a bool (reviewer's repro_06)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [[1.5], [True], [2.0], ["1"], [torch.tensor(1.0)], [torch.tensor([1])]])
def test_prune_heads_rejects_non_integer_indices(bad):
    m = make_mha(32, 8)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    with pytest.raises(ValueError, match="integer.*got"):
        m.prune_heads(bad)
    assert m.pruned_heads == set() and m.num_heads == 8
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    with pytest.raises(ValueError, match="integer.*got"):
        MultiHeadAttention(32, 8, pruned_heads=bad)


def test_prune_heads_accepts_numpy_and_tensor_integers():
    np = pytest.importorskip("numpy")
    m = make_mha(32, 8)
    m.prune_heads([np.int64(1), torch.tensor(2), 3])
    assert m.pruned_heads == {1, 2, 3} and all(type(h) is int for h in m.pruned_heads)


def test_prune_heads_bare_int_is_an_error_not_a_guess():
    m = make_mha(32, 8)
    with pytest.raises(ValueError, match=r"iterable of head indices.*\[1\].*single value 1"):
        m.prune_heads(1)
    assert m.num_heads == 8
