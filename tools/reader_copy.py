"""Reader's copies of the chapter notebooks: the prose in plain Markdown, with its numbers.

The chapters are written in MyST for the book: the text holds ``{glue:text}`key``` roles where
a cell's measured number goes, ``:::{dropdown}`` solutions, ``{cite}`` keys and ``{numref}``
references. Jupyter Book renders them; JupyterLab, Notebook 7, VS Code and Colab show them raw
(jupyterlab-myst renders the directives and citations, not glue). A reader's copy is the same
notebook with every markdown cell turned into plain Markdown:

* ``{glue:text}`key:fmt``` -> the glued value, formatted as the book formats it
  (``myst_nb.core.variables.format_plain_text``), from the committed notebook's glue outputs;
* ``{glue:figure}`` -> the glued image as a cell attachment, with its alt text and its caption
  ("Fig. N." as the book numbers it); ``{figure}`` (the diagrams) likewise;
* ``{glue:}`` of a live view -> a note: the view is drawn by its own cell below, and runs in the
  reader's browser in the online book;
* ``:::{dropdown} Title`` -> ``<details><summary>Title</summary>`` (collapsed in Jupyter and Colab);
* ``{cite:t}`` / ``{cite:p}`` -> "Vaswani et al. (2017)" / "(Vaswani et al. 2017)", linked to the
  paper, with the book's own labels (_ext/mha_book_bibstyle.py);
* ``{numref}`fig-x``` -> "Fig. N", the book's number; ``(label)=`` targets and equation labels go;
  links to the book's Markdown pages point at the online book.

Code cells are unchanged. Two kinds of copy come from the same conversion:

* ``reader/chapters/`` (committed; what the book's Colab buttons and the README's Colab links open):
  code cells without outputs, so that a copy changes only when the text, the code or a glued number
  does. tests/test_reader_copy.py regenerates them and compares: after editing or re-executing a
  chapter, run ``python tools/reader_copy.py`` and commit ``reader/``.
* ``make reader`` -> ``_build/reader/chapters/`` (ignored by git) with the outputs as the chapter
  stores them (glue records dropped): to read or run a chapter in JupyterLab or Notebook 7 from a
  clone, where running the committed chapter files would rewrite them (autosave).

Usage: python tools/reader_copy.py [--outputs] [--out DIR] [--check]
"""
from __future__ import annotations

import argparse
import base64
import copy
import html
import re
import sys
from pathlib import Path
from typing import Callable, Optional

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "reader"
GLUE_PREFIX = "application/papermill.record/"
# Roles and directives a chapter may use; any other stops the conversion, naming it (add a case).
ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")
# A role, or an inline code span (kept as it is: `L{layer}.H{head}` is code, not a role).
ROLE_OR_CODE = re.compile(r"\{([\w:-]+)\}`([^`]*)`|(`+).*?\3")
# Code spans and math: the only text where a ``<`` stays as it is (Jupyter shows neither as HTML).
CODE_OR_MATH = re.compile(r"(`+).*?\1|\$\$.*?\$\$|(?<!\\)\$[^$\n]+?(?<!\\)\$")
KEPT_HTML = re.compile(r'<span lang="[A-Za-z-]+">|</span>')  # the chapters' own markup: a Chinese word's language
UNSAFE_LINK = re.compile(r"\]\(\s*<?\s*((?:javascript|vbscript|data|file):)", re.IGNORECASE)
FENCE = re.compile(r"^(`{3,}|:{3,})\{([\w:-]+)\}[ \t]*(.*)$")
OPTION = re.compile(r"^:([\w-]+):[ \t]*(.*)$")
ADMONITIONS = ("note", "tip", "important", "warning", "caution", "attention", "hint", "seealso")


