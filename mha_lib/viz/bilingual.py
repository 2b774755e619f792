"""Figures in two languages: a matplotlib figure drawn in English and, from the same artists, in Chinese.

The book's Chinese edition shows the English pages' own computed outputs (``tools/build_zh.py``). A figure's
words are pixels by then, so the kernel that runs a chapter for the book draws each figure twice: as it is, and
with every text artist -- titles, axis labels, tick labels, legend entries, annotations, suptitles, colour-bar
labels -- translated by a label catalog and drawn with Noto Sans SC, the font the Chinese pages serve. Same
data, same layout code, one language switch. :func:`mha_lib.notebook.bilingual_figures` hooks this into the
kernel's display of figures; the Chinese build swaps the Chinese image in (``_ext/mha_i18n.py``).

* :class:`LabelCatalog` -- the catalog (``locale/zh_CN/figure_labels.yml``): ``exact`` strings, ``rules``
  (a regular expression that must match the whole text, and its replacement) and ``keep`` (a regular expression
  of the spans that stay as they are in every language: head labels, special tokens, names). A multi-line text
  without an entry of its own is translated line by line.
* :func:`draw_in_chinese` -- ``draw(fig)`` with the figure's texts in Chinese, the figure restored afterwards;
  returns what ``draw`` returned and a report: the texts left untranslated and the glyphs the fonts lack
  (matplotlib's "Glyph ... missing from font(s)" warnings).
* :func:`bilingual_figures` -- the hook: the kernel's PNG of every matplotlib figure gets its Chinese copy.
* :func:`keep_text` -- mark an axis (its tick labels) or a text artist as data, never translated: the tokens of
  a sentence a model reads are English in both editions.
"""
from __future__ import annotations

import base64
import logging
import os
import re
import warnings
import weakref
from pathlib import Path
from typing import Any, Callable

from .. import notebook
from ..notebook import ZH_FIGURE_KEY
from ._extras import Figure, matplotlib

__all__ = ["LabelCatalog", "draw_in_chinese", "keep_text", "register_font", "bilingual_figures", "chinese_copy",
           "METADATA_KEY"]

LABELS_ENV = "MHA_FIGURE_LABELS"  # the figure label catalog (locale/zh_CN/figure_labels.yml)
FONT_ENV = "MHA_ZH_FONT"  # the Chinese font the figures are drawn with (a TTF of Noto Sans SC)
METADATA_KEY = ZH_FIGURE_KEY  # output.metadata["image/png"][METADATA_KEY]: the Chinese copy and its report
_MATH = re.compile(r"(?<!\\)\$[^$]*(?<!\\)\$|\{[A-Za-z_]\w*\}")  # math, and {placeholders} (diagrams)
_DOLLARS = re.compile(r"(?<!\\)\$[^$]*(?<!\\)\$")  # mathtext spans: a translation keeps them exactly
_WORD = re.compile(r"[A-Za-z]{2,}")
_KEPT: "weakref.WeakSet[Any]" = weakref.WeakSet()  # axes (their tick labels) and texts that are data
_FONTS: dict[str, str] = {}  # path -> family name, fonts registered with matplotlib
_ACTIVE: dict[str, Any] = {}  # bilingual_figures' catalog and font, while the kernel draws figures in both languages


def keep_text(*artists: Any) -> None:
    """Mark each of ``artists`` -- an ``Axis`` (``ax.xaxis``: its tick labels) or a ``Text`` -- as data,
    drawn as it is in both languages (tokens a model reads, not labels).

    Raises:
        ValueError: an argument that is neither an Axis nor a Text.
    """
    for artist in artists:
        if not isinstance(artist, (matplotlib.axis.Axis, matplotlib.text.Text)):
            raise ValueError(f"keep_text takes matplotlib Axis or Text objects, got {type(artist).__name__}")
        _KEPT.add(artist)


