"""The copy the book serves (:func:`split_for_web`): float16 weights, the token table in row files."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from typing import List, Sequence, Union

import numpy as np

from .. import checks
from .common import METADATA_PREFIX, _checked_onnx_output, _checked_path, _refuse_non_finite, _require, _temporary_name
from .rows import ROWS_INDEX, TokenRows

_FLOAT16_MIN_ELEMENTS = 1024  # float32 initializers at least this big become float16 (matrices, position table)

_ROW_FILE = re.compile(r"\d{4,}\.bin")  # the names split_for_web gives row files: 0000.bin, 0001.bin, ...


def _earlier_row_files(rows_dir: str, src: str, dst: str) -> List[str]:
    """The numbered files in ``rows_dir`` that a new split replaces ([] for a new or empty folder).

    A folder is taken for an earlier split's only when its ``index.json`` is one split_for_web
    writes (every key, the float16 format, sizes that agree) and the numbered files there are
    exactly the ones it lists, each of its exact size, holding the table of the index's sha256;
    anything else is a ValueError, so that no file of the user's is deleted or overwritten.
    """
    if os.path.exists(rows_dir) and not os.path.isdir(rows_dir):
        raise ValueError(f"rows_dir={rows_dir!r} is a file: give a folder for the row files")
    if os.path.abspath(rows_dir) == os.path.abspath(dst):
        raise ValueError(f"rows_dir={rows_dir!r} is dst: give the row files a folder of their own")
    parent = os.path.abspath(rows_dir)
    while not os.path.exists(parent):  # the folders to create lie under a folder, not under a file
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError(f"rows_dir={rows_dir!r} cannot be created: {parent!r} is a file")
    for name, path in (("src", src), ("dst", dst)):
        if os.path.dirname(os.path.abspath(path)) == os.path.abspath(rows_dir) and (
                os.path.basename(path) == ROWS_INDEX or _ROW_FILE.fullmatch(os.path.basename(path))):
            raise ValueError(f"{name}={path!r} is named as a row file in rows_dir={rows_dir!r}: give it another name")
    names = os.listdir(rows_dir) if os.path.isdir(rows_dir) else []
    if not names:
        return []
    if ROWS_INDEX not in names:
        raise ValueError(f"rows_dir={rows_dir!r} holds other files and no {ROWS_INDEX}: give a new or empty folder")
    try:
        index = TokenRows(rows_dir).index  # every key, of the right kind; float16; files = ceil(rows / rows_per_file)
    except ValueError as err:
        raise ValueError(f"rows_dir={rows_dir!r} holds an {ROWS_INDEX} that split_for_web did not write ({err}): "
                         "its files are left alone; give a new or empty folder") from None
    if index["file_bytes"] != min(index["rows_per_file"], index["rows"]) * index["dim"] * 2 or \
            not re.fullmatch(r"[0-9a-f]{64}", index["sha256"]):
        raise ValueError(f"rows_dir={rows_dir!r} holds an {ROWS_INDEX} that split_for_web did not write (its "
                         "file_bytes or sha256 do not fit): its files are left alone; give a new or empty folder")
    n, d, per, files = index["rows"], index["dim"], index["rows_per_file"], index["files"]
    numbered = sorted(name for name in names if _ROW_FILE.fullmatch(name))
    unlisted = [name for name in numbered if int(name[:-4]) >= files or name != f"{int(name[:-4]):04d}.bin"]
    if unlisted:
        raise ValueError(f"rows_dir={rows_dir!r} holds numbered files its {ROWS_INDEX} does not list "
                         f"({', '.join(unlisted[:3])}{', ...' if len(unlisted) > 3 else ''}): they are left alone; "
                         "give a new or empty folder")
    # A split writes every listed file, each of its exact size (file_bytes, the last one its rows), and
    # together they hold the table whose sha256 the index gives. A folder missing one, or holding one of
    # another size or other bytes, is no earlier split (its index may be a look-alike over the user's own
    # files): nothing in it is deleted.
    wrong = [] if len(numbered) == files else [f"{files - len(numbered)} of them missing"]  # none unlisted: counts suffice
    for name in numbered if not wrong else []:
        path, k = os.path.join(rows_dir, name), int(name[:-4])
        size = min(per, n - k * per) * d * 2
        if not os.path.isfile(path):
            wrong.append(f"{name} is not a file")
        elif os.path.getsize(path) != size:
            wrong.append(f"{name} has {os.path.getsize(path)} bytes, not {size}")
    if not wrong:
        try:
            TokenRows(rows_dir).table  # noqa: B018 -- reading them checks finite float16 values, the index's sha256
        except ValueError as err:
            wrong.append(str(err))
    if wrong:
        raise ValueError(f"rows_dir={rows_dir!r} holds no complete split of the {files} row files its {ROWS_INDEX} "
                         f"lists ({'; '.join(wrong[:3])}{'; ...' if len(wrong) > 3 else ''}): its files are left "
                         "alone; give a new or empty folder")
    return numbered


def _float16_candidates(model, skip=()) -> dict:
    """``{name: float32 array}``: the initializers of ``model`` that :func:`_store_float16` stores as float16 --
    float32, at least two dimensions and ``_FLOAT16_MIN_ELEMENTS`` values (the weight matrices, the position
    table; not the 1-D biases and LayerNorm vectors), except the names in ``skip``.

    Raises:
        ValueError: one of them holds a value beyond float16's range (65504), naming it.
    """
    from onnx import TensorProto, numpy_helper

    out = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if t.name not in skip
           and t.data_type == TensorProto.FLOAT and len(t.dims) >= 2 and int(np.prod(t.dims)) >= _FLOAT16_MIN_ELEMENTS}
    for name, value in out.items():
        if np.abs(value).max() > np.finfo(np.float16).max:
            raise ValueError(f"initializer {name!r} holds {np.abs(value).max():.4g}, beyond float16's range")
    return out


def _store_float16(model, float16: dict) -> None:
    """Store the initializers ``float16`` (from :func:`_float16_candidates`) as float16 ``{name}_float16``, each
    cast back to float32 by a ``Cast`` node placed first in the graph (onnxruntime folds it when a session
    starts: computation stays float32). In place."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    nodes = [helper.make_node("Cast", [f"{name}_float16"], [name], to=TensorProto.FLOAT) for name in float16]
    nodes += list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    keep = [t for t in graph.initializer if t.name not in float16]
    keep += [numpy_helper.from_array(v.astype(np.float16), f"{name}_float16") for name, v in float16.items()]
    del graph.initializer[:]
    graph.initializer.extend(keep)


