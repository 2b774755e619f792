"""Retrain every shipped toy model from scratch (what `make train` runs).

For each family in ``mha_lib.tasks.SHIPPED`` (or the ones named on the command line), every
seed is trained with ``mha_lib.train.train_spec`` and the family is written to
``mha_lib/weights/<name>.v<version>.{safetensors,json}`` by ``mha_lib.train.save_trained``.

The models are tiny (about 50k parameters each), so on a CPU one thread per run is fastest;
runs go to ``--workers`` joblib processes (default: the number of CPU cores, at most 4), or to a
Dask or Ray cluster (``--backend dask --scheduler tcp://HOST:8786``; see ``scripts/sweep.py``).
The result does not depend on the number of workers: a run is a function of its spec and
seed (and of the torch version and CPU, see mha_lib.train).

Usage:
    python scripts/train_all.py                    # everything, into mha_lib/weights/
    python scripts/train_all.py ch1-h1 ch1-h2      # only these families
    python scripts/train_all.py --out /tmp/w       # somewhere else
    python scripts/train_all.py --backend dask --scheduler tcp://HOST:8786 --scratch /shared/tmp
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import add_arguments, count, run_jobs  # noqa: E402


def _run(job):
    """Train one (family, seed) in a worker; the weights travel back through a safetensors
    file in the scratch folder (train_spec's checkpoint cache), never through pickle. The job
    carries the family's recipe itself (a ``TrainedSpec``), so a worker trains what the caller
    asked for whatever its own copy of ``tasks.SHIPPED`` holds."""
    spec, seed, device, scratch = job
    import torch

    if device == "cpu":
        torch.set_num_threads(1)  # tiny models: threads only add synchronisation cost
    from mha_lib.train import train_spec

    r = train_spec(spec, seed, device=device, progress=False, cache_dir=scratch)
    return spec.name, seed, r.accuracy, r.seconds, r.cpu_seconds


def main(argv=None) -> int:
    from mha_lib.tasks import SHIPPED, WEIGHTS_DIR
    from mha_lib.train import save_trained, train_spec

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"families to train (default all: {', '.join(SHIPPED)})")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR, help="output folder")
    parser.add_argument("--workers", type=count, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--device", default="cpu", help="torch device (default cpu; the shipped files are from cpu)")
    parser.add_argument("--scratch", type=Path, default=None,
                        help="the runs' checkpoint folder (default: a temporary one; on a cluster, a shared one)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    names = args.names or list(SHIPPED)
    unknown = [n for n in names if n not in SHIPPED]
    if unknown:
        parser.error(f"unknown families {unknown}; known: {list(SHIPPED)}")
    start = time.perf_counter()
    workers = 1 if args.device != "cpu" else max(1, args.workers)
    cpu = 0.0
    with tempfile.TemporaryDirectory(prefix="mha_lib_train_") as tmp:
        scratch = str(args.scratch or tmp)
        jobs = [(SHIPPED[n], s, args.device, scratch) for n in names for s in SHIPPED[n].seeds]
        # longest jobs first, so that the workers finish together
        jobs.sort(key=lambda j: -j[0].model["num_layers"] * j[0].steps)
        for name, seed, acc, seconds, cpu_seconds in run_jobs(_run, jobs, workers=workers, backend=args.backend,
                                                              scheduler=args.scheduler):
            cpu += cpu_seconds
            print(f"{name} seed {seed}: accuracy {acc:.3f} ({seconds:.0f} s wall, {cpu_seconds:.0f} s CPU)",
                  flush=True)
        for name in names:
            spec = SHIPPED[name]
            # read back from the scratch cache (same device type, so the cache key matches)
            results = [train_spec(spec, s, device=args.device, progress=False, cache_dir=scratch) for s in spec.seeds]
            assert all(r.cached for r in results)
            meta = save_trained(spec, results, args.out)
            accs = ", ".join(f"{a:.3f}" for a in meta["accuracy"])
            print(f"saved {name}.v{spec.version}: accuracy per seed [{accs}]", flush=True)
    print(f"trained {len(jobs)} runs with {workers} workers in {time.perf_counter() - start:.0f} s "
          f"({cpu:.0f} s of CPU time in the runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
