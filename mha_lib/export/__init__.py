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
``layer_inputs``         float32 (num_layers, 1, L,      only with ``layer_inputs=True``: every block's
                         d_model)                        input, of the first sequence
=======================  ==============================  =========================================

Every file also records its sizes in the model's ``metadata_props`` (``mha_lib.vocab_size``,
``mha_lib.type_vocab_size``, ``mha_lib.max_length``, ``mha_lib.num_layers``, ``mha_lib.num_heads``, ...;
see :data:`METADATA_PREFIX`), which :func:`run_onnx` checks its inputs against before onnxruntime
runs (a negative id would wrap around in ``Gather``).

The traced pass is mha_lib's own forward: value checks are skipped while tracing
(:func:`mha_lib.checks.tracing`) and the pass has no Python branch on tensor values, so a fully
padded row gets all-zero attention rows in the file, as in mha_lib. The encoder-decoder
(chapter 6) gets its own interface: ``src_ids`` (B, S) and ``input_ids`` (B, T) in, a ``head_mask``
row per attention module, and ``logits``, ``encoder_attentions``, ``attentions`` and
``cross_attentions`` out (greedy decoding runs the file once per step). Not exported: models pruned
to different head counts per layer (``attentions`` and ``head_mask`` would be ragged).

:func:`split_for_web` makes the copy the book serves: every weight matrix in float16 (computed in
float32) and the token-embedding table moved out of the file into small row files, of which a page
fetches only those its text's tokens need (:class:`TokenRows` reads them in Python). For
all-MiniLM-L6-v2 that is a 21.8 MB file instead of 90 MB plus about 8 row files of 24 KB per
sentence, with attention weights within about 0.002 of mha_lib's. :func:`quantize_for_web` makes the
smallest single file (8-bit weights, 24.8 MB, attention weights within about 0.03).
:func:`split_layers_for_web` splits a BertEncoder by layer (what the book serves for MiniLM: the
embeddings file, split as above, and one float16 file per layer, about 3.5 MB each), so that a page draws the
first layer's maps after a few megabytes and computes the others as they arrive; :func:`onnx_session` runs
them as one model (:class:`LayeredSession`).
:func:`compare_on_sentences` and :func:`compare_onnx` measure how far any file is from mha_lib.

Needs the extra ``pip install "mha_lib[export]"`` (onnx, onnxscript; onnxruntime to run the files);
``import mha_lib`` does not import them.

The files, each importing only those before it: ``common.py`` (the extra's imports, the metadata
keys :data:`METADATA_PREFIX`, path checks, files replaced only once complete), ``trace.py``
(:func:`export_onnx`, :func:`export_attention_core`, :class:`ExportInfo`), ``quantize.py`` (:func:`quantize_for_web`), ``feeds.py``
(the inputs checked before onnxruntime runs), ``rows.py`` (:class:`TokenRows`), ``split.py``
(:func:`split_for_web`), ``layers.py`` (:func:`split_layers_for_web`), ``chain.py`` (:class:`LayeredSession`),
``steps.py`` (:func:`export_attention_steps`: one layer's self-attention, every stage an output, for the
live ``"steps"`` view), ``run.py`` (:func:`onnx_session`, :func:`run_onnx`, :func:`compare_onnx`,
:func:`compare_on_sentences`, :data:`CHECK_SENTENCES`). This module re-exports them.

Sources: the ONNX operator set (https://onnx.ai/onnx/operators/); onnxruntime's ``MatMulNBits``
contrib operator and ``matmul_nbits_quantizer``; Michel et al. 2019 (head mask).
"""
from __future__ import annotations

from .common import METADATA_PREFIX
from .quantize import QUANT_BLOCK_SIZES, quantize_for_web
from .rows import ROWS_INDEX, TokenRows
from .run import CHECK_SENTENCES, compare_on_sentences, compare_onnx, onnx_session, run_onnx
from .split import split_for_web
from .layers import split_layers_for_web
from .chain import LayeredSession
from .steps import export_attention_steps
from .trace import MAX_OPSET, MIN_OPSET, ExportInfo, export_attention_core, export_onnx
from . import common as _common, quantize as _quantize, run as _run

# The data, bound again with their doc comments so that the API page (autodoc reads ``#:``) lists them.
#: Prefix of the model-level ``metadata_props`` keys that :func:`export_onnx` writes and
#: :func:`run_onnx` checks its inputs against (see ``mha_lib/export/common.py``).
METADATA_PREFIX = _common.METADATA_PREFIX
#: The ``block_size`` values :func:`quantize_for_web` takes (onnxruntime's blockwise quantiser
#: supports only these; 512 and up stop it with an assertion).
QUANT_BLOCK_SIZES = _quantize.QUANT_BLOCK_SIZES
#: Sentences for checking a converted MiniLM against mha_lib with :func:`compare_on_sentences`, short
#: and long, with punctuation, numbers, accents, CJK, emoji, code and a pair's worth of paraphrases.
CHECK_SENTENCES = _run.CHECK_SENTENCES

__all__ = [
    "export_attention_core",
    "export_attention_steps",
    "ExportInfo",
    "export_onnx",
    "quantize_for_web",
    "split_for_web",
    "split_layers_for_web",
    "LayeredSession",
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
