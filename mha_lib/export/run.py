"""Running an exported file with onnxruntime and comparing it with mha_lib."""
from __future__ import annotations

import os
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .. import checks
from .common import METADATA_PREFIX, _checked_path, _read_metadata, _require
from .feeds import _as_array, _checked_feeds
from .chain import layered
from .rows import TokenRows
from .trace import _describe, _metadata

#: Sentences for checking a converted MiniLM against mha_lib: short and long, punctuation,
#: numbers, accents, CJK, emoji, code and a pair's worth of paraphrases.
CHECK_SENTENCES: Tuple[str, ...] = (
    "The cat sat on the mat.",
    "A dog barked loudly at the mailman.",
    "Hi",
    "?",
    "Attention heads in BERT often look at [SEP].",
    "Michel et al. pruned many of BERT's heads without losing much accuracy, which is surprising.",
    "The keys that the query matches decide where the value vectors come from.",
    "I love this book!",
    "I do not love this book.",
    "Paris is the capital of France.",
    "The capital of France is Paris.",
    "She sells sea shells by the sea shore.",
    "Colourless green ideas sleep furiously.",
    "The stock market fell 3.5% on Tuesday after the announcement.",
    "In 1969, Apollo 11 landed on the Moon; Neil Armstrong stepped out first.",
    "Café, naïve, façade, jalapeño and Zürich keep their accents here.",
    "東京は日本の首都です。",
    "北京欢迎你",
    "Emoji 🙂 and symbols like → and ∑ appear in text too 🚀.",
    "def attention(q, k, v): return softmax(q @ k.T) @ v",
    "unbelievably antidisestablishmentarianism supercalifragilisticexpialidocious",
    "   leading and trailing spaces   ",
    "ALL CAPS SENTENCE WITH SHOUTING",
    "The bank raised its interest rates.",
    "We sat on the river bank and watched the boats.",
    "Transformers process every token of a sentence in parallel.",
    "Recurrent networks read a sentence one word at a time.",
    "How many heads does a model really need?",
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the incredulity, it was the season of Light, it was "
    "the season of Darkness, it was the spring of hope, it was the winter of despair, we had everything "
    "before us, we had nothing before us, we were all going direct to Heaven, we were all going direct "
    "the other way -- in short, the period was so far like the present period, that some of its noisiest "
    "authorities insisted on its being received, for good or for evil, in the superlative degree of "
    "comparison only.",
    "A man is playing a guitar.",
    "Someone plays an acoustic guitar on stage.",
    "A woman is slicing an onion in the kitchen.",
    "The weather today is cold and rainy.",
    "It's freezing and wet outside this afternoon.",
    "<img src=x onerror=alert(1)> is just text to a tokenizer.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14159 -42",
)