# ----------------------------------------------------------------------------- the book's facts
def toc_documents() -> list[str]:
    """The book's pages in reading order (_toc.yml), as paths without suffix ("chapters/01_...")."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries:
            pages.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part["chapters"])
    return pages


def notebooks() -> list[Path]:
    """The book's notebooks, in reading order."""
    return [ROOT / f"{page}.ipynb" for page in toc_documents() if (ROOT / f"{page}.ipynb").is_file()]


def book_url() -> str:
    """The online book: the GitHub Pages site of _config.yml's repository (.github/workflows/book.yml)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    org, repo = config["repository"]["url"].rstrip("/").split("/")[-2:]
    return f"https://{org.lower()}.github.io/{repo}/"


def blocks(markdown: str, where: str = "") -> list[tuple]:
    """A MyST text as a list of ``("line", text)``, ``("code", lines)`` and ``("directive", name,
    argument, options, body)``, in order. A directive's body is raw text (parse it again for nested
    directives); a code fence is kept whole, so nothing inside it is read as MyST.

    Raises:
        ValueError: a directive that is never closed (naming ``where``).
    """
    lines, out, i = markdown.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        found = FENCE.match(line)
        code = re.match(r"^(`{3,}|~{3,})", line)
        if found:
            fence, name, argument = found.groups()
            i += 1
            options = {}
            while i < len(lines) and OPTION.match(lines[i]):
                key, value = OPTION.match(lines[i]).groups()
                options[key] = value
                i += 1
            body = []
            while i < len(lines) and lines[i].strip() != fence:
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise ValueError(f"{where}: {{{name}}} opened with {fence} is never closed")
            i += 1
            out.append(("directive", name, argument.strip(), options, "\n".join(body)))
        elif code:
            fence, block = code.group(1), [line]
            i += 1
            while i < len(lines) and not lines[i].startswith(fence):
                block.append(lines[i])
                i += 1
            if i < len(lines):
                block.append(lines[i])
                i += 1
            out.append(("code", block))
        else:
            out.append(("line", line))
            i += 1
    return out


def numbered_chapters() -> dict[str, int]:
    """Page -> its chapter number, for the pages of the toc's parts marked ``numbered`` (in reading order)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    numbers: dict[str, int] = {}
    for part in toc.get("parts", []):
        if part.get("numbered"):
            for entry in part["chapters"]:
                numbers[entry["file"]] = len(numbers) + 1
    return numbers


def figure_numbers() -> dict[str, str]:
    """Figure label -> the number the book gives it ("Fig. N"): Sphinx numbers every figure with a
    caption in reading order, ``{figure}`` and ``{glue:figure}`` directives where they stand and code
    cells whose metadata gives ``mystnb.figure`` a caption; in a numbered chapter as chapter.figure
    ("1.4", counted from 1 in each chapter), elsewhere with one count over the unnumbered pages ("1")."""
    numbers: dict[str, str] = {}
    chapters = numbered_chapters()
    count = {"book": 0}

    def add(page: str, name: Optional[str]):
        key = page if page in chapters else "book"
        count[key] = count.get(key, 0) + 1
        if name:
            numbers[name] = f"{chapters[page]}.{count[key]}" if page in chapters else str(count[key])

    def markdown(page: str, text: str):
        for block in blocks(text):
            if block[0] != "directive":
                continue
            _, name, _, options, body = block
            if name in ("figure", "glue:figure") and body.strip():
                add(page, options.get("name"))
            else:
                markdown(page, body)  # a figure inside a dropdown or an admonition

    for page in toc_documents():
        if (ROOT / f"{page}.ipynb").is_file():
            for cell in nbformat.read(ROOT / f"{page}.ipynb", as_version=4).cells:
                if cell.cell_type == "markdown":
                    markdown(page, cell.source)
                else:
                    figure = cell.metadata.get("mystnb", {}).get("figure", {})
                    if figure.get("caption"):
                        add(page, figure.get("name"))
        elif (ROOT / f"{page}.md").is_file():
            markdown(page, (ROOT / f"{page}.md").read_text())
    return numbers


