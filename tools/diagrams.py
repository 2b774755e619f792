"""Draw the book's diagrams as SVG files in _static/diagrams/ (run by `make book`), in English and Chinese.

The diagrams are code, like every other figure of the book: plain SVG written by this script
(no drawing library), deterministic, so that a changed diagram shows up as a changed file. Each
has a <title> and <desc> for screen readers; the pages that show them give the same text as alt text.

One drawing, two languages: each diagram's words go through ``tr``, which is the identity for English
and, for Chinese, the figure label catalog (``locale/zh_CN/figure_labels.yml``, the one the matplotlib
figures use: ``mha_lib.viz.bilingual``); a word it lacks stops the script, naming it. The Chinese copy is
``<name>.zh_CN.svg``, which the Chinese edition shows in place of ``<name>.svg`` (Sphinx's
``figure_language_filename``). A page shows an SVG as an image, which cannot use the page's fonts, so a
Chinese copy carries the glyphs it draws: a subset of Noto Sans SC (the TTF of ``DRAWING_FONT``, the
served font's family), embedded as a data URL; ``missing_glyphs`` checks that it has every Chinese one.

    python tools/diagrams.py            # writes _static/diagrams/*.svg
    python tools/diagrams.py --check    # exit 1 if a committed file (either language) differs from what it draws
"""
from __future__ import annotations

import argparse
import base64
import io
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_static" / "diagrams"
LABELS = ROOT / "locale" / "zh_CN" / "figure_labels.yml"
sys.path.insert(0, str(ROOT / "_ext"))
from mha_book_assets import DRAWING_FONT  # noqa: E402  (the Chinese figures' TTF, under tests/browser/node_modules)

FONT_FILE = ROOT / "tests" / "browser" / "node_modules" / DRAWING_FONT
FONT = "font-family='DejaVu Sans, Arial, Helvetica, sans-serif'"
ZH_FAMILY = "Noto Sans SC"  # the embedded subset's name inside a Chinese SVG
# Characters a Chinese diagram must draw from its embedded font: CJK ideographs, CJK punctuation, fullwidth forms.
CJK_CHAR = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
INK, MUTED, LINE = "#1f2933", "#52606d", "#52606d"
FILL = {"input": "#e4f0fb", "proj": "#fdf1dc", "attn": "#e6f6ec", "head": "#f2e8fb", "out": "#e4f0fb"}


def _svg(width: int, height: int, title: str, desc: str, body: list[str]) -> str:
    return "\n".join([
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' width='{width}' "
        f"height='{height}' role='img' aria-labelledby='t d'>",
        f"<title id='t'>{escape(title)}</title>",
        f"<desc id='d'>{escape(desc)}</desc>",
        "<!--FONT-->",  # where a Chinese copy's font goes (with_font); dropped from an English one
        "<defs><marker id='arrow' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' markerHeight='7' "
        f"orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' fill='{LINE}'/></marker></defs>",
        f"<rect width='{width}' height='{height}' fill='white'/>",
        *body,
        "</svg>",
        "",
    ])


def _box(x, y, w, h, kind, lines, size=14):
    """A rounded box with centred lines of text; a line may hold <tspan> markup."""
    out = [f"<rect x='{x}' y='{y}' width='{w}' height='{h}' rx='6' fill='{FILL[kind]}' stroke='{LINE}'/>"]
    top = y + h / 2 - (len(lines) - 1) * size * 0.6
    for i, text in enumerate(lines):
        out.append(f"<text x='{x + w / 2}' y='{top + i * size * 1.2 + size * 0.35:.1f}' text-anchor='middle' "
                   f"font-size='{size}' fill='{INK}' {FONT}>{text}</text>")
    return out


def _arrow(x1, y1, x2, y2):
    return [f"<line x1='{x1}' y1='{y1}' x2='{x2}' y2='{y2}' stroke='{LINE}' stroke-width='1.5' "
            f"marker-end='url(#arrow)'/>"]


