"""The linters, as `make lint` runs them, so that CI's `make test` lints too: ruff over the whole checkout
(Python files and notebooks; rules in pyproject.toml's [tool.ruff]), TypeScript's checker over the live views'
JSDoc types (jsconfig.json) and Biome's linter over the JavaScript (biome.jsonc)."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

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


JSBIN = ROOT / "tests" / "browser" / "node_modules" / ".bin"


def _js_tool(name: str) -> Path:
    tool = JSBIN / name
    if not tool.exists():
        import os
        if os.environ.get("MHA_REQUIRE_BOOK") == "1":
            pytest.fail(f"{tool} is missing: npm ci --prefix tests/browser (make does it)")
        pytest.skip(f"{name} is not installed: npm ci --prefix tests/browser")
    return tool


def test_typescript_finds_no_type_error_in_the_live_views():
    """The JSDoc types of mha_lib/web/*.mjs, checked by TypeScript (checkJs, jsconfig.json)."""
    result = subprocess.run([str(_js_tool("tsc")), "-p", "jsconfig.json"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"tsc -p jsconfig.json (make lint):\n{result.stdout[-4000:]}{result.stderr}"


def test_biome_finds_nothing_in_the_javascript():
    result = subprocess.run([str(_js_tool("biome")), "lint", "--error-on-warnings", "--max-diagnostics=20", "."],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"biome lint (make lint):\n{result.stdout[-4000:]}{result.stderr[-4000:]}"


def test_make_lint_runs_the_javascript_checks_too():
    dry = subprocess.run(["make", "-n", "-W", "requirements.txt", "lint"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert "tsc -p jsconfig.json" in dry and "biome lint" in dry
