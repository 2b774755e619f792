"""The files of :func:`~mha_lib.export.split_layers_for_web` run as one model (:class:`LayeredSession`)."""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from .common import _read_metadata, _require


class _Arg:
    """An input or output as onnxruntime describes one (``name``, ``shape``, ``type``)."""

    def __init__(self, name: str, shape: list, type: str):
        self.name, self.shape, self.type = name, shape, type

    def __repr__(self) -> str:
        return f"_Arg({self.name!r}, {self.shape}, {self.type!r})"


class _Meta:
    def __init__(self, custom_metadata_map: Dict[str, str]):
        self.custom_metadata_map = custom_metadata_map


class LayeredSession:
    """An embeddings file and its layer files (:func:`~mha_lib.export.split_layers_for_web`) as one session.

    It answers as an ``onnxruntime.InferenceSession`` of the whole model would, so that
    :func:`~mha_lib.export.run_onnx`, :func:`~mha_lib.export.compare_onnx` and
    :func:`~mha_lib.export.compare_on_sentences` take it: inputs ``token_index``, ``token_type_ids``,
    ``key_padding_mask``, ``head_mask`` (num_layers, H) and ``token_rows`` (made from ``input_ids`` by
    ``run_onnx``); outputs ``last_hidden_state`` (B, L, d_model), ``sentence_embedding`` (B, d_model) and
    ``attentions`` (num_layers, B, H, L, L); the metadata are the embeddings file's. :func:`onnx_session`
    makes one when the file it opens lists layer files (``mha_lib.layers``).

    Args:
        embed: the embeddings session (``onnxruntime.InferenceSession``).
        layers: one session per layer, in order.
        first_maps: the session of the first layer's maps file (``mha_lib.first_maps``), or None.

    Attributes:
        embed: the embeddings session (to time or run one part alone).
        layers: the layers' sessions, a list in layer order.
        first_maps: as given.

    Raises:
        ValueError: the parts do not fit (a layer's inputs or outputs, the layer count, the heads).
    """

    _mha_lib_session = True  # run.py's _session takes it as a session

    def __init__(self, embed, layers: Sequence, first_maps=None):
        self.embed, self.layers, self.first_maps = embed, list(layers), first_maps
        meta = _read_metadata(embed)
        NL, H = int(meta.get("num_layers", -1)), int(meta.get("num_heads", -1))
        if len(self.layers) != NL or NL < 1:
            raise ValueError(f"the embeddings file says num_layers={meta.get('num_layers')}, but {len(self.layers)} "
                             "layer files were given")
        for i, layer in enumerate(self.layers):
            inputs = [a.name for a in layer.get_inputs()]
            outputs = [a.name for a in layer.get_outputs()]
            want = ["hidden_out", "attentions"] + (["sentence_embedding"] if i == NL - 1 else [])
            lm = _read_metadata(layer)
            if inputs != ["hidden", "key_padding_mask", "head_mask"] or outputs != want or lm.get("layer") != str(i) \
                    or lm.get("num_heads") != str(H):
                raise ValueError(f"layer file {i} has inputs {inputs}, outputs {outputs} and metadata {lm}: it is not "
                                 f"layer {i} of this model (inputs hidden, key_padding_mask, head_mask; outputs {want}; "
                                 f"{H} heads)")
        self.num_layers, self.num_heads = NL, H
        first = {a.name: a for a in self.layers[0].get_inputs()}
        parts = {a.name: a for a in embed.get_inputs()}
        self._inputs = [parts["token_index"], parts["token_type_ids"], first["key_padding_mask"],
                        _Arg("head_mask", [NL, H], "tensor(float)"), parts["token_rows"]]
        last = {a.name: a for a in self.layers[-1].get_outputs()}
        self._outputs = [_Arg("last_hidden_state", last["hidden_out"].shape, "tensor(float)"),
                         last["sentence_embedding"], _Arg("attentions", [NL] + list(last["attentions"].shape),
                                                          "tensor(float)")]

    def get_inputs(self) -> list:
        """The whole model's inputs, as ``onnxruntime.InferenceSession.get_inputs()``: objects with ``name``, ``shape``, ``type``."""
        return list(self._inputs)

    def get_outputs(self) -> list:
        """The whole model's outputs (``last_hidden_state``, ``sentence_embedding``, ``attentions``), as ``get_inputs``."""
        return list(self._outputs)

    def get_modelmeta(self):
        """The embeddings file's metadata (``custom_metadata_map``: the model's kind and sizes), as onnxruntime's."""
        return _Meta(dict(self.embed.get_modelmeta().custom_metadata_map or {}))

    def run(self, output_names: Optional[Sequence[str]], feeds: Dict[str, np.ndarray]) -> List[np.ndarray]:
        """The whole model's outputs ``output_names`` (None: all) for ``feeds`` (the inputs of ``get_inputs()``,
        already checked: :func:`~mha_lib.export.run_onnx` checks them). Runs the embeddings, then every layer."""
        hidden = self.embed.run(["hidden"], {k: feeds[k] for k in ("token_index", "token_type_ids", "token_rows")})[0]
        head_mask = np.asarray(feeds["head_mask"], dtype=np.float32)  # (num_layers, H)
        attentions = []
        for i, layer in enumerate(self.layers):
            out = layer.run(None, {"hidden": hidden, "key_padding_mask": feeds["key_padding_mask"],
                                   "head_mask": np.ascontiguousarray(head_mask[i])})
            hidden = out[0]  # (B, L, d_model)
            attentions.append(out[1])  # (B, H, L, L)
        got = {"last_hidden_state": hidden, "sentence_embedding": out[2], "attentions": np.stack(attentions)}
        return [got[n] for n in (output_names or [o.name for o in self._outputs])]


    def run_first_maps(self, input_ids, token_type_ids, key_padding_mask) -> np.ndarray:
        """The first maps file's weights, (B, H, L, L) float32, for ids (B, L) (made into token rows as :func:`run_onnx`
        does), token types and the padding mask (True = padding). Meant for checks: the ids must be the model's.

        Raises:
            ValueError: no first maps file, or no token rows to read (open the session with :func:`onnx_session`).
        """
        rows = getattr(self, "mha_lib_token_rows", None)
        if self.first_maps is None or rows is None:
            raise ValueError("this session has no first maps file, or no token rows: open it with onnx_session(path)")
        made = rows.feeds(input_ids)
        hidden = self.embed.run(["hidden"], {"token_index": made["token_index"], "token_rows": made["token_rows"],
                                             "token_type_ids": np.asarray(token_type_ids, dtype=np.int64)})[0]
        return self.first_maps.run(None, {"hidden": hidden, "key_padding_mask": np.asarray(key_padding_mask, dtype=bool)})[0]


