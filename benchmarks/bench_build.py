"""How long the book takes to build and its tests to run, phase by phase (issue 46).

Runs the phases a fresh clone goes through, each as the Makefile runs it, and prints for each its wall
time, the CPU time of everything it started (user + system, all processes), their ratio (how many cores
it kept busy) and the machine's load average before it began; then the same against a reference timed
in the same run (importing torch and mha_lib in a new process, the cost every phase pays at least once),
so that a slower build on a slower machine reads the same in reference units.

Phases (``--phases``, comma-separated; default: all but ``venv``):

* ``venv``: ``make venv`` from nothing (``.venv`` is moved aside first and put back after, unless ``--keep``);
  pip's cache is whatever this machine has (``pip cache dir``);
* ``check``: ``make check-notebooks``; ``book-en``: the English book (jupyter-book); ``models``: the
  live views' models (``tools/export_site_models.py``), with ``--cold`` from an empty export cache, else
  from ``_build/models-cache`` as a second build finds it; ``book-zh``: the Chinese edition (``make book``
  exports the models while Sphinx builds the two editions: its time is less than the sum of these three);
* ``test-fast``: ``make test-fast``; ``unit-slow``: the unit tests marked slow; ``nbval``: every chapter
  once; ``browser``: the browser tests (needs the book). ``make test`` runs the last four at once, on two
  workers: their sum here is an upper bound of its pytest time.

Run:  python benchmarks/bench_build.py [--phases book-en,models] [--cold]   (or `make bench-build`).
Prints a table; asserts nothing. Never compare a wall time across machines or loads: compare the ratios.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = ROOT / ".venv" / "bin" / "python"
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "-p", "no:cacheprovider"]
CHAPTERS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "chapters").glob("*.ipynb"))
PHASES = {
    "venv": ["make", "venv"],
    "check": ["make", "check-notebooks"],
    "book-en": [str(ROOT / ".venv/bin/jupyter-book"), "build", ".", "--warningiserror", "--keep-going"],
    "models": [str(PY), "tools/export_site_models.py", "_build/site-models"],
    "book-zh": ["bash", "-c", f"{PY} tools/i18n.py check && {PY} tools/build_zh.py"],
    "test-fast": ["make", "test-fast"],
    "unit-slow": [str(PY), "-m", "pytest", "tests", "-m", "slow and not browser", "-n", "2", "-q", "-p", "no:cacheprovider"],
    "nbval": [str(PY), "-m", "pytest", "-n", "2", "--dist", "loadfile", "-q", *NBVAL, *CHAPTERS],
    "browser": [str(PY), "-m", "pytest", "tests", "-m", "browser", "-n", "2", "--dist", "loadfile", "-q",
                "-p", "no:cacheprovider"],
}
DEFAULT = [p for p in PHASES if p != "venv"]


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd, env) -> tuple:
    """(wall s, CPU s, exit code, load average before) of one command, run in the repository's root."""
    load = os.getloadavg()[0]
    cpu0, t0 = children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if proc.returncode:
        print(proc.stdout[-4000:], file=sys.stderr)
    return wall, cpu, proc.returncode, load


def reference(env) -> float:
    """Median wall time of a new Python importing torch and mha_lib (3 runs): the run's unit of time."""
    times = sorted(timed([str(PY), "-c", "import torch, mha_lib"], env)[0] for _ in range(3))
    return times[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", default=",".join(DEFAULT), help=f"comma-separated, of {', '.join(PHASES)}")
    parser.add_argument("--cold", action="store_true", help="export the models from an empty cache")
    parser.add_argument("--keep", action="store_true", help="with venv: keep the new .venv (the old one is removed)")
    args = parser.parse_args(argv)
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        parser.error(f"unknown phases {unknown}; known: {list(PHASES)}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0"}
    aside = None
    if "venv" in phases and (ROOT / ".venv").exists():
        aside = ROOT / ".venv.bench-aside"
        (ROOT / ".venv").rename(aside)
    rows = []
    try:
        for phase in phases:
            if phase == "models" and args.cold:
                shutil.rmtree(ROOT / "_build" / "models-cache", ignore_errors=True)
            rows.append((phase, *timed(PHASES[phase], env)))
            print(f"  {phase:10s} done in {rows[-1][1]:7.1f} s (exit {rows[-1][3]})", flush=True)
    finally:
        if aside is not None:
            if args.keep:
                shutil.rmtree(aside)
            else:
                shutil.rmtree(ROOT / ".venv", ignore_errors=True)
                aside.rename(ROOT / ".venv")
    unit = reference(env) if PY.exists() else float("nan")
    total_wall = sum(r[1] for r in rows)
    print(f"\nbench_build: {os.cpu_count()} cores; reference (import torch, mha_lib in a new process): {unit:.2f} s")
    print(f"{'phase':10s} {'wall s':>8s} {'CPU s':>8s} {'cores':>6s} {'x ref':>7s} {'share':>6s} {'load':>5s} exit")
    for phase, wall, cpu, code, load in rows:
        print(f"{phase:10s} {wall:8.1f} {cpu:8.1f} {cpu / wall:6.2f} {wall / unit:7.0f} "
              f"{wall / total_wall:6.1%} {load:5.1f} {code}")
    print(f"{'total':10s} {total_wall:8.1f} {sum(r[2] for r in rows):8.1f}")
    return max((r[3] for r in rows), default=0)


if __name__ == "__main__":
    sys.exit(main())
