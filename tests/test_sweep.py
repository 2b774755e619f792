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


def test_write_runs_keeps_the_records_of_an_earlier_sweep(tmp_path):
    # a sweep extended with new seeds (chapter 8's ensembles): the kept runs stay, sorted in with the new
    out = tmp_path / "runs.json"
    kept = [_record(2), _record(5)]
    records = sweep.write_runs(_record, [3, 1], out, key=lambda r: r["seed"], kept=kept,
                               describe=str, workers=1, backend="sequential")
    assert [r["seed"] for r in json.loads(out.read_text())["runs"]] == [1, 2, 3, 5] == [r["seed"] for r in records]
    # nothing left to run: the file still holds the kept runs
    sweep.write_runs(_record, [], out, key=lambda r: r["seed"], kept=kept, describe=str, workers=1,
                     backend="sequential")
    assert [r["seed"] for r in json.loads(out.read_text())["runs"]] == [2, 5]


# ----------------------------------------------------------------------------- hardening (issue 47, fifth pass)
def _closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("backend, address", [("ray", "127.0.0.1:{port}"), ("ray", "ray://127.0.0.1:{port}"),
                                              ("dask", "tcp://127.0.0.1:{port}")])
def test_an_unreachable_scheduler_fails_at_once_naming_its_address(backend, address, monkeypatch):
    """ray.init() on a closed port waited for its GCS for minutes (past 150 s); Dask for 30 s."""
    address = address.format(port=_closed_port())
    monkeypatch.setattr(sweep, "CONNECT_TIMEOUT_S", 2.0)
    with pytest.raises(ConnectionError, match=f"--scheduler {address!r}.*not reachable"):
        list(sweep.run_jobs(abs, [1], workers=1, backend=backend, scheduler=address))


@pytest.mark.parametrize("address", ["", "127.0.0.1", "tcp://127.0.0.1:notaport", "127.0.0.1:99999", "tcp://:8786"])
def test_a_malformed_scheduler_address_is_named(address):
    with pytest.raises(ValueError, match="--scheduler"):
        list(sweep.run_jobs(abs, [1], workers=1, backend="dask", scheduler=address))


@pytest.mark.parametrize("backend", ["loky", "threading", "sequential"])
def test_a_scheduler_given_to_a_local_backend_is_refused(backend):
    """It was ignored: the jobs ran here while the user thought they went to the cluster."""
    with pytest.raises(ValueError, match=f"--scheduler.*{backend}"):
        list(sweep.run_jobs(abs, [1], workers=1, backend=backend, scheduler="tcp://10.0.0.1:8786"))


@pytest.mark.slow
def test_a_dask_scheduler_without_workers_fails_naming_it_instead_of_waiting_forever(monkeypatch):
    pytest.importorskip("dask.distributed")
    from dask.distributed import LocalCluster

    monkeypatch.setattr(sweep, "WORKER_WAIT_S", 1.0)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        with pytest.raises(TimeoutError, match=f"{cluster.scheduler_address}.*no worker"):
            list(sweep.run_jobs(abs, [1], workers=1, backend="dask", scheduler=cluster.scheduler_address))


@pytest.mark.parametrize("text", ["-1", "0", "2.5", "two", "1e3"])
def test_worker_and_seed_counts_must_be_positive_integers(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match=repr(text)):
        sweep.count(text)
    assert sweep.count("3") == 3 and sweep.count("0", minimum=0) == 0


def _never_run(module, monkeypatch):
    """Should the refusal regress, fail instead of running the sweep onto the shipped record (mha_lib/data)."""
    for name in ("run_jobs", "write_runs"):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, lambda *a, **k: pytest.fail("the sweep ran"))


@pytest.mark.parametrize("script", ["ch1_fresh_heads", "ch2_fresh_seeds", "train_all", "train_gates",
                                    "train_ch1_budget", "train_ch7_budget", "ch4_fresh_seeds", "ch8_ensemble"])
