"""A sentence encoder split by layer for the web (:func:`split_layers_for_web`): one file per layer.

The page fetches the runtime, the embeddings file and the first layer's file, draws that layer's
maps, and computes each later layer as its file arrives (one frame per layer); a head turned off in
layer l recomputes from layer l on. :func:`onnx_session` opens the embeddings file as one session
that runs every layer (:class:`~mha_lib.export.chain.LayeredSession`), so that :func:`compare_onnx`
checks the files together against mha_lib.
"""
from __future__ import annotations

import json
import os
from typing import Union

import torch
from torch import nn

from .. import checks
from ..pretrained import BertEncoder
from .common import METADATA_PREFIX, _quiet, _require
from .split import _float16_candidates, _store_float16, split_for_web
from .trace import _FOLD_LIMIT, MAX_OPSET, MIN_OPSET, _describe, _metadata, _strip_metadata

#: The parts' names: ``{stem}.embed.onnx``, ``{stem}.layer{i}.onnx`` (i from 0) and ``{stem}.maps0.onnx``, beside
#: each other.
EMBED_SUFFIX = ".embed.onnx"
LAYER_SUFFIX = ".layer{}.onnx"
FIRST_MAPS_SUFFIX = ".maps0.onnx"


class _Embeddings(nn.Module):
    """The front-end alone: token ids and types (B, L) -> embeddings (B, L, d_model) (positions, types, LayerNorm)."""

    def __init__(self, model: BertEncoder):
        super().__init__()
        self.model = model

    def forward(self, input_ids, token_type_ids):
        return self.model.embed(input_ids, token_type_ids)


class _Layer(nn.Module):
    """One block: hidden (B, L, d_model), key_padding_mask (B, L), head_mask (H,) -> hidden (B, L, d_model) and
    the weights (B, H, L, L); the last block also pools (``sentence_embedding`` (B, d_model))."""

    def __init__(self, model: BertEncoder, index: int):
        super().__init__()
        self.model = model
        self.index = index
        self.last = index == len(model.blocks) - 1

    def forward(self, hidden, key_padding_mask, head_mask):
        x, weights, _ = self.model.blocks[self.index](hidden, key_padding_mask=key_padding_mask, head_mask=head_mask,
                                                      need_weights=True)  # (B, L, d_model), (B, H, L, L)
        if self.last:
            if self.model.final_norm is not None:
                x = self.model.final_norm(x)
            return x, weights, self.model.pool(x, key_padding_mask)
        return x, weights


class _FirstMaps(nn.Module):
    """The first layer's weights alone: hidden (B, L, d_model), key_padding_mask (B, L) -> attentions (B, H, L, L).
    The traced graph keeps only what the weights need (the query and key projections): a small file, so that a page
    draws the first maps before the rest of the first layer has arrived."""

    def __init__(self, model: BertEncoder):
        super().__init__()
        self.block = model.blocks[0]

    def forward(self, hidden, key_padding_mask):
        return self.block(hidden, key_padding_mask=key_padding_mask, need_weights=True)[1]  # (B, H, L, L)


def _save(module: nn.Module, example: tuple, names: tuple, outputs: tuple, shapes: dict, opset: int,
          meta: dict, path: str) -> None:
    """Trace ``module`` on ``example`` (torch.onnx, dynamo) and save it to ``path`` with ``meta`` as its metadata."""
    optimizer = _require("onnxscript.optimizer")
    with _quiet(), torch.no_grad():
        program = torch.onnx.export(module, example, dynamo=True, opset_version=opset, verbose=False,
                                    input_names=list(names), output_names=list(outputs), dynamic_shapes=shapes,
                                    optimize=True)
        optimizer.optimize(program.model, input_size_limit=_FOLD_LIMIT, output_size_limit=_FOLD_LIMIT)
        _strip_metadata(program.model)
        program.model.metadata_props.update(meta)
        program.save(path, external_data=False)


