"""Train the models only chapter 3 uses: chapter 1's H = 8 model with grouped-query and multi-query attention.

Run:  python scripts/train_ch3.py [--device cpu] [--out mha_lib/weights] [--no-progress]
      (``make train`` runs it after chapter 1's ``scripts/train_all.py``.)

What it trains: the spec of ``mha_lib.tasks.SHIPPED["ch1-h8"]`` (chapter 1's task, d_model = 64,
one layer, 8 query heads, same recipe, budget and seeds) with ``num_kv_heads`` 4, 2 and 1, under
the names ``ch3-h8-kv4``, ``ch3-h8-kv2`` and ``ch3-h8-kv1`` (see ``gqa_specs``). Plain MHA is
``ch1-h8`` itself, trained by chapter 1. The models ship like chapter 1's, as
``mha_lib/weights/<name>.v<version>.safetensors`` + ``.json`` (float16 weights, never pickle),
written by ``mha_lib.train.save_trained``; chapter 3 loads them with ``mha_lib.tasks.load_trained``.

Chapter 3 also uses ``ch1-h16`` and ``ch1-h32``; they are in ``mha_lib.tasks.SHIPPED`` and
chapter 1's training script trains them. Pass ``--with-ch1-heads`` to train them here as well
(only if their files are missing).

Training runs on one thread by default (``--threads``): on a shared 2-core machine that is
faster than two threads fighting over the cores, and the thread count is part of what makes a
run bitwise reproducible.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from mha_lib.tasks import SHIPPED, TrainedSpec, weight_files  # noqa: E402
from mha_lib.train import save_trained, train_spec  # noqa: E402

KV_HEADS = (4, 2, 1)


def gqa_specs() -> list[TrainedSpec]:
    """Chapter 3's GQA/MQA variants of ``ch1-h8``: identical except ``num_kv_heads`` and the name.

    Chapter 3's notebook builds the same specs the same way; ``mha_lib.tasks.trained_info``
    refuses files whose stored spec differs, so the two cannot drift apart silently.
    """
    base = SHIPPED["ch1-h8"]
    return [replace(base, name=f"ch3-h8-kv{kv}", model={**base.model, "num_kv_heads": kv}) for kv in KV_HEADS]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=None, help="folder for the weights (default: the package's)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--with-ch1-heads", action="store_true",
                        help="also train ch1-h16 and ch1-h32 if their files are missing")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    specs = gqa_specs()
    if args.with_ch1_heads:
        specs += [SHIPPED[n] for n in ("ch1-h16", "ch1-h32") if not weight_files(n, args.out)[0].is_file()]
    start = time.perf_counter()
    for spec in specs:
        results = [train_spec(spec, seed, device=args.device, progress=not args.no_progress, cache_dir=False)
                   for seed in spec.seeds]
        meta = save_trained(spec, results, args.out)
        accs = " ".join(f"{a:.3f}" for a in meta["accuracy"])
        print(f"{spec.name}: accuracy per seed {accs}; {sum(meta['train_seconds']):.0f} s", flush=True)
    print(f"train_ch3: {len(specs)} model families in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
