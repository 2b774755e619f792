"""tools/chromium_trace.py on hand-made traces: what counts as one stretch of the page's main thread."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from chromium_trace import main_thread_tasks  # noqa: E402

MAIN, OTHER = (1, 10), (1, 11)


def _trace(*slices, names=((MAIN, "CrRendererMain"), (OTHER, "DedicatedWorker thread"))):
    events = [{"ph": "M", "name": "thread_name", "pid": p, "tid": t, "args": {"name": n}} for (p, t), n in names]
    for (pid, tid), name, ts, dur, tdur in slices:
        events.append({"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "tdur": tdur})
    return json.dumps({"traceEvents": events})


def test_outermost_slices_of_the_main_thread_only_with_their_microtasks():
    trace = _trace(
        (MAIN, "ThreadControllerImpl::RunTask", 0, 30_000, 20_000),
        (MAIN, "ThreadControllerImpl::RunTask", 1_000, 5_000, 5_000),  # nested: inside the first
        (MAIN, "BlinkScheduler_PerformMicrotaskCheckpoint", 30_050, 10_000, 9_000),  # right after it
        (MAIN, "ThreadControllerImpl::RunTask", 40_050, 4_000, 4_000),  # back to back: a task of its own
        (MAIN, "BlinkScheduler_PerformMicrotaskCheckpoint", 90_000, 2_000, 2_000),  # after a gap: alone
        (OTHER, "ThreadControllerImpl::RunTask", 0, 900_000, 900_000),  # the worker may work for long
    )
    assert main_thread_tasks(trace) == [29.0, 4.0, 2.0]
    assert main_thread_tasks(json.dumps(json.loads(trace)["traceEvents"])) == [29.0, 4.0, 2.0]  # a bare event list


def test_a_trace_without_the_page_thread_is_refused():
    with pytest.raises(ValueError, match="CrRendererMain"):
        main_thread_tasks(_trace(names=((OTHER, "DedicatedWorker thread"),)))
