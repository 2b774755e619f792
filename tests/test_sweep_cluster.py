"""The training scripts on real clusters: a Dask scheduler and two workers started as the `dask
scheduler` / `dask worker` commands on 127.0.0.1, and a local Ray instance; a tiny family trained
through ``train_all.py --backend dask --scheduler tcp://127.0.0.1:PORT`` (and ``--backend ray``)
saves exactly what joblib's local processes save.

Both clusters run as processes this test starts and ends (a watchdog ends the Dask one after
WATCHDOG_SECONDS whatever happens, so a lost worker cannot hang the suite)."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_all  # noqa: E402

pytestmark = pytest.mark.slow
WATCHDOG_SECONDS = 300
WORKERS = 2


def _end(process: subprocess.Popen) -> None:
    """SIGTERM to the process group this test started (the worker command's nannies and workers
    too), then SIGKILL if it has not ended within 20 s."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def dask_scheduler(tmp_path_factory):
    """The address (tcp://127.0.0.1:PORT) of a Dask scheduler with two one-thread workers."""
    from dask.distributed import Client

    tmp = tmp_path_factory.mktemp("dask")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "scripts")]), OMP_NUM_THREADS="1")
    scheduler_file = tmp / "scheduler.json"
    started = []

    def start(module, *args, log):
        process = subprocess.Popen([sys.executable, "-m", module, *args], env=env, cwd=tmp, start_new_session=True,
                                   stdout=open(tmp / log, "w"), stderr=subprocess.STDOUT)
        started.append(process)
        return process

    watchdog = threading.Timer(WATCHDOG_SECONDS, lambda: [_end(p) for p in started])
    watchdog.start()
    try:
        scheduler = start("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                          "--scheduler-file", str(scheduler_file), log="scheduler.log")
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and scheduler.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert scheduler_file.exists(), (tmp / "scheduler.log").read_text()
        time.sleep(0.2)  # the file is written in one go, but give the writer a moment to close it
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:"), address
        start("distributed.cli.dask_worker", address, "--nworkers", str(WORKERS), "--nthreads", "1", "--host",
              "127.0.0.1", "--no-dashboard", "--memory-limit", "0", log="workers.log")
        with Client(address, timeout=60) as client:
            client.wait_for_workers(WORKERS, timeout=120)
            assert len(client.scheduler_info()["workers"]) == WORKERS
        yield address
    finally:
        watchdog.cancel()
        for process in reversed(started):
            _end(process)
    assert all(p.poll() is not None for p in started)


@pytest.fixture
def tiny_family(monkeypatch):
    """A two-seed family of chapter 1's recipe at 40 steps, registered for this test only."""
    from mha_lib import tasks

    tiny = dataclasses.replace(tasks.SHIPPED["ch1-h2"], name="cluster-test-h2", steps=40, seeds=(0, 1), checkpoints=())
    monkeypatch.setitem(tasks.SHIPPED, tiny.name, tiny)
    return tiny


def _train(tiny, out: Path, *backend_args: str) -> tuple[dict, dict]:
    """train_all's saved family: its weights (name -> tensor) and its accuracies."""
    assert train_all.main([tiny.name, "--out", str(out), *backend_args]) == 0
    stem = f"{tiny.name}.v{tiny.version}"
    meta = json.loads((out / f"{stem}.json").read_text())
    return load_file(str(out / f"{stem}.safetensors")), meta


def _assert_same(got, want):
    (weights, meta), (ref_weights, ref_meta) = got, want
    assert meta["seeds"] == ref_meta["seeds"] == [0, 1]
    assert meta["accuracy"] == ref_meta["accuracy"]
    assert weights.keys() == ref_weights.keys()
    for name, tensor in weights.items():
        assert tensor.equal(ref_weights[name]), name


@pytest.fixture(scope="module")
def joblib_run(tmp_path_factory):
    """The reference: the same family trained by joblib's local processes (loky)."""
    from mha_lib import tasks

    tiny = dataclasses.replace(tasks.SHIPPED["ch1-h2"], name="cluster-test-h2", steps=40, seeds=(0, 1), checkpoints=())
    tasks.SHIPPED[tiny.name] = tiny
    try:
        tmp = tmp_path_factory.mktemp("loky")
        return _train(tiny, tmp / "out", "--backend", "loky", "--workers", str(WORKERS), "--scratch", str(tmp / "s"))
    finally:
        del tasks.SHIPPED[tiny.name]


def test_train_all_on_a_dask_cluster_saves_what_joblib_saves(dask_scheduler, tiny_family, joblib_run, tmp_path):
    got = _train(tiny_family, tmp_path / "out", "--backend", "dask", "--scheduler", dask_scheduler,
                 "--scratch", str(tmp_path / "scratch"))
    _assert_same(got, joblib_run)


def test_train_all_on_a_local_ray_instance_saves_what_joblib_saves(tiny_family, joblib_run, tmp_path, monkeypatch):
    pytest.importorskip("ray", reason="the ray extra is optional")
    # Ray's worker processes import train_all (the job's function) and this checkout's mha_lib.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(ROOT / "scripts")]))
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    got = _train(tiny_family, tmp_path / "out", "--backend", "ray", "--workers", str(WORKERS),
                 "--scratch", str(tmp_path / "scratch"))
    _assert_same(got, joblib_run)
