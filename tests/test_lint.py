"""ruff over the whole checkout (Python files and notebooks), as `make lint` runs it, so that CI's
`make test` lints too. The rules live in pyproject.toml's [tool.ruff]."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check found problems (make lint):\n{result.stdout}{result.stderr}"


def test_make_lint_runs_the_same_check():
    dry = subprocess.run(["make", "-n", "-W", "requirements.txt", "lint"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert "-m ruff check ." in dry


def test_ruff_is_pinned_and_configured():
    """A new ruff release brings new rules: the version is pinned, and the rules are chosen, not defaults."""
    requirements = (ROOT / "requirements.txt").read_text()
    assert any(line.split("#")[0].strip().startswith("ruff==") for line in requirements.splitlines())
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert {"F", "B"} <= set(lint["select"])
