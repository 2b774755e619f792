"""Memory and the machine: peak memory (bytes, CUDA or CPU), matmul FLOP/s, memory bandwidth
(bytes/s) and ``environment_string`` (print it next to every timing).
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import sys
import tempfile
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from .. import checks
from ..cost import DType, _to_dtype
from .timing import _device_of, _sync, measure_time


def measure_peak_memory(fn: Callable[[], object], *, device=None) -> int:
    """Peak bytes of tensor memory allocated while ``fn()`` runs, above what was live before.

    * CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus the
      bytes allocated before the call.
    * CPU: ``torch.profiler`` with ``profile_memory=True``; the allocation and free events are
      replayed in time order and the running total's maximum is returned. (Python's
      ``tracemalloc`` sees none of torch's tensor memory, so it cannot be used.) Tensors freed
      inside ``fn`` count while they were alive; the returned tensor counts too.

    The profiler adds a little time, so do not time and measure memory in the same call.

    Args:
        fn: a callable with no arguments.
        device: where ``fn`` allocates (``torch.device`` or str): ``cuda`` or ``cpu``; default CPU.

    Returns:
        Bytes (int, >= 0).

    Raises:
        ValueError: a device other than CPU or CUDA (MPS has no peak-memory counter).
    """
    dev = _device_of(device)
    if dev.type == "cuda":
        _sync(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        fn()
        _sync(dev)
        return max(0, torch.cuda.max_memory_allocated(dev) - before)
    if dev.type != "cpu":
        raise ValueError(f"measure_peak_memory supports cpu and cuda devices, got {dev}")
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():  # kineto prints "USDT: profiler_start" from C++ on every start/stop
        prof.start()
    try:
        fn()
    finally:
        with _quiet_stderr():
            prof.stop()
    return _cpu_peak_from_profile(prof)


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2, where C++ writes go; only around profiler start/stop.

    Always fd 2, not ``sys.stderr.fileno()``: in a Jupyter kernel the latter is a saved copy of
    the terminal's stderr, while the C++ library writes to fd 2, which the kernel forwards into
    the notebook.
    """
    fd = 2
    try:
        sys.stderr.flush()
        saved = os.dup(fd)
    except (OSError, ValueError):
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def _cpu_peak_from_profile(prof) -> int:
    """Replay the profiler's CPU memory events (+bytes on alloc, -bytes on free) in time order."""
    events = None
    try:  # the direct route: kineto's raw events carry signed byte counts and timestamps
        raw = prof.profiler.kineto_results.events()
        events = [(e.start_ns(), e.nbytes()) for e in raw
                  if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
    except (AttributeError, RuntimeError):
        pass
    if events is None:  # fallback through the public chrome-trace export
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
        finally:
            os.remove(path)
        events = [(e["ts"], e["args"]["Bytes"]) for e in trace.get("traceEvents", [])
                  if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0]
    running = peak = 0
    for _, nbytes in sorted(events, key=lambda t: t[0]):
        running += nbytes
        peak = max(peak, running)
    return int(peak)


def measure_matmul_peak(*, device=None, dtype: DType = torch.float32, sizes=None, repeats: int = 3,
                        warmup: int = 1) -> float:
    """The machine's best measured matmul throughput in FLOP/s: the "physical limit" for attention.

    Times square (n, n) @ (n, n) products (2*n**3 FLOPs each) for each n in ``sizes`` and returns
    the highest median throughput. Large square GEMMs are the friendliest work a BLAS library
    gets, so this is a practical ceiling, not the vendor's datasheet peak. On CUDA with fp32 the
    result depends on ``torch.backends.cuda.matmul.allow_tf32``.

    Args:
        device: ``torch.device`` or str; default CPU.
        dtype: element type (``torch.dtype`` or a name); default fp32.
        sizes: matrix sizes n to try; default (512, 1024, 2048) on CPU, (4096, 8192) elsewhere.
        repeats, warmup: as in ``timing_samples``.

    Returns:
        FLOP/s (float, > 0).

    Raises:
        ValueError: an empty ``sizes`` or a non-positive size; bad repeats/warmup.
    """
    dev = _device_of(device)
    dt = _to_dtype(dtype)
    if sizes is None:
        sizes = (512, 1024, 2048) if dev.type == "cpu" else (4096, 8192)
    sizes = [checks.int_at_least(n, "size", 1) for n in sizes]
    if not sizes:
        raise ValueError("sizes must name at least one matrix size")
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n, device=dev, dtype=dt)
        b = torch.randn(n, n, device=dev, dtype=dt)
        with torch.inference_mode():
            t = measure_time(functools.partial(torch.mm, a, b), repeats=repeats, warmup=warmup, device=dev)
        best = max(best, 2 * n**3 / t)
        del a, b
    return best


def measure_memory_bandwidth(*, device=None, nbytes: int = 256 * 2**20, repeats: int = 3,
                             warmup: int = 1) -> float:
    """The machine's measured memory bandwidth in bytes/s: the other "physical limit".

    Times ``dst.copy_(src)`` of two ``nbytes`` buffers (much larger than any cache) and counts
    2*nbytes per copy (one read, one write). An operation that moves N bytes cannot take less
    than N / bandwidth seconds, however few FLOPs it does; with ``measure_matmul_peak`` this gives
    the two ceilings of a roofline model.

    Args:
        device: ``torch.device`` or str; default CPU.
        nbytes: size of each buffer in bytes (> 0); default 256 MiB (512 MiB allocated in all).
        repeats, warmup: as in ``timing_samples``.

    Returns:
        Bytes per second (float, > 0).

    Raises:
        ValueError: non-positive ``nbytes``; bad repeats/warmup.
    """
    dev = _device_of(device)
    n = checks.int_at_least(nbytes, "nbytes", 1)
    src = torch.ones(max(1, n // 4), device=dev)  # fp32
    dst = torch.empty_like(src)
    with torch.inference_mode():
        t = measure_time(lambda: dst.copy_(src), repeats=repeats, warmup=warmup, device=dev)
    return 2 * src.numel() * src.element_size() / t


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def environment_string(device=None) -> str:
    """One line describing where a timing was taken: torch version, device, thread count.

    Example: ``'torch 2.13.0+cpu | cpu: Intel(R) Xeon(R) Processor | 2 threads'``. Print it
    next to every measured time: the same code gives very different numbers elsewhere.

    Args:
        device: ``torch.device`` or str; default CPU.
    """
    dev = _device_of(device)
    if dev.type == "cuda":
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        where = f"cuda:{idx}: {torch.cuda.get_device_name(idx)}"
    else:
        where = f"{dev.type}: {_cpu_name()}" if dev.type == "cpu" else str(dev)
    n = torch.get_num_threads()
    return f"torch {torch.__version__} | {where} | {n} thread{'s' if n != 1 else ''}"
