"""How fast the attention pictures are, on all-MiniLM-L6-v2 (6 layers x 12 heads).

Measures, each as the median of several runs (seconds, shown in ms):

* live recompute for a typed sentence, one layer: tokenize + forward pass + a 12-head frame
  (``render_heads_png``) -- what the reader waits for; the target is <= 200 ms on this CPU;
* the same through the layer explorer (``AttentionExplorer.set_sentence``: one forward pass,
  cached, 6 frames), until the frame on screen is replaced and until all 6 are;
* the reference: the same 12 heads drawn with matplotlib (``plot_heads`` + PNG), so the
  fast renderer is reported as a ratio against it, measured in the same run;
* the full 72-head picture, both ways.

Run:  python benchmarks/bench_viz.py [--threads N]   (or `make bench`). Prints a table;
asserts nothing. Torch uses one intra-op thread by default: this 2-core CPU is shared, and with
2 OpenMP threads competing with other jobs a MiniLM forward pass varied from 30 ms to over 1 s.
"""
from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import mha_lib  # noqa: E402
from mha_lib.pretrained import load_bert  # noqa: E402
from mha_lib.viz import Frame, attention_explorer, layer_frames, plot_heads, render_heads_png  # noqa: E402

TARGET_S = 0.200
LAYER = 2
# ~16 tokens each with [CLS]/[SEP]; a new sentence per run, as a reader typing would give.
SENTENCES = [
    "The animal didn't cross the street because it was too tired.",
    "A small dog barked at the mailman until he finally walked away.",
    "She read the letter twice before she put it back in the drawer.",
    "The committee approved the plan after a long and heated debate.",
    "My brother fixed the old bicycle that was rusting in our garage.",
    "Rain fell all night, so the river rose over the narrow bridge.",
    "The students who finished early helped the others with the task.",
    "He forgot his keys at the office and had to wait for his wife.",
]


def median_times(cases: dict, repeats: int) -> dict:
    """Median seconds per case. Cases take turns, so a busy shared CPU slows all of them alike."""
    for fn in cases.values():
        fn(0)  # warm-up (allocations, font cache)
    times = {name: [] for name in cases}
    for i in range(repeats):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn(i)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    torch.set_num_threads(parser.parse_args().threads)
    mha_lib.set_seed(0)
    model, _ = load_bert(verbose=False)
    model.eval()

    def forward(sentence):
        with torch.no_grad():
            out, batch = model.encode_text([sentence], output_attentions=True)
        return out.attentions, batch.tokens[0]

    attentions, tokens = forward(SENTENCES[0])
    n_tokens = [len(forward(s)[1]) for s in SENTENCES]

    def live_one_layer(i):
        atts, toks = forward(SENTENCES[i % len(SENTENCES)])
        render_heads_png(atts[LAYER][0], toks, layer=LAYER)

    def forward_only(i):
        forward(SENTENCES[i % len(SENTENCES)])

    cached = functools.lru_cache(maxsize=2)(forward)

    def compute(layer, sentence):
        atts, toks = cached(sentence)
        return Frame(atts[layer][0], toks, layer=layer, title=f"layer {layer}")

    explorer = attention_explorer(layer_frames(attentions, tokens), description="layer", compute=compute,
                                  sentence=SENTENCES[0])

    first_frame = []
    calls = iter(range(10**6))

    def live_explorer(_):
        i = next(calls)  # a sentence never shown just before, so the Image really changes
        start = time.perf_counter()
        image = explorer.image
        shown = []
        image.observe(lambda change: shown.append(time.perf_counter()), names="value")
        assert explorer.set_sentence(SENTENCES[(i + 1) % len(SENTENCES)] + "!" * (i // len(SENTENCES)))
        image.unobserve_all("value")
        first_frame.append(shown[0] - start)

    layer_w = attentions[LAYER][0]
    rows = median_times({
        "forward pass only (tokenize + 6 layers)": forward_only,
        "live recompute, one layer: forward + 12-head frame": live_one_layer,
        "live recompute, layer explorer: forward + 6 frames": live_explorer,
        "12-head frame, render_heads_png": lambda i: render_heads_png(layer_w, tokens, layer=LAYER),
        "12-head figure, plot_heads + PNG (reference)": lambda i: plot_heads(layer_w, tokens, layer=LAYER).to_png(),
        "72-head frame, render_heads_png": lambda i: render_heads_png(attentions, tokens),
        "72-head figure, plot_heads + PNG": lambda i: plot_heads(attentions, tokens).to_png(),
    }, repeats=7)
    rows["live recompute, layer explorer: until the frame on screen"] = statistics.median(first_frame[1:])
    print(f"mha_lib.viz on all-MiniLM-L6-v2, {min(n_tokens)}-{max(n_tokens)} tokens per sentence; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.processor() or platform.machine()}")
    width = max(map(len, rows))
    for name, seconds in rows.items():
        print(f"  {name:<{width}}  {seconds * 1e3:8.1f} ms")
    fast = rows["12-head frame, render_heads_png"]
    ref = rows["12-head figure, plot_heads + PNG (reference)"]
    print(f"  render_heads_png is {ref / fast:.1f}x faster than plot_heads for the same 12 heads")
    live = max(rows["live recompute, one layer: forward + 12-head frame"],
               rows["live recompute, layer explorer: until the frame on screen"])
    verdict = "met" if live <= TARGET_S else "MISSED"
    print(f"  target: live recompute of one layer <= {TARGET_S * 1e3:.0f} ms: {verdict} ({live * 1e3:.0f} ms)")


if __name__ == "__main__":
    main()