class Citations:
    """The book's author-year labels for references.bib, and a link for each entry."""

    def __init__(self, bib: Path = ROOT / "references.bib"):
        from pybtex.database import parse_file

        # the book's own extension folder (not ROOT's: a test may point ROOT at a copy of a chapter)
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "_ext"))
        from mha_book_bibstyle import AuthorYearLabelStyle  # the bibliography's own labels

        entries = parse_file(str(bib)).entries
        labels = AuthorYearLabelStyle().format_labels([entries[k] for k in entries])
        self.labels = dict(zip(entries, labels))
        self.links = {key: self._link(entry) for key, entry in entries.items()}

    @staticmethod
    def _link(entry) -> str:
        fields = entry.fields
        if fields.get("eprint"):
            return f"https://arxiv.org/abs/{fields['eprint']}"
        if fields.get("doi"):
            return f"https://doi.org/{fields['doi']}"
        return fields.get("url", "")

    def __call__(self, kind: str, keys: str) -> str:
        parts = []
        for key in (k.strip() for k in keys.split(",")):
            if key not in self.labels:
                raise ValueError(f"{{cite}} key {key!r} is not in references.bib")
            who, _, year = self.labels[key].rpartition(" ")
            text = f"{who} ({year})" if kind == "cite:t" else f"{who} {year}"
            parts.append(f"[{text}]({self.links[key]})" if self.links[key] else text)
        return "; ".join(parts) if kind == "cite:t" else f"({'; '.join(parts)})"


# ----------------------------------------------------------------------------- one notebook
def glue_data(nb) -> dict[str, dict]:
    """Glue key -> its mime bundle (the ``application/papermill.record/`` prefix removed)."""
    found = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                prefix = output["metadata"]["scrapbook"].get("mime_prefix", "")
                found[name] = {mime[len(prefix):]: data for mime, data in output.get("data", {}).items()}
    return found


def _text(value: str) -> str:
    """A computed string as Markdown text: never HTML, never emphasis."""
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", html.escape(value, quote=False))


