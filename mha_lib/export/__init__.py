"""ONNX export of mha_lib's encoders, for onnxruntime in Python and in the reader's browser.

:func:`export_onnx` writes one self-contained ``.onnx`` file (weights inside) for a
:class:`~mha_lib.model.TokenClassifier` (the toy models), a
:class:`~mha_lib.pretrained.BertEncoder` (all-MiniLM-L6-v2) or a plain
:class:`~mha_lib.model.Encoder`, traced with ``torch.onnx.export(..., dynamo=True)`` (opset >= 18)
with a dynamic batch size and sequence length. Every file has the same interface:

=======================  ==============================  =========================================
name                     type, shape                     meaning
=======================  ==============================  =========================================
``input_ids``            int64 (B, L)                    token ids (token front-ends)
``token_type_ids``       int64 (B, L)                    only when the model has token types
``key_padding_mask``     bool (B, L)                     True = padding (mha_lib's polarity)
``patches``              float32 (B, N, patch_dim)       instead of the three above: a patch
                                                         front-end (chapter 7), L = N (+ [CLS])
``head_mask``            float32 (num_layers, H)         Michel et al. 2019's xi: 1 keep, 0 drop
``attentions``           float32 (num_layers, B, H,      every layer's per-head weights, stacked
                         L, L)                           (before head_mask, as mha_lib returns them)
``logits``               float32 (B, L, C) or (B, C)     TokenClassifier (pooled: (B, C))
``last_hidden_state``    float32 (B, L, d_model)         BertEncoder, Encoder
``sentence_embedding``   float32 (B, d_model)            BertEncoder: ``pool`` (mean over real
                                                         tokens, L2-normalised for MiniLM)
=======================  ==============================  =========================================

Every file also records its sizes in the model's ``metadata_props`` (``mha_lib.vocab_size``,
``mha_lib.type_vocab_size``, ``mha_lib.max_length``, ``mha_lib.num_layers``, ``mha_lib.num_heads``, ...;
see :data:`METADATA_PREFIX`), which :func:`run_onnx` checks its inputs against before onnxruntime
runs (a negative id would wrap around in ``Gather``).

The traced pass is mha_lib's own forward: value checks are skipped while tracing
(:func:`mha_lib.checks.tracing`) and the pass has no Python branch on tensor values, so a fully
padded row gets all-zero attention rows in the file, as in mha_lib. Not exported: the
encoder-decoder (chapter 6: two input sequences and three kinds of attention) and models pruned
to different head counts per layer (``attentions`` and ``head_mask`` would be ragged).

:func:`split_for_web` makes the copy the book serves: every weight matrix in float16 (computed in
float32) and the token-embedding table moved out of the file into small row files, of which a page
fetches only those its text's tokens need (:class:`TokenRows` reads them in Python). For
all-MiniLM-L6-v2 that is a 21.8 MB file instead of 90 MB plus about 8 row files of 24 KB per
sentence, with attention weights within about 0.002 of mha_lib's. :func:`quantize_for_web` makes the
smallest single file (8-bit weights, 24.8 MB, attention weights within about 0.03).
:func:`compare_on_sentences` and :func:`compare_onnx` measure how far any file is from mha_lib.

Needs the extra ``pip install "mha_lib[export]"`` (onnx, onnxscript; onnxruntime to run the files);
``import mha_lib`` does not import them.

Sources: the ONNX operator set (https://onnx.ai/onnx/operators/); onnxruntime's ``MatMulNBits``
contrib operator and ``matmul_nbits_quantizer``; Michel et al. 2019 (head mask).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
import re
import shutil
import tempfile
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .. import checks
from ..model import Encoder, TokenClassifier
from ..pretrained import BertEncoder  # needs only torch at import; the tokenizer came with the model

__all__ = [
    "ExportInfo",
    "export_onnx",
    "quantize_for_web",
    "split_for_web",
    "TokenRows",
    "onnx_session",
    "run_onnx",
    "compare_onnx",
    "compare_on_sentences",
    "CHECK_SENTENCES",
    "MIN_OPSET",
    "MAX_OPSET",
    "METADATA_PREFIX",
    "QUANT_BLOCK_SIZES",
]

MIN_OPSET, MAX_OPSET = 18, 23  # LayerNormalization needs 17; 18 is what torch.onnx's dynamo exporter emits natively
_EXTRA_HINT = 'pip install "mha_lib[export]"'
_FOLD_LIMIT = 1 << 24  # elements: fold [W^Q; W^K; W^V] (concatenated in the pass) into one weight initializer

log = logging.getLogger(__name__)

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


def _require(module: str):
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"mha_lib.export needs {module!r}: {_EXTRA_HINT}") from err


# ----------------------------------------------------------------------------- what is exported
@dataclass(frozen=True)
class ExportInfo:
    """What :func:`export_onnx` wrote.

    Attributes:
        path: the ``.onnx`` file.
        kind: ``"bert"`` (a BertEncoder), ``"token-classifier"`` or ``"encoder"``.
        inputs, outputs: the ONNX input and output names, in order.
        num_layers, num_heads: the ``head_mask`` shape (num_layers, H).
        max_length: the longest sequence the file accepts (positions), or None (no limit).
        opset: the ONNX opset of the default domain.
        bytes: the file's size in bytes.
    """

    path: str
    kind: str
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    num_layers: int
    num_heads: int
    max_length: Optional[int]
    opset: int
    bytes: int

    def to_dict(self) -> dict:
        """A JSON-able dict (tuples become lists)."""
        d = asdict(self)
        d["inputs"], d["outputs"] = list(self.inputs), list(self.outputs)
        return d


class _Exported(nn.Module):
    """A model with the export's fixed signature and outputs (see the module docstring)."""

    def __init__(self, model: nn.Module, kind: str):
        super().__init__()
        self.model = model
        self.kind = kind

    def _run(self, inputs, key_padding_mask, head_mask, **kwargs):
        out = self.model(inputs, key_padding_mask=key_padding_mask, head_mask=head_mask, output_attentions=True,
                         **kwargs)
        attentions = torch.stack(out.attentions)  # (num_layers, B, H, L, L)
        if self.kind == "token-classifier":
            return out.logits, attentions  # (B, L, C) or (B, C)
        h = out.last_hidden_state  # (B, L, d_model)
        if self.kind == "bert":
            return h, self.model.pool(h, key_padding_mask), attentions  # pooled (B, d_model)
        return h, attentions


class _TokensWithTypes(_Exported):
    def forward(self, input_ids, token_type_ids, key_padding_mask, head_mask):
        return self._run(input_ids, key_padding_mask, head_mask, token_type_ids=token_type_ids)


class _Tokens(_Exported):
    def forward(self, input_ids, key_padding_mask, head_mask):
        return self._run(input_ids, key_padding_mask, head_mask)


class _Patches(_Exported):
    def forward(self, patches, head_mask):
        return self._run(patches, None, head_mask)