def test_every_script_refuses_negative_workers(script, capsys, monkeypatch):
    """``max(1, args.workers)`` turned --workers -3 into 1 without a word."""
    module = __import__(script)
    _never_run(module, monkeypatch)
    with pytest.raises(SystemExit):
        module.main(["--workers", "-3"])
    assert "'-3'" in capsys.readouterr().err


def test_negative_fresh_seeds_are_refused(capsys, monkeypatch):
    """--seeds -3 gave range(5, 2): no fresh seed at all, silently."""
    import ch1_fresh_heads

    _never_run(ch1_fresh_heads, monkeypatch)
    with pytest.raises(SystemExit):
        ch1_fresh_heads.main(["--seeds", "-3"])
    assert "'-3'" in capsys.readouterr().err


def test_write_runs_with_no_jobs_writes_what_it_says(tmp_path, capsys):
    """It printed "wrote OUT: 0 runs" and wrote nothing."""
    out = tmp_path / "runs.json"
    assert sweep.write_runs(_record, [], out, key=lambda r: r["seed"], describe=str, header={"h": 1},
                            workers=1, backend="sequential") == []
    assert json.loads(out.read_text()) == {"h": 1, "runs": []}


def _fail_on_three(x):
    if x == 3:
        raise RuntimeError("job 3 failed")
    return _record(x)


def test_a_failing_job_leaves_every_other_run_in_a_whole_file(tmp_path, monkeypatch):
    """Runs that finished were lost when another job raised first (sequential: all of them); and the record is
    replaced, never rewritten in place, so a crash mid-write cannot leave half a file."""
    out = tmp_path / "runs.json"
    out.write_text('{"runs": "the previous record"}')
    writes = []
    real = Path.write_text
    monkeypatch.setattr(Path, "write_text", lambda self, *a, **k: (writes.append(self), real(self, *a, **k))[1])
    with pytest.raises(RuntimeError, match="job 3 failed"):
        sweep.write_runs(_fail_on_three, [1, 2, 3, 4], out, key=lambda r: r["seed"], describe=str,
                         workers=1, backend="sequential")
    assert [r["seed"] for r in json.loads(out.read_text())["runs"]] == [1, 2, 4]  # every job but the failed one
    assert out not in writes  # written beside it, then renamed
    assert [p.name for p in tmp_path.iterdir()] == ["runs.json"]


def _gates_record(**changes) -> dict:
    import train_gates

    record = {"format": "mha_lib-ch4-gates", "version": 1, "fractions": list(train_gates.FRACTIONS),
              "gate_seeds": list(train_gates.GATE_SEEDS), "recipe": {"gates": train_gates.RECIPE},
              "runs": [{"model": "all-MiniLM-L6-v2", "model_seed": 0, "gate_seed": 0, "target_fraction": 0.4}]}
    return {**record, **changes}


@pytest.mark.parametrize("content, message", [
    ('{"runs": [', "not valid JSON"),  # truncated
    ('[1, 2]', "must hold a JSON object"),
    (json.dumps({"runs": []}), "not a mha_lib-ch4-gates record"),  # another script's record
    (json.dumps(_gates_record(format="mha_lib-ch8-ensemble")), "not a mha_lib-ch4-gates record"),
    (json.dumps(_gates_record(fractions=[0.5])), "fractions"),  # made with another recipe: not comparable
    (json.dumps(_gates_record(gate_seeds=[7])), "gate_seeds"),
    (json.dumps(_gates_record(runs=[{"model": 3}])), "runs"),
])
def test_train_gates_only_checks_the_record_it_keeps_before_training(tmp_path, monkeypatch, content, message):
    """--only toy kept the other model's records from --out, read after hours of training: a truncated file
    crashed there (the new runs lost), a foreign one was mixed into the record."""
    import train_gates

    out = tmp_path / "ch4_gates.json"
    out.write_text(content)
    monkeypatch.setattr(train_gates, "run_jobs", lambda *a, **k: pytest.fail("trained before checking --out"))
    with pytest.raises(ValueError, match=message) as info:
        train_gates.main(["--only", "toy", "--out", str(out)])
    assert str(out) in str(info.value)
