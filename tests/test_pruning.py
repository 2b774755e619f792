"""Tests for mha_lib.pruning: head importance, ablation, Voita's statistics, schedules, structural pruning."""
import copy

import pytest
import torch

from mha_lib import pruning
from mha_lib.core import MultiHeadAttention
from mha_lib.model import EncoderConfig, TokenClassifier, load
from mha_lib.analysis import attention_confidence, head_attention_stats, positional_offsets
from mha_lib.pruning import (
    head_importance,
    heads_to_mask,
    kept_mask,
    layer_head_masks,
    mask_to_heads,
    measure_pruning_speedup,
    prune_heads,
    pruned_attention_flops,
    pruning_schedule,
    single_head_ablation,
)
from mha_lib.tasks import accuracy as token_accuracy  # noqa: E402
from mha_lib.tasks import per_example_loss as token_classification_loss  # noqa: E402

TINY = dict(vocab_size=17, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=10)


def make(seed=0, dtype=torch.float32, **overrides):
    torch.manual_seed(seed)
    model = TokenClassifier(EncoderConfig(**{**TINY, **overrides}), 3)
    return model.to(dtype).eval()


def data(B=5, L=6, seed=1, num_batches=1):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(num_batches):
        x = torch.randint(1, TINY["vocab_size"], (B, L), generator=g)
        y = torch.randint(0, 3, (B, L), generator=g)
        out.append((x, y))
    return out


def per_example_loss(model, x, y, gates):
    """Loss of each example with per-layer (B, H_l) gates."""
    return token_classification_loss(model, (x, y), gates)


# ----------------------------------------------------------------------------- importance
@pytest.mark.parametrize("with_mask", [False, True])
def test_importance_matches_finite_differences(with_mask):
    """I_h = mean_b |dL_b/d xi_h|, checked against central differences of each example's loss."""
    model = make(dtype=torch.float64)
    (x, y), = data(B=5)
    n, H = TINY["num_layers"], TINY["num_heads"]
    point = torch.ones(n, H, dtype=torch.float64)
    if with_mask:  # the derivative is taken where the schedule currently is
        point[0, 1] = 0.0
        point[1, 2] = 0.5
    got = head_importance(model, [(x, y)], token_classification_loss, head_mask=point, normalize=False)

    eps = 1e-5
    fd = torch.zeros(n, H, dtype=torch.float64)
    with torch.no_grad():
        for layer in range(n):
            for head in range(H):
                plus, minus = point.clone(), point.clone()
                plus[layer, head] += eps
                minus[layer, head] -= eps
                # (B, H) gates per layer: every example's gate moves together, but each example's
                # loss only sees its own row, so this is B independent one-example differences.
                gp = [m.expand(5, -1) for m in plus]
                gm = [m.expand(5, -1) for m in minus]
                d = (per_example_loss(model, x, y, gp) - per_example_loss(model, x, y, gm)) / (2 * eps)  # (B,)
                fd[layer, head] = d.abs().mean()
    assert fd.max() > 1e-3  # the test would be vacuous on all-zero derivatives
    torch.testing.assert_close(got.double(), fd, rtol=1e-4, atol=1e-7)


def test_importance_is_per_example_not_per_batch():
    """One backward pass over a batch equals B separate one-example passes: |.| is per example."""
    model = make()
    (x, y), = data(B=6)
    one_pass = head_importance(model, [(x, y)], token_classification_loss, normalize=False)
    singles = head_importance(model, [(x[i : i + 1], y[i : i + 1]) for i in range(6)], token_classification_loss,
                              normalize=False)
    torch.testing.assert_close(one_pass, singles, rtol=1e-4, atol=1e-6)
    # |mean of the gradient| (what a shared (H,) mask would give) is strictly smaller somewhere
    gates = [torch.ones(TINY["num_heads"], requires_grad=True) for _ in range(TINY["num_layers"])]
    loss = token_classification_loss(model, (x, y), gates).mean()
    shared = torch.stack([g.abs() for g in torch.autograd.grad(loss, gates)])
    assert bool((shared < one_pass - 1e-6).any())


