"""The Chinese edition's catalogs and rules (no build needed; the built pages: tests/browser/test_zh_edition.py)."""
from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "_ext"))
import i18n  # noqa: E402
import mha_i18n  # noqa: E402
from mha_lib.notebook import ZH_FIGURE_KEY, ZH_SUFFIX  # noqa: E402

CATALOGS = sorted(i18n.LOCALE.rglob("*.po"))
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}|\b[A-Za-z]\b")
CJK = re.compile(r"[\u4e00-\u9fff]")
# Share of a page's prose entries that must be translated and reviewed (not fuzzy). A changed English
# sentence is fuzzy until a translator reviews it, so this is what a change may leave behind.
MIN_TRANSLATED = 0.97


def test_every_page_of_the_toc_but_the_api_reference_has_a_catalog():
    import yaml
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())

    def files(entries):
        for entry in entries:
            if "file" in entry:
                yield entry["file"]
            yield from files(entry.get("sections", []))
    pages = [toc["root"]] + [f for part in toc["parts"] for f in files(part["chapters"])]
    wanted = {p for p in pages if not p.startswith("chapters/api/")}
    have = {str(p.relative_to(i18n.LOCALE).with_suffix("")) for p in CATALOGS}
    assert wanted <= have, sorted(wanted - have)


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.stem)
def test_translations_keep_every_role_code_span_math_and_link(po):
    assert i18n.problems(po) == []


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.stem)
def test_each_page_is_translated_above_the_threshold(po):
    done, total = i18n.coverage(po)
    assert total == 0 or done / total >= MIN_TRANSLATED, f"{po.name}: {done}/{total} translated"


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.stem)
def test_translations_are_chinese_and_use_the_glossary_terms(po):
    with open(po, "rb") as f:
        catalog = read_po(f)
    for message in catalog:
        if not message.id or not message.string or not i18n.needs_translation(message.id):
            continue
        prose = i18n.text_without_markup(message.id)
        if len(ENGLISH_WORD.findall(prose)) >= 6:  # a sentence, not a table cell or a name
            assert CJK.search(message.string), f"{po.name}: {message.id[:60]!r} left in English"
        # the field's standard terms (chapters/glossary.md), where the English sentence names them
        for english, chinese in (("multi-head attention", "多头注意力"), ("cross-attention", "交叉注意力"),
                                 ("induction head", "归纳头"), ("KV cache", "KV 缓存")):
            if english in message.id and CJK.search(message.string) and po.stem != "glossary":
                assert chinese in message.string, f"{po.name}: {english!r} not as {chinese!r} in {message.string[:80]!r}"


def test_every_chinese_text_uses_the_one_term_of_the_term_table():
    """tools/i18n.py terms over the catalogs, the computed-text rules, the figure labels and the live views'
    catalog: no forbidden variant (连结, 注意力汇聚点, 分片, 热力图 ...), and a sentence whose English names a term
    has its Chinese term. The glossary page's source is checked below."""
    texts = [t for t in i18n.term_texts() if not t[0].startswith("chapters/glossary.md")]
    assert {where for where, _, _ in texts} >= {"chapters/02_multi_head_math.po", "i18n_zh.mjs",
                                                "figure_labels.yml", "computed_text.yml"}
    assert len(texts) > 1000
    assert i18n.term_problems(texts) == []


def test_the_glossary_has_every_term_of_the_table_and_no_forbidden_variant():
    glossary = [t for t in i18n.term_texts() if t[0].startswith("chapters/glossary.md")]
    assert i18n.term_problems(glossary) == []
    chinese = " ".join(zh for _, _, zh in glossary)
    missing = [term.zh for term in i18n.load_terms() if term.zh not in chinese]
    assert not missing, missing


def test_the_term_checker_reads_no_placeholder_as_a_word():
    terms = [i18n.Term({"en": "tokens?", "zh": "词元"})]
    assert i18n.term_problems([("a", "Query “{token}”, its key", "查询“{token}”的键")], terms) == []
    assert len(i18n.term_problems([("a", "The token {token}", "查询“{token}”")], terms)) == 1


