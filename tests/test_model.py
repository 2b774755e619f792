"""Tests for mha_lib.model: the one configurable block and the encoders built from it."""
import json
import math
import os

import pytest
import torch
import torch.nn.functional as F

from mha_lib.model import (
    CONFIG_NAME,
    WEIGHTS_NAME,
    Encoder,
    EncoderConfig,
    TokenClassifier,
    TransformerBlock,
    load,
    sinusoidal_positions,
)

TINY = dict(vocab_size=23, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=12)


def make(cls=Encoder, seed=0, **overrides):
    torch.manual_seed(seed)
    cfg = EncoderConfig(**{**TINY, **overrides})
    model = TokenClassifier(cfg, 5) if cls is TokenClassifier else Encoder(cfg)
    return model.eval()


def ids(B=3, L=7, seed=1, vocab=TINY["vocab_size"]):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, vocab, (B, L), generator=g)


# ----------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "none"])
def test_encoder_shapes(norm_first, positional):
    model = make(norm_first=norm_first, positional=positional, type_vocab_size=2, embedding_norm=True)
    x = ids()
    out = model(x, token_type_ids=torch.ones_like(x), output_attentions=True, output_hidden_states=True)
    assert out.last_hidden_state.shape == (3, 7, 16)
    assert len(out.hidden_states) == TINY["num_layers"] + 1
    assert all(h.shape == (3, 7, 16) for h in out.hidden_states)
    assert len(out.attentions) == TINY["num_layers"]
    for w in out.attentions:
        assert w.shape == (3, 4, 7, 7)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 7))
    plain = model(x, token_type_ids=torch.ones_like(x))
    assert plain.attentions is None and plain.hidden_states is None
    torch.testing.assert_close(plain.last_hidden_state, out.last_hidden_state)


def test_token_classifier_shapes_and_passthrough():
    model = make(TokenClassifier)
    x = ids()
    out = model(x, output_attentions=True, output_hidden_states=True)
    assert out.logits.shape == (3, 7, 5)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (3, 4, 7, 7)
    torch.testing.assert_close(out.logits, model.readout(out.last_hidden_state))
    masked = model(x, head_mask=torch.zeros(2, 4)).logits
    assert not torch.allclose(masked, out.logits)


def test_token_classifier_takes_every_encoder_keyword():
    """TokenClassifier.forward lacked Encoder.forward's cross_head_mask, caches and position_offset:
    a causal classifier can now decode step by step, equal to the full pass."""
    import inspect

    assert set(inspect.signature(Encoder.forward).parameters) <= set(inspect.signature(TokenClassifier.forward).parameters)
    model = make(TokenClassifier, is_causal=True)
    x = ids(B=2, L=6)
    full = model(x).logits  # (B, L, C)
    caches = [{} for _ in range(TINY["num_layers"])]
    steps = [model(x[:, t:t + 1], caches=caches, position_offset=t).logits for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    pooled = TokenClassifier(EncoderConfig(**TINY, is_causal=True), 5, pooling="mean").eval()
    with pytest.raises(ValueError, match="caches .* needs pooling='token'"):
        pooled(x[:, :1], caches=[{} for _ in range(TINY["num_layers"])], position_offset=0)


# ----------------------------------------------------------------------------- the block
@pytest.mark.parametrize("norm_first", [True, False])
def test_block_follows_its_equation(norm_first):
    torch.manual_seed(0)
    cfg = EncoderConfig(**TINY, norm_first=norm_first, activation="relu")
    block = TransformerBlock(cfg).eval()
    x = torch.randn(2, 5, 16)
    y, w, cross = block(x)
    assert w is None and cross is None

    def attn(h):
        return block.attn(h)[0]

    def mlp(h):
        return block.mlp.fc_out(F.relu(block.mlp.fc_in(h)))

    if norm_first:  # pre-LN
        h = x + attn(block.norm1(x))
        expected = h + mlp(block.norm2(h))
    else:  # post-LN
        h = block.norm1(x + attn(x))
        expected = block.norm2(h + mlp(h))
    torch.testing.assert_close(y, expected)


def test_post_ln_outputs_are_normalised_and_pre_ln_are_not():
    x = ids(B=2, L=9)
    post = make(norm_first=False, final_norm=False)(x, output_hidden_states=True).hidden_states[1]
    pre = make(norm_first=True, final_norm=False)(x, output_hidden_states=True).hidden_states[1]
    # fresh LayerNorms have weight 1, bias 0: post-LN block outputs have unit variance
    torch.testing.assert_close(post.var(-1, unbiased=False), torch.ones(2, 9), atol=1e-4, rtol=0)
    assert (pre.var(-1, unbiased=False) - 1).abs().max() > 0.05


def test_gelu_is_exact_erf():
    torch.manual_seed(0)
    block = TransformerBlock(EncoderConfig(**TINY, activation="gelu"))
    h = torch.randn(4, 16)
    exact = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))
    torch.testing.assert_close(block.mlp.act(h), exact)


