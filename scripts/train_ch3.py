"""Train the models only chapter 3 uses: chapter 1's H = 8 model with grouped-query and multi-query attention.

Run:  python scripts/train_ch3.py [--device cpu] [--out mha_lib/weights] [--workers N]
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

Runs go to a pool of ``--workers`` processes with one thread each, as in ``train_all.py``; a
run is a function of its spec and seed (and of the torch version and CPU), not of the pool.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from mha_lib.tasks import SHIPPED, TrainedSpec, weight_files  # noqa: E402

KV_HEADS = (4, 2, 1)


def gqa_specs() -> list[TrainedSpec]:
    """Chapter 3's GQA/MQA variants of ``ch1-h8``: identical except ``num_kv_heads`` and the name.

    Chapter 3's notebook builds the same specs the same way; ``mha_lib.tasks.trained_info``
    refuses files whose stored spec differs, so the two cannot drift apart silently (and
    ``tests/test_cost.py`` fails when chapter 1's recipe changes and these files are stale).
    """
    base = SHIPPED["ch1-h8"]
    return [replace(base, name=f"ch3-h8-kv{kv}", model={**base.model, "num_kv_heads": kv}) for kv in KV_HEADS]


def _specs_by_name(with_ch1_heads: bool, out) -> dict:
    specs = {s.name: s for s in gqa_specs()}
    if with_ch1_heads:
        specs.update({n: SHIPPED[n] for n in ("ch1-h16", "ch1-h32") if not weight_files(n, out)[0].is_file()})
    return specs


def _run(job):
    """Train one (family, seed) in a worker process, one thread; the weights travel back
    through train_spec's checkpoint cache in the scratch folder (safetensors, never pickle)."""
    spec, seed, device, scratch = job
    import torch

    if device == "cpu":
        torch.set_num_threads(1)  # tiny models: threads only add synchronisation cost
    from mha_lib.train import train_spec

    r = train_spec(spec, seed, device=device, progress=False, cache_dir=scratch)
    return spec.name, seed, r.accuracy, r.seconds


def main() -> int:
    from mha_lib.train import save_trained, train_spec

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=None, help="folder for the weights (default: the package's)")
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--with-ch1-heads", action="store_true",
                        help="also train ch1-h16 and ch1-h32 if their files are missing")
    args = parser.parse_args()
    specs = _specs_by_name(args.with_ch1_heads, args.out)
    workers = 1 if args.device != "cpu" else max(1, args.workers)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mha_lib_train_ch3_") as scratch:
        jobs = [(spec, seed, args.device, scratch) for spec in specs.values() for seed in spec.seeds]
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            for name, seed, acc, seconds in pool.map(_run, jobs):
                print(f"{name} seed {seed}: accuracy {acc:.3f} ({seconds:.0f} s)", flush=True)
        for spec in specs.values():
            results = [train_spec(spec, s, device=args.device, progress=False, cache_dir=scratch) for s in spec.seeds]
            assert all(r.cached for r in results)
            meta = save_trained(spec, results, args.out)
            accs = ", ".join(f"{a:.3f}" for a in meta["accuracy"])
            print(f"saved {spec.name}.v{spec.version}: accuracy per seed [{accs}]", flush=True)
    print(f"train_ch3: {len(jobs)} runs with {workers} workers in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