def test_the_term_checker_finds_a_variant_and_a_missing_term(tmp_path):
    terms = [i18n.Term({"en": "concatenat(?:e|ed|ion)", "zh": "拼接", "not": ["连结"]}),
             i18n.Term({"en": "heat ?maps?", "zh": "热图"})]
    found = i18n.term_problems([("a.po", "The heads are concatenated.", "各头的输出被连结起来。"),
                                ("b.po", "Two heat maps.", "两张热力图。"), ("c.po", "The heads are concatenated.",
                                                                        "各头的输出被拼接起来。"),
                                ("d.po", "", "连结"), ("e.po", "A heatmap.", "A heatmap.")], terms)
    assert len(found) == 4 and [f[:4] for f in found] == ["a.po", "a.po", "b.po", "d.po"], found
    with pytest.raises(ValueError, match="unclosed"):
        i18n.Term({"en": "(unclosed", "zh": "x"})
    with pytest.raises(ValueError, match="en and zh"):
        i18n.Term({"en": "x"})


def test_a_parenthetical_citation_sits_against_the_chinese_around_it():
    """"打分（Michel 等人，2019）" in the Chinese pages, not "打分 （...） 以及": the Chinese citation style brings
    full-width brackets, before which Chinese puts no space (nor after one, before Chinese)."""
    spaced = re.compile(r"[\u4e00-\u9fff，。：；、）][ \t]+\{cite(?::p)?\}`|\{cite(?::[pt])?\}`[^`]*`[ \t]+[\u4e00-\u9fff，。：；、（]")
    for po in CATALOGS:
        with open(po, "rb") as f:
            bad = [m.string[:60] for m in read_po(f) if m.string and spaced.search(m.string)]
        assert not bad, (po.name, bad)


def test_markup_reads_roles_and_code_left_to_right():
    text = "Heads `L{layer}.H{head}` and {glue:text}`acc:.2f` of {cite:t}`vaswani2017attention`, $d_k$ [x](a.md)"
    found = sorted(piece for _, piece in i18n.markup(text))
    assert found == sorted(["`L{layer}.H{head}`", "{glue:text}`acc:.2f`", "{cite:t}`vaswani2017attention`",
                            "$d_k$", "a.md"])
    assert i18n.markup("{glue:text}`a` 和 {glue:text}`b`") != i18n.markup("{glue:text}`a` and {glue:text}`c`")


def test_fill_refuses_a_translation_that_drops_a_glued_number(tmp_path):
    po = tmp_path / "page.po"
    po.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                  'msgid "Every seed scores {glue:text}`acc`."\nmsgstr ""\n', encoding="utf-8")
    given = tmp_path / "zh.json"
    given.write_text(json.dumps({"Every seed scores {glue:text}`acc`.": "每个随机种子得分很高。"}), encoding="utf-8")
    assert i18n.main(["fill", str(po), str(given)]) == 1
    given.write_text(json.dumps({"Every seed scores {glue:text}`acc`.": "每个随机种子的得分为 {glue:text}`acc`。"}),
                     encoding="utf-8")
    assert i18n.main(["fill", str(po), str(given)]) == 0


def all_glued_texts():
    """(chapter, key, text) of every glued text value of the committed notebooks."""
    found = []
    for path in CHAPTERS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                record = (output.get("metadata") or {}).get("scrapbook")
                text = "".join(output.get("data", {}).get("application/papermill.record/text/plain", ""))
                if record and text:
                    found.append((path.stem, record["name"], text[1:-1] if text[:1] in "'\"" else text))
    return found


def glued_phrases():
    """(chapter, key, text) of every glued text value with words in it, from the committed notebooks."""
    found = []
    for path in CHAPTERS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                record = (output.get("metadata") or {}).get("scrapbook")
                data = output.get("data", {})
                text = "".join(data.get("application/papermill.record/text/plain", ""))
                if not record or any(k.startswith("application/papermill.record/image") or
                                     k == "application/papermill.record/text/html" for k in data):
                    continue
                if text.startswith("'") or text.startswith('"'):
                    text = text[1:-1]
                if re.search(r"[A-Za-z]{2,}", text):
                    found.append((path.stem, record["name"], text))
    return found


