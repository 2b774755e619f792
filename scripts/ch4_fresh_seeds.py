"""Chapter 4's toy-model claims on seeds the book did not ship (issue 31).

Trains ``ch4-l3h8`` with the shipped recipe on fresh seeds 8-15 (``train_spec``, cached like
``scripts/ch4_ablation_order.py``, which prunes the same fresh models in three orders) and, on
each, repeats what chapter 4 does with the shipped seeds 0-7, with the chapter's data (test set
``task.dataset(256, EVAL_SEED)``, scoring set ``task.dataset(512, seed=1)``):

* section 1: the single-head ablation of the test accuracy, and how many heads cost more than one
  point alone, in all and in the last layer;
* section 3: the importance schedule (10% of the heads a step), fixed and rescored after every
  step, test accuracy at every step;
* section 3: the Hard-Concrete gates of ``scripts/train_gates.py`` (same recipe, gate seeds 0-2,
  40/60/81% targets), with importance and the single-head-ablation order (the test-loss rise of
  each head masked alone, measured on the scoring set) cut to each gate run's head count;
* section 3: fine-tuning, as the chapter does: the first importance step below 0.9 accuracy
  pruned for good (``P.prune_heads``) and trained 100 steps; the share of the lost accuracy won
  back.

Output: ``mha_lib/data/ch4_fresh_seeds.json``, ``runs``: one record per fresh seed, with the CPU
seconds of its analysis (``cpu_seconds``) and of its training (``train_cpu_seconds``).

Usage:
    python scripts/ch4_fresh_seeds.py [--workers 2]
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import add_arguments, count, write_runs  # noqa: E402
from train_gates import TOY, _search  # noqa: E402  the chapter's gate recipe, unchanged

OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "ch4_fresh_seeds.json"
FRESH_SEEDS = tuple(range(8, 16))
GATE_SEEDS = (0, 1, 2)
THRESHOLD = 0.01  # chapter 4: a head "matters alone" when masking it costs more than one point


def run(seed: int) -> dict:
    import torch

    torch.set_num_threads(1)
    from mha_lib import pruning as P, tasks
    from mha_lib.train import train, train_spec

    trained = train_spec("ch4-l3h8", seed, device="cpu", progress=False)
    start = time.process_time()
    model = trained.model.eval()
    task = tasks.SHIPPED["ch4-l3h8"].make_task()
    test = task.dataset(256, seed=tasks.EVAL_SEED)
    score = task.dataset(512, seed=1)
    score_batches = [score[i:i + 128] for i in range(0, 512, 128)]
    n_layers, n_heads = P.num_heads_grid(model)
    n = n_layers * n_heads

    def acc(mask):  # test accuracy with a grid mask's heads off
        return tasks.accuracy(model, test, P.layer_head_masks(model, mask))

    def cut(scores, k):  # the chapter's cut(): the k lowest-scored heads pruned
        return P.pruning_schedule(scores, fraction_per_step=1 / n, max_fraction=k / n)[-1].mask

    full = tasks.accuracy(model, test)
    a = P.single_head_ablation(model, lambda m, hm: tasks.accuracy(m, test, hm))
    drop = a.baseline - a.masked  # (layers, heads): accuracy lost, heads masked alone
    importance = P.head_importance(model, score_batches, tasks.per_example_loss)
    ablation = P.single_head_ablation(model, lambda m, hm: tasks.per_example_loss(m, score, hm).mean()).delta
    schedules = {
        "importance": importance,
        "importance, rescored": lambda m: P.head_importance(model, score_batches, tasks.per_example_loss,
                                                            head_mask=m),
    }
    curves = {}
    for name, scores in schedules.items():
        steps = P.pruning_schedule(scores, fraction_per_step=0.1, initial_mask=torch.ones(n_layers, n_heads))
        curves[name] = [[round(s.fraction_pruned, 4), acc(s.mask)] for s in steps]

    steps = P.pruning_schedule(importance, fraction_per_step=0.1)
    chosen = next(s for s in steps if acc(s.mask) < 0.9)
    pruned = P.prune_heads(copy.deepcopy(model), chosen.pruned)
    before = tasks.accuracy(pruned, test)
    tuned = train(pruned, task, steps=100, batch_size=32, lr=1e-3, warmup=0.1, seed=1, eval_every=100,
                  progress=False)
    after = tasks.accuracy(tuned.model, test)

    batches = [score[i:i + TOY["batch"]] for i in range(0, 512, TOY["batch"])]
    gates = []
    for g in GATE_SEEDS:
        for r in _search(model, batches, tasks.per_example_loss, TOY, g):
            k = r.num_pruned
            gates.append({"gate_seed": g, "target_fraction": r.target_fraction, "num_pruned": k,
                          "gates": acc(r.mask.float()), "importance": acc(cut(importance, k)),
                          "ablation": acc(cut(ablation, k))})
    return {
        "seed": seed, "accuracy_full": full,
        "n_matter": int((drop > THRESHOLD).sum()), "n_matter_last": int((drop[-1] > THRESHOLD).sum()),
        "largest_drop": round(float(drop.max()), 6), "curves": curves,
        "fine_tune": {"num_pruned": chosen.num_pruned, "before": before, "after": after,
                      "recovered": (after - before) / (full - before)},
        "gates": gates,
        "cpu_seconds": round(time.process_time() - start, 1), "train_cpu_seconds": round(trained.cpu_seconds, 1),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=count, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, default=OUT)
    add_arguments(parser)
    args = parser.parse_args(argv)
    write_runs(run, FRESH_SEEDS, args.out, key=lambda r: r["seed"],
               header={"threshold": THRESHOLD, "gate_seeds": list(GATE_SEEDS)},
               describe=lambda r: (f"seed {r['seed']}: full {r['accuracy_full']:.3f}, "
                                   f"fine-tune recovered {r['fine_tune']['recovered']:.0%}"),
               workers=max(1, args.workers), backend=args.backend, scheduler=args.scheduler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
