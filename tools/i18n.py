"""The Chinese edition's catalogs: what is left to translate, filling translations in, checking them.

The English pages are the source. ``make locale`` extracts their sentences (Sphinx's gettext builder)
and merges them into ``locale/zh_CN/LC_MESSAGES/**/*.po`` (sphinx-intl): a new sentence arrives
untranslated, a changed one is marked fuzzy and shows in English until a translator reviews it.

    python tools/i18n.py todo PO [--out JSON]   # untranslated and fuzzy entries, as JSON {msgid: ""}
    python tools/i18n.py fill PO JSON           # write translations {msgid: msgstr}, clear fuzzy
    python tools/i18n.py check [PO ...]         # every translation keeps its sentence's markup
    python tools/i18n.py coverage [PO ...]      # translated share of each page's prose
    python tools/i18n.py figures [--out JSON]   # the chapters' figure texts left English, glyphs missing
    python tools/i18n.py terms                  # one Chinese term per English term (locale/zh_CN/terms.yml)

``check`` is what keeps glued numbers computed in Chinese: a translation must keep every
``{glue:text}`key``` (and every other role, inline code, inline math and link target) of its
English sentence, character for character. Entries that are only math or markup (display
equations, table cells of symbols) need no translation: untranslated, they show the English,
which is the same.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"
CHAPTERS = ROOT / "chapters"
ZH_FIGURE_KEY = "mha_zh_CN"  # mha_lib.notebook.ZH_FIGURE_KEY: a figure's Chinese copy and its report
TERMS = ROOT / "locale" / "zh_CN" / "terms.yml"
# Chinese text outside the catalogs that the term table covers too
COMPUTED = ROOT / "locale" / "zh_CN" / "computed_text.yml"
FIGURE_LABELS = ROOT / "locale" / "zh_CN" / "figure_labels.yml"
LIVE_ZH = ROOT / "mha_lib" / "web" / "i18n_zh.mjs"
GLOSSARY = ROOT / "chapters" / "glossary.md"
CJK = re.compile(r"[\u4e00-\u9fff]")

# What a translation must keep verbatim: MyST roles ({glue:text}`k`, {cite:t}`k`, {numref}`k`), inline code,
# math, and everything that could make markup of a translator's text -- any tag-like text (HTML tags in any
# case, with any attributes, comments, declarations, processing instructions, autolinks: anything from "<"
# and a letter, "/", "!" or "?", closed or not), MyST substitutions ({{ ... }}: Jinja, which could build a tag
# the check never sees), directive names ({raw} after a fence), fences (```, ~~~, :::), amsmath environments
# -- and link targets (LINK_TARGET, LINK_DEFINITION). One pattern, read left to right, so that a role's `...`
# is not taken for code and a code span's {...}` (as in `L{layer}.H{head}`) is not taken for a role.
# Case-insensitive throughout: HTML is.
VERBATIM = re.compile("|".join([
    r"\{[a-z0-9_+:.-]{1,36}\}`[^`]*`",     # a role and its content
    r"``[^`]+``", r"`[^`]+`",                # inline code
    r"\$\$.+?\$\$", r"\$[^$]+\$",            # math
    r"\\(?:begin|end)\{[^{}]*\}",          # amsmath environments (display math MathJax renders)
    r"\{\{.*?\}\}|\{\{",                    # a MyST substitution, closed or not
    r"\{[a-z0-9_+:.-]{1,36}\}",             # a directive's (or role's) name on its own
    r"^[ \t]*(?:`{3,}|~{3,}|:{3,})",         # a fence: a directive or a code block
    r"<[a-z/!?][^<>]*>?",                    # tag-like text
]), re.S | re.M | re.I)
LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
# A link reference definition ("[1]: https://..."), whose target a reference-style link ([text][1]) takes.
LINK_DEFINITION = re.compile(r"^[ \t]{0,3}\[[^\]\n]+\]:[ \t]*<?([^\s>]+)", re.M)
# A sentence with no letters outside its markup (an equation, a table cell such as `B` or $d_k$).
WORD = re.compile(r"[A-Za-z]{2,}")


# A TeX command of a display equation: \begin{aligned}, \text, \\ (MathJax's \href, \class, \style, \cssId would
# make links and HTML attributes of it).
TEX_COMMAND = re.compile(r"\\(?:begin|end)\{[^{}]*\}|\\[A-Za-z]+|\\.")


def markup(text: str) -> Counter:
    """The verbatim pieces of ``text`` (see ``VERBATIM``: roles, code, math, anything tag-like, substitutions,
    directives and fences, link targets), counted.

    A display equation (an entry that starts with a line break: Sphinx extracts ``$$ ... $$`` and
    ``\\begin{...}`` blocks so, and puts their translation into the page as TeX, unparsed) may have the words of
    its ``\\text{...}`` translated: its pieces are its TeX commands, so that a translation cannot add one
    (``\\href{javascript:...}``).

    Args:
        text: one catalog entry (MyST markdown), English or translated.

    Returns:
        A Counter of the pieces, so that a translation may reorder them but not drop,
        add or alter one.
    """
    if text.startswith("\n"):
        return Counter(("tex", m) for m in TEX_COMMAND.findall(text))
    pieces = Counter(("", m) for m in VERBATIM.findall(text))
    prose = VERBATIM.sub(" ", text)
    pieces.update(("link", m) for m in LINK_TARGET.findall(prose) + LINK_DEFINITION.findall(prose))
    return pieces


def needs_translation(msgid: str) -> bool:
    """True when ``msgid`` has prose: words outside its roles, code and math.

    A display equation (an entry that starts with a line break, as Sphinx extracts ``$$ ... $$``
    and ``\\begin{...}`` blocks) needs none: untranslated, it shows the same equation.
    """
    if msgid.startswith("\n"):
        return False
    rest = text_without_markup(msgid)
    return bool(WORD.search(rest))


def text_without_markup(text: str) -> str:
    return LINK_TARGET.sub("]", VERBATIM.sub(" ", text))


def catalogs(paths: list[str]) -> list[Path]:
    if paths:
        return [Path(p) for p in paths]
    return sorted(LOCALE.rglob("*.po"))


def load(path: Path):
    with open(path, "rb") as f:
        return read_po(f, locale="zh_CN")


def save(catalog, path: Path) -> None:
    with open(path, "wb") as f:
        write_po(f, catalog, width=0, include_previous=True)


# A translation that starts "3. " parses as a numbered list, not as the heading "3. Three kinds of
# heads" it translates, and Sphinx then drops it (the heading stays English): write "3\. ".
LIST_START = re.compile(r"^\d+\. ")


def problems(path: Path) -> list[str]:
    """Every translated entry of ``path`` whose markup differs from its English sentence's, or that
    starts like a numbered list."""
    found = []
    for message in load(path):
        if not message.id or not message.string or message.fuzzy:
            continue
        if LIST_START.match(message.string):
            found.append(f"{path.name}: {message.string[:40]!r}...: starts like a list; write "
                         f"{LIST_START.match(message.string)[0].rstrip('. ')}\\. instead")
        want, got = markup(message.id), markup(message.string)
        if want != got:
            missing = sorted(p for _, p in (want - got))
            extra = sorted(p for _, p in (got - want))
            found.append(f"{path.name}: {message.id[:60]!r}...: missing {missing}, extra {extra}")
    return found


def coverage(path: Path) -> tuple[int, int]:
    """(translated, to translate) prose entries of ``path``; fuzzy entries count as untranslated."""
    done = total = 0
    for message in load(path):
        if message.id and needs_translation(message.id):
            total += 1
            done += bool(message.string) and not message.fuzzy
    return done, total


def figure_reports(notebooks: list[Path] | None = None) -> list[tuple[str, int, dict]]:
    """(notebook, cell index, report) of every output that carries a Chinese figure copy
    (``mha_lib.viz.bilingual``: ``output.metadata[mime]["mha_zh_CN"]``, with ``untranslated`` and ``missing_glyphs``)."""
    found = []
    for path in notebooks if notebooks is not None else sorted(CHAPTERS.glob("*.ipynb")):
        for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8")).get("cells", [])):
            for output in cell.get("outputs", []):
                for value in (output.get("metadata") or {}).values():
                    if isinstance(value, dict) and isinstance(value.get(ZH_FIGURE_KEY), dict):
                        found.append((path.stem, index, value[ZH_FIGURE_KEY]))
    return found


class Term:
    """One row of ``terms.yml``: the English term (a regular expression, whole words, any case), its one Chinese
    term, the other renderings that are right in some sentences (``also``) and the variants never allowed (``not``)."""

    def __init__(self, row: dict):
        if not isinstance(row, dict) or not isinstance(row.get("en"), str) or not isinstance(row.get("zh"), str):
            raise ValueError(f"{TERMS.name}: a term needs en and zh, got {row!r}")
        self.en, self.zh = row["en"], row["zh"]
        self.also, self.never = list(row.get("also") or []), list(row.get("not") or [])
        try:
            self.pattern = re.compile(rf"(?<![\w-])(?:{self.en})(?![\w-])", re.I)
        except re.error as err:
            raise ValueError(f"{TERMS.name}: bad pattern {self.en!r}: {err}") from err


def load_terms(path: Path = TERMS) -> list[Term]:
    """The term table (``locale/zh_CN/terms.yml``).

    Raises:
        ValueError: a row without en or zh, or an en that does not compile (naming it).
    """
    import yaml

    return [Term(row) for row in yaml.safe_load(path.read_text(encoding="utf-8"))["terms"]]


JS_PAIR = re.compile(r'"((?:[^"\\]|\\.)*)":\s*"((?:[^"\\]|\\.)*)"')
GLOSSARY_ROW = re.compile(r'^\|([^|]+)\|\s*<span lang="zh-CN">([^<]+)</span>\s*\|', re.M)


def term_texts(pos: list[Path] | None = None) -> list[tuple[str, str, str]]:
    """(where, English, Chinese) of every Chinese text the term table covers: each translated catalog entry (its
    English without code, math and roles), the live views' catalog (i18n_zh.mjs), the figure labels, the computed
    text rules (their Chinese only: English "") and the glossary's rows (its English and Chinese columns)."""
    import yaml

    found = []
    for path in catalogs(pos or []):
        for message in load(path):
            if message.id and message.string and not message.fuzzy:
                where = str(path.relative_to(LOCALE)) if path.is_relative_to(LOCALE) else path.name
                found.append((where, text_without_markup(message.id), message.string))
    if pos:
        return found
    found += [(LIVE_ZH.name, en, zh) for en, zh in JS_PAIR.findall(LIVE_ZH.read_text(encoding="utf-8"))]
    labels = yaml.safe_load(FIGURE_LABELS.read_text(encoding="utf-8"))
    found += [(FIGURE_LABELS.name, en, zh) for en, zh in (labels.get("exact") or {}).items()]
    found += [(FIGURE_LABELS.name, "", zh) for _, zh in labels.get("rules") or []]
    rules = yaml.safe_load(COMPUTED.read_text(encoding="utf-8"))
    found += [(COMPUTED.name, "", zh) for part in ("glued", "figures") for _, zh in rules[part]]
    found += [(GLOSSARY.relative_to(ROOT).as_posix(), en.strip(), zh)
              for en, zh in GLOSSARY_ROW.findall(GLOSSARY.read_text(encoding="utf-8"))]
    return found