@contextlib.contextmanager
def _staged(rows_dir: str, dst: str, replace: Sequence[str]):
    """Stage a split's files: yields (a temporary folder inside ``rows_dir`` for the row files and
    the index, a temporary path beside ``dst``). When the block ends without an error, the files in
    ``replace`` are deleted and the staged ones moved into place (the index last, then dst); on any
    error everything staged, and any folder made for ``rows_dir``, is removed: nothing else changed.
    """
    made, path = [], os.path.abspath(rows_dir)
    while not os.path.exists(path):  # the folders about to be created, innermost first
        made.append(path)
        path = os.path.dirname(path)
    staging, dst_staged = None, _temporary_name(dst)
    try:
        os.makedirs(rows_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".partial-", dir=rows_dir)
        yield staging, dst_staged
    except BaseException as err:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.remove(dst_staged)
        for folder in made:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        if isinstance(err, OSError):
            raise ValueError(f"split_for_web could not write its files ({err}): dst={dst!r} and rows_dir={rows_dir!r} "
                             "are as they were") from None
        raise
    for name in replace:
        os.remove(os.path.join(rows_dir, name))
    for name in sorted(os.listdir(staging)):  # 0000.bin, ..., index.json last
        os.replace(os.path.join(staging, name), os.path.join(rows_dir, name))
    os.rmdir(staging)
    os.replace(dst_staged, dst)