def test_every_glued_phrase_comes_out_chinese():
    phrases = glued_phrases()
    assert len(phrases) > 30  # chapters 4, 6, 7, 8 and 9 glue phrases
    keep = mha_i18n.computed_rules()["keep"]
    curl = str.maketrans({"'": "\u2019", '"': "\u201d"})  # what smartquotes make of them, near enough
    written = {(chapter, key[:-len(ZH_SUFFIX)]): text for chapter, key, text in all_glued_texts()
               if key.endswith(ZH_SUFFIX)}  # glue_text's Chinese: pasted as it is
    for chapter, key, text in phrases:
        if key.endswith(ZH_SUFFIX):
            continue
        if (chapter, key) in written:
            out = written[chapter, key]
            assert CJK.search(out) and mha_i18n.translate_computed(out, "glued") == out, (chapter, key)
            left = [w for w in re.findall(r"[A-Za-z][\w.]*\w|[A-Za-z]", out) if not keep.match(w)]
            assert not left, f"{chapter} {key}__zh: {out!r} keeps {left}"
            continue
        out = mha_i18n.translate_computed(text, "glued")
        assert mha_i18n.translate_computed(text.translate(curl), "glued") == out, (chapter, key)
        left = [w for w in re.findall(r"[A-Za-z][\w.]*\w|[A-Za-z]", out) if not keep.match(w)]
        assert not left, f"{chapter} {key}: {text!r} -> {out!r} keeps {left}"


def test_rules_translate_the_computed_figure_text():
    html_text = ('<div class="mha-live-view"><img class="mha-live-fallback" src="x" alt="Grid of 8 attention heat '
                 'maps, one per head (H=1: H0 to H=8: H7). Rows are query tokens, columns are key tokens: [CLS] a &lt;b&gt; '
                 '(keys: s1 s2). Colour scale viridis, dark = 0, bright = 0.99. Key token with the highest mean weight, '
                 'per head: [CLS] (11 heads); . (L0.H1)."><p class="mha-live-noscript">This figure is live where '
                 "JavaScript and WebAssembly SIMD run (the book's web pages in a recent Chrome, Edge, Firefox or Safari): "
                 "your browser recomputes it. Here it shows what the notebook computed; run the cell in Jupyter, Colab or "
                 "VS Code (with anywidget) and the kernel recomputes it.</p></div>")
    out = mha_i18n.translate_figure_html(html_text)
    alt = html.unescape(re.search(r'alt="([^"]*)"', out)[1])
    assert alt.startswith("由 8 幅注意力热图组成的网格，每个头一幅（H=1: H0 到 H=8: H7）。")
    assert "[CLS] a <b>" in alt and "（11 个头）" in alt and "Grid" not in alt and "Colour" not in alt
    assert "这幅图" in out and "recomputes" not in out


def test_every_live_view_and_figure_alt_text_of_the_chapters_is_translated():
    template = re.compile(r"Grid of|Rows are|Colour scale|Key token with|Line chart|attention of the|This figure is live")
    count = 0
    for path in CHAPTERS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                for mime, value in output.get("data", {}).items():
                    text = "".join(value) if isinstance(value, list) else value
                    if "html" in mime and ("mha-live-view" in text or "mha-heads-figure" in text):
                        count += 1
                        out = mha_i18n.translate_figure_html(text)
                        assert not template.search(out), f"{path.stem}: {template.search(out)[0]!r} left"
    assert count >= 20


def test_language_switch_urls_lead_to_the_same_page_in_the_other_edition():
    assert mha_i18n.page_in("zh_CN", "intro", "en") == "zh/intro.html"
    assert mha_i18n.page_in("zh_CN", "chapters/api/cost", "en") == "../../zh/chapters/api/cost.html"
    assert mha_i18n.page_in("en", "intro", "zh_CN") == "../intro.html"
    assert mha_i18n.page_in("en", "chapters/05_induction_heads", "zh_CN") == "../../chapters/05_induction_heads.html"


def _notebook(outputs: list) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "source": "", "metadata": {}, "outputs": outputs}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _glued(name: str, text: str) -> dict:
    return {"output_type": "display_data", "metadata": {"scrapbook": {"name": name, "mime_prefix": GLUED}},
            "data": {GLUED + "text/plain": repr(text)}}


GLUED = "application/papermill.record/"


