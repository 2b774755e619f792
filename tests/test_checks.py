"""mha_lib.checks: the one argument policy (here: its tensor checks of attention weights and padding masks)."""
import pytest
import torch

from mha_lib import checks


def test_attention_weights_returns_good_weights_unchanged():
    w = torch.softmax(torch.randn(2, 3, 4, 4), -1)
    assert checks.attention_weights(w) is w
    assert checks.attention_weights(w[None], dims=5) is not None


@pytest.mark.parametrize("value, dims, match", [
    ([[0.5, 0.5]], 4, "must be a tensor"),
    (torch.rand(2, 4, 4), 4, r"4 dimensions, got shape \(2, 4, 4\)"),
    (torch.ones(1, 1, 2, 2, dtype=torch.int64), 4, "floating point.*int64"),
    (torch.tensor([[[[0.5, float("nan")]]]]), 4, "1 NaN or infinite value"),
    (torch.tensor([[[[float("inf"), float("-inf")]]]]), 4, "2 NaN or infinite value"),
    (torch.tensor([[[[1.5, -0.5]]]]), 4, r"1 negative value\(s\) \(min -0.5\)"),
])
def test_attention_weights_names_what_is_wrong(value, dims, match):
    with pytest.raises(ValueError, match=match):
        checks.attention_weights(value, dims=dims)


def test_padding_mask_is_one_rule_for_every_reader_of_padding():
    ok = torch.tensor([[False, True]])
    assert checks.padding_mask(ok, (1, 2)) is ok
    for bad in (ok.float(), ok[0], [[False, True]], None):
        with pytest.raises(ValueError, match=r"key_padding_mask must be a bool tensor of shape \(B, S\) = \(1, 2\)"):
            checks.padding_mask(bad, (1, 2))
    with pytest.raises(ValueError, match=r"mask must be a bool tensor of shape \(B, L\) = \(1, 3\)"):
        checks.padding_mask(ok, (1, 3), name="mask", axes="B, L")


def test_attention_rows_refuses_what_is_not_one_layer_of_weights():
    w = torch.tensor([[[[1.0, 0.0], [0.5, 0.5]]]])  # (1, 1, 2, 2)
    assert torch.equal(checks.attention_rows(w), w)
    with pytest.raises(ValueError, match=r"must be one layer's \(B, H, L, L\) tensor"):
        checks.attention_rows(w[0])
    with pytest.raises(ValueError, match="rows must be >= 0 and sum to 1"):
        checks.attention_rows(w * 2)
    with pytest.raises(ValueError, match="NaN or infinite"):
        checks.attention_rows(w.masked_fill(w == 0, float("nan")))


def test_float32_reals_and_learning_rates_must_fit_float32():
    assert checks.finite_real(3e38, "x", float32=True) == 3e38
    assert checks.finite_real(1e-30, "t", positive=True, float32=True) == 1e-30
    with pytest.raises(ValueError, match=r"x must be a float32-representable number in \[-3.4028e\+38, 3.4028e\+38\], got 1e\+39"):
        checks.finite_real(1e39, "x", float32=True)
    with pytest.raises(ValueError, match=r"t must be a float32-representable number in \[1.1755e-38"):
        checks.finite_real(1e-46, "t", positive=True, float32=True)  # rounds to 0 in float32
    assert checks.learning_rate(3e37) == 3e37
    with pytest.raises(ValueError, match=r"lr must be in \[1.1755e-38, 3.4028e\+37\]: Adam's first step"):
        checks.learning_rate(1e38)  # fits float32, but 1e38 / (1 - 0.9) does not


def test_meta_tensors_are_refused_by_name():
    assert checks.has_values(torch.ones(2), "x") is not None
    with pytest.raises(ValueError, match="attn_mask is on the meta device"):
        checks.has_values(torch.ones(2, device="meta"), "attn_mask")


def test_attention_rows_tolerance_follows_the_dtype():
    w = torch.full((1, 1, 4, 4), 0.25)
    w[..., 0] += 0.004  # rows sum to 1.004: within bf16's rounding (eps 2^-7), not within float32's or fp16's
    assert checks.attention_rows(w.bfloat16()).dtype == torch.float32
    for dtype in (torch.float32, torch.float16, torch.float64):
        with pytest.raises(ValueError, match=r"sum to 1 \(or 0\) within 0.001 \(torch\.float"):
            checks.attention_rows(w.to(dtype))
    with pytest.raises(ValueError, match=r"within 0.00781 \(torch.bfloat16\), got row sums from 1.02 to 1.02"):
        checks.attention_rows((w + 0.003).bfloat16())


@pytest.mark.parametrize("value", [2**64, 2**70, -1, True, 1.0, "3", None])
def test_a_seed_is_an_integer_that_torchs_generators_take(value):
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*64 - 1\]"):
        checks.seed(value)


def test_the_largest_seed_torch_takes_is_accepted():
    import numpy as np

    assert checks.seed(checks.SEED_MAX) == 2**64 - 1 and checks.seed(np.int64(3)) == 3 and checks.seed(0) == 0
    torch.Generator().manual_seed(checks.SEED_MAX)


def _every_public_seed():
    """(where, call(seed)) for every public function that seeds a generator: each goes through checks.seed."""
    import mha_lib
    from mha_lib import measure, tasks, train
    from mha_lib.efficient import block_sparse_mask
    from mha_lib.model import Encoder, EncoderConfig
    from mha_lib.pruning import train_head_gates

    task = tasks.SHIPPED["ch1-h2"].make_task()
    model = lambda: Encoder(EncoderConfig(vocab_size=8, d_model=8, num_heads=2, num_layers=1, d_ff=0,  # noqa: E731
                                          max_len=16))
    return [
        ("set_seed", lambda s: mha_lib.set_seed(s)),
        ("dataset", lambda s: task.dataset(2, seed=s)),
        ("digits", lambda s: tasks.DigitsTask().dataset(2, seed=s)),
        ("dictionary_seed", lambda s: tasks.TranslationTask(dictionary_seed=s)),
        ("load_trained", lambda s: tasks.load_trained("ch1-h1", s)),
        ("train", lambda s: train.train(tasks.SHIPPED["ch1-h2"].build(), task, steps=1, batch_size=1, lr=1e-3,
                                        seed=s, progress=False)),
        ("train_head_gates", lambda s: train_head_gates(model(), [task.dataset(2, seed=0)], lambda *a: None, 0.1,
                                                        seed=s)),
        ("sweep_heads", lambda s: measure.sweep_heads(d_model=8, num_heads=[2], batch=1, seq_len=2, seed=s)),
        ("sweep_decode", lambda s: measure.sweep_decode(d_model=8, num_heads=2, num_kv_heads=[1], context_len=2,
                                                        seed=s)),
        ("measure_pruning_speedup", lambda s: measure.measure_pruning_speedup(d_model=8, num_heads=2, seq_len=2,
                                                                              keep_heads=(1,), seed=s)),
        ("block_sparse_mask", lambda s: block_sparse_mask(8, block=4, seed=s)),
    ]


@pytest.mark.parametrize("where", [w for w, _ in _every_public_seed()])
@pytest.mark.parametrize("seed", [2**64, -1])
def test_every_public_seed_is_checked_by_the_one_rule(where, seed):
    """A seed torch cannot take gave "Overflow when unpacking long long" (naming nothing) or, negative, ran."""
    call = dict(_every_public_seed())[where]
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*64 - 1\]"):
        call(seed)
