"""The book's skeleton: configuration, chapter notebooks, packaging and the pre-build check."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import check_notebooks  # noqa: E402
from colab_setup_cell import repository, setup_cell  # noqa: E402

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def first_code_cell(nb) -> str:
    return next(cell.source for cell in nb.cells if cell.cell_type == "code")


# --- configuration ---------------------------------------------------------------------

def test_config_names_repository_branch_and_launch_buttons():
    repo = CONFIG["repository"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repo["url"]), repo["url"]
    assert repo["branch"] == "main"
    assert "path_to_book" in repo
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert CONFIG["html"]["use_repository_button"] is True


def test_config_renders_committed_notebooks_with_math_and_bibliography():
    assert CONFIG["execute"]["execute_notebooks"] == "off"
    extensions = set(CONFIG["parse"]["myst_enable_extensions"])
    assert {"dollarmath", "amsmath", "colon_fence"} <= extensions
    for bib in CONFIG["bibtex_bibfiles"]:
        assert (ROOT / bib).exists(), bib


def test_every_cited_key_is_in_the_bibliography():
    bib = (ROOT / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    pages = [ROOT / "intro.md", *(ROOT / "chapters").glob("*.md")]
    texts = [p.read_text() for p in pages]
    for nb_path in CHAPTERS:
        nb = nbformat.read(nb_path, as_version=4)
        texts += [c.source for c in nb.cells if c.cell_type == "markdown"]
    cited = set()
    for text in texts:
        for group in re.findall(r"\{cite[:\w]*\}`([^`]+)`", text):
            cited.update(k.strip() for k in group.split(","))
    assert cited, "no citations found at all"
    assert cited <= keys, f"cited but missing from references.bib: {sorted(cited - keys)}"


def test_every_bibliography_entry_is_cited_and_the_labels_are_author_year():
    keys = re.findall(r"^@\w+\{([^,]+),", (ROOT / "references.bib").read_text(), re.M)
    text = "".join(p.read_text(encoding="utf-8") for p in [*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("chapters/*.md"),
                                                            ROOT / "intro.md"])
    cited = {k.strip() for group in re.findall(r"\{cite[a-z:]*\}`([^`]+)`", text) for k in group.split(",")}
    assert set(keys) <= cited, f"never cited: {sorted(set(keys) - cited)}"
    config = (ROOT / "_config.yml").read_text()
    assert "bibtex_reference_style: author_year" in config and "bibtex_default_style: authoryear" in config


def test_every_toc_entry_exists():
    assert check_notebooks.check(ROOT) == []


# --- chapter notebooks -----------------------------------------------------------------

def test_every_chapter_notebook_is_in_the_toc():
    listed = {entry for entry in check_notebooks.toc_files(TOC)}
    for path in CHAPTERS:
        assert str(path.relative_to(ROOT).with_suffix("")) in listed, f"{path.name} missing from _toc.yml"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_chapter_is_executed_without_errors_on_python3(path):
    assert check_notebooks.notebook_problems(path) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_chapter_starts_with_the_configured_colab_setup_cell(path):
    nb = nbformat.read(path, as_version=4)
    assert first_code_cell(nb) == setup_cell()
    url, branch = repository()
    assert f"git+{url}@{branch}" in first_code_cell(nb)


def test_setup_cell_follows_the_configured_url(tmp_path):
    config = dict(CONFIG, repository={"url": "https://github.com/someone/else", "branch": "dev"})
    path = tmp_path / "_config.yml"
    path.write_text(yaml.safe_dump(config))
    assert "git+https://github.com/someone/else@dev" in setup_cell(path)


def test_setup_cell_does_nothing_outside_colab():
    namespace: dict = {}
    calls = []
    import subprocess as real_subprocess

    original = real_subprocess.run
    real_subprocess.run = lambda *a, **k: calls.append(a)  # would install if it ran
    try:
        exec(compile(setup_cell(), "<setup cell>", "exec"), namespace)
    finally:
        real_subprocess.run = original
    assert "google.colab" not in sys.modules
    assert calls == []


# --- the pre-build check fails loudly, naming the file ---------------------------------

def make_book_copy(tmp_path: Path) -> Path:
    root = tmp_path / "book"
    root.mkdir()
    for name in ("_toc.yml", "_config.yml", "intro.md"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "chapters", root / "chapters")
    return root


def run_check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "check_notebooks.py"), str(root)],
        capture_output=True, text=True,
    )


def test_check_passes_on_the_real_book(tmp_path):
    result = run_check(make_book_copy(tmp_path))
    assert result.returncode == 0, result.stderr


def test_toc_typo_fails_naming_the_file(tmp_path):
    root = make_book_copy(tmp_path)
    toc = (root / "_toc.yml").read_text().replace("chapters/notation", "chapters/notaton")
    (root / "_toc.yml").write_text(toc)
    result = run_check(root)
    assert result.returncode == 1
    assert "_toc.yml" in result.stderr and "chapters/notaton" in result.stderr


def write_notebook(path: Path, cells) -> None:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_unexecuted_cell_fails_naming_the_file(tmp_path):
    root = make_book_copy(tmp_path)
    write_notebook(root / "chapters" / "99_draft.ipynb", [nbformat.v4.new_code_cell("1 + 1")])
    result = run_check(root)
    assert result.returncode == 1
    assert "99_draft.ipynb" in result.stderr and "never executed" in result.stderr


def test_error_output_fails_naming_the_file(tmp_path):
    root = make_book_copy(tmp_path)
    cell = nbformat.v4.new_code_cell("1 / 0", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])]
    write_notebook(root / "chapters" / "99_broken.ipynb", [cell])
    result = run_check(root)
    assert result.returncode == 1
    assert "99_broken.ipynb" in result.stderr and "ZeroDivisionError" in result.stderr


@pytest.mark.parametrize("metadata, word", [
    ({}, "figure.name, figure.caption, image.alt"),
    ({"mystnb": {"figure": {"name": "fig-x", "caption": "A caption."}, "image": {"alt": "chapters/fig.png"}}},
     "looks like a file name"),
])
def test_figure_without_caption_or_alt_fails(tmp_path, metadata, word):
    root = make_book_copy(tmp_path)
    cell = nbformat.v4.new_code_cell("plt.show()", execution_count=1, metadata=metadata)
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})]
    write_notebook(root / "chapters" / "99_figure.ipynb", [cell])
    result = run_check(root)
    assert result.returncode == 1
    assert "99_figure.ipynb" in result.stderr and word in result.stderr


def test_numbered_figure_cell_with_a_second_output_fails(tmp_path):
    """MyST-NB wraps every output of a cell with mystnb.figure in the figure: a table shown beside it
    became a second figure with the same name, and the build stopped on the duplicate target."""
    root = make_book_copy(tmp_path)
    metadata = {"mystnb": {"figure": {"name": "fig-x", "caption": "A caption."}, "image": {"alt": "A line that rises."}}}
    cell = nbformat.v4.new_code_cell("display(table(rows, cols))\nplt.show()", execution_count=1, metadata=metadata)
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": "<table></table>", "text/plain": "t"}),
                    nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})]
    write_notebook(root / "chapters" / "99_two.ipynb", [cell])
    result = run_check(root)
    assert result.returncode == 1
    assert "99_two.ipynb" in result.stderr and "2 outputs in one numbered figure" in result.stderr, result.stderr
    cell.outputs = cell.outputs[1:]  # the figure alone passes
    write_notebook(root / "chapters" / "99_two.ipynb", [cell])
    assert run_check(root).returncode == 0


def _glued_figure_cell(glued: bool):
    cell = nbformat.v4.new_code_cell('glue("fig_x", fig, display=False)\nplt.show()', execution_count=1,
                                     metadata={"tags": ["remove-output"]})
    png = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
    cell.outputs = [nbformat.v4.new_output("display_data", data=png)]
    if glued:
        cell.outputs.insert(0, nbformat.v4.new_output(
            "display_data", data={f"application/papermill.record/{k}": v for k, v in png.items()},
            metadata={"scrapbook": {"name": "fig_x", "mime_prefix": "application/papermill.record/"}}))
    return cell


PASTE = "```{glue:figure} fig_x\n:name: fig-x\n:alt: A line that rises.\n\nA caption.\n```"


@pytest.mark.parametrize("cells, word", [
    (lambda: [_glued_figure_cell(False)], "without gluing it"),
    (lambda: [nbformat.v4.new_markdown_cell(PASTE)], "which no code cell glues"),
    (lambda: [nbformat.v4.new_markdown_cell(PASTE.replace(":alt: A line that rises.\n", "")),
              _glued_figure_cell(True)], "lacks :alt:"),
])
def test_figure_moved_by_glue_must_be_glued_and_described(tmp_path, cells, word):
    root = make_book_copy(tmp_path)
    write_notebook(root / "chapters" / "99_glue.ipynb", cells())
    result = run_check(root)
    assert result.returncode == 1
    assert "99_glue.ipynb" in result.stderr and word in result.stderr, result.stderr


def test_figure_moved_by_glue_passes_when_complete(tmp_path):
    root = make_book_copy(tmp_path)
    write_notebook(root / "chapters" / "99_glue.ipynb",
                   [nbformat.v4.new_markdown_cell(PASTE), _glued_figure_cell(True)])
    result = run_check(root)
    assert result.returncode == 0, result.stderr


def test_wrong_kernel_fails(tmp_path):
    root = make_book_copy(tmp_path)
    path = root / "chapters" / "99_kernel.ipynb"
    write_notebook(path, [nbformat.v4.new_code_cell("1", execution_count=1)])
    nb = json.loads(path.read_text())
    nb["metadata"]["kernelspec"]["name"] = "venv-mine"
    path.write_text(json.dumps(nb))
    result = run_check(root)
    assert result.returncode == 1 and "venv-mine" in result.stderr


def test_book_command_runs_the_check_before_building():
    dry = subprocess.run(["make", "-n", "-W", "requirements.txt", "book"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    check_at = dry.index("tools/check_notebooks.py")
    build_at = dry.index("jupyter-book build")
    assert check_at < build_at
    assert "--warningiserror" in dry and "--keep-going" in dry


# --- packaging and the two commands ----------------------------------------------------

def test_package_is_listed_explicitly_with_loose_dependencies():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = project["tool"]["setuptools"]["packages"]
    on_disk = sorted(".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "mha_lib").rglob("__init__.py"))
    assert sorted(packages) == on_disk and packages[0] == "mha_lib"  # mha_lib and its subpackages, nothing else
    for dep in project["project"]["dependencies"]:
        assert "==" not in dep and "<" not in dep, f"{dep!r} must be a loose lower bound"
    assert {"viz", "pretrained", "book"} <= set(project["project"]["optional-dependencies"])


@pytest.mark.slow
def test_import_needs_only_torch_and_numpy():
    # Whatever torch and numpy pull in themselves is allowed; mha_lib must add nothing
    # beyond the standard library (the extras load lazily, in mha_lib.viz/pretrained).
    code = (
        "import sys, torch, numpy\n"
        "before = set(sys.modules)\n"
        "import mha_lib\n"
        "mha_lib.MultiHeadAttention, mha_lib.set_seed, mha_lib.default_device\n"
        "from mha_lib import *\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "extra = sorted(new - set(sys.stdlib_module_names) - {'mha_lib'})\n"
        "assert not extra, extra\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_version_matches_changelog():
    import mha_lib

    assert re.fullmatch(r"\d+\.\d+\.\d+", mha_lib.__version__)
    assert f"## {mha_lib.__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_license_covers_code_and_prose():
    text = (ROOT / "LICENSE").read_text()
    assert "MIT License" in text and "CC BY 4.0" in text


def test_ci_calls_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^(make \w+)\s+# runs every test", readme, flags=re.M)
    assert commands == ["make test"]
    lines = [l.strip() for l in (ROOT / ".ci" / "run").read_text().splitlines()]
    body = [l for l in lines if l and not l.startswith("#") and not l.startswith("set ") and not l.startswith("cd ")]
    assert body == commands


def test_every_pip_call_uses_the_constraints_file():
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in makefile
    pins = (ROOT / "constraints.txt").read_text()
    assert re.search(r"^torch==2\.13\.0$", pins, flags=re.M)
    for line in makefile.splitlines():
        if "pip install" in line and "PIP :=" not in line:
            pytest.fail(f"a pip call bypasses $(PIP) and its constraints: {line.strip()}")


# --------------------------------------------------------------------------- outputs on any CPU
def _pins_one_thread(path: Path) -> bool:
    """Whether a chapter sets torch to one thread in its first code cells (its sums then run in the
    same order whatever the machine's core count)."""
    code = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"][:4]
    return any(re.search(r"torch\.set_num_threads\((1|THREADS)\)", src) for src in code)


UNPINNED = [p for p in CHAPTERS if not _pins_one_thread(p)]


def test_some_chapters_run_on_the_default_thread_count():
    """The second nbval pass below has something to check (chapter 2 and the interactive page
    run MiniLM with torch's default threads)."""
    assert UNPINNED, "every chapter pins one thread: drop the one-thread nbval pass"


@pytest.mark.slow
@pytest.mark.parametrize("path", UNPINNED, ids=lambda p: p.name)
def test_chapter_outputs_do_not_depend_on_the_thread_count(path):
    """`make test` runs nbval over every chapter with torch's default thread count (2 on this
    project's machines); chapters that do not pin one thread are run again here with one, so a
    checked output that hangs on the order of float sums (a tie broken by noise, a hash of float
    bytes) fails on this machine, not only on another one (hardening 3, item 18)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
         "-p", "no:xdist", "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"), "-q", str(path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"nbval with one thread failed on {path.name}:\n{proc.stdout[-6000:]}"
