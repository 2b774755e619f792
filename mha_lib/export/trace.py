"""ONNX export of an encoder (:func:`export_onnx`): the fixed signature, the trace, the metadata it records."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Dict, Optional, Tuple, Union

import torch
from torch import nn

from .. import checks
from ..core.functional import attention
from ..model import Encoder, EncoderDecoder, TokenClassifier
from ..pretrained import BertEncoder  # needs only torch at import; the tokenizer came with the model
from .common import METADATA_PREFIX, _checked_onnx_output, _quiet, _require

MIN_OPSET, MAX_OPSET = 18, 23  # LayerNormalization needs 17; 18 is what torch.onnx's dynamo exporter emits natively

_FOLD_LIMIT = 1 << 24  # elements: fold [W^Q; W^K; W^V] (concatenated in the pass) into one weight initializer


@dataclass(frozen=True)
class ExportInfo:
    """What :func:`export_onnx` wrote.

    Attributes:
        path: the ``.onnx`` file.
        kind: ``"bert"`` (a BertEncoder), ``"token-classifier"``, ``"encoder"``,
            ``"encoder-decoder"`` or ``"attention"`` (:func:`export_attention_core`).
        inputs, outputs: the ONNX input and output names, in order.
        num_layers, num_heads: the ``head_mask`` shape (num_layers, H); for an encoder-decoder
            num_layers counts its attention modules (encoder layers, then self and cross per
            decoder layer).
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
    """A model with the export's fixed signature and outputs (the table of :mod:`mha_lib.export`)."""

    def __init__(self, model: nn.Module, kind: str, layer_inputs: bool = False):
        super().__init__()
        self.model = model
        self.kind = kind
        self.layer_inputs = layer_inputs

    def _run(self, inputs, key_padding_mask, head_mask, **kwargs):
        out = self.model(inputs, key_padding_mask=key_padding_mask, head_mask=head_mask, output_attentions=True,
                         output_hidden_states=self.layer_inputs, **kwargs)
        attentions = torch.stack(out.attentions)  # (num_layers, B, H, L, L)
        # every block's input, of the first sequence: (num_layers, 1, L, d_model) (the "steps" view's X)
        extra = (torch.stack(out.hidden_states[:-1])[:, :1],) if self.layer_inputs else ()
        if self.kind == "token-classifier":
            return (out.logits, attentions, *extra)  # (B, L, C) or (B, C)
        h = out.last_hidden_state  # (B, L, d_model)
        if self.kind == "bert":
            return (h, self.model.pool(h, key_padding_mask), attentions, *extra)  # pooled (B, d_model)
        return (h, attentions, *extra)


class _TokensWithTypes(_Exported):
    def forward(self, input_ids, token_type_ids, key_padding_mask, head_mask):
        return self._run(input_ids, key_padding_mask, head_mask, token_type_ids=token_type_ids)


class _Tokens(_Exported):
    def forward(self, input_ids, key_padding_mask, head_mask):
        return self._run(input_ids, key_padding_mask, head_mask)


class _TokensWithPattern(_Exported):
    """A causal token model whose attention pattern is an input: ``attn_mask`` (L, L) bool, True = blocked."""

    def forward(self, input_ids, attn_mask, head_mask):
        return self._run(input_ids, None, head_mask, attn_mask=attn_mask)


class _Patches(_Exported):
    def forward(self, patches, head_mask):
        return self._run(patches, None, head_mask)


class _Seq2Seq(_Exported):
    """The encoder-decoder's teacher-forced pass: greedy decoding runs it once per step on the prefix."""

    def forward(self, src_ids, input_ids, head_mask):
        out = self.model(input_ids, src_ids=src_ids, head_mask=head_mask, output_attentions=True)
        return (out.logits, torch.stack(out.encoder_attentions), torch.stack(out.attentions),  # (B, T, C), ...
                torch.stack(out.cross_attentions))  # (NL_dec, B, H, T, S)