class Converter:
    """MyST Markdown of one notebook -> plain Markdown (and the cell's attachments)."""

    def __init__(self, path: Path, glue: dict, numbers: dict, cite: Callable[[str, str], str]):
        from myst_nb.core.variables import format_plain_text  # how the book formats {glue:text}

        self.path, self.glue, self.numbers, self.cite = path, glue, numbers, cite
        self.format_plain_text = format_plain_text
        self.attachments: dict[str, dict] = {}

    def _where(self) -> str:
        return str(self.path.relative_to(ROOT))

    def _glued(self, key: str) -> dict:
        if key not in self.glue:
            raise ValueError(f"{self._where()}: glue key {key!r} has no stored output (run `make execute`)")
        return self.glue[key]

    def role(self, found: re.Match) -> str:
        name, content = found.group(1), found.group(2)
        if name in ("glue:text", "glue", "glue:any"):
            key, _, fmt = content.partition(":") if name == "glue:text" else (content, "", "")
            plain = self._glued(key).get("text/plain")
            if plain is None:
                raise ValueError(f"{self._where()}: glue key {key!r} has no text/plain to paste")
            return _text(self.format_plain_text(plain, fmt))
        if name in ("cite", "cite:p", "cite:t"):
            return self.cite(name, content)
        if name == "numref":
            label = content.rsplit("<", 1)[-1].rstrip(">").strip()
            if label not in self.numbers:
                raise ValueError(f"{self._where()}: {{numref}} target {label!r} is not a numbered figure")
            return f"Fig. {self.numbers[label]}"
        raise ValueError(f"{self._where()}: role {{{name}}} has no plain-Markdown form (tools/reader_copy.py)")

    def _no_html(self, text: str) -> str:
        """``text`` with no raw HTML left outside code spans and math: every ``<`` that would open a tag, a
        comment or an autolink becomes ``&lt;`` (Jupyter renders raw HTML in Markdown), but for the chapters'
        own ``<span lang="..">``; a link to a ``javascript:``, ``vbscript:``, ``data:`` or ``file:`` address stops
        the conversion, naming it."""
        def clean(segment: str) -> str:
            bad = UNSAFE_LINK.search(segment)
            if bad:
                raise ValueError(f"{self._where()}: link to {bad.group(1)!r}: a copy links to web pages only")
            return re.sub(r"<(?=[A-Za-z/!?])", lambda m: m.group(0) if KEPT_HTML.match(segment, m.start())
                          else "&lt;", segment)

        out, last = [], 0
        for found in CODE_OR_MATH.finditer(text):
            out += [clean(text[last:found.start()]), found.group(0)]
            last = found.end()
        return "".join(out + [clean(text[last:])])

    def inline(self, text: str) -> str:
        text = ROLE_OR_CODE.sub(lambda m: m.group(0) if m.group(3) else self.role(m), text)
        text = self._no_html(text)
        # links to the book's Markdown pages: the online book (the reader's copy has notebooks only)
        return re.sub(r"\]\((?!https?:|#)([\w./-]+)\.md(#[\w-]+)?\)",
                      lambda m: f"]({book_url()}chapters/{Path(m.group(1)).name}.html{m.group(2) or ''})", text)

    def _attach(self, name: str, mime: str, data: str) -> str:
        self.attachments[name] = {mime: data}
        return f"attachment:{name}"

    def _figure(self, src: str, options: dict, caption: str) -> str:
        label = options.get("name", "")
        number = f"**Fig. {self.numbers[label]}.** " if label in self.numbers else ""
        alt = options.get("alt", "").replace("]", ")").replace("[", "(")
        text = f"![{alt}]({src})"
        return text + (f"\n\n{number}{self.inline(caption).strip()}" if caption.strip() else "")

    def directive(self, name: str, argument: str, options: dict, body: str) -> str:
        if name == "dropdown":
            return f"<details>\n<summary>{_text(argument)}</summary>\n\n{self.convert(body).strip()}\n\n</details>"
        if name == "glue:figure":
            if not re.fullmatch(r"[A-Za-z0-9_][\w.-]*", argument):  # it names the attachment: ![..](attachment:KEY)
                raise ValueError(f"{self._where()}: {{glue:figure}} key {argument!r} is not a plain name "
                                 "(letters, digits, _ . -)")
            bundle = self._glued(argument)
            mime = next((m for m in ("image/png", "image/svg+xml", "image/jpeg") if m in bundle), None)
            if mime is None:
                raise ValueError(f"{self._where()}: {{glue:figure}} {argument!r} holds no image")
            src = self._attach(f"{argument}.{mime.split('/')[1].split('+')[0]}", mime, bundle[mime])
            return self._figure(src, options, body)
        if name == "figure":
            image = (self.path.parent / argument).resolve()
            if not image.is_relative_to(ROOT.resolve()):  # never read a file from elsewhere into the copy
                raise ValueError(f"{self._where()}: {{figure}} {argument!r} is outside the repository")
            mime = {".svg": "image/svg+xml", ".png": "image/png"}.get(image.suffix)
            if mime is None:
                raise ValueError(f"{self._where()}: {{figure}} {argument!r} is not an .svg or .png file")
            data = base64.b64encode(image.read_bytes()).decode()
            return self._figure(self._attach(image.name, mime, data), options, body)
        if name == "glue:":
            self._glued(argument)
            return (f"*A live view goes here in the book ({book_url()}): there it runs in your browser. "
                    "In this notebook the cell that makes it, further down, shows it when it runs "
                    "(with `mha_lib[chapters]` installed, as the first cell does in Colab).*")
        if name == "glue:text":
            return self.role(re.match(ROLE, f"{{glue:text}}`{argument}`"))
        if name in ADMONITIONS:
            title = argument or name.capitalize()
            quoted = "\n".join(f"> {line}" if line else ">" for line in self.convert(body).strip().splitlines())
            return f"> **{_text(title)}.**\n>\n{quoted}"
        raise ValueError(f"{self._where()}: directive {{{name}}} has no plain-Markdown form (tools/reader_copy.py)")

    def convert(self, markdown: str) -> str:
        """Plain Markdown for a MyST text (directives may nest; code fences stay as they are)."""
        out = []
        for block in blocks(markdown, self._where()):
            if block[0] == "directive":
                out.append(self.directive(*block[1:]))
            elif block[0] == "code":
                out.extend(block[1])
            elif not re.fullmatch(r"\s*\([\w-]+\)=\s*", block[1]):  # a MyST target shows nothing
                out.append(self.inline(re.sub(r"^(\s*\$\$)\s*\([\w-]+\)\s*$", r"\1", block[1])))
        return "\n".join(out)