def onnx_session(path: Union[str, os.PathLike], *, threads: Optional[int] = None,
                 token_rows: Union[str, os.PathLike, None] = None):
    """An ``onnxruntime.InferenceSession`` on the CPU for an exported file.

    A file from :func:`split_for_web` reads its token rows from files: the session gets them as
    ``session.mha_lib_token_rows`` (a :class:`TokenRows`), so that :func:`run_onnx` takes
    ``input_ids`` for it as for any other file. The embeddings file of :func:`split_layers_for_web`
    (it lists its layer files) opens with every layer's file beside it, as one
    :class:`~mha_lib.export.chain.LayeredSession` that answers as the whole model's session.

    Args:
        path: the ``.onnx`` file.
        threads: intra-op threads (None: onnxruntime's default).
        token_rows: the row folder of a split file (default: where :func:`split_for_web` put it,
            recorded in the file relative to its folder).

    Raises:
        ValueError: no such file (or a folder), a file onnxruntime cannot load, a bad ``threads``,
            or a split file whose row folder has no ``index.json`` or holds another model's rows
            (see :class:`TokenRows`); an embeddings file whose layer files are missing or do not fit.
        ImportError: onnxruntime missing (names ``pip install "mha_lib[export]"``).
    """
    path = _checked_path(path, "path", must_exist=True)
    ort = _require("onnxruntime")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only
    if threads is not None:
        options.intra_op_num_threads = checks.positive_int(threads, "threads")

    def open_one(file):
        try:
            return ort.InferenceSession(file, options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime's InvalidProtobuf, Fail, ...
            raise ValueError(f"path={file!r}: onnxruntime cannot load it as an ONNX model ({err})") from None

    session = open_one(path)
    if "layers" in _read_metadata(session):  # split_layers_for_web's embeddings: every layer's file runs after it
        session = layered(path, session, open_one)
    inputs = {i.name: i for i in session.get_inputs()}
    if "token_rows" in inputs:
        meta = _read_metadata(session)
        if token_rows is None:
            token_rows = os.path.join(os.path.dirname(os.path.abspath(path)), meta.get("token_rows", ""))
        dim = inputs["token_rows"].shape[-1]
        session.mha_lib_token_rows = TokenRows(token_rows, expected={
            "rows": int(meta["vocab_size"]) if "vocab_size" in meta else None,
            "dim": dim if isinstance(dim, int) else None, "sha256": meta.get("token_rows_sha256")})
    return session


def _session(session):
    """A session from :func:`onnx_session`, or a path turned into one; ValueError for anything else."""
    if isinstance(session, (str, os.PathLike)):
        return onnx_session(session)
    ort = _require("onnxruntime")
    if not isinstance(session, ort.InferenceSession) and not getattr(type(session), "_mha_lib_session", False):
        raise ValueError(f"session must be an onnxruntime.InferenceSession (onnx_session(path)) or a path, got "
                         f"{type(session).__name__}: {session!r:.60}")
    return session


def run_onnx(session, **inputs) -> Dict[str, np.ndarray]:
    """Run an exported file: ``{output name: numpy array}``.

    The inputs are checked first (onnxruntime itself would cast, wrap or clamp some mistakes
    silently: a negative id wraps around in ``Gather``), against the sizes :func:`export_onnx`
    stores in the file's ``metadata_props`` (files without them get the shape and dtype checks).

    Args:
        session: from :func:`onnx_session`, or a path.
        **inputs: the file's inputs by name, as tensors or numpy arrays: ``input_ids`` (B, L)
            integers in [0, vocab_size); ``token_type_ids`` (B, L) integers in
            [0, type_vocab_size); ``key_padding_mask`` (B, L) bool or 0/1 (True = padding); ``attn_mask``
            (L, L) bool or 0/1 (True = blocked; files written with ``pattern_input=True``);
            ``patches`` (B, N, patch_dim) real numbers; ``head_mask`` (num_layers, H), may be left
            out (all ones). Float inputs are cast to the file's float32 and must be finite after
            the cast (a float64 1e39 is refused: it would become inf); float16 and bfloat16
            tensors become float32 exactly. Tensors are read on the CPU and must be dense, with
            data (not on the meta device). B >= 1 and 1 <= L <= the file's ``max_length``.

    Raises:
        ValueError: ``session`` neither a session nor a path to an ONNX file; an input name the
            file does not have, or a missing one (naming them); an input of the wrong dtype
            (float ids), shape or range (ids outside the vocabulary, a length beyond
            ``max_length``, patches of another width than the file's ``patch_dim``, a float
            value that is not finite in float32); a tensor without data (meta device), sparse,
            nested or quantised; the message names the input.
    """
    session = _session(session)
    feeds = _checked_feeds(session, inputs)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def compare_onnx(model: nn.Module, session, inputs: Mapping[str, torch.Tensor],
                 head_mask: Optional[torch.Tensor] = None) -> Dict[str, float]:
    """How far an exported file is from mha_lib on the same inputs, where a reader would look.

    Differences are taken over real positions only: a padded query row of ``attentions`` and a
    padded position of ``logits`` / ``last_hidden_state`` are left out (padding is never shown;
    padded keys get weight 0 in both), and so are rows of pooled outputs with no real token.
    For an exact, every-entry comparison run :func:`run_onnx` and compare the arrays.

    Args:
        model: the mha_lib model the file was exported from.
        session: from :func:`onnx_session`, or a path.
        inputs: the file's inputs except ``head_mask`` (names as in the table of :mod:`mha_lib.export`), tensors.
        head_mask: (num_layers, H) float32, default all ones.

    Returns:
        ``{output name: max abs difference}`` for every output, plus
        ``"sentence_embedding_min_cosine"`` (the lowest cosine between the two embeddings of a
        row) when the file has that output. Floats.

    Raises:
        ValueError: as :func:`run_onnx` (checked before either model runs: ``inputs`` not a dict,
            a missing or unknown input, a bad dtype, shape or range), ``head_mask`` given twice,
            a model :func:`export_onnx` refuses, or a model whose kind or sizes differ from those
            the file records (its ``metadata_props``).
    """
    session = _session(session)
    desc = _describe(model, layer_inputs="layer_inputs" in [o.name for o in session.get_outputs()])
    if not isinstance(inputs, Mapping):
        raise ValueError(f"inputs must be a dict {{input name: tensor}}, got {type(inputs).__name__}")
    if "head_mask" in inputs:
        raise ValueError("pass head_mask as compare_onnx(..., head_mask=...), not in inputs")
    meta = _read_metadata(session)
    mine = {k[len(METADATA_PREFIX):]: v for k, v in _metadata(desc).items()}
    differ = sorted(k for k in ("kind", "num_layers", "num_heads", "vocab_size", "type_vocab_size")
                    if k in meta and meta[k] != mine[k])
    if differ:
        raise ValueError(f"model does not match the file: {', '.join(f'{k} {mine[k]} vs {meta[k]}' for k in differ)} "
                         "(model vs file)")
    if head_mask is None:
        head_mask = torch.ones(desc["num_layers"], desc["num_heads"])
    checked = _checked_feeds(session, {**inputs, "head_mask": head_mask})  # numpy, the file's dtypes
    device = next(model.parameters()).device
    feeds = {k: torch.from_numpy(v).to(device) for k, v in checked.items()}
    if "token_index" in checked:  # a split file: mha_lib reads the ids themselves
        feeds["input_ids"] = torch.as_tensor(_as_array(inputs["input_ids"], "input_ids"), dtype=torch.long,
                                             device=device)
    with torch.no_grad():
        ref = desc["wrapper"](model, desc["kind"], desc.get("layer_inputs", False)).eval()(
            **{k: feeds[k] for k in desc["inputs"]})
    ref = {name: r.cpu() for name, r in zip(desc["outputs"], ref)}
    names = [o.name for o in session.get_outputs()]
    got = {k: torch.from_numpy(v) for k, v in zip(names, session.run(names, checked))}
    real = (~feeds["key_padding_mask"]).cpu() if "key_padding_mask" in feeds else None  # (B, L)
    rows = real.any(-1) if real is not None else None  # (B,) rows with a real token
    out = {}
    for name, r in ref.items():
        diff = (got[name] - r).abs()
        if real is not None and name == "attentions":
            diff = diff.permute(1, 3, 0, 2, 4)[real]  # (real queries, num_layers, H, L)
        elif real is not None and name == "layer_inputs":
            diff = diff[:, 0, real[0]]  # (num_layers, real positions of the first sequence, d_model)
        elif real is not None and diff.dim() == 3 and diff.shape[:2] == real.shape:
            diff = diff[real]  # (real positions, features)
        elif rows is not None and diff.dim() == 2:
            diff = diff[rows]  # pooled (real rows, features)
        out[name] = float(diff.max()) if diff.numel() else 0.0
    if "sentence_embedding" in got:
        keep = rows if rows is not None else slice(None)
        cos = F.cosine_similarity(got["sentence_embedding"][keep], ref["sentence_embedding"][keep], dim=-1)
        out["sentence_embedding_min_cosine"] = float(cos.min()) if cos.numel() else 1.0
    return out


def compare_on_sentences(model, session, texts: Sequence[str] = CHECK_SENTENCES, *, batch_size: int = 8,
                         head_mask: Optional[torch.Tensor] = None) -> Dict[str, float]:
    """:func:`compare_onnx` for a BertEncoder over ``texts``, tokenized in batches (with padding).

    Args:
        model: a :class:`~mha_lib.pretrained.BertEncoder` (it brings its tokenizer).
        session: from :func:`onnx_session`, or a path.
        texts: the sentences (default :data:`CHECK_SENTENCES`, 36 varied ones).
        batch_size: sentences per run, >= 1.
        head_mask: as in :func:`compare_onnx`.

    Returns:
        The worst value of each entry of :func:`compare_onnx` over the batches (max differences,
        min cosine), plus ``"texts"``: how many were compared.

    Raises:
        ValueError: a model without a tokenizer, empty ``texts``, a bad ``batch_size``.
    """
    if not hasattr(model, "tokenizer"):
        raise ValueError(f"compare_on_sentences needs a BertEncoder (with a tokenizer), got {type(model).__name__}")
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"texts must be a non-empty list of str, got {texts!r:.80}")
    batch_size = checks.positive_int(batch_size, "batch_size")
    session = _session(session)
    worst: Dict[str, float] = {}
    for start in range(0, len(texts), batch_size):
        batch = model.tokenizer(texts[start:start + batch_size], warn=False)
        for k, v in compare_onnx(model, session, batch.model_inputs(), head_mask).items():
            worse = min if k.endswith("cosine") else max
            worst[k] = worse(worst.get(k, v), v)
    worst["texts"] = len(texts)
    return worst
