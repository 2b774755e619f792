"""What every part of the export shares: the extra's imports, the files' metadata keys, path checks,
quiet exporters and files replaced only once complete."""
from __future__ import annotations

import contextlib
import importlib
import logging
import os
import warnings
from typing import Dict

import numpy as np

_EXTRA_HINT = 'pip install "mha_lib[export]"'


def _require(module: str):
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"mha_lib.export needs {module!r}: {_EXTRA_HINT}") from err


#: Keys of the model-level ``metadata_props`` that :func:`export_onnx` writes (values are str) and
#: :func:`run_onnx` reads to check its inputs: ``kind``, ``num_layers``, ``num_heads``,
#: ``vocab_size``, ``type_vocab_size`` (0: no token types), ``max_length`` (positions; absent when
#: unlimited), ``cls_token`` (1 when the model prepends [CLS]: inputs hold max_length - 1
#: positions); :func:`quantize_for_web` adds ``quantized``.
METADATA_PREFIX = "mha_lib."


def _read_metadata(session) -> Dict[str, str]:
    """The ``mha_lib.*`` metadata of a session's file, without the prefix ({} for other files)."""
    props = session.get_modelmeta().custom_metadata_map or {}
    return {k[len(METADATA_PREFIX):]: v for k, v in props.items() if k.startswith(METADATA_PREFIX)}


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
