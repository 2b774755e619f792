"""Chapter 4, issue 31: Michel et al. 2019's single-head-ablation order beside importance and random.

For the shipped ch4-l3h8 seeds (0-7) and fresh seeds trained with the shipped recipe
(``train_spec("ch4-l3h8", seed)``, seeds 8-15), prune 40%, 60% and 81% of the 24 heads in the
order of (a) importance (``P.head_importance`` on ``task.dataset(512, seed=1)``), (b) the test-loss
rise when each head alone is masked (``P.single_head_ablation`` on the same scoring set), and
(c) 20 random orders (mean), and record the test accuracy (``task.dataset(256, EVAL_SEED)``).
Output: ``mha_lib/data/ch4_ablation_order.json``. One torch thread.

Usage: python scripts/ch4_ablation_order.py [--cache DIR]
"""
import argparse
import json
import time
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "ch4_ablation_order.json"
FRACTIONS = (0.4, 0.6, 0.81)
RANDOM_ORDERS = 20
FRESH_SEEDS = range(8, 16)


def main():
    torch.set_num_threads(1)
    from mha_lib import pruning as P, tasks
    from mha_lib.train import train_spec

    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=None)
    args = ap.parse_args()
    spec = tasks.SHIPPED["ch4-l3h8"]
    task = spec.make_task()
    test = task.dataset(256, seed=tasks.EVAL_SEED)
    score = task.dataset(512, seed=1)
    batches = [score[i:i + 128] for i in range(0, 512, 128)]
    models = dict(tasks.load_trained_seeds("ch4-l3h8"))
    shipped = sorted(models)
    train_cpu = {}  # fresh seed -> CPU seconds of its training (recorded in the cache when read from it)
    for s in FRESH_SEEDS:
        r = train_spec("ch4-l3h8", s, device="cpu", progress=False, cache_dir=args.cache)
        models[s] = r.model.eval()
        train_cpu[str(s)] = round(r.cpu_seconds, 1)
    records = []
    for seed, model in models.items():
        t0 = time.process_time()
        imp = P.head_importance(model, batches, tasks.per_example_loss)
        abl = P.single_head_ablation(model, lambda m, hm: tasks.per_example_loss(m, score, hm).mean())
        orders = {"importance": imp, "ablation": abl.delta}
        g = torch.Generator().manual_seed(seed)
        rand = [torch.rand(imp.shape, generator=g) for _ in range(RANDOM_ORDERS)]
        rec = {"seed": seed, "fresh": seed not in shipped, "accuracy_full": tasks.accuracy(model, test)}
        n = imp.numel()
        for f in FRACTIONS:
            k = round(f * n)

            def acc(scores, n=n, k=k, model=model):  # the k lowest-scored heads pruned, as chapter 4's cut() does
                mask = P.pruning_schedule(scores, fraction_per_step=1 / n, max_fraction=k / n)[-1].mask
                return tasks.accuracy(model, test, P.layer_head_masks(model, mask))

            for name, sc in orders.items():
                rec[f"{name}_{f}"] = acc(sc)
            rec[f"random_{f}"] = sum(acc(r) for r in rand) / len(rand)
        rec["cpu_seconds"] = round(time.process_time() - t0, 1)
        records.append(rec)
        print(json.dumps(rec), flush=True)
    fresh_training = {"recipe": "mha_lib.train.train_spec('ch4-l3h8', seed, device='cpu'), one torch thread",
                      "cpu_seconds": train_cpu}
    OUT.write_text(json.dumps({"fractions": FRACTIONS, "random_orders": RANDOM_ORDERS, "records": records,
                               "fresh_training": fresh_training}, indent=1) + "\n")


if __name__ == "__main__":
    main()
