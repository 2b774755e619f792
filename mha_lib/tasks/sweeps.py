"""Training sweeps shipped as JSON records under ``mha_lib/data/``: chapter 1's budget sweep
(:func:`budget_sweep`, checked field by field) and the other runs a chapter reads
(:func:`shipped_record`: one record per run in a ``runs`` list).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Union
from ..model.io import read_json


DATA_DIR = Path(__file__).resolve().parent.parent / "data"
BUDGET_SWEEP = DATA_DIR / "ch1_budget_sweep.json"
#: The shipped run records :func:`shipped_record` reads, each with the script that writes it.
RECORDS: Dict[str, str] = {
    "ch1_fresh_heads": "scripts/ch1_fresh_heads.py",
    "ch2_fresh_seeds": "scripts/ch2_fresh_seeds.py",
    "ch4_fresh_seeds": "scripts/ch4_fresh_seeds.py",
    "ch7_budget_sweep": "scripts/train_ch7_budget.py",
    "ch8_ensemble": "scripts/ch8_ensemble.py",
    "ch9_fresh_seeds": "scripts/ch9_fresh_seeds.py",
}
_SWEEP_KEYS = {"heads": int, "seed": int, "steps": int, "lr": float, "accuracy": float, "solved": bool}


def budget_sweep(path: Union[str, Path, None] = None) -> List[dict]:
    """Chapter 1's training-budget sweep: one record per run (``scripts/train_ch1_budget.py``).

    Each record has ``heads``, ``seed``, ``steps`` (the budget, with the cosine schedule ending
    there), ``lr``, ``accuracy`` (:func:`evaluate`, 2048 fixed sequences), ``solved``
    (accuracy >= the file's ``solved_threshold``), ``steps_to_solve`` (first learning-curve point
    at >= the threshold, or None) and ``cpu_seconds``.

    Args:
        path: the JSON file (default: the one shipped in ``mha_lib/data``).

    Returns:
        The list of records (dicts).

    Raises:
        ValueError: the file is not valid JSON, or a record lacks a key, has a value of the wrong
            type, or is listed twice (same heads, seed, steps, lr).
    """
    path = BUDGET_SWEEP if path is None else Path(path)
    data = read_json(path)
    runs = data.get("runs")
    if not isinstance(runs, list):
        raise ValueError(f"{path}: expected a 'runs' list")
    seen = set()
    threshold = data.get("solved_threshold", 0.99)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise ValueError(f"{path}: solved_threshold must be a number in (0, 1], got {threshold!r}")
    for r in runs:
        for key, kind in _SWEEP_KEYS.items():
            value = r.get(key) if isinstance(r, dict) else None
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ValueError(f"{path}: run {r!r} has {key}={value!r}, expected {kind.__name__}")
        if not (math.isfinite(r["accuracy"]) and 0.0 <= r["accuracy"] <= 1.0 and r["heads"] >= 1 and r["seed"] >= 0
                and r["steps"] >= 1 and math.isfinite(r["lr"]) and r["lr"] > 0):
            raise ValueError(f"{path}: run {r!r} has a value out of range")
        solved_at = r.get("steps_to_solve")
        if solved_at is not None and (not isinstance(solved_at, int) or isinstance(solved_at, bool)
                                      or not 1 <= solved_at <= r["steps"]):
            raise ValueError(f"{path}: run {r!r} has steps_to_solve={solved_at!r}")
        if r["solved"] != (r["accuracy"] >= threshold):
            raise ValueError(f"{path}: run {r!r}: 'solved' disagrees with its accuracy")
        key = (r["heads"], r["seed"], r["steps"], r["lr"])
        if key in seen:
            raise ValueError(f"{path}: run {key} is listed twice")
        seen.add(key)
    return runs


def shipped_record(name: str, path: Union[str, Path, None] = None) -> dict:
    """One of the shipped run records of :data:`RECORDS` (``mha_lib/data/<name>.json``).

    Chapter 1's fresh-seed head shares (``ch1_fresh_heads``: heads, seed, fresh, accuracy, shares
    as H rows of [previous, marked], cpu_seconds), chapter 2's single-pattern models on fresh seeds
    (``ch2_fresh_seeds``: family, seed, fresh, accuracy, cpu_seconds), chapter 4's toy-model
    analyses on fresh seeds (``ch4_fresh_seeds``: seed, accuracy_full, single-head ablation
    counts, pruning curves, gates, fine-tuning), chapter 7's budget sweep
    (``ch7_budget_sweep``: heads, seed, steps, accuracy, cpu_seconds) and chapter 8's ensembles
    (``ch8_ensemble``: kind "ensemble" with seed and ensemble, the ensemble's index, member_seeds,
    member_accuracy, accuracy, params, joint_params, cpu_seconds; kind "joint", a ``ch1-h4`` model on a
    fresh seed: seed, accuracy, params, cpu_seconds) and chapter 9's 2,000-step families on fresh seeds
    (``ch9_fresh_seeds``: family, data, seed, fresh, steps, hits and count per copy-distance bin,
    accuracy, curve, cpu_seconds); the script named in
    :data:`RECORDS` writes it and its docstring says what each field means. Accuracies are
    fractions in [0, 1]; CPU times are in seconds.

    Args:
        name: a key of :data:`RECORDS`.
        path: read this file instead of the shipped one (same layout).

    Returns:
        the parsed JSON object; its ``runs`` is a list of dicts, each with an int ``seed`` >= 0 and a
        finite ``accuracy`` (``accuracy_full`` in ``ch4_fresh_seeds``) in [0, 1].

    Raises:
        ValueError: an unknown name, a file that is not valid JSON (``mha_lib.model.read_json``),
            or a ``runs`` entry that is not such a dict.
    """
    if not isinstance(name, str) or name not in RECORDS:
        raise ValueError(f"unknown record {name!r}; the shipped records are {sorted(RECORDS)}")
    path = DATA_DIR / f"{name}.json" if path is None else Path(path)
    data = read_json(path)
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list) or not runs:
        raise ValueError(f"{path}: expected a non-empty 'runs' list")
    for r in runs:
        seed = r.get("seed") if isinstance(r, dict) else None
        acc = r.get("accuracy", r.get("accuracy_full")) if isinstance(r, dict) else None
        if (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0 or isinstance(acc, bool)
                or not isinstance(acc, (int, float)) or not math.isfinite(acc) or not 0.0 <= acc <= 1.0):
            raise ValueError(f"{path}: run {r!r} needs an int seed >= 0 and an accuracy in [0, 1]")
    return data
