"""Saving and the one loading path: safetensors + JSON, never pickle.

:func:`read_weights` / :func:`build_checked` compare a safetensors header with a model built on the
meta device before anything is allocated, and refuse NaN/inf and non-float weights.
:func:`read_json` bounds and parses every JSON file mha_lib reads.
"""
from __future__ import annotations

import json
import os
import re
from typing import Callable, Mapping, Optional, Union

import torch
from torch import nn

from .. import __version__, checks
from .config import EncoderConfig

CONFIG_NAME = "mha_lib_config.json"  # not "config.json": that name belongs to transformers' checkpoints
WEIGHTS_NAME = "model.safetensors"
_FORMAT_VERSION = 1

# The classes whose files :func:`load` reads, by the ``model_class`` a file records. Filled by
# :func:`saved_class` where each class is defined (encoder.py, classifier.py), so that this file
# needs no import of the models it loads.
_CLASSES: dict = {}


def saved_class(cls):
    """Class decorator: files saved by ``cls`` (its ``__name__``) load with :func:`load`."""
    _CLASSES[cls.__name__] = cls
    return cls


class _SaveLoadMixin:
    """safetensors weights + a JSON config; never pickle.

    A subclass that only adds helpers (e.g. ``mha_lib.pretrained.BertEncoder``) sets
    ``_saved_class = "Encoder"`` so that its files load with :func:`load` too.
    """

    def _extra_config(self) -> dict:
        return {}

    def save_pretrained(self, path: Union[str, os.PathLike]) -> str:
        """Write ``mha_lib_config.json`` and ``model.safetensors`` into folder ``path``.

        Pruned heads are recorded in the config, so the weights load into a model built
        from it. Returns the folder path. Raises OSError if the folder cannot be written.
        """
        from safetensors.torch import save_file  # a dependency, imported late: ``import mha_lib`` needs only torch

        os.makedirs(path, exist_ok=True)
        meta = {
            "format": "mha_lib",
            "format_version": _FORMAT_VERSION,
            "mha_lib_version": __version__,
            "model_class": getattr(self, "_saved_class", type(self).__name__),
            "config": self.config.to_dict(),
            **self._extra_config(),
        }
        with open(os.path.join(path, CONFIG_NAME), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        save_file(state, os.path.join(path, WEIGHTS_NAME), metadata={"format": "pt"})
        return str(path)

    @classmethod
    def from_pretrained(cls, path: Union[str, os.PathLike], map_location: str = "cpu"):
        """Build the model saved by :meth:`save_pretrained` in folder ``path``.

        Raises:
            ValueError: if the folder lacks the files, was saved from another class, or a
                tensor is missing, unexpected or of the wrong shape (naming the key).
        """
        meta = _read_meta(path)
        if meta["model_class"] != getattr(cls, "_saved_class", cls.__name__):
            raise ValueError(
                f"{path} holds a {meta['model_class']!r}, not a {cls.__name__!r}; use mha_lib.model.load()"
            )
        return load(path, map_location=map_location)


# ----------------------------------------------------------------------------- loading


MAX_JSON_BYTES = 2**26  # 64 MiB: mha_lib's JSON files (configs, records) are kilobytes


def read_json(path: Union[str, os.PathLike], kind: type = dict):
    """The JSON value in ``path``, which must be a ``kind`` (dict: an object; list: an array).

    Raises:
        ValueError: the file is missing, larger than :data:`MAX_JSON_BYTES`, not valid JSON (or
            not UTF-8, or nested deeper than Python's parser goes: 100,000 ``[`` raise
            RecursionError inside ``json``, or an integer of more than 4300 digits), or its
            top level is not a ``kind``; the message names the file.
    """
    try:
        size = os.path.getsize(path)
        if size > MAX_JSON_BYTES:
            raise ValueError(f"{size:,} bytes, more than the {MAX_JSON_BYTES:,} a JSON config may have")
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except RecursionError:  # json's parser recurses once per nested [ or {
        raise ValueError(f"{path} is not valid JSON: nested too deeply for Python's JSON parser") from None
    except (OSError, ValueError) as err:  # ValueError: JSONDecodeError, UnicodeDecodeError, huge ints, size
        raise ValueError(f"{path} is not valid JSON: {type(err).__name__}: {err}") from None
    if not isinstance(value, kind):
        what = "a JSON object {...}" if kind is dict else "a JSON array [...]"
        raise ValueError(f"{path} must hold {what}, got {type(value).__name__}: {str(value)[:80]}")
    return value


# The largest sizes a config FILE may ask for (load, load_bert, load_trained, the training
# cache). Far above every real BERT-family checkpoint: vocabularies reach about 250,000 ids
# (XLM-R 250,002; mBERT 119,547), widths 4096, 64 heads, 48 layers, feed-forward 16,384,
# 8192 positions (long-context BERTs), 16 token types. Far below 2**63, where torch's sizes
# overflow (a TypeError from inside nn.Embedding instead of a ValueError naming the field).
CONFIG_SIZE_LIMITS = {
    "vocab_size": 2**24, "d_model": 2**16, "num_heads": 2**12, "num_kv_heads": 2**12, "num_layers": 2**12,
    "d_ff": 2**18, "max_len": 2**20, "type_vocab_size": 2**10, "patch_dim": 2**20, "num_classes": 2**24,
}


def check_config_sizes(sizes: Mapping[str, Optional[int]], source: str,
                       names: Optional[Mapping[str, str]] = None) -> None:
    """Refuse a config file's size above its bound in :data:`CONFIG_SIZE_LIMITS`.

    Args:
        sizes: ``{EncoderConfig field (or "num_classes"): int or None}``, already checked to be
            integers (``mha_lib.checks``; :class:`EncoderConfig` does it).
        source: the file, for the message.
        names: how the file calls a field (e.g. ``{"d_model": "hidden_size"}``), for the message.

    Raises:
        ValueError: naming the file, the field as the file calls it, the value and the bound.
    """
    for name, value in sizes.items():
        limit = CONFIG_SIZE_LIMITS[name]
        if value is not None and checks.as_int(value, name) > limit:
            raise ValueError(f"{source}: {(names or {}).get(name, name)}={value} is more than {limit:,}, "
                             f"far beyond any real checkpoint; the file is broken")


def _config_sizes(config: EncoderConfig) -> dict:
    """The bounded integer fields of ``config`` (see :data:`CONFIG_SIZE_LIMITS`)."""
    return {name: getattr(config, name) for name in CONFIG_SIZE_LIMITS if name != "num_classes"}


def _read_meta(path) -> dict:
    cfg_path = os.path.join(path, CONFIG_NAME)
    w_path = os.path.join(path, WEIGHTS_NAME)
    if not (os.path.isfile(cfg_path) and os.path.isfile(w_path)):
        found = sorted(os.listdir(path)) if os.path.isdir(path) else "no such folder"
        raise ValueError(f"no mha_lib model in {path}: need {CONFIG_NAME} and {WEIGHTS_NAME}, found {found}")
    meta = read_json(cfg_path)
    if meta.get("format") != "mha_lib" or not isinstance(meta.get("model_class"), str) or \
            meta.get("model_class") not in _CLASSES:
        raise ValueError(
            f"{cfg_path} is not an mha_lib model config (format={meta.get('format')!r}, "
            f"model_class={meta.get('model_class')!r})"
        )
    version = meta.get("format_version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"{cfg_path}: format_version must be an integer, got {version!r}")
    if version > _FORMAT_VERSION:
        raise ValueError(
            f"{cfg_path} has format_version={meta['format_version']}, newer than this mha_lib "
            f"understands ({_FORMAT_VERSION}); upgrade mha_lib"
        )
    return meta


def read_weights(
    path: Union[str, os.PathLike],
    expected: Mapping[str, torch.Tensor],
    *,
    rename: Optional[Callable[[list], Mapping[str, str]]] = None,
    prefix: str = "",
    source: Optional[str] = None,
) -> dict:
    """Read a safetensors file into tensors named and shaped as ``expected``, safely.

    The ONE loading path of mha_lib (``load``, ``from_pretrained``, ``load_bert``,
    ``tasks.load_trained``, the training cache). The file's header (names, shapes, dtypes) is
    compared with ``expected`` BEFORE any tensor data is read, and ``expected`` is meant to
    come from a model built on the meta device, so a ``config.json`` asking for sizes its
    weights do not have is refused without allocating them.

    Args:
        path: the ``.safetensors`` file.
        expected: ``{name: tensor}`` with the model's names, shapes and dtypes (a
            ``state_dict``, e.g. of a model built under ``torch.device("meta")``).
        rename: optional ``file names -> {file name: model name}`` (names it leaves out are
            skipped), e.g. to map transformers' BERT names.
        prefix: read only the file's names that start with it, without the prefix.
        source: how to name the file in errors (default ``path``).

    Returns:
        ``{model name: tensor}``, each in ``expected``'s dtype, on the CPU.

    Raises:
        ValueError: the file is missing or not a readable safetensors file; a tensor missing,
            unexpected, of the wrong shape, or of a non-floating dtype (integer, bool, complex)
            where the model has a float; a tensor holding NaN or inf. The message names the
            file and the tensor.
    """
    from safetensors import safe_open  # a dependency, imported late: ``import mha_lib`` needs only torch

    source = str(source or path)
    try:
        with safe_open(str(path), framework="pt") as f:
            names = [k for k in f.keys() if k.startswith(prefix)]
            stripped = {k: k[len(prefix):] for k in names}
            mapping = dict(rename(list(stripped.values()))) if rename else {v: v for v in stripped.values()}
            by_model = {mapping[v]: k for k, v in stripped.items() if v in mapping}
            header = {m: (tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype()) for m, k in by_model.items()}
            _compare_header(header, expected, source)
            state = {m: f.get_tensor(k) for m, k in by_model.items()}
    except ValueError:
        raise
    except Exception as err:  # safetensors' SafetensorError, OSError, ...
        raise ValueError(f"{source} is not a readable safetensors file: {type(err).__name__}: {err}") from None
    for name, tensor in state.items():
        tensor = tensor.to(expected[name].dtype)  # checked after the cast: 1e300 in fp64 is inf in fp32
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise ValueError(
                f"{source}: tensor {name!r} holds {bad} NaN or inf values (in {expected[name].dtype}); "
                f"refusing to load it"
            )
        state[name] = tensor
    return state


_FLOAT_DTYPES = {"F16", "BF16", "F32", "F64"}


def _compare_header(header: Mapping[str, tuple], expected: Mapping[str, torch.Tensor], source: str) -> None:
    missing = [k for k in expected if k not in header]
    unexpected = [k for k in header if k not in expected]
    if missing:
        raise ValueError(f"{source}: missing tensor(s) {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    if unexpected:
        raise ValueError(
            f"{source}: unexpected tensor(s) {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}"
        )
    for k, t in expected.items():
        shape, dtype = header[k]
        if shape != tuple(t.shape):
            raise ValueError(f"{source}: tensor {k!r} has shape {shape}, the model expects {tuple(t.shape)}")
        if t.is_floating_point() and dtype not in _FLOAT_DTYPES:
            raise ValueError(f"{source}: tensor {k!r} has dtype {dtype}; the model needs floating point")


def _check_layer_count(path, num_layers: int, pattern: str, source: str) -> None:
    """Refuse a config whose layer count the file cannot have, before building anything."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            found = {int(m.group(1)) for k in f.keys() for m in [re.search(pattern, k)] if m}
    except Exception as err:
        raise ValueError(f"{source} is not a readable safetensors file: {type(err).__name__}: {err}") from None
    if len(found) != num_layers:
        raise ValueError(f"{source}: the config asks for {num_layers} layers, the file holds {len(found)}")


MAX_DERIVED_BUFFER_BYTES = 2**29  # 512 MiB: a sinusoidal table of 8192 positions x 4096 features is 128 MiB


def build_checked(build: Callable[[], nn.Module], path, *, layers: Optional[int] = None,
                  layer_pattern: str = "", rename=None, prefix: str = "",
                  source: Optional[str] = None) -> nn.Module:
    """``build()`` a model and fill it from safetensors ``path``, checking before allocating.

    The layer count (when ``layers`` is given, i.e. when it came from a config file) and then
    every name and shape are compared with the file first (the
    model is built on the meta device for that), so nothing the config asks for is
    allocated unless the file holds it. See :func:`read_weights` for the checks.

    Raises:
        ValueError: as :func:`read_weights`, or a layer count the file does not have.
    """
    source = str(source or path)
    if not os.path.isfile(path):
        raise ValueError(f"{source}: no such file")
    if layers is not None:  # the config came from a file: its layer count is checked first
        _check_layer_count(path, layers, layer_pattern, source)
    try:
        with torch.device("meta"):
            skeleton = build()
    except (RuntimeError, OverflowError, TypeError) as err:  # e.g. sizes past int64, or whose product overflows
        raise ValueError(f"{source}: the config asks for a model that cannot be built: {err}") from None
    expected = skeleton.state_dict()
    extra = sum(b.numel() * b.element_size() for n, b in skeleton.named_buffers() if n not in expected)
    if extra > MAX_DERIVED_BUFFER_BYTES:  # buffers the config sizes but the file does not hold
        raise ValueError(
            f"{source}: the config asks for {extra:,} bytes of derived buffers (e.g. a sinusoidal position "
            f"table of max_len rows), more than {MAX_DERIVED_BUFFER_BYTES:,}; check max_len in the config"
        )
    state = read_weights(path, expected, rename=rename, prefix=prefix, source=source)
    model = build()
    model.load_state_dict(state, strict=True)  # read_weights matched every name, shape and dtype already
    return model


def load(path: Union[str, os.PathLike], map_location: str = "cpu") -> nn.Module:
    """Load an :class:`Encoder` or :class:`TokenClassifier` saved with ``save_pretrained``.

    Reads ``mha_lib_config.json`` (JSON) and ``model.safetensors``; never unpickles.
    Pruned models come back pruned. The model is returned in eval mode.

    Raises:
        ValueError: if the files are missing or do not match (naming the key).
    """
    meta = _read_meta(path)
    try:
        config = EncoderConfig.from_dict(meta["config"])
        num_classes = checks.positive_int(meta["num_classes"], "num_classes") if meta["model_class"] == "TokenClassifier" else None
        pooling = meta.get("pooling", "token")
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{os.path.join(path, CONFIG_NAME)}: {type(err).__name__}: {err}") from None
    check_config_sizes({**_config_sizes(config), "num_classes": num_classes}, os.path.join(path, CONFIG_NAME))

    def build():
        cls = _CLASSES[meta["model_class"]]  # Encoder or TokenClassifier (_read_meta checked it)
        return cls(config) if num_classes is None else cls(config, num_classes, pooling)

    model = build_checked(build, os.path.join(path, WEIGHTS_NAME), layers=config.num_layers,
                          layer_pattern=_LAYER_PATTERN)
    return model.to(map_location).eval()


_LAYER_PATTERN = r"(?:^|\.)blocks\.(\d+)\."  # an mha_lib encoder's per-layer tensor names
