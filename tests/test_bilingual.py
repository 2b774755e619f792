"""mha_lib.viz.bilingual: figures drawn in English and, from the same artists, in Chinese (issue 52, item 2).

The Chinese font is the TTF that ``npm ci --prefix tests/browser`` installs (``make book`` runs it); a clone
without it skips the tests that draw Chinese, except under ``make test`` (MHA_REQUIRE_BOOK=1), where it fails.
"""
from __future__ import annotations

import base64
import io
import os
import re
import sys
import warnings
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mha_lib.viz import bilingual  # noqa: E402
from mha_lib.viz.bilingual import LabelCatalog, draw_in_chinese, keep_text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "_ext"))
from mha_book_assets import DRAWING_FONT  # noqa: E402

FONT = ROOT / "tests" / "browser" / "node_modules" / DRAWING_FONT
LABELS = ROOT / "locale" / "zh_CN" / "figure_labels.yml"


@pytest.fixture
def font():
    if not FONT.is_file():
        if os.environ.get("MHA_REQUIRE_BOOK", "") not in ("", "0"):
            pytest.fail(f"{FONT} is missing: npm ci --prefix tests/browser")
        pytest.skip("the Chinese font is not installed: npm ci --prefix tests/browser")
    return FONT


CATALOG = LabelCatalog(
    exact={"test accuracy": "测试准确率", "heads pruned (%)": "剪去的头 (%)", "importance": "重要性",
           "a title": "一个标题", "the figure": "整幅图", "importance\nrescored": "重新打分的重要性",
           "odd": "\U00020000"},  # a character Noto Sans SC does not have
    rules=[[r"random \((\d+) orders per seed\)", r"随机顺序（每个种子 \1 种）"], [r"layer (\d+)", r"第 \1 层"]],
    keep=r"\bL\d+\.H\d+\b|\[CLS\]|\bMiniLM\b")


def png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=50, metadata={"Software": None})
    return buf.getvalue()


def _figure():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [0.9, 0.8, 0.5], label="importance")
    ax.plot([0, 1, 2], [0.9, 0.6, 0.3], label="random (20 orders per seed)")
    ax.set(xlabel="heads pruned (%)", ylabel="test accuracy", title="a title")
    ax.set_xticks([0, 1, 2], ["layer 0", "layer 1", "L2.H3"])
    ax.annotate("MiniLM", (1, 0.8))
    ax.legend()
    fig.suptitle("the figure")
    return fig


# ----------------------------------------------------------------------------- the catalog
def test_catalog_translates_exact_texts_rules_and_lines_and_keeps_names():
    assert CATALOG.translate("test accuracy") == ("测试准确率", True)
    assert CATALOG.translate("random (20 orders per seed)") == ("随机顺序（每个种子 20 种）", True)
    assert CATALOG.translate("layer 3\nimportance") == ("第 3 层\n重要性", True)
    assert CATALOG.translate("L0.H1 [CLS] MiniLM $d_k$ 0.5") == ("L0.H1 [CLS] MiniLM $d_k$ 0.5", True)
    assert CATALOG.translate("unknown words") == ("unknown words", False)
    assert CATALOG.translate("layer 3 of the model")[1] is False  # a rule must match the whole text


