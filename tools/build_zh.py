"""Build the Chinese edition into ``_build/html/zh/`` (``make book`` runs it after the English book).

The Chinese edition is the same Jupyter Book build with Sphinx's ``language`` set to ``zh_CN``:
Sphinx reads the translations from ``locale/zh_CN/LC_MESSAGES/`` (``make locale``,
``tools/i18n.py``) and shows the English of any sentence not (or no longer) translated. Its
configuration is ``_config.yml`` with a few changes, written to ``_build/_config_zh.yml`` so that
the two editions cannot drift apart: the language, the title, the author line, the citation style
("Vaswani 等人（2017）"), the labels of MyST-NB's buttons on hidden cells and the search's dictionary of the book's terms (Sphinx's
Chinese search segments the text with jieba, installed by requirements.txt).

The pages are then copied under the English site, in ``zh/``. Both editions load one copy of
the heavy, language-free files (``SHARED``): the live views' modules, the exported models, the
book's vendored scripts and font (``_static/live``, ``_static/models``, the folders of
``_static/vendor`` that ``_ext/mha_book_assets.py`` writes) and ``_static/mha_book.js``, which finds
them beside itself. The Chinese pages point one folder up for them; the theme's own files stay in
each edition. The live views pick their interface language from the page's ``<html lang>``.

    python tools/build_zh.py            # after jupyter-book build . (the English book)
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TITLE = "多头注意力：交互式教程"
AUTHOR = "《多头注意力：交互式教程》的作者们"
sys.path.insert(0, str(ROOT / "_ext"))
from mha_book_assets import CJK_FONT, VENDOR  # noqa: E402  (what the book vendors under _static/vendor/)

# The language-free files both editions load from the English site: the live views' modules, the
# models, mha_book.js (which finds them beside itself), and the book's vendored scripts and font --
# not the theme's own files under _static/vendor/ (its icons), which stay in each edition.
VENDORED = sorted({name.split("/")[0] for name in VENDOR} | {CJK_FONT[2].rstrip("/")})
SHARED = ["live", "models", "mha_book.js"] + [f"vendor/{name}" for name in VENDORED]
# src="../_static/vendor/mathjax/..." (any depth) -> one folder further up, in the English site
SHARED_REF = re.compile(r'((?:src|href)=")((?:\.\./)*)_static/(' +
                        "|".join(re.escape(name) + ("" if name.endswith(".js") else "/") for name in SHARED) + ")")


GLOSSARY = ROOT / "chapters" / "glossary.md"
TERMS = ROOT / "locale" / "zh_CN" / "terms.yml"  # the one Chinese term of each English term (tools/i18n.py terms)
# A glossary row: | English | <span lang="zh-CN">中文</span> | explained in |
CJK_WORD = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")  # a search term's words: ideographs only
GLOSSARY_ROW = re.compile(r'^\|[^|]+\|\s*<span lang="zh-CN">([^<]+)</span>\s*\|', re.MULTILINE)


def search_terms(glossary: Path = GLOSSARY) -> list[str]:
    """The book's Chinese terms, from the glossary's Chinese column and the term table (locale/zh_CN/terms.yml),
    as whole words for the search index.

    Sphinx's Chinese search splits the text with jieba (``jieba.cut_for_search``), which knows general
    Chinese but cuts the book's terms apart (多头注意力 into 多头, 注意, 注意力), so a reader searching for
    the term itself found nothing. Loaded as jieba's user dictionary (``html_search_options["dict"]``),
    these stay whole words in the index, and their parts are still indexed. A cell lists variants with
    、; text in brackets is dropped, and a term is split at spaces, Latin letters and the brackets of special tokens
    ([CLS]) (the index takes Latin words apart: KV 缓存 is indexed as "kv" and 缓存).

    Raises:
        ValueError: a term with anything but ideographs between those separators (punctuation, an HTML entity,
            an invisible character), naming it.
    """
    terms = []
    table = [row["zh"] for row in yaml.safe_load(TERMS.read_text(encoding="utf-8"))["terms"]]  # the term table's too
    for cell in GLOSSARY_ROW.findall(glossary.read_text(encoding="utf-8")) + table:
        for variant in cell.split("、"):
            variant = re.sub(r"（[^）]*）|\([^)]*\)", "", variant)
            for word in re.split(r"[\s\[\]A-Za-z0-9_-]+", variant):  # Latin words and special tokens ([CLS])
                if word and not CJK_WORD.fullmatch(word):
                    raise ValueError(f"{glossary} or {TERMS}: the term {cell!r} holds {word!r}, which is not Chinese "
                                     "characters only (jieba's dictionary takes words, not punctuation or markup)")
                if len(word) >= 2 and word not in terms:
                    terms.append(word)
    if len(terms) < 20:
        raise RuntimeError(f"{glossary}: found only {len(terms)} Chinese terms; did the table's layout change?")
    return terms


def zh_config(english: Path, out: Path) -> Path:
    """Write the Chinese edition's configuration: ``english`` with the language, title, author and
    hidden-cell button labels changed, its local extension folders made absolute, and the search index
    told the book's terms (:func:`search_terms`, written beside ``out`` as jieba's user dictionary)."""
    config = yaml.safe_load(english.read_text(encoding="utf-8"))
    config["title"] = TITLE
    config["author"] = AUTHOR
    sphinx = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx["language"] = "zh_CN"
    # citations as Chinese text writes them: "Vaswani 等人（2017）" (_ext/mha_book_bibstyle.py)
    sphinx["bibtex_reference_style"] = "author_year_zh"
    sphinx["bibtex_default_style"] = "authoryear_zh"
    terms = out.with_name("zh_search_terms.txt")
    out.parent.mkdir(parents=True, exist_ok=True)
    terms.write_text("".join(f"{word} 100000\n" for word in search_terms()), encoding="utf-8")
    sphinx["html_search_options"] = {"dict": str(terms)}
    # MyST-NB's buttons on hidden cells ("Show code cell source"): {type} would be English
    sphinx["nb_code_prompt_show"] = "显示代码单元的内容"
    sphinx["nb_code_prompt_hide"] = "隐藏代码单元的内容"
    # local extension folders are relative to the configuration file's folder
    extensions = config["sphinx"].get("local_extensions", {})
    for name, folder in extensions.items():
        extensions[name] = str((english.parent / folder).resolve())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("# Written by tools/build_zh.py from _config.yml; do not edit.\n"
                   + yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return out


def share_static(site: Path) -> int:
    """Point the Chinese pages under ``site`` at the English site's shared static files.

    Returns:
        The number of HTML files changed.

    Raises:
        RuntimeError: when no page refers to ``_static/mha_book.js`` (the layout changed).
    """
    changed = 0
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        new = SHARED_REF.sub(r"\1\2../_static/\3", text)
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed += 1
    if not changed:
        raise RuntimeError(f"no page under {site} loads _static/mha_book.js")
    for name in SHARED:
        target = site / "_static" / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jupyter-book", default=str(Path(sys.executable).parent / "jupyter-book"))
    parser.add_argument("--site", default=str(ROOT / "_build" / "html"))
    args = parser.parse_args(argv)

    config = zh_config(ROOT / "_config.yml", ROOT / "_build" / "_config_zh.yml")
    build = ROOT / "_build" / "zh"
    subprocess.run([args.jupyter_book, "build", str(ROOT), "--config", str(config),
                    "--path-output", str(build), "--warningiserror", "--keep-going"], check=True)
    site = Path(args.site)
    if not (site / "_static" / "mha_book.js").exists():
        raise SystemExit(f"build the English book into {site} first")
    target = site / "zh"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(build / "_build" / "html", target)
    pages = share_static(target)
    print(f"Chinese edition: {target} ({pages} pages share the English site's scripts and models)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
