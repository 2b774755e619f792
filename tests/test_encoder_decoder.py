"""Tests for the encoder-decoder built from the one block, greedy decoding with a cache, and the
translation task."""
import pytest
import torch

from mha_lib.model import EncoderConfig, EncoderDecoder
from mha_lib.pruning import attention_layers
from mha_lib.tasks import IGNORE_INDEX, TranslationTask, per_example_loss, task_from_dict

ENC = dict(vocab_size=15, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=9, pad_token_id=0)


def make(seed=0):
    torch.manual_seed(seed)
    return EncoderDecoder(EncoderConfig(**ENC), EncoderConfig(**ENC, is_causal=True, cross_attention=True), 15).eval()


def src(B=3, S=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 15, (B, S), generator=g)
    kpm = torch.zeros(B, S, dtype=torch.bool)
    kpm[1, 4:] = True
    return ids.masked_fill(kpm, 0), kpm


def test_teacher_forced_pass_shapes_and_causality():
    model = make()
    s, kpm = src()
    tgt = torch.randint(3, 15, (3, 6))
    out = model(tgt, src_ids=s, src_key_padding_mask=kpm, output_attentions=True)
    assert out.logits.shape == (3, 6, 15)
    assert [w.shape for w in out.encoder_attentions] == [(3, 4, 7, 7)] * 2
    assert [w.shape for w in out.attentions] == [(3, 4, 6, 6)] * 2
    assert [w.shape for w in out.cross_attentions] == [(3, 4, 6, 7)] * 2
    assert float(out.cross_attentions[0][1, :, :, 4:].detach().abs().max()) == 0.0  # padded source gets nothing
    changed = tgt.clone()
    changed[:, 4:] = 3
    again = model(changed, src_ids=s, src_key_padding_mask=kpm).logits
    torch.testing.assert_close(again[:, :4], out.logits[:, :4])  # the decoder does not see the future


def test_generate_with_cache_equals_recomputing_and_projects_memory_once():
    model = make()
    s, kpm = src()
    calls = []
    # the key each cross-attention call receives: memory (S = 7 positions) on the first step, then none
    hooks = [b.cross_attn.register_forward_pre_hook(lambda m, args: calls.append(args[1].shape[1]))
             for b in model.decoder.blocks]
    cached, steps = model.generate(s, src_key_padding_mask=kpm, bos_id=1, max_new_tokens=8,
                                   output_attentions=True)
    for h in hooks:
        h.remove()
    assert calls[:2] == [7, 7] and calls[2:] == [0] * 14  # memory projected once per decoder layer
    plain = model.generate(s, src_key_padding_mask=kpm, bos_id=1, max_new_tokens=8, use_cache=False)
    assert torch.equal(cached, plain)
    # and greedy: each token is the arg-max of a teacher-forced pass on the tokens before it
    inputs = torch.cat([torch.ones(3, 1, dtype=torch.long), cached[:, :-1]], 1)
    assert torch.equal(model(inputs, src_ids=s, src_key_padding_mask=kpm).logits.argmax(-1), cached)
    assert len(steps) == 8 and steps[3][0][0].shape == (3, 4, 1, 4) and steps[3][1][0].shape == (3, 4, 1, 7)


def test_generate_stops_at_eos_and_checks_its_arguments():
    model = make()
    s, kpm = src()
    tokens = model.generate(s, src_key_padding_mask=kpm, bos_id=1, max_new_tokens=8, eos_id=int(
        model.generate(s, src_key_padding_mask=kpm, bos_id=1, max_new_tokens=1)[0, 0]))
    first_eos = (tokens[0] == tokens[0, 0]).nonzero()[0, 0]
    assert bool((tokens[0, first_eos:] == tokens[0, 0]).all())
    assert model.generate(s, bos_id=1, max_new_tokens=9).shape == (3, 9)  # max_len positions
    with pytest.raises(ValueError, match="max_new_tokens=10"):
        model.generate(s, bos_id=1, max_new_tokens=10)
    with pytest.raises(ValueError, match="bos_id"):
        model.generate(s, bos_id=-1, max_new_tokens=2)


