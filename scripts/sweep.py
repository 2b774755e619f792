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

import argparse
import contextlib
import json
import os
import re
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, List, Optional

BACKENDS = ("loky", "threading", "sequential", "dask", "ray")
CLUSTERS = ("dask", "ray")
CONNECT_TIMEOUT_S = 10.0  # a scheduler's port must accept a TCP connection within this
WORKER_WAIT_S = 120.0  # a Dask scheduler must have a worker within this (else the jobs would wait forever)
_ADDRESS = re.compile(r"^(?:(?P<scheme>[a-z]+)://)?(?P<host>\[[0-9a-fA-F:]+\]|[^\s:/\[\]]+):(?P<port>\d{1,5})/?$")


def count(text: str, minimum: int = 1) -> int:
    """An argparse ``type`` for ``--workers``, ``--seeds`` and the like: an integer >= ``minimum``.

    Raises:
        argparse.ArgumentTypeError: anything else (naming it), which argparse reports as a usage error.
    """
    try:
        value = int(text, 10)
    except (TypeError, ValueError):
        value = None
    if value is None or value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
    return value


def _host_port(backend: str, scheduler: str) -> Optional[tuple]:
    """(host, port) that ``scheduler`` names, or None for addresses with no TCP port to try (ray's ``auto``,
    Dask's ``inproc://``/``ucx://``).

    Raises:
        ValueError: an address with no host or port, or a port out of range (naming it).
    """
    if backend == "ray" and scheduler in ("auto", "local"):
        return None
    if backend == "dask" and re.match(r"^(inproc|ucx)://", scheduler):
        return None
    found = _ADDRESS.match(scheduler)
    schemes = (None, "tcp", "tls", "ws", "wss") if backend == "dask" else (None, "ray")
    if not found or not 0 < int(found["port"]) < 65536 or found["scheme"] not in schemes:
        example = "tcp://HOST:8786" if backend == "dask" else "ray://HOST:10001, HOST:6379 or auto"
        raise ValueError(f"--scheduler {scheduler!r} is not a {backend} scheduler address ({example})")
    return found["host"].strip("[]"), int(found["port"])