def _describe(model) -> dict:
    """Kind, wrapper, names and sizes of an exportable model; ValueError for anything else."""

    if isinstance(model, BertEncoder):
        kind, encoder = "bert", model
    elif isinstance(model, TokenClassifier):
        kind, encoder = "token-classifier", model.encoder
    elif isinstance(model, Encoder):
        kind, encoder = "encoder", model
    else:
        raise ValueError(f"model must be an mha_lib TokenClassifier, Encoder or BertEncoder, got "
                         f"{type(model).__name__} (the encoder-decoder is not exported)")
    cfg = encoder.config
    if cfg.cross_attention:
        raise ValueError("model has cross-attention (config.cross_attention=True): a decoder reads a memory "
                         "sequence, which export_onnx does not take")
    heads = encoder.heads_per_layer
    if len(set(heads)) != 1 or heads[0] == 0:
        raise ValueError(f"model has {heads} kept heads per layer: export_onnx needs the same number (>= 1) in "
                         f"every layer, so that attentions stack to (num_layers, B, H, L, L)")
    bad = sorted({str(p.dtype) for p in model.parameters() if p.dtype != torch.float32})
    if bad:
        raise ValueError(f"model has {bad} parameters; export_onnx writes float32 files: call model.float() first")
    if cfg.patch_dim:
        wrapper, inputs = _Patches, ("patches", "head_mask")
    elif cfg.type_vocab_size:
        wrapper, inputs = _TokensWithTypes, ("input_ids", "token_type_ids", "key_padding_mask", "head_mask")
    else:
        wrapper, inputs = _Tokens, ("input_ids", "key_padding_mask", "head_mask")
    outputs = {"token-classifier": ("logits", "attentions"), "encoder": ("last_hidden_state", "attentions"),
               "bert": ("last_hidden_state", "sentence_embedding", "attentions")}[kind]
    max_positions = None if cfg.positional == "none" else cfg.max_len  # positions the file can embed
    if kind == "bert":
        max_positions = min(cfg.max_len, model.tokenizer.max_length)  # the tokenizer cuts there (256 for MiniLM)
    return dict(kind=kind, wrapper=wrapper, inputs=inputs, outputs=outputs, config=cfg, num_layers=len(heads),
                num_heads=heads[0], max_length=max_positions)


def _example_inputs(desc: dict, device) -> dict:
    """Inputs to trace with: B = 2 rows, the second one partly padded; L = 7 positions (fewer when the
    model has fewer). Sizes 0 and 1 are avoided: the exporter would take them for constants."""
    cfg = desc["config"]
    room = desc["max_length"] - int(cfg.cls_token) if desc["max_length"] is not None else 7
    L = max(1, min(7, room))
    B = 3 if L == 2 else 2  # two dynamic sizes with equal example values would be taken for one
    out = {}
    if cfg.patch_dim:
        out["patches"] = torch.linspace(-1, 1, B * L * cfg.patch_dim, device=device).view(B, L, cfg.patch_dim)
    else:
        out["input_ids"] = torch.arange(B * L, device=device).view(B, L) % cfg.vocab_size
        if cfg.type_vocab_size:
            out["token_type_ids"] = torch.zeros(B, L, dtype=torch.long, device=device)
        mask = torch.zeros(B, L, dtype=torch.bool, device=device)
        mask[1, L - 1] = L > 1
        out["key_padding_mask"] = mask
    out["head_mask"] = torch.ones(desc["num_layers"], desc["num_heads"], device=device)
    return out


def _dynamic_shapes(desc: dict, example: dict) -> dict:
    cfg = desc["config"]
    batch = torch.export.Dim("batch", min=1)
    length = example["patches" if cfg.patch_dim else "input_ids"].shape[1]
    room = None if desc["max_length"] is None else desc["max_length"] - int(cfg.cls_token)
    axes = {0: batch}
    if length >= 2:  # a model with room for one position only keeps L fixed
        axes[1] = torch.export.Dim("sequence", min=1, max=room) if room else torch.export.Dim("sequence", min=1)
    return {name: (None if name == "head_mask" else dict(axes)) for name in example}


# ----------------------------------------------------------------------------- export
def export_onnx(model: nn.Module, path: Union[str, os.PathLike], *, opset: int = 18) -> ExportInfo:
    """Export an mha_lib encoder to one ONNX file (weights inside), dynamic batch and length.

    The model is traced with ``torch.onnx.export(..., dynamo=True)`` in eval mode (its training
    flag is restored after), on its own device; the graph's constant parts (e.g. the stacked
    [W^Q; W^K; W^V] of self-attention) are folded into initializers, so every weight matrix is one
    ``MatMul`` input that :func:`quantize_for_web` can quantise. Inputs and outputs are named as in
    the module docstring; ``attentions`` are the weights before ``head_mask`` (rows sum to 1, or
    are 0 for a query with no allowed key, e.g. a fully padded row).

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier` (token or patch front-end, any pooling,
            causal or not, GQA), a :class:`~mha_lib.pretrained.BertEncoder` or an
            :class:`~mha_lib.model.Encoder`; float32; the same number (>= 1) of kept heads in every
            layer; no cross-attention.
        path: the ``.onnx`` file to write (its folder must exist); overwritten. Its name must end
            in ``.onnx`` (any case): other extensions (``.json``, ``.textproto``) would make onnx
            save a text format that onnxruntime does not load, so they are refused.
        opset: ONNX opset of the default domain, ``MIN_OPSET`` (18) to ``MAX_OPSET`` (23).

    Returns:
        :class:`ExportInfo` (names, sizes, bytes).

    Raises:
        ValueError: a model of another class, with cross-attention, ragged or zero heads per layer
            or non-float32 parameters; ``path`` not a str/PathLike, a folder (or ending in a
            separator), in a folder that does not exist or not ending in ``.onnx``; ``opset`` not an integer in [18, 23].
            The message names the value.
        ImportError: onnx or onnxscript missing (names ``pip install "mha_lib[export]"``).
    """
    opset = checks.as_int(opset, "opset")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"opset={opset} is outside [{MIN_OPSET}, {MAX_OPSET}]")
    path = _checked_onnx_output(path, "path")
    desc = _describe(model)
    _require("onnx")
    optimizer = _require("onnxscript.optimizer")
    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    example = _example_inputs(desc, device)
    wrapper = desc["wrapper"](model, desc["kind"])
    was_training = model.training
    model.eval()
    try:
        with _quiet(), torch.no_grad():
            program = torch.onnx.export(
                wrapper, tuple(example.values()), dynamo=True, opset_version=opset, verbose=False,
                input_names=list(desc["inputs"]), output_names=list(desc["outputs"]),
                dynamic_shapes=_dynamic_shapes(desc, example), optimize=True,
            )
            # torch.onnx folds constants below 2**18 elements; a stacked QKV weight is larger.
            optimizer.optimize(program.model, input_size_limit=_FOLD_LIMIT, output_size_limit=_FOLD_LIMIT)
            _strip_metadata(program.model)
            program.model.metadata_props.update(_metadata(desc))
            program.save(path, external_data=False)
    finally:
        model.train(was_training)
    return ExportInfo(path=path, kind=desc["kind"], inputs=desc["inputs"], outputs=desc["outputs"],
                      num_layers=desc["num_layers"], num_heads=desc["num_heads"], max_length=desc["max_length"],
                      opset=opset, bytes=os.path.getsize(path))


#: Keys of the model-level ``metadata_props`` that :func:`export_onnx` writes (values are str) and
#: :func:`run_onnx` reads to check its inputs: ``kind``, ``num_layers``, ``num_heads``,
#: ``vocab_size``, ``type_vocab_size`` (0: no token types), ``max_length`` (positions; absent when
#: unlimited), ``cls_token`` (1 when the model prepends [CLS]: inputs hold max_length - 1
#: positions); :func:`quantize_for_web` adds ``quantized``.
METADATA_PREFIX = "mha_lib."


def _metadata(desc: dict) -> Dict[str, str]:
    cfg = desc["config"]
    out = {"kind": desc["kind"], "num_layers": desc["num_layers"], "num_heads": desc["num_heads"],
           "vocab_size": cfg.vocab_size, "type_vocab_size": cfg.type_vocab_size or 0,
           "cls_token": int(bool(cfg.cls_token))}
    if desc["max_length"] is not None:
        out["max_length"] = desc["max_length"]
    return {METADATA_PREFIX + k: str(v) for k, v in out.items()}


def _read_metadata(session) -> Dict[str, str]:
    """The ``mha_lib.*`` metadata of a session's file, without the prefix ({} for other files)."""
    props = session.get_modelmeta().custom_metadata_map or {}
    return {k[len(METADATA_PREFIX):]: v for k, v in props.items() if k.startswith(METADATA_PREFIX)}