def test_the_chinese_build_reads_a_notebook_with_its_chinese_figures_and_glued_chinese():
    figure = {"output_type": "display_data", "data": {"image/png": "RU5HTElTSA==", "text/plain": "<Figure>"},
              "metadata": {"image/png": {ZH_FIGURE_KEY: {"png": "Q0hJTkVTRQ==", "untranslated": []}}}}
    glued_figure = {"output_type": "display_data", "data": {GLUED + "image/png": "RU5HTElTSA=="},
                    "metadata": {"scrapbook": {"name": "fig_x", "mime_prefix": GLUED},
                                 "image/png": {ZH_FIGURE_KEY: {"png": "Q0hJTkVTRQ=="}}}}
    same = {"output_type": "display_data", "data": {"image/png": "U0FNRQ=="},
            "metadata": {"image/png": {ZH_FIGURE_KEY: {"untranslated": []}}}}  # no words: no copy
    text = _notebook([figure, glued_figure, same, _glued("verdict", "better than importance"),
                      _glued("verdict" + ZH_SUFFIX, "优于重要性"), _glued("n", "16")])
    nb = json.loads(mha_i18n.chinese_notebook(text))
    data = [o["data"] for o in nb["cells"][0]["outputs"]]
    assert data[0]["image/png"] == "Q0hJTkVTRQ==" and data[1][GLUED + "image/png"] == "Q0hJTkVTRQ=="
    assert data[2]["image/png"] == "U0FNRQ=="
    assert data[3][GLUED + "text/plain"] == repr("优于重要性") and data[5][GLUED + "text/plain"] == "'16'"
    heads = {"output_type": "display_data", "data": {"text/html": '<img src="data:image/png;base64,RU5HTElTSA==">',
                                                       "image/png": "RU5HTElTSA=="},
             "metadata": {"text/html": {ZH_FIGURE_KEY: {"png": "Q0hJTkVTRQ=="}},
                          "image/png": {ZH_FIGURE_KEY: {"png": "Q0hJTkVTRQ=="}}}}
    out = json.loads(mha_i18n.chinese_notebook(_notebook([heads])))["cells"][0]["outputs"][0]["data"]
    assert out["text/html"] == '<img src="data:image/png;base64,Q0hJTkVTRQ==">' and out["image/png"] == "Q0hJTkVTRQ=="
    plain = _notebook([_glued("n", "16")])
    assert mha_i18n.chinese_notebook(plain) is plain  # nothing Chinese: the notebook as it is
    with pytest.raises(ValueError, match="orphan__zh"):
        mha_i18n.chinese_notebook(_notebook([_glued("orphan" + ZH_SUFFIX, "孤儿")]))


def test_glued_chinese_passes_the_computed_text_rules_unchanged():
    assert mha_i18n.translate_computed("在 60% 和 81% 时，消融优于重要性", "glued") == "在 60% 和 81% 时，消融优于重要性"
    assert mha_i18n.translate_computed("better than", "glued") == "优于"


def test_no_figure_of_a_chapter_keeps_english_or_misses_a_glyph():
    """tools/i18n.py figures: every Chinese figure copy the chapters store is wholly Chinese and drawn with glyphs."""
    bad = [(nb, cell, r["untranslated"], r["missing_glyphs"]) for nb, cell, r in i18n.figure_reports()
           if r.get("untranslated") or r.get("missing_glyphs")]
    assert not bad, bad


def test_every_figure_of_a_bilingual_chapter_has_its_chinese_copy():
    """A chapter that calls viz.bilingual_figures() stores a Chinese copy with each matplotlib figure it shows or
    glues (run by tools/execute_notebooks.py, which names the catalog and the font)."""
    for path in CHAPTERS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        if not any("bilingual_figures(" in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"):
            continue
        for index, cell in enumerate(nb["cells"]):
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                figure = "".join(data.get("text/plain", "")).startswith("<Figure size") or \
                    "application/papermill.record/image/png" in data
                pair = any('class="mha-figure-pair"' in "".join(data.get(k, "")) for k in data if k.endswith("text/html"))
                if pair:  # mha_lib.notebook.figure_pair: both renderings' copies in the HTML's metadata
                    assert ZH_FIGURE_KEY in (output["metadata"].get("text/html") or {}), (path.stem, index, "figure pair")
                elif figure and ("image/png" in data or "application/papermill.record/image/png" in data):
                    assert ZH_FIGURE_KEY in (output["metadata"].get("image/png") or {}), (path.stem, index)


def test_a_bad_rule_is_refused_by_name(tmp_path):
    rules = tmp_path / "rules.yml"
    rules.write_text("keep: x\nglued:\n  - ['(unclosed', 'x']\nfigures: []\n", encoding="utf-8")
    with pytest.raises(ValueError, match="unclosed"):
        mha_i18n.computed_rules(str(rules))


# ----------------------------------------------------------------------------- hostile translations
def _catalog(tmp_path, english: str, chinese: str) -> Path:
    po = tmp_path / "page.po"
    po.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                  f"msgid {json.dumps(english, ensure_ascii=False)}\nmsgstr {json.dumps(chinese, ensure_ascii=False)}\n",
                  encoding="utf-8")
    return po


