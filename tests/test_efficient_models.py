"""Chapter 9's models: the sparse patterns and multi-head latent attention as EncoderConfig settings.

Each pattern in the config must equal the full model given the explicit mask; decoding with caches must
equal the full pass; the config refuses settings that mean nothing, naming them.
"""
from __future__ import annotations

import re

import pytest
import torch

from mha_lib.efficient import LatentCache, MultiHeadLatentAttention, block_sparse_mask, sliding_window_mask
from mha_lib.model import Encoder, EncoderConfig

BASE = dict(vocab_size=16, d_model=32, num_heads=4, num_layers=2, d_ff=0, max_len=20, is_causal=True,
            pad_token_id=None)


def _pair(**pattern):
    """(model with the pattern in its config, the same weights with every key allowed)."""
    torch.manual_seed(0)
    sparse = Encoder(EncoderConfig(**BASE, **pattern)).eval()
    full = Encoder(EncoderConfig(**BASE)).eval()
    full.load_state_dict(sparse.state_dict())
    return sparse, full


IDS = torch.randint(0, 16, (3, 18), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("pattern, mask", [
    ({"attention_window": 5}, sliding_window_mask(18, window=5)),
    ({"attention_window": 5, "attention_sinks": 2}, sliding_window_mask(18, window=5, sinks=2)),
    ({"sparse_block": 4}, block_sparse_mask(20, block=4, seed=0)[:18, :18]),  # max_len 20 = 5 blocks, cut
])
def test_a_pattern_in_the_config_equals_the_full_model_given_its_mask(pattern, mask):
    sparse, full = _pair(**pattern)
    got = sparse(IDS, output_attentions=True)
    want = full(IDS, attn_mask=mask, output_attentions=True)
    assert torch.allclose(got.last_hidden_state, want.last_hidden_state, atol=1e-6)
    blocked = mask | torch.ones(18, 18, dtype=torch.bool).triu(1)
    assert all((w[..., blocked] == 0).all() for w in got.attentions)
    assert not torch.allclose(got.last_hidden_state, full(IDS).last_hidden_state, atol=1e-3)  # it does cut keys


def test_the_callers_attn_mask_is_combined_with_the_pattern_bool_or_float():
    sparse, full = _pair(attention_window=6)
    window = sliding_window_mask(18, window=6)
    extra = torch.zeros(18, 18, dtype=torch.bool)
    extra[:, 3] = True
    extra[0, 3] = extra[1, 3] = extra[2, 3] = extra[3, 3] = False  # keep every row non-empty
    want = full(IDS, attn_mask=window | extra).last_hidden_state
    assert torch.allclose(sparse(IDS, attn_mask=extra).last_hidden_state, want, atol=1e-6)
    additive = torch.zeros(18, 18).masked_fill(extra, float("-inf"))
    assert torch.allclose(sparse(IDS, attn_mask=additive).last_hidden_state, want, atol=1e-6)


def test_an_encoder_window_is_two_sided():
    cfg = dict(BASE, is_causal=False)
    torch.manual_seed(0)
    sparse = Encoder(EncoderConfig(**cfg, attention_window=3)).eval()
    w = sparse(IDS, output_attentions=True).attentions[0]
    assert (w[..., sliding_window_mask(18, window=3, causal=False)] == 0).all()
    assert (w[:, :, 5, 6:8] > 0).all()  # keys after the query, inside the window


@pytest.mark.parametrize("pattern", [{"attention_window": 4}, {"attention_window": 4, "attention_sinks": 3},
                                     {"sparse_block": 4}, {"kv_rank": 12, "rope_dim": 4}, {}])
def test_decoding_token_by_token_with_caches_equals_the_full_pass(pattern):
    torch.manual_seed(0)
    model = Encoder(EncoderConfig(**BASE, **pattern)).eval()
    whole = model(IDS).last_hidden_state
    caches = [{} for _ in model.blocks]
    steps = [model(IDS[:, :5], caches=caches).last_hidden_state]
    steps += [model(IDS[:, t:t + 1], caches=caches).last_hidden_state for t in range(5, 18)]
    assert torch.allclose(torch.cat(steps, 1), whole, atol=1e-5)
    if "kv_rank" in pattern:
        assert isinstance(caches[0]["self"], LatentCache) and caches[0]["self"].length == 18


def test_a_latent_model_uses_mla_in_the_one_block_and_returns_its_weights():
    torch.manual_seed(0)
    model = Encoder(EncoderConfig(**BASE, kv_rank=12, rope_dim=4)).eval()
    assert all(isinstance(b.attn, MultiHeadLatentAttention) for b in model.blocks)
    out = model(IDS, output_attentions=True, head_mask=torch.ones(2, 4))
    w = out.attentions[1]
    assert w.shape == (3, 4, 18, 18) and torch.allclose(w.sum(-1), torch.ones(3, 4, 18))
    assert (w.triu(1) == 0).all()
    assert model.heads_per_layer == [4, 4]


def test_chapter_9s_latent_model_matches_full_attentions_parameters():
    from mha_lib.tasks import SHIPPED

    names = [n for n in SHIPPED if n.startswith("ch9-")] + ["ch5-induction-l2"]  # chapter 5's is the full baseline
    counts = {n: sum(p.numel() for p in SHIPPED[n].build().parameters()) for n in names}
    masked = {k: v for k, v in counts.items() if "latent" not in k}
    assert len(set(masked.values())) == 1 and len(masked) == 7  # a pattern adds no parameter
    for name in ("ch9-latent", "ch9-latent-6k", "ch9-latent-rope"):  # matched; ch9-latent64 (wide) is not meant to be
        assert abs(counts[name] / counts["ch5-induction-l2"] - 1) < 0.001
    assert counts["ch9-latent64"] > 1.3 * counts["ch5-induction-l2"]


@pytest.mark.parametrize("settings, message", [
    ({"attention_window": 4, "sparse_block": 4}, "two patterns"),
    ({"attention_sinks": 2}, "attention_sinks=2 needs an attention_window"),
    ({"kv_rank": 8}, "kv_rank=8, rope_dim=0"),
    ({"kv_rank": 8, "rope_dim": 3}, "rope_dim=3"),
    ({"rope_dim": 4}, "kv_rank=0, rope_dim=4"),
    ({"kv_rank": 8, "rope_dim": 4, "is_causal": False}, "is_causal=False"),
    ({"kv_rank": 8, "rope_dim": 4, "num_kv_heads": 2}, "num_kv_heads=2"),
    ({"attention_window": -1}, "attention_window"),
    ({"sparse_block": 2.5}, "sparse_block"),
])
def test_the_config_refuses_patterns_that_mean_nothing_by_name(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        EncoderConfig(**dict(BASE, **settings))


def test_the_config_round_trips_through_json():
    cfg = EncoderConfig(**BASE, kv_rank=12, rope_dim=4)
    assert EncoderConfig.from_dict(cfg.to_dict()) == cfg


# ----------------------------------------------------------------------------- hostile configs and inputs (issue 47)
@pytest.mark.parametrize("settings, message", [
    ({"sparse_block": 1_000_000}, "sparse_block=1000000 is more than max_len=20"),
    ({"attention_sinks": 40, "attention_window": 4}, "attention_sinks=40 is more than max_len=20"),
    ({"attention_window": 21}, "attention_window=21 is more than max_len=20"),
    ({"max_len": 2**20, "sparse_block": 1}, "1,048,576 blocks"),
])
def test_the_config_bounds_pattern_sizes_by_max_len_before_anything_is_built(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        EncoderConfig(**dict(BASE, **settings))


def test_load_refuses_a_saved_config_whose_blocks_would_take_a_terabyte(tmp_path):
    """Issue 47: load() accepted sparse_block=1000000, and a 3-token forward asked for 10^12 bytes."""
    import json

    from mha_lib.model import load

    Encoder(EncoderConfig(**BASE, sparse_block=4)).save_pretrained(tmp_path)
    path = tmp_path / "mha_lib_config.json"
    meta = json.loads(path.read_text())
    meta["config"]["sparse_block"] = 1_000_000
    path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"sparse_block=1000000 is more than max_len=20"):
        load(tmp_path)


def test_the_block_pattern_is_built_once_per_encoder_and_cut_per_call(monkeypatch):
    """Issue 47: every forward rebuilt the max_len pattern (max_len 4,096, blocks of 4: a 3-token forward 105-265x
    slower than dense). Counted, not timed: the layout's random blocks (one torch.randperm per block row) are
    drawn once, and every length, decode steps included, reads the same ones."""
    torch.manual_seed(0)
    model = Encoder(EncoderConfig(**dict(BASE, max_len=4096, positional="none"), sparse_block=4)).eval()
    draws = []
    randperm = torch.randperm
    monkeypatch.setattr(torch, "randperm", lambda *a, **k: draws.append(1) or randperm(*a, **k))
    model(IDS[:, :3])
    assert len(draws) == 1023  # block rows 1 .. 1023 (row 0 is global)
    for L in (18, 3):
        model(IDS[:, :L])
    caches = [{} for _ in model.blocks]
    for t in range(6):
        model(IDS[:, t:t + 1], caches=caches)
    assert len(draws) == 1023
    monkeypatch.undo()
    full = block_sparse_mask(4096, block=4, seed=0)
    assert torch.equal(model.config.attention_pattern(18, 18, causal=True), full[:18, :18])
    assert torch.equal(model.config.attention_pattern(2, 7, causal=True), full[5:7, :7])


def test_attention_sinks_longer_than_the_input_see_every_key_it_has():
    """Issue 47: with attention_sinks=4 any input under 4 tokens raised; its first keys are all sinks."""
    torch.manual_seed(0)
    sinks = Encoder(EncoderConfig(**BASE, attention_window=2, attention_sinks=4)).eval()
    full = Encoder(EncoderConfig(**BASE)).eval()
    full.load_state_dict(sinks.state_dict())
    for L in (1, 3, 4):
        assert torch.allclose(sinks(IDS[:, :L]).last_hidden_state, full(IDS[:, :L]).last_hidden_state, atol=1e-6)
    caches = [{} for _ in sinks.blocks]
    steps = [sinks(IDS[:, t:t + 1], caches=caches).last_hidden_state for t in range(6)]
    assert torch.allclose(torch.cat(steps, 1), sinks(IDS[:, :6]).last_hidden_state, atol=1e-5)


@pytest.mark.parametrize("pattern", [{"attention_window": 4}, {"sparse_block": 4}, {}])
@pytest.mark.parametrize("mask", [torch.zeros(18, 18, dtype=torch.int64), torch.zeros(18, 18, dtype=torch.uint8),
                                  torch.zeros(18, 18, dtype=torch.complex64)])
def test_an_integer_mask_gets_the_same_clear_error_with_or_without_a_pattern(pattern, mask):
    """Issue 47: with a pattern, torch's "cannot be converted to type int64" came first."""
    torch.manual_seed(0)
    model = Encoder(EncoderConfig(**BASE, **pattern)).eval()
    with pytest.raises(ValueError, match=re.escape(f"attn_mask has dtype {mask.dtype}; use bool (True = blocked) "
                                                   "or a float mask")):
        model(IDS, attn_mask=mask)


@pytest.mark.parametrize("pattern", [{"attention_window": 4}, {"sparse_block": 4}])
def test_a_mask_of_the_wrong_shape_gets_mha_libs_error_with_a_pattern(pattern):
    model = Encoder(EncoderConfig(**BASE, **pattern)).eval()
    with pytest.raises(ValueError, match=re.escape("attn_mask has shape (5, 5)")):
        model(IDS, attn_mask=torch.zeros(5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"attn_mask must be a bool or float tensor, got list"):
        model(IDS, attn_mask=[[True]])


def test_pruning_a_latent_model_raises_the_value_error_its_docstring_promises():
    """Issue 47: Encoder.prune_heads on a kv_rank model raised AttributeError."""
    from mha_lib.model import TokenClassifier

    model = Encoder(EncoderConfig(**BASE, kv_rank=12, rope_dim=4))
    with pytest.raises(ValueError, match=r"kv_rank=12.*cannot prune heads"):
        model.prune_heads({0: [1]})
    with pytest.raises(ValueError, match=r"kv_rank=12"):
        TokenClassifier(EncoderConfig(**BASE, kv_rank=12, rope_dim=4), 3).prune_heads({1: [0, 2]})
    model.prune_heads({0: []})  # nothing to prune: nothing to refuse
    assert model.heads_per_layer == [4, 4] and model.config.pruned_heads == {}


@pytest.mark.parametrize("pattern", [{"attention_window": 4}, {"attention_window": 4, "attention_sinks": 2},
                                     {"sparse_block": 4}, {}])
def test_an_empty_sequence_gives_an_empty_output_with_or_without_a_pattern(pattern):
    model = Encoder(EncoderConfig(**BASE, **pattern)).eval()
    out = model(torch.zeros(2, 0, dtype=torch.long), output_attentions=True)
    assert out.last_hidden_state.shape == (2, 0, 32) and out.attentions[0].shape == (2, 4, 0, 0)
    mask = model.config.attention_pattern(0, 3, causal=True)
    assert mask is None if not pattern else mask.shape == (0, 3) and mask.dtype == torch.bool