# ----------------------------------------------------------------------------- positions
def test_sinusoidal_formula_and_not_saved():
    pe = sinusoidal_positions(50, 16)
    pos, i = 7, 3
    angle = pos / 10000 ** (2 * i / 16)
    assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert sinusoidal_positions(5, 7).shape == (5, 7)  # odd d_model
    model = make(positional="sinusoidal")
    assert not any("sinusoid" in k for k in model.state_dict())
    assert "position_embedding.weight" in make(positional="learned").state_dict()


@pytest.mark.parametrize("positional,equivariant", [("none", True), ("learned", False), ("sinusoidal", False)])
def test_positions_break_permutation_symmetry(positional, equivariant):
    model = make(positional=positional)
    x = ids(B=1, L=8)
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(3))
    y = model(x).last_hidden_state
    y_perm = model(x[:, perm]).last_hidden_state
    assert torch.allclose(y[:, perm], y_perm, atol=1e-5) == equivariant


def test_causal_mask_no_leak():
    model = make()
    x = ids(B=1, L=6)
    x2 = x.clone()
    x2[:, 1:] = (x2[:, 1:] % (TINY["vocab_size"] - 1)) + 1
    assert not torch.equal(x, x2)
    a = model(x, is_causal=True).last_hidden_state
    b = model(x2, is_causal=True).last_hidden_state
    torch.testing.assert_close(a[:, 0], b[:, 0])
    assert not torch.allclose(a[:, 1:], b[:, 1:])


# ----------------------------------------------------------------------------- padding
@pytest.mark.parametrize("norm_first", [True, False])
def test_padding_changes_nothing_for_real_tokens(norm_first):
    model = make(norm_first=norm_first, positional="learned")
    lengths = [7, 4, 1]
    x = ids(B=3, L=7)
    pad = torch.arange(7)[None, :] >= torch.tensor(lengths)[:, None]  # (B, L) True = pad
    x = x.masked_fill(pad, 0)
    batched = model(x, key_padding_mask=pad, output_attentions=True)
    assert torch.isfinite(batched.last_hidden_state).all()
    for b, n in enumerate(lengths):
        alone = model(x[b : b + 1, :n], output_attentions=True)
        torch.testing.assert_close(batched.last_hidden_state[b, :n], alone.last_hidden_state[0], atol=1e-6, rtol=0)
        for wb, wa in zip(batched.attentions, alone.attentions):
            torch.testing.assert_close(wb[b, :, :n, :n], wa[0], atol=1e-6, rtol=0)
            assert torch.count_nonzero(wb[b, :, :, n:]) == 0  # nobody attends to padding


# ----------------------------------------------------------------------------- head_mask vs pruning
def test_head_mask_equals_pruning_and_config_records_it():
    model = make(TokenClassifier, num_layers=3)
    x = ids()
    to_prune = {0: [1], 2: [0, 3]}
    mask = torch.ones(3, 4)
    for layer, heads in to_prune.items():
        mask[layer, heads] = 0
    masked = model(x, head_mask=mask).logits
    full = model(x).logits
    assert (masked - full).abs().max() > 1e-3  # masking really changes the output
    model.prune_heads(to_prune)
    assert model.heads_per_layer == [3, 4, 2]
    assert model.config.pruned_heads == {0: [1], 2: [0, 3]}
    out = model(x, output_attentions=True)
    torch.testing.assert_close(out.logits, masked, atol=1e-6, rtol=0)
    assert [w.shape[1] for w in out.attentions] == [3, 4, 2]
    # ragged per-layer head masks index the kept heads
    ragged = [torch.ones(3), torch.ones(4), torch.tensor([1.0, 0.0])]
    again = model(x, head_mask=ragged).logits
    model.prune_heads({2: [2]})  # original numbering: kept heads were [1, 2], position 1 is head 2
    assert model.config.pruned_heads[2] == [0, 2, 3]
    torch.testing.assert_close(model(x).logits, again, atol=1e-6, rtol=0)
    # pruning an already pruned head does nothing
    model.prune_heads({0: [1]})
    assert model.heads_per_layer == [3, 4, 1]