def _describe_seq2seq(model) -> dict:
    enc, dec = model.source_encoder, model.decoder
    heads = enc.heads_per_layer + dec.heads_per_layer + [b.cross_attn.num_heads for b in dec.blocks]
    if len(set(heads)) != 1:
        raise ValueError(f"model has {heads} heads per attention module: export_onnx needs one count everywhere")
    bad = sorted({str(p.dtype) for p in model.parameters() if p.dtype != torch.float32})
    if bad:
        raise ValueError(f"model has {bad} parameters; export_onnx writes float32 files: call model.float() first")
    cfg = dec.config
    return dict(kind="encoder-decoder", wrapper=_Seq2Seq, inputs=("src_ids", "input_ids", "head_mask"),
                outputs=("logits", "encoder_attentions", "attentions", "cross_attentions"), config=cfg,
                num_layers=len(enc.blocks) + 2 * len(dec.blocks), num_heads=heads[0],
                max_length=min(cfg.max_len, enc.config.max_len), source_vocab_size=enc.config.vocab_size)


def _describe(model, pattern_input: bool = False, layer_inputs: bool = False) -> dict:
    """Kind, wrapper, names and sizes of an exportable model; ValueError for anything else."""

    if isinstance(model, EncoderDecoder):
        if layer_inputs:
            raise ValueError("layer_inputs=True takes an encoder or a token classifier, not an EncoderDecoder")
        return _describe_seq2seq(model)
    if isinstance(model, BertEncoder):
        kind, encoder = "bert", model
    elif isinstance(model, TokenClassifier):
        kind, encoder = "token-classifier", model.encoder
    elif isinstance(model, Encoder):
        kind, encoder = "encoder", model
    else:
        raise ValueError(f"model must be an mha_lib TokenClassifier, Encoder, BertEncoder or EncoderDecoder, got "
                         f"{type(model).__name__}")
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
    if pattern_input and (kind != "token-classifier" or cfg.patch_dim or cfg.type_vocab_size or cfg.kv_rank
                          or cfg.attention_window or cfg.sparse_block):
        raise ValueError("pattern_input=True takes a token classifier without token types, MLA or a pattern of its "
                         f"own (the file's attn_mask input is the pattern); got {kind} with attention_window="
                         f"{cfg.attention_window}, sparse_block={cfg.sparse_block}, kv_rank={cfg.kv_rank}")
    if pattern_input:
        wrapper, inputs = _TokensWithPattern, ("input_ids", "attn_mask", "head_mask")
    elif cfg.patch_dim:
        wrapper, inputs = _Patches, ("patches", "head_mask")
    elif cfg.type_vocab_size:
        wrapper, inputs = _TokensWithTypes, ("input_ids", "token_type_ids", "key_padding_mask", "head_mask")
    else:
        wrapper, inputs = _Tokens, ("input_ids", "key_padding_mask", "head_mask")
    outputs = {"token-classifier": ("logits", "attentions"), "encoder": ("last_hidden_state", "attentions"),
               "bert": ("last_hidden_state", "sentence_embedding", "attentions")}[kind]
    outputs += ("layer_inputs",) if layer_inputs else ()
    max_positions = None if cfg.positional == "none" else cfg.max_len  # positions the file can embed
    if kind == "bert":
        max_positions = min(cfg.max_len, model.tokenizer.max_length)  # the tokenizer cuts there (256 for MiniLM)
    return dict(kind=kind, wrapper=wrapper, inputs=inputs, outputs=outputs, config=cfg, num_layers=len(heads),
                num_heads=heads[0], max_length=max_positions, layer_inputs=layer_inputs)


def _example_inputs(desc: dict, device) -> dict:
    """Inputs to trace with: B = 2 rows, the second one partly padded; L = 7 positions (fewer when the
    model has fewer). Sizes 0 and 1 are avoided: the exporter would take them for constants."""
    cfg = desc["config"]
    if desc["kind"] == "encoder-decoder":  # S = 7 source and T = 5 target positions: two sizes, not one
        S, T = min(7, desc["max_length"]), min(5, desc["max_length"] - 1)
        src = 3 + torch.arange(2 * S, device=device).view(2, S) % (desc["source_vocab_size"] - 3)
        tgt = 3 + torch.arange(2 * T, device=device).view(2, T) % (cfg.vocab_size - 3)
        return {"src_ids": src, "input_ids": tgt,
                "head_mask": torch.ones(desc["num_layers"], desc["num_heads"], device=device)}
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
        if desc["wrapper"] is _TokensWithPattern:  # a window of 2 keys: any pattern traces the same graph
            out["attn_mask"] = torch.ones(L, L, dtype=torch.bool, device=device).triu(1) | \
                torch.ones(L, L, dtype=torch.bool, device=device).tril(-2)
        else:
            mask = torch.zeros(B, L, dtype=torch.bool, device=device)
            mask[1, L - 1] = L > 1
            out["key_padding_mask"] = mask
    out["head_mask"] = torch.ones(desc["num_layers"], desc["num_heads"], device=device)
    return out