def test_importance_averages_over_unequal_batches_and_normalises_per_layer():
    model = make()
    batches = data(B=4, num_batches=2) + data(B=1, seed=7)
    raw = head_importance(model, batches, token_classification_loss, normalize=False)
    flat = [(x[i : i + 1], y[i : i + 1]) for x, y in batches for i in range(x.shape[0])]
    torch.testing.assert_close(raw, head_importance(model, flat, token_classification_loss, normalize=False),
                               rtol=1e-4, atol=1e-6)
    normed = head_importance(model, batches, token_classification_loss)
    torch.testing.assert_close(normed.norm(dim=1), torch.ones(TINY["num_layers"]))
    torch.testing.assert_close(normed, raw / raw.norm(dim=1, keepdim=True))


def test_importance_leaves_model_alone():
    model = make(dropout=0.1)
    model.train()
    before = copy.deepcopy(model.state_dict())
    head_importance(model, data(), token_classification_loss)
    assert model.training  # mode restored
    assert all(p.grad is None for p in model.parameters())  # gradients went to the gates only
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k])


def test_importance_nan_only_at_pruned_heads():
    model = make()
    prune_heads(model, {1: [0, 2]})
    imp = head_importance(model, data(), token_classification_loss)
    assert torch.isnan(imp).tolist() == [[False] * 4, [True, False, True, False]]
    assert bool((imp[~torch.isnan(imp)] >= 0).all())


def test_importance_bad_inputs():
    model = make()
    with pytest.raises(ValueError, match=r"shape \(B,\) = \(5,\)"):
        head_importance(model, data(), lambda m, b, g: token_classification_loss(m, b, g).mean())
    with pytest.raises(ValueError, match="no batches"):
        head_importance(model, [], token_classification_loss)
    with pytest.raises(ValueError, match="non-finite"):
        head_importance(model, data(), lambda m, b, g: token_classification_loss(m, b, g) * float("nan"))
    with pytest.raises(ValueError, match=r"\(num_layers, H\) = \(2, 4\)"):
        head_importance(model, data(), token_classification_loss, head_mask=torch.ones(3, 4))


def test_importance_raises_when_loss_fn_drops_the_head_mask():
    """A loss_fn that never passes head_mask on used to give all-zero scores silently."""
    model = make()
    with pytest.raises(ValueError, match="loss_fn must pass head_mask to the model"):
        head_importance(model, data(), lambda m, b, g: token_classification_loss(m, b, None))


def test_importance_zero_gradient_is_not_an_error():
    """Gates that enter the graph but do not move the loss (grad 0, not None) give 0 scores."""
    model = make()

    def flat_loss(m, b, gates):  # uses every gate, with derivative exactly 0
        return token_classification_loss(m, b, None) + sum(0.0 * g.sum(1) for g in gates)

    imp = head_importance(model, data(), flat_loss)
    assert torch.equal(imp, torch.zeros(TINY["num_layers"], TINY["num_heads"]))

    def one_layer(m, b, gates):  # only layer 1's gates reach the model: layer 0 scores 0
        return token_classification_loss(m, b, [torch.ones_like(gates[0]), gates[1]])

    imp = head_importance(model, data(), one_layer, normalize=False)
    assert torch.equal(imp[0], torch.zeros(TINY["num_heads"]))
    assert bool((imp[1] > 0).all())


