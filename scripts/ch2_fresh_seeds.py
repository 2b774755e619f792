"""Chapter 2's comparison of untied heads with single-pattern models on seeds the book did not ship.

Trains the chapter-2 recipe (the shipped specs ``ch2-tied-h4``, ``ch2-narrow-h4`` and ``ch1-h1``:
four tied heads of width 16, one head of width 16, one head of width 64; one task, one recipe) on
fresh seeds 5, 6, ... (``--seeds`` of them) and records the test accuracy (``tasks.evaluate``,
2048 fixed sequences) of each, beside the shipped seeds 0-4 re-evaluated from their weights. The
untied four-head models on the same fresh seeds are in ``mha_lib/data/ch1_fresh_heads.json``
(``scripts/ch1_fresh_heads.py``, the ``ch1-h4`` recipe), so they are not trained again here.

One record per model goes to ``mha_lib/data/ch2_fresh_seeds.json``: family, seed, fresh (false for
the shipped seeds), accuracy and the training run's CPU seconds (0 for the shipped seeds, which are
loaded).

Usage:
    python scripts/ch2_fresh_seeds.py [--workers 2] [--seeds 10]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import add_arguments, count, write_runs  # noqa: E402

FAMILIES = ("ch2-tied-h4", "ch2-narrow-h4", "ch1-h1")
SHIPPED_SEEDS = (0, 1, 2, 3, 4)
OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "ch2_fresh_seeds.json"


def run(job):
    family, seed = job
    import torch

    torch.set_num_threads(1)
    from mha_lib import tasks
    from mha_lib.train import train_spec

    spec = tasks.SHIPPED[family]
    fresh = seed not in spec.seeds
    if fresh:
        result = train_spec(spec, seed, device="cpu", progress=False)
        model, cpu = result.model, result.cpu_seconds
    else:
        model, cpu = tasks.load_trained(spec.name, seed=seed), 0.0
    model.eval()
    return {"family": family, "seed": seed, "fresh": fresh,
            "accuracy": round(tasks.evaluate(model, spec.make_task()), 6), "cpu_seconds": round(cpu, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=count, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seeds", type=lambda text: count(text, minimum=0), default=10, help="fresh seeds, from 5 on")
    parser.add_argument("--out", type=Path, default=OUT)
    add_arguments(parser)
    args = parser.parse_args(argv)
    seeds = SHIPPED_SEEDS + tuple(range(5, 5 + args.seeds))
    jobs = [(f, s) for f in FAMILIES for s in seeds]
    write_runs(run, jobs, args.out, key=lambda r: (FAMILIES.index(r["family"]), r["seed"]),
               describe=lambda r: f"{r['family']} seed {r['seed']} acc {r['accuracy']:.3f}",
               workers=max(1, args.workers), backend=args.backend, scheduler=args.scheduler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
