"""Re-run chapter notebooks in place (what `make execute` calls).

Each notebook runs top to bottom in a fresh `python3` kernel with nbclient, with an
explicit per-cell timeout, and the widget state of that run (only) is stored in the notebook so
that the static HTML book can show live widgets without a kernel.

Usage: python tools/execute_notebooks.py [--timeout SECONDS] [NOTEBOOK ...]
       (no notebook given: every chapters/*.ipynb)
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def execute(path: Path, timeout: int) -> float:
    """Execute one notebook in place; return the wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("widgets", None)  # the state of this run only: no stale widgets (and their images) stay behind
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    nbformat.write(nb, path)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout in seconds")
    args = parser.parse_args()
    notebooks = args.notebooks or sorted((ROOT / "chapters").glob("*.ipynb"))
    # Deterministic, offline runs: no hub access, no progress bars in outputs.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    for path in notebooks:
        elapsed = execute(path, args.timeout)
        print(f"executed {path} in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