def test_per_example_head_mask_and_gradient():
    model = make(num_layers=2)
    x = ids(B=2)
    mask = torch.ones(2, 2, 4, requires_grad=True)  # (num_layers, B, H)
    out = model(x, head_mask=mask).last_hidden_state
    out.pow(2).sum().backward()
    assert mask.grad.shape == (2, 2, 4) and mask.grad.abs().min() > 0
    # example 1 masked, example 0 not: example 0 unchanged
    m2 = torch.ones(2, 2, 4)
    m2[:, 1, :2] = 0
    y = model(x, head_mask=m2).last_hidden_state
    torch.testing.assert_close(y[0], out[0].detach())
    assert not torch.allclose(y[1], out[1].detach())


def test_pruning_does_not_touch_callers_config():
    cfg = EncoderConfig(**TINY)
    model = Encoder(cfg)
    model.prune_heads({1: [2]})
    assert cfg.pruned_heads == {} and model.config.pruned_heads == {1: [2]}


def test_config_pruned_heads_builds_pruned_model():
    model = make(pruned_heads={"1": [3, 0]})  # string keys, as JSON gives them
    assert model.heads_per_layer == [4, 2]
    assert model.config.pruned_heads == {1: [0, 3]}


# ----------------------------------------------------------------------------- save / load
@pytest.mark.parametrize("cls", [Encoder, TokenClassifier])
def test_save_load_round_trip_pruned(tmp_path, cls):
    model = make(cls, positional="learned", type_vocab_size=2, embedding_norm=True, norm_first=False)
    model.prune_heads({0: [0, 2], 1: [1]})
    x = ids()
    before = model(x, output_attentions=True)
    path = model.save_pretrained(tmp_path / "m")
    assert sorted(os.listdir(path)) == [CONFIG_NAME, WEIGHTS_NAME]
    with open(os.path.join(path, CONFIG_NAME)) as f:
        meta = json.load(f)  # plain JSON, no pickle
    assert meta["model_class"] == cls.__name__
    loaded = load(path)
    assert type(loaded) is cls and not loaded.training
    assert loaded.heads_per_layer == [2, 3]
    after = loaded(x, output_attentions=True)
    first = before.logits if cls is TokenClassifier else before.last_hidden_state
    second = after.logits if cls is TokenClassifier else after.last_hidden_state
    assert torch.equal(first, second)
    assert all(torch.equal(a, b) for a, b in zip(before.attentions, after.attentions))
    assert type(cls.from_pretrained(path)) is cls
    other = TokenClassifier if cls is Encoder else Encoder
    with pytest.raises(ValueError, match=cls.__name__):
        other.from_pretrained(path)


def test_save_load_gqa_pruned(tmp_path):
    model = make(num_kv_heads=2, num_layers=1)
    model.prune_heads({0: [0, 1]})  # removes query heads 0, 1 and so KV head 0
    assert model.blocks[0].attn.k_proj.weight.shape[0] == 4  # one KV head of head_dim 4 left
    x = ids()
    loaded = load(model.save_pretrained(tmp_path / "gqa"))
    assert torch.equal(loaded(x).last_hidden_state, model(x).last_hidden_state)


def test_load_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="found"):
        load(tmp_path)
    model = make(num_layers=1)
    path = model.save_pretrained(tmp_path / "m")
    from safetensors.torch import load_file, save_file

    state = load_file(os.path.join(path, WEIGHTS_NAME))
    state["blocks.0.mlp.fc_in.weight"] = torch.zeros(3, 3)
    save_file(state, os.path.join(path, WEIGHTS_NAME))
    with pytest.raises(ValueError, match=r"blocks\.0\.mlp\.fc_in\.weight"):
        load(path)
    del state["blocks.0.mlp.fc_in.weight"]
    save_file(state, os.path.join(path, WEIGHTS_NAME))
    with pytest.raises(ValueError, match="missing.*fc_in"):
        load(path)


