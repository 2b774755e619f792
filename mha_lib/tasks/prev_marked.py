"""Chapter 1's task, previous-minus-marked: every label needs two attention relations at once.

See :mod:`mha_lib.tasks` for why one relation alone tells nothing about the label.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, List, Optional

import torch
from torch import Tensor

from .. import checks
from .batch import IGNORE_INDEX, TaskBatch, _SeededDataset


@dataclass(frozen=True)
class PrevMarkedTask(_SeededDataset):
    """Previous-minus-marked: y_i = (x_{i-1} - x_m) mod V, m the marked position (see :mod:`mha_lib.tasks`).

    Args:
        vocab_size: V >= 2, number of token values and of classes (default 16).
        seq_len: L >= 2 (default 16).
        op: ``"sub"`` (default; the order of the two tokens matters) or ``"add"`` (it does not).

    Raises:
        ValueError: on a V or L that is not an int >= 2, or an unknown ``op``.

    Example:
        >>> from mha_lib.tasks import PrevMarkedTask
        >>> task = PrevMarkedTask()
        >>> batch = task.dataset(4, seed=0)
        >>> batch.input_ids.shape, batch.labels.shape
        (torch.Size([4, 16]), torch.Size([4, 16]))
    """

    vocab_size: int = 16
    seq_len: int = 16
    op: str = "sub"

    #: names of the two relations, in the order used by :meth:`relation_targets`
    relations = ("previous", "marked")
    kind = "prev_marked"

    def __post_init__(self):
        checks.int_at_least(self.vocab_size, "vocab_size", 2)
        checks.int_at_least(self.seq_len, "seq_len", 2)
        if self.op not in ("sub", "add"):
            raise ValueError(f"op must be 'sub' or 'add', got {self.op!r}")

    @property
    def num_classes(self) -> int:
        """C = V."""
        return self.vocab_size

    def combine(self, previous: Tensor, marked: Tensor) -> Tensor:
        """The label from the two tokens: (previous -/+ marked) mod V, elementwise, long."""
        if self.op == "sub":
            return torch.remainder(previous - marked, self.vocab_size)
        return torch.remainder(previous + marked, self.vocab_size)

    def ceilings(self) -> Dict[str, float]:
        """Exact best accuracies of predictors that see only part of what the label needs.

        Over the labelled positions i = 1 .. L-1, the two relations point at the same key
        (i - 1 = m) with probability p = 1/L. Computed by enumerating the V^2 token pairs:

        * ``"constant"``: the best fixed class, ignoring the input;
        * ``"one_relation"``: the best use of ONE of the two tokens (plus positions and the
          mark): right when i - 1 = m, otherwise 1/V, i.e. p + (1 - p)/V;
        * ``"even_blend"``: the best use of the unordered pair {x_{i-1}, x_m}, which is what an
          even 1/2-1/2 blend of two token codes keeps (see :mod:`mha_lib.tasks`);
        * ``"both"``: 1.0, with both tokens in order.

        Returns:
            dict of floats in [0, 1].
        """
        V, p = self.vocab_size, 1.0 / self.seq_len
        a, b = torch.meshgrid(torch.arange(V), torch.arange(V), indexing="ij")  # all ordered pairs
        labels = self.combine(a, b).flatten()  # (V^2,), each pair has probability 1/V^2
        same = self.combine(torch.arange(V), torch.arange(V))  # label when i - 1 = m
        # best constant: most frequent label of the mixture
        freq = (1 - p) * torch.bincount(labels, minlength=V).double() / V**2
        freq += p * torch.bincount(same, minlength=V).double() / V
        # unordered pair: within each group {a, b}, guess the most frequent label
        key = (torch.minimum(a, b) * V + torch.maximum(a, b)).flatten()
        best = 0
        for k in key.unique():
            best += int(torch.bincount(labels[key == k], minlength=V).max())
        return {
            "constant": float(freq.max()),
            "one_relation": p + (1 - p) / V,
            "even_blend": p + (1 - p) * best / V**2,
            "both": 1.0,
        }

    def sample(self, batch_size: int, generator: Optional[torch.Generator] = None) -> TaskBatch:
        """Draw ``batch_size`` fresh sequences on the CPU.

        Args:
            batch_size: B >= 1.
            generator: a CPU ``torch.Generator``; the draw is a deterministic function of its
                state (``None`` uses torch's global generator).

        Returns:
            a :class:`TaskBatch` of CPU tensors.

        Raises:
            ValueError: if ``batch_size`` is not an int >= 1.
        """
        B = checks.int_at_least(batch_size, "batch_size", 1)
        V, L = self.vocab_size, self.seq_len
        x = torch.randint(0, V, (B, L), generator=generator)  # (B, L)
        m = torch.randint(0, L, (B,), generator=generator)  # (B,)
        rows = torch.arange(B)
        types = torch.zeros(B, L, dtype=torch.long)
        types[rows, m] = 1
        labels = torch.full((B, L), IGNORE_INDEX, dtype=torch.long)
        labels[:, 1:] = self.combine(x[:, :-1], x[rows, m][:, None])  # (B, L-1)
        return TaskBatch(x, types, labels, m)

    def relation_targets(self, batch: TaskBatch) -> Tensor:
        """The key position each relation points at, for every query.

        Returns:
            long tensor (B, R=2, L): ``[:, 0, i] = i - 1`` (previous; -1 at i = 0, meaning
            "no such key") and ``[:, 1, i] = m`` (marked).
        """
        B, L = batch.input_ids.shape
        device = batch.input_ids.device
        prev = (torch.arange(L, device=device) - 1).expand(B, L)  # (B, L), -1 at i = 0
        marked = batch.marked[:, None].expand(B, L)  # (B, L)
        return torch.stack([prev, marked], dim=1)

    def tokens(self, batch: TaskBatch, index: int = 0) -> List[str]:
        """Readable token labels of sequence ``index``, e.g. ``["3", "*7", "12", ...]``
        (a star marks x_m), for plot axes."""
        ids = batch.input_ids[index].tolist()
        m = int(batch.marked[index])
        return [("*" if j == m else "") + str(t) for j, t in enumerate(ids)]

    def to_dict(self) -> dict:
        """JSON-able description, inverse of :func:`task_from_dict`."""
        return {"kind": self.kind, **asdict(self)}
