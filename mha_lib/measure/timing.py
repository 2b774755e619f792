"""The ONE timing loop of the library, the benchmarks and the chapters.

``timing_samples`` (seconds per call, after warm-up, synchronising CUDA/MPS), ``measure_time``
(their median) and ``round_robin_times`` / ``compare_times`` (several candidates timed in turn, so
a shared machine's noise hits them alike). Compare times as ratios measured in the same run;
never assert a wall-clock time in a test.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Mapping

import torch

from .. import checks


def _device_of(device) -> torch.device:
    if device is None:
        return torch.device("cpu")
    return torch.device(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def timing_samples(fn: Callable[[], object], *, repeats: int = 7, warmup: int = 2, number: int = 1,
                   device=None) -> List[float]:
    """Wall-clock seconds per call of ``fn()``, one sample per repeat, after ``warmup`` calls.

    Each sample times ``number`` back-to-back calls with ``time.perf_counter`` and divides by
    ``number``; on CUDA/MPS the device is synchronised before and after, so queued kernels are
    counted. ``fn`` runs with whatever grad mode the caller set (wrap it in
    ``torch.inference_mode()`` to time inference).

    Args:
        fn: a callable with no arguments.
        repeats: samples (> 0).
        warmup: untimed calls first (>= 0; lets allocators, caches and lazy initialisation settle).
        number: calls per sample (> 0).
        device: the device ``fn`` runs on (``torch.device`` or str); default CPU.

    Returns:
        A list of ``repeats`` floats, seconds per call.

    Raises:
        ValueError: repeats or number < 1, warmup < 0.
    """
    repeats = checks.int_at_least(repeats, "repeats", 1)
    warmup = checks.int_at_least(warmup, "warmup", 0)
    number = checks.int_at_least(number, "number", 1)
    for _ in range(warmup):
        fn()

    def calls():
        for _ in range(number):
            fn()

    samples = round_robin_times({"fn": calls}, repeats=repeats, warmup=0, device=device)["fn"]["wall"]
    return [t / number for t in samples]


def measure_time(fn: Callable[[], object], *, repeats: int = 7, warmup: int = 2, number: int = 1,
                 device=None) -> float:
    """Median wall-clock seconds per call of ``fn()`` (see ``timing_samples`` for the arguments).

    The median of several repeats after warm-up resists the outliers of a shared machine better
    than the mean. Print ``environment_string(device)`` next to any number this returns, and
    compare times as ratios measured in the same run.

    Returns:
        Seconds (float, > 0).

    Raises:
        ValueError: as ``timing_samples``.
    """
    return statistics.median(timing_samples(fn, repeats=repeats, warmup=warmup, number=number,
                                            device=device))


def round_robin_times(fns: Mapping[str, Callable[[], object]], *, repeats: int = 5, warmup: int = 1,
                      min_seconds: float = 0.0, max_rounds: int = 500,
                      device=None) -> Dict[str, Dict[str, List[float]]]:
    """Time several callables in turn (A B C A B C ...), so that a shared machine's drifting load
    hits all of them alike; the library's one timing loop for comparisons.

    Every round times each callable once: wall-clock seconds (``time.perf_counter``, with the
    device synchronised before and after on CUDA/MPS) and this process's CPU seconds
    (``time.process_time``, all its threads; it does not count the time other jobs hold the
    cores, so it stays meaningful on a busy machine). At least ``repeats`` rounds, and more, up
    to ``max_rounds``, until every callable has run ``min_seconds`` of wall time in total.

    Args:
        fns: name -> callable with no arguments.
        repeats: rounds (> 0).
        warmup: untimed rounds first (>= 0).
        min_seconds: total wall time each callable must reach (>= 0).
        max_rounds: the most rounds (>= repeats).
        device: where the callables run (``torch.device`` or str); default CPU.

    Returns:
        name -> ``{"wall": [seconds per round], "cpu": [seconds per round]}``, in the order of
        ``fns``.

    Raises:
        ValueError: an empty ``fns``, or a bad count or duration.
    """
    if not fns:
        raise ValueError("round_robin_times needs at least one callable")
    repeats = checks.int_at_least(repeats, "repeats", 1)
    warmup = checks.int_at_least(warmup, "warmup", 0)
    max_rounds = checks.int_at_least(max_rounds, "max_rounds", repeats)
    if checks.finite_real(min_seconds, "min_seconds") < 0:
        raise ValueError(f"min_seconds must be >= 0, got {min_seconds!r}")
    dev = _device_of(device)
    samples = {name: {"wall": [], "cpu": []} for name in fns}
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    rounds = 0
    while rounds < repeats or (rounds < max_rounds and min(sum(v["wall"]) for v in samples.values()) < min_seconds):
        for name, fn in fns.items():
            _sync(dev)
            start, cpu_start = time.perf_counter(), time.process_time()
            fn()
            _sync(dev)
            samples[name]["cpu"].append(time.process_time() - cpu_start)
            samples[name]["wall"].append(time.perf_counter() - start)
        rounds += 1
    return samples


def compare_times(fns: Mapping[str, Callable[[], object]], *, repeats: int = 5, warmup: int = 1,
                  device=None) -> Dict[str, float]:
    """Median wall-clock seconds per call of several callables, timed round-robin
    (:func:`round_robin_times`) so they share the noise; ratios of the medians are much
    steadier than absolute times.

    Args:
        fns: name -> callable with no arguments.
        repeats: rounds (> 0); each callable is timed once per round.
        warmup: untimed rounds first (>= 0).
        device: where the callables run (synchronised around each call on CUDA/MPS).

    Returns:
        name -> median seconds per call (floats, > 0), in the order of ``fns``.

    Raises:
        ValueError: an empty ``fns``, repeats < 1, warmup < 0.
    """
    samples = round_robin_times(fns, repeats=repeats, warmup=warmup, device=device)
    return {name: statistics.median(s["wall"]) for name, s in samples.items()}