class LabelCatalog:
    """A figure label catalog: English text -> Chinese text.

    Args:
        exact: {English: Chinese}, whole texts.
        rules: [(pattern, replacement)], tried in order when no exact entry matches: the pattern must match the
            whole text, and the replacement may use its groups (``\\1``).
        keep: a regular expression of the spans that are the same in every language (found anywhere in a text).

    Raises:
        ValueError: an entry that is not a string pair, a pattern that does not compile, or a translation whose
            ``$...$`` math differs from its text's (naming it; for a rule, when :meth:`translate` applies it).
    """

    def __init__(self, exact: dict, rules: list, keep: str = r"(?!x)x"):
        if not isinstance(exact, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in exact.items()):
            raise ValueError("exact must map English strings to Chinese strings")
        for english, chinese in exact.items():
            self._same_math(english, chinese)
        self.exact = dict(exact)
        self.rules = []
        for rule in rules:
            if not (isinstance(rule, (list, tuple)) and len(rule) == 2 and all(isinstance(r, str) for r in rule)):
                raise ValueError(f"a rule must be [pattern, replacement], got {rule!r}")
            self.rules.append((self._compile(rule[0]), rule[1]))
        self.keep = self._compile(keep)

    @staticmethod
    def _same_math(english: str, chinese: str) -> None:
        """Refuse a translation whose ``$...$`` spans differ from its text's: math is the same in every language,
        and a span the translator wrote could be mathtext matplotlib cannot draw (the figure would not draw).

        Raises:
            ValueError: naming both texts."""
        if sorted(_DOLLARS.findall(english)) != sorted(_DOLLARS.findall(chinese)):
            raise ValueError(f"the translation {chinese!r} of {english!r} must keep its math ($...$) exactly, "
                             f"got {_DOLLARS.findall(chinese)} for {_DOLLARS.findall(english)}")

    @staticmethod
    def _compile(pattern: str) -> re.Pattern:
        try:
            return re.compile(pattern)
        except re.error as err:
            raise ValueError(f"bad pattern {pattern!r}: {err}") from err

    @classmethod
    def load(cls, path: str | Path) -> "LabelCatalog":
        """The catalog of a YAML file with ``keep``, ``exact`` and ``rules``.

        Raises:
            ValueError: a missing file or key, or a bad entry (naming the file).
        """
        import yaml  # the book's build only (PyYAML comes with Jupyter Book)

        path = Path(path)
        if not path.is_file():
            raise ValueError(f"no figure label catalog at {str(path)!r}")
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        try:
            return cls(data.get("exact") or {}, data.get("rules") or [], data.get("keep") or r"(?!x)x")
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from err

    def needs_translation(self, text: str) -> bool:
        """True when ``text`` has an English word (two letters or more) outside math, ``{placeholders}`` and the
        kept spans."""
        return bool(_WORD.search(self.keep.sub(" ", _MATH.sub(" ", text))))

    def translate(self, text: str) -> tuple[str, bool]:
        """(the Chinese of ``text``, whether it is complete): ``text`` itself, complete, when it needs no
        translation; ``text`` and False when no entry or rule knows it (or what they give keeps English)."""
        if not self.needs_translation(text):
            return text, True
        if text in self.exact:
            out = self.exact[text]
        else:
            for pattern, replacement in self.rules:
                found = pattern.fullmatch(text)
                if found:
                    out = found.expand(replacement)
                    break
            else:
                if "\n" not in text:
                    return text, False
                lines = [self.translate(line) for line in text.split("\n")]
                return "\n".join(line for line, _ in lines), all(ok for _, ok in lines)
            self._same_math(text, out)  # a rule's groups are only known now
        return out, not self.needs_translation(out)


def register_font(path: str | Path) -> str:
    """Register the font file at ``path`` with matplotlib (once); its family name.

    Raises:
        ValueError: no font file at ``path``.
    """
    key = str(Path(path).resolve())
    if key not in _FONTS:
        if not Path(key).is_file():
            raise ValueError(f"no font file at {str(path)!r}")
        matplotlib.font_manager.fontManager.addfont(key)
        _FONTS[key] = matplotlib.font_manager.FontProperties(fname=key).get_name()
    return _FONTS[key]


class _Translating(matplotlib.ticker.Formatter):
    """An axis's tick formatter whose labels come out translated (tick labels are made while drawing)."""

    def __init__(self, inner, translate: Callable[[str], str]):
        self.inner, self.translate = inner, translate

    def __call__(self, x, pos=None):
        return self.translate(self.inner(x, pos))

    def format_ticks(self, values):
        return [self.translate(s) for s in self.inner.format_ticks(values)]

    def set_locs(self, locs):
        self.inner.set_locs(locs)

    def get_offset(self):
        return self.translate(self.inner.get_offset())