@pytest.mark.parametrize("added", [
    "<IMG SRC=x ONERROR=alert(1)>",                 # issue 47: upper case passed the check
    "<Img Src=x OnError=alert(1)>",
    "<img src=x onerror=alert(1)>",
    "<svg/onload=alert(1)>",                        # no space before the attribute
    "<img\nsrc=x\nonerror=alert(1)>",               # attributes on the next lines
    '<a href="javascript:alert(1)">看</a>',
    "<details open ontoggle=alert(1)>",
    "</SCRIPT>",
    "<!-- 注释 -->",
    "<![CDATA[x]]>",
    "<?php x ?>",
    "<https://example.com/x>",                      # an autolink: a link target the English did not have
    "<x-widget data-a=1>",
    "{{ '<' ~ 'svg onload=alert(1)>' }}",           # a MyST substitution: Jinja builds the tag after the check
    "{{ env.config }}",
    "\n\n:::{raw} html\n:file: secret.txt\n:::",      # a directive reads a file into the page: no tag at all
    "\n```{include} ../README.md\n```",
    "\n~~~\ncode\n~~~",
    "{RAW}`x`",
    "\n\\begin{align}x\\end{align}",
    "[点这里][1]\n\n[1]: https://example.com/x",      # a reference-style link: its target comes from the definition
    "![图](https://example.com/pixel.png)",
])
def test_a_translation_may_not_add_markup_in_any_case_or_form(tmp_path, added):
    po = _catalog(tmp_path, "Every head is shown.", f"每个头都显示出来。{added}")
    found = i18n.problems(po)
    assert len(found) == 1 and "extra" in found[0], found
    assert i18n.main(["check", str(po)]) == 1
    # the same markup in the English sentence and its translation is kept, not refused
    assert i18n.problems(_catalog(tmp_path, f"Every head is shown. {added}", f"每个头都显示出来。{added}")) == []


def test_tag_like_text_outside_code_and_math_counts_as_markup():
    assert sorted(p for _, p in i18n.markup("<B>x</b> `<i>` $a<b>c$")) == sorted(["<B>", "</b>", "`<i>`", "$a<b>c$"])
    assert not i18n.markup("a < b and c > d, 3 <= 4")  # comparisons are not tags


def test_a_display_equation_may_translate_its_words_but_not_add_a_command(tmp_path):
    english = "\n4d^2 \\quad \\text{parameters, whatever } H \\text{ is.}\n"
    assert i18n.problems(_catalog(tmp_path, english, "\n4d^2 \\quad \\text{个参数，无论 } H \\text{ 取何值。}\n")) == []
    found = i18n.problems(_catalog(tmp_path, english, "\n4d^2 \\quad \\href{javascript:alert(1)}{\\text{个参数}} H\n"))
    assert len(found) == 1 and "\\\\href" in found[0], found


def _build_translated(tmp_path, chinese: str):
    """A one-page MyST book built in Chinese with the book's extension (_ext/mha_i18n.py), its one sentence
    translated as ``chinese``: (return code, output, the page's HTML or "")."""
    import subprocess

    src = tmp_path / "src"
    (src / "locale" / "zh_CN" / "LC_MESSAGES").mkdir(parents=True)
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / '_ext')!r})\n"
        "extensions = ['myst_nb', 'mha_i18n']\nlocale_dirs = ['locale']\ngettext_compact = False\n"
        "myst_enable_extensions = ['substitution', 'colon_fence', 'dollarmath']\n", encoding="utf-8")
    (src / "index.md").write_text("# Title\n\nEvery head is shown.\n", encoding="utf-8")
    (src / "secret.txt").write_text("SECRET-FILE-CONTENT", encoding="utf-8")
    po = _catalog(tmp_path, "Every head is shown.", chinese)
    po.rename(src / "locale" / "zh_CN" / "LC_MESSAGES" / "index.po")
    run = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", "-D", "language=zh_CN", str(src),
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    page = tmp_path / "out" / "index.html"
    return run.returncode, run.stdout + run.stderr, page.read_text(encoding="utf-8") if page.exists() else ""


