"""Measuring attention on a machine: time, peak memory, matmul FLOP/s, memory bandwidth.

The formulas of :mod:`mha_lib.cost` say what attention should cost; this module measures what
it does cost, so the two can be compared. Read top to bottom:

1. Timing: ``timing_samples`` (seconds per call, after warm-up, synchronising CUDA/MPS),
   ``measure_time`` (their median) and ``round_robin_times`` / ``compare_times`` (several
   candidates timed in turn, so a shared machine's noise hits them alike): the ONE timing loop
   of the library, the benchmarks and the chapters.
2. Memory and machine: ``measure_peak_memory`` (bytes, CUDA or CPU), ``measure_matmul_peak``
   (FLOP/s), ``measure_memory_bandwidth`` (bytes/s), ``environment_string`` (print it next to
   every timing).
3. Attention benchmarks built on them: ``benchmark_attention``, ``sweep_heads``,
   ``sweep_decode``, ``measure_decode_step``.

Units: seconds, bytes, FLOPs (2 per multiply-add, as in :mod:`mha_lib.cost`). Compare times as
ratios measured in the same run; never assert a wall-clock time in a test.
"""
from __future__ import annotations

import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import torch

from . import checks
from .cost import (DType, _check_distinct, _check_heads, _to_dtype, attention_flops, attention_map_bytes,
                   kv_cache_bytes)

__all__ = ['timing_samples', 'measure_time', 'round_robin_times', 'compare_times', 'measure_peak_memory', 'measure_matmul_peak', 'measure_memory_bandwidth', 'environment_string', 'AttentionBenchmark', 'benchmark_attention', 'sweep_heads', 'DecodeBenchmark', 'sweep_decode', 'measure_decode_step']


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
        repeats: samples (> 0). warmup: untimed calls first (>= 0; lets allocators, caches and
            lazy initialisation settle). number: calls per sample (> 0).
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
        repeats: rounds (> 0). warmup: untimed rounds first (>= 0).
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
    from torch.profiler import ProfilerActivity, profile

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
        import json

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
            t = measure_time(lambda: torch.mm(a, b), repeats=repeats, warmup=warmup, device=dev)
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


@dataclass(frozen=True)
class AttentionBenchmark:
    """One measured forward pass of ``MultiHeadAttention`` (see ``benchmark_attention``).

    Attributes:
        num_heads, batch, seq_len, d_model: the shape. need_weights: which path.
        seconds: median seconds per forward. peak_bytes: peak tensor bytes during one forward
            (None if not measured). flops: matmul FLOPs of one forward (``attention_flops``).
        flop_per_s: flops / seconds. map_bytes: bytes of one (B, H, L, L) map.
    """

    num_heads: int
    batch: int
    seq_len: int
    d_model: int
    need_weights: bool
    seconds: float
    peak_bytes: Optional[int]
    flops: int
    flop_per_s: float
    map_bytes: int