def split_layers_for_web(model: BertEncoder, folder: Union[str, os.PathLike], stem: str, *, rows_per_file: int = 32,
                         opset: int = 18) -> dict:
    """Write ``model`` as one ONNX file per part: the embeddings, then one file per layer.

    * ``{stem}.embed.onnx``: :func:`split_for_web` of the front-end (inputs ``token_index`` (B, L)
      int64, ``token_type_ids`` (B, L) int64, ``token_rows`` (U, d_model) float16; output ``hidden``
      (B, L, d_model) float32), its token table in ``{stem}.rows/`` (``rows_per_file`` rows a file),
      its position table float16. Its metadata are the whole model's (``mha_lib.kind`` "bert",
      ``num_layers``, ``num_heads``, ``vocab_size``, ``max_length``, ...) plus ``mha_lib.layers``,
      the JSON list of the layers' file names, relative to it.
    * ``{stem}.maps0.onnx``: the first layer's weights alone (inputs ``hidden``, ``key_padding_mask``; output
      ``attentions`` (B, H, L, L)): the query and key projections of layer 0, about a quarter of its file, so that
      a page draws the first maps before the rest of layer 0 has arrived (metadata ``mha_lib.kind`` "bert-maps";
      the embeddings file names it in ``mha_lib.first_maps``).
    * ``{stem}.layer{i}.onnx`` for each block i: inputs ``hidden`` (B, L, d_model) float32,
      ``key_padding_mask`` (B, L) bool (True = padding) and ``head_mask`` (H,) float32 (1 keep, 0
      drop); outputs ``hidden_out`` (B, L, d_model) and ``attentions`` (B, H, L, L) (the weights before
      ``head_mask``), and in the last layer's file ``sentence_embedding`` (B, d_model) (the model's
      ``pool``). Its weight matrices are float16, computed in float32 (as :func:`split_for_web`);
      metadata ``mha_lib.kind`` "bert-layer", ``mha_lib.layer``, ``num_layers``, ``num_heads``.

    For all-MiniLM-L6-v2: about 0.4 MB for the embeddings, 0.9 MB for the first maps and 3.6 MB a layer, so a page
    draws the first layer's maps after the runtime and about 1.3 MB of weights, and the rest while the reader looks.
    :func:`onnx_session` on the embeddings file runs every part as one model
    (:class:`~mha_lib.export.chain.LayeredSession`): :func:`compare_onnx` and
    :func:`compare_on_sentences` check the parts together.

    Args:
        model: a :class:`~mha_lib.pretrained.BertEncoder` (token ids and types, the same head count in
            every layer, float32).
        folder: an existing folder; the files are written there (replacing files of the same names).
        stem: the files' common name, e.g. ``"all-MiniLM-L6-v2"``: letters, digits, ``-`` and ``_``.
        rows_per_file: token rows per row file (:func:`split_for_web`), >= 1.
        opset: ``MIN_OPSET`` (18) to ``MAX_OPSET`` (23).

    Returns:
        a dict: ``embed`` (its file name), ``layers`` (the layers' file names, in order), ``first_maps`` (the
        first layer's maps file), ``rows``
        (the row folder's name), ``bytes`` ({file name: size}), ``float16`` (initializers stored as
        float16, all files), ``num_layers``, ``num_heads``, ``max_length``.

    Raises:
        ValueError: ``model`` not a BertEncoder, or one :func:`export_onnx` refuses (ragged heads,
            other dtypes); ``folder`` not an existing folder; a bad ``stem``, ``rows_per_file`` or
            ``opset`` (naming the value); anything :func:`split_for_web` refuses.
        ImportError: onnx or onnxscript missing (names ``pip install "mha_lib[export]"``).
    """
    if not isinstance(model, BertEncoder):
        raise ValueError(f"model must be an mha_lib BertEncoder (pretrained.load_bert), got {type(model).__name__}")
    if not isinstance(folder, (str, os.PathLike)) or not os.path.isdir(folder):
        raise ValueError(f"folder={folder!r} is not an existing folder")
    if not isinstance(stem, str) or not stem or not all(c.isascii() and (c.isalnum() or c in "-_") for c in stem):
        raise ValueError(f"stem={stem!r} must be a non-empty name of ASCII letters, digits, '-' and '_'")
    opset = checks.as_int(opset, "opset")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"opset={opset} is outside [{MIN_OPSET}, {MAX_OPSET}]")
    rows_per_file = checks.positive_int(rows_per_file, "rows_per_file")
    onnx = _require("onnx")
    desc = _describe(model)  # the whole model's kind and sizes (refuses what export_onnx refuses)
    folder = os.fspath(folder)
    NL, H = desc["num_layers"], desc["num_heads"]
    names = [stem + LAYER_SUFFIX.format(i) for i in range(NL)]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        # B = 2 rows (the second padded), L = 7: sizes 0 and 1 would be taken for constants
        B, L = 2, 7
        ids = torch.arange(B * L, device=device).view(B, L) % desc["config"].vocab_size
        types = torch.zeros(B, L, dtype=torch.long, device=device)
        padding = torch.zeros(B, L, dtype=torch.bool, device=device)
        padding[1, L - 1] = True
        batch = torch.export.Dim("batch", min=1)
        length = torch.export.Dim("sequence", min=1, max=desc["max_length"])
        axes = {0: batch, 1: length}
        full = os.path.join(folder, stem + ".embed.fp32.onnx")
        maps_name = stem + FIRST_MAPS_SUFFIX
        meta = {**_metadata(desc), METADATA_PREFIX + "layers": json.dumps(names),
                METADATA_PREFIX + "first_maps": maps_name}
        try:
            _save(_Embeddings(model), (ids, types), ("input_ids", "token_type_ids"), ("hidden",),
                  {"input_ids": dict(axes), "token_type_ids": dict(axes)}, opset, meta, full)
            split = split_for_web(full, os.path.join(folder, stem + EMBED_SUFFIX), os.path.join(folder, stem + ".rows"),
                                  rows_per_file=rows_per_file)
        finally:
            if os.path.exists(full):
                os.remove(full)
        with torch.no_grad():
            hidden = model.embed(ids, types)  # (B, L, d_model): what the layers are traced on
        float16 = split["float16"]
        parts = [(name, _Layer(model, i), i) for i, name in enumerate(names)] + [(maps_name, _FirstMaps(model), 0)]
        for name, module, i in parts:
            maps_only = isinstance(module, _FirstMaps)
            outputs = ("attentions",) if maps_only else \
                ("hidden_out", "attentions") + (("sentence_embedding",) if i == NL - 1 else ())
            meta = {METADATA_PREFIX + "kind": "bert-maps" if maps_only else "bert-layer", METADATA_PREFIX + "layer": str(i),
                    METADATA_PREFIX + "num_layers": str(NL), METADATA_PREFIX + "num_heads": str(H)}
            path = os.path.join(folder, name)
            if maps_only:
                _save(module, (hidden, padding), ("hidden", "key_padding_mask"), outputs,
                      {"hidden": dict(axes), "key_padding_mask": dict(axes)}, opset, meta, path)
            else:
                _save(module, (hidden, padding, torch.ones(H, device=device)), ("hidden", "key_padding_mask", "head_mask"),
                      outputs, {"hidden": dict(axes), "key_padding_mask": dict(axes), "head_mask": None}, opset, meta, path)
            part = onnx.load(path)
            weights = _float16_candidates(part)
            _store_float16(part, weights)
            part.metadata_props.add(key=METADATA_PREFIX + "web", value="float16 weights, computed in float32")
            onnx.checker.check_model(part)
            onnx.save(part, path)
            float16 += len(weights)
    finally:
        model.train(was_training)
    files = [stem + EMBED_SUFFIX, *names, maps_name]
    return {"embed": files[0], "layers": names, "first_maps": maps_name, "rows": stem + ".rows", "float16": float16,
            "num_layers": NL, "num_heads": H, "max_length": desc["max_length"],
            "bytes": {f: os.path.getsize(os.path.join(folder, f)) for f in files}}