def test_config_json_round_trip():
    cfg = EncoderConfig(**TINY, num_kv_heads=2, pruned_heads={0: [1]}, activation="relu")
    again = EncoderConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    with pytest.raises(ValueError, match="unknown keys.*'heads'"):
        EncoderConfig.from_dict({**cfg.to_dict(), "heads": 3})


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "overrides,match",
    [
        (dict(d_model=10, num_heads=3), "d_model=10.*num_heads=3"),
        (dict(num_heads=0), "num_heads"),
        (dict(num_kv_heads=3), "num_kv_heads=3"),
        (dict(activation="swish"), "'swish'"),
        (dict(positional="rope"), "'rope'"),
        (dict(dropout=1.5), "dropout"),
        (dict(pruned_heads={0: [4]}), r"heads \[4\]"),
        (dict(pruned_heads={5: [0]}), "layer 5"),
        (dict(pad_token_id=99), "pad_token_id=99"),
        (dict(layer_norm_eps=0), "layer_norm_eps"),
        (dict(layer_norm_eps=float("inf")), "layer_norm_eps.*inf"),
        (dict(layer_norm_eps=float("nan")), "layer_norm_eps.*nan"),
        (dict(pad_token_id=-1), "pad_token_id=-1"),
        (dict(pad_token_id=1.5), "pad_token_id.*1.5"),
        (dict(pad_token_id=True), "pad_token_id.*True"),
        (dict(norm_first="no"), "norm_first.*'no'"),
        (dict(dropout="0.1"), "dropout.*'0.1'"),
        (dict(dropout=None), "dropout.*None"),
        (dict(num_kv_heads=True), "num_kv_heads.*True"),
        (dict(pruned_heads={0: [1.5]}), "1.5"),
        (dict(pruned_heads={0: [True]}), "True"),
        (dict(pruned_heads={0: 1}), "single value 1"),
    ],
)
def test_bad_config_raises(overrides, match):
    with pytest.raises(ValueError, match=match):
        EncoderConfig(**{**TINY, **overrides})


def test_bad_inputs_raise():
    model = make()
    x = ids()
    with pytest.raises(ValueError, match="vocab_size=23"):
        model(x + 100)
    with pytest.raises(ValueError, match="max_len=12"):
        model(ids(L=13))
    with pytest.raises(ValueError, match="bool"):
        model(x, key_padding_mask=torch.ones_like(x))  # a transformers-style attention_mask
    with pytest.raises(ValueError, match="num_layers=2"):
        model(x, head_mask=torch.ones(3, 4))
    with pytest.raises(ValueError, match="type_vocab_size=0"):
        model(x, token_type_ids=torch.zeros_like(x))
    with pytest.raises(ValueError, match="integer tensor"):
        model(x.float())
    with pytest.raises(ValueError, match="layer 7"):
        model.prune_heads({7: [0]})
    with pytest.raises(ValueError, match="num_classes"):
        TokenClassifier(EncoderConfig(**TINY), 0)


@pytest.mark.parametrize(
    "bad,match",
    [
        ({0: [1], 1: [7]}, r"layer 1 heads \[7\]"),  # layer 0 is fine, layer 1 is not
        ({0: [0], 9: [0]}, "layer 9"),
        ({0: [1], 1: [2.9]}, "2.9"),
        ({0: [1], 1: [True]}, "True"),
        ({0: [1], "x": [0]}, "layer 'x'"),
        ({0: [1], 1: 2}, "single value 2"),
    ],
)
def test_encoder_prune_heads_is_atomic(bad, match):
    """Every layer and head is checked before anything is pruned (reviewer's repro_02)."""
    model = make()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=match):
        model.prune_heads(bad)
    assert model.heads_per_layer == [4, 4] and model.config.pruned_heads == {}
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_numpy_integers_are_integers():
    np = pytest.importorskip("numpy")
    cfg = EncoderConfig(**{**TINY, "d_model": np.int64(16), "num_heads": np.int32(4)}, pad_token_id=np.int64(1))
    assert type(cfg.d_model) is int and type(cfg.pad_token_id) is int
    json.dumps(cfg.to_dict())  # still JSON-able
    model = make()
    model.prune_heads({np.int64(1): [np.int64(0)]})
    assert model.config.pruned_heads == {1: [0]}


def test_encoder_needs_an_encoder_config():
    with pytest.raises(ValueError, match="EncoderConfig.*dict"):
        Encoder(dict(TINY))


