"""Chapter 8's ensemble test: one layer of H jointly trained heads against H separately trained one-head models.

Multi-head attention is often likened to an ensemble. The test (issue 32, item 4), on chapter 1's task
(every answer needs two relations at once) and recipe (``ch1-h4``: 1 layer, d_model 64, 4 heads, 2,000
steps): an *ensemble* of 4 one-head models, each with d_model 32 (so the four hold about as many
parameters as one ``ch1-h4`` model: the weight matrices scale with d_model squared), each trained alone
on its own seed with the same recipe, predicting by the mean of the four models' class probabilities. Its
accuracy on chapter 1's fixed evaluation set (``tasks.evaluate``'s 2,048 sequences) is recorded beside
each member's. The jointly trained four-head models on the same task are in
``mha_lib/data/ch1_fresh_heads.json`` (seeds 0-14); issue 51 asked for the test on fresh seeds alone with
more runs, so this script also trains ``ch1-h4`` itself on the fresh seeds 15-24 (``JOINT_SEEDS``), which
no other record uses.

One record per run goes to ``mha_lib/data/ch8_ensemble.json``, with its ``kind``. An ensemble
(``"ensemble"``): seed (the ensemble's index, as ``ensemble``), member seeds, member accuracies, ensemble
accuracy, parameter counts (ensemble and one ``ch1-h4`` model) and CPU seconds. A joint four-head model
(``"joint"``): seed, accuracy, params and CPU seconds.

Usage:
    python scripts/ch8_ensemble.py [--workers 2] [--ensembles 20] [--joint-seeds 15 16 ...] [--keep-existing]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import add_arguments, count, write_runs  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "ch8_ensemble.json"
MEMBERS = 4
MEMBER_D_MODEL = 32
MEMBER_SEED_BASE = 1000  # member m of ensemble e trains with seed 1000 + 4 e + m: none of the shipped seeds
JOINT_SEEDS = tuple(range(15, 25))  # ch1-h4 on seeds no other record trained


def member_spec():
    """The one-head member: ch1-h4's task and recipe, one head, d_model 32 and d_ff 128 (ch1's 4 x d_model)."""
    from mha_lib import tasks

    joint = tasks.SHIPPED["ch1-h4"]
    model = dict(joint.model, num_heads=1, d_model=MEMBER_D_MODEL, d_ff=4 * MEMBER_D_MODEL)
    return dataclasses.replace(joint, name="ch8-ensemble-member", model=model)


def run(job):
    kind, index = job
    return run_ensemble(index) if kind == "ensemble" else run_joint(index)


def run_joint(seed):
    """One ``ch1-h4`` model (four heads trained together) on ``seed``, scored as the ensembles are."""
    import torch

    torch.set_num_threads(1)
    from mha_lib import tasks
    from mha_lib.train import train_spec

    spec = tasks.SHIPPED["ch1-h4"]
    result = train_spec(spec, seed, device="cpu", progress=False, cache_dir=False)
    model = result.model.eval()
    return {"kind": "joint", "seed": seed, "accuracy": round(tasks.evaluate(model, spec.make_task()), 6),
            "params": sum(p.numel() for p in model.parameters()), "cpu_seconds": round(result.cpu_seconds, 2)}


def run_ensemble(ensemble):
    import torch

    torch.set_num_threads(1)
    from mha_lib import tasks
    from mha_lib.tasks.batch import EVAL_SEED, IGNORE_INDEX
    from mha_lib.tasks.metrics import _model_inputs, logits
    from mha_lib.train import train_spec

    spec = member_spec()
    task = spec.make_task()
    data = task.dataset(2048, EVAL_SEED)
    seeds = [MEMBER_SEED_BASE + MEMBERS * ensemble + m for m in range(MEMBERS)]
    probs, accuracies, cpu, params = [], [], 0.0, 0
    for seed in seeds:
        result = train_spec(spec, seed, device="cpu", progress=False, cache_dir=False)
        model = result.model.eval()
        cpu += result.cpu_seconds
        params += sum(p.numel() for p in model.parameters())
        accuracies.append(round(tasks.evaluate(model, task), 6))
        with torch.no_grad():
            probs.append(torch.softmax(logits(model, data).float(), -1))
    _, labels = _model_inputs(data)
    keep = labels != IGNORE_INDEX
    vote = torch.stack(probs).mean(0).argmax(-1)
    joint_params = sum(p.numel() for p in tasks.SHIPPED["ch1-h4"].build().parameters())
    return {"kind": "ensemble", "seed": ensemble, "ensemble": ensemble, "member_seeds": seeds, "member_accuracy": accuracies,
            "accuracy": round(float(((vote == labels) & keep).sum()) / float(keep.sum()), 6),
            "params": params, "joint_params": joint_params, "cpu_seconds": round(cpu, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=count, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--ensembles", type=count, default=20)
    parser.add_argument("--joint-seeds", type=int, nargs="*", default=list(JOINT_SEEDS))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep-existing", action="store_true",
                        help="keep the runs already in --out and train only the missing ones")
    add_arguments(parser)
    args = parser.parse_args(argv)
    jobs = [("ensemble", e) for e in range(args.ensembles)] + [("joint", s) for s in args.joint_seeds]
    kept = []
    if args.keep_existing and args.out.is_file():
        kept = [dict(r, kind=r.get("kind", "ensemble")) for r in json.loads(args.out.read_text())["runs"]]
        jobs = [j for j in jobs if j not in {(r["kind"], r["seed"]) for r in kept}]
    write_runs(run, jobs, args.out, key=lambda r: (r["kind"], r["seed"]), kept=kept,
               describe=lambda r: f"{r['kind']} {r['seed']} acc {r['accuracy']:.3f} {r.get('member_accuracy', '')}",
               workers=max(1, args.workers), backend=args.backend, scheduler=args.scheduler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
