"""Sphinx extension: the book in two languages (the English source, the Chinese edition).

1. A language switch on every page: a link to the same page in the other edition, at the top of
   the article (plain HTML: it works without scripts), and ``<link rel="alternate" hreflang>`` in
   the head. The English book is at the site's root, the Chinese edition under ``zh/``
   (``tools/build_zh.py``); the edition is Sphinx's ``language`` (``en`` or ``zh_CN``). Every page
   loads the served Chinese font's rules (``_static/mha_book.css`` says where each edition uses it).

2. Glued numbers stay computed in a translated page. A chapter's numbers are glued from its
   executed cells ({glue:text}`key` in the prose, MyST-NB's glue). Sphinx's translation step
   (sphinx.transforms.i18n.Locale) swaps each paragraph of a page for its translation from the
   catalog (locale/zh_CN/LC_MESSAGES/) and parses that translation as a fresh little document.
   MyST-NB parses such "<translated>" sources as plain MyST, without the notebook's renderer, and
   its glue roles look the key up on that renderer: every glued number of a translated paragraph
   would render empty, with the warning "No key ... found in glue data".

   This extension keeps each notebook's renderer (the object that holds the notebook's glue data)
   while the page is read, and lends it to the parse of the page's translated paragraphs, so that
   a translated sentence's {glue:text} roles paste the same computed values as the English page.
   It changes nothing when the build is not translated (no "<translated>" source is parsed).
   Written against MyST-NB 1.x (``myst_nb.sphinx_.Parser``, ``load_renderer``). The sidebar's
   part captions are translated here too (Jupyter Book adds them after Sphinx's translation step).

3. No translation adds markup. Before a translated build reads a page, every catalog it will use goes
   through ``tools/i18n.py``'s check (``problems``: a translation keeps its sentence's roles, code, math, link
   targets, and adds no tag, substitution, directive or fence), and the build stops on the first catalog that
   fails, naming its entries: Sphinx parses each translation as MyST, so an added ``<IMG ONERROR=...>``,
   ``{{ ... }}`` (Jinja) or ``:::{raw} html`` would otherwise reach the page as markup. ``make book`` runs the
   same check before the build; this one also covers a build started by hand.

4. Chinese outputs where the notebook has them. A chapter run for the book stores, beside each matplotlib figure,
   its Chinese copy (``mha_lib.viz.bilingual``: ``output.metadata[mime]["mha_zh_CN"]["png"]``), and glues each
   phrase it composes for both languages twice (``mha_lib.notebook.glue_text``: ``key`` and ``key__zh``). The
   Chinese build reads each notebook with these in place (:func:`chinese_notebook`): the figures' Chinese
   images, and each ``{glue:text}`key``` pasting ``key__zh``. The English build reads the notebook as it is.

5. Computed English in the Chinese pages. Some glued values are phrases ("4 of 5", "better than")
   and the live views' and figures' HTML holds computed alt text and a note; no catalog can hold
   them. ``locale/zh_CN/computed_text.yml`` lists rules (regular expression, replacement) that
   the Chinese build applies to exactly that text: the pasted glue text, and the alt text and
   note of ``mha-live-view`` and ``mha-heads-figure`` outputs. ``tests/test_i18n.py`` checks the
   rules against every glued phrase of every chapter.

6. The Chinese search index in linear time. Sphinx 7.4's Chinese search language (``sphinx.search.zh``) records
   every Latin word of every paragraph in a list and tests each word of the index against that list, which is
   quadratic: the Chinese edition spent 20 of its 90 s of Sphinx there. :class:`ChineseSearch` keeps the same words
   in a set (registered with ``app.add_search_language``); the index it writes is the same.
"""
from __future__ import annotations

import html
import json
import re
import sys
from functools import lru_cache
from os import path as os_path
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.search import zh as sphinx_zh_search
from sphinx.locale import init as init_locale
from sphinx.util.i18n import docname_to_domain

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "locale" / "zh_CN" / "computed_text.yml"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(1, str(ROOT))
from i18n import problems  # noqa: E402  (the one markup rule: tools/i18n.py)
from mha_lib.notebook import ZH_FIGURE_KEY, ZH_SUFFIX  # noqa: E402  (what the chapters store for the Chinese edition)

