"""Chapter 1's training-budget sweep: how many heads, at what budget and learning rate.

Trains the chapter-1 recipe (``mha_lib.tasks.SHIPPED["ch1-h{H}"]``: the previous-minus-marked
task, one pre-LN layer, d_model 64, batch 64, AdamW with warm-up and cosine decay) for
H in {1, 2, 4, 8} heads, at every budget in ``--budgets`` steps (each budget is its own run,
with the cosine schedule ending at that budget) at lr 3e-3, and at ``--lr-budget`` steps also
at lr 1e-3 and 1e-2, each with ``--seeds`` seeds. One record per run goes to
``mha_lib/data/ch1_budget_sweep.json``: heads, seed, steps, lr, accuracy (``tasks.evaluate``,
2048 fixed sequences), solved (accuracy >= 0.99), steps_to_solve (the first learning-curve
point, every 100 steps, at >= 0.99 on the curve's 256 sequences; null when not solved) and
the run's CPU seconds.

Runs go to ``--workers`` joblib processes (or a Dask/Ray cluster: ``--backend``, see
``scripts/sweep.py``) with one torch thread each (the models are compute-bound:
stacking seeds with torch.func.vmap was measured at 0.75x the speed of one seed at a time, so
seeds are run in parallel instead). The checkpoint cache of ``mha_lib.train`` keeps finished
runs, so an interrupted sweep resumes. The file is rewritten after every run.

Usage:
    python scripts/train_ch1_budget.py [--workers 2] [--seeds 10] [--budgets 1000 2000 4000 8000]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import add_arguments, count, run_jobs  # noqa: E402

HEADS = (1, 2, 4, 8)
SOLVED = 0.99
OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "ch1_budget_sweep.json"


def run(job):
    heads, seed, steps, lr = job
    import torch

    torch.set_num_threads(1)
    from dataclasses import replace

    from mha_lib.tasks import SHIPPED
    from mha_lib.train import train_spec

    spec = replace(SHIPPED[f"ch1-h{heads}"], steps=steps, lr=lr, name=f"ch1-budget-h{heads}")
    r = train_spec(spec, seed, device="cpu", progress=False)
    curve = r.curve
    first = next((s for s, a in zip(curve["steps"], curve["accuracy"]) if a >= SOLVED), None)
    solved = r.accuracy >= SOLVED
    return {"heads": heads, "seed": seed, "steps": steps, "lr": lr, "accuracy": round(r.accuracy, 6),
            "solved": solved, "steps_to_solve": first if solved else None,
            "cpu_seconds": round(r.cpu_seconds, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=count, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seeds", type=count, default=10)
    parser.add_argument("--budgets", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--lr-budget", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-lr", action="store_true", help="skip the learning-rate runs")
    parser.add_argument("--only-lr", action="store_true", help="only the learning-rate runs")
    parser.add_argument("--reverse", action="store_true", help="run the jobs in reverse order")
    add_arguments(parser)
    args = parser.parse_args(argv)
    lr_jobs = [] if args.no_lr else [
        (h, s, args.lr_budget, lr) for lr in (1e-3, 1e-2) for h in HEADS for s in range(args.seeds)]
    jobs = [(h, s, b, 3e-3) for b in args.budgets for h in HEADS for s in range(args.seeds)]
    jobs = jobs[: 2 * len(HEADS) * args.seeds] + lr_jobs + jobs[2 * len(HEADS) * args.seeds:]
    if args.only_lr:
        jobs = lr_jobs
    if args.reverse:  # a second process can work the list from the other end (the cache joins them)
        jobs = jobs[::-1]
    records, start = [], time.perf_counter()
    results = run_jobs(run, jobs, workers=max(1, args.workers), backend=args.backend, scheduler=args.scheduler)
    for i, record in enumerate(results, 1):
        records.append(record)
        records.sort(key=lambda r: (r["lr"], r["steps"], r["heads"], r["seed"]))
        args.out.write_text(json.dumps({"solved_threshold": SOLVED, "runs": records}, indent=1) + "\n")
        print(f"[{i}/{len(jobs)}] {record} ({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"wrote {args.out}: {len(records)} runs in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
