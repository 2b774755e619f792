"""The Colab setup cell, run as Colab would run it.

A fresh virtual environment stands in for a Colab runtime: it already has torch and
numpy (Colab ships them), and a stand-in ``google.colab`` module is imported first.
The chapter's setup cell then installs mha_lib from a ``git+file://`` clone of this
repository (the cell's https URL swapped for the clone's), and the chapter's next code
cells run in that environment.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from colab_setup_cell import repository, setup_cell  # noqa: E402

# How many code cells after the setup cell to run: enough to import mha_lib and the
# chapter's libraries and to seed, without running the chapter's experiments.
CELLS_AFTER_SETUP = 2


def run(cmd, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def chapter_cells() -> list[str]:
    """Setup cell plus the first few cells of the first chapter in the book, if any."""
    chapters = sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
    if not chapters:
        return [setup_cell(), "import mha_lib\nmha_lib.set_seed(0)\nprint(mha_lib.__version__)"]
    nb = nbformat.read(chapters[0], as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    return code[: 1 + CELLS_AFTER_SETUP]


def lend_preinstalled(names, venv: Path, folder: Path) -> None:
    """Make the distributions ``names`` and what they require importable (and known to pip) in ``venv``,
    as Colab's preinstalled packages are, by linking this environment's copies into ``folder`` and
    adding it to the venv's path (a ``.pth`` file): unpacking torch's wheel again would take minutes."""
    import importlib.metadata as md
    import re

    folder.mkdir()
    todo, seen = list(names), set()
    while todo:
        dist = md.distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for requirement in dist.requires or ():  # what it needs, extras and markers aside
            if "extra ==" not in requirement:
                todo.append(re.match(r"[A-Za-z0-9._-]+", requirement).group(0))
        tops = {Path(f).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in tops:
            source = Path(dist.locate_file(top))
            if source.exists() and not (folder / top).exists():
                (folder / top).symlink_to(source)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "colab_preinstalled.pth").write_text(str(folder) + "\n")


@pytest.mark.slow
def test_setup_cell_installs_mha_lib_in_a_fresh_colab_like_env(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout of the book")
    url, branch = repository()
    clone = tmp_path / "clone"
    run(["git", "clone", "--quiet", "--branch", branch, str(ROOT), str(clone)])
    venv = tmp_path / "colab-venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    # PIP_COMPILE=0: pip leaves byte-compiling to the first imports (the install is otherwise the setup cell's own)
    env = dict(os.environ, PIP_CONSTRAINT=str(ROOT / "constraints.txt"), PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_COMPILE="0", HF_HUB_OFFLINE="1", TQDM_DISABLE="1", MPLBACKEND="Agg")
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    # What a Colab runtime already has before the setup cell runs: a recent pip, torch and numpy.
    run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], env=env)
    lend_preinstalled(["torch", "numpy"], venv, tmp_path / "preinstalled")
    run([str(python), "-c", "import torch, numpy"], env=env)

    stand_in = tmp_path / "stand_in"
    (stand_in / "google" / "colab").mkdir(parents=True)
    (stand_in / "google" / "__init__.py").write_text("")
    (stand_in / "google" / "colab" / "__init__.py").write_text('"""Stand-in for Colab\'s module."""\n')

    cells = chapter_cells()
    assert cells[0] == setup_cell(), "the chapter's first code cell is not the setup cell"
    cells[0] = cells[0].replace(f"git+{url}@{branch}", f"git+file://{clone}@{branch}")
    assert f"git+file://{clone}" in cells[0]
    script = "import google.colab\n" + "\n".join(
        f"exec(compile({cell!r}, 'cell {i}', 'exec'))" for i, cell in enumerate(cells)
    ) + textwrap.dedent(
        """
        import mha_lib, importlib.metadata as md
        print("installed", md.version("mha_lib"), mha_lib.__file__)
        """
    )
    workdir = tmp_path / "content"  # Colab's working directory holds no copy of the book
    workdir.mkdir()
    result = run([str(python), "-c", script], env=dict(env, PYTHONPATH=str(stand_in)), cwd=workdir)
    assert "installed" in result.stdout
    assert str(venv) in result.stdout, "mha_lib was not imported from the fresh environment"


def test_setup_cell_skips_install_without_colab(tmp_path):
    # The same cell in a plain Python: no google.colab, so no pip call at all.
    script = "import subprocess\nsubprocess.run = None\n" + setup_cell() + "\nprint('skipped')"
    result = run([sys.executable, "-c", script])
    assert result.stdout.strip() == "skipped"
