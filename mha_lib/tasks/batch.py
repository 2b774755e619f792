"""What every task hands the model: a :class:`TaskBatch`, and the seeded-dataset base of the tasks.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Union

import torch
from torch import Tensor

from .. import checks


#: Label value of positions that do not count (position 0), as in ``torch.nn.CrossEntropyLoss``.
IGNORE_INDEX = -100
#: Seed of the fixed evaluation set of :func:`evaluate` (training streams use the run's seed).
EVAL_SEED = 2_000_003


class TaskBatch(NamedTuple):
    """One batch of a task, on one device.

    Attributes:
        input_ids: (B, L) long tokens in [0, V), or (B, N, patch_dim) float patches
            (:class:`DigitsTask`).
        token_type_ids: (B, L), 1 at the marked position, else 0; None for a task without
            token types (:class:`InductionTask`).
        labels: (B, L) long, class ids in [0, V), :data:`IGNORE_INDEX` where nothing is asked;
            (B,) for a task with one label per sequence (:class:`DigitsTask`).
        marked: (B,) the marked position m of each sequence (:class:`InductionTask`: where the
            repeat starts; :class:`TranslationTask`: the source length).
        source: (B,) where the repeated segment first occurs (:class:`InductionTask`), else None.
        inputs: further keyword tensors for the model's forward, each (B, ...) (e.g.
            ``src_ids`` and ``src_key_padding_mask`` of :class:`TranslationTask`), or None.
    """

    input_ids: Tensor
    token_type_ids: Optional[Tensor]
    labels: Tensor
    marked: Tensor
    source: Optional[Tensor] = None
    inputs: Optional[Dict[str, Tensor]] = None

    def _map(self, fn) -> "TaskBatch":
        def one(t):
            if t is None:
                return None
            return {k: fn(v) for k, v in t.items()} if isinstance(t, dict) else fn(t)

        return TaskBatch(*(one(t) for t in self))

    def to(self, device: Union[str, torch.device]) -> "TaskBatch":
        """The same batch on ``device``."""
        return self._map(lambda t: t.to(device))

    def __getitem__(self, index):  # batch[2:5] slices every tensor; batch[0] is still a field
        if isinstance(index, slice):
            return self._map(lambda t: t[index])
        return tuple.__getitem__(self, index)

    @property
    def batch_size(self) -> int:
        """B."""
        return self.input_ids.shape[0]


class _SeededDataset:
    """``dataset(n, seed)`` for a task whose ``sample(n, generator)`` draws fresh sequences."""

    def dataset(self, num_sequences: int, seed: int) -> TaskBatch:
        """A fixed set of ``num_sequences`` sequences: the same tensors for the same seed.

        Raises:
            ValueError: on a bad size or a negative seed.
        """
        return self.sample(num_sequences, torch.Generator().manual_seed(checks.seed(seed, "seed")))