# ----------------------------------------------------------------------------- ablation
def test_single_head_ablation_matches_direct_masking():
    model = make()
    batches = data(B=4, num_batches=2)

    def mean_loss(m, head_mask):
        with torch.no_grad():
            return torch.cat([token_classification_loss(m, b, head_mask) for b in batches]).mean()

    result = single_head_ablation(model, mean_loss)
    assert result.baseline == pytest.approx(float(mean_loss(model, None)))
    for layer, head in [(0, 0), (1, 3)]:
        m = torch.ones(2, 4)
        m[layer, head] = 0
        assert float(result.masked[layer, head]) == pytest.approx(float(mean_loss(model, layer_head_masks(model, m))), rel=1e-5)
    assert not torch.isnan(result.masked).any()
    assert bool((result.delta != 0).all())  # masking any head of a random model changes the loss
    # heads already off (by a mask, or pruned) are not ablated again
    off = torch.ones(2, 4)
    off[0, 2] = 0
    partial = single_head_ablation(model, lambda m, hm: token_accuracy(m, batches, hm), head_mask=off)
    assert torch.isnan(partial.masked).sum() == 1 and torch.isnan(partial.masked[0, 2])
    with pytest.raises(ValueError, match="non-finite"):
        single_head_ablation(model, lambda m, hm: float("nan"))


# ----------------------------------------------------------------------------- Voita et al.
def test_attention_confidence_known_values():
    B, H, L = 2, 3, 4
    w = torch.zeros(B, H, L, L)
    w[:, 0] = torch.eye(L)  # one-hot rows: confidence 1
    w[:, 1] = 1.0 / L  # uniform rows: confidence 1/L
    w[:, 2, :, 0], w[:, 2, :, 1] = 0.7, 0.3  # max 0.7
    torch.testing.assert_close(attention_confidence(w), torch.tensor([1.0, 0.25, 0.7]))
    # padded query rows do not count: make the pad rows of head 1 one-hot, confidence must not move
    kpm = torch.tensor([[False, False, True, True], [False] * 4])
    w2 = w.clone()
    w2[0, 1, 2:] = torch.eye(L)[2:]
    torch.testing.assert_close(attention_confidence(w2, kpm), torch.tensor([1.0, 0.25, 0.7]))
    with pytest.raises(ValueError, match=r"\(B, H, L, S\)"):
        attention_confidence(w[0])
    with pytest.raises(ValueError, match="bool"):
        attention_confidence(w, kpm.float())


def test_positional_offsets_previous_token_head():
    L = 5
    prev = torch.zeros(L, L)
    for i in range(L):
        prev[i, max(i - 1, 0)] = 1.0  # previous token (position 0 looks at itself)
    w = torch.stack([prev, torch.eye(L), torch.full((L, L), 1.0 / L)])[None]  # (1, 3, L, L)
    offset, fraction = positional_offsets(w)
    assert offset.tolist() == [-1, 0, 0]  # the uniform head's argmax is key 0: offset -i, most often 0 only once
    torch.testing.assert_close(fraction[:2], torch.tensor([0.8, 1.0]))
    assert fraction[2] == pytest.approx(0.2)


def test_head_attention_stats_pools_batches_and_flags_positional():
    model = make()
    batches = data(B=3, num_batches=2)

    def attentions_fn(m, batch):
        return m(batch[0], output_attentions=True).attentions, None

    stats = head_attention_stats(model, batches, attentions_fn)
    assert stats.confidence.shape == (2, 4) and stats.num_tokens == 2 * 3 * 6
    # pooled confidence over both batches == confidence of the concatenated batch
    x = torch.cat([b[0] for b in batches])
    attn = model(x, output_attentions=True).attentions
    for layer in range(2):
        torch.testing.assert_close(stats.confidence[layer], attention_confidence(attn[layer]))
        off, frac = positional_offsets(attn[layer])
        assert stats.offset[layer].tolist() == off.tolist()
        torch.testing.assert_close(stats.offset_fraction[layer], frac)
    assert stats.positional(threshold=0.0 + 1e-9).all()
    assert (stats.positional(0.9) == (stats.offset_fraction >= 0.9)).all()
    # pruned heads: NaN confidence
    prune_heads(model, {0: [3]})
    stats = head_attention_stats(model, batches, attentions_fn)
    assert torch.isnan(stats.confidence[0, 3]) and not torch.isnan(stats.confidence[1]).any()


