"""tools/export_site_models.py's content-keyed cache (_build/models-cache): an entry is served only whole and
unchanged, concurrent writers do not break each other, and the key follows every file that decides an export."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import export_site_models as esm  # noqa: E402

KEY = "ab" * 32


def _make(calls):
    def make(dest: Path) -> dict:
        calls.append(dest)
        dest.write_bytes(b"onnx" * 1000)
        rows = esm.rows_dir(dest)
        rows.mkdir()
        (rows / "0000.bin").write_bytes(b"rows" * 100)
        return {"kind": "toy", "checked": {}}
    return make


def test_a_second_call_is_served_from_the_cache(tmp_path):
    calls = []
    folder, meta, hit = esm.cached(tmp_path, "m", KEY, _make(calls))
    assert not hit and len(calls) == 1
    again, meta2, hit = esm.cached(tmp_path, "m", KEY, _make(calls))
    assert hit and again == folder and meta2 == meta and len(calls) == 1


@pytest.mark.parametrize("damage", ["truncate onnx", "flip a byte", "delete rows", "truncate meta", "meta not json",
                                    "extra row"])
def test_a_damaged_entry_is_never_served(tmp_path, damage):
    """It was: meta.json present meant a hit, whatever the files held (a truncated .onnx went to the site)."""
    calls = []
    folder, _, _ = esm.cached(tmp_path, "m", KEY, _make(calls))
    onnx, rows, meta = folder / "m.onnx", esm.rows_dir(folder / "m.onnx"), folder / "meta.json"
    if damage == "truncate onnx":
        onnx.write_bytes(onnx.read_bytes()[:100])
    elif damage == "flip a byte":
        onnx.write_bytes(b"X" + onnx.read_bytes()[1:])
    elif damage == "delete rows":
        (rows / "0000.bin").unlink()
    elif damage == "truncate meta":
        meta.write_text(meta.read_text()[:20])
    elif damage == "meta not json":
        meta.write_text("[1, 2]")
    else:
        (rows / "0001.bin").write_bytes(b"?")
    folder2, meta2, hit = esm.cached(tmp_path, "m", KEY, _make(calls))
    assert not hit and len(calls) == 2  # exported again
    assert (folder2 / "m.onnx").read_bytes() == b"onnx" * 1000 and "checked" in meta2


def test_concurrent_writers_of_one_entry_do_not_break_each_other(tmp_path):
    """Both used {id}-{key}.tmp: the second removed the first's half-written folder, and the first's rename then
    failed (or published the second's half)."""
    calls = []
    inner = {}

    def racing(dest: Path) -> dict:
        if not inner:  # while this writer exports, another process writes the same entry
            inner["result"] = esm.cached(tmp_path, "m", KEY, _make(calls))
        return _make(calls)(dest)

    folder, meta, hit = esm.cached(tmp_path, "m", KEY, racing)
    assert inner["result"][0] == folder
    assert (folder / "m.onnx").read_bytes() == b"onnx" * 1000
    assert esm.cached(tmp_path, "m", KEY, _make(calls))[2]  # a whole, valid entry is left
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]


def test_the_key_follows_the_model_code_an_export_traces():
    """The toy exports trace mha_lib's model code (mha_lib/model, core, efficient, pretrained), which the key
    left out: an edit to the attention or the encoder served the old graph from the cache."""
    hashed = {p.resolve() for p in esm.code_files()}
    for module in ("model/encoder.py", "core/functional.py", "core/multi_head.py", "efficient/windowed.py",
                   "pretrained/__init__.py", "export/common.py", "tasks/shipped.py"):
        assert (ROOT / "mha_lib" / module).resolve() in hashed, module
    assert Path(esm.__file__).resolve() in hashed