class _MissingGlyphs(logging.Handler):
    """Collects mathtext's "Font ... does not have a glyph for ..." log records into a set of messages."""

    def __init__(self, found: set):
        super().__init__(logging.WARNING)
        self.found = found

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "does not have a glyph" in message:
            self.found.add(message)


def draw_in_chinese(fig: Figure, draw: Callable[[Figure], Any], catalog: LabelCatalog,
                    font: str | Path) -> tuple[Any, dict]:
    """``draw(fig)`` with every text of ``fig`` in Chinese, drawn with the font at ``font`` after each text's own.

    Texts and axes marked with :func:`keep_text` stay as they are. The figure is restored afterwards (its texts,
    fonts and tick formatters), so that it draws in English again, pixel for pixel.

    Returns:
        (what ``draw`` returned, report): the report's ``"untranslated"`` lists the texts (sorted, once each) that
        the catalog could not translate (they are drawn in English), ``"missing_glyphs"`` matplotlib's warnings
        about characters no font has (and mathtext's, which it logs instead), and ``"translated"`` how many
        texts changed.

    Raises:
        ValueError: ``fig`` is not a matplotlib Figure, or no font file at ``font``.
    """
    if not isinstance(fig, Figure):
        raise ValueError(f"draw_in_chinese needs a matplotlib Figure, got {type(fig).__name__}")
    family = register_font(font)
    report = {"untranslated": set(), "missing_glyphs": set(), "translated": 0}

    def translate(text: str) -> str:
        out, complete = catalog.translate(text)
        if not complete:
            report["untranslated"].add(text)
        report["translated"] += out != text
        return out

    axes = [axis for ax in fig.get_axes() for axis in (ax.xaxis, ax.yaxis)]
    tick_labels = {id(label) for axis in axes for tick in (*axis.majorTicks, *axis.minorTicks)
                   for label in (tick.label1, tick.label2)}
    texts = fig.findobj(matplotlib.text.Text)  # every text gets the font; labels (not data, not ticks) a translation
    saved_texts = [(t, t.get_text(), t.get_fontfamily(), t not in _KEPT and id(t) not in tick_labels) for t in texts]
    saved_formatters = [(ticker, ticker.formatter) for axis in axes if axis not in _KEPT
                        for ticker in (axis.major, axis.minor)]
    fonts = [family] + list(matplotlib.rcParams["font.family"])
    try:
        for text, words, families, label in saved_texts:
            # the Chinese font first (it has Latin letters too): mathtext draws a text's words with one font and no
            # fallback, and a tick label's text (with or without math) is only known when the figure is drawn
            text.set_fontfamily([family] + list(families))
            if words and label:
                text.set_text(translate(words))
        for ticker, formatter in saved_formatters:
            wrapped = _Translating(formatter, translate)
            wrapped.set_axis(formatter.axis)
            ticker.formatter = wrapped
        math_log = logging.getLogger("matplotlib.mathtext")  # mathtext's missing glyphs: logged, not warned
        handler = _MissingGlyphs(report["missing_glyphs"])
        math_log.addHandler(handler)
        # the Chinese font has one weight: bold text is drawn with it at 400, which font_manager logs to the
        # kernel's stderr ("Failed to find font weight bold"), an output the English run does not have
        font_log = logging.getLogger("matplotlib.font_manager")
        font_level = font_log.level
        font_log.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings(record=True) as caught, matplotlib.rc_context({"font.family": fonts}):
                warnings.simplefilter("always")
                result = draw(fig)
        finally:
            math_log.removeHandler(handler)
            font_log.setLevel(font_level)
        for warning in caught:
            if "missing from font" in str(warning.message):
                report["missing_glyphs"].add(str(warning.message))
            else:
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    finally:
        for ticker, formatter in saved_formatters:
            ticker.formatter = formatter
        for text, words, families, _ in saved_texts:
            text.set_text(words)
            text.set_fontfamily(families)
        fig.stale = True
    return result, {"untranslated": sorted(report["untranslated"]),
                    "missing_glyphs": sorted(report["missing_glyphs"]), "translated": report["translated"]}