def test_head_mask_follows_attention_layers_order():
    model = make()
    s, kpm = src()
    tgt = torch.randint(3, 15, (3, 5))
    layers = attention_layers(model)
    assert len(layers) == 6
    assert layers[2] is model.decoder.blocks[0].attn and layers[3] is model.decoder.blocks[0].cross_attn
    base = model(tgt, src_ids=s, src_key_padding_mask=kpm).logits
    ones = [torch.ones(4) for _ in layers]
    torch.testing.assert_close(model(tgt, src_ids=s, src_key_padding_mask=kpm, head_mask=ones).logits, base)
    no_cross = [torch.ones(4), torch.ones(4), torch.ones(4), torch.zeros(4), torch.ones(4), torch.zeros(4)]
    blind = model(tgt, src_ids=s, src_key_padding_mask=kpm, head_mask=no_cross).logits
    other = model(tgt, src_ids=torch.full_like(s, 5), head_mask=no_cross).logits
    torch.testing.assert_close(blind, other)  # without cross-attention the source cannot matter
    with pytest.raises(ValueError, match="6 entries"):
        model(tgt, src_ids=s, head_mask=ones[:4])


def test_configs_are_checked():
    enc, dec = EncoderConfig(**ENC), EncoderConfig(**ENC, is_causal=True, cross_attention=True)
    with pytest.raises(ValueError, match="cross_attention"):
        EncoderDecoder(enc, enc, 15)
    with pytest.raises(ValueError, match="d_model"):
        EncoderDecoder(enc, EncoderConfig(**{**ENC, "d_model": 32}, is_causal=True, cross_attention=True), 15)
    with pytest.raises(ValueError, match="num_classes"):
        EncoderDecoder(enc, dec, 0)
    with pytest.raises(ValueError, match="num_classes=16 must not exceed the decoder's vocab_size=15"):
        EncoderDecoder(enc, dec, 16)


def test_source_padding_never_leaks():
    model = make()
    s, kpm = src()
    tgt = torch.randint(3, 15, (3, 5))
    other = s.clone()
    other[kpm] = 7  # different ids under the padding mask
    a = model(tgt, src_ids=s, src_key_padding_mask=kpm).logits
    b = model(tgt, src_ids=other, src_key_padding_mask=kpm).logits
    torch.testing.assert_close(a, b)
    assert torch.equal(model.generate(s, src_key_padding_mask=kpm, bos_id=1, max_new_tokens=6),
                       model.generate(other, src_key_padding_mask=kpm, bos_id=1, max_new_tokens=6))


def test_translation_task_reverses_through_the_dictionary():
    task = TranslationTask(num_words=10, min_words=2, max_words=6, dictionary_seed=3)
    batch = task.dataset(200, seed=0)
    f = task.dictionary()
    assert sorted(f[3:].tolist()) == list(range(3, 13)) and f[:3].tolist() == [0, 1, 2]
    n = batch.marked
    src_ids, kpm = batch.inputs["src_ids"], batch.inputs["src_key_padding_mask"]
    for b in range(200):
        k = int(n[b])
        words = src_ids[b, :k]
        assert int(src_ids[b, k]) == task.EOS and bool(kpm[b, k + 1:].all()) and not bool(kpm[b, :k + 1].any())
        assert batch.labels[b, :k].tolist() == f[words.flip(0)].tolist()
        assert int(batch.labels[b, k]) == task.EOS and bool((batch.labels[b, k + 1:] == IGNORE_INDEX).all())
        assert int(batch.input_ids[b, 0]) == task.BOS
        assert batch.input_ids[b, 1:k + 1].tolist() == batch.labels[b, :k].tolist()
    aligned = task.relation_targets(batch)[:, 0]  # (B, T)
    assert bool((aligned[torch.arange(200), n] == -1).all())  # nothing aligns with the EOS prediction
    rows, cols = (aligned >= 0).nonzero(as_tuple=True)
    # the aligned source position holds the word whose translation is the label
    assert torch.equal(f[src_ids[rows, aligned[rows, cols]]], batch.labels[rows, cols])
    assert task_from_dict(task.to_dict()) == task
    with pytest.raises(ValueError, match="max_words=2 < min_words=3"):
        TranslationTask(min_words=3, max_words=2)


def test_an_encoder_decoder_trains_on_the_task_batches():
    task = TranslationTask(num_words=12, min_words=2, max_words=8)
    model = make()
    batch = task.sample(4, torch.Generator().manual_seed(0))
    loss = per_example_loss(model, batch)
    assert loss.shape == (4,) and bool(torch.isfinite(loss).all())
    assert batch[1:3].inputs["src_ids"].shape == (2, 9)  # slicing reaches the extra inputs
    scores = task.curve_scores(model, task.dataset(8, seed=0))
    assert len(scores["aligned"]) == 2 and len(scores["aligned"][0]) == 4