def _label(x, y, text, size=12, anchor="middle", colour=MUTED):
    return [f"<text x='{x}' y='{y}' text-anchor='{anchor}' font-size='{size}' fill='{colour}' {FONT}>{text}</text>"]


def sub(base: str, index: str) -> str:
    return f"{base}<tspan baseline-shift='sub' font-size='70%'>{index}</tspan>"


def sup_sub(base: str, upper: str, index: str) -> str:
    return (f"{base}<tspan baseline-shift='super' font-size='70%'>{upper}</tspan>"
            f"<tspan baseline-shift='sub' font-size='70%' dx='-0.6em'>{index}</tspan>")


DMODEL, DK, DFF = sub("d", "model"), sub("d", "k"), sub("d", "ff")


def mha_dataflow(tr: Callable[[str], str] = str) -> str:
    """The data flow of multi-head attention: one input, H heads with their own projections.

    Drawn top to bottom in a narrow column, so that it stays legible on a phone."""
    W, H = 500, 700
    mid = W / 2
    lanes = [("1", 110), ("2", 250), ("H", 420)]
    # the input feeds every head: a rail on the left
    body = _box(mid - 90, 10, 180, 56, "input", [tr("input X"), f"(L × {DMODEL})"], size=15)
    body += [f"<path d='M {mid} 66 V 84 H 8 V {lanes[-1][1] + 32}' fill='none' stroke='{LINE}' stroke-width='1.5'/>"]
    for index, y in lanes:
        body += _arrow(8, y + 32, 18, y + 32)
        body += _box(20, y, 200, 64, "proj", [f"{sub('Q', index)} = X {sup_sub('W', 'Q', index)}",
                                               tr("{K}, {V} likewise").format(K=sub('K', index), V=sub('V', index))],
                     size=15)
        body += _arrow(220, y + 32, 258, y + 32)
        body += _box(260, y, 220, 64, "attn", [
            f"softmax({sub('Q', index)}{sub('K', index)}<tspan baseline-shift='super' font-size='70%'>⊤</tspan> / √{DK})",
            tr("× {V}  →  head {i}").format(V=sub('V', index), i=index)], size=15)
        body += _label(370, y + 84, tr("(L × {dk}): one mix of values per query").format(dk=DK), size=12)
        body += [f"<line x1='480' y1='{y + 32}' x2='492' y2='{y + 32}' stroke='{LINE}' stroke-width='1.5'/>"]
    body += _label(120, 375, "⋮", size=24, colour=INK)
    body += _label(370, 375, "⋮", size=24, colour=INK)
    # the heads' outputs gather on a rail on the right, down to Concat
    body += [f"<path d='M 492 {lanes[0][1] + 32} V 560 H {mid + 8}' fill='none' stroke='{LINE}' stroke-width='1.5' "
             f"marker-end='url(#arrow)'/>"]
    body += _box(mid - 150, 540, 150, 56, "head", [tr("Concat"), f"(L × H {DK})"], size=15)
    body += _arrow(mid - 75, 596, mid - 75, 622)
    body += _box(mid - 150, 624, 150, 56, "out", [f"× {sup_sub('W', 'O', '')}", f"(L × {DMODEL})"], size=15)
    note = tr("each head: its own projections,\nits own attention; then mixed\nby {WO}").format(WO=sup_sub('W', 'O', ''))
    for i, line in enumerate(note.split("\n")):
        body += _label(mid + 12, 650 + 16 * i, line, size=12, anchor="start")
    return _svg(W, H, tr("Multi-head attention, data flow"),
                tr("The input X, of L tokens by d_model features, goes to H heads. Head i projects it with its own "
                   "matrices into queries, keys and values of width d_k, computes softmax(Q_i K_i transposed over the "
                   "square root of d_k) times V_i, and returns L by d_k values. The H head outputs are concatenated "
                   "into L by H d_k and multiplied by W^O, giving an L by d_model output."), body)