def test_a_bad_catalog_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r"\(unclosed"):
        LabelCatalog({}, [["(unclosed", "x"]])
    with pytest.raises(ValueError, match="pattern, replacement"):
        LabelCatalog({}, [["only one"]])
    with pytest.raises(ValueError, match="no figure label catalog"):
        LabelCatalog.load(tmp_path / "missing.yml")
    bad = tmp_path / "labels.yml"
    bad.write_text("exact:\n  a: 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="labels.yml"):
        LabelCatalog.load(bad)


def test_the_book_catalog_loads_and_its_translations_keep_no_english():
    catalog = LabelCatalog.load(LABELS)
    assert len(catalog.exact) >= 20
    for english, chinese in catalog.exact.items():
        assert not catalog.needs_translation(chinese), (english, chinese)


# ----------------------------------------------------------------------------- drawing in Chinese
def test_every_text_of_a_figure_is_drawn_in_chinese_and_the_figure_comes_back_unchanged(font):
    fig = _figure()
    english = png(fig)
    seen = {}

    def draw(f):
        f.canvas.draw()
        seen["texts"] = [t.get_text() for t in f.findobj(matplotlib.text.Text) if t.get_text()]
        return png(f)

    chinese, report = draw_in_chinese(fig, draw, CATALOG, font)
    assert report["untranslated"] == [] and report["missing_glyphs"] == [], report
    for label in ("测试准确率", "剪去的头 (%)", "一个标题", "整幅图", "重要性", "随机顺序（每个种子 20 种）", "第 0 层"):
        assert label in seen["texts"], (label, seen["texts"])  # title, labels, legend, suptitle, tick labels
    assert "L2.H3" in seen["texts"] and "MiniLM" in seen["texts"]
    assert chinese != english
    assert png(fig) == english  # texts, fonts and tick formatters restored
    assert ax_texts(fig) == ["a title", "heads pruned (%)", "test accuracy"]
    plt.close(fig)


def ax_texts(fig):
    ax = fig.axes[0]
    return [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]


def test_untranslated_texts_and_missing_glyphs_are_reported(font):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set(title="odd", xlabel="words nobody translated")
    _, report = draw_in_chinese(fig, png, CATALOG, font)
    assert report["untranslated"] == ["words nobody translated"]
    assert len(report["missing_glyphs"]) == 1 and "131072" in report["missing_glyphs"][0]
    plt.close(fig)


def test_tick_labels_marked_as_data_stay_as_they_are(font):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.imshow(np.eye(3))
    ax.set_xticks(range(3), ["the", "cat", "sat"])
    keep_text(ax.xaxis)
    seen = {}

    def draw(f):
        f.canvas.draw()
        seen["ticks"] = [t.get_text() for t in ax.get_xticklabels()]

    _, report = draw_in_chinese(fig, draw, CATALOG, font)
    assert seen["ticks"] == ["the", "cat", "sat"] and report["untranslated"] == []
    with pytest.raises(ValueError, match="Axis or Text"):
        keep_text(ax)
    plt.close(fig)


def test_draw_in_chinese_refuses_what_is_not_a_figure_and_a_missing_font(tmp_path, font):
    with pytest.raises(ValueError, match="matplotlib Figure"):
        draw_in_chinese("fig", png, CATALOG, font)
    fig = plt.figure()
    with pytest.raises(ValueError, match="no font file"):
        draw_in_chinese(fig, png, CATALOG, tmp_path / "none.ttf")
    plt.close(fig)


def test_a_warning_that_is_not_about_glyphs_still_reaches_the_caller(font):
    fig = plt.figure()

    def draw(f):
        warnings.warn("something else", UserWarning, stacklevel=2)

    with pytest.warns(UserWarning, match="something else"):
        draw_in_chinese(fig, draw, CATALOG, font)
    plt.close(fig)


# ----------------------------------------------------------------------------- the kernel's hook
@pytest.fixture
def shell():
    """An IPython shell (the one get_ipython() returns) whose PNG formatter draws figures as the inline backend's."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats

    shell = InteractiveShell.instance()
    select_figure_formats(shell, {"png"})
    bilingual._ACTIVE.clear()
    yield shell
    select_figure_formats(shell, {"png"})  # the plain formatter again
    bilingual._ACTIVE.clear()  # and no Chinese copies


def test_bilingual_figures_does_nothing_without_the_books_environment(monkeypatch, shell):
    monkeypatch.delenv(bilingual.LABELS_ENV, raising=False)
    monkeypatch.delenv(bilingual.FONT_ENV, raising=False)
    assert bilingual.bilingual_figures() is False
    with pytest.raises(ValueError, match="both"):
        bilingual.bilingual_figures(labels=str(LABELS))


def test_bilingual_figures_stores_the_chinese_copy_with_the_figure_and_with_a_glued_one(tmp_path, shell, font):
    labels = tmp_path / "labels.yml"
    labels.write_text("exact:\n  test accuracy: 测试准确率\n", encoding="utf-8")
    assert bilingual.bilingual_figures(str(labels), str(font)) is True
    assert bilingual.bilingual_figures(str(labels), str(font)) is True  # again: replaces, does not wrap twice
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_ylabel("test accuracy")
    data, metadata = shell.display_formatter.format(fig)
    copy = metadata["image/png"][bilingual.METADATA_KEY]
    assert copy["untranslated"] == [] and copy["missing_glyphs"] == []
    english, chinese = base64.b64decode(data["image/png"]), base64.b64decode(copy["png"])
    assert english[:8] == chinese[:8] == b"\x89PNG\r\n\x1a\n" and english != chinese
    assert shell.display_formatter.format(fig)[0]["image/png"] == data["image/png"]  # English unchanged
    from IPython.core.formatters import format_display_data  # what myst-nb's glue calls

    glued_data, glued_metadata = format_display_data(fig)
    assert glued_metadata["image/png"][bilingual.METADATA_KEY]["png"] == copy["png"]
    ax.set_ylabel("nothing known")
    ax.set_title("")
    report = shell.display_formatter.format(fig)[1]["image/png"][bilingual.METADATA_KEY]
    assert report["untranslated"] == ["nothing known"] and "png" not in report  # nothing changed: no copy
    plt.close(fig)


def test_a_heads_figure_carries_its_chinese_copy_for_its_html_too(tmp_path, shell, font):
    """viz.plot_heads's HeadsFigure displays as HTML with its PNG inside; with bilingual_figures on, its output
    metadata holds the Chinese copy (tokens and head labels kept, the colour bar's label translated)."""
    import torch

    from mha_lib import viz

    labels = tmp_path / "labels.yml"
    labels.write_text("keep: '\\bL\\d+\\.H\\d+\\b'\nexact:\n  attention weight: 注意力权重\n", encoding="utf-8")
    fig = viz.plot_heads(torch.softmax(torch.randn(2, 3, 3), -1), ["the", "cat", "sat"])
    assert isinstance(fig._repr_mimebundle_(), dict)  # off: the plain bundle
    assert bilingual.bilingual_figures(str(labels), str(font))
    data, metadata = shell.display_formatter.format(fig)
    copy = metadata["text/html"][bilingual.METADATA_KEY]
    assert copy["untranslated"] == [] and copy["missing_glyphs"] == [] and copy["png"] not in data["text/html"]
    english_html_png = data["text/html"].split("base64,")[1].split('"')[0]
    assert base64.b64decode(copy["png"])[:8] == base64.b64decode(english_html_png)[:8] == b"\x89PNG\r\n\x1a\n"
    # its image/png comes from the kernel's figure formatter (a HeadsFigure is a Figure), with its own copy
    assert metadata["image/png"][bilingual.METADATA_KEY]["png"] != data["image/png"]
    plt.close(fig)


def test_a_heads_figure_with_a_phone_layout_carries_a_chinese_copy_of_each_layout(tmp_path, shell, font):
    """issue 50: a grid wider than a phone shows as a <picture> of two PNGs; the Chinese edition swaps each."""
    import torch

    from mha_lib import viz

    labels = tmp_path / "labels.yml"
    labels.write_text("keep: '\\bL\\d+\\.H\\d+\\b'\nexact:\n  attention weight: 注意力权重\n", encoding="utf-8")
    fig = viz.plot_heads(torch.softmax(torch.randn(8, 3, 3), -1), ["the", "cat", "sat"])
    assert fig.narrow is not None
    assert bilingual.bilingual_figures(str(labels), str(font))
    data, metadata = shell.display_formatter.format(fig)
    copy = metadata["text/html"][bilingual.METADATA_KEY]
    english = re.findall(r"data:image/png;base64,([^\"]+)", data["text/html"])  # narrow, then wide
    assert len(copy["pngs"]) == len(english) == 2 and copy["untranslated"] == [] == copy["missing_glyphs"]
    for chinese, original in zip(copy["pngs"], english):
        assert chinese != original
        assert base64.b64decode(chinese)[16:24] == base64.b64decode(original)[16:24]  # same width and height
    plt.close(fig)


# ----------------------------------------------------------------------------- hardening (issue 47, fifth pass)
@pytest.mark.parametrize("english, chinese", [
    ("cost", r"成本 $\frac{$"),  # mathtext matplotlib cannot parse: the figure's drawing raised, naming no entry
    ("cost", r"$\undefinedcmd$ 成本"),
    ("cost of $x$", "成本"),  # the math dropped
    ("cost of $x$", "$y$ 的成本"),  # the math changed
])
def test_a_translation_must_keep_its_texts_math_exactly(english, chinese):
    with pytest.raises(ValueError, match=rf"{re.escape(repr(english))}.*math"):
        LabelCatalog({english: chinese}, [])


def test_a_rules_translation_that_breaks_the_math_is_refused_naming_the_text():
    catalog = LabelCatalog({}, [[r"cost (\d+)", r"成本 $\\frac{\1$"]])
    with pytest.raises(ValueError, match=r"'cost 3'.*math"):
        catalog.translate("cost 3")


def test_math_kept_as_it_is_translates():
    assert LabelCatalog({"cost of $x$": "$x$ 的成本"}, []).translate("cost of $x$") == ("$x$ 的成本", True)


def test_a_glyph_missing_inside_math_is_reported(font):
    """Mathtext reports a missing glyph on matplotlib's logger, not as a warning: the report said nothing while
    the figure drew boxes (here: Chinese inside $...$, which mathtext draws with its own fonts)."""
    fig, ax = plt.subplots()
    ax.set_title(r"$\mathrm{成本}$")
    keep_text(ax.title)
    _, report = draw_in_chinese(fig, lambda f: f.savefig(io.BytesIO(), format="png"), LabelCatalog({}, []), font)
    plt.close(fig)
    assert any("U+6210" in message for message in report["missing_glyphs"]), report


def test_chinese_words_beside_math_are_drawn_with_the_chinese_font(font):
    """A text with $...$ is drawn by mathtext, whose words take one font without fallback: chapter 1's legend
    '一个头，$a$ 上的权重为 $w$' drew nine boxes while the Chinese font came after the English one."""
    fig, ax = plt.subplots()
    ax.plot([0, 1], label="one head, weight $w$ on $a$")
    ax.legend()
    catalog = LabelCatalog({"one head, weight $w$ on $a$": "一个头，$a$ 上的权重为 $w$"}, [])
    _, report = draw_in_chinese(fig, lambda f: f.savefig(io.BytesIO(), format="png"), catalog, font)
    plt.close(fig)
    assert report["untranslated"] == [] and report["missing_glyphs"] == [], report


def test_bold_text_drawn_in_chinese_writes_nothing_to_stderr(font, capsys):
    """The Chinese font has one weight: font_manager logged 'Failed to find font weight bold' to the kernel's
    stderr, an output the English run lacks (nbval failed on chapter 2's relation figure)."""
    import logging

    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "*", fontweight="bold")
    ax.set_title("test accuracy", fontweight="bold")
    handler = logging.StreamHandler()  # as a kernel shows a logger's warnings
    logging.getLogger("matplotlib").addHandler(handler)
    try:
        draw_in_chinese(fig, lambda f: f.savefig(io.BytesIO(), format="png"), CATALOG, font)
    finally:
        logging.getLogger("matplotlib").removeHandler(handler)
        plt.close(fig)
    assert "find font weight" not in capsys.readouterr().err