# ----------------------------------------------------------------------------- schedules
def test_schedule_prunes_requested_counts_lowest_first():
    scores = torch.arange(32.0).flip(0).reshape(4, 8)  # head (3, 7) is the least important
    steps = pruning_schedule(scores, fraction_per_step=0.1)
    assert [s.num_pruned for s in steps] == [0, 3, 6, 10, 13, 16, 19, 22, 26, 29, 32]
    for a, b in zip(steps, steps[1:]):
        assert bool((b.mask <= a.mask).all())  # nested: once pruned, always pruned
    assert steps[1].pruned == {3: [5, 6, 7]}
    assert steps[0].scores is None and steps[1].fraction_pruned == pytest.approx(3 / 32)
    half = pruning_schedule(scores, fraction_per_step=0.25, max_fraction=0.5)
    assert [s.num_pruned for s in half] == [0, 8, 16]


def test_schedule_floor_per_layer_and_ties():
    scores = torch.zeros(2, 4)  # all tied: lower (layer, head) first
    steps = pruning_schedule(scores, fraction_per_step=0.25, min_heads_per_layer=1)
    assert [s.num_pruned for s in steps] == [0, 2, 4, 6]  # stops at 6 = 8 - 2 layers x 1
    assert steps[1].pruned == {0: [0, 1]}
    assert (steps[-1].mask.sum(1) == 1).all()


def test_schedule_tiny_fraction_is_bounded_one_head_per_step():
    """fraction_per_step=1e-9 used to loop ~1e9 times; now each step prunes one more head."""
    scores = torch.arange(24.0).reshape(3, 8)
    steps = pruning_schedule(scores, fraction_per_step=1e-9)  # returns at once
    assert [s.num_pruned for s in steps] == list(range(25))
    assert steps[1].pruned == {0: [0]} and steps[-1].num_pruned == 24
    steps = pruning_schedule(scores, fraction_per_step=1e-12, max_fraction=0.25, min_heads_per_layer=1)
    assert [s.num_pruned for s in steps] == list(range(7))


@pytest.mark.parametrize("fraction", [0.01, 0.03, 0.1, 0.15, 0.3, 0.7, 1.0])
def test_schedule_counts_are_round_k_fraction_n(fraction):
    """Skipping k's with no new head keeps the documented counts round(k * fraction * N)."""
    import math

    scores = torch.rand(3, 5, generator=torch.Generator().manual_seed(0))
    got = [s.num_pruned for s in pruning_schedule(scores, fraction_per_step=fraction)]
    want = sorted({min(math.floor(k * fraction * 15 + 0.5 + 1e-9), 15) for k in range(0, 2000)})
    assert got == want


def test_schedule_initial_mask_shape_error_names_initial_mask():
    scores = torch.rand(3, 8)
    with pytest.raises(ValueError, match=r"initial_mask has shape \(2, 8\) but scores has shape \(3, 8\)"):
        pruning_schedule(scores, initial_mask=torch.ones(2, 8))
    with pytest.raises(ValueError, match=r"initial_mask must be a \(num_layers, H\) tensor, got \(24,\)"):
        pruning_schedule(scores, initial_mask=torch.ones(24))
    with pytest.raises(ValueError, match=r"scores\(mask\) must return .* initial_mask's shape \(2, 8\)"):
        pruning_schedule(lambda m: scores, initial_mask=torch.ones(2, 8))


