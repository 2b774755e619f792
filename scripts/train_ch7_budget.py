"""Chapter 7's training-budget sweep: is the head-count gain a gain in accuracy or in speed of learning?

Trains the chapter-7 recipe (``mha_lib.tasks.SHIPPED["ch7-digits-h{H}"]``: a 2-layer Vision
Transformer, d_model 32, one pixel per token, batch 64, lr 3e-3, on scikit-learn's 8x8 digits)
with H in {1, 8} heads at every budget in ``--budgets`` steps (each budget its own run, the
learning-rate schedule ending at that budget), each with ``--seeds`` seeds (0, 1, ...). The
book's budget is 600 steps; seeds 0-4 at 600 steps are the shipped models' own runs.

One record per run goes to ``mha_lib/data/ch7_budget_sweep.json``: heads, seed, steps,
test accuracy (``tasks.evaluate`` on the fixed test split) and the run's CPU seconds. The
file is rewritten after every run; the checkpoint cache of ``mha_lib.train`` keeps finished
runs, so an interrupted sweep resumes. Runs go to ``--workers`` processes with one torch
thread each (``scripts/sweep.py``).

Usage:
    python scripts/train_ch7_budget.py [--workers 1] [--seeds 6] [--budgets 600 1200 1800]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import add_arguments, count, write_runs  # noqa: E402

HEADS = (1, 8)
OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "ch7_budget_sweep.json"


def run(job):
    heads, seed, steps = job
    import torch

    torch.set_num_threads(1)
    from dataclasses import replace

    from mha_lib.tasks import SHIPPED
    from mha_lib.train import train_spec

    spec = SHIPPED[f"ch7-digits-h{heads}"]
    if steps != spec.steps:
        spec = replace(spec, steps=steps, name=f"ch7-budget-h{heads}")
    r = train_spec(spec, seed, device="cpu", progress=False)
    return {"heads": heads, "seed": seed, "steps": steps, "accuracy": round(r.accuracy, 6),
            "cpu_seconds": round(r.cpu_seconds, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=count, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seeds", type=count, default=6)
    parser.add_argument("--budgets", type=int, nargs="+", default=[600, 1200, 1800])
    parser.add_argument("--out", type=Path, default=OUT)
    add_arguments(parser)
    args = parser.parse_args(argv)
    jobs = [(h, s, b) for b in args.budgets for h in HEADS for s in range(args.seeds)]
    write_runs(run, jobs, args.out, key=lambda r: (r["steps"], r["heads"], r["seed"]), describe=str,
               workers=max(1, args.workers), backend=args.backend, scheduler=args.scheduler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