def _strip_metadata(model) -> None:
    """Drop the exporter's per-node notes (stack traces with this checkout's paths, FX node text):
    about 1 byte in 100 of MiniLM's file, and they would make the bytes depend on where mha_lib lies."""
    for node in model.graph.all_nodes() if hasattr(model.graph, "all_nodes") else model.graph:
        node.metadata_props.clear()
        node.doc_string = None
    model.graph.metadata_props.clear()
    model.metadata_props.clear()


@contextlib.contextmanager
def _quiet():
    """Silence the exporter's chatter: progress lines, torchvision notices, axis-renaming warnings."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript", "onnx_ir")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _checked_path(path, name: str, *, must_exist: bool) -> str:
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ValueError(f"{name} must be a file path (str or os.PathLike), got {path!r}")
    path = os.fspath(path)
    if isinstance(path, bytes):
        raise ValueError(f"{name} must be a file path (str or os.PathLike of str), got {path!r}")
    if must_exist and not os.path.isfile(path):
        raise ValueError(f"{name}={path!r}: no such file")
    if os.path.isdir(path) or path.endswith(tuple(sep for sep in (os.sep, os.altsep) if sep)):
        raise ValueError(f"{name}={path!r} is a folder: name the .onnx file inside it")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"{name}={path!r}: the folder {folder!r} does not exist")
    return path


def _checked_onnx_output(path, name: str) -> str:
    """``path`` checked as a file to write (see ``_checked_path``) whose name ends in ``.onnx``.

    onnx picks the format it saves in from the extension (``.json``, ``.textproto``, ``.onnxtxt``
    are text formats that onnxruntime cannot load), so every file this module writes must be named
    ``.onnx`` (any case), which is always the binary protobuf."""
    path = _checked_path(path, name, must_exist=False)
    if os.path.splitext(path)[1].lower() != ".onnx":
        raise ValueError(f"{name}={path!r} does not end in .onnx: the files written here are binary ONNX "
                         "(onnxruntime loads no other format); name it .onnx")
    return path


# ----------------------------------------------------------------------------- quantisation
#: The ``block_size`` values :func:`quantize_for_web` takes: onnxruntime's blockwise quantiser
#: (``MlasQuantizeBlockwise``) supports only these; 512 and up stop it with an assertion
#: (measured with onnxruntime 1.32 on the toy and MiniLM files, whose matrices are 64 to 1536 rows).
QUANT_BLOCK_SIZES: Tuple[int, ...] = (16, 32, 64, 128, 256)


def quantize_for_web(src: Union[str, os.PathLike], dst: Union[str, os.PathLike], *, block_size: int = 32,
                     min_table_elements: int = 1 << 16) -> dict:
    """Weight-only 8-bit copy of an exported file, in one file, for onnxruntime-web's WebAssembly backend.

    The smallest single file, for when its size matters more than exact weights; the book serves
    :func:`split_for_web`'s float16 copy instead, whose attention weights stay within 0.002.

    * Every ``MatMul`` whose second input is a weight initializer becomes onnxruntime's
      ``com.microsoft.MatMulNBits`` with ``bits=8``: symmetric int8 blocks of ``block_size``
      weights along the input dimension, one float32 scale per block
      (``onnxruntime.quantization.matmul_nbits_quantizer``). Activations stay float32; the
      attention products (Q K^T, weights V) are not weights and stay float32 ``MatMul``.
    * Every ``Gather`` (axis 0) from a float32 2-D table of at least ``min_table_elements`` values
      (the token embedding) reads an int8 table instead: each row is rotated by a block-diagonal
      Hadamard matrix R, then stored as int8 with one scale per row (see ``_int8_tables``), and the
      graph computes ``(Cast(Gather(q, ids)) * Gather(scale, ids)) R^T``. Smaller tables
      (positions, token types) stay float32.

    What it costs on all-MiniLM-L6-v2 (90.3 MB -> 24.8 MB), measured with :func:`compare_on_sentences`
    on :data:`CHECK_SENTENCES` at real positions: attention weights move by at most 0.026 (99.9% of them
    by less than 0.007), sentence embeddings keep cosine >= 0.9994. The weight matrices cause most of
    it: a sharp head turns a small change of its scores into a large one of its weights when two keys
    nearly tie, and one 8-bit matrix alone already moves some weight by up to 0.016. Within 0.01 would
    take about 10 bits a value for the table and for the matrices, at least 27.9 MB in one file
    (measured with a simulation of these roundings on 36 + 64 + 128 texts). Plain dynamic int8
    quantisation (activations too) moved attention weights by up to 0.34.

    Args:
        src: an ``.onnx`` file written by :func:`export_onnx`.
        dst: where to write the quantised file (may equal ``src``), replaced only once the new one
            is complete and checked; its name must end in ``.onnx`` (any case; other extensions
            would make onnx save a text format, so they are refused).
        block_size: weights per quantisation block: one of :data:`QUANT_BLOCK_SIZES` (16, 32, 64,
            128, 256), the sizes onnxruntime's quantiser (MLAS) takes; it asserts on others.
        min_table_elements: smallest embedding table (rows x columns) stored as int8, >= 1.

    Returns:
        a dict with ``bytes`` (the file size), ``matmuls`` (weight MatMuls quantised),
        ``tables`` (int8 tables) and ``block_size``.

    Raises:
        ValueError: ``src`` missing or not an ONNX file, ``dst`` a folder, in a missing one or not
            ending in ``.onnx``, a
            bad ``block_size`` or ``min_table_elements``; a file with no weight MatMul to
            quantise, or one already quantised (``MatMulNBits`` nodes or the ``mha_lib.quantized``
            mark: quantising again would only lose precision); a weight initializer holding NaN
            or infinite values (named, with their count); a dst that cannot be written (dst is
            left as it was).
        ImportError: onnx or onnxruntime missing (names ``pip install "mha_lib[export]"``).
    """
    src = _checked_path(src, "src", must_exist=True)
    dst = _checked_onnx_output(dst, "dst")
    block_size = checks.positive_int(block_size, "block_size")
    if block_size not in QUANT_BLOCK_SIZES:
        raise ValueError(f"block_size={block_size} is not one onnxruntime's 8-bit quantiser takes: "
                         f"{', '.join(map(str, QUANT_BLOCK_SIZES))}")
    min_table_elements = checks.positive_int(min_table_elements, "min_table_elements")
    onnx = _require("onnx")
    _require("onnxruntime")
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        nbits = _require("onnxruntime.quantization.matmul_nbits_quantizer")
    finally:  # its import calls logging.basicConfig(level=INFO), which would print every library's INFO lines
        root.handlers[:], root.level = handlers, level

    try:
        model = onnx.load(src)
    except Exception as err:  # protobuf's DecodeError, or a truncated file
        raise ValueError(f"src={src!r} is not an ONNX model ({type(err).__name__}: {err})") from None
    meta = {p.key: p.value for p in model.metadata_props}
    if METADATA_PREFIX + "quantized" in meta or any(n.op_type == "MatMulNBits" for n in model.graph.node):
        raise ValueError(f"src={src!r} is already quantised (MatMulNBits): quantise the float32 file from "
                         "export_onnx instead")
    if METADATA_PREFIX + "web" in meta:
        raise ValueError(f"src={src!r} is already {meta[METADATA_PREFIX + 'web']!r}: quantise the float32 file from "
                         "export_onnx instead")
    _refuse_non_finite(model, src)
    weights = {t.name for t in model.graph.initializer}
    matmuls = sum(n.op_type == "MatMul" and n.input[1] in weights for n in model.graph.node)
    if not matmuls:
        raise ValueError(f"src={src!r} has no MatMul with a weight initializer to quantise")
    quantizer = nbits.MatMulNBitsQuantizer(model, bits=8, block_size=block_size, is_symmetric=True,
                                           op_types_to_quantize=("MatMul",))
    with _quiet(), _logging_level("onnxruntime", logging.WARNING):
        quantizer.process()
    model = quantizer.model.model
    tables = _int8_tables(model, min_table_elements)
    meta[METADATA_PREFIX + "quantized"] = f"MatMulNBits bits=8 block_size={block_size}; int8 tables: {tables}"
    del model.metadata_props[:]
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    with _replacing(dst) as staged:  # dst (maybe src) is replaced only by a complete, checked file
        onnx.save(model, staged)
        onnx.checker.check_model(staged)
    return {"bytes": os.path.getsize(dst), "matmuls": matmuls, "tables": tables, "block_size": block_size}


def _refuse_non_finite(model, src: str) -> None:
    """ValueError naming the first float initializer of ``model`` that holds NaN or infinite values, and how many.

    A weight with NaN would give the page NaN rows (and quantisation would hide it in its scales).
    Single-value initializers are the graph's constants rather than weights (the -inf that masks
    attention scores is one): only NaN is refused there."""
    from onnx import TensorProto, numpy_helper

    floats = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16)
    for t in model.graph.initializer:
        if t.data_type not in floats:
            continue
        a = numpy_helper.to_array(t)
        a = a if a.dtype.kind == "f" else a.astype(np.float32)  # bfloat16 (ml_dtypes): exact in float32
        bad = a.size - int(np.count_nonzero(np.isfinite(a) if a.size > 1 else ~np.isnan(a)))
        if bad:
            raise ValueError(f"src={src!r}: initializer {t.name!r} (shape {tuple(t.dims)}) holds {bad} NaN or infinite "
                             f"values of {a.size}: export a model whose weights are finite")


@contextlib.contextmanager
def _logging_level(name: str, level: int):
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def _hadamard(n: int) -> np.ndarray:
    """The n x n Sylvester-Hadamard matrix over sqrt(n) (n a power of two): orthogonal and symmetric."""
    H = np.ones((1, 1))
    while H.shape[0] < n:
        H = np.block([[H, H], [H, -H]])
    return (H / np.sqrt(n)).astype(np.float32)


def _rotation_block(d: int) -> int:
    """The largest power of two <= 128 that divides d, or 0 when it is below 16 (no rotation)."""
    block = 128
    while block >= 16 and d % block:
        block //= 2
    return block if block >= 16 else 0


def _int8_tables(model, min_elements: int) -> int:
    """Replace each large float32 Gather table by an int8 table with one scale per row (in place).

    Each row is first rotated by a block-diagonal Hadamard matrix R (blocks of 128 columns for
    d = 384), as in incoherence processing (Chee et al. 2023, QuIP; Ashkboos et al. 2024, QuaRot):
    a few outlier columns no longer set every row's scale. Stored: q = round(E R / s) with
    s_v = max_j |(E R)[v, j]| / 127; the graph computes ``(Cast(Gather(q)) * Gather(s)) R^T``, with
    R^T = R applied block by block (a (128, 128) MatMul). For MiniLM this cuts the largest attention
    change the table causes from 0.049 (plain per-row int8) to 0.013.
    """
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    done = {}  # table name -> (int8 name, scale name, rotation name or None, d, block)
    new_nodes, count = [], 0
    for node in graph.node:
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
        table = inits.get(node.input[0]) if node.op_type == "Gather" and node.domain in ("", "ai.onnx") else None
        if table is None or axis != 0 or table.data_type != TensorProto.FLOAT or len(table.dims) != 2 \
                or int(np.prod(table.dims)) < min_elements:
            new_nodes.append(node)
            continue
        if table.name not in done:
            E = numpy_helper.to_array(table).astype(np.float32)  # (V, d)
            V, d = E.shape
            block = _rotation_block(d)
            if block:
                E = (E.reshape(V, d // block, block) @ _hadamard(block)).reshape(V, d)  # E R, block by block
            scale = np.abs(E).max(axis=1, keepdims=True) / 127.0  # (V, 1), one per row
            scale = np.where(scale > 0, scale, 1.0).astype(np.float32)  # an all-zero row: any scale
            q = np.clip(np.rint(E / scale), -127, 127).astype(np.int8)  # (V, d)
            names = (f"{table.name}_int8", f"{table.name}_row_scale", f"{table.name}_hadamard{block}")
            graph.initializer.extend([numpy_helper.from_array(q, names[0]), numpy_helper.from_array(scale, names[1])])
            if block:
                graph.initializer.append(numpy_helper.from_array(_hadamard(block), names[2]))
                graph.initializer.append(numpy_helper.from_array(np.array([d // block, block], np.int64),
                                                                 f"{table.name}_blocks"))
                graph.initializer.append(numpy_helper.from_array(np.array([d], np.int64), f"{table.name}_width"))
            done[table.name] = (*names, block)
            count += 1
        q_name, s_name, r_name, block = done[table.name]
        ids, out, tag = node.input[1], node.output[0], node.output[0]
        rows = out if not block else f"{tag}_rotated"
        new_nodes += [
            helper.make_node("Gather", [q_name, ids], [f"{tag}_q"], axis=0),  # (..., d) int8
            helper.make_node("Cast", [f"{tag}_q"], [f"{tag}_f"], to=TensorProto.FLOAT),
            helper.make_node("Gather", [s_name, ids], [f"{tag}_s"], axis=0),  # (..., 1)
            helper.make_node("Mul", [f"{tag}_f", f"{tag}_s"], [rows]),  # (..., d) float32: rows of E R
        ]
        if block:  # undo the rotation: (..., d) -> (..., d/block, block) @ R -> (..., d)
            new_nodes += [
                helper.make_node("Shape", [ids], [f"{tag}_ids_shape"]),
                helper.make_node("Concat", [f"{tag}_ids_shape", f"{table.name}_blocks"], [f"{tag}_split"], axis=0),
                helper.make_node("Concat", [f"{tag}_ids_shape", f"{table.name}_width"], [f"{tag}_merged"], axis=0),
                helper.make_node("Reshape", [rows, f"{tag}_split"], [f"{tag}_blocked"]),
                helper.make_node("MatMul", [f"{tag}_blocked", r_name], [f"{tag}_unrotated"]),
                helper.make_node("Reshape", [f"{tag}_unrotated", f"{tag}_merged"], [out]),
            ]
    if count:
        del graph.node[:]
        graph.node.extend(new_nodes)
        used = {i for n in graph.node for i in n.input}
        keep = [t for t in graph.initializer if t.name in used]
        del graph.initializer[:]
        graph.initializer.extend(keep)
    return count


# ----------------------------------------------------------------------------- float16 + token rows
#: The file :func:`split_for_web` writes next to the row files, describing them (JSON).
ROWS_INDEX = "index.json"
_FLOAT16_MIN_ELEMENTS = 1024  # float32 initializers at least this big become float16 (matrices, position table)


_ROW_FILE = re.compile(r"\d{4,}\.bin")  # the names split_for_web gives row files: 0000.bin, 0001.bin, ...


def _earlier_row_files(rows_dir: str, src: str, dst: str) -> List[str]:
    """The numbered files in ``rows_dir`` that a new split replaces ([] for a new or empty folder).

    A folder is taken for an earlier split's only when its ``index.json`` is one split_for_web
    writes (every key, the float16 format, sizes that agree) and the numbered files there are
    exactly the ones it lists, each of its exact size, holding the table of the index's sha256;
    anything else is a ValueError, so that no file of the user's is deleted or overwritten.
    """
    if os.path.exists(rows_dir) and not os.path.isdir(rows_dir):
        raise ValueError(f"rows_dir={rows_dir!r} is a file: give a folder for the row files")
    if os.path.abspath(rows_dir) == os.path.abspath(dst):
        raise ValueError(f"rows_dir={rows_dir!r} is dst: give the row files a folder of their own")
    parent = os.path.abspath(rows_dir)
    while not os.path.exists(parent):  # the folders to create lie under a folder, not under a file
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError(f"rows_dir={rows_dir!r} cannot be created: {parent!r} is a file")
    for name, path in (("src", src), ("dst", dst)):
        if os.path.dirname(os.path.abspath(path)) == os.path.abspath(rows_dir) and (
                os.path.basename(path) == ROWS_INDEX or _ROW_FILE.fullmatch(os.path.basename(path))):
            raise ValueError(f"{name}={path!r} is named as a row file in rows_dir={rows_dir!r}: give it another name")
    names = os.listdir(rows_dir) if os.path.isdir(rows_dir) else []
    if not names:
        return []
    if ROWS_INDEX not in names:
        raise ValueError(f"rows_dir={rows_dir!r} holds other files and no {ROWS_INDEX}: give a new or empty folder")
    try:
        index = TokenRows(rows_dir).index  # every key, of the right kind; float16; files = ceil(rows / rows_per_file)
    except ValueError as err:
        raise ValueError(f"rows_dir={rows_dir!r} holds an {ROWS_INDEX} that split_for_web did not write ({err}): "
                         "its files are left alone; give a new or empty folder") from None
    if index["file_bytes"] != min(index["rows_per_file"], index["rows"]) * index["dim"] * 2 or \
            not re.fullmatch(r"[0-9a-f]{64}", index["sha256"]):
        raise ValueError(f"rows_dir={rows_dir!r} holds an {ROWS_INDEX} that split_for_web did not write (its "
                         "file_bytes or sha256 do not fit): its files are left alone; give a new or empty folder")
    n, d, per, files = index["rows"], index["dim"], index["rows_per_file"], index["files"]
    numbered = sorted(name for name in names if _ROW_FILE.fullmatch(name))
    unlisted = [name for name in numbered if int(name[:-4]) >= files or name != f"{int(name[:-4]):04d}.bin"]
    if unlisted:
        raise ValueError(f"rows_dir={rows_dir!r} holds numbered files its {ROWS_INDEX} does not list "
                         f"({', '.join(unlisted[:3])}{', ...' if len(unlisted) > 3 else ''}): they are left alone; "
                         "give a new or empty folder")
    # A split writes every listed file, each of its exact size (file_bytes, the last one its rows), and
    # together they hold the table whose sha256 the index gives. A folder missing one, or holding one of
    # another size or other bytes, is no earlier split (its index may be a look-alike over the user's own
    # files): nothing in it is deleted.
    wrong = [] if len(numbered) == files else [f"{files - len(numbered)} of them missing"]  # none unlisted: counts suffice
    for name in numbered if not wrong else []:
        path, k = os.path.join(rows_dir, name), int(name[:-4])
        size = min(per, n - k * per) * d * 2
        if not os.path.isfile(path):
            wrong.append(f"{name} is not a file")
        elif os.path.getsize(path) != size:
            wrong.append(f"{name} has {os.path.getsize(path)} bytes, not {size}")
    if not wrong:
        try:
            TokenRows(rows_dir).table  # reads them: finite float16 values, the index's sha256
        except ValueError as err:
            wrong.append(str(err))
    if wrong:
        raise ValueError(f"rows_dir={rows_dir!r} holds no complete split of the {files} row files its {ROWS_INDEX} "
                         f"lists ({'; '.join(wrong[:3])}{'; ...' if len(wrong) > 3 else ''}): its files are left "
                         "alone; give a new or empty folder")
    return numbered


def _temporary_name(path: str) -> str:
    """A new hidden name in ``path``'s folder, with its extension (onnx.save reads the format there)."""
    return os.path.join(os.path.dirname(os.path.abspath(path)),
                        f".partial-{os.getpid()}-{os.urandom(4).hex()}.{os.path.basename(path)}")