def _check_reachable(backend: str, scheduler: str) -> None:
    """Fail at once when nothing listens at ``scheduler`` (ray.init() otherwise waits minutes for its GCS).

    Raises:
        ValueError: a malformed address; ConnectionError: no TCP connection within CONNECT_TIMEOUT_S.
    """
    where = _host_port(backend, scheduler)
    if where is None:
        return
    try:
        socket.create_connection(where, timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        raise ConnectionError(f"--scheduler {scheduler!r} is not reachable: no {backend} scheduler accepted a "
                              f"connection at {where[0]}:{where[1]} within {CONNECT_TIMEOUT_S:g} s ({err})") from None


def add_arguments(parser) -> None:
    """The ``--backend``, ``--scheduler`` options every training script takes (``--workers`` is its own)."""
    parser.add_argument("--backend", choices=BACKENDS, default="loky",
                        help="where the jobs run (joblib backend; default: local processes)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="dask: the scheduler's address (default: a local cluster); ray: the cluster's address")


@contextlib.contextmanager
def _cluster(backend: str, scheduler: Optional[str], workers: int):
    """Connect to (or start) the cluster a backend needs; nothing for the local backends."""
    if backend == "dask":
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as err:
            raise SystemExit(f"--backend dask needs dask.distributed: pip install 'mha_lib[dask]' ({err})") from None
        if scheduler is not None:
            _check_reachable(backend, scheduler)
            with Client(scheduler) as client:
                try:  # a scheduler with no worker would take the jobs and never run them
                    client.wait_for_workers(1, timeout=WORKER_WAIT_S)
                except TimeoutError:
                    raise TimeoutError(f"--scheduler {scheduler!r} has no worker after {WORKER_WAIT_S:g} s: start "
                                       f"`dask worker {scheduler}` on the cluster's machines") from None
                yield
        else:
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True) as cluster, Client(cluster):
                yield
    elif backend == "ray":
        if scheduler is not None:
            _check_reachable(backend, scheduler)
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
        ValueError: an unknown backend, ``workers`` < 1, a ``scheduler`` for a local backend or a malformed
            one. ConnectionError: nothing listens at ``scheduler``. TimeoutError: a Dask scheduler with no
            worker. A job's exception propagates as raised, after every other job has finished and its
            result has been yielded (so that a sweep keeps what finished).
    """
    from joblib import Parallel, delayed, parallel_config
    from joblib.parallel import get_active_backend

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    if scheduler is not None and backend not in CLUSTERS:
        raise ValueError(f"--scheduler {scheduler!r} needs --backend dask or ray; backend {backend!r} would run the "
                         "jobs on this machine")
    jobs = list(jobs)
    with _cluster(backend, scheduler, workers), \
            parallel_config(backend=backend, n_jobs=workers, inner_max_num_threads=1 if backend == "loky" else None):
        # Ray's joblib backend (a multiprocessing pool) cannot hand results over as they finish: there
        # they come all at once, at the end.
        streams = get_active_backend()[0].supports_return_generator
        failed = None
        for result in Parallel(return_as="generator_unordered" if streams else "list")(
                delayed(_guarded)(fn, job) for job in jobs):
            if isinstance(result, _Failed):
                failed = failed or result  # the first failure is raised once every other job has finished
            else:
                yield result
        if failed is not None:
            failed.error.add_note(f"(job {failed.job!r}; the other jobs finished and were handed over first)\n"
                                  + failed.trace)
            raise failed.error


class _Failed:
    """What a job that raised returns: its exception, its traceback (text) and its job."""

    def __init__(self, job, error: BaseException, trace: str):
        self.job, self.error, self.trace = job, error, trace


def _guarded(fn: Callable[[Any], Any], job: Any) -> Any:
    """``fn(job)``, or a :class:`_Failed` when it raises: joblib would otherwise stop at the first error, and
    results computed meanwhile (a whole batch on the sequential backend) would never reach the caller."""
    import traceback

    try:
        return fn(job)
    except Exception as error:  # noqa: BLE001 -- handed to the caller, raised there
        return _Failed(job, error, traceback.format_exc())


def replace_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole: into a temporary file beside it, then renamed over it, so that
    a crash or a concurrent reader never sees half a record."""
    fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=f".{Path(path).name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_runs(fn: Callable[[Any], dict], jobs: Iterable[Any], out, *, key: Callable[[dict], Any],
               describe: Callable[[dict], str], header: Optional[dict] = None, workers: int,
               backend: str = "loky", scheduler: Optional[str] = None, kept: Iterable[dict] = ()) -> List[dict]:
    """Run ``fn`` over ``jobs`` (:func:`run_jobs`) and keep ``out`` up to date: after every finished
    job, ``{**header, "runs": records}`` is rewritten as JSON with the records sorted by ``key``, so
    an interrupted sweep keeps what finished. ``kept``: records of earlier runs that stay in the file
    (a sweep extended with new seeds; the caller leaves their jobs out). Prints ``describe(record)``
    per job, with the elapsed seconds. Returns the sorted records. ``out`` is replaced whole each time
    (written beside it, then renamed), so a crash never leaves half a file; with no jobs it holds the
    kept records only.
    """
    jobs, out = list(jobs), Path(out)
    records, start = sorted(kept, key=key), time.perf_counter()

    def save():
        replace_text(out, json.dumps({**(header or {}), "runs": records}, indent=1) + "\n")

    if not jobs:  # nothing new: the file holds the kept records
        save()
    for i, record in enumerate(run_jobs(fn, jobs, workers=workers, backend=backend, scheduler=scheduler), 1):
        records.append(record)
        records.sort(key=key)
        save()
        print(f"[{i}/{len(jobs)}] {describe(record)} ({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"wrote {out}: {len(records)} runs in {time.perf_counter() - start:.0f} s")
    return records
