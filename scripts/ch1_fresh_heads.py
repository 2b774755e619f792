"""Chapter 1's head-specialisation claims on seeds the book did not ship.

For H in {4, 8} heads, trains the chapter-1 recipe (``mha_lib.tasks.SHIPPED["ch1-h{H}"]``, the
same steps, batch and learning rate as the shipped models) on fresh seeds 5, 6, ... (``--seeds``
of them), and measures what section 4 of the chapter measures on the shipped seeds 0-4, which it
also re-measures from the shipped weights: the test accuracy (``tasks.evaluate``, 2048 fixed
sequences) and every head's share of weight on the previous position and on the marked token
(``tasks.target_shares`` on ``task.dataset(512, seed=11)``, the chapter's probe).

One record per model goes to ``mha_lib/data/ch1_fresh_heads.json``: heads, seed, fresh (false
for the shipped seeds), accuracy, shares (H rows of [previous, marked], 4 decimals) and the
training run's CPU seconds (0 for the shipped seeds, which are loaded). The chapter counts, over
the shipped and the fresh seeds, how many models have exactly one head with a "previous" share
above one half, and how many split the two relations between two different heads.

Usage:
    python scripts/ch1_fresh_heads.py [--workers 1] [--seeds 10]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import add_arguments, count, write_runs  # noqa: E402

HEADS = (4, 8)
SHIPPED_SEEDS = (0, 1, 2, 3, 4)
PROBE_SEED = 11  # chapter 1, section 4: probe = task.dataset(512, seed=11)
OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "ch1_fresh_heads.json"


def run(job):
    heads, seed = job
    import torch

    torch.set_num_threads(1)
    from mha_lib import tasks
    from mha_lib.train import train_spec

    spec = tasks.SHIPPED[f"ch1-h{heads}"]
    fresh = seed not in spec.seeds
    if fresh:
        result = train_spec(spec, seed, device="cpu", progress=False)
        model, cpu = result.model, result.cpu_seconds
    else:
        model, cpu = tasks.load_trained(spec.name, seed=seed), 0.0
    model.eval()
    task = spec.make_task()
    probe = task.dataset(512, seed=PROBE_SEED)
    with torch.no_grad():
        shares = tasks.target_shares(tasks.attention_maps(model, probe)[0], task.relation_targets(probe))
    return {"heads": heads, "seed": seed, "fresh": fresh, "accuracy": round(tasks.evaluate(model, task), 6),
            "shares": [[round(float(v), 4) for v in row] for row in shares], "cpu_seconds": round(cpu, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=count, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seeds", type=lambda text: count(text, minimum=0), default=10, help="fresh seeds, from 5 on")
    parser.add_argument("--out", type=Path, default=OUT)
    add_arguments(parser)
    args = parser.parse_args(argv)
    seeds = SHIPPED_SEEDS + tuple(range(5, 5 + args.seeds))
    jobs = [(h, s) for h in HEADS for s in seeds]
    write_runs(run, jobs, args.out, key=lambda r: (r["heads"], r["seed"]), header={"probe_seed": PROBE_SEED},
               describe=lambda r: f"H={r['heads']} seed {r['seed']} acc {r['accuracy']:.3f}",
               workers=max(1, args.workers), backend=args.backend, scheduler=args.scheduler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