@contextlib.contextmanager
def _replacing(path: str):
    """Yields a temporary path beside ``path`` to write; moved onto ``path`` when the block succeeds,
    removed when it fails (an OSError becomes a ValueError): ``path`` is never left half-written."""
    staged = _temporary_name(path)
    try:
        yield staged
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.remove(staged)
        if isinstance(err, OSError):
            raise ValueError(f"could not write {path!r} ({err}): it is as it was") from None
        raise
    os.replace(staged, path)


@contextlib.contextmanager
def _staged(rows_dir: str, dst: str, replace: Sequence[str]):
    """Stage a split's files: yields (a temporary folder inside ``rows_dir`` for the row files and
    the index, a temporary path beside ``dst``). When the block ends without an error, the files in
    ``replace`` are deleted and the staged ones moved into place (the index last, then dst); on any
    error everything staged, and any folder made for ``rows_dir``, is removed: nothing else changed.
    """
    made, path = [], os.path.abspath(rows_dir)
    while not os.path.exists(path):  # the folders about to be created, innermost first
        made.append(path)
        path = os.path.dirname(path)
    staging, dst_staged = None, _temporary_name(dst)
    try:
        os.makedirs(rows_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".partial-", dir=rows_dir)
        yield staging, dst_staged
    except BaseException as err:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.remove(dst_staged)
        for folder in made:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        if isinstance(err, OSError):
            raise ValueError(f"split_for_web could not write its files ({err}): dst={dst!r} and rows_dir={rows_dir!r} "
                             "are as they were") from None
        raise
    for name in replace:
        os.remove(os.path.join(rows_dir, name))
    for name in sorted(os.listdir(staging)):  # 0000.bin, ..., index.json last
        os.replace(os.path.join(staging, name), os.path.join(rows_dir, name))
    os.rmdir(staging)
    os.replace(dst_staged, dst)