def sweep_heads(*, d_model: int, num_heads: Sequence[int], batch: int, seq_len: int,
                need_weights: Sequence[bool] = (True, False), num_kv_heads: Optional[int] = None,
                device=None, dtype: DType = torch.float32, repeats: int = 5, warmup: int = 1,
                memory: bool = True, seed: int = 0) -> List[AttentionBenchmark]:
    """Time (and measure the peak memory of) self-attention forward passes for several H and paths.

    For every H in ``num_heads`` and every path in ``need_weights`` a
    ``MultiHeadAttention(d_model, H, num_kv_heads=...)`` is built in eval mode and run under
    ``torch.inference_mode()`` on the same random (batch, seq_len, d_model) input.
    ``need_weights=True`` takes the explicit path, which materialises the (B, H, L, L) weights;
    ``False`` takes ``F.scaled_dot_product_attention`` (a fused kernel that builds no map on CPU
    and CUDA). All configurations are timed round-robin by ``compare_times``, so the noise of a
    shared machine hits them alike and their ratios are meaningful.

    Args:
        d_model: model width; every H must divide it.
        num_heads: the H values to sweep.
        batch, seq_len: B and L (= S), each > 0.
        need_weights: the paths to time, ``True`` (explicit) and/or ``False`` (SDPA).
        num_kv_heads: H_kv for every configuration (must divide each H); default MHA.
        device, dtype: where and in what precision; default CPU, fp32.
        repeats, warmup: as in ``compare_times``.
        memory: also measure each configuration's peak memory (``measure_peak_memory``); the
            profiled call doubles as the first warm-up.
        seed: for the weights and the input.

    Returns:
        A list of ``AttentionBenchmark``, H-major, in the order given.

    Raises:
        ValueError: bad sizes (as ``attention_flops``), an empty sweep, a value listed twice
            (each configuration is timed once), bad repeats/warmup.
    """
    from .attention import MultiHeadAttention

    heads = list(num_heads)
    paths = [bool(p) for p in need_weights]
    if not heads or not paths:
        raise ValueError(f"nothing to sweep: num_heads={heads}, need_weights={paths}")
    _check_distinct("num_heads", heads)
    _check_distinct("need_weights", paths)
    for H in heads:
        _check_heads(d_model, H, num_kv_heads)
    checks.int_at_least(batch, "batch", 1)
    checks.int_at_least(seq_len, "seq_len", 1)
    checks.int_at_least(repeats, "repeats", 1)
    checks.int_at_least(warmup, "warmup", 0)
    dev, dt = _device_of(device), _to_dtype(dtype)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, seq_len, d_model, generator=gen).to(device=dev, dtype=dt)

    fns: Dict[tuple, Callable[[], object]] = {}
    for H in heads:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            mha = MultiHeadAttention(d_model, H, num_kv_heads=num_kv_heads).to(device=dev, dtype=dt).eval()
        for nw in paths:
            fns[(H, nw)] = (lambda m=mha, nw=nw: m(x, need_weights=nw))

    peaks: Dict[tuple, Optional[int]] = {}
    with torch.inference_mode():
        for key, fn in fns.items():
            # The profiled call doubles as a warm-up: profiling slows a call a little, which
            # does not matter for a call whose time is thrown away.
            peaks[key] = measure_peak_memory(fn, device=dev) if memory else None
        seconds = compare_times(fns, repeats=repeats, warmup=max(0, warmup - 1) if memory else warmup,
                                device=dev)

    results = []
    for (H, nw), t in seconds.items():
        flops = attention_flops(batch, seq_len, d_model=d_model, num_heads=H,
                                num_kv_heads=num_kv_heads).total
        results.append(AttentionBenchmark(
            num_heads=H, batch=batch, seq_len=seq_len, d_model=d_model, need_weights=nw,
            seconds=t, peak_bytes=peaks[(H, nw)], flops=flops, flop_per_s=flops / t,
            map_bytes=attention_map_bytes(batch, seq_len, num_heads=H, dtype=dt),
        ))
    return results


def benchmark_attention(*, d_model: int, num_heads: int, batch: int, seq_len: int,
                        need_weights: bool, num_kv_heads: Optional[int] = None, device=None,
                        dtype: DType = torch.float32, repeats: int = 5, warmup: int = 1,
                        memory: bool = True, seed: int = 0) -> AttentionBenchmark:
    """One configuration of ``sweep_heads``: time (and measure the peak memory of) one forward pass.

    Args and Raises: as ``sweep_heads``, with a single ``num_heads`` and ``need_weights``.

    Returns:
        ``AttentionBenchmark`` (seconds, bytes, FLOPs, FLOP/s).
    """
    return sweep_heads(d_model=d_model, num_heads=[num_heads], batch=batch, seq_len=seq_len,
                       need_weights=[need_weights], num_kv_heads=num_kv_heads, device=device,
                       dtype=dtype, repeats=repeats, warmup=warmup, memory=memory, seed=seed)[0]


@dataclass(frozen=True)
class DecodeBenchmark:
    """One measured KV-cache decode step (see ``sweep_decode``).

    Attributes:
        num_heads, num_kv_heads, context_len, batch, d_model: the shape.
        need_weights: which path (True: explicit, False: SDPA).
        seconds_per_token: median seconds for one step (one new token per sequence).
        cache_bytes: bytes of the (k, v) the layer returned (measured with ``numel``).
        formula_bytes: ``kv_cache_bytes`` for one layer at context_len + 1 positions.
        flops: matmul FLOPs of the step (``attention_flops`` with L=1, kv_proj_len=1).
    """

    num_heads: int
    num_kv_heads: int
    context_len: int
    batch: int
    d_model: int
    need_weights: bool
    seconds_per_token: float
    cache_bytes: int
    formula_bytes: int
    flops: int


