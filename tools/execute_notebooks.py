"""Re-run chapter notebooks in place (what `make execute` calls).

Each notebook runs top to bottom in a fresh `python3` kernel with nbclient, with an
explicit per-cell timeout, and the widget state of that run (only) is stored in the notebook so
that the static HTML book can show live widgets without a kernel.

Kernel-only widgets are not stored: an anywidget model (mha_lib.live's LiveWidget) needs its
kernel to compute anything, and the book's widget manager (html-manager's embed.js) knows only
the standard widget modules -- it would try to fetch module "anywidget" from a CDN (a network
request and a console error) and draw nothing. Their models, the models only they used (their
layouts), and the widget view in their outputs are dropped; the outputs keep their text/html,
which the book shows (mha_lib.live.live_view writes both).

Figures in two languages: the kernel's environment names the figure label catalog and the Chinese font
(``MHA_FIGURE_LABELS``, ``MHA_ZH_FONT``), so that a chapter's ``viz.bilingual_figures()`` stores a Chinese
copy with every figure (``mha_lib.viz.bilingual``); the font is the TTF ``npm ci --prefix tests/browser``
installs (``make execute`` runs it first).

Usage: python tools/execute_notebooks.py [--timeout SECONDS] [NOTEBOOK ...]
       (no notebook given: every chapters/*.ipynb)
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "_ext"))
from mha_book_assets import DRAWING_FONT  # noqa: E402  (the TTF the Chinese figures are drawn with)

LABELS = ROOT / "locale" / "zh_CN" / "figure_labels.yml"
FONT = ROOT / "tests" / "browser" / "node_modules" / DRAWING_FONT
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
KERNEL_ONLY_MODULES = {"anywidget"}  # widget modules whose views need a running kernel


def _references(state: dict) -> set:
    """Model ids a widget's state refers to ("IPY_MODEL_<id>" anywhere in it)."""
    return set(re.findall(r"IPY_MODEL_([0-9a-f]+)", json.dumps(state)))


def drop_kernel_widgets(nb) -> int:
    """Drop kernel-only widget models (KERNEL_ONLY_MODULES), the models only they referred to,
    and their views in the outputs; drop the widget metadata when no model is left. Returns
    how many models were dropped."""
    widgets = nb.metadata.get("widgets", {})
    models = widgets.get(WIDGET_STATE, {}).get("state", {})
    dropped = {mid for mid, m in models.items() if m.get("model_module") in KERNEL_ONLY_MODULES}
    while True:  # their layouts and styles, unless a kept model uses them too
        kept = [m for mid, m in models.items() if mid not in dropped]
        used = set().union(*(_references(m) for m in kept)) if kept else set()
        orphans = {ref for mid in dropped for ref in _references(models[mid])
                   if ref in models and ref not in dropped and ref not in used}
        if not orphans:
            break
        dropped |= orphans
    for mid in dropped:
        del models[mid]
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is not None and view.get("model_id") in dropped:
                del output["data"][WIDGET_VIEW]  # the text/html stays
    if WIDGET_STATE in widgets and not models:
        del nb.metadata["widgets"]
    return len(dropped)


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
    drop_kernel_widgets(nb)
    nbformat.write(nb, path)
    return elapsed


def figure_environment(env) -> None:
    """Name the figure label catalog and the Chinese font in ``env`` (the kernel inherits it), unless set.

    Raises:
        SystemExit: the font is missing (with the command that installs it).
    """
    from mha_lib.viz.bilingual import FONT_ENV, LABELS_ENV  # the names the chapters read

    env.setdefault(LABELS_ENV, str(LABELS))
    env.setdefault(FONT_ENV, str(FONT))
    if not Path(env[FONT_ENV]).is_file():
        raise SystemExit(f"the Chinese figures' font is missing ({env[FONT_ENV]}): run  npm ci --prefix tests/browser")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout in seconds")
    args = parser.parse_args()
    notebooks = args.notebooks or sorted((ROOT / "chapters").glob("*.ipynb"))
    # Deterministic, offline runs: no hub access, no progress bars in outputs.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    figure_environment(os.environ)
    for path in notebooks:
        elapsed = execute(path, args.timeout)
        print(f"executed {path} in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
