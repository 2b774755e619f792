"""Chapter 4's Hard-Concrete head gates (Voita et al. 2019's pruning), trained with the model frozen.

For each model and gate seed, ``mha_lib.pruning.gates_for_fractions`` trains stochastic
Hard-Concrete gates (Louizos et al. 2018) on the model's heads with an L0 penalty, bisecting
the penalty (log scale) until the test-time gates prune 40%, 60% and 81% of the heads (within
``TOLERANCE`` heads: the bisection stops there, see RECIPE). The models are never changed:
only the gates' log_alpha is trained, on the chapter's scoring ("importance") half of the data:

* ``ch4-l3h8`` (every shipped seed; 3 x 8 heads): the task loss (``tasks.per_example_loss``) on
  the chapter's scoring set ``task.dataset(512, seed=1)``, in batches of ``TOY["batch"]``;
* all-MiniLM-L6-v2 (6 x 12 heads, ``mha_lib.pretrained.load_bert()``): 1 - cosine between the
  gated and the unpruned sentence embedding of the chapter's 100 scoring sentences
  (``mha_lib/data/sentences.txt``), in batches of ``MINILM["batch"]``.

Output: ``mha_lib/data/ch4_gates.json`` with the recipe, and one record per (model, model seed,
gate seed, target): the chosen penalty, the pruned count and fraction, the binary mask (1 keep,
0 pruned: the test-time gate is exactly 0), the test-time gate values, and every (penalty,
pruned count) run of the search. Each run is a function of its seeds (one torch thread per
process); the jobs go to ``--workers`` joblib processes (default 2), or a Dask/Ray cluster
(``--backend``, see ``scripts/sweep.py``).

Usage:
    python scripts/train_gates.py                  # everything (make train-ch4-gates)
    python scripts/train_gates.py --only toy       # or: --only minilm
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import add_arguments, count, replace_text, run_jobs  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "ch4_gates.json"
FRACTIONS = (0.4, 0.6, 0.81)
GATE_SEEDS = (0, 1, 2)
# shared by both models: the gates of Louizos et al. 2018 and the search of gates_for_fractions
RECIPE = dict(temperature=2 / 3, limits=(-0.1, 1.1), init_log_alpha=3.0, tolerance=1, max_trials=6)
TOY = dict(model="ch4-l3h8", scoring="task.dataset(512, seed=1)", loss="tasks.per_example_loss (cross-entropy, nats)",
           batch=16, steps=60, lr=0.2, penalty_range=(1e-4, 10.0))
MINILM = dict(model="all-MiniLM-L6-v2", scoring="mha_lib/data/sentences.txt (100 sentences)",
              loss="1 - cos(gated embedding, unpruned embedding)", batch=10, steps=50, lr=0.15,
              penalty_range=(1e-5, 1.0))


def _records(name, model_seed, gate_seed, found, seconds):
    def gates(r):  # the test-time gates to 4 significant digits: a small open gate stays above 0
        return [[float(f"{v:.4g}") for v in row] for row in r.gates.deterministic().tolist()]

    return [{
        "model": name, "model_seed": model_seed, "gate_seed": gate_seed,
        "target_fraction": r.target_fraction, "target_pruned": r.target_pruned,
        "penalty": r.penalty, "num_pruned": r.num_pruned, "fraction_pruned": r.fraction_pruned,
        "mask": r.mask.int().tolist(), "gates": gates(r),
        "trials": [[p, n] for p, n in r.trials], "cpu_seconds": round(seconds, 2),
    } for r in found]


def _search(model, batches, loss_fn, recipe, seed):
    from mha_lib import pruning as P

    return P.gates_for_fractions(
        model, batches, loss_fn, list(FRACTIONS), penalty_range=tuple(recipe["penalty_range"]),
        max_trials=RECIPE["max_trials"], tolerance=RECIPE["tolerance"], seed=seed, steps=recipe["steps"],
        lr=recipe["lr"], temperature=RECIPE["temperature"], limits=tuple(RECIPE["limits"]),
        init_log_alpha=RECIPE["init_log_alpha"])


def toy_job(model_seed: int, gate_seed: int):
    import torch

    torch.set_num_threads(1)
    from mha_lib import tasks

    start = time.process_time()
    model = tasks.load_trained(TOY["model"], model_seed)
    data = tasks.SHIPPED[TOY["model"]].make_task().dataset(512, seed=1)  # the chapter's scoring set
    batches = [data[i:i + TOY["batch"]] for i in range(0, 512, TOY["batch"])]
    found = _search(model, batches, tasks.per_example_loss, TOY, gate_seed)
    return _records(TOY["model"], model_seed, gate_seed, found, time.process_time() - start)


def minilm_job(gate_seed: int):
    import torch

    torch.set_num_threads(1)
    from importlib import resources

    from mha_lib.pretrained import load_bert

    start = time.process_time()
    bert, _ = load_bert(verbose=False)
    text = (resources.files("mha_lib") / "data" / "sentences.txt").read_text(encoding="utf-8")
    sentences = [s.strip() for s in text.splitlines() if s.strip()]
    reference = bert.sentence_embeddings(sentences, batch_size=64)  # (100, 384), the unpruned model's
    B = MINILM["batch"]
    # tokenized once: (indices, TokenBatch) per batch of texts
    batches = [(torch.arange(i, min(i + B, len(sentences))), bert.tokenize(sentences[i:i + B]))
               for i in range(0, len(sentences), B)]

    def cosine_loss(model, batch, head_mask):
        idx, tokens = batch
        h = model(**tokens.model_inputs(), head_mask=head_mask).last_hidden_state  # (B, L, 384)
        e = model.pool(h, tokens.key_padding_mask)  # (B, 384), unit norm
        return 1.0 - (e * reference[idx]).sum(-1)  # (B,)

    found = _search(bert, batches, cosine_loss, MINILM, gate_seed)
    return _records(MINILM["model"], 0, gate_seed, found, time.process_time() - start)


def _run(job):
    kind, args = job
    return toy_job(*args) if kind == "toy" else minilm_job(*args)


def kept_runs(path: Path, model: str) -> list:
    """The runs of ``model`` in the record at ``path`` (``--only`` keeps the other model's), checked before any
    training: a record of this script, made with this recipe's fractions and gate seeds.

    Raises:
        ValueError: naming ``path``: not JSON, not an object, not a ``mha_lib-ch4-gates`` version 1 record,
            other fractions or gate seeds, or runs that are not objects with a ``model`` string.
    """
    from mha_lib.model.io import read_json

    record = read_json(path)
    if record.get("format") != "mha_lib-ch4-gates" or record.get("version") != 1:
        raise ValueError(f"{path} is not a mha_lib-ch4-gates record (version 1): format {record.get('format')!r}, "
                         f"version {record.get('version')!r}; --only keeps records from this script's own file")
    for name, want in (("fractions", list(FRACTIONS)), ("gate_seeds", list(GATE_SEEDS))):
        if record.get(name) != want:
            raise ValueError(f"{path} was made with {name} {record.get(name)!r}, this script's are {want!r}: "
                             "run without --only")
    runs = record.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("model"), str) for r in runs):
        raise ValueError(f"{path}: runs must be a list of records with a model name")
    return [r for r in runs if r["model"] == model]


def main(argv=None) -> int:
    import torch

    from mha_lib import __version__
    from mha_lib.tasks import SHIPPED

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["toy", "minilm"], help="train one model's gates only (the other "
                        "model's records are kept from the existing file)")
    parser.add_argument("--workers", type=count, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, default=OUT)
    add_arguments(parser)
    args = parser.parse_args(argv)
    jobs = []
    if args.only in (None, "minilm"):
        jobs += [("minilm", (g,)) for g in GATE_SEEDS]  # the longest jobs first
    if args.only in (None, "toy"):
        jobs += [("toy", (s, g)) for s in SHIPPED[TOY["model"]].seeds for g in GATE_SEEDS]
    kept = []
    if args.only is not None and args.out.is_file():  # keep the other model's records: checked before training
        kept = kept_runs(args.out, "all-MiniLM-L6-v2" if args.only == "toy" else TOY["model"])
    start = time.perf_counter()
    records = []
    for recs in run_jobs(_run, jobs, workers=max(1, args.workers), backend=args.backend, scheduler=args.scheduler):
        records += recs
        r = recs[0]
        print(f"{r['model']} model seed {r['model_seed']} gate seed {r['gate_seed']}: pruned "
              + ", ".join(f"{x['num_pruned']} (target {x['target_pruned']}, penalty {x['penalty']:.3g})"
                          for x in recs)
              + f"; {len(r['trials'])} runs, {r['cpu_seconds']:.0f} s CPU", flush=True)
    records += kept
    records.sort(key=lambda r: (r["model"], r["model_seed"], r["gate_seed"], r["target_fraction"]))
    seconds = time.perf_counter() - start
    out = {
        "format": "mha_lib-ch4-gates", "version": 1,
        "fractions": list(FRACTIONS), "gate_seeds": list(GATE_SEEDS),
        "recipe": {"gates": RECIPE, "toy": TOY, "minilm": MINILM,
                   "optimiser": "Adam on log_alpha only; the model frozen; one gate draw per example",
                   "search": "mha_lib.pruning.gates_for_fractions: log-scale bisection of the penalty, stopped "
                             "within `tolerance` heads of round(fraction * N) or after `max_trials` runs per target"},
        "runs": records,
        "versions": {"mha_lib": __version__, "torch": torch.__version__, "python": platform.python_version()},
    }
    replace_text(args.out, json.dumps(out, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({len(records)} records) in {seconds:.0f} s with {args.workers} workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