PLACEHOLDER = re.compile(r"\{[A-Za-z_]\w*\}")  # a live view's {token}: a value, not a word the reader reads


def term_problems(texts: list[tuple[str, str, str]] | None = None, terms: list[Term] | None = None) -> list[str]:
    """Every Chinese text that uses a variant a term forbids, or whose English names a term its Chinese lacks."""
    terms = load_terms() if terms is None else terms
    found = []
    for where, english, chinese in term_texts() if texts is None else texts:
        for term in terms:
            for variant in term.never:
                if variant in chinese:
                    found.append(f"{where}: {variant!r} where the term is {term.zh!r} ({term.en}): {chinese[:70]!r}")
            if english and CJK.search(chinese) and term.pattern.search(PLACEHOLDER.sub("", english)) \
                    and not any(word in chinese for word in [term.zh, *term.also]):
                found.append(f"{where}: {english[:70]!r} names {term.en!r}, its Chinese lacks {term.zh!r}: "
                             f"{chinese[:70]!r}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    todo = sub.add_parser("todo")
    todo.add_argument("po")
    todo.add_argument("--out")
    fill = sub.add_parser("fill")
    fill.add_argument("po")
    fill.add_argument("json")
    for name in ("check", "coverage"):
        sub.add_parser(name).add_argument("po", nargs="*")
    sub.add_parser("figures").add_argument("--out")
    sub.add_parser("terms")
    args = parser.parse_args(argv)

    if args.command == "terms":
        texts = term_texts()
        bad = term_problems(texts)
        print("\n".join(bad) or f"{len(texts)} Chinese texts use the {len(load_terms())} terms of {TERMS.name}")
        return 1 if bad else 0
    if args.command == "figures":
        reports = figure_reports()
        left = {text: "" for _, _, r in reports for text in r.get("untranslated", [])}
        glyphs = sorted({g for _, _, r in reports for g in r.get("missing_glyphs", [])})
        text = json.dumps(left, ensure_ascii=False, indent=1)
        if args.out:
            Path(args.out).write_text(text + "\n", encoding="utf-8")
        elif left:
            print(text)
        print(f"{len(reports)} figures with a Chinese copy; {len(left)} texts left English "
              f"(add them to locale/zh_CN/figure_labels.yml); {len(glyphs)} glyphs missing", file=sys.stderr)
        if glyphs:
            print("\n".join(glyphs), file=sys.stderr)
        return 1 if left or glyphs else 0
    if args.command == "todo":
        catalog = load(Path(args.po))
        left = {m.id: "" for m in catalog
                if m.id and needs_translation(m.id) and (not m.string or m.fuzzy)}
        text = json.dumps(left, ensure_ascii=False, indent=1)
        if args.out:
            Path(args.out).write_text(text + "\n", encoding="utf-8")
        else:
            print(text)
        return 0
    if args.command == "fill":
        path = Path(args.po)
        catalog = load(path)
        given = json.loads(Path(args.json).read_text(encoding="utf-8"))
        unknown = [k for k in given if k not in catalog]
        if unknown:
            raise SystemExit(f"not in {path.name}: {unknown[:3]!r}")
        for msgid, msgstr in given.items():
            if msgstr:
                message = catalog[msgid]
                message.string = msgstr
                message.flags.discard("fuzzy")
                message.previous_id = ()
        save(catalog, path)
        bad = problems(path)
        print("\n".join(bad) or f"{path.name}: markup kept in every translation")
        return 1 if bad else 0
    if args.command == "check":
        bad = [p for path in catalogs(args.po) for p in problems(path)]
        print("\n".join(bad) or "every translation keeps its markup")
        return 1 if bad else 0
    for path in catalogs(args.po):
        done, total = coverage(path)
        print(f"{path.relative_to(LOCALE) if path.is_relative_to(LOCALE) else path}: "
              f"{done}/{total} translated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