def transformer_block(tr: Callable[[str], str] = str) -> str:
    """The pre-LN Transformer block around multi-head attention, as mha_lib builds it."""
    W, H = 520, 515
    body: list[str] = []
    x0 = 200
    body += _box(x0, 415, 140, 40, "input", [f"x (L × {DMODEL})"], size=13)
    body += _arrow(x0 + 70, 415, x0 + 70, 375)
    body += _box(x0, 335, 140, 40, "proj", [tr("LayerNorm")], size=13)
    body += _arrow(x0 + 70, 335, x0 + 70, 305)
    body += _box(x0, 255, 140, 50, "attn", tr("multi-head\nattention").split("\n"), size=13)
    body += _arrow(x0 + 70, 255, x0 + 70, 232)
    body += [f"<circle cx='{x0 + 70}' cy='220' r='12' fill='white' stroke='{LINE}'/>"]
    body += _label(x0 + 70, 225, "+", size=16, colour=INK)
    # residual 1: from the input around to the sum
    body += [f"<path d='M {x0 + 70} 395 H {x0 - 40} V 220 H {x0 + 56}' fill='none' stroke='{LINE}' "
             f"stroke-width='1.5' marker-end='url(#arrow)'/>"]
    body += _label(x0 - 48, 300, tr("residual"), size=11, anchor="end")
    body += _arrow(x0 + 70, 208, x0 + 70, 180)
    body += _box(x0, 140, 140, 40, "proj", [tr("LayerNorm")], size=13)
    body += _arrow(x0 + 70, 140, x0 + 70, 115)
    body += _box(x0, 70, 140, 45, "head", [tr("MLP (feed-forward)"), f"{DMODEL} → {DFF} → {DMODEL}"], size=12)
    body += _arrow(x0 + 70, 70, x0 + 70, 47)
    body += [f"<circle cx='{x0 + 70}' cy='35' r='12' fill='white' stroke='{LINE}'/>"]
    body += _label(x0 + 70, 40, "+", size=16, colour=INK)
    body += [f"<path d='M {x0 + 70} 198 H {x0 + 180} V 35 H {x0 + 84}' fill='none' stroke='{LINE}' "
             f"stroke-width='1.5' marker-end='url(#arrow)'/>"]
    body += _label(x0 + 188, 120, tr("residual"), size=11, anchor="start")
    body += _arrow(x0 + 70, 23, x0 + 70, -20)
    body += _label(x0 + 82, -6, tr("to the next block"), size=11, anchor="start")
    body += _label(260, 472, tr("pre-LN, as mha_lib's toy models (BERT puts each LayerNorm after its sum)"), size=11)
    body = ["<g transform='translate(0,32)'>", *body, "</g>"]
    return _svg(W, H, tr("A Transformer block around multi-head attention"),
                tr("From the bottom: the input x goes through a LayerNorm into multi-head attention, whose output is "
                   "added to x (a residual connection). The sum goes through a second LayerNorm into a feed-forward "
                   "MLP, whose output is added to the sum again, and passed to the next block."), body)


def favicon() -> str:
    """The book's icon: three heads (coloured bars) over one input (a grey bar)."""
    bars = "".join(f"<rect x='{4 + 9 * i}' y='4' width='6' height='16' rx='2' fill='{c}'/>"
                   for i, c in enumerate(("#3b82c4", "#2f9e5a", "#8e5bc7")))
    return ("<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 32 32' width='32' height='32'>"
            f"{bars}<rect x='4' y='24' width='24' height='5' rx='2' fill='#52606d'/></svg>\n")


DIAGRAMS = {"mha_dataflow.svg": mha_dataflow, "transformer_block.svg": transformer_block, "favicon.svg": favicon}
TRANSLATED = ("mha_dataflow.svg", "transformer_block.svg")  # the diagrams with words: a Chinese copy each
LANGUAGES = ("zh_CN",)