def test_schedule_rescored_calls_back_with_current_mask():
    calls = []

    def scores(mask):
        calls.append(mask.clone())
        s = torch.arange(8.0).reshape(2, 4)
        return s if len(calls) == 1 else -s  # the ranking flips after the first step

    steps = pruning_schedule(scores, fraction_per_step=0.25, initial_mask=torch.ones(2, 4))
    assert len(calls) == 4 and [s.num_pruned for s in steps] == [0, 2, 4, 6, 8]
    assert steps[1].pruned == {0: [0, 1]}
    assert steps[2].pruned == {0: [0, 1], 1: [2, 3]}  # rescored: now the highest ids score lowest
    torch.testing.assert_close(calls[1], steps[1].mask)
    with pytest.raises(ValueError, match="initial_mask"):
        pruning_schedule(scores)


def test_schedule_starts_from_pruned_heads_and_rejects_bad_args():
    model = make()
    prune_heads(model, {0: [1]})
    imp = head_importance(model, data(), token_classification_loss)
    steps = pruning_schedule(imp, fraction_per_step=0.25)
    assert steps[0].num_pruned == 1 and steps[0].pruned == {0: [1]}
    assert [s.num_pruned for s in steps] == [0 + 1, 2, 4, 6, 8]
    for bad in (dict(fraction_per_step=0), dict(fraction_per_step=1.5), dict(max_fraction=-0.1),
                dict(min_heads_per_layer=-1)):
        with pytest.raises(ValueError):
            pruning_schedule(imp, **bad)
    with pytest.raises(ValueError, match=r"\(num_layers, H\)"):
        pruning_schedule(torch.ones(8))


def test_importance_schedule_on_a_model_end_to_end():
    model = make()
    batches = data(B=4)
    steps = pruning_schedule(
        lambda m: head_importance(model, batches, token_classification_loss, head_mask=m),
        fraction_per_step=0.25, initial_mask=kept_mask(model),
    )
    accs = [token_accuracy(model, batches, layer_head_masks(model, s.mask)) for s in steps]
    assert len(accs) == 5 and all(0 <= a <= 1 for a in accs)


# ----------------------------------------------------------------------------- structural pruning
def test_pruning_equals_masking_and_masking_changes_output():
    model = make()
    x = data(B=3)[0][0]
    heads = {0: [1], 1: [0, 3]}
    mask = heads_to_mask(model, heads)
    assert mask_to_heads(mask) == heads
    full = model(x).logits
    masked = model(x, head_mask=layer_head_masks(model, mask)).logits
    assert not torch.allclose(masked, full, atol=1e-4)  # the heads did something
    pruned = prune_heads(copy.deepcopy(model), heads)
    assert pruned.heads_per_layer == [3, 2]
    torch.testing.assert_close(pruned(x).logits, masked, rtol=1e-5, atol=1e-6)
    # after pruning, grid masks still use original numbers: masking original head 2 of layer 0
    extra = heads_to_mask(model, {0: [1, 2], 1: [0, 3]})
    torch.testing.assert_close(
        pruned(x, head_mask=layer_head_masks(pruned, extra)).logits,
        model(x, head_mask=layer_head_masks(model, extra)).logits, rtol=1e-5, atol=1e-6,
    )


def test_prune_again_is_idempotent_and_cumulative():
    model = make()
    prune_heads(model, {0: [1]})
    prune_heads(model, {0: [1, 2]})
    attn = model.encoder.blocks[0].attn
    assert attn.kept_heads == [0, 3] and attn.pruned_heads == {1, 2}
    assert model.config.pruned_heads == {0: [1, 2]}
    # a grid mask works as the spec too
    prune_heads(model, heads_to_mask(model, {1: [3]}))
    assert model.heads_per_layer == [2, 3]


@pytest.mark.parametrize("heads, match", [
    ({0: [4]}, r"layer 0 heads \[4\] are out of range for num_heads=4"),
    ({0: [-1]}, r"\[-1\]"),
    ({2: [0]}, r"layer 2 is out of range for num_layers=2"),
    ({0: ["a"]}, "must be an integer"),
])
def test_out_of_range_heads_raise_and_prune_nothing(heads, match):
    model = make()
    with pytest.raises(ValueError, match=match):
        prune_heads(model, {1: [0], **heads})  # the valid part must not be applied either
    assert model.heads_per_layer == [4, 4]
    with pytest.raises(ValueError):
        heads_to_mask(model, heads)
    with pytest.raises(ValueError):
        MultiHeadAttention(16, 4).prune_heads([4])


