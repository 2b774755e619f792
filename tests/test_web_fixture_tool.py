"""tools/web_fixture.py's writing of the fixture: whole or absent, even with several writers at once (node's
test runner runs each test file in a process of its own, and each may make the missing fixture)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import web_fixture  # noqa: E402


def test_two_writers_of_one_fixture_both_succeed_and_leave_it_whole(tmp_path, monkeypatch):
    """Both wrote OUT.json.tmp: the second truncated the first's file, the first renamed it (half written) into
    place, and the second's rename then failed with FileNotFoundError."""
    out = tmp_path / "fixture" / "abc.json"
    nested = []

    def write(path: Path):
        text = json.dumps({"cases": [1, 2, 3]})
        with open(path, "w", encoding="utf-8") as f:
            f.write(text[:5])  # half written when ...
        if not nested:  # ... another process makes the same fixture
            nested.append("running")
            nested[0] = web_fixture.main([str(out)])
        with open(path, "a", encoding="utf-8") as f:
            f.write(text[5:])

    monkeypatch.setattr(web_fixture, "write_fixture", write)
    assert web_fixture.main([str(out)]) == 0 and nested == [0]
    assert json.loads(out.read_text()) == {"cases": [1, 2, 3]}
    assert [p.name for p in out.parent.iterdir()] == ["abc.json"]


def test_a_failed_write_leaves_no_fixture_and_no_temporary_file(tmp_path, monkeypatch):
    out = tmp_path / "abc.json"

    def write(path: Path):
        path.write_text("{half", encoding="utf-8")
        raise RuntimeError("mha_lib failed")

    monkeypatch.setattr(web_fixture, "write_fixture", write)
    try:
        web_fixture.main([str(out)])
    except RuntimeError:
        pass
    assert list(tmp_path.iterdir()) == []
