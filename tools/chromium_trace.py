"""How long the page's main thread works without a break, from a Chromium trace (issue 29).

Used by tests/browser/test_live_reader.py (the 50 ms bound) and benchmarks/bench_live.py (the
longest task per view). Record with Playwright: ``browser.start_tracing(page=page,
categories=["toplevel"])`` ... ``trace = browser.stop_tracing()``.

A ``longtask`` PerformanceObserver in the page measures wall time, which on a machine shared with
other processes includes the time the operating system gave them; the trace's thread time
(``tdur``) is the CPU time of the page's own work.
"""
from __future__ import annotations

import json

MICROTASKS = "BlinkScheduler_PerformMicrotaskCheckpoint"


def main_thread_tasks(trace: bytes | str) -> list[float]:
    """CPU milliseconds of every stretch of work of the page's main thread (``CrRendererMain``).

    A stretch is an outermost slice of that thread -- a task, ``ThreadControllerImpl::RunTask`` --
    together with the microtask checkpoint that runs its promise callbacks right after it (the page
    cannot answer input in between).

    Args:
        trace: the JSON of a Chromium trace with the ``toplevel`` category (bytes or str).

    Returns:
        the stretches' thread times in ms (floats), largest first.

    Raises:
        ValueError: the trace has no renderer main thread.
    """
    events = json.loads(trace)
    events = events["traceEvents"] if isinstance(events, dict) else events
    main = {(e["pid"], e["tid"]) for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name" and e["args"].get("name") == "CrRendererMain"}
    if not main:
        raise ValueError("the trace has no renderer main thread (CrRendererMain): was a page traced?")
    slices = sorted((e["ts"], e["dur"], e.get("tdur", 0), e["name"]) for e in events
                    if e.get("ph") == "X" and (e["pid"], e["tid"]) in main and "dur" in e)
    runs: list[float] = []
    end = -1.0
    for ts, dur, tdur, name in slices:
        if ts < end:  # inside the slice before
            continue
        if runs and name == MICROTASKS and ts - end < 100:  # microseconds: right after its task
            runs[-1] += tdur
        else:
            runs.append(tdur)
        end = ts + dur
    return sorted((t / 1000 for t in runs), reverse=True)
