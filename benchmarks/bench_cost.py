"""The cost of more heads, measured: time and peak memory against H, and KV-cache decode steps.

Run:  python benchmarks/bench_cost.py [--seq-len 512] [--batch 2] [--repeats 5] [--threads N]

What is measured (CPU unless CUDA is present; fp32; eval; torch.inference_mode()):

1. One self-attention layer, d_model=512, for H in {1, 8, 64}, on both paths of
   ``mha_lib.MultiHeadAttention``: the explicit path (need_weights=True, materialises the
   (B, H, L, L) weights) and the SDPA path (need_weights=False, fused kernel). All six are timed
   round-robin by ``mha_lib.measure.compare_times`` (so a shared machine's noise hits them alike),
   and reported as ratios to H=1 on the same path, beside the peak memory and the fraction of
   the measured matmul peak.
2. One decode step with a KV cache of 4096 positions, batch 4, d_model=512, H=8, for
   num_kv_heads 8 (MHA), 2 (GQA) and 1 (MQA), on both paths, timed round-robin by
   ``measure.sweep_decode``: seconds per token as a ratio to MHA on the same path, and the cache
   bytes (measured = formula).

Nothing here has a pass/fail target: it prints numbers to compare across machines. The book's
chapter 3 runs the full sweep.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from mha_lib import cost, measure  # noqa: E402
from mha_lib._runtime import default_device  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = default_device()
    if device.type not in ("cpu", "cuda"):
        device = torch.device("cpu")
    print(measure.environment_string(device))

    peak = measure.measure_matmul_peak(device=device)
    print(f"measured matmul peak: {peak / 1e9:.3g} GFLOP/s (fp32)")

    heads = [1, 8, 64]
    results = measure.sweep_heads(d_model=512, num_heads=heads, batch=args.batch, seq_len=args.seq_len,
                               device=device, repeats=args.repeats)
    base = {r.need_weights: r.seconds for r in results if r.num_heads == 1}
    print(f"\n1. one attention layer, d_model=512, B={args.batch}, L={args.seq_len} "
          f"(median of {args.repeats} round-robin repeats)")
    print(f"{'path':>9} {'H':>3} {'head_dim':>8} {'ms':>8} {'x H=1':>6} {'peak mem':>10} {'map':>10} {'of peak':>8}")
    for r in results:
        path = "explicit" if r.need_weights else "SDPA"
        print(f"{path:>9} {r.num_heads:>3} {512 // r.num_heads:>8} {r.seconds * 1e3:>8.3g} "
              f"{r.seconds / base[r.need_weights]:>6.2f} {cost.format_bytes(r.peak_bytes):>10} "
              f"{cost.format_bytes(r.map_bytes):>10} {r.flop_per_s / peak:>8.1%}")

    print("\n2. one decode step, KV cache of 4096 positions, B=4, d_model=512, H=8")
    steps = measure.sweep_decode(d_model=512, num_heads=8, num_kv_heads=[8, 2, 1], context_len=4096, batch=4,
                              need_weights=(False, True), device=device, repeats=args.repeats)
    mha = {r.need_weights: r.seconds_per_token for r in steps if r.num_kv_heads == 8}
    print(f"{'path':>9} {'num_kv_heads':>12} {'ms/token':>9} {'x MHA':>6} {'cache':>10} {'formula':>10}")
    for r in steps:
        path = "explicit" if r.need_weights else "SDPA"
        print(f"{path:>9} {r.num_kv_heads:>12} {r.seconds_per_token * 1e3:>9.3g} "
              f"{r.seconds_per_token / mha[r.need_weights]:>6.2f} "
              f"{cost.format_bytes(r.cache_bytes):>10} {cost.format_bytes(r.formula_bytes):>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