def test_pruning_every_head_of_a_layer_is_documented_behaviour():
    """The layer's attention outputs W^O's bias; same as masking all its heads; the model still runs."""
    model = make(norm_first=False)
    x = data(B=2)[0][0]
    masked = model(x, head_mask=layer_head_masks(model, heads_to_mask(model, {1: [0, 1, 2, 3]}))).logits
    prune_heads(model, {1: [0, 1, 2, 3]})
    assert model.heads_per_layer == [4, 0]
    out = model(x, output_attentions=True)
    assert out.attentions[1].shape == (2, 0, 6, 6)
    torch.testing.assert_close(out.logits, masked, rtol=1e-5, atol=1e-6)
    attn = model.encoder.blocks[1].attn
    h = torch.randn(2, 6, 16)
    torch.testing.assert_close(attn(h)[0], attn.out_proj.bias.expand(2, 6, 16))
    imp = head_importance(model, data(), token_classification_loss)
    assert torch.isnan(imp[1]).all() and not torch.isnan(imp[0]).any()
    steps = pruning_schedule(imp, fraction_per_step=0.5)
    assert [s.num_pruned for s in steps] == [4, 8]


def test_pruned_model_round_trips(tmp_path):
    model = make()
    x = data(B=3)[0][0]
    prune_heads(model, {0: [0, 3], 1: [2]})
    model.save_pretrained(tmp_path / "pruned")
    back = load(tmp_path / "pruned")
    assert back.heads_per_layer == [2, 3] and back.config.pruned_heads == {0: [0, 3], 1: [2]}
    torch.testing.assert_close(back(x).logits, model(x).logits)
    torch.testing.assert_close(kept_mask(back), kept_mask(model))
    torch.testing.assert_close(
        head_importance(back, data(), token_classification_loss),
        head_importance(model, data(), token_classification_loss), equal_nan=True,
    )


def test_single_module_and_bad_masks():
    mha = MultiHeadAttention(16, 4)
    prune_heads(mha, {0: [1, 3]})
    assert mha.kept_heads == [0, 2]
    assert kept_mask(mha).tolist() == [[1.0, 0.0, 1.0, 0.0]]
    model = make()
    with pytest.raises(ValueError, match=r"\(2, 4\)"):
        layer_head_masks(model, torch.ones(2, 3))
    with pytest.raises(ValueError, match="floating point"):
        layer_head_masks(model, torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"prune_heads must be a grid mask of shape \(num_layers, H\) = \(2, 4\)"):
        prune_heads(model, torch.ones(2, 5, 4))
    per_example = layer_head_masks(model, torch.ones(2, 5, 4))
    assert [m.shape for m in per_example] == [(5, 4), (5, 4)]


# ----------------------------------------------------------------------------- cost
def test_pruned_attention_flops_scale_with_kept_heads():
    B, L, d, H = 2, 8, 64, 8
    hd = d // H
    hand = 2 * B * L * d * d * 4 + 2 * 2 * B * H * L * L * hd  # 4 projections + two L x L matmuls
    assert pruned_attention_flops(B, L, d, H, H) == hand
    assert pruned_attention_flops(B, L, d, H, 4) * 2 == hand
    assert pruned_attention_flops(B, L, d, H, 0) == 0
    with pytest.raises(ValueError, match="kept_heads=9"):
        pruned_attention_flops(B, L, d, H, 9)