def chinese(labels: Path = LABELS) -> Callable[[str], str]:
    """``tr`` for Chinese: the figure label catalog's translation of a diagram's text (its ``{placeholders}`` kept).

    Raises:
        ValueError: a text the catalog cannot translate (naming it and the catalog).
    """
    sys.path.insert(0, str(ROOT))
    from mha_lib.viz.bilingual import LabelCatalog  # the catalog of the matplotlib figures too

    catalog = LabelCatalog.load(labels)

    def tr(text: str) -> str:
        out, complete = catalog.translate(text)
        if not complete:
            raise ValueError(f"{labels.relative_to(ROOT)}: " + (f"no Chinese for the diagram text {text!r}"
                             if out == text else f"the Chinese of {text!r} keeps English words: {out!r}"))
        return out

    return tr


@lru_cache(maxsize=None)
def _font_bytes(path: Path = FONT_FILE) -> bytes:
    if not path.is_file():
        raise SystemExit(f"the Chinese diagrams' font is missing ({path}): run  npm ci --prefix tests/browser")
    return path.read_bytes()


def _texts(svg: str) -> str:
    """Everything a diagram writes as text (its <text> elements, tspans included, entities decoded)."""
    from xml.etree import ElementTree

    tree = ElementTree.fromstring(svg)
    return "".join("".join(el.itertext()) for el in tree.iter("{http://www.w3.org/2000/svg}text"))


def subset_font(chars: str) -> bytes:
    """The Noto Sans SC TTF cut down to ``chars`` (no hinting), the same bytes for the same characters."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    font = TTFont(io.BytesIO(_font_bytes()), recalcTimestamp=False)
    options = subset.Options()
    options.hinting = False
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6]  # copyright, names, version
    options.name_languages = [0x409]
    options.layout_features = []  # single glyphs: no ligatures or kerning to carry
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=chars)
    subsetter.subset(font)
    out = io.BytesIO()
    font.save(out, reorderTables=True)
    return out.getvalue()


def with_font(svg: str, language: str) -> str:
    """``svg`` with its font line filled: nothing for English; for Chinese, an @font-face with the glyphs of its
    CJK characters (the rest is drawn by the English copy's fonts, listed first)."""
    if language == "en":
        return svg.replace("<!--FONT-->\n", "")
    chars = "".join(sorted(set(CJK_CHAR.findall(_texts(svg)))))
    data = base64.b64encode(subset_font(chars)).decode("ascii")
    style = (f"<style>@font-face {{ font-family: '{ZH_FAMILY}'; "
             f"src: url(data:font/ttf;base64,{data}) format('truetype'); }}</style>")
    return svg.replace("<!--FONT-->", style).replace(FONT, FONT.replace("sans-serif'", f"{ZH_FAMILY}, sans-serif'"))


def missing_glyphs(svg: str) -> list[str]:
    """The CJK characters of a diagram's text that its embedded font does not have (all of them if none is)."""
    from fontTools.ttLib import TTFont

    chars = sorted(set(CJK_CHAR.findall(_texts(svg))))
    found = re.search(r"url\(data:font/ttf;base64,([A-Za-z0-9+/=]+)\)", svg)
    if not found:
        return chars
    cmap = TTFont(io.BytesIO(base64.b64decode(found[1]))).getBestCmap()
    return [c for c in chars if ord(c) not in cmap]


def drawings(languages=("en", *LANGUAGES)) -> dict[str, str]:
    """{file name: SVG text} of every diagram in every language (``name.svg``, ``name.zh_CN.svg``)."""
    out = {}
    for language in languages:
        tr = str if language == "en" else chinese()
        for name, draw in DIAGRAMS.items():
            if language != "en" and name not in TRANSLATED:
                continue
            path = name if language == "en" else name.replace(".svg", f".{language}.svg")
            out[path] = with_font(draw(tr) if name in TRANSLATED else draw(), language)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the files instead of writing")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    stale, bad = [], []
    for name, text in drawings().items():
        path = OUT / name
        if ".zh_CN." in name and missing_glyphs(text):
            bad.append(f"{name}: no glyph for {''.join(missing_glyphs(text))}")
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if bad:
        print("\n".join(bad), file=sys.stderr)
        return 1
    if stale:
        print(f"diagrams out of date: {stale}; run python tools/diagrams.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