def split_for_web(src: Union[str, os.PathLike], dst: Union[str, os.PathLike], rows_dir: Union[str, os.PathLike], *,
                  rows_per_file: int = 32, min_table_elements: int = 1 << 16) -> dict:
    """A float16 copy of an exported file whose token-embedding table lives in small row files.

    What the book serves for MiniLM: the page downloads the model (every weight matrix and the
    position table as float16, about a quarter of the float32 file) and then, for each text, only
    the files holding the rows of the text's tokens. float16 keeps every attention weight within
    about 0.002 of float32 mha_lib; no single file of 8-bit weights under 25 MB gets within 0.01
    (see :func:`quantize_for_web`), because the token table alone (30522 x 384) needs about 10
    bits a value and the matrices about 10 more.

    * The ``Gather`` (axis 0) that reads token rows from a float32 2-D table of at least
      ``min_table_elements`` values from the ``input_ids`` input is rewired: the file takes
      ``token_rows`` float16 (U, d) -- the rows of the U distinct ids of the batch -- and
      ``token_index`` int64 (B, L), each position's row in ``token_rows``; ``input_ids`` is no
      longer an input. :class:`TokenRows` (Python) and the page make both from ids.
    * Every other float32 initializer with at least two dimensions and 1024 values (the weight
      matrices, the position table; not the 1-D biases and LayerNorm vectors) is stored as float16 and cast back to float32 in the graph (``Cast``;
      onnxruntime folds it when the session starts). Computation stays float32.
    * The table is written as float16, ``rows_per_file`` rows per file (``0000.bin``, ``0001.bin``,
      ...; raw little-endian, the last file shorter), with ``index.json``:
      ``{"rows", "dim", "rows_per_file", "files", "dtype": "float16", "file_bytes", "sha256"}``
      (``sha256`` of the whole float16 table, also stored in the file's metadata, so that a
      session refuses another model's rows).

    Args:
        src: a file from :func:`export_onnx` with token ids (MiniLM).
        dst: the ``.onnx`` file to write (not ``src``); replaced once every file is written. Its
            name must end in ``.onnx`` (any case; other extensions would make onnx save a text
            format that :func:`onnx_session` cannot load, so they are refused).
        rows_dir: folder for the row files (created with its parents when missing): a new or
            empty folder, or one an earlier split wrote, whose numbered ``.bin`` files and
            ``index.json`` are replaced (its other files are kept). A folder counts as an earlier
            split's only when its ``index.json`` is one this function writes and the numbered
            files there are exactly those it lists, every one present with its exact size
            (``file_bytes``; the last one its ``rows % rows_per_file`` rows) and together the
            table of its ``sha256``. The earlier split may be of another model: its rows are then
            replaced by this one's, and the file split earlier into that folder no longer loads
            (:func:`onnx_session` refuses another model's rows); give each model its own folder.
        rows_per_file: rows per file, >= 1 (32 rows of MiniLM are 24,576 bytes).
        min_table_elements: the smallest table taken for the token table, >= 1.

    Returns:
        A dict: ``bytes`` (dst's size), ``rows_bytes`` (all row files), ``rows_files`` (their
        count), ``float16`` (initializers stored as float16), ``rows_per_file``, ``dim``, ``rows``.

    Raises:
        ValueError: ``src`` missing or not an ONNX file, ``dst`` not ending in ``.onnx`` or equal
            to ``src`` or to ``rows_dir``, ``rows_dir`` an existing file, under a file, or a non-empty folder without
            ``index.json``, with one split_for_web did not write, with numbered files that
            index does not list, or missing one it lists or holding one of another size or other
            bytes; a file that is already split or quantised, one with no such
            token table, a weight initializer holding NaN or infinite values (named, with their
            count) or beyond float16's range (65504), bad ``rows_per_file`` or
            ``min_table_elements``; a file that cannot be written (an unwritable folder, a full
            disk). Nothing is changed then: the files are written beside their places (a hidden
            folder in ``rows_dir``, a hidden file beside ``dst``) and moved there at the end.
        ImportError: onnx missing (names ``pip install "mha_lib[export]"``).
    """
    src = _checked_path(src, "src", must_exist=True)
    dst = _checked_onnx_output(dst, "dst")
    if os.path.abspath(src) == os.path.abspath(dst):
        raise ValueError(f"dst={dst!r} is src: write the copy to another file")
    if not isinstance(rows_dir, (str, os.PathLike)) or not os.fspath(rows_dir):
        raise ValueError(f"rows_dir must be a folder path (str or os.PathLike), got {rows_dir!r}")
    rows_dir = os.fspath(rows_dir)
    old_rows = _earlier_row_files(rows_dir, src, dst)  # ValueError unless every file to replace is ours
    rows_per_file = checks.positive_int(rows_per_file, "rows_per_file")
    min_table_elements = checks.positive_int(min_table_elements, "min_table_elements")
    onnx = _require("onnx")
    from onnx import TensorProto, helper, numpy_helper

    try:
        model = onnx.load(src)
    except Exception as err:  # DecodeError and friends
        raise ValueError(f"src={src!r} is not an ONNX file ({err})") from None
    meta = {p.key: p.value for p in model.metadata_props}
    for key in ("quantized", "web"):
        if METADATA_PREFIX + key in meta:
            raise ValueError(f"src={src!r} is already {meta[METADATA_PREFIX + key]!r}: split the file export_onnx wrote")
    _refuse_non_finite(model, src)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    ids_input = next((i for i in graph.input if i.name == "input_ids"), None)
    gathers = [n for n in graph.node if n.op_type == "Gather" and len(n.input) == 2 and n.input[1] == "input_ids"
               and n.input[0] in inits and len(inits[n.input[0]].dims) == 2
               and inits[n.input[0]].data_type == TensorProto.FLOAT
               and int(np.prod(inits[n.input[0]].dims)) >= min_table_elements
               and all(a.i == 0 for a in n.attribute if a.name == "axis")]
    users = [n for n in graph.node if "input_ids" in n.input]
    if ids_input is None or len(gathers) != 1 or len(users) != 1:
        raise ValueError(f"src={src!r} has no single token table (a Gather of >= {min_table_elements} float32 values "
                         "from input_ids that nothing else reads): nothing to split")
    gather = gathers[0]
    table = numpy_helper.to_array(inits[gather.input[0]])  # (V, d) float32
    float16 = {name: numpy_helper.to_array(t) for name, t in inits.items() if name != gather.input[0]
               and t.data_type == TensorProto.FLOAT and len(t.dims) >= 2 and int(np.prod(t.dims)) >= _FLOAT16_MIN_ELEMENTS}
    for name, value in [(gather.input[0], table), *float16.items()]:
        if np.abs(value).max() > np.finfo(np.float16).max:
            raise ValueError(f"initializer {name!r} holds {np.abs(value).max():.4g}, beyond float16's range")

    # the graph: token_rows (U, d) float16 and token_index (B, L) replace the table and input_ids
    V, d = table.shape
    index_type = helper.make_tensor_value_info("token_index", TensorProto.INT64, None)
    index_type.type.tensor_type.shape.CopyFrom(ids_input.type.tensor_type.shape)
    rows_type = helper.make_tensor_value_info("token_rows", TensorProto.FLOAT16, ["rows", d])
    position = [i for i, x in enumerate(graph.input) if x.name == "input_ids"][0]
    graph.input.remove(ids_input)
    graph.input.insert(position, index_type)
    graph.input.append(rows_type)
    nodes = [helper.make_node("Cast", [f"{name}_float16"], [name], to=TensorProto.FLOAT) for name in float16]
    for node in graph.node:
        if node is gather:
            nodes += [helper.make_node("Cast", ["token_rows"], ["token_rows_float32"], to=TensorProto.FLOAT),
                      helper.make_node("Gather", ["token_rows_float32", "token_index"], list(node.output), axis=0)]
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    keep = [t for t in graph.initializer if t.name != gather.input[0] and t.name not in float16]
    keep += [numpy_helper.from_array(v.astype(np.float16), f"{name}_float16") for name, v in float16.items()]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    files = -(-V // rows_per_file)
    rows16 = table.astype("<f2")
    digest = hashlib.sha256(rows16.tobytes()).hexdigest()
    index = {"rows": int(V), "dim": int(d), "rows_per_file": rows_per_file, "files": files, "dtype": "float16",
             "file_bytes": min(rows_per_file, V) * d * 2, "sha256": digest}
    meta[METADATA_PREFIX + "web"] = f"float16 weights; token rows outside the file, {rows_per_file} per file"
    # where the rows lie, relative to the file's folder: onnx_session finds them there
    meta[METADATA_PREFIX + "token_rows"] = os.path.relpath(os.path.abspath(rows_dir),
                                                           os.path.dirname(os.path.abspath(dst))).replace(os.sep, "/")
    meta[METADATA_PREFIX + "token_rows_sha256"] = digest
    del model.metadata_props[:]
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model)

    # the files: written beside their places first, moved there only once all of them are written
    with _staged(rows_dir, dst, replace=old_rows) as (staging, dst_staged):
        onnx.save(model, dst_staged)
        for k in range(files):
            rows16[k * rows_per_file:(k + 1) * rows_per_file].tofile(os.path.join(staging, f"{k:04d}.bin"))
        with open(os.path.join(staging, ROWS_INDEX), "w", encoding="utf-8") as f:
            json.dump(index, f, indent=1)
    return {"bytes": os.path.getsize(dst), "rows_bytes": int(rows16.nbytes), "rows_files": files,
            "float16": len(float16), "rows_per_file": rows_per_file, "dim": int(d), "rows": int(V)}