# ----------------------------------------------------------------------------- configurations of the one block
def _copy_torch_layer(block, layer):
    """Copy a torch.nn.TransformerDecoderLayer / EncoderLayer into our block (same sub-layer order)."""
    from mha_lib.core import MultiHeadAttention

    block.attn.load_state_dict(MultiHeadAttention.from_torch(layer.self_attn).state_dict())
    if block.cross_attn is not None:
        block.cross_attn.load_state_dict(MultiHeadAttention.from_torch(layer.multihead_attn).state_dict())
    block.mlp.fc_in.load_state_dict(layer.linear1.state_dict())
    block.mlp.fc_out.load_state_dict(layer.linear2.state_dict())
    norms = [block.norm1, block.norm_cross, block.norm2] if block.cross_attn is not None else [block.norm1, block.norm2]
    for ours, theirs in zip(norms, [layer.norm1, layer.norm2, getattr(layer, "norm3", None)]):
        ours.load_state_dict(theirs.state_dict())


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_equals_torch_transformer_decoder_layer(norm_first):
    torch.manual_seed(0)
    cfg = EncoderConfig(**TINY, norm_first=norm_first, activation="relu", cross_attention=True)
    block = TransformerBlock(cfg).eval()
    layer = torch.nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True,
                                             norm_first=norm_first).eval()
    _copy_torch_layer(block, layer)
    tgt, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    memory_kpm = torch.zeros(2, 7, dtype=torch.bool)
    memory_kpm[1, 4:] = True
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5)
    expected = layer(tgt, memory, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=memory_kpm)
    with torch.no_grad():
        got, w, cross = block(tgt, is_causal=True, memory=memory, memory_key_padding_mask=memory_kpm,
                              need_weights=True)
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-5)
    assert w.shape == (2, 4, 5, 5) and cross.shape == (2, 4, 5, 7)
    assert bool((w.triu(1) == 0).all())  # causal self-attention
    assert float(cross[1, :, :, 4:].abs().max()) == 0.0  # padded memory gets no weight


def test_memory_must_match_the_block():
    torch.manual_seed(0)
    plain = TransformerBlock(EncoderConfig(**TINY))
    with pytest.raises(ValueError, match="memory"):
        plain(torch.randn(1, 3, 16), memory=torch.randn(1, 4, 16))
    decoder = TransformerBlock(EncoderConfig(**TINY, cross_attention=True))
    with pytest.raises(ValueError, match="memory"):
        decoder(torch.randn(1, 3, 16))


def test_attention_only_block_has_no_mlp_and_follows_its_equation():
    torch.manual_seed(0)
    cfg = EncoderConfig(**{**TINY, "d_ff": 0})
    block = TransformerBlock(cfg).eval()
    assert block.mlp is None and block.norm2 is None
    assert not any("mlp" in name for name, _ in block.named_parameters())
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(block(x)[0], x + block.attn(block.norm1(x))[0])


def test_causal_config_is_the_forward_default_and_ignores_the_future():
    torch.manual_seed(0)
    model = make(TokenClassifier, is_causal=True, d_ff=0)
    x = ids(B=2, L=8)
    y = x.clone()
    y[:, 5:] = (y[:, 5:] + 1) % TINY["vocab_size"]  # change only the future of position 4
    a, b = model(x).logits, model(y).logits
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])
    torch.testing.assert_close(model(x, is_causal=True).logits, a)  # the default is the config's
    assert not torch.allclose(model(x, is_causal=False).logits, a)  # an explicit False overrides it
    with pytest.raises(ValueError, match="is_causal"):
        model(x, is_causal="yes")


def test_patchify_order_and_errors():
    from mha_lib.model import patchify

    img = torch.arange(16.0).reshape(1, 4, 4)
    patches = patchify(img, 2)
    assert patches.shape == (1, 4, 4)
    assert patches[0, 0].tolist() == [0, 1, 4, 5]  # top-left patch, row-major inside
    assert patches[0, 1].tolist() == [2, 3, 6, 7]  # then to the right
    assert patchify(torch.zeros(2, 3, 8, 8), 4).shape == (2, 4, 48)
    assert torch.equal(patchify(img, 1)[0, :, 0], img.flatten())
    with pytest.raises(ValueError, match="width 6 is not divisible by patch_size=4"):
        patchify(torch.zeros(1, 8, 6), 4)
    with pytest.raises(ValueError, match="patch_size"):
        patchify(img, 0)
    with pytest.raises(ValueError, match="float"):
        patchify(torch.zeros(1, 4, 4, dtype=torch.long), 2)


VIT = dict(vocab_size=0, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=17, patch_dim=4,
           cls_token=True, pad_token_id=None, positional="learned")