def reader_copy(path: Path, numbers: dict, cite, outputs: bool = False):
    """The reader's copy of one chapter notebook (an nbformat notebook)."""
    nb = nbformat.read(path, as_version=4)
    glue = glue_data(nb)
    new = copy.deepcopy(nb)
    cells = []
    for cell in new.cells:
        if cell.cell_type == "markdown":
            converter = Converter(path, glue, numbers, cite)
            cell.source = converter.convert(cell.source)
            if converter.attachments:
                cell.attachments = converter.attachments
        elif cell.cell_type == "code":
            if outputs:
                cell.outputs = [o for o in cell.outputs
                                if not any(m.startswith(GLUE_PREFIX) for m in o.get("data", {}))]
            else:
                cell.outputs, cell.execution_count = [], None
        cells.append(cell)
    page = path.relative_to(ROOT).with_suffix("")
    note = nbformat.v4.new_markdown_cell(
        f"*The reader's copy of this chapter, for Jupyter and Colab: its numbers and citations are "
        f"written into the text. The book renders the same chapter at {book_url()}{page}.html; "
        f"`tools/reader_copy.py` makes this copy from `{page}.ipynb`.*")
    note.metadata = {"tags": ["reader-copy"]}
    cells.insert(1 if cells and cells[0].cell_type == "markdown" else 0, note)
    new.cells = cells
    for cell in new.cells:
        cell.pop("id", None)
    if not outputs:
        new.metadata.pop("widgets", None)
    # ipykernel's own name for its kernel: JupyterLab writes it into the file when the kernel starts,
    # so a copy that said "Python 3" would be modified (and autosaved) by merely being opened.
    new.metadata.setdefault("kernelspec", {}).update(display_name="Python 3 (ipykernel)", language="python",
                                                     name="python3")
    new.nbformat_minor = max(new.nbformat_minor, 5)
    for i, cell in enumerate(new.cells):
        cell.id = f"reader-{i}"
    return new


def write_all(out: Path, outputs: bool = False) -> list[Path]:
    numbers, cite = figure_numbers(), Citations()
    written = []
    for path in notebooks():
        target = out / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(reader_copy(path, numbers, cite, outputs), target)
        written.append(target)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=COMMITTED, help="folder for the copies (default: reader/)")
    parser.add_argument("--outputs", action="store_true", help="keep the code cells' outputs (make reader)")
    parser.add_argument("--check", action="store_true", help="fail if reader/ differs from a fresh conversion")
    args = parser.parse_args(argv)
    if args.check:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            fresh = write_all(Path(tmp))
            stale = [str(p.relative_to(tmp)) for p in fresh
                     if not (COMMITTED / p.relative_to(tmp)).is_file()
                     or (COMMITTED / p.relative_to(tmp)).read_bytes() != p.read_bytes()]
        if stale:
            print(f"reader/ is stale for {stale}: run python tools/reader_copy.py and commit reader/")
            return 1
        return 0
    for path in write_all(args.out, args.outputs):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