def split_for_web(src: Union[str, os.PathLike], dst: Union[str, os.PathLike], rows_dir: Union[str, os.PathLike], *,
                  rows_per_file: int = 32, min_table_elements: int = 1 << 16) -> dict:
    """A float16 copy of an exported file whose token-embedding table lives in small row files.

    What the book serves for MiniLM: the page downloads the model (every weight matrix and the
    position table as float16, about a quarter of the float32 file) and then, for each text, only
    the files holding the rows of the text's tokens. float16 keeps every attention weight within
    about 0.002 of float32 mha_lib; no single file of 8-bit weights under 25 MB gets within 0.01
    (see :func:`quantize_for_web`), because the token table alone (30522 x 384) needs about 10
    bits a value and the matrices about 10 more.

    * The ``Gather`` (axis 0) that reads token rows from a float32 2-D table of at least
      ``min_table_elements`` values from the ``input_ids`` input is rewired: the file takes
      ``token_rows`` float16 (U, d) -- the rows of the U distinct ids of the batch -- and
      ``token_index`` int64 (B, L), each position's row in ``token_rows``; ``input_ids`` is no
      longer an input. :class:`TokenRows` (Python) and the page make both from ids.
    * Every other float32 initializer with at least two dimensions and 1024 values (the weight
      matrices, the position table; not the 1-D biases and LayerNorm vectors) is stored as float16 and cast back to float32 in the graph (``Cast``;
      onnxruntime folds it when the session starts). Computation stays float32.
    * The table is written as float16, ``rows_per_file`` rows per file (``0000.bin``, ``0001.bin``,
      ...; raw little-endian, the last file shorter), with ``index.json``:
      ``{"rows", "dim", "rows_per_file", "files", "dtype": "float16", "file_bytes", "sha256"}``
      (``sha256`` of the whole float16 table, also stored in the file's metadata, so that a
      session refuses another model's rows).

    Args:
        src: a file from :func:`export_onnx` with token ids (MiniLM).
        dst: the ``.onnx`` file to write (not ``src``); replaced once every file is written. Its
            name must end in ``.onnx`` (any case; other extensions would make onnx save a text
            format that :func:`onnx_session` cannot load, so they are refused).
        rows_dir: folder for the row files (created with its parents when missing): a new or
            empty folder, or one an earlier split wrote, whose numbered ``.bin`` files and
            ``index.json`` are replaced (its other files are kept). A folder counts as an earlier
            split's only when its ``index.json`` is one this function writes and the numbered
            files there are exactly those it lists, every one present with its exact size
            (``file_bytes``; the last one its ``rows % rows_per_file`` rows) and together the
            table of its ``sha256``. The earlier split may be of another model: its rows are then
            replaced by this one's, and the file split earlier into that folder no longer loads
            (:func:`onnx_session` refuses another model's rows); give each model its own folder.
        rows_per_file: rows per file, >= 1 (32 rows of MiniLM are 24,576 bytes).
        min_table_elements: the smallest table taken for the token table, >= 1.

    Returns:
        A dict: ``bytes`` (dst's size), ``rows_bytes`` (all row files), ``rows_files`` (their
        count), ``float16`` (initializers stored as float16), ``rows_per_file``, ``dim``, ``rows``.

    Raises:
        ValueError: ``src`` missing or not an ONNX file, ``dst`` not ending in ``.onnx`` or equal
            to ``src`` or to ``rows_dir``, ``rows_dir`` an existing file, under a file, or a non-empty folder without
            ``index.json``, with one split_for_web did not write, with numbered files that
            index does not list, or missing one it lists or holding one of another size or other
            bytes; a file that is already split or quantised, one with no such
            token table, a weight initializer holding NaN or infinite values (named, with their
            count) or beyond float16's range (65504), bad ``rows_per_file`` or
            ``min_table_elements``; a file that cannot be written (an unwritable folder, a full
            disk). Nothing is changed then: the files are written beside their places (a hidden
            folder in ``rows_dir``, a hidden file beside ``dst``) and moved there at the end.
        ImportError: onnx missing (names ``pip install "mha_lib[export]"``).
    """
    src = _checked_path(src, "src", must_exist=True)
    dst = _checked_onnx_output(dst, "dst")
    if os.path.abspath(src) == os.path.abspath(dst):
        raise ValueError(f"dst={dst!r} is src: write the copy to another file")
    if not isinstance(rows_dir, (str, os.PathLike)) or not os.fspath(rows_dir):
        raise ValueError(f"rows_dir must be a folder path (str or os.PathLike), got {rows_dir!r}")
    rows_dir = os.fspath(rows_dir)
    old_rows = _earlier_row_files(rows_dir, src, dst)  # ValueError unless every file to replace is ours
    rows_per_file = checks.positive_int(rows_per_file, "rows_per_file")
    min_table_elements = checks.positive_int(min_table_elements, "min_table_elements")
    onnx = _require("onnx")
    from onnx import TensorProto, helper, numpy_helper

    try:
        model = onnx.load(src)
    except Exception as err:  # DecodeError and friends
        raise ValueError(f"src={src!r} is not an ONNX file ({err})") from None
    meta = {p.key: p.value for p in model.metadata_props}
    for key in ("quantized", "web"):
        if METADATA_PREFIX + key in meta:
            raise ValueError(f"src={src!r} is already {meta[METADATA_PREFIX + key]!r}: split the file export_onnx wrote")
    _refuse_non_finite(model, src)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    ids_input = next((i for i in graph.input if i.name == "input_ids"), None)
    gathers = [n for n in graph.node if n.op_type == "Gather" and len(n.input) == 2 and n.input[1] == "input_ids"
               and n.input[0] in inits and len(inits[n.input[0]].dims) == 2
               and inits[n.input[0]].data_type == TensorProto.FLOAT
               and int(np.prod(inits[n.input[0]].dims)) >= min_table_elements
               and all(a.i == 0 for a in n.attribute if a.name == "axis")]
    users = [n for n in graph.node if "input_ids" in n.input]
    if ids_input is None or len(gathers) != 1 or len(users) != 1:
        raise ValueError(f"src={src!r} has no single token table (a Gather of >= {min_table_elements} float32 values "
                         "from input_ids that nothing else reads): nothing to split")
    gather = gathers[0]
    table = numpy_helper.to_array(inits[gather.input[0]])  # (V, d) float32
    if np.abs(table).max() > np.finfo(np.float16).max:
        raise ValueError(f"initializer {gather.input[0]!r} holds {np.abs(table).max():.4g}, beyond float16's range")
    float16 = _float16_candidates(model, skip=(gather.input[0],))  # refuses values beyond float16's range

    # the graph: token_rows (U, d) float16 and token_index (B, L) replace the table and input_ids
    V, d = table.shape
    index_type = helper.make_tensor_value_info("token_index", TensorProto.INT64, None)
    index_type.type.tensor_type.shape.CopyFrom(ids_input.type.tensor_type.shape)
    rows_type = helper.make_tensor_value_info("token_rows", TensorProto.FLOAT16, ["rows", d])
    position = [i for i, x in enumerate(graph.input) if x.name == "input_ids"][0]
    graph.input.remove(ids_input)
    graph.input.insert(position, index_type)
    graph.input.append(rows_type)
    nodes = []
    for node in graph.node:
        if node is gather:
            nodes += [helper.make_node("Cast", ["token_rows"], ["token_rows_float32"], to=TensorProto.FLOAT),
                      helper.make_node("Gather", ["token_rows_float32", "token_index"], list(node.output), axis=0)]
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    keep = [t for t in graph.initializer if t.name != gather.input[0]]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    _store_float16(model, float16)
    files = -(-V // rows_per_file)
    rows16 = table.astype("<f2")
    digest = hashlib.sha256(rows16.tobytes()).hexdigest()
    index = {"rows": int(V), "dim": int(d), "rows_per_file": rows_per_file, "files": files, "dtype": "float16",
             "file_bytes": min(rows_per_file, V) * d * 2, "sha256": digest}
    meta[METADATA_PREFIX + "web"] = f"float16 weights; token rows outside the file, {rows_per_file} per file"
    # where the rows lie, relative to the file's folder: onnx_session finds them there
    meta[METADATA_PREFIX + "token_rows"] = os.path.relpath(os.path.abspath(rows_dir),
                                                           os.path.dirname(os.path.abspath(dst))).replace(os.sep, "/")
    meta[METADATA_PREFIX + "token_rows_sha256"] = digest
    del model.metadata_props[:]
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model)

    # the files: written beside their places first, moved there only once all of them are written
    with _staged(rows_dir, dst, replace=old_rows) as (staging, dst_staged):
        onnx.save(model, dst_staged)
        for k in range(files):
            rows16[k * rows_per_file:(k + 1) * rows_per_file].tofile(os.path.join(staging, f"{k:04d}.bin"))
        with open(os.path.join(staging, ROWS_INDEX), "w", encoding="utf-8") as f:
            json.dump(index, f, indent=1)
    return {"bytes": os.path.getsize(dst), "rows_bytes": int(rows16.nbytes), "rows_files": files,
            "float16": len(float16), "rows_per_file": rows_per_file, "dim": int(d), "rows": int(V)}
