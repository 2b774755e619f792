"""Pre-build check: the book renders committed notebooks, so they must be complete.

Fails (exit 1), naming the file, when:
  * _toc.yml names a page that does not exist;
  * a chapter notebook has a code cell that was never executed, or an error output;
  * a chapter notebook's kernelspec is not python3;
  * a figure (a plain image output) has no number, caption or alt text in its cell metadata,
    or is hidden (remove-output) without being glued;
  * a numbered figure's cell (mystnb.figure) shows more than one output (MyST-NB wraps each in the
    figure, and the build stops on the duplicate target);
  * a {glue:figure} pastes a key no cell glues, or lacks a name, alt text or caption.

Usage: python tools/check_notebooks.py [ROOT]
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import yaml

PAGE_SUFFIXES = (".ipynb", ".md", ".rst")


def toc_files(toc: dict) -> list[str]:
    """Every `file:` entry of a Jupyter Book _toc.yml, depth first."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                found.append(str(node["file"]))
            for value in node.values():
                if isinstance(value, (list, dict)):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    if "root" in toc:
        found.append(str(toc["root"]))
    walk({k: v for k, v in toc.items() if k != "root"})
    return found


def resolve_page(root: Path, entry: str) -> Path | None:
    path = root / entry
    if path.suffix in PAGE_SUFFIXES and path.exists():
        return path
    for suffix in PAGE_SUFFIXES:
        if path.with_name(path.name + suffix).exists():
            return path.with_name(path.name + suffix)
    return None


def notebook_problems(path: Path) -> list[str]:
    """Human-readable problems of one notebook; empty when it is fit to render."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:  # nbformat raises several kinds on broken JSON
        return [f"{path}: not a readable notebook ({err})"]
    problems = []
    kernel = nb.metadata.get("kernelspec", {}).get("name")
    if kernel != "python3":
        problems.append(f"{path}: kernelspec is {kernel!r}, expected 'python3'")
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        if cell.get("execution_count") is None:
            problems.append(f"{path}: code cell {index} was never executed (run `make execute`)")
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(
                    f"{path}: code cell {index} has an error output: "
                    f"{output.get('ename')}: {output.get('evalue')}"
                )
        problems.extend(figure_problems(path, index, cell))
    problems.extend(glue_figure_problems(path, nb))
    return problems


def glued_name(output) -> str | None:
    """The key a glue output (myst-nb's ``glue``: a scrapbook record) was stored under, else None."""
    return output.get("metadata", {}).get("scrapbook", {}).get("name")


def figure_problems(path: Path, index: int, cell) -> list[str]:
    """A plain image output (a matplotlib figure) must be a numbered figure: the cell's metadata
    carries ``mystnb.figure.name``, ``mystnb.figure.caption`` and ``mystnb.image.alt`` (real alt
    text, not a file name). Outputs with their own HTML (plot_heads, widgets) bring their alt text."""
    tags = cell.get("metadata", {}).get("tags", [])
    shown = [o for o in cell.get("outputs", []) if o.get("output_type") in ("display_data", "execute_result")
             and not glued_name(o)]
    if cell.get("metadata", {}).get("mystnb", {}).get("figure") and len(shown) > 1 and "remove-output" not in tags:
        return [f"{path}: code cell {index} shows {len(shown)} outputs in one numbered figure (mystnb.figure "
                "wraps each of them); show the others (a table, a second figure) from a cell of their own"]
    plain = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {}) and "text/html" not in o.get("data", {})]
    if not plain:
        return []
    if "remove-output" in tags:
        # Drawn here, shown elsewhere: the figure is glued and a {glue:figure} directive places it
        # (with its name, caption and alt text; glue_figure_problems checks those).
        glued = [o for o in cell.get("outputs", []) if glued_name(o)
                 and any(k.endswith("image/png") for k in o.get("data", {}))]
        return [] if glued else [f"{path}: code cell {index} hides its figure (remove-output) without gluing it"]
    meta = cell.get("metadata", {}).get("mystnb", {})
    figure, image = meta.get("figure", {}), meta.get("image", {})
    missing = [key for key, value in (("figure.name", figure.get("name")), ("figure.caption", figure.get("caption")),
                                      ("image.alt", image.get("alt"))) if not value]
    alt = image.get("alt") or ""
    if alt and (alt.endswith((".png", ".svg", ".jpg")) or "/" in alt):
        missing.append("image.alt (it looks like a file name)")
    if missing:
        return [f"{path}: code cell {index} shows a figure without mystnb {', '.join(missing)} in its metadata"]
    return []


GLUE_FIGURE = re.compile(r"```\{glue:figure\}[ \t]*(\S+)\n((?::[^\n]*\n)*)(.*?)```", re.S)


def glue_figure_problems(path: Path, nb) -> list[str]:
    """Every ``{glue:figure}`` directive in a markdown cell names a glued key, and carries a
    ``:name:`` (for {numref}), an ``:alt:`` text and a caption."""
    glued = {glued_name(o) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])} - {None}
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for key, options, caption in GLUE_FIGURE.findall(cell.source):
            if key not in glued:
                problems.append(f"{path}: markdown cell {index} pastes {key!r}, which no code cell glues")
            missing = [o for o in (":name:", ":alt:") if o not in options]
            if not caption.strip():
                missing.append("a caption")
            if missing:
                problems.append(f"{path}: markdown cell {index}: {{glue:figure}} {key} lacks {', '.join(missing)}")
    return problems


def check(root: Path) -> list[str]:
    problems = []
    toc_path = root / "_toc.yml"
    try:
        toc = yaml.safe_load(toc_path.read_text())
    except (OSError, yaml.YAMLError) as err:
        return [f"{toc_path}: cannot be read as YAML ({err})"]
    for entry in toc_files(toc):
        if resolve_page(root, entry) is None:
            problems.append(f"{toc_path}: entry {entry!r} names no existing page")
    for path in sorted((root / "chapters").glob("*.ipynb")):
        problems.extend(notebook_problems(path))
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(".")
    problems = check(root)
    for line in problems:
        print(f"check_notebooks: {line}", file=sys.stderr)
    if problems:
        print(f"check_notebooks: {len(problems)} problem(s); the book was not built.", file=sys.stderr)
        return 1
    print("check_notebooks: every toc entry exists and every chapter notebook is executed without errors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