def _dynamic_shapes(desc: dict, example: dict) -> dict:
    cfg = desc["config"]
    if desc["kind"] == "encoder-decoder":
        batch = torch.export.Dim("batch", min=1)
        return {"src_ids": {0: batch, 1: torch.export.Dim("source", min=1, max=desc["max_length"])},
                "input_ids": {0: batch, 1: torch.export.Dim("target", min=1, max=desc["max_length"])},
                "head_mask": None}
    batch = torch.export.Dim("batch", min=1)
    length = example["patches" if cfg.patch_dim else "input_ids"].shape[1]
    room = None if desc["max_length"] is None else desc["max_length"] - int(cfg.cls_token)
    axes = {0: batch}
    if length >= 2:  # a model with room for one position only keeps L fixed
        axes[1] = torch.export.Dim("sequence", min=1, max=room) if room else torch.export.Dim("sequence", min=1)
    shapes = {name: (None if name == "head_mask" else dict(axes)) for name in example}
    if "attn_mask" in example:  # (L, L): the sequence axis twice
        shapes["attn_mask"] = {0: axes[1], 1: axes[1]} if 1 in axes else None
    return shapes


def export_onnx(model: nn.Module, path: Union[str, os.PathLike], *, opset: int = 18,
                pattern_input: bool = False, layer_inputs: bool = False) -> ExportInfo:
    """Export an mha_lib encoder to one ONNX file (weights inside), dynamic batch and length.

    The model is traced with ``torch.onnx.export(..., dynamo=True)`` in eval mode (its training
    flag is restored after), on its own device; the graph's constant parts (e.g. the stacked
    [W^Q; W^K; W^V] of self-attention) are folded into initializers, so every weight matrix is one
    ``MatMul`` input that :func:`quantize_for_web` can quantise. Inputs and outputs are named as in
    the table of :mod:`mha_lib.export`; ``attentions`` are the weights before ``head_mask`` (rows sum to 1, or
    are 0 for a query with no allowed key, e.g. a fully padded row).

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier` (token or patch front-end, any pooling,
            causal or not, GQA), a :class:`~mha_lib.pretrained.BertEncoder`, an
            :class:`~mha_lib.model.Encoder` (no cross-attention) or an
            :class:`~mha_lib.model.EncoderDecoder` (inputs ``src_ids`` (B, S), ``input_ids``
            (B, T) and ``head_mask`` (modules, H); outputs ``logits`` (B, T, C) and the stacked
            ``encoder_attentions``, ``attentions`` (causal) and ``cross_attentions``
            (NL_dec, B, H, T, S): the teacher-forced pass, which greedy decoding runs per step);
            float32; the same number (>= 1) of kept heads in every layer.
        path: the ``.onnx`` file to write (its folder must exist); overwritten. Its name must end
            in ``.onnx`` (any case): other extensions (``.json``, ``.textproto``) would make onnx
            save a text format that onnxruntime does not load, so they are refused.
        opset: ONNX opset of the default domain, ``MIN_OPSET`` (18) to ``MAX_OPSET`` (23).
        pattern_input: for a token classifier without token types (chapter 9's causal models): the
            file takes ``attn_mask`` (L, L) bool (True = blocked, ORed with the causal mask) in place of
            ``key_padding_mask``, so that a page can run the weights under any sparse pattern. The
            model's config must hold no pattern of its own (``attention_window``, ``sparse_block``) and
            no MLA.
        layer_inputs: add the output ``layer_inputs``, float32 (num_layers, 1, L, d_model): the input of
            every block, of the first sequence only (what the live ``"steps"`` view gives
            :func:`export_attention_steps`'s file; a batch of texts would make it large). Not for an
            EncoderDecoder.

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
    desc = _describe(model, checks.flag(pattern_input, "pattern_input"), checks.flag(layer_inputs, "layer_inputs"))
    _require("onnx")
    optimizer = _require("onnxscript.optimizer")
    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    example = _example_inputs(desc, device)
    wrapper = desc["wrapper"](model, desc["kind"], desc.get("layer_inputs", False))
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


def _metadata(desc: dict) -> Dict[str, str]:
    cfg = desc["config"]
    out = {"kind": desc["kind"], "num_layers": desc["num_layers"], "num_heads": desc["num_heads"],
           **({"source_vocab_size": desc["source_vocab_size"]} if "source_vocab_size" in desc else {}),
           "vocab_size": cfg.vocab_size, "type_vocab_size": cfg.type_vocab_size or 0,
           "cls_token": int(bool(cfg.cls_token))}
    if desc["max_length"] is not None:
        out["max_length"] = desc["max_length"]
    return {METADATA_PREFIX + k: str(v) for k, v in out.items()}


def _strip_metadata(model) -> None:
    """Drop the exporter's per-node notes (stack traces with this checkout's paths, FX node text):
    about 1 byte in 100 of MiniLM's file, and they would make the bytes depend on where mha_lib lies."""
    for node in model.graph.all_nodes() if hasattr(model.graph, "all_nodes") else model.graph:
        node.metadata_props.clear()
        node.doc_string = None
    model.graph.metadata_props.clear()
    model.metadata_props.clear()


