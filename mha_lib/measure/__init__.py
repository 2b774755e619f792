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

The files: ``timing.py`` (1), ``machine.py`` (2), ``benchmarks.py`` (3, and chapter 4's
``measure_pruning_speedup``, which :mod:`mha_lib.pruning` re-exports).

Units: seconds, bytes, FLOPs (2 per multiply-add, as in :mod:`mha_lib.cost`). Compare times as
ratios measured in the same run; never assert a wall-clock time in a test.
"""
from __future__ import annotations

from .benchmarks import (AttentionBenchmark, DecodeBenchmark, benchmark_attention, measure_decode_step,
                         measure_pruning_speedup, sweep_decode, sweep_heads)
from .machine import environment_string, measure_matmul_peak, measure_memory_bandwidth, measure_peak_memory
from .timing import compare_times, measure_time, round_robin_times, timing_samples

__all__ = ['timing_samples', 'measure_time', 'round_robin_times', 'compare_times', 'measure_peak_memory',
           'measure_matmul_peak', 'measure_memory_bandwidth', 'environment_string', 'AttentionBenchmark',
           'benchmark_attention', 'sweep_heads', 'DecodeBenchmark', 'sweep_decode', 'measure_decode_step',
           'measure_pruning_speedup']