def layer_files(path: str, meta: Dict[str, str]) -> Optional[List[str]]:
    """The layer files an embeddings file lists (``mha_lib.layers``), as paths beside it; None for any other file.

    Raises:
        ValueError: the list is not a JSON list of plain file names, or one of them is missing.
    """
    listed = meta.get("layers")
    if listed is None:
        return None
    try:
        names = json.loads(listed)
    except ValueError:
        names = None
    if not isinstance(names, list) or not names or not all(
            isinstance(n, str) and n and os.path.basename(n) == n and n not in (".", "..") for n in names):
        raise ValueError(f"{path!r} lists its layer files as {listed!r:.80}: not a JSON list of file names")
    paths = [os.path.join(os.path.dirname(os.path.abspath(path)), n) for n in names]
    missing = [n for n, p in zip(names, paths) if not os.path.isfile(p)]
    if missing:
        raise ValueError(f"{path!r} runs with its layer files {missing}, which are not beside it")
    return paths


def layered(path: str, embed, open_session) -> LayeredSession:
    """A :class:`LayeredSession` of the embeddings session ``embed`` (of ``path``), its layer files and its first
    maps file where it names one, each opened with ``open_session(path)``.

    Raises:
        ValueError: a layer file or the first maps file missing, or not what it should be.
    """
    _require("onnxruntime")
    meta = _read_metadata(embed)
    first = None
    if "first_maps" in meta:
        (maps_path,) = layer_files(path, {"layers": json.dumps([meta["first_maps"]])})
        first = open_session(maps_path)
        got = [a.name for a in first.get_inputs()], [a.name for a in first.get_outputs()], _read_metadata(first).get("kind")
        if got != (["hidden", "key_padding_mask"], ["attentions"], "bert-maps"):
            raise ValueError(f"{maps_path!r} is not the first layer's maps file (inputs, outputs, kind: {got})")
    return LayeredSession(embed, [open_session(p) for p in layer_files(path, meta)], first)