class _AttentionCore(nn.Module):
    """mha_lib's explicit path, ``attention(q, k, v)``: the (B, H, L, S) weights are made, only the output returned."""

    def forward(self, q, k, v):
        return attention(q, k, v)[0]  # (B, H, L, d_k)


def export_attention_core(path: Union[str, os.PathLike], *, opset: int = 18) -> ExportInfo:
    """Export :func:`mha_lib.attention <mha_lib.core.attention>` alone, the explicit path, to one ONNX file with every size free.

    Inputs ``q``, ``k``, ``v``, float32 (B, H, L, d_k) (L = S: self-attention); output ``out``
    (B, H, L, d_k). The (B, H, L, L) weights are made inside, as on the explicit path, and not
    returned (the file times what the chapter times, not the copy of a map). Chapter 3's timing view
    runs it in the reader's browser at equal FLOPs for H = 1 ... 64 (H d_k fixed). No weights, no
    metadata sizes: the file is a few kB.

    Args:
        path: the ``.onnx`` file to write (as :func:`export_onnx`).
        opset: ``MIN_OPSET`` (18) to ``MAX_OPSET`` (23).

    Returns:
        :class:`ExportInfo` with ``kind="attention"``, ``num_layers=num_heads=0`` and ``max_length=None``.

    Raises:
        ValueError: a bad ``path`` or ``opset`` (as :func:`export_onnx`).
        ImportError: onnx or onnxscript missing.
    """
    opset = checks.as_int(opset, "opset")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"opset={opset} is outside [{MIN_OPSET}, {MAX_OPSET}]")
    path = _checked_onnx_output(path, "path")
    _require("onnx")
    q = torch.linspace(-1, 1, 2 * 3 * 5 * 4).view(2, 3, 5, 4)  # sizes all different: none taken for another
    dims = {0: torch.export.Dim("batch", min=1), 1: torch.export.Dim("heads", min=1),
            2: torch.export.Dim("length", min=1), 3: torch.export.Dim("head_dim", min=1)}
    with _quiet(), torch.no_grad():
        program = torch.onnx.export(_AttentionCore(), (q, q.flip(-1), q * 0.5), dynamo=True, opset_version=opset,
                                    verbose=False, input_names=["q", "k", "v"], output_names=["out"],
                                    dynamic_shapes=({**dims}, {**dims}, {**dims}), optimize=True)
        _strip_metadata(program.model)
        program.model.metadata_props.update({METADATA_PREFIX + "kind": "attention"})
        program.save(path, external_data=False)
    return ExportInfo(path=path, kind="attention", inputs=("q", "k", "v"), outputs=("out",), num_layers=0,
                      num_heads=0, max_length=None, opset=opset, bytes=os.path.getsize(path))