class TokenRows:
    """The token-embedding rows that :func:`split_for_web` wrote, read back for a batch of ids.

    Args:
        folder: the ``rows_dir`` given to :func:`split_for_web` (holds ``index.json`` and the
            ``.bin`` files).
        expected: what the file that reads these rows says of them (``onnx_session`` passes it):
            ``rows`` (its vocabulary size), ``dim`` (the width of its ``token_rows`` input) and
            ``sha256`` (of the table it was split from); each given one must match.

    Attributes:
        table: (rows, dim) float16 numpy array, every row (read on first use, file by file, and
            checked: each file's size, finite values, the whole table's sha256).

    Raises:
        ValueError: a folder without a readable ``index.json`` (or one missing a key, or with
            values of the wrong kind), one that does not match ``expected`` (another model's rows),
            and, when the rows are read, a row file missing or of the wrong size, a value that is
            not finite, or a table whose sha256 differs from the index's.
    """

    _KEYS = {"rows": int, "dim": int, "rows_per_file": int, "files": int, "dtype": str, "file_bytes": int, "sha256": str}

    def __init__(self, folder: Union[str, os.PathLike], expected: Optional[Mapping[str, Any]] = None):
        if not isinstance(folder, (str, os.PathLike)) or not os.path.isfile(os.path.join(folder, ROWS_INDEX)):
            raise ValueError(f"folder={folder!r} holds no {ROWS_INDEX}: give the rows_dir split_for_web wrote")
        self.folder = os.fspath(folder)
        path = os.path.join(self.folder, ROWS_INDEX)
        try:
            with open(path, encoding="utf-8") as f:
                index = json.load(f)
        except (OSError, ValueError) as err:
            raise ValueError(f"{path!r} is not readable JSON ({err})") from None
        for key, kind in self._KEYS.items():
            if not isinstance(index, dict) or not isinstance(index.get(key), kind) or isinstance(index.get(key), bool):
                raise ValueError(f"{path!r}: {key!r} must be {'an integer' if kind is int else 'a string'}, got "
                                 f"{index.get(key) if isinstance(index, dict) else index!r:.60}")
        n, per = index["rows"], index["rows_per_file"]
        if index["dtype"] != "float16" or min(n, per, index["dim"]) < 1 or index["files"] != -(-n // per):
            raise ValueError(f"{path!r} describes no float16 table of rows >= 1 in ceil(rows / rows_per_file) files: "
                             f"{ {k: index[k] for k in ('dtype', 'rows', 'dim', 'rows_per_file', 'files')} }")
        for key, value in (expected or {}).items():
            if value is not None and index.get(key) != value:
                raise ValueError(f"{path!r} has {key}={index.get(key)!r:.70} but the file reading them expects "
                                 f"{value!r:.70}: these are another model's rows")
        self.index = index
        self._table: Optional[np.ndarray] = None

    @property
    def table(self) -> np.ndarray:
        if self._table is None:
            n, d, per = self.index["rows"], self.index["dim"], self.index["rows_per_file"]
            parts = []
            for k in range(self.index["files"]):
                path = os.path.join(self.folder, f"{k:04d}.bin")
                want = min(per, n - k * per) * d
                part = np.fromfile(path, dtype="<f2") if os.path.isfile(path) else np.zeros(0, "<f2")
                if part.size != want:
                    raise ValueError(f"{path!r} holds {part.size} values, not {want}: the row files are incomplete")
                parts.append(part.reshape(-1, d))
            table = np.concatenate(parts)
            if not np.isfinite(table).all():
                raise ValueError(f"the rows in {self.folder!r} hold NaN or infinite values")
            if hashlib.sha256(table.tobytes()).hexdigest() != self.index["sha256"]:
                raise ValueError(f"the rows in {self.folder!r} are not the table {ROWS_INDEX} describes (sha256 differs)")
            self._table = table
        return self._table

    def feeds(self, input_ids) -> Dict[str, np.ndarray]:
        """``token_rows`` (U, dim) float16 and ``token_index`` (B, L) int64 for ``input_ids`` (B, L),
        integers in [0, rows) (checked by the caller, :func:`run_onnx`)."""
        ids = _as_array(input_ids, "input_ids").astype(np.int64, copy=False)
        unique, index = np.unique(ids, return_inverse=True)
        return {"token_rows": self.table[unique], "token_index": index.reshape(ids.shape).astype(np.int64)}


# ----------------------------------------------------------------------------- running and comparing
def onnx_session(path: Union[str, os.PathLike], *, threads: Optional[int] = None,
                 token_rows: Union[str, os.PathLike, None] = None):
    """An ``onnxruntime.InferenceSession`` on the CPU for an exported file.

    A file from :func:`split_for_web` reads its token rows from files: the session gets them as
    ``session.mha_lib_token_rows`` (a :class:`TokenRows`), so that :func:`run_onnx` takes
    ``input_ids`` for it as for any other file.

    Args:
        path: the ``.onnx`` file.
        threads: intra-op threads (None: onnxruntime's default).
        token_rows: the row folder of a split file (default: where :func:`split_for_web` put it,
            recorded in the file relative to its folder).

    Raises:
        ValueError: no such file (or a folder), a file onnxruntime cannot load, a bad ``threads``,
            or a split file whose row folder has no ``index.json`` or holds another model's rows
            (see :class:`TokenRows`).
        ImportError: onnxruntime missing (names ``pip install "mha_lib[export]"``).
    """
    path = _checked_path(path, "path", must_exist=True)
    ort = _require("onnxruntime")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only
    if threads is not None:
        options.intra_op_num_threads = checks.positive_int(threads, "threads")
    try:
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime's InvalidProtobuf, Fail, ...
        raise ValueError(f"path={path!r}: onnxruntime cannot load it as an ONNX model ({err})") from None
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
    if not isinstance(session, ort.InferenceSession):
        raise ValueError(f"session must be an onnxruntime.InferenceSession (onnx_session(path)) or a path, got "
                         f"{type(session).__name__}: {session!r:.60}")
    return session


def _as_array(value, name: str) -> np.ndarray:
    """``value`` (an input named ``name``) as a numpy array: the one conversion of every feed, torch or not.

    A torch tensor is read on the CPU; float16, bfloat16 (which numpy lacks) and the float8 types
    become float32, exactly (each of their values is one in float32). A tensor without data (on the
    meta device, a fake or other subclass numpy cannot read), a sparse, nested or quantised one is a
    ValueError naming the input, as is anything numpy makes no numeric array of."""
    if isinstance(value, torch.Tensor):
        return _tensor_array(value, name)
    try:
        out = np.asarray(value)
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as err:  # ragged lists, lists of meta tensors
        raise ValueError(f"{name} must be an array, got {value!r:.60} ({err})") from None
    if out.dtype == object:
        raise ValueError(f"{name} must be a numeric array, got {value!r:.60}")
    return out


def _tensor_array(t: torch.Tensor, name: str) -> np.ndarray:
    """A torch tensor as numpy (see ``_as_array``)."""
    what = f"{name} is a {t.dtype} tensor"
    if t.layout != torch.strided:
        raise ValueError(f"{what} of layout {t.layout}: give a dense tensor (tensor.to_dense())")
    if t.is_nested:
        raise ValueError(f"{what} that is nested: give one (B, ...) tensor, padded")
    if t.is_meta or t.device.type == "meta":
        raise ValueError(f"{what} on the meta device, shape {tuple(t.shape)}: it holds no data")
    if t.is_quantized:
        raise ValueError(f"{what} that is quantised: give its values (tensor.dequantize())")
    t = t.detach()
    if t.dtype.is_floating_point and t.dtype.itemsize < 4:  # float16, bfloat16, float8: all exact in float32
        t = t.float()
    try:
        return t.cpu().resolve_conj().resolve_neg().numpy()
    except (TypeError, RuntimeError, NotImplementedError) as err:  # a fake tensor, a dtype numpy lacks
        raise ValueError(f"{what} that numpy cannot read ({type(err).__name__}: {err})") from None


def _fitting_float32(a: np.ndarray, what: str) -> np.ndarray:
    """``a`` cast to float32, the dtype the file takes, and checked AFTER the cast: a float64 1e39 is
    finite but becomes inf there (and NaN logits after). bool becomes 0/1; ``what`` starts the message."""
    if not (a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise ValueError(f"{what}: got dtype {a.dtype}")
    with np.errstate(over="ignore", invalid="ignore"):
        cast = a.astype(np.float32, copy=False)
    bad = int(cast.size - np.count_nonzero(np.isfinite(cast)))
    if bad:
        raise ValueError(f"{what}: got dtype {a.dtype} with {bad} value{'s' if bad > 1 else ''} NaN, infinite or "
                         f"beyond float32's range (|x| <= {float(np.finfo(np.float32).max):.4g})")
    return cast


def _check_fixed_sizes(feeds: Mapping[str, np.ndarray], expected: Mapping) -> None:
    """Every input's rank and fixed sizes (the axes the file does not leave dynamic) as the file declares them."""
    for name, a in feeds.items():
        shape = getattr(expected.get(name), "shape", None)
        if shape is None:
            continue
        if a.ndim != len(shape) or any(isinstance(n, int) and n != m for n, m in zip(shape, a.shape)):
            raise ValueError(f"{name} has shape {a.shape}: the file takes {tuple(shape)} (names are free sizes)")


def _checked_feeds(session, inputs: Mapping) -> Dict[str, np.ndarray]:
    """The inputs of ``session`` checked and cast to the file's dtypes (see :func:`run_onnx`)."""
    if not isinstance(inputs, Mapping):
        raise ValueError(f"inputs must be a dict {{input name: tensor}}, got {type(inputs).__name__}")
    expected = {i.name: i for i in session.get_inputs()}
    meta = _read_metadata(session)
    feeds = {k: _as_array(v, k) for k, v in inputs.items()}
    rows = getattr(session, "mha_lib_token_rows", None) if "token_rows" in expected else None
    if "token_rows" in expected:  # a split file: the caller gives input_ids, TokenRows makes the two inputs
        if rows is None:
            raise ValueError("this file reads its token rows from files: open it with onnx_session(path), which "
                             "finds them")
        given = sorted(set(feeds) & {"token_rows", "token_index"})
        if given:
            raise ValueError(f"inputs {given} are made from input_ids: pass input_ids instead")
        expected = {k: v for k, v in expected.items() if k not in ("token_rows", "token_index")}
        expected["input_ids"] = None  # checked below as for any file
    if "head_mask" in expected and "head_mask" not in feeds:
        feeds["head_mask"] = np.ones(expected["head_mask"].shape, dtype=np.float32)
    unknown, missing = sorted(set(feeds) - set(expected)), sorted(set(expected) - set(feeds))
    if unknown or missing:
        raise ValueError(f"inputs {sorted(feeds)} do not match the file's {list(expected)} "
                         f"(unknown {unknown}, missing {missing})")

    def number(key):
        return int(meta[key]) if key in meta else None

    def integers(name: str, upper: Optional[int], upper_name: str) -> None:
        a = feeds[name]
        if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"{name} must hold integers (int64), got dtype {a.dtype} (float ids are refused, not "
                             "truncated)")
        if a.size and (a.min() < 0 or (upper is not None and a.max() >= upper)):
            raise ValueError(f"{name} holds values in [{a.min()}, {a.max()}], outside [0, {upper_name}={upper}) "
                             "(onnxruntime's Gather wraps a negative id around)" if upper is not None else
                             f"{name} holds negative values (min {a.min()}): onnxruntime's Gather wraps them around")

    seq = "input_ids" if "input_ids" in expected else "patches" if "patches" in expected else None
    if seq is not None:
        a = feeds[seq]
        if a.ndim != (2 if seq == "input_ids" else 3) or a.shape[0] < 1:
            raise ValueError(f"{seq} must be {'(B, L)' if seq == 'input_ids' else '(B, N, patch_dim)'} with B >= 1, "
                             f"got shape {a.shape}")
        L, room = a.shape[1], number("max_length")
        room = None if room is None else room - (number("cls_token") or 0)
        if L < 1 or (room is not None and L > room):
            raise ValueError(f"{seq} has length {L}: the file takes 1 to {room if room is not None else 'any'} "
                             "positions")
        for other in ("token_type_ids", "key_padding_mask"):
            if other in feeds and feeds[other].shape != a.shape[:2]:
                raise ValueError(f"{other} has shape {feeds[other].shape}, {seq} {a.shape}: they must be (B, L) alike")
    if "input_ids" in expected:
        integers("input_ids", number("vocab_size"), "vocab_size")
    if "token_type_ids" in expected:
        integers("token_type_ids", number("type_vocab_size"), "type_vocab_size")
    if "patches" in expected:
        width = expected["patches"].shape[-1]
        if isinstance(width, int) and feeds["patches"].shape[-1] != width:
            raise ValueError(f"patches are {feeds['patches'].shape[-1]} wide (shape {feeds['patches'].shape}): the "
                             f"file takes patch_dim={width}")
        feeds["patches"] = _fitting_float32(feeds["patches"], "patches must hold finite real numbers that fit float32")
    if "key_padding_mask" in expected:
        a = feeds["key_padding_mask"]
        if a.dtype != np.bool_ and (not np.issubdtype(a.dtype, np.number) or not np.isin(a, (0, 1)).all()):
            raise ValueError(f"key_padding_mask must be bool (True = padding) or 0/1, got dtype {a.dtype} with "
                             f"values {np.unique(a)[:6].tolist() if a.dtype != object else '?'}")
    if "head_mask" in expected:
        a, shape = feeds["head_mask"], expected["head_mask"].shape
        if a.shape != tuple(shape):
            raise ValueError(f"head_mask must have shape (num_layers, H) = {tuple(shape)}, got {a.shape}")
        feeds["head_mask"] = _fitting_float32(a, "head_mask must hold finite float32 numbers (1 keep, 0 drop)")
    for name, a in feeds.items():  # any other float input, as patches and head_mask: finite once cast
        if name not in ("patches", "head_mask") and getattr(expected[name], "type", None) == "tensor(float)":
            feeds[name] = _fitting_float32(a, f"{name} must hold finite real numbers that fit float32")
    _check_fixed_sizes(feeds, expected)
    dtypes = {"tensor(int64)": np.int64, "tensor(bool)": np.bool_, "tensor(float)": np.float32}
    made = rows.feeds(feeds.pop("input_ids")) if rows is not None else {}  # a split file: token_rows, token_index
    return {**{k: v.astype(dtypes.get(expected[k].type, v.dtype), copy=False) for k, v in feeds.items()}, **made}


def run_onnx(session, **inputs) -> Dict[str, np.ndarray]:
    """Run an exported file: ``{output name: numpy array}``.

    The inputs are checked first (onnxruntime itself would cast, wrap or clamp some mistakes
    silently: a negative id wraps around in ``Gather``), against the sizes :func:`export_onnx`
    stores in the file's ``metadata_props`` (files without them get the shape and dtype checks).

    Args:
        session: from :func:`onnx_session`, or a path.
        **inputs: the file's inputs by name, as tensors or numpy arrays: ``input_ids`` (B, L)
            integers in [0, vocab_size); ``token_type_ids`` (B, L) integers in
            [0, type_vocab_size); ``key_padding_mask`` (B, L) bool or 0/1 (True = padding);
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
        inputs: the file's inputs except ``head_mask`` (names as in the module docstring), tensors.
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
    desc = _describe(model)
    session = _session(session)
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
        ref = desc["wrapper"](model, desc["kind"]).eval()(**{k: feeds[k] for k in desc["inputs"]})
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
