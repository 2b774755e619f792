"""scripts/sweep.py: the training scripts' jobs run on joblib (processes here, a Dask or Ray cluster on request)."""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import sweep  # noqa: E402
import train_all  # noqa: E402


@pytest.mark.parametrize("backend", ["loky", "threading", "sequential"])
def test_every_local_backend_runs_every_job_once(backend):
    results = sorted(sweep.run_jobs(abs, [-3, 1, -2, 5], workers=2, backend=backend))
    assert results == [1, 2, 3, 5]


def test_process_workers_keep_to_one_thread():
    """joblib's processes run with one OpenMP/BLAS thread (the models are too small for more)."""
    assert list(sweep.run_jobs(os.getenv, ["OMP_NUM_THREADS"], workers=2)) == ["1"]


def test_a_jobs_error_reaches_the_caller():
    with pytest.raises(ValueError, match="math domain error"):
        list(sweep.run_jobs(__import__("math").sqrt, [4.0, -1.0], workers=1, backend="sequential"))


@pytest.mark.parametrize("kwargs, match", [({"backend": "spark"}, "backend must be one of"),
                                           ({"workers": 0}, "workers must be an int >= 1")])
def test_bad_backend_or_workers_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        list(sweep.run_jobs(abs, [1], **{"workers": 1, **kwargs}))


@pytest.mark.parametrize("backend, module", [("dask", "dask.distributed"), ("ray", "ray")])
def test_a_cluster_backend_without_its_package_says_what_to_install(backend, module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it raises ImportError
    with pytest.raises(SystemExit, match=rf"mha_lib\[{backend}\]"):
        list(sweep.run_jobs(abs, [1], workers=1, backend=backend))


@pytest.mark.slow
def test_train_all_trains_saves_and_matches_a_direct_run(tmp_path, monkeypatch):
    """train_all end to end on joblib's backend switch (threads, so that a small patched recipe is
    seen by the jobs): the files it writes hold what train_spec computes on its own."""
    from mha_lib import tasks
    from mha_lib.train import train_spec

    tiny = dataclasses.replace(tasks.SHIPPED["ch1-h2"], name="sweep-test-h2", steps=40, seeds=(0, 1), checkpoints=())
    monkeypatch.setitem(tasks.SHIPPED, tiny.name, tiny)
    out = tmp_path / "weights"
    assert train_all.main([tiny.name, "--out", str(out), "--backend", "threading", "--workers", "2"]) == 0
    meta = json.loads((out / f"{tiny.name}.v{tiny.version}.json").read_text())
    direct = [train_spec(tiny, s, progress=False, cache_dir=tmp_path / "direct").accuracy for s in tiny.seeds]
    assert meta["seeds"] == [0, 1] and len(meta["accuracy"]) == 2
    assert meta["accuracy"] == pytest.approx(direct, abs=0.02)  # float16 copies of the same weights


def _record(x):
    return {"seed": x, "accuracy": x / 10}


def test_write_runs_rewrites_the_sorted_record_after_every_job(tmp_path, capsys):
    out = tmp_path / "runs.json"
    records = sweep.write_runs(_record, [3, 1, 2], out, key=lambda r: r["seed"], header={"probe_seed": 11},
                               describe=lambda r: f"seed {r['seed']}", workers=1, backend="sequential")
    data = json.loads(out.read_text())
    assert list(data) == ["probe_seed", "runs"] and data["probe_seed"] == 11
    assert [r["seed"] for r in data["runs"]] == [1, 2, 3] and records == data["runs"]
    assert "[3/3] seed 2" in capsys.readouterr().out