BOOK_NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# A chapter\n\nAblation is {glue:text}`verdict`.\n\n"
         "```{glue:figure} fig_x\n:name: fig-x\n\nA caption.\n```\n"},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source":
         "import matplotlib.pyplot as plt\nfrom mha_lib import prose, viz\nfrom mha_lib.notebook import glue, glue_text\n"
         "assert viz.bilingual_figures()"},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source":
         "fig, ax = plt.subplots(figsize=(3, 2))\nax.plot([0, 1], [1, 0])\n"
         "ax.set(xlabel='heads pruned (%)', ylabel='test accuracy')\nglue('fig_x', fig, display=False)\nplt.show()\n"
         "glue_text('verdict', *prose.paired_verdicts('importance', {0.4: 0, 0.6: 1}, 16))"},
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.slow  # a kernel run and two Sphinx builds
def test_a_notebook_run_for_the_book_shows_chinese_figures_and_phrases_in_the_chinese_edition(tmp_path):
    """End to end: a notebook executed as tools/execute_notebooks.py runs the chapters, built as the book builds
    both editions. The Chinese page shows the figure's Chinese copy (its output and its glued paste) and the phrase
    composed in Chinese; the English page is the notebook's English, unchanged."""
    import base64
    import os
    import subprocess

    import nbformat
    from nbclient import NotebookClient

    sys.path.insert(0, str(ROOT / "tools"))
    import execute_notebooks

    if not execute_notebooks.FONT.is_file():
        pytest.skip("the Chinese font is not installed: npm ci --prefix tests/browser")
    src = tmp_path / "src"
    (src / "locale" / "zh_CN" / "LC_MESSAGES").mkdir(parents=True)
    nb = nbformat.from_dict(BOOK_NOTEBOOK)
    env = {k: v for k, v in os.environ.items() if k not in ("MHA_FIGURE_LABELS", "MHA_ZH_FONT")}
    execute_notebooks.figure_environment(env)
    env["PYTHONPATH"] = str(ROOT)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(src)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    nbformat.write(nb, src / "index.ipynb")
    figure = next(o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
    english_png = base64.b64decode(figure["data"]["image/png"])
    chinese_png = base64.b64decode(figure["metadata"]["image/png"][ZH_FIGURE_KEY]["png"])
    assert english_png != chinese_png and figure["metadata"]["image/png"][ZH_FIGURE_KEY]["untranslated"] == []
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / '_ext')!r})\n"
        "extensions = ['myst_nb', 'mha_i18n']\nlocale_dirs = ['locale']\ngettext_compact = False\n"
        "nb_execution_mode = 'off'\n", encoding="utf-8")
    (src / "locale" / "zh_CN" / "LC_MESSAGES" / "index.po").write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgid "Ablation is {glue:text}`verdict`."\nmsgstr "消融{glue:text}`verdict`。"\n', encoding="utf-8")
    pages = {}
    for language in ("en", "zh_CN"):
        out = tmp_path / language
        run = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", "-D", f"language={language}",
                              str(src), str(out)], capture_output=True, text=True, timeout=300, env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        page = (out / "index.html").read_text(encoding="utf-8")
        images = [(out / src_).read_bytes() for src_ in re.findall(r'<img[^>]*src="([^"]+\.png)"', page)]
        pages[language] = re.sub(r"<[^>]+>", "", page), images
    page, images = pages["zh_CN"]
    assert "消融在 40% 时与重要性分不出高下（16 个种子不足以区分），而在 60% 时优于重要性。" in page
    assert images == [chinese_png, chinese_png]  # the glued paste and the cell's own output
    page, images = pages["en"]
    assert "not distinguishable from importance with 16 seeds at 40%, and better than it at 60%" in page
    assert images == [english_png, english_png]