def test_patch_front_end_with_cls_and_pooling(tmp_path):
    from mha_lib.model import patchify

    torch.manual_seed(0)
    model = TokenClassifier(EncoderConfig(**VIT), 10, pooling="cls").eval()
    with torch.no_grad():
        model.encoder.cls_embedding.normal_()
    patches = patchify(torch.rand(3, 8, 8), 2)  # (3, 16, 4)
    out = model(patches, output_attentions=True)
    assert out.logits.shape == (3, 10)
    assert out.attentions[0].shape == (3, 4, 17, 17)  # 16 patches + [CLS]
    torch.testing.assert_close(out.logits, model.readout(out.last_hidden_state[:, 0]))
    model.save_pretrained(tmp_path)
    again = load(tmp_path)
    assert again.pooling == "cls"
    torch.testing.assert_close(again(patches).logits, out.logits)
    with pytest.raises(ValueError, match="patch_dim=4"):
        model(torch.rand(3, 16, 5))
    with pytest.raises(ValueError, match="exceed max_len"):
        model(torch.rand(3, 17, 4))
    with pytest.raises(ValueError, match="NaN"):
        model(torch.full((1, 4, 4), float("nan")))


def test_mean_pooling_skips_padding():
    torch.manual_seed(0)
    model = TokenClassifier(EncoderConfig(**TINY), 3, pooling="mean").eval()
    x = ids(B=1, L=6)
    kpm = torch.tensor([[False, False, False, False, True, True]])
    padded = model(x, key_padding_mask=kpm).logits
    short = model(x[:, :4]).logits
    torch.testing.assert_close(padded, short, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="pooling='max'"):
        TokenClassifier(EncoderConfig(**TINY), 3, pooling="max")


def test_mean_pooling_reads_a_float_mask_as_attention_does_and_refuses_an_all_padded_row():
    torch.manual_seed(0)
    model = TokenClassifier(EncoderConfig(**TINY), 3, pooling="mean").eval()
    x = ids(B=2, L=6)
    kpm = torch.tensor([[False, False, False, False, True, True]] * 2)
    as_bool = model(x, key_padding_mask=kpm).logits
    for fill in (float("-inf"), torch.finfo(torch.float32).min):  # blocked, for attention and for the mean
        torch.testing.assert_close(model(x, key_padding_mask=torch.zeros(2, 6).masked_fill(kpm, fill)).logits,
                                   as_bool)
    bias = torch.full((2, 6), -1e-30)  # a bias of the scores, not padding: every position counts
    torch.testing.assert_close(model(x, key_padding_mask=bias).logits, model(x).logits, atol=1e-6, rtol=1e-5)
    for mask in (kpm.clone().index_fill_(0, torch.tensor([1]), True),
                 torch.zeros(2, 6).index_fill_(0, torch.tensor([1]), float("-inf"))):
        with pytest.raises(ValueError, match=r"row\(s\) \[1\] are all padding; pooling='mean'"):
            model(x, key_padding_mask=mask)


@pytest.mark.parametrize("bad, match", [
    (dict(vocab_size=0), "vocab_size=0"),
    (dict(patch_dim=4), "set vocab_size=0"),
    (dict(vocab_size=0, patch_dim=4, pad_token_id=0), "pad_token_id"),
    (dict(cls_token=True), "cls_token"),
    (dict(d_ff=-1), "d_ff"),
    (dict(is_causal=1), "is_causal"),
    (dict(cross_attention="no"), "cross_attention"),
    (dict(patch_dim=2.0), "patch_dim"),
])
def test_new_config_fields_are_checked(bad, match):
    with pytest.raises(ValueError, match=match):
        EncoderConfig(**{**TINY, **bad})


# ----------------------------------------------------------------- hostile inputs
def test_config_refuses_a_list_activation():
    with pytest.raises(ValueError, match="activation"):
        EncoderConfig(vocab_size=5, d_model=8, num_heads=2, num_layers=1, d_ff=8, max_len=4, activation=["gelu"])


@pytest.mark.parametrize("which", ["input_ids", "attn_mask", "key_padding_mask", "token_type_ids"])
def test_meta_device_inputs_are_refused_naming_the_argument(which):
    from mha_lib.model import TokenClassifier

    torch.manual_seed(0)
    m = TokenClassifier(EncoderConfig(vocab_size=10, d_model=8, num_heads=2, num_layers=2, d_ff=16, max_len=20,
                                      type_vocab_size=2), 3)
    args = dict(input_ids=torch.zeros(2, 5, dtype=torch.long), attn_mask=torch.zeros(5, 5, dtype=torch.bool),
                key_padding_mask=torch.zeros(2, 5, dtype=torch.bool), token_type_ids=torch.zeros(2, 5, dtype=torch.long))
    args[which] = args[which].to("meta")
    with pytest.raises(ValueError, match=f"{which} is on the meta device"):
        m(args.pop("input_ids"), **args)