def test_decoding_state_is_checked():
    model = make()
    s, kpm = src()
    assert torch.equal(model.generate(s, bos_id=1, max_new_tokens=4),  # padding mask from pad_token_id
                       model.generate(s, src_key_padding_mask=kpm, bos_id=1, max_new_tokens=4))
    memory = model.encode(s, kpm).last_hidden_state
    caches = [{} for _ in model.decoder.blocks]
    step = torch.ones(3, 1, dtype=torch.long)
    model.decoder(step, memory=memory, memory_key_padding_mask=kpm, caches=caches)
    with pytest.raises(ValueError, match="another memory"):
        model.decoder(step, memory=memory.clone(), memory_key_padding_mask=kpm, caches=caches)
    with pytest.raises(ValueError, match="position_offset=0 but the caches hold 1"):
        model.decoder(step, memory=memory, memory_key_padding_mask=kpm, caches=caches, position_offset=0)
    empty = s.clone()
    empty[0] = 0
    with pytest.raises(ValueError, match="all padding"):
        model.generate(empty, bos_id=1, max_new_tokens=2)
    with pytest.raises(ValueError, match="eos_id=15"):
        model.generate(s, bos_id=1, max_new_tokens=2, eos_id=15)
    with pytest.raises(ValueError, match="use_cache"):
        model.generate(s, bos_id=1, max_new_tokens=2, use_cache=1)


@pytest.mark.parametrize("form", ["bool", "float -inf", "float finfo.min"])
def test_every_form_of_an_all_padding_source_mask_is_refused_naming_the_row(form):
    model = make()
    s, kpm = src()
    blocked = kpm.clone()
    blocked[2] = True  # row 2: no real position
    mask = blocked if form == "bool" else torch.zeros(blocked.shape).masked_fill(
        blocked, float("-inf") if form == "float -inf" else torch.finfo(torch.float32).min)
    with pytest.raises(ValueError, match=r"source row\(s\) \[2\] .* all padding"):
        model.generate(s, src_key_padding_mask=mask, bos_id=1, max_new_tokens=2)
    with pytest.raises(ValueError, match=r"source row\(s\) \[2\] .* all padding"):
        model(torch.ones(3, 2, dtype=torch.long), src_ids=s, src_key_padding_mask=mask)
    partial = torch.zeros(kpm.shape).masked_fill(kpm, float("-inf"))  # row 1 half padded: fine
    assert torch.equal(model.generate(s, src_key_padding_mask=partial, bos_id=1, max_new_tokens=3),
                       model.generate(s, src_key_padding_mask=kpm, bos_id=1, max_new_tokens=3))


@pytest.mark.parametrize("pad_token_id", [0, None])
def test_an_empty_source_is_refused_with_or_without_a_pad_id(pad_token_id):
    cfg = dict(ENC, pad_token_id=pad_token_id)
    torch.manual_seed(0)
    model = EncoderDecoder(EncoderConfig(**cfg), EncoderConfig(**cfg, is_causal=True, cross_attention=True), 15)
    empty = torch.zeros(2, 0, dtype=torch.long)
    with pytest.raises(ValueError, match=r"source row\(s\) \[0, 1\] .* \(or empty\)"):
        model.generate(empty, bos_id=1, max_new_tokens=2)
    with pytest.raises(ValueError, match=r"\(or empty\)"):
        model.generate(empty, src_key_padding_mask=torch.zeros(2, 0), bos_id=1, max_new_tokens=2)
    with pytest.raises(ValueError, match=r"\(or empty\)"):
        model(torch.ones(2, 2, dtype=torch.long), src_ids=empty)


@pytest.mark.parametrize("cls_token", [False, True])
@pytest.mark.parametrize("form", ["bool", "float -inf"])
def test_a_patch_source_that_is_all_padding_is_refused_like_a_token_source(form, cls_token):
    torch.manual_seed(0)
    src_cfg = EncoderConfig(vocab_size=0, d_model=16, num_heads=4, num_layers=1, d_ff=16, max_len=20, patch_dim=4, pad_token_id=None,
                            cls_token=cls_token)
    model = EncoderDecoder(src_cfg, EncoderConfig(**ENC, is_causal=True, cross_attention=True), 15).eval()
    patches = torch.randn(2, 3, 4)
    blocked = torch.zeros(2, 3 + int(cls_token), dtype=torch.bool)
    blocked[1] = True
    mask = blocked if form == "bool" else torch.zeros(blocked.shape).masked_fill(blocked, float("-inf"))
    with pytest.raises(ValueError, match=r"source row\(s\) \[1\] of src_ids \(2, 3, 4\) are all padding"):
        model.generate(patches, src_key_padding_mask=mask, bos_id=1, max_new_tokens=2)
    with pytest.raises(ValueError, match=r"source row\(s\) \[1\]"):
        model(torch.ones(2, 2, dtype=torch.long), src_ids=patches, src_key_padding_mask=mask)
    assert model.generate(patches, bos_id=1, max_new_tokens=2).shape[0] == 2  # no mask: every patch is real
