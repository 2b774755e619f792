"""ONNX export of one layer's self-attention, stage by stage (:func:`export_attention_steps`): the file the live
``"steps"`` view runs on the layer's input, to show every tensor of :func:`mha_lib.analysis.attention_steps`."""
from __future__ import annotations

import os
from typing import Union

import torch
from torch import nn

from .. import checks
from ..analysis.steps import STAGES, attention_steps
from .common import METADATA_PREFIX, _checked_onnx_output, _quiet, _replacing, _require
from .split import _float16_candidates, _store_float16
from .trace import MAX_OPSET, MIN_OPSET, ExportInfo, _strip_metadata

#: The inputs of a steps file: the layer's input and the mask (the page gives no mask as all False).
STEPS_INPUTS = ("hidden", "attn_mask")


class _LayerSteps(nn.Module):
    """One block's self-attention stages; the mask is an input (True = blocked), so one file serves both ways."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, hidden, attn_mask):
        steps = attention_steps(self.block, hidden, attn_mask=attn_mask)
        return tuple(steps[name] for name in STAGES)


def _encoder_of(model):
    encoder = getattr(model, "encoder", model)
    if not hasattr(encoder, "blocks") or not hasattr(encoder, "config"):
        raise ValueError(f"model must be an mha_lib Encoder, BertEncoder or TokenClassifier, got {type(model).__name__}")
    return encoder


def export_attention_steps(model: nn.Module, layer: int, path: Union[str, os.PathLike], *, float16: bool = False,
                           opset: int = 18) -> ExportInfo:
    """Export layer ``layer``'s self-attention, every stage an output, to one ONNX file.

    The traced pass is :func:`mha_lib.analysis.attention_steps` on the block (its pre-LN LayerNorm
    included), so the file computes what mha_lib computes, stage by stage (Vaswani et al. 2017, eq. 1-2).

    Inputs: ``hidden`` float32 (B, L, d_model), the block's input (an export with ``hidden_states=True``
    gives it, as its ``layer_inputs``); ``attn_mask`` bool (L, L), True = blocked (all False: the
    model's own mask for one unpadded sequence of a non-causal model; the lower triangle's complement:
    causal). Outputs, float32 unless said: ``x`` (B, L, d_model); ``q``, ``k``, ``v`` (B, H, L, d_k);
    ``scores``, ``scaled`` (B, H, L, L); ``blocked`` bool (1, 1, L, L); ``weights`` (B, H, L, L);
    ``head_out`` (B, H, L, d_k); ``concat`` (B, L, H d_k); ``contributions`` (B, H, L, d_model); ``out``
    (B, L, d_model) (:data:`mha_lib.analysis.STAGES`).

    Args:
        model: an mha_lib Encoder, BertEncoder or TokenClassifier whose block ``layer`` has a
            :class:`~mha_lib.core.MultiHeadAttention`; float32.
        layer: 0-based, in [0, num_layers).
        path: the ``.onnx`` file to write (as :func:`export_onnx`); replaced only once complete.
        float16: store the weight matrices as float16, computed in float32 (as :func:`split_for_web`:
            MiniLM's layer is 1.2 MB instead of 2.4 MB).
        opset: ``MIN_OPSET`` (18) to ``MAX_OPSET`` (23).

    Returns:
        :class:`ExportInfo` with ``kind="attention-steps"``, ``num_layers=1``, the layer's heads and the
        model's ``max_length``; the file's metadata holds ``mha_lib.layer``, ``mha_lib.d_model``,
        ``mha_lib.head_dim``.

    Raises:
        ValueError: a model of another kind, a layer out of range, a block without a MultiHeadAttention,
            non-float32 weights, a bad ``path``, ``float16`` or ``opset``; a weight beyond float16's range.
        ImportError: onnx or onnxscript missing.
    """
    encoder = _encoder_of(model)
    layer = checks.as_int(layer, "layer")
    if not 0 <= layer < len(encoder.blocks):
        raise ValueError(f"layer={layer} is outside [0, {len(encoder.blocks)})")
    float16 = checks.flag(float16, "float16")
    opset = checks.as_int(opset, "opset")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"opset={opset} is outside [{MIN_OPSET}, {MAX_OPSET}]")
    path = _checked_onnx_output(path, "path")
    block = encoder.blocks[layer]
    attn = getattr(block, "attn", None)
    if attn is None or not hasattr(attn, "kv_head_index"):
        raise ValueError(f"layer {layer}'s self-attention is a {type(attn).__name__}, not a MultiHeadAttention")
    bad = sorted({str(p.dtype) for p in block.parameters() if p.dtype != torch.float32})
    if bad:
        raise ValueError(f"layer {layer} has {bad} parameters; export_attention_steps writes float32: call model.float()")
    onnx = _require("onnx")
    optimizer = _require("onnxscript.optimizer")
    cfg = encoder.config
    d_model = attn.d_model
    B, L = 2, 7
    hidden = torch.linspace(-2, 2, B * L * d_model).view(B, L, d_model)
    mask = torch.ones(L, L, dtype=torch.bool).triu(1)  # any mask traces the same graph
    room = None if cfg.positional == "none" else cfg.max_len
    max_length = min(room, model.tokenizer.max_length) if room and hasattr(model, "tokenizer") else room
    seq = torch.export.Dim("sequence", min=1, max=max_length) if max_length else torch.export.Dim("sequence", min=1)
    shapes = {"hidden": {0: torch.export.Dim("batch", min=1), 1: seq}, "attn_mask": {0: seq, 1: seq}}
    meta = {"kind": "attention-steps", "layer": layer, "num_heads": attn.num_heads, "d_model": d_model,
            "head_dim": attn.head_dim, **({"max_length": max_length} if max_length else {}),
            **({"web": "float16 weights, computed in float32"} if float16 else {})}
    wrapper = _LayerSteps(block)
    was_training = block.training
    block.eval()
    try:
        with _quiet(), torch.no_grad():
            program = torch.onnx.export(wrapper, (hidden, mask), dynamo=True, opset_version=opset, verbose=False,
                                        input_names=list(STEPS_INPUTS), output_names=list(STAGES),
                                        dynamic_shapes=shapes, optimize=True)
            optimizer.optimize(program.model)
            _strip_metadata(program.model)
            with _replacing(path) as tmp:
                program.save(tmp, external_data=False)
                proto = onnx.load(tmp)
                if float16:
                    _store_float16(proto, _float16_candidates(proto))
                del proto.metadata_props[:]
                for key, value in meta.items():
                    proto.metadata_props.add(key=METADATA_PREFIX + key, value=str(value))
                onnx.save(proto, tmp)
    finally:
        block.train(was_training)
    return ExportInfo(path=path, kind="attention-steps", inputs=STEPS_INPUTS, outputs=STAGES, num_layers=1,
                      num_heads=attn.num_heads, max_length=max_length, opset=opset, bytes=os.path.getsize(path))