def sweep_decode(*, d_model: int, num_heads: int, num_kv_heads: Sequence[int], context_len: int,
                 batch: int = 1, need_weights: Sequence[bool] = (False,), device=None,
                 dtype: DType = torch.float32, repeats: int = 7, warmup: int = 2,
                 seed: int = 0) -> List[DecodeBenchmark]:
    """Time one autoregressive decode step of one attention layer with a KV cache, for several H_kv.

    For each H_kv (H_kv = H: MHA; 1: MQA, Shazeer 2019; otherwise GQA, Ainslie et al. 2023) a
    cache of ``context_len`` positions, (B, H_kv, context_len, hd) for K and for V, is handed to
    ``MultiHeadAttention(..., past_kv=cache, use_cache=True)`` with one new token per sequence.
    The step is what mha_lib's cache does: project the new token, write its K and V into the
    preallocated :class:`~mha_lib.attention.KVCache` (in place: no copy of the past) and attend
    to context_len + 1 keys. Before every step the cache is cropped back to ``context_len``, so
    every repeat sees the same context. No causal mask: one new query may see every cached key,
    so it would block nothing.

    The cache holds seeded random values instead of the projections of a real prefix: the values
    do not change the time, and building a 4096-token prefix would cost far more than the steps.
    All configurations are timed round-robin (``compare_times``).

    Args:
        d_model, num_heads: the layer (H must divide d_model).
        num_kv_heads: the H_kv values to compare (each must divide H).
        context_len: cached positions before the step (> 0).
        batch: sequences decoded together (> 0).
        need_weights: the paths to time: False (SDPA, which reads shared K/V heads in place with
            ``enable_gqa``) and/or True (explicit; each group's queries share their K/V head, no copy).
        device, dtype: where and in what precision; default CPU, fp32.
        repeats, warmup: as in ``compare_times``.
        seed: for the weights, the cache and the token.

    Returns:
        A list of ``DecodeBenchmark``, H_kv-major, in the order given.

    Raises:
        ValueError: bad sizes (as ``attention_flops``), an empty sweep, a value listed twice
            (each configuration is timed once), bad repeats/warmup.
    """
    from .attention import KVCache, MultiHeadAttention

    kvs, paths = list(num_kv_heads), [bool(p) for p in need_weights]
    if not kvs or not paths:
        raise ValueError(f"nothing to sweep: num_kv_heads={kvs}, need_weights={paths}")
    _check_distinct("num_kv_heads", kvs)
    _check_distinct("need_weights", paths)
    for H_kv in kvs:
        _, H, _, hd = _check_heads(d_model, num_heads, H_kv)
    checks.int_at_least(context_len, "context_len", 1)
    checks.int_at_least(batch, "batch", 1)
    dev, dt = _device_of(device), _to_dtype(dtype)
    gen = torch.Generator().manual_seed(seed)
    token = torch.randn(batch, 1, d_model, generator=gen).to(device=dev, dtype=dt)
    fns: Dict[tuple, Callable[[], object]] = {}
    for H_kv in kvs:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            mha = MultiHeadAttention(d_model, H, num_kv_heads=H_kv).to(device=dev, dtype=dt).eval()
        k, v = (torch.randn(batch, H_kv, context_len, hd, generator=gen).to(device=dev, dtype=dt)
                for _ in range(2))  # (B, H_kv, context_len, hd)
        for nw in paths:
            cache = KVCache(k, v).copy()  # one cache per configuration, room to grow

            def step(m=mha, c=cache, nw=nw):
                return m(token, past_kv=c.crop(context_len), use_cache=True, need_weights=nw)

            fns[(H_kv, nw)] = step
    with torch.inference_mode():
        cache = {}
        for key, fn in fns.items():
            _, _, present = fn()
            cache[key] = sum(t.numel() * t.element_size() for t in present)
            del present
        seconds = compare_times(fns, repeats=repeats, warmup=max(0, warmup - 1), device=dev)
    return [
        DecodeBenchmark(
            num_heads=H, num_kv_heads=H_kv, context_len=context_len, batch=batch, d_model=d_model,
            need_weights=nw, seconds_per_token=t, cache_bytes=cache[(H_kv, nw)],
            formula_bytes=kv_cache_bytes(num_layers=1, num_kv_heads=H_kv, head_dim=hd,
                                         seq_len=context_len + 1, batch=batch, dtype=dt),
            flops=attention_flops(batch, 1, context_len + 1, d_model=d_model, num_heads=H,
                                  num_kv_heads=H_kv, kv_proj_len=1).total,
        )
        for (H_kv, nw), t in seconds.items()
    ]


def measure_decode_step(*, d_model: int, num_heads: int, num_kv_heads: Optional[int] = None,
                        context_len: int, batch: int = 1, need_weights: bool = False, device=None,
                        dtype: DType = torch.float32, repeats: int = 7, warmup: int = 2,
                        seed: int = 0) -> DecodeBenchmark:
    """One configuration of ``sweep_decode`` (H_kv defaults to H: MHA).

    Args, Returns and Raises: as ``sweep_decode``, with a single ``num_kv_heads`` and path.
    """
    H_kv = num_heads if num_kv_heads is None else num_kv_heads
    return sweep_decode(d_model=d_model, num_heads=num_heads, num_kv_heads=[H_kv],
                        context_len=context_len, batch=batch, need_weights=[need_weights],
                        device=device, dtype=dtype, repeats=repeats, warmup=warmup, seed=seed)[0]