@pytest.mark.slow  # a Sphinx build per case, a few seconds each
@pytest.mark.parametrize("chinese, leak", [
    ("每个头都显示出来。<IMG SRC=x ONERROR=alert(1)>", "<IMG SRC=x ONERROR"),
    ("每个头都显示出来。{{ '<' ~ 'svg onload=alert(1)>' }}", "<svg onload"),
    (":::{raw} html\n:file: secret.txt\n:::", "SECRET-FILE-CONTENT"),
])
def test_the_chinese_build_refuses_a_catalog_whose_translation_adds_markup(tmp_path, chinese, leak, plain_translation):
    """Sphinx + MyST put each of these into the page as markup, or a file's content (issue 47: the build passed
    them); the book's extension runs tools/i18n.py's check first, so the build stops, naming the catalog. The same
    page with a plain translation builds (one build shared by the cases)."""
    code, output, page = _build_translated(tmp_path, chinese)
    assert code != 0 and "index.po" in output and "extra" in output, output
    assert leak not in page
    code, output, page = plain_translation
    assert code == 0 and "每个头都显示出来。" in page, output


@pytest.fixture(scope="module")
def plain_translation(tmp_path_factory):
    """_build_translated of the refusal cases' page with a translation that adds nothing."""
    return _build_translated(tmp_path_factory.mktemp("plain"), "每个头都显示出来。")


def test_a_computed_text_rule_cannot_put_markup_into_a_live_views_note(tmp_path, monkeypatch):
    """The rules of computed_text.yml are a translator's text too: their replacements reach the page as text, in
    the alt attribute and in the note under a live view (raw HTML, where a rule's "<img onerror>" was markup)."""
    rules = tmp_path / "rules.yml"
    rules.write_text("keep: x\nglued: []\nfigures:\n  - ['recomputes it', '<IMG SRC=x ONERROR=alert(1)>']\n",
                     encoding="utf-8")
    read = mha_i18n.computed_rules.__wrapped__
    monkeypatch.setattr(mha_i18n, "computed_rules", lambda: read(str(rules)))
    note = ('<div class="mha-live-view"><img src="x" alt="your browser recomputes it"><p class="mha-live-noscript">'
            "This figure is live: your browser recomputes it. It&#x27;s the notebook&#x27;s &amp; yours.</p></div>")
    out = mha_i18n.translate_figure_html(note)
    assert "<IMG" not in out and out.count("&lt;IMG SRC=x ONERROR=alert(1)&gt;") == 2, out
    assert "It's the notebook's &amp; yours.</p>" in out


def test_citation_labels_in_each_language(tmp_path):
    """The bibliography's labels: "Vaswani et al. 2017" in English, "Vaswani 等人 2017" in the Chinese edition
    (tools/build_zh.py selects the Chinese twin of each style; _ext/mha_book_bibstyle.py)."""
    from pybtex.database import Entry, Person

    import mha_book_bibstyle as bib

    entries = [Entry("article", fields={"year": "2017"}, persons={"author": [Person("Vaswani, Ashish"),
                                                                             Person("Shazeer, Noam"), Person("Parmar, Niki")]}),
               Entry("article", fields={"year": "2019"}, persons={"author": [Person("Jain, Sarthak"),
                                                                             Person("Wallace, Byron")]})]
    assert list(bib.AuthorYearLabelStyle().format_labels(entries)) == ["Vaswani et al. 2017", "Jain and Wallace 2019"]
    assert list(bib.ChineseAuthorYearLabelStyle().format_labels(entries)) == ["Vaswani 等人 2017", "Jain 和 Wallace 2019"]
    style = bib.ChineseAuthorYearReferenceStyle()
    assert style.bracket_textual.left == "（" and str(style.person.other) == " 等人" and style.text_reference_sep == ""
    import build_zh
    import yaml

    config = yaml.safe_load(build_zh.zh_config(ROOT / "_config.yml", tmp_path / "_config_zh.yml").read_text("utf-8"))
    assert config["sphinx"]["config"]["bibtex_reference_style"] == "author_year_zh"
    assert config["sphinx"]["config"]["bibtex_default_style"] == "authoryear_zh"


