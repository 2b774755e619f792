"""Cheaper attention (mha_lib.efficient): peak memory and time against sequence length, and cache bytes.

Run:  python benchmarks/bench_efficient.py [--lengths 512 1024 2048 4096] [--window 128] [--repeats 5]
      [--cache-lengths 1024 4096 16384]

What is measured: CPU, fp32, no_grad, B = 1, H = 8, d_k = 64, causal self-attention.
1. Sliding-window attention with a window of ``--window`` keys, two ways: the dense path
   (``mha_lib.core.attention`` with ``sliding_window_mask``: scores for all L x L pairs, most masked)
   and ``sliding_window_attention`` (scores for the window only), beside full causal attention
   (``F.scaled_dot_product_attention``). Peak memory (``measure.measure_peak_memory``) and median time
   (``measure.compare_times``, round-robin so the ratios share the machine's noise), as ratios to full
   causal SDPA in the same run. The claim to check: the windowed path's memory grows with L w, the dense
   paths' with L^2.
2. ``tiled_attention`` against SDPA at one length: the largest difference (the teaching implementation
   is Python loops over tiles: its time says nothing about FlashAttention's kernels, so it is not
   timed), and ``hbm_accesses`` for that length at an on-chip memory of 100K elements (about an A100
   SM's 192 KB in fp16; Dao et al. 2022 use the same order of M).
3. Cache bytes per token and layer in fp16 for DeepSeek-V2's published attention
   (``DEEPSEEK_V2_MLA``) stored as MHA, GQA (8 KV heads), MQA and MLA.
4. One decode step of one layer against the cache length (``--cache-lengths``): MHA, GQA, MQA and the
   teaching ``MultiHeadLatentAttention``, which re-expands every cached latent at each step (the paper's
   absorbed form avoids that), as ratios to MHA.

A CPU measurement on this machine: it is not a verdict on GPU kernels.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from mha_lib import cost, measure  # noqa: E402
from mha_lib.core import attention  # noqa: E402
from mha_lib.efficient import (DEEPSEEK_V2_MLA, hbm_accesses, latent_kv_cache_bytes,  # noqa: E402
                               sliding_window_attention, sliding_window_mask, tiled_attention)

H, D = 8, 64


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--window", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache-lengths", type=int, nargs="+", default=[1024, 4096, 16384])
    args = parser.parse_args()
    torch.manual_seed(0)
    print(measure.environment_string())
    print(f"\n1. causal attention, B=1, H={H}, d_k={D}, window {args.window}; x = ratio to full causal SDPA, same run")
    print(f"{'L':>6} {'peak MB: full':>14} {'dense window':>13} {'windowed':>9} {'x':>6}   "
          f"{'time ms: full':>14} {'dense window':>13} {'windowed':>9} {'x':>6}")
    with torch.no_grad():
        for L in args.lengths:
            q, k, v = (torch.randn(1, H, L, D) for _ in range(3))
            mask = sliding_window_mask(L, window=args.window)
            fns = {"full": lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                   "dense window": lambda q=q, k=k, v=v, m=mask: attention(q, k, v, attn_mask=m),
                   "windowed": lambda q=q, k=k, v=v: sliding_window_attention(q, k, v, window=args.window)}
            peak = {name: measure.measure_peak_memory(fn) / 2**20 for name, fn in fns.items()}
            times = measure.compare_times(fns, repeats=args.repeats, warmup=1)
            print(f"{L:6d} {peak['full']:14.1f} {peak['dense window']:13.1f} {peak['windowed']:9.1f} "
                  f"{peak['windowed'] / peak['full']:6.1f}   {times['full'] * 1e3:14.2f} {times['dense window'] * 1e3:13.2f} "
                  f"{times['windowed'] * 1e3:9.2f} {times['windowed'] / times['full']:6.2f}")
        L = min(args.lengths)
        q, k, v = (torch.randn(1, H, L, D) for _ in range(3))
        diff = (tiled_attention(q, k, v, block_q=64, block_k=64, is_causal=True)
                - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max().item()
    traffic = hbm_accesses(L, D, 100_000)
    print(f"\n2. tiled_attention (64 x 64 tiles) vs SDPA at L={L}: largest difference {diff:.1e}")
    print(f"   hbm_accesses(N={L}, d={D}, M=100,000): standard {traffic['standard']:.3g} elements, "
          f"tiled {traffic['flash']:.3g}, ratio {traffic['ratio']:.1f}x")
    c = DEEPSEEK_V2_MLA
    per_token = {
        "MHA (128 KV heads)": cost.kv_cache_bytes(num_layers=1, num_kv_heads=c["num_heads"], head_dim=c["head_dim"], seq_len=1),
        "GQA (8 KV heads)": cost.kv_cache_bytes(num_layers=1, num_kv_heads=8, head_dim=c["head_dim"], seq_len=1),
        "MQA (1 KV head)": cost.kv_cache_bytes(num_layers=1, num_kv_heads=1, head_dim=c["head_dim"], seq_len=1),
        "MLA (d_c=512, d_h^R=64)": latent_kv_cache_bytes(num_layers=1, kv_rank=c["kv_rank"], rope_dim=c["rope_dim"],
                                                         seq_len=1),
    }
    print("\n3. cache bytes per token and layer, fp16, DeepSeek-V2's heads (128 x 128)")
    for name, b in per_token.items():
        print(f"   {name:<24} {b:7,d} B   {per_token['MHA (128 KV heads)'] / b:6.1f}x smaller than MHA")
    decode_steps(args.cache_lengths, args.repeats)
    return 0


def decode_steps(cache_lengths, repeats: int) -> None:
    """One decode step of one layer (d_model 512, 8 heads of 64, B = 1) with a cache of S tokens: MHA, GQA,
    MQA and the teaching MLA (d_c 64, d_h^R 32), as ratios to MHA in the same run. The MHA caches are
    rewound after each step so that every step sees S cached tokens."""
    from mha_lib.core import MultiHeadAttention
    from mha_lib.efficient import MultiHeadLatentAttention

    d_model, heads = 512, 8
    print(f"\n4. one decode step, d_model={d_model}, {heads} heads; x = time / MHA's, same run; cache in bytes/token fp16")
    with torch.no_grad():
        for S in cache_lengths:
            torch.manual_seed(0)
            past_x, new = torch.randn(1, S, d_model), torch.randn(1, 1, d_model)
            steps, per_token = {}, {}
            for name, kv in (("MHA", 8), ("GQA (2 kv)", 2), ("MQA", 1)):
                mha = MultiHeadAttention(d_model, heads, num_kv_heads=kv).eval()
                _, _, past = mha(past_x, past_x, use_cache=True, is_causal=True)

                def step(mha=mha, past=past, new=new, S=S):
                    out = mha(new, new, past_kv=past, use_cache=True, is_causal=True)
                    past.length = S  # rewind: the next step sees S cached tokens again
                    return out
                steps[name], per_token[name] = step, 2 * kv * (d_model // heads) * 2
            mla = MultiHeadLatentAttention(d_model, heads, d_model // heads, kv_rank=64, rope_dim=32).eval()
            _, _, latent = mla(past_x, use_cache=True)
            steps["MLA (64+32)"] = lambda mla=mla, latent=latent, new=new: mla(new, past_kv=latent)
            per_token["MLA (64+32)"] = mla.cache_bytes_per_token()
            times = measure.compare_times(steps, repeats=repeats, warmup=1)
            print(f"   S={S:6d}  " + "  ".join(f"{n} {per_token[n]:4d} B {times[n] / times['MHA']:5.2f}x" for n in steps))


if __name__ == "__main__":
    sys.exit(main())
