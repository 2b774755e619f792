"""The token rows that :func:`split_for_web` writes outside the file, read back for a batch (:class:`TokenRows`)."""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from .feeds import _as_array

#: The file :func:`split_for_web` writes next to the row files, describing them (JSON).
ROWS_INDEX = "index.json"


class TokenRows:
    """The token-embedding rows that :func:`split_for_web` wrote, read back for a batch of ids.

    Args:
        folder: the ``rows_dir`` given to :func:`split_for_web` (holds ``index.json`` and the
            ``.bin`` files).
        expected: what the file that reads these rows says of them (``onnx_session`` passes it):
            ``rows`` (its vocabulary size), ``dim`` (the width of its ``token_rows`` input) and
            ``sha256`` (of the table it was split from); each given one must match.

    Attributes:
        table: (rows, dim) float16 numpy array, every row (read on first use, file by file, and
            checked: each file's size, finite values, the whole table's sha256).

    Raises:
        ValueError: a folder without a readable ``index.json`` (or one missing a key, or with
            values of the wrong kind), one that does not match ``expected`` (another model's rows),
            and, when the rows are read, a row file missing or of the wrong size, a value that is
            not finite, or a table whose sha256 differs from the index's.
    """

    _KEYS = {"rows": int, "dim": int, "rows_per_file": int, "files": int, "dtype": str, "file_bytes": int, "sha256": str}

    def __init__(self, folder: Union[str, os.PathLike], expected: Optional[Mapping[str, Any]] = None):
        if not isinstance(folder, (str, os.PathLike)) or not os.path.isfile(os.path.join(folder, ROWS_INDEX)):
            raise ValueError(f"folder={folder!r} holds no {ROWS_INDEX}: give the rows_dir split_for_web wrote")
        self.folder = os.fspath(folder)
        path = os.path.join(self.folder, ROWS_INDEX)
        try:
            with open(path, encoding="utf-8") as f:
                index = json.load(f)
        except (OSError, ValueError) as err:
            raise ValueError(f"{path!r} is not readable JSON ({err})") from None
        for key, kind in self._KEYS.items():
            if not isinstance(index, dict) or not isinstance(index.get(key), kind) or isinstance(index.get(key), bool):
                raise ValueError(f"{path!r}: {key!r} must be {'an integer' if kind is int else 'a string'}, got "
                                 f"{index.get(key) if isinstance(index, dict) else index!r:.60}")
        n, per = index["rows"], index["rows_per_file"]
        if index["dtype"] != "float16" or min(n, per, index["dim"]) < 1 or index["files"] != -(-n // per):
            raise ValueError(f"{path!r} describes no float16 table of rows >= 1 in ceil(rows / rows_per_file) files: "
                             f"{ {k: index[k] for k in ('dtype', 'rows', 'dim', 'rows_per_file', 'files')} }")
        for key, value in (expected or {}).items():
            if value is not None and index.get(key) != value:
                raise ValueError(f"{path!r} has {key}={index.get(key)!r:.70} but the file reading them expects "
                                 f"{value!r:.70}: these are another model's rows")
        self.index = index
        self._table: Optional[np.ndarray] = None

    @property
    def table(self) -> np.ndarray:
        if self._table is None:
            n, d, per = self.index["rows"], self.index["dim"], self.index["rows_per_file"]
            parts = []
            for k in range(self.index["files"]):
                path = os.path.join(self.folder, f"{k:04d}.bin")
                want = min(per, n - k * per) * d
                part = np.fromfile(path, dtype="<f2") if os.path.isfile(path) else np.zeros(0, "<f2")
                if part.size != want:
                    raise ValueError(f"{path!r} holds {part.size} values, not {want}: the row files are incomplete")
                parts.append(part.reshape(-1, d))
            table = np.concatenate(parts)
            if not np.isfinite(table).all():
                raise ValueError(f"the rows in {self.folder!r} hold NaN or infinite values")
            if hashlib.sha256(table.tobytes()).hexdigest() != self.index["sha256"]:
                raise ValueError(f"the rows in {self.folder!r} are not the table {ROWS_INDEX} describes (sha256 differs)")
            self._table = table
        return self._table

    def feeds(self, input_ids) -> Dict[str, np.ndarray]:
        """``token_rows`` (U, dim) float16 and ``token_index`` (B, L) int64 for ``input_ids`` (B, L),
        integers in [0, rows) (checked by the caller, :func:`run_onnx`)."""
        ids = _as_array(input_ids, "input_ids").astype(np.int64, copy=False)
        unique, index = np.unique(ids, return_inverse=True)
        return {"token_rows": self.table[unique], "token_index": index.reshape(ids.shape).astype(np.int64)}