@pytest.mark.slow
def test_every_catalog_holds_the_english_of_its_page_now(tmp_path):
    """A changed English sentence must reach the catalogs (`make locale`) before it lands: a stale catalog passes
    the coverage test while the Chinese page shows the new English (what CI found on the API page's docstrings)."""
    import subprocess
    subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "--builder", "custom",
                    "--custom-builder", "gettext", "--path-output", str(tmp_path)],
                   check=True, capture_output=True, cwd=ROOT)
    templates = tmp_path / "_build" / "gettext"
    stale = {}
    for pot in templates.rglob("*.pot"):
        page = pot.relative_to(templates).with_suffix("")
        if page.parent == Path("chapters/api"):
            continue  # the API pages' docstrings stay English (a title-only catalog each)
        with open(pot, "rb") as f:
            wanted = {m.id for m in read_po(f) if m.id}
        po = i18n.LOCALE / page.with_suffix(".po")
        have = set()
        if po.exists():
            with open(po, "rb") as f:
                have = {m.id for m in read_po(f) if m.id}
        if wanted - have:
            stale[str(page)] = sorted(wanted - have)[:3]
    assert not stale, f"run `make locale` and translate: {stale}"


@pytest.mark.parametrize("cell", ["多头&lt;注意&gt;", "注意力*", "多头注意力；缓存", "——", "注意力\u200b头"])
def test_a_search_term_that_is_not_chinese_words_is_refused_naming_it(tmp_path, monkeypatch, cell):
    """Entities, punctuation and invisible characters went into jieba's dictionary as "words" (多头&, ;注意&)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_zh

    glossary = tmp_path / "glossary.md"
    glossary.write_text(f'| term | <span lang="zh-CN">{cell}</span> | ch. 1 |\n', encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(repr(cell)[1:-1])):
        build_zh.search_terms(glossary)


def test_a_figure_pair_carries_and_shows_the_chinese_copies_of_both_renderings(monkeypatch):
    """figure_pair's HTML holds two PNGs (narrow, wide): in the book's execution both get their Chinese copy, in
    the HTML's metadata, and the Chinese build swaps each in its place (a rendering without words keeps its own)."""
    plt = pytest.importorskip("matplotlib.pyplot")
    from mha_lib import notebook

    drawn = []

    def hook(fig, draw):
        drawn.append(draw(fig)[:8])
        return {"png": "WklOR" + str(len(drawn)), "untranslated": ["left"] if len(drawn) == 2 else [],
                "missing_glyphs": []}

    monkeypatch.setattr(notebook, "chinese_copy_hook", hook)
    wide, narrow = plt.figure(figsize=(4, 1)), plt.figure(figsize=(1, 4))
    pair = notebook.figure_pair(wide, narrow, alt="a figure")
    assert drawn == [b"\x89PNG\r\n\x1a\n"] * 2
    data, metadata = pair._repr_mimebundle_()
    copy = metadata["text/html"][ZH_FIGURE_KEY]
    assert copy["pngs"] == ["WklOR2", "WklOR1"] and copy["untranslated"] == ["left"]  # narrow first, as in the HTML
    output = {"output_type": "display_data", "data": data, "metadata": metadata}
    html_zh = json.loads(mha_i18n.chinese_notebook(_notebook([output])))["cells"][0]["outputs"][0]["data"]["text/html"]
    assert html_zh.index("WklOR2") < html_zh.index("WklOR1") and "data:image/png;base64,iVBOR" not in html_zh
    monkeypatch.setattr(notebook, "chinese_copy_hook", None)  # a reader's Jupyter: the HTML alone
    assert notebook.figure_pair(plt.figure(), plt.figure(), alt="x")._repr_mimebundle_() == \
        {"text/html": notebook.figure_pair(plt.figure(), plt.figure(), alt="x")._repr_html_()}


def test_the_chinese_search_indexes_the_words_sphinxs_own_does():
    """_ext/mha_i18n.py item 6: ChineseSearch keeps its Latin words in a set (Sphinx's list made the Chinese
    index quadratic); every split and stem must still be Sphinx's."""
    from sphinx.search.zh import SearchChinese

    texts = ["多头注意力把 d_model 分成 num_heads 个头，每个头的 head_dim 是 d_model / num_heads。",
             "KV 缓存 (KV cache) 随 num_kv_heads 变小；is_causal 的 attn_mask。", "heads headed ran running ABC abc",
             "诱导头 induction heads 出现在第 600 步前后。"]
    ours, sphinxs = mha_i18n.ChineseSearch({}), SearchChinese({})
    for text in texts:
        words = ours.split(text)
        assert words == sphinxs.split(text) and words
        assert [ours.stem(w) for w in words] == [sphinxs.stem(w) for w in words]
    assert isinstance(ours.latin_terms, set) and {"d_model", "num_heads", "ABC"} <= ours.latin_terms