GLUED = "application/papermill.record/"  # myst-nb's prefix of a value glued with display=False
PNG_URL = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=\s]+")

RENDERERS: dict[str, Any] = {}  # docname -> the notebook renderer of the page being read


class Edition(NamedTuple):
    folder: str      # under the site's root
    lang: str        # the html lang of its pages
    name: str        # the switch's text, leading to this edition
    read_here: str   # the switch's title, leading to this edition
    switch_label: str  # the switch's aria-label on this edition's pages


EDITIONS = {"en": Edition("", "en", "English", "Read this page in English", "Language"),
            "zh_CN": Edition("zh/", "zh-CN", "中文", "阅读本页的中文版", "语言")}


def other_edition(language: str | None) -> str:
    return "en" if language == "zh_CN" else "zh_CN"


def page_in(edition: str, pagename: str, from_language: str | None) -> str:
    """The relative URL, from page ``pagename`` of edition ``from_language``, of that page in ``edition``."""
    here = EDITIONS.get(from_language or "en", EDITIONS["en"]).folder
    depth = pagename.count("/") + here.count("/")
    return "../" * depth + EDITIONS[edition].folder + pagename + ".html"


def add_language_switch(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if doctree is None or "body" not in context:  # search, genindex: generated pages
        return
    here = EDITIONS.get(app.config.language or "en", EDITIONS["en"])
    target = other_edition(app.config.language)
    there = EDITIONS[target]
    url = page_in(target, pagename, app.config.language)
    context["metatags"] = context.get("metatags", "") + (
        f'<link rel="alternate" hreflang="{there.lang}" href="{url}" />\n')
    context["body"] = (
        f'<nav class="mha-lang-switch" aria-label="{here.switch_label}">'
        f'<a href="{url}" hreflang="{there.lang}" lang="{there.lang}" title="{there.read_here}">{there.name}</a></nav>\n'
        + context["body"])


@lru_cache(maxsize=None)
def computed_rules(path: str = str(RULES)) -> dict:
    """The rules of ``computed_text.yml``: {"glued": [(pattern, replacement)], "figures": [...], "keep": pattern}.

    Raises:
        ValueError: a rule that is not a [pattern, replacement] pair, or a pattern that does not compile
            (the message names it).
    """
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    rules = {"keep": re.compile(data["keep"])}
    for part in ("glued", "figures"):
        rules[part] = []
        for rule in data[part]:
            if not (isinstance(rule, list) and len(rule) == 2):
                raise ValueError(f"{path}: a rule must be [pattern, replacement], got {rule!r}")
            try:
                rules[part].append((re.compile(rule[0]), rule[1]))
            except re.error as err:
                raise ValueError(f"{path}: bad pattern {rule[0]!r}: {err}") from err
    return rules


CJK = re.compile(r"[\u4e00-\u9fff]")
STRAIGHT = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def translate_computed(text: str, part: str) -> str:
    """``text`` with the rules of ``part`` ("glued" or "figures") applied in order.

    The rules are written with straight quotes; Sphinx's smartquotes have curled a glued phrase's
    quotes by the time the Chinese build sees it, so the rules see it straightened. A text that no
    rule changes comes back as it was, and so does a glued text already in Chinese.
    """
    if part == "glued" and CJK.search(text):
        return text  # written in Chinese (glue_text's key__zh): no rule for English applies
    straight = text.translate(STRAIGHT)
    new = straight
    for pattern, replacement in computed_rules()[part]:
        new = pattern.sub(replacement, new)
    return new if new != straight else text


_ALT = re.compile(r'(<img\b[^>]*?\balt=")([^"]*)(")')
_NOTE = re.compile(r'(<p class="mha-live-noscript">)(.*?)(</p>)', re.S)


def translate_figure_html(text: str) -> str:
    """A live view's or heads figure's HTML with its alt text and note translated (rules "figures").

    Both are read as text and written back escaped: a rule's replacement is a translator's text, never markup."""
    text = _ALT.sub(lambda m: m[1] + html.escape(translate_computed(html.unescape(m[2]), "figures"),
                                                 quote=True) + m[3], text)
    return _NOTE.sub(lambda m: m[1] + html.escape(translate_computed(html.unescape(m[2]), "figures"),
                                                  quote=False) + m[3], text)


def chinese_notebook(text: str) -> str:
    """A notebook's JSON as the Chinese edition reads it: each figure's Chinese copy in place of its image, and
    each value glued in Chinese (``key__zh``) in place of ``key``'s; ``text`` itself when it has neither.

    Raises:
        ValueError: a Chinese glue key whose English key the notebook does not glue (naming it).
    """
    nb = json.loads(text)
    outputs = [o for cell in nb.get("cells", []) for o in cell.get("outputs", [])]

    def glued_name(output) -> str:
        return ((output.get("metadata") or {}).get("scrapbook") or {}).get("name", "")

    chinese = {glued_name(o)[:-len(ZH_SUFFIX)]: o for o in outputs if glued_name(o).endswith(ZH_SUFFIX)}
    unknown = sorted(set(chinese) - {glued_name(o) for o in outputs})
    if unknown:
        raise ValueError(f"glued in Chinese but not in English: {[k + ZH_SUFFIX for k in unknown]}")
    changed = False
    for output in outputs:
        metadata = output.get("metadata") or {}
        data = output.get("data") or {}
        for key in list(data):
            copy = metadata.get(key.removeprefix(GLUED))
            zh = copy.get(ZH_FIGURE_KEY, {}) if isinstance(copy, dict) else {}
            png = zh.get("png")
            if key.endswith("html") and (zh.get("pngs") or png):
                # a figure's HTML: its PNGs swapped in turn, one (mha_lib.viz.HeadsFigure) or each rendering of a
                # figure pair (mha_lib.notebook.figure_pair; None where a rendering has no words to translate)
                pngs = zh.get("pngs") or [png]
                markup = "".join(data[key])
                found = list(PNG_URL.finditer(markup))
                if len(found) != len(pngs):
                    raise ValueError(f"{len(pngs)} Chinese figure copies for HTML with {len(found)} PNG images")
                for match, chinese_png in reversed(list(zip(found, pngs))):  # from the end: the spans stay valid
                    if chinese_png:
                        markup = markup[:match.start()] + "data:image/png;base64," + chinese_png + markup[match.end():]
                data[key], changed = markup, True
            elif png:
                data[key], changed = png, True
        if glued_name(output) in chinese:
            output["data"], changed = dict(chinese[glued_name(output)]["data"]), True
    return json.dumps(nb, ensure_ascii=False) if changed else text


def translate_computed_text(app: Sphinx, doctree, docname: str) -> None:
    """In the Chinese edition: glued phrases and figure HTML through computed_text.yml's rules."""
    if app.config.language != "zh_CN":
        return
    for node in list(doctree.findall(nodes.inline)):
        if "pasted-text" in node["classes"]:
            text = node.astext()
            new = translate_computed(text, "glued")
            if new != text:
                node.children = [nodes.Text(new)]
    for node in list(doctree.findall(nodes.raw)):
        text = node.astext()
        if node.get("format") == "html" and ("mha-live-view" in text or "mha-heads-figure" in text):
            node.children = [nodes.Text(translate_figure_html(text))]


def translate_toctree_captions(app: Sphinx, doctree) -> None:
    """The sidebar's part captions ("Chapters", ...) in the page's language.

    Jupyter Book inserts the root page's toctrees (from _toc.yml) after Sphinx's translation step
    has run, so their captions would stay English; they are looked up in the page's catalog here,
    before the environment stores the page.
    """
    if not app.config.language or app.config.language == "en":
        return
    domain = docname_to_domain(app.env.docname, app.config.gettext_compact)
    dirs = [os_path.join(app.srcdir, d) for d in app.config.locale_dirs]
    catalog, found = init_locale(dirs, app.config.language, domain)
    if not found:
        return
    for node in doctree.findall(addnodes.toctree):
        if node.get("caption"):
            node["caption"] = catalog.gettext(node["caption"])


def check_catalogs(app: Sphinx) -> None:
    """In a translated build: every catalog of ``locale_dirs`` for the build's language passes
    ``tools/i18n.py``'s markup check, or the build stops (ExtensionError naming the entries)."""
    if not app.config.language or app.config.language == "en":
        return
    found = []
    for folder in app.config.locale_dirs:
        messages = Path(app.srcdir, folder, app.config.language, "LC_MESSAGES")
        for po in sorted(messages.rglob("*.po")) if messages.is_dir() else []:
            found += [f"{po.relative_to(messages)}: {line.split(': ', 1)[1]}" for line in problems(po)]
    if found:
        raise ExtensionError("translations that add or drop markup (tools/i18n.py check):\n" + "\n".join(found))


def add_font(app: Sphinx) -> None:
    """Every page loads the served Chinese font's rules (_ext/mha_book_assets.py vendors the font):
    the Chinese pages for their text, the English ones for their language switch ("中文") and what
    they quote in Chinese (the glossary, chapter 8). The rules are about 60 kB compressed; a browser
    downloads a part of the font only for the characters a page shows in it."""
    app.add_css_file("vendor/noto-sans-sc/noto-sans-sc.css")


class ChineseSearch(sphinx_zh_search.SearchChinese):
    """Sphinx's Chinese search language (jieba's segmentation, the English stemmer for Latin words), with the set
    of Latin words that ``stem`` looks words up in kept as a set per index instead of a list shared by the class
    (item 6 of this module): the same index, written in linear time."""

    def init(self, options: dict[str, str]) -> None:
        super().init(options)
        self.latin_terms = set()

    def split(self, input: str) -> list[str]:
        chinese = list(sphinx_zh_search.jieba.cut_for_search(input)) if sphinx_zh_search.JIEBA else []
        latin = [term.strip() for term in self.latin1_letters.findall(input)]
        self.latin_terms.update(latin)
        return chinese + latin


def setup(app: Sphinx) -> dict:
    import myst_nb.sphinx_ as nb_sphinx

    app.add_search_language(ChineseSearch)

    app.connect("builder-inited", check_catalogs)
    app.connect("builder-inited", add_font)
    app.connect("html-page-context", add_language_switch)
    app.connect("doctree-resolved", translate_computed_text)
    app.connect("doctree-read", translate_toctree_captions, priority=400)

    load_renderer = nb_sphinx.load_renderer
    parse = nb_sphinx.Parser.parse

    def keeping_renderer(name: str):
        renderer_class = load_renderer(name)

        def make(*args, **kwargs):
            renderer = renderer_class(*args, **kwargs)
            RENDERERS[app.env.docname] = renderer
            return renderer

        return make

    def parse_with_glue(self, inputstring: str, document) -> None:
        if not document.current_source.endswith("<translated>"):
            if app.config.language == "zh_CN" and str(document.current_source).endswith(".ipynb"):
                inputstring = chinese_notebook(inputstring)
            return parse(self, inputstring, document)
        renderer = RENDERERS.get(app.env.docname)
        if renderer is not None:
            document.attributes["nb_renderer"] = renderer
        try:
            return parse(self, inputstring, document)
        finally:
            document.attributes.pop("nb_renderer", None)

    nb_sphinx.load_renderer = keeping_renderer
    nb_sphinx.Parser.parse = parse_with_glue
    # a page's renderer is needed only while that page is read
    app.connect("doctree-read", lambda app, doctree: RENDERERS.pop(app.env.docname, None))
    return {"parallel_read_safe": False, "parallel_write_safe": True}
