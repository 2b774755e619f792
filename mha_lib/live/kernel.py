"""The kernel's side of a live view: :class:`KernelRunner` answers the view's messages with mha_lib's models."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch

from .. import tasks
from ..model import EncoderDecoder
from ..pretrained import BertEncoder, load_bert
from ..analysis.steps import STAGES, attention_steps
from .induction import STEP_SEPARATOR
from .patterns import PATTERN_SUFFIX, pattern_model
from .contract import view_contract
from .steps import parse_steps_id, steps_id

MINILM_ID = "all-MiniLM-L6-v2"

#: Most rows (texts) one run message may hold: the prune view sends its sentence and its texts
#: (about 25); the limit keeps a stray message from asking the kernel for an enormous batch.
MAX_KERNEL_ROWS = 64
#: Most positions (rows x length, padding included) one run message may hold: the prune view's 25
#: texts at MiniLM's 256 tokens; a larger batch would hold the kernel for a minute.
MAX_KERNEL_TOKENS = 25 * 256
_KERNEL_MODELS: Dict[str, Any] = {}  # model id -> loaded model, shared by every view of the kernel


def _kernel_model(model_id: str):
    """The mha_lib model behind a site model id, loaded once per kernel, in eval mode."""
    steps = parse_steps_id(model_id)
    if steps is not None:  # a layer's steps file (the "steps" view): its model's, loaded once
        return _kernel_model(steps[0])
    if model_id not in _KERNEL_MODELS:
        name, sep, step = model_id.partition(STEP_SEPARATOR)
        if model_id == MINILM_ID:
            model, _ = load_bert(verbose=False)
        elif model_id.endswith(PATTERN_SUFFIX):  # chapter 9: the weights without their pattern; attn_mask is a feed
            model = pattern_model(model_id[:-len(PATTERN_SUFFIX)])
        elif sep and step.isascii() and step.isdigit():  # a training checkpoint: induction.checkpoint_id(name, step)
            model = tasks.load_trained(name, step=int(step))
        else:
            model = tasks.load_trained(model_id)  # the spec's first seed: the site's model
        _KERNEL_MODELS[model_id] = model.eval()
    return _KERNEL_MODELS[model_id]


class KernelRunner:
    """Answers a live view's messages in the kernel with mha_lib's own models.

    The messages (sent by ``kernelBackend`` in ``mha_live.mjs``; every one carries ``request``,
    echoed in the answer):

    * ``{"op": "load", "model": id}`` -> ``{"op": "loaded", "info": {...}, "vocab": str or None}``:
      what onnxruntime-web's session would tell the view -- ``kind`` ("bert" or
      "token-classifier"), ``num_layers``, ``num_heads``, ``max_length``, ``inputs`` and
      ``outputs`` (the names of :mod:`mha_lib.export`), and MiniLM's vocabulary (vocab.txt).
    * ``{"op": "run", "model": id, "feeds": {name: {"type", "dims", "data"}}}`` with the
      inputs of the exported files, as plain lists: ``input_ids`` (B, L) ids,
      ``token_type_ids`` (B, L) (models with token types), ``key_padding_mask`` (B, L) 0/1,
      True = padding (chapter 9's ``*.pattern`` models take ``attn_mask`` (L, L) 0/1, True = blocked,
      instead), ``head_mask`` (num_layers, H) numbers, 1 = keep -> ``{"op": "result",
      "outputs": {name: {"dims", "buffer": i}}}`` and buffer i holding that output as float32
      (little-endian): ``attentions`` (num_layers, B, H, L, L), the weights before the head
      mask, and ``sentence_embedding`` (B, d_model) for MiniLM (:meth:`BertEncoder.pool
      <mha_lib.pretrained.BertEncoder.pool>` of the last hidden state) or ``logits`` (B, L, C)
      for a toy model -- what the exported file computes, here by mha_lib in float32. A model
      on image patches (chapter 7's ViTs) takes ``patches`` (B, N, patch_dim) grey levels and
      ``head_mask`` instead; the encoder-decoder (chapter 6) takes ``src_ids`` (1, S),
      ``input_ids`` (1, T) and ``head_mask`` (a row per attention module) and answers with
      ``logits`` and the stacked ``encoder_attentions``, ``attentions`` and ``cross_attentions``.
      The ``"steps"`` view's model also answers ``layer_inputs`` (num_layers, 1, L, d_model), every block's
      input (as ``export_onnx(..., layer_inputs=True)``), and its layers' steps ids (``<model>.attn<l>``,
      as :func:`~mha_lib.export.export_attention_steps`' files) take ``hidden`` (1, L, d_model) numbers and
      ``attn_mask`` (L, L) 0/1 (1 = blocked) and answer every stage of
      :func:`mha_lib.analysis.attention_steps` (``blocked`` as 0/1).
    * anything wrong -> ``{"op": "error", "message": ...}`` naming the offending value.

    Args:
        view: the view's kind (:data:`VIEWS`).
        model: its model id.
        config: its configuration. A view whose model the contract
            (``view_contract.json``) picks from a list key (``{"one_of": "models"}``: toy-compare, induction, ...)
            runs every model of that list; the others run ``model``. Only those models are loaded.

    Raises:
        ValueError: a ``view`` that is not one of :data:`VIEWS` (naming it). A bad message is
            not an error here: :meth:`answer` answers it with ``{"op": "error", ...}``.
    """

    def __init__(self, view: str, model: str, config: Mapping[str, Any]):
        self.view = view
        views = view_contract()["views"]
        if view not in views:
            raise ValueError(f"view must be one of {tuple(views)}, got {view!r}")
        rule = views[view]["model"]
        self.models = list(config[rule["one_of"]]) if "one_of" in rule else [model]
        if view == "steps":  # the model, then a steps id per layer
            self.models += [steps_id(model, layer) for layer in range(int(config["num_layers"]))]

    def answer(self, content: Any) -> Tuple[dict, List[bytes]]:
        """The answer to one message: ``(content, buffers)``. Never raises: an error is an answer.

        Returns:
            ``({"op": "loaded" | "result" | "error", "request": ..., ...}, [bytes, ...])``.
        """
        request = None
        try:
            request = content.get("request") if isinstance(content, Mapping) else None
            if not (isinstance(request, str) and len(request) <= 100) and not (
                    isinstance(request, int) and not isinstance(request, bool)):
                request = None
            if not isinstance(content, Mapping):
                raise ValueError(f"a message must be an object, got {type(content).__name__}: {content!r:.60}")
            if request is None:
                raise ValueError(f"a message needs a request id (a str or an integer, at most 100 characters), got "
                                 f"{content.get('request')!r:.60}")
            op = content.get("op")
            if op == "load":
                return {"op": "loaded", "request": request, **self.load(content.get("model"))}, []
            if op == "run":
                outputs = self.run(content.get("model"), content.get("feeds"))
                names = list(outputs)
                return ({"op": "result", "request": request,
                         "outputs": {n: {"dims": list(outputs[n].shape), "buffer": i} for i, n in enumerate(names)}},
                        [np.ascontiguousarray(outputs[n].numpy(), dtype="<f4").tobytes() for n in names])
            raise ValueError(f"op must be 'load' or 'run', got {op!r:.60}")
        except Exception as err:  # noqa: BLE001 -- a message from the page must never raise in the kernel
            kind = "" if isinstance(err, ValueError) else f"{type(err).__name__}: "
            return {"op": "error", "request": request, "message": f"{kind}{err}"}, []

    def _model(self, model_id: Any):
        if not isinstance(model_id, str) or model_id not in self.models:
            raise ValueError(f"model {model_id!r:.60} is not one of this view's models {self.models}")
        return _kernel_model(model_id)

    def load(self, model_id: Any) -> dict:
        """``{"info": {...}, "vocab": ...}`` of a model of this view (loaded once per kernel).

        Raises:
            ValueError: ``model_id`` not one of this view's models.
        """
        model = self._model(model_id)
        steps = parse_steps_id(model_id)
        if steps is not None:
            return {"info": _steps_info(model, steps[1]), "vocab": None}
        info = _model_info(model, _takes_pattern(model_id))
        if self.view == "steps":
            info["outputs"].append("layer_inputs")
        return {"info": info, "vocab": _vocab_text(model)}

    @torch.no_grad()
    def run(self, model_id: Any, feeds: Any) -> Dict[str, torch.Tensor]:
        """mha_lib's outputs for one run message's ``feeds`` (see the class docstring).

        Returns:
            ``{"attentions": (num_layers, 1, H, L, L), "sentence_embedding": (B, d_model)}`` for
            MiniLM, ``{"logits": (B, L, C), "attentions": ...}`` for a toy model; float32, CPU.
            Only the first row's attentions are returned: a view draws that row's maps, and the
            other rows (the prune view's 24 texts) would make each answer megabytes.

        Raises:
            ValueError: a model not of this view; ``feeds`` not a dict of exactly the model's
                inputs; a feed without integer ``dims`` or with ``data`` of another length; B not
                in [1, :data:`MAX_KERNEL_ROWS`], L not in [1, max_length]; ids, token types,
                padding flags or head-mask values that are not integers in range, 0/1, or finite
                numbers (the message names the feed, the position and the value).
        """
        model = self._model(model_id)
        steps = parse_steps_id(model_id)
        if steps is not None:
            return _run_steps(model, steps[1], feeds)
        info = _model_info(model, _takes_pattern(model_id))
        cfg = _config_of(model)
        if isinstance(model, EncoderDecoder):
            x = _seq2seq_feeds(feeds, info, model)
            out = model(x["input_ids"], src_ids=x["src_ids"], head_mask=x["head_mask"], output_attentions=True)
            return {"logits": out.logits.float().cpu(),
                    **{name: torch.stack(getattr(out, name))[:, :1].float().cpu()
                       for name in ("encoder_attentions", "attentions", "cross_attentions")}}
        x = _patch_feeds(feeds, info, cfg) if cfg.patch_dim else _message_feeds(feeds, info, cfg)
        if cfg.patch_dim:
            out = model(x["patches"], head_mask=x["head_mask"], output_attentions=True)
        else:
            out = model(x["input_ids"], token_type_ids=x.get("token_type_ids"), key_padding_mask=x.get("key_padding_mask"),
                        attn_mask=x.get("attn_mask"), head_mask=x["head_mask"], output_attentions=True,
                        output_hidden_states=self.view == "steps")
        attentions = torch.stack(out.attentions)[:, :1].float().cpu()  # (num_layers, 1, H, L, L): row 0, drawn
        # the "steps" view: every block's input, of row 0 (num_layers, 1, L, d_model)
        extra = {"layer_inputs": torch.stack(out.hidden_states[:-1])[:, :1].float().cpu()} if self.view == "steps" else {}
        if info["kind"] == "bert":
            embedding = model.pool(out.last_hidden_state, x["key_padding_mask"])  # (B, d_model)
            return {"sentence_embedding": embedding.float().cpu(), "attentions": attentions, **extra}
        return {"logits": out.logits.float().cpu(), "attentions": attentions, **extra}


def _encoder_blocks(model) -> list:
    return list(getattr(model, "encoder", model).blocks)


def _steps_info(model, layer: int) -> dict:
    """What a layer's steps file's manifest entry says (:func:`mha_lib.export.export_attention_steps`)."""
    blocks = _encoder_blocks(model)
    if not 0 <= layer < len(blocks):
        raise ValueError(f"layer {layer} is outside the model's {len(blocks)} layers")
    cfg = _config_of(model)
    max_length = min(cfg.max_len, model.tokenizer.max_length) if isinstance(model, BertEncoder) else cfg.max_len
    return {"kind": "attention-steps", "num_layers": 1, "num_heads": blocks[layer].attn.num_heads,
            "max_length": max_length, "inputs": ["hidden", "attn_mask"], "outputs": list(STAGES)}


def _run_steps(model, layer: int, feeds: Any) -> Dict[str, torch.Tensor]:
    """Every stage of layer ``layer``'s self-attention on a steps message's ``hidden`` and ``attn_mask``."""
    info = _steps_info(model, layer)
    if not isinstance(feeds, Mapping) or set(feeds) != {"hidden", "attn_mask"}:
        got = sorted(map(repr, feeds)) if isinstance(feeds, Mapping) else type(feeds).__name__
        raise ValueError(f"feeds must hold exactly the inputs ['attn_mask', 'hidden'], got {got}")
    block = _encoder_blocks(model)[layer]
    d = block.attn.d_model
    feed = feeds["hidden"]
    dims, data = (feed.get("dims"), feed.get("data")) if isinstance(feed, Mapping) else (None, None)
    if (not isinstance(dims, list) or len(dims) != 3 or dims[0] != 1 or dims[2] != d or isinstance(dims[1], bool)
            or not isinstance(dims[1], int) or not 1 <= dims[1] <= info["max_length"]):
        raise ValueError(f"feeds['hidden'].dims must be [1, L, {d}] with 1 <= L <= {info['max_length']}, got {dims!r:.60}")
    L = dims[1]
    if not isinstance(data, list) or len(data) != L * d:
        raise ValueError(f"feeds['hidden'].data must be a list of {L * d} numbers, got "
                         f"{len(data) if isinstance(data, list) else type(data).__name__}")
    for i, v in enumerate(data):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (-1e38 < v < 1e38):  # float32's range
            raise ValueError(f"feeds['hidden'][0][{i // d}][{i % d}] = {v!r:.40} is not a finite number")
    feed = feeds["attn_mask"]
    dims, mask = (feed.get("dims"), feed.get("data")) if isinstance(feed, Mapping) else (None, None)
    if dims != [L, L] or not isinstance(mask, list) or len(mask) != L * L:
        raise ValueError(f"feeds['attn_mask'] must be {{dims: [{L}, {L}], data: {L * L} values 0/1}}, got {feed!r:.60}")
    for i, v in enumerate(mask):
        if isinstance(v, bool) or v not in (0, 1):
            raise ValueError(f"feeds['attn_mask'][{i // L}][{i % L}] = {v!r:.40} is not 0 or 1 (1 = blocked)")
    hidden = torch.tensor(data, dtype=torch.float32).view(1, L, d)
    steps = attention_steps(block, hidden, attn_mask=torch.tensor(mask, dtype=torch.bool).view(L, L))
    return {name: steps[name].float().cpu() for name in STAGES}


def _config_of(model):
    if isinstance(model, EncoderDecoder):
        return model.decoder.config
    return model.config if isinstance(model, BertEncoder) else model.encoder.config


def _takes_pattern(model_id: str) -> bool:
    """A chapter 9 model whose file takes ``attn_mask`` in place of ``key_padding_mask``."""
    return model_id.endswith(PATTERN_SUFFIX)


def _model_info(model, pattern_input: bool = False) -> dict:
    """What the view reads of a model (as the exported file's manifest entry says it)."""
    bert = isinstance(model, BertEncoder)
    cfg = _config_of(model)
    if isinstance(model, EncoderDecoder):  # as export_onnx describes it: a head_mask row per attention module
        enc, dec = model.source_encoder, model.decoder
        return {"kind": "encoder-decoder", "num_layers": len(enc.blocks) + 2 * len(dec.blocks),
                "num_heads": dec.heads_per_layer[0], "max_length": min(cfg.max_len, enc.config.max_len),
                "inputs": ["src_ids", "input_ids", "head_mask"],
                "outputs": ["logits", "encoder_attentions", "attentions", "cross_attentions"]}
    heads = (model if bert else model.encoder).heads_per_layer
    if len(set(heads)) != 1:
        raise ValueError(f"the model has {heads} heads per layer: a live view needs one count in every layer")
    max_length = min(cfg.max_len, model.tokenizer.max_length) if bert else cfg.max_len
    inputs = ["input_ids", "token_type_ids", "key_padding_mask", "head_mask"]
    if not cfg.type_vocab_size:
        inputs.remove("token_type_ids")
    if cfg.patch_dim:
        inputs = ["patches", "head_mask"]
    if pattern_input:  # export_onnx(..., pattern_input=True)
        inputs = ["input_ids", "attn_mask", "head_mask"]
    return {"kind": "bert" if bert else "token-classifier", "num_layers": len(heads), "num_heads": heads[0],
            "max_length": max_length, "inputs": inputs,
            "outputs": ["sentence_embedding", "attentions"] if bert else ["logits", "attentions"]}


def _vocab_text(model) -> Optional[str]:
    """MiniLM's vocab.txt (one token a line, line number = id), for the view's tokenizer; None for a toy."""
    if not isinstance(model, BertEncoder):
        return None
    vocab = model.tokenizer.backend.get_vocab()  # token -> id
    tokens = sorted(vocab, key=vocab.get)
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise ValueError("the tokenizer's ids are not 0..V-1: no vocab.txt can list them")
    return "\n".join(tokens) + "\n"


def _head_mask_feed(feeds: Mapping, info: dict) -> torch.Tensor:
    """The (num_layers, H) head mask of a run message: numbers in [0, 1]; ValueError naming the value."""
    NL, H = info["num_layers"], info["num_heads"]
    feed = feeds["head_mask"]
    dims, data = (feed.get("dims"), feed.get("data")) if isinstance(feed, Mapping) else (None, None)
    if dims != [NL, H] or not isinstance(data, list) or len(data) != NL * H:
        raise ValueError(f"feeds['head_mask'] must be {{dims: [{NL}, {H}], data: {NL * H} numbers}}, got {feed!r:.60}")
    for i, v in enumerate(data):  # the page sends 0 (off) and 1 (on); a gate in between is allowed
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise ValueError(f"feeds['head_mask'][{i // H}][{i % H}] = {v!r:.40} is not a number in [0, 1]")
    return torch.tensor(data, dtype=torch.float32).view(NL, H)


def _patch_feeds(feeds: Any, info: dict, cfg) -> Dict[str, torch.Tensor]:
    """The tensors of a run message for a model on patches: ``patches`` (1, N, patch_dim) finite
    numbers with N + [CLS] <= max_length, and ``head_mask``; ValueError naming the feed and value."""
    if not isinstance(feeds, Mapping) or set(feeds) != {"patches", "head_mask"}:
        got = sorted(map(repr, feeds)) if isinstance(feeds, Mapping) else type(feeds).__name__
        raise ValueError(f"feeds must hold exactly the inputs ['patches', 'head_mask'], got {got}")
    feed = feeds["patches"]
    dims, data = (feed.get("dims"), feed.get("data")) if isinstance(feed, Mapping) else (None, None)
    room = info["max_length"] - int(bool(cfg.cls_token))
    if (not isinstance(dims, list) or len(dims) != 3 or dims[0] != 1 or dims[2] != cfg.patch_dim
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims) or not 1 <= dims[1] <= room):
        raise ValueError(f"feeds['patches'].dims must be [1, N, {cfg.patch_dim}] with 1 <= N <= {room}, got {dims!r:.60}")
    if not isinstance(data, list) or len(data) != dims[1] * dims[2]:
        raise ValueError(f"feeds['patches'].data must be a list of {dims[1] * dims[2]} numbers, got "
                         f"{len(data) if isinstance(data, list) else type(data).__name__}")
    for i, v in enumerate(data):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (-1e38 < v < 1e38):  # float32's range
            raise ValueError(f"feeds['patches'][0][{i // dims[2]}] = {v!r:.40} is not a finite number")
    return {"patches": torch.tensor(data, dtype=torch.float32).view(dims), "head_mask": _head_mask_feed(feeds, info)}


def _seq2seq_feeds(feeds: Any, info: dict, model) -> Dict[str, torch.Tensor]:
    """The tensors of a run message for the encoder-decoder: ``src_ids`` (1, S) and ``input_ids`` (1, T), ids
    of its vocabularies with S, T in [1, max_length], and ``head_mask``; ValueError naming the feed and value."""
    wanted = info["inputs"]
    if not isinstance(feeds, Mapping) or set(feeds) != set(wanted):
        got = sorted(map(repr, feeds)) if isinstance(feeds, Mapping) else type(feeds).__name__
        raise ValueError(f"feeds must hold exactly the inputs {wanted}, got {got}")
    out = {}
    for name, vocab in (("src_ids", model.source_encoder.config.vocab_size), ("input_ids", model.decoder.config.vocab_size)):
        feed = feeds[name]
        dims, data = (feed.get("dims"), feed.get("data")) if isinstance(feed, Mapping) else (None, None)
        if (not isinstance(dims, list) or len(dims) != 2 or dims[0] != 1 or not isinstance(dims[1], int)
                or isinstance(dims[1], bool) or not 1 <= dims[1] <= info["max_length"]):
            raise ValueError(f"feeds[{name!r}].dims must be [1, n] with 1 <= n <= {info['max_length']}, got {dims!r:.60}")
        if not isinstance(data, list) or len(data) != dims[1]:
            raise ValueError(f"feeds[{name!r}].data must be a list of {dims[1]} ids, got "
                             f"{len(data) if isinstance(data, list) else type(data).__name__}")
        for i, v in enumerate(data):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < vocab:
                raise ValueError(f"feeds[{name!r}][0][{i}] = {v!r:.40} is not a token id in [0, {vocab})")
        out[name] = torch.tensor(data, dtype=torch.long).view(1, -1)
    out["head_mask"] = _head_mask_feed(feeds, info)
    return out


def _message_feeds(feeds: Any, info: dict, cfg) -> Dict[str, torch.Tensor]:
    """The tensors of a run message's feeds; ValueError naming the feed, position and value."""
    if not isinstance(feeds, Mapping):
        raise ValueError(f"feeds must be an object {{input name: tensor}}, got {type(feeds).__name__}: {feeds!r:.60}")
    wanted = info["inputs"]
    if set(feeds) != set(wanted):
        raise ValueError(f"feeds must hold exactly the inputs {wanted}, got {sorted(map(repr, feeds))}")

    def values(name: str, dims_expected: Optional[Tuple[int, ...]] = None) -> Tuple[list, Tuple[int, ...]]:
        feed = feeds[name]
        if not isinstance(feed, Mapping):
            raise ValueError(f"feeds[{name!r}] must be an object {{type, dims, data}}, got {feed!r:.60}")
        dims, data = feed.get("dims"), feed.get("data")
        if (not isinstance(dims, list) or len(dims) != 2
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims)):
            raise ValueError(f"feeds[{name!r}].dims must be two integers >= 1, got {dims!r:.60}")
        if dims_expected is not None and tuple(dims) != dims_expected:
            raise ValueError(f"feeds[{name!r}].dims must be {list(dims_expected)}, got {dims}")
        if not isinstance(data, list) or len(data) != dims[0] * dims[1]:
            n = len(data) if isinstance(data, list) else type(data).__name__
            raise ValueError(f"feeds[{name!r}].data must be a list of {dims[0]} x {dims[1]} values, got {n}")
        return data, tuple(dims)

    def integers(name: str, dims: Tuple[int, ...], low: int, high: int, what: str) -> torch.Tensor:
        data, _ = values(name, dims)
        for i, v in enumerate(data):
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v < high:
                raise ValueError(f"feeds[{name!r}][{i // dims[1]}][{i % dims[1]}] = {v!r:.40} is not {what}")
        return torch.tensor(data, dtype=torch.long).view(dims)

    ids, (B, L) = values("input_ids")
    if B > MAX_KERNEL_ROWS:
        raise ValueError(f"feeds['input_ids'] has {B} rows; a view sends at most {MAX_KERNEL_ROWS}")
    if B * L > MAX_KERNEL_TOKENS:
        raise ValueError(f"feeds['input_ids'] is {B} x {L} = {B * L} positions; a view sends at most {MAX_KERNEL_TOKENS}")
    if L > info["max_length"]:
        raise ValueError(f"feeds['input_ids'] has {L} positions; the model reads at most {info['max_length']}")
    V = cfg.vocab_size
    out = {"input_ids": integers("input_ids", (B, L), 0, V, f"a token id in [0, {V})")}
    if "token_type_ids" in wanted:
        T = cfg.type_vocab_size
        out["token_type_ids"] = integers("token_type_ids", (B, L), 0, T, f"a token type in [0, {T})")
    if "attn_mask" in wanted:  # chapter 9's pattern: (L, L) 0/1, 1 = blocked
        out["attn_mask"] = integers("attn_mask", (L, L), 0, 2, "0 or 1 (1 = blocked)").bool()
    else:
        out["key_padding_mask"] = integers("key_padding_mask", (B, L), 0, 2, "0 or 1 (1 = padding)").bool()
    values("head_mask", (info["num_layers"], info["num_heads"]))  # the same words as the other feeds
    out["head_mask"] = _head_mask_feed(feeds, info)
    return out
