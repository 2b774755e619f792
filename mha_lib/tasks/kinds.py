"""Every task kind by name: :func:`task_from_dict` rebuilds a task from its ``to_dict()``.

A new task is a class with ``kind``, ``num_classes``, ``sample``, ``dataset`` and ``to_dict``
(optionally ``curve_scores``), registered in ``_TASK_KINDS`` here.
"""
from __future__ import annotations

from typing import Mapping

from .digits import DigitsTask
from .induction import InductionTask
from .prev_marked import PrevMarkedTask
from .translation import TranslationTask


_TASK_KINDS = {PrevMarkedTask.kind: PrevMarkedTask, InductionTask.kind: InductionTask,
               TranslationTask.kind: TranslationTask, DigitsTask.kind: DigitsTask}


def task_from_dict(d: Mapping):
    """Rebuild a task from its ``to_dict()``: a :class:`PrevMarkedTask` or an :class:`InductionTask`.

    Raises:
        ValueError: on an unknown ``kind`` (listing the known ones) or a bad field.
    """
    d = dict(d)
    kind = d.pop("kind", None)
    if kind not in _TASK_KINDS:
        raise ValueError(f"unknown task kind {kind!r}; known: {sorted(_TASK_KINDS)}")
    try:
        return _TASK_KINDS[kind](**d)
    except TypeError as err:
        raise ValueError(f"task {kind!r}: {err}") from None
