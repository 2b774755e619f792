"""The canonical Colab setup cell, built from _config.yml's `repository` section.

Every chapter notebook starts with this cell, verbatim (tests/test_book.py checks it).
Print it with:  python tools/colab_setup_cell.py
"""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

TEMPLATE = '''\
# Colab setup: installs mha_lib from the book's repository. Does nothing outside Colab.
import sys

if "google.colab" in sys.modules:
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q",
         "mha_lib[chapters] @ git+{url}@{branch}"],
        check=True,
    )'''


def repository(config_path: Path = ROOT / "_config.yml") -> tuple[str, str]:
    """The book's repository URL and branch, from _config.yml."""
    config = yaml.safe_load(config_path.read_text())
    repo = config["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def setup_cell(config_path: Path = ROOT / "_config.yml") -> str:
    """Source of the setup cell for the configured repository URL and branch."""
    url, branch = repository(config_path)
    return TEMPLATE.format(url=url, branch=branch)


if __name__ == "__main__":
    print(setup_cell())
