"""Draw the book's diagrams as SVG files in _static/diagrams/ (run by `make book`).

The diagrams are code, like every other figure of the book: plain SVG written by this script
(no drawing library, no fonts to download), deterministic, so that a changed diagram shows up
as a changed file. Each has a <title> and <desc> for screen readers; the pages that show them
give the same text as alt text.

    python tools/diagrams.py            # writes _static/diagrams/*.svg
    python tools/diagrams.py --check    # exit 1 if a committed file differs from what it draws
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from xml.sax.saxutils import escape

OUT = Path(__file__).resolve().parent.parent / "_static" / "diagrams"
FONT = "font-family='DejaVu Sans, Arial, Helvetica, sans-serif'"
INK, MUTED, LINE = "#1f2933", "#52606d", "#52606d"
FILL = {"input": "#e4f0fb", "proj": "#fdf1dc", "attn": "#e6f6ec", "head": "#f2e8fb", "out": "#e4f0fb"}


def _svg(width: int, height: int, title: str, desc: str, body: list[str]) -> str:
    return "\n".join([
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' width='{width}' "
        f"height='{height}' role='img' aria-labelledby='t d'>",
        f"<title id='t'>{escape(title)}</title>",
        f"<desc id='d'>{escape(desc)}</desc>",
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


def mha_dataflow() -> str:
    """The data flow of multi-head attention: one input, H heads with their own projections.

    Drawn top to bottom in a narrow column, so that it stays legible on a phone."""
    W, H = 500, 700
    mid = W / 2
    lanes = [("1", 110), ("2", 250), ("H", 420)]
    # the input feeds every head: a rail on the left
    body = _box(mid - 90, 10, 180, 56, "input", ["input X", f"(L × {DMODEL})"], size=15)
    body += [f"<path d='M {mid} 66 V 84 H 8 V {lanes[-1][1] + 32}' fill='none' stroke='{LINE}' stroke-width='1.5'/>"]
    for index, y in lanes:
        body += _arrow(8, y + 32, 18, y + 32)
        body += _box(20, y, 200, 64, "proj", [f"{sub('Q', index)} = X {sup_sub('W', 'Q', index)}",
                                               f"{sub('K', index)}, {sub('V', index)} likewise"], size=15)
        body += _arrow(220, y + 32, 258, y + 32)
        body += _box(260, y, 220, 64, "attn", [
            f"softmax({sub('Q', index)}{sub('K', index)}<tspan baseline-shift='super' font-size='70%'>⊤</tspan> / √{DK})",
            f"× {sub('V', index)}  →  head {index}"], size=15)
        body += _label(370, y + 84, f"(L × {DK}): one mix of values per query", size=12)
        body += [f"<line x1='480' y1='{y + 32}' x2='492' y2='{y + 32}' stroke='{LINE}' stroke-width='1.5'/>"]
    body += _label(120, 375, "⋮", size=24, colour=INK)
    body += _label(370, 375, "⋮", size=24, colour=INK)
    # the heads' outputs gather on a rail on the right, down to Concat
    body += [f"<path d='M 492 {lanes[0][1] + 32} V 560 H {mid + 8}' fill='none' stroke='{LINE}' stroke-width='1.5' "
             f"marker-end='url(#arrow)'/>"]
    body += _box(mid - 150, 540, 150, 56, "head", ["Concat", f"(L × H {DK})"], size=15)
    body += _arrow(mid - 75, 596, mid - 75, 622)
    body += _box(mid - 150, 624, 150, 56, "out", [f"× {sup_sub('W', 'O', '')}", f"(L × {DMODEL})"], size=15)
    body += _label(mid + 12, 650, "each head: its own projections,", size=12, anchor="start")
    body += _label(mid + 12, 666, "its own attention; then mixed", size=12, anchor="start")
    body += _label(mid + 12, 682, f"by {sup_sub('W', 'O', '')}", size=12, anchor="start")
    return _svg(W, H, "Multi-head attention, data flow",
                "The input X, of L tokens by d_model features, goes to H heads. Head i projects it with its own "
                "matrices into queries, keys and values of width d_k, computes softmax(Q_i K_i transposed over the "
                "square root of d_k) times V_i, and returns L by d_k values. The H head outputs are concatenated "
                "into L by H d_k and multiplied by W^O, giving an L by d_model output.", body)


def transformer_block() -> str:
    """The pre-LN Transformer block around multi-head attention, as mha_lib builds it."""
    W, H = 520, 515
    body: list[str] = []
    x0 = 200
    body += _box(x0, 415, 140, 40, "input", [f"x (L × {DMODEL})"], size=13)
    body += _arrow(x0 + 70, 415, x0 + 70, 375)
    body += _box(x0, 335, 140, 40, "proj", ["LayerNorm"], size=13)
    body += _arrow(x0 + 70, 335, x0 + 70, 305)
    body += _box(x0, 255, 140, 50, "attn", ["multi-head", "attention"], size=13)
    body += _arrow(x0 + 70, 255, x0 + 70, 232)
    body += [f"<circle cx='{x0 + 70}' cy='220' r='12' fill='white' stroke='{LINE}'/>"]
    body += _label(x0 + 70, 225, "+", size=16, colour=INK)
    # residual 1: from the input around to the sum
    body += [f"<path d='M {x0 + 70} 395 H {x0 - 40} V 220 H {x0 + 56}' fill='none' stroke='{LINE}' "
             f"stroke-width='1.5' marker-end='url(#arrow)'/>"]
    body += _label(x0 - 48, 300, "residual", size=11, anchor="end")
    body += _arrow(x0 + 70, 208, x0 + 70, 180)
    body += _box(x0, 140, 140, 40, "proj", ["LayerNorm"], size=13)
    body += _arrow(x0 + 70, 140, x0 + 70, 115)
    body += _box(x0, 70, 140, 45, "head", ["MLP (feed-forward)", f"{DMODEL} → {DFF} → {DMODEL}"], size=12)
    body += _arrow(x0 + 70, 70, x0 + 70, 47)
    body += [f"<circle cx='{x0 + 70}' cy='35' r='12' fill='white' stroke='{LINE}'/>"]
    body += _label(x0 + 70, 40, "+", size=16, colour=INK)
    body += [f"<path d='M {x0 + 70} 198 H {x0 + 180} V 35 H {x0 + 84}' fill='none' stroke='{LINE}' "
             f"stroke-width='1.5' marker-end='url(#arrow)'/>"]
    body += _label(x0 + 188, 120, "residual", size=11, anchor="start")
    body += _arrow(x0 + 70, 23, x0 + 70, -20)
    body += _label(x0 + 82, -6, "to the next block", size=11, anchor="start")
    body += _label(260, 472, "pre-LN, as mha_lib's toy models (BERT puts each LayerNorm after its sum)", size=11)
    body = ["<g transform='translate(0,32)'>", *body, "</g>"]
    return _svg(W, H, "A Transformer block around multi-head attention",
                "From the bottom: the input x goes through a LayerNorm into multi-head attention, whose output is "
                "added to x (a residual connection). The sum goes through a second LayerNorm into a feed-forward "
                "MLP, whose output is added to the sum again, and passed to the next block.", body)


def favicon() -> str:
    """The book's icon: three heads (coloured bars) over one input (a grey bar)."""
    bars = "".join(f"<rect x='{4 + 9 * i}' y='4' width='6' height='16' rx='2' fill='{c}'/>"
                   for i, c in enumerate(("#3b82c4", "#2f9e5a", "#8e5bc7")))
    return ("<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 32 32' width='32' height='32'>"
            f"{bars}<rect x='4' y='24' width='24' height='5' rx='2' fill='#52606d'/></svg>\n")


DIAGRAMS = {"mha_dataflow.svg": mha_dataflow, "transformer_block.svg": transformer_block, "favicon.svg": favicon}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the files instead of writing")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    stale = []
    for name, draw in DIAGRAMS.items():
        text = draw()
        path = OUT / name
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"diagrams out of date: {stale}; run python tools/diagrams.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