def bilingual_figures(labels: str | None = None, font: str | None = None) -> bool:
    """Store a Chinese copy with every matplotlib figure this kernel shows from now on (the book's build).

    Each figure is drawn in English as before (the kernel's PNG formatter, unchanged), then once more with its
    texts in Chinese (:func:`mha_lib.viz.draw_in_chinese`), and the Chinese PNG goes into the output's
    metadata, ``metadata["image/png"]["mha_zh_CN"]``, with the texts left untranslated and the glyphs missing
    (``tests/test_i18n.py`` fails on either). Glued figures carry it too (myst-nb's ``glue`` formats the figure
    the same way), and so do both renderings of :func:`mha_lib.notebook.figure_pair` (in its HTML's metadata,
    ``metadata["text/html"]["mha_zh_CN"]["pngs"]``). The Chinese edition shows the Chinese copy
    (``_ext/mha_i18n.py``).

    Only where the book's execution asks: ``labels`` (the catalog) and ``font`` default to the environment's
    ``MHA_FIGURE_LABELS`` and ``MHA_ZH_FONT`` (``tools/execute_notebooks.py`` sets them); without either, as in
    a reader's Jupyter or Colab, nothing changes. Call it after ``import matplotlib.pyplot``; calling it again
    replaces the earlier hook.

    Returns:
        True when figures are now drawn in both languages, False when nothing changed.

    Raises:
        ValueError: one of ``labels`` and ``font`` given without the other, a missing file, or a kernel whose
            PNG formatter does not draw matplotlib figures (``matplotlib.pyplot`` not imported inline).
    """
    labels = labels if labels is not None else os.environ.get(LABELS_ENV)
    font = font if font is not None else os.environ.get(FONT_ENV)
    if not labels and not font:
        return False
    if not (labels and font):
        raise ValueError(f"bilingual_figures needs both the label catalog and the font, got labels={labels!r}, "
                         f"font={font!r} (environment: {LABELS_ENV}, {FONT_ENV})")
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    catalog = LabelCatalog.load(labels)
    register_font(font)
    _ACTIVE.clear()
    formatter = shell.display_formatter.formatters["image/png"]
    if not formatter.type_printers.get(Figure):
        import matplotlib.pyplot as plt

        # the inline backend registers its PNG printer when its module loads, on the first figure: load it now,
        # so that this hook comes after it (it would replace this one)
        plt.switch_backend(matplotlib.get_backend())
    try:
        current = formatter.lookup_by_type(Figure)
    except KeyError:
        raise ValueError("bilingual_figures: the kernel draws no matplotlib figure as PNG; "
                         "import matplotlib.pyplot (inline backend) first") from None
    english = getattr(current, "_mha_english", current)

    def both(fig):
        result = english(fig)
        data, metadata = result if isinstance(result, tuple) else (result, {})
        if data is None:
            return result
        return data, {**(metadata or {}), METADATA_KEY: chinese_copy(fig, english)}

    both._mha_english = english
    formatter.for_type(Figure, both)
    _ACTIVE.update(catalog=catalog, font=font)
    notebook.chinese_copy_hook = chinese_copy  # figure_pair's two renderings get their Chinese copies too
    return True


def chinese_copy(fig: Figure, draw: Callable[[Figure], Any]) -> dict | None:
    """The Chinese copy of ``fig`` as the book stores it, or None when :func:`bilingual_figures` is not on.

    Args:
        fig: the figure.
        draw: its PNG drawer (``fig`` -> PNG bytes or base64 text), the one its English image came from.

    Returns:
        ``{"png": base64 text (only when a text changed), "untranslated": [...], "missing_glyphs": [...]}``:
        what goes under ``metadata[mime]["mha_zh_CN"]``.
    """
    if not _ACTIVE:
        return None
    chinese, report = draw_in_chinese(fig, draw, _ACTIVE["catalog"], _ACTIVE["font"])
    chinese = chinese[0] if isinstance(chinese, tuple) else chinese
    copy = {"untranslated": report["untranslated"], "missing_glyphs": report["missing_glyphs"]}
    if report["translated"]:
        copy["png"] = chinese if isinstance(chinese, str) else base64.b64encode(chinese).decode("ascii")
    return copy
