"""Run a sweep's independent jobs with joblib: local processes by default, a Dask or Ray cluster on request.

The training scripts (``train_all.py``, ``train_ch1_budget.py``, ``train_gates.py``) hand their
jobs to :func:`run_jobs` instead of keeping a process pool of their own; the evidence scripts that
write one JSON record per run (``ch1_fresh_heads.py``, ``ch2_fresh_seeds.py``,
``ch4_fresh_seeds.py``, ``train_ch7_budget.py``) go through :func:`write_runs`. Every job runs with one
torch thread (the book's models are tiny: intra-op threads only add synchronisation), which
joblib enforces in its worker processes with ``inner_max_num_threads=1``.

Backends (``--backend`` of every training script):

* ``loky`` (default): joblib's process pool on this machine, ``--workers`` processes.
* ``threading`` / ``sequential``: in this process (for debugging; ``sequential`` runs one job
  at a time).
* ``dask``: a Dask cluster, ``--scheduler tcp://HOST:8786`` (needs ``pip install
  "mha_lib[dask]"``, i.e. ``dask[distributed]``). Without ``--scheduler`` a local cluster of
  ``--workers`` processes is started, which is how the tests try it.
* ``ray``: a Ray cluster, ``--scheduler ray://HOST:10001`` or ``auto`` (needs ``pip install
  "mha_lib[ray]"``); joblib's Ray backend (``ray.util.joblib``) sends the jobs there.

On a cluster every worker must see the scripts' scratch folder (``--scratch``, a shared file
system): the trained weights travel back through the checkpoint cache there, as safetensors
files, never as pickled tensors. Results come back in the order the jobs finish.
"""
from __future__ import annotations

import contextlib
import json
import time
from typing import Any, Callable, Iterable, Iterator, List, Optional

BACKENDS = ("loky", "threading", "sequential", "dask", "ray")


def add_arguments(parser) -> None:
    """The ``--backend``, ``--scheduler`` options every training script takes (``--workers`` is its own)."""
    parser.add_argument("--backend", choices=BACKENDS, default="loky",
                        help="where the jobs run (joblib backend; default: local processes)")
    parser.add_argument("--scheduler", default=None,
                        help="dask: the scheduler's address (default: a local cluster); ray: the cluster's address")


@contextlib.contextmanager
def _cluster(backend: str, scheduler: Optional[str], workers: int):
    """Connect to (or start) the cluster a backend needs; nothing for the local backends."""
    if backend == "dask":
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as err:
            raise SystemExit(f"--backend dask needs dask.distributed: pip install 'mha_lib[dask]' ({err})") from None
        if scheduler:
            with Client(scheduler):
                yield
        else:
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True) as cluster, Client(cluster):
                yield
    elif backend == "ray":
        try:
            import ray
            from ray.util.joblib import register_ray
        except ImportError as err:
            raise SystemExit(f"--backend ray needs ray: pip install 'mha_lib[ray]' ({err})") from None
        register_ray()
        ray.init(address=scheduler or None)
        try:
            yield
        finally:
            ray.shutdown()
    else:
        yield


def run_jobs(fn: Callable[[Any], Any], jobs: Iterable[Any], *, workers: int, backend: str = "loky",
             scheduler: Optional[str] = None) -> Iterator[Any]:
    """Yield ``fn(job)`` for every job, in the order they finish, computed on ``backend`` (on ``ray``,
    all at once when the last one finishes: joblib's Ray backend does not stream results).

    Args:
        fn: a module-level function (processes and clusters import it by name).
        jobs: the arguments, one per call.
        workers: parallel jobs, >= 1 (``n_jobs`` of joblib; a cluster's size is its own).
        backend: one of :data:`BACKENDS`.
        scheduler: the cluster's address for ``dask``/``ray``; None = local cluster (dask) or
            ``ray.init()``'s default.

    Raises:
        ValueError: an unknown backend or ``workers`` < 1. A job's exception propagates as raised.
    """
    from joblib import Parallel, delayed, parallel_config
    from joblib.parallel import get_active_backend

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    jobs = list(jobs)
    with _cluster(backend, scheduler, workers), \
            parallel_config(backend=backend, n_jobs=workers, inner_max_num_threads=1 if backend == "loky" else None):
        # Ray's joblib backend (a multiprocessing pool) cannot hand results over as they finish: there
        # they come all at once, at the end.
        streams = get_active_backend()[0].supports_return_generator
        yield from Parallel(return_as="generator_unordered" if streams else "list")(delayed(fn)(job) for job in jobs)


def write_runs(fn: Callable[[Any], dict], jobs: Iterable[Any], out, *, key: Callable[[dict], Any],
               describe: Callable[[dict], str], header: Optional[dict] = None, workers: int,
               backend: str = "loky", scheduler: Optional[str] = None) -> List[dict]:
    """Run ``fn`` over ``jobs`` (:func:`run_jobs`) and keep ``out`` up to date: after every finished
    job, ``{**header, "runs": records}`` is rewritten as JSON with the records sorted by ``key``, so
    an interrupted sweep keeps what finished. Prints ``describe(record)`` per job, with the elapsed
    seconds. Returns the sorted records.
    """
    jobs = list(jobs)
    records, start = [], time.perf_counter()
    for i, record in enumerate(run_jobs(fn, jobs, workers=workers, backend=backend, scheduler=scheduler), 1):
        records.append(record)
        records.sort(key=key)
        out.write_text(json.dumps({**(header or {}), "runs": records}, indent=1) + "\n")
        print(f"[{i}/{len(jobs)}] {describe(record)} ({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"wrote {out}: {len(records)} runs in {time.perf_counter() - start:.0f} s")
    return records