@pytest.mark.slow
def test_measure_pruning_speedup_reports_ratios():
    rows = measure_pruning_speedup(d_model=32, num_heads=4, seq_len=8, batch_sizes=(1, 2), keep_heads=(2, 4),
                                   repeats=1)
    assert len(rows) == 4
    for r in rows:
        assert r["attn_ideal"] == pytest.approx(4 / r["kept"])
        assert 1 < r["model_ideal"] <= r["attn_ideal"] or r["kept"] == 4
        assert r["attn_speedup"] > 0 and r["attn_of_ideal"] == pytest.approx(r["attn_speedup"] / r["attn_ideal"])
    with pytest.raises(ValueError, match="keep_heads"):
        measure_pruning_speedup(keep_heads=(9,))


# ----------------------------------------------------------------------------- shipped data
def test_shipped_sentence_data_is_well_formed():
    """Chapter 4's own sentences and paraphrase triples: present as package data, unique, complete."""
    import json
    from importlib import resources

    root = resources.files("mha_lib") / "data"
    sentences = [s for s in (root / "sentences.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
    triples = json.loads((root / "paraphrases.json").read_text(encoding="utf-8"))["pairs"]
    assert len(sentences) == 100 and len(set(sentences)) == 100
    assert len(triples) == 60
    texts = [t[k] for t in triples for k in ("a", "b", "negative")]
    assert all(isinstance(t, str) and t.strip() == t and t[-1] in ".?!" for t in texts)
    assert len(set(texts)) == len(texts)  # no text repeated within the triples
    assert not set(texts) & set(sentences)  # scoring and evaluation halves are disjoint


def test_old_loss_and_accuracy_names_still_work_with_a_deprecation_warning():
    from mha_lib import pruning, tasks

    with pytest.warns(DeprecationWarning, match="use mha_lib.tasks.per_example_loss"):
        assert pruning.token_classification_loss is tasks.per_example_loss
    with pytest.warns(DeprecationWarning, match="use mha_lib.tasks.accuracy"):
        assert pruning.token_accuracy is tasks.accuracy


def test_confidence_leaves_out_sink_keys():
    from mha_lib.analysis import attention_confidence

    w = torch.zeros(1, 2, 3, 3)
    w[0, 0, :, 0] = 0.9  # head 0 parks 0.9 on key 0 (a sink) ...
    w[0, 0, :, 1:] = 0.05
    w[0, 1] = torch.eye(3)  # ... head 1 is sharp on real keys
    sinks = torch.tensor([[True, False, False]])
    plain = attention_confidence(w)
    excluded = attention_confidence(w, sink_keys=sinks)
    torch.testing.assert_close(plain, torch.tensor([0.9, 1.0]))
    torch.testing.assert_close(excluded, torch.tensor([0.05, 2 / 3]))  # head 1's query 0 is the sink's own row
    with pytest.raises(ValueError, match="sink_keys must be a bool tensor"):
        attention_confidence(w, sink_keys=sinks.float())


def test_voita_statistics_moved_to_analysis_keep_their_old_names():
    import mha_lib.analysis
    import mha_lib.pruning

    for name in ("attention_confidence", "positional_offsets", "head_attention_stats", "HeadStats"):
        with pytest.warns(DeprecationWarning, match=f"moved to mha_lib.analysis.{name}"):
            assert getattr(mha_lib.pruning, name) is getattr(mha_lib.analysis, name)


# ----------------------------------------------------------------- hostile inputs
# a bounded schedule
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


# heads_to_mask takes the same policy as prune_heads
@pytest.mark.parametrize("heads", [{0: [1.5]}, {0: [True]}, {0.9: [1]}, {1: "12"}, {0: [None]}])
def test_heads_to_mask_refuses_what_it_used_to_truncate(heads):
    from mha_lib.model import EncoderConfig, TokenClassifier

    model = TokenClassifier(EncoderConfig(vocab_size=5, d_model=8, num_heads=4, num_layers=2, d_ff=8, max_len=4), 2)
    with pytest.raises(ValueError):
        pruning.heads_to_mask(model, heads)
