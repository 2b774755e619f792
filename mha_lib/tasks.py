"""Synthetic tasks that need attention relations, and the trained toy models shipped with mha_lib.

The task: previous-minus-marked
===============================

:class:`PrevMarkedTask` is chapter 1's task. It is built so that *every* labelled output needs
two different attention relations at once, and so that neither relation alone tells anything
about the label.

Input, one sequence of length L (default 16):

* ``input_ids`` (B, L) long: tokens x_0 .. x_{L-1}, drawn independently and uniformly from
  {0, ..., V-1} (default V = 16).
* ``token_type_ids`` (B, L) long: 1 at exactly one position m (the *marked* position, drawn
  uniformly from {0, ..., L-1}), 0 elsewhere. The mark is an input feature, like BERT's
  segment ids: the model adds a learned token-type embedding to the marked token.

Label at position i (``labels`` (B, L) long):

* ``op="sub"`` (default): y_i = (x_{i-1} - x_m) mod V, for i = 1 .. L-1;
* ``op="add"``: y_i = (x_{i-1} + x_m) mod V;
* y_0 = -100 (ignored: position 0 has no previous token).

Why two relations. To produce y_i, query i must read x_{i-1} (a *positional* relation: one
position back, whatever the tokens) and x_m (a *content* relation: the key that carries the
mark, wherever it is). For a fixed x_m, y_i runs over all V classes as x_{i-1} does, and vice
versa, so either token alone leaves the label uniform: a model that reads only one of them is
at chance (1/V, plus the positions i = m + 1, where both relations point at the same key and
y_i = 0 for ``"sub"``). The query's own token x_i is independent of y_i.

Why ``"sub"`` and ``"add"``. A single head gives query i one distribution over keys. If it
puts weight w on key i-1 and 1-w on key m, its output carries w v(x_{i-1}) + (1-w) v(x_m)
(plus position and mark terms that do not depend on the tokens). With w = 1/2 that sum is
symmetric in the two tokens: it tells the unordered pair {x_{i-1}, x_m}, which fixes their sum
but not their difference. ``"sub"`` therefore needs a single head to keep the order some other
way (unequal weights w != 1/2), while two heads can read the two tokens into separate output
slots. ``"add"`` is the control: there the even blend already carries everything.

Positional encoding: the models of :data:`SHIPPED` use ``EncoderConfig.positional`` as their
spec says (chapter 1's use fixed sinusoidal encodings, Vaswani et al. 2017, sec. 3.5, added to
the token and token-type embeddings).

Shipped models
==============

:data:`SHIPPED` names every trained toy model that ships as package data in
``mha_lib/weights/``: for each name, one ``<name>.v<version>.safetensors`` file with the weights
of every seed (tensor names ``seed<k>/<parameter name>``, float16 to keep the package small)
and one ``<name>.v<version>.json`` file with the model config, the task, the training recipe,
the seeds, per-seed accuracies (measured on the float16 weights) and learning curves.
:func:`load_trained` rebuilds a :class:`~mha_lib.model.TokenClassifier` from them; nothing is
loaded with pickle. ``scripts/train_all.py`` (``make train``) retrains them all with
:mod:`mha_lib.train`.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from . import checks

__all__ = [
    "IGNORE_INDEX",
    "EVAL_SEED",
    "TaskBatch",
    "PrevMarkedTask",
    "InductionTask",
    "TranslationTask",
    "DigitsTask",
    "task_from_dict",
    "target_shares",
    "attention_maps",
    "budget_sweep",
    "best_heads",
    "logits",
    "per_example_loss",
    "accuracy",
    "evaluate",
    "TrainedSpec",
    "SHIPPED",
    "WEIGHTS_DIR",
    "weight_files",
    "trained_info",
    "load_trained",
    "load_trained_seeds",
]

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
        checks.int_at_least(seed, "seed", 0)
        return self.sample(num_sequences, torch.Generator().manual_seed(seed))


@dataclass(frozen=True)
class PrevMarkedTask(_SeededDataset):
    """Previous-minus-marked: y_i = (x_{i-1} - x_m) mod V, see the module docstring.

    Args:
        vocab_size: V >= 2, number of token values and of classes.
        seq_len: L >= 2.
        op: ``"sub"`` (the order of the two tokens matters) or ``"add"`` (it does not).

    Raises:
        ValueError: on a V or L that is not an int >= 2, or an unknown ``op``.

    Example:
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
          even 1/2-1/2 blend of two token codes keeps (see the module docstring);
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


@dataclass(frozen=True)
class InductionTask(_SeededDataset):
    """Continue a repeat: random tokens in which one segment occurs twice (chapter 5).

    Each sequence of length L holds tokens drawn independently and uniformly from
    {0, ..., V-1}. A segment of r tokens (r drawn per sequence from ``repeat_lengths``),
    starting at position s1, is copied to a later, non-overlapping start s2 >= s1 + r (both
    drawn per sequence), so the distance s2 - s1 varies and no fixed offset finds the copy.

    Labels: the model is asked for the next token only where the repeat makes it predictable,
    at positions i = s2 .. s2 + r - 2 (label x_{i+1}, which equals x_{s1 + (i - s2) + 1}); every
    other label is :data:`IGNORE_INDEX`. Found by the induction mechanism of Elhage et al. 2021
    and Olsson et al. 2022: a previous-token head lets a later head attend from x_i to the key
    *after* x_i's earlier occurrence and copy it. Without such a head (one layer) the label is
    uniform over V tokens, a loss of ln V nats, except where an earlier occurrence of the
    token happens by chance.

    Args:
        vocab_size: V >= 2.
        seq_len: L >= 4.
        repeat_lengths: the segment lengths r to draw from, each >= 2 with 2 r <= L.

    Raises:
        ValueError: on a V, L or r that breaks these bounds (naming it).
    """

    vocab_size: int = 64
    seq_len: int = 32
    repeat_lengths: Tuple[int, ...] = (3, 4, 5, 6, 7, 8)

    relations = ("previous", "induction")
    kind = "induction"

    def __post_init__(self):
        checks.int_at_least(self.vocab_size, "vocab_size", 2)
        L = checks.int_at_least(self.seq_len, "seq_len", 4)
        if isinstance(self.repeat_lengths, (str, bytes)) or not self.repeat_lengths:
            raise ValueError(f"repeat_lengths must be a non-empty sequence of ints, got {self.repeat_lengths!r}")
        lengths = tuple(checks.int_at_least(r, "repeat_lengths", 2) for r in self.repeat_lengths)
        too_long = [r for r in lengths if 2 * r > L]
        if too_long:
            raise ValueError(f"repeat_lengths {too_long} do not fit twice in seq_len={L}")
        object.__setattr__(self, "repeat_lengths", lengths)

    @property
    def num_classes(self) -> int:
        """C = V: the model predicts a token."""
        return self.vocab_size

    def sample(self, batch_size: int, generator: Optional[torch.Generator] = None) -> TaskBatch:
        """Draw ``batch_size`` fresh sequences on the CPU (deterministic given ``generator``).

        Returns:
            a :class:`TaskBatch` with ``token_type_ids=None``, ``marked`` = s2 (where the repeat
            starts) and ``source`` = s1 (where the segment first occurs).

        Raises:
            ValueError: if ``batch_size`` is not an int >= 1.
        """
        B = checks.int_at_least(batch_size, "batch_size", 1)
        V, L = self.vocab_size, self.seq_len
        choices = torch.tensor(self.repeat_lengths)
        r = choices[torch.randint(0, len(choices), (B,), generator=generator)]  # (B,)
        s1 = (torch.rand(B, generator=generator) * (L - 2 * r + 1)).long()  # (B,) in [0, L - 2r]
        s2 = s1 + r + (torch.rand(B, generator=generator) * (L - 2 * r - s1 + 1)).long()  # in [s1 + r, L - r]
        x = torch.randint(0, V, (B, L), generator=generator)  # (B, L)
        rows = torch.arange(B)
        labels = torch.full((B, L), IGNORE_INDEX, dtype=torch.long)
        for k in range(int(r.max())):
            inside = k < r  # (B,) sequences whose segment has a k-th token
            x[rows[inside], s2[inside] + k] = x[rows[inside], s1[inside] + k]
        for k in range(int(r.max()) - 1):
            inside = k < r - 1
            labels[rows[inside], s2[inside] + k] = x[rows[inside], s2[inside] + k + 1]
        return TaskBatch(x, None, labels, s2, s1)

    def relation_targets(self, batch: TaskBatch) -> Tensor:
        """The key each relation points at, for every query.

        Returns:
            long tensor (B, R=2, L): ``[:, 0, i] = i - 1`` (previous token; -1 at i = 0) and
            ``[:, 1, i] = s1 + (i - s2) + 1`` (the token after the earlier occurrence) at the
            labelled positions i of the repeat, -1 elsewhere.
        """
        B, L = batch.input_ids.shape
        positions = torch.arange(L, device=batch.input_ids.device).expand(B, L)  # (B, L)
        induction = positions - (batch.marked - batch.source)[:, None] + 1  # (B, L)
        induction = torch.where(batch.labels != IGNORE_INDEX, induction, torch.full_like(induction, -1))
        return torch.stack([positions - 1, induction], dim=1)

    def curve_scores(self, model: torch.nn.Module, batch: TaskBatch) -> Dict[str, list]:
        """Per-layer, per-head previous-token and induction scores on ``batch``, for learning
        curves (:func:`mha_lib.analysis.previous_token_score`, :func:`mha_lib.analysis.induction_score`).

        Returns:
            ``{"previous": [[score of head h of layer l]], "induction": [[...]]}``: nested
            lists (num_layers, H) of floats in [0, 1], JSON-able.
        """
        from .analysis import induction_score, previous_token_score

        maps = attention_maps(model, batch)  # per layer (B, H, L, L)
        return {"previous": [[round(float(v), 4) for v in previous_token_score(w)] for w in maps],
                "induction": [[round(float(v), 4) for v in induction_score(w, batch.input_ids)] for w in maps]}

    def tokens(self, batch: TaskBatch, index: int = 0) -> List[str]:
        """Token labels of sequence ``index`` for plot axes; the two copies of the segment are
        marked with a leading ``'`` (first) and ``"`` (second)."""
        ids = batch.input_ids[index].tolist()
        s1, s2 = int(batch.source[index]), int(batch.marked[index])
        r = int((batch.labels[index] != IGNORE_INDEX).sum()) + 1
        return [("'" if s1 <= j < s1 + r else '"' if s2 <= j < s2 + r else "") + str(t) for j, t in enumerate(ids)]

    def to_dict(self) -> dict:
        """JSON-able description, inverse of :func:`task_from_dict`."""
        return {"kind": self.kind, "vocab_size": self.vocab_size, "seq_len": self.seq_len,
                "repeat_lengths": list(self.repeat_lengths)}


@dataclass(frozen=True)
class TranslationTask(_SeededDataset):
    """A synthetic "translation" whose word order differs between source and target (chapter 6).

    A source sentence is n words (n drawn per sentence from [min_words, max_words]), each
    drawn uniformly from ``num_words`` word types. Its translation replaces every word w by a
    fixed dictionary word f(w) (a permutation of the word types, fixed by ``dictionary_seed``)
    and **reverses the order**, so target word j aligns with source word n - 1 - j: the
    alignment is the anti-diagonal, not the diagonal (reversal is the simplest word-order
    change; real languages reorder locally and less regularly).

    Ids: 0 = padding, 1 = begin (BOS), 2 = end (EOS), words 3 .. num_words + 2, shared by source
    and target. Source: the n words, EOS, then padding to ``max_words + 1``. Target (the
    labels): the n translated words, EOS, then :data:`IGNORE_INDEX`; the decoder's inputs are
    BOS followed by the labels shifted by one (teacher forcing).

    Args:
        num_words: word types, >= 2. min_words, max_words: 1 <= min_words <= max_words.
        dictionary_seed: seed of the permutation f.

    Raises:
        ValueError: on a bound that is not an int or breaks these rules (naming it).
    """

    num_words: int = 24
    min_words: int = 4
    max_words: int = 12
    dictionary_seed: int = 0

    kind = "translation"
    relations = ("aligned",)
    PAD, BOS, EOS = 0, 1, 2

    def __post_init__(self):
        checks.int_at_least(self.num_words, "num_words", 2)
        low = checks.int_at_least(self.min_words, "min_words", 1)
        high = checks.int_at_least(self.max_words, "max_words", 1)
        if high < low:
            raise ValueError(f"max_words={high} < min_words={low}")
        checks.nonnegative_int(self.dictionary_seed, "dictionary_seed")

    @property
    def num_classes(self) -> int:
        """C = num_words + 3 (padding, BOS and EOS ids included)."""
        return self.num_words + 3

    @property
    def seq_len(self) -> int:
        """Positions of a source or target sequence: max_words + 1 (EOS)."""
        return self.max_words + 1

    def dictionary(self) -> Tensor:
        """f as a long tensor (num_classes,): ``f[w]`` is the translation of id w (special ids map
        to themselves)."""
        perm = torch.randperm(self.num_words, generator=torch.Generator().manual_seed(self.dictionary_seed))
        return torch.cat([torch.arange(3), perm + 3])

    def sample(self, batch_size: int, generator: Optional[torch.Generator] = None) -> TaskBatch:
        """Draw ``batch_size`` sentence pairs on the CPU (deterministic given ``generator``).

        Returns:
            a :class:`TaskBatch`: ``input_ids`` (B, T) decoder inputs, ``labels`` (B, T),
            ``marked`` (B,) source lengths n, ``inputs = {"src_ids": (B, S), "src_key_padding_mask":
            (B, S) bool}``, with S = T = max_words + 1.
        """
        B = checks.int_at_least(batch_size, "batch_size", 1)
        T = self.seq_len
        n = torch.randint(self.min_words, self.max_words + 1, (B,), generator=generator)  # (B,)
        words = torch.randint(3, self.num_words + 3, (B, self.max_words), generator=generator)
        pos = torch.arange(T)[None]  # (1, T)
        src = torch.where(pos < n[:, None], torch.cat([words, words[:, :1]], 1), torch.full((B, T), self.PAD))
        src[torch.arange(B), n] = self.EOS
        # target j = f(source n - 1 - j) for j < n, then EOS
        reversed_index = (n[:, None] - 1 - pos).clamp(min=0)  # (B, T)
        translated = self.dictionary()[src.gather(1, reversed_index)]
        labels = torch.where(pos < n[:, None], translated, torch.full((B, T), IGNORE_INDEX))
        labels[torch.arange(B), n] = self.EOS
        decoder_in = torch.cat([torch.full((B, 1), self.BOS), labels[:, :-1].clamp(min=0)], dim=1)  # pad -> 0
        return TaskBatch(decoder_in, None, labels, n, inputs={"src_ids": src, "src_key_padding_mask": src == self.PAD})

    def relation_targets(self, batch: TaskBatch) -> Tensor:
        """The source position each target position should read (the true alignment).

        Returns:
            long tensor (B, R=1, T): n - 1 - j at the decoder position j that predicts target
            word j (j < n); -1 at the position that predicts EOS (no source word aligns with
            it) and at padding.
        """
        B, T = batch.input_ids.shape
        n = batch.marked[:, None]  # (B, 1)
        pos = torch.arange(T, device=batch.input_ids.device)[None]  # (1, T)
        aligned = torch.where(pos < n, n - 1 - pos, torch.full_like(pos, -1))  # (B, T)
        return aligned[:, None]

    def tokens(self, batch: TaskBatch, index: int = 0) -> Tuple[List[str], List[str]]:
        """(source tokens, target input tokens) of pair ``index``, without padding, for plot axes:
        words as ``s<k>`` / ``t<k>`` (k = id - 3), and ``<bos>``, ``<eos>``."""
        def name(i: int, prefix: str) -> str:
            return {self.BOS: "<bos>", self.EOS: "<eos>"}.get(i, f"{prefix}{i - 3}")

        n = int(batch.marked[index])
        src = batch.inputs["src_ids"][index, : n + 1].tolist()
        tgt = batch.input_ids[index, : n + 1].tolist()
        return [name(i, "s") for i in src], [name(i, "t") for i in tgt]

    def curve_scores(self, model: torch.nn.Module, batch: TaskBatch) -> Dict[str, list]:
        """Per decoder layer and head, the share of cross-attention weight on the aligned source
        position (:func:`target_shares`), as nested lists (layers, H) for learning curves."""
        with torch.no_grad():
            out = model(batch.input_ids, **batch.inputs, output_attentions=True)
        targets = self.relation_targets(batch)
        return {"aligned": [[round(float(v), 4) for v in target_shares(w, targets)[:, 0]]
                            for w in out.cross_attentions]}

    def to_dict(self) -> dict:
        """JSON-able description, inverse of :func:`task_from_dict`."""
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class DigitsTask:
    """Classify scikit-learn's 8x8 handwritten digits from pixel patches (chapter 7).

    The 1,797 images of ``sklearn.datasets.load_digits`` (shipped inside scikit-learn, no
    download) are split once, by a fixed permutation, into ``num_test`` test images and the
    rest for training. Pixel values 0..16 are scaled to [0, 1]. Each image becomes a sequence
    of patches (:func:`mha_lib.model.patchify`): with ``patch_size=1`` every pixel is a token,
    an 8x8 grid of 64 tokens (a [CLS] vector is the model's business, ``cls_token=True``).

    Args:
        patch_size: 1, 2, 4 or 8 pixels.
        num_test: test images, in [1, 1796].

    Raises:
        ValueError: a patch size that does not divide 8, or a bad num_test.
    """

    patch_size: int = 1
    num_test: int = 360

    kind = "digits"
    image_side = 8
    num_classes = 10

    def __post_init__(self):
        p = checks.positive_int(self.patch_size, "patch_size")
        if 8 % p:
            raise ValueError(f"patch_size={p} does not divide the 8-pixel side")
        n = checks.positive_int(self.num_test, "num_test")
        if n >= 1797:
            raise ValueError(f"num_test={n} leaves no training image (1,797 in all)")

    @property
    def grid(self) -> int:
        """Patches per side: 8 / patch_size."""
        return self.image_side // self.patch_size

    @property
    def patch_dim(self) -> int:
        """Values per patch: patch_size**2."""
        return self.patch_size ** 2

    def images(self, split: str) -> Tuple[Tensor, Tensor]:
        """``(images (N, 8, 8) float32 in [0, 1], labels (N,) long)`` of ``"train"`` or ``"test"``.

        Raises:
            ValueError: another split name.
        """
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        images, labels = _digits_split(self.num_test)[split == "test"]
        return images.clone(), labels.clone()  # the caller's own copy: the cached split stays intact

    def _batch(self, images: Tensor, labels: Tensor, index: Tensor) -> TaskBatch:
        from .model import patchify

        return TaskBatch(patchify(images, self.patch_size), None, labels, index)

    def sample(self, batch_size: int, generator: Optional[torch.Generator] = None) -> TaskBatch:
        """``batch_size`` training images drawn with replacement (deterministic given ``generator``).

        Returns:
            a :class:`TaskBatch`: ``input_ids`` (B, N, patch_dim) float patches, ``labels`` (B,)
            digits, ``marked`` (B,) the images' indices in the training split.
        """
        B = checks.int_at_least(batch_size, "batch_size", 1)
        images, labels = self.images("train")
        index = torch.randint(0, len(labels), (B,), generator=generator)
        return self._batch(images[index], labels[index], index)

    def dataset(self, num_sequences: int, seed: int) -> TaskBatch:
        """Test images: the whole test split in a seeded order, or the first ``num_sequences``
        of that order when fewer are asked for (``marked`` holds their test-split indices).

        Raises:
            ValueError: on a bad size or a negative seed.
        """
        n = checks.int_at_least(num_sequences, "num_sequences", 1)
        seed = checks.int_at_least(seed, "seed", 0)
        images, labels = self.images("test")
        index = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))[:n]
        return self._batch(images[index], labels[index], index)

    def to_dict(self) -> dict:
        """JSON-able description, inverse of :func:`task_from_dict`."""
        return {"kind": self.kind, **asdict(self)}


@functools.lru_cache(maxsize=4)
def _digits_split(num_test: int) -> Tuple[Tuple[Tensor, Tensor], Tuple[Tensor, Tensor]]:
    """``((train images, labels), (test images, labels))``, split once by a fixed permutation and
    kept: every training step samples from it, so it must not be rebuilt per batch (that cost
    about 6 ms a step). :meth:`DigitsTask.images` hands out copies."""
    images, labels = _digits()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    train, test = order[num_test:], order[:num_test]
    return (images[train], labels[train]), (images[test], labels[test])


def _digits() -> Tuple[Tensor, Tensor]:
    """scikit-learn's digits as (images (1797, 8, 8) float32 in [0, 1], labels (1797,) long)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:  # pragma: no cover - scikit-learn is a requirement of the book
        raise ValueError("DigitsTask needs scikit-learn: pip install scikit-learn") from err
    data = load_digits()
    return torch.tensor(data.images / 16.0, dtype=torch.float32), torch.tensor(data.target, dtype=torch.long)


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


# ----------------------------------------------------------------------------- head specialisation
def target_shares(weights: Tensor, targets: Tensor) -> Tensor:
    """Each head's average share of attention weight on each relation's target key.

    For query i of sequence b, head h and relation r, the share is ``weights[b, h, i,
    targets[b, r, i]]``: the weight that lands on the key relation r points at. The result
    averages it over every query that has such a key (targets >= 0). A head that takes one
    relation has share near 1 on it; a head that blends two relations evenly has about 1/2
    on each. Queries where two relations point at the same key count for both. This is the
    task-specific analogue of the per-head statistics of Clark et al. 2019, sec. 3 (see
    ``mha_lib.analysis.relation_shares`` for their token-string relations). Named
    ``relation_shares`` before 0.2.0 (that name still works, with a DeprecationWarning).

    Args:
        weights: (B, H, L, S) float attention weights of one layer (rows sum to 1).
        targets: (B, R, L) long key positions in [0, S), or -1 where a query has no target
            (e.g. :meth:`PrevMarkedTask.relation_targets`).

    Returns:
        float32 tensor (H, R) in [0, 1]; NaN in a column whose relation has no target at all.

    Raises:
        ValueError: on wrong ranks, mismatched B or L, or a target outside [-1, S).
    """
    if weights.dim() != 4:
        raise ValueError(f"weights must be (B, H, L, S), got shape {tuple(weights.shape)}")
    if targets.dim() != 3:
        raise ValueError(f"targets must be (B, R, L), got shape {tuple(targets.shape)}")
    B, H, L, S = weights.shape
    if targets.shape[0] != B or targets.shape[2] != L:
        raise ValueError(
            f"targets shape {tuple(targets.shape)} does not match weights (B, H, L, S) = {tuple(weights.shape)}"
        )
    if targets.numel() and (int(targets.min()) < -1 or int(targets.max()) >= S):
        raise ValueError(f"targets must lie in [-1, S={S}), got min {int(targets.min())} max {int(targets.max())}")
    valid = targets >= 0  # (B, R, L)
    index = targets.clamp_min(0)  # (B, R, L)
    w = weights.detach().float()
    # gathered[b, h, r, i] = weights[b, h, i, targets[b, r, i]]
    idx = index.permute(0, 2, 1)[:, None].expand(B, H, L, -1)  # (B, H, L, R)
    gathered = torch.gather(w, 3, idx).permute(0, 1, 3, 2)  # (B, H, R, L)
    mask = valid[:, None].to(w.dtype)  # (B, 1, R, L)
    total = (gathered * mask).sum(dim=(0, 3))  # (H, R)
    count = mask.sum(dim=(0, 3))  # (1, R)
    return total / count  # 0/0 -> NaN for a relation without targets


@torch.no_grad()
def attention_maps(model: torch.nn.Module, batch, head_mask=None) -> Tuple[Tensor, ...]:
    """Per-layer, per-head attention weights of a token classifier on a batch.

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier` (or anything taking the same inputs).
        batch: as for :func:`per_example_loss`.
        head_mask: per-layer gates (the weights are taken before them).

    Returns:
        A tuple with one (B, H_l, L, L) float tensor per layer, rows summing to 1.

    Raises:
        ValueError: a malformed batch (as :func:`per_example_loss`).
    """
    return logits_and_attentions(model, batch, head_mask)[1]


def logits_and_attentions(model, batch, head_mask=None) -> Tuple[Tensor, Tuple[Tensor, ...]]:
    """``(logits (B, L, C), attentions)`` in one forward pass; see :func:`attention_maps`."""
    inputs, _ = _model_inputs(batch)
    ids = inputs.pop("input_ids")
    out = model(ids, **inputs, head_mask=head_mask, output_attentions=True)
    return out.logits, out.attentions


def best_heads(shares: Tensor) -> Tuple[List[int], List[float]]:
    """For each relation, the head with the largest share, and that share.

    Args:
        shares: (H, R) from :func:`target_shares`.

    Returns:
        ``(heads, values)``: two lists of length R. ``len(set(heads)) == R`` says that the
        relations are taken by different heads.

    Raises:
        ValueError: if ``shares`` is not (H, R) with H >= 1.
    """
    if shares.dim() != 2 or shares.shape[0] < 1:
        raise ValueError(f"shares must be (H, R) with H >= 1, got shape {tuple(shares.shape)}")
    values, heads = shares.max(dim=0)
    return [int(h) for h in heads], [float(v) for v in values]


# ----------------------------------------------------------------------------- running a model
def _model_inputs(batch) -> Tuple[dict, Tensor]:
    """(forward keywords, labels) of a :class:`TaskBatch`, an ``(input_ids, labels[,
    key_padding_mask])`` tuple or a dict with those keys."""
    if isinstance(batch, TaskBatch):
        inputs = {"input_ids": batch.input_ids, **(batch.inputs or {})}
        if batch.token_type_ids is not None:
            inputs["token_type_ids"] = batch.token_type_ids
        return inputs, batch.labels
    if isinstance(batch, Mapping) and "input_ids" in batch and "labels" in batch:
        return {"input_ids": batch["input_ids"], "key_padding_mask": batch.get("key_padding_mask")}, batch["labels"]
    if isinstance(batch, (tuple, list)) and len(batch) in (2, 3) and all(isinstance(t, Tensor) for t in batch):
        return {"input_ids": batch[0], "key_padding_mask": batch[2] if len(batch) == 3 else None}, batch[1]
    raise ValueError(
        "a batch must be a TaskBatch, (input_ids, labels), (input_ids, labels, key_padding_mask) or a dict "
        f"with those keys; got {type(batch).__name__}"
    )


def logits(model: torch.nn.Module, batch, head_mask=None, **kwargs) -> Tensor:
    """Per-position class scores (B, L, C) of a TokenClassifier on a batch (see :func:`per_example_loss`).

    ``head_mask`` and any other keyword go to the model's forward."""
    inputs, _ = _model_inputs(batch)
    ids = inputs.pop("input_ids")
    return model(ids, **inputs, head_mask=head_mask, **kwargs).logits


def per_example_loss(model: torch.nn.Module, batch, head_mask=None) -> Tensor:
    """Each sequence's mean cross-entropy (nats) over its labelled positions: float (B,).

    A pooled classifier (logits (B, C), labels (B,)) gives each sequence's cross-entropy.

    The ONE loss of mha_lib's token classifiers. It has the ``loss_fn(model, batch,
    head_mask)`` signature of ``mha_lib.pruning.head_importance``.

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier`.
        batch: a :class:`TaskBatch`, or ``(input_ids (B, L) long, labels (B, L) long[,
            key_padding_mask (B, L) bool])``, or a dict with those keys. Labels equal to
            ``IGNORE_INDEX`` (-100) do not count.
        head_mask: per-layer gates, passed to the model.

    Raises:
        ValueError: a malformed batch, a sequence with no labelled position, or logits holding
            NaN or inf (saying how many): a loss of them would be NaN, and so every gradient.
    """
    out = logits(model, batch, head_mask)  # (B, L, C), or (B, C) for a pooled classifier
    _check_finite_logits(out, "per_example_loss")
    _, labels = _model_inputs(batch)
    if out.dim() == 2:  # one label per sequence (an image classifier)
        _check_pooled_labels(labels, out)
        return torch.nn.functional.cross_entropy(out, labels, reduction="none")  # (B,)
    per_token = torch.nn.functional.cross_entropy(
        out.transpose(1, 2), labels, ignore_index=IGNORE_INDEX, reduction="none"
    )  # (B, L)
    counted = (labels != IGNORE_INDEX).sum(1)  # (B,)
    if bool((counted == 0).any()):
        raise ValueError("per_example_loss: a sequence has no position with a label")
    return per_token.sum(1) / counted


def _check_finite_logits(scores: Tensor, where: str) -> None:
    """Refuse NaN or inf logits (a diverged or corrupted model): their arg-max and their loss mean
    nothing. Skipped inside torch.func transforms and exporters, which cannot read values."""
    if checks.tracing():
        return
    bad = int((~torch.isfinite(scores.detach())).sum())
    if bad:
        raise ValueError(f"{where}: {bad} of {scores.numel()} logits are non-finite (NaN or inf); the model's "
                         f"weights or inputs hold non-finite values, or its training diverged")


def _check_pooled_labels(labels: Tensor, logits: Tensor) -> None:
    """One class id per sequence, in range, for pooled logits (B, C)."""
    B, C = logits.shape
    if not isinstance(labels, Tensor) or labels.shape != (B,) or labels.is_floating_point() \
            or labels.dtype == torch.bool:
        raise ValueError(f"a pooled classifier needs integer labels of shape (B,) = ({B},), got "
                         f"{getattr(labels, 'dtype', type(labels).__name__)} {tuple(getattr(labels, 'shape', ()))}")
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= C):
        raise ValueError(f"labels must lie in [0, {C}), got min {int(labels.min())} max {int(labels.max())}")


@torch.no_grad()
def accuracy(model: torch.nn.Module, batch, head_mask=None, batch_size: int = 1024) -> float:
    """Fraction of labelled positions whose arg-max class is right, in [0, 1].

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier`, run in its current mode (call
            ``model.eval()`` first when it has dropout).
        batch: one batch as for :func:`per_example_loss`, or a list of them. A
            :class:`TaskBatch` runs in chunks of ``batch_size`` sequences on the model's device.
        head_mask: per-layer gates, passed to the model.

    Raises:
        ValueError: a malformed batch, no labelled position at all, or logits holding NaN or inf
            (saying how many): the arg-max of NaN is an arbitrary class, not a prediction.
    """
    device = next(model.parameters()).device
    if isinstance(batch, TaskBatch):
        batches = [batch[i : i + batch_size].to(device) for i in range(0, batch.batch_size, batch_size)]
    elif isinstance(batch, list) and batch and not isinstance(batch[0], Tensor):
        batches = batch
    else:
        batches = [batch]
    correct = total = 0
    for chunk in batches:
        scores = logits(model, chunk, head_mask)  # (b, L, C), or (b, C) pooled
        _check_finite_logits(scores, "accuracy")
        pred = scores.argmax(-1)
        _, labels = _model_inputs(chunk)
        if scores.dim() == 2:
            _check_pooled_labels(labels, scores)
        keep = labels != IGNORE_INDEX
        correct += int(((pred == labels) & keep).sum())
        total += int(keep.sum())
    if total == 0:
        raise ValueError("accuracy: the batch has no labelled position")
    return correct / total


def evaluate(
    model: torch.nn.Module, task: PrevMarkedTask, num_sequences: int = 2048, seed: int = EVAL_SEED
) -> float:
    """Accuracy on a fixed evaluation set (``task.dataset(num_sequences, seed)``), in eval mode.

    The model's train/eval mode is restored afterwards. Returns a float in [0, 1].
    """
    was_training = model.training
    model.eval()
    try:
        return accuracy(model, task.dataset(num_sequences, seed))
    finally:
        model.train(was_training)


# ----------------------------------------------------------------------------- shipped models
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


@dataclass(frozen=True)
class TrainedSpec:
    """Everything that defines one shipped family of trained models (all seeds of one config).

    Attributes:
        name: registry key, e.g. ``"ch1-h4"``; also the file stem.
        version: training-version number; bump it whenever the recipe or the code that
            trains changes the weights, so old files never pass for new ones.
        task: :meth:`PrevMarkedTask.to_dict` of the task.
        model: keyword arguments of :class:`~mha_lib.model.EncoderConfig`
            (``vocab_size`` and ``max_len`` must match the task).
        steps: optimiser steps; batch_size: sequences per step; lr: peak learning rate of
            AdamW (one-cycle schedule: linear warm-up over ``warmup`` of the steps, then
            cosine decay); weight_decay: AdamW's decoupled weight decay.
        seeds: the seeds trained; seed k sets the initialisation and the training stream.
        eval_every: steps between learning-curve points; eval_sequences: sequences in the
            small fixed set used for the curves (the final accuracy uses :func:`evaluate`).
        tied_heads: when True, every head of every block shares head 0's W^Q, W^K and W^V
            (:func:`mha_lib.analysis.tie_heads`, kept tied during training); chapter 2 uses
            it to show that tied heads are one narrow head.
        checkpoints: optimiser-step counts at which the first seed's weights are also saved
            (0 = initialisation), for chapters that show training unfold; load one with
            ``load_trained(name, step=n)``.
        decoder: for an :class:`~mha_lib.model.EncoderDecoder`, the keyword arguments of its
            decoder's :class:`~mha_lib.model.EncoderConfig` (``model`` is then the encoder's);
            None for a :class:`~mha_lib.model.TokenClassifier`.
        pooling: the TokenClassifier's readout (``"token"``, ``"cls"`` or ``"mean"``).
    """

    name: str
    version: int
    task: dict
    model: dict
    steps: int
    batch_size: int
    lr: float
    weight_decay: float = 0.01
    warmup: float = 0.05
    seeds: Tuple[int, ...] = (0, 1, 2, 3, 4)
    eval_every: int = 100
    eval_sequences: int = 256
    tied_heads: bool = False
    checkpoints: Tuple[int, ...] = ()
    decoder: Optional[dict] = None
    pooling: str = "token"

    def make_task(self):
        """The task object."""
        return task_from_dict(self.task)

    def encoder_config(self, num_heads: Optional[int] = None):
        """The :class:`~mha_lib.model.EncoderConfig` (optionally with another ``num_heads``)."""
        from .model import EncoderConfig

        kwargs = dict(self.model)
        if num_heads is not None:
            kwargs["num_heads"] = num_heads
        return EncoderConfig(**kwargs)

    def build(self):
        """A freshly initialised :class:`~mha_lib.model.TokenClassifier`, or
        :class:`~mha_lib.model.EncoderDecoder` when the spec has a ``decoder`` (uses torch's
        global RNG)."""
        from .model import EncoderConfig, EncoderDecoder, TokenClassifier

        if self.decoder is not None:
            return EncoderDecoder(self.encoder_config(), EncoderConfig(**self.decoder), self.make_task().num_classes)
        model = TokenClassifier(self.encoder_config(), self.make_task().num_classes, pooling=self.pooling)
        if self.tied_heads:  # chapter 2: every head shares head 0's W^Q, W^K, W^V (kept tied in training)
            from .analysis import tie_heads

            for block in model.encoder.blocks:
                tie_heads(block.attn)
        return model

    def to_dict(self) -> dict:
        d = asdict(self)
        d["seeds"] = list(self.seeds)
        d["checkpoints"] = list(self.checkpoints)
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "TrainedSpec":
        d = dict(d)
        d["seeds"] = tuple(d["seeds"])
        d["checkpoints"] = tuple(d.get("checkpoints", ()))
        return cls(**d)


_TASK = PrevMarkedTask(vocab_size=8, seq_len=16, op="sub").to_dict()
_MODEL = dict(
    vocab_size=8,
    d_model=64,
    num_heads=1,
    num_layers=1,
    d_ff=256,
    max_len=16,
    positional="sinusoidal",
    type_vocab_size=2,
    pad_token_id=None,  # every token id is a real token: none may lose its gradient
    norm_first=True,
    activation="gelu",
)
_RECIPE = dict(steps=2000, batch_size=64, lr=3e-3)


def _spec(name: str, num_heads: int, num_layers: int = 1, seeds=(0, 1, 2, 3, 4)) -> TrainedSpec:
    model = dict(_MODEL, num_heads=num_heads, num_layers=num_layers)
    return TrainedSpec(name=name, version=1, task=_TASK, model=model, seeds=tuple(seeds), **_RECIPE)


_INDUCTION = dict(
    version=2,  # 2: curves log analysis.induction_score (all earlier occurrences)
    task=InductionTask(vocab_size=64, seq_len=32, repeat_lengths=(3, 4, 5, 6, 7, 8)).to_dict(),
    model=dict(vocab_size=64, d_model=64, num_heads=4, num_layers=2, d_ff=0, max_len=32, positional="sinusoidal",
               pad_token_id=None, is_causal=True, norm_first=True),  # attention-only (d_ff=0), causal
    steps=2000, batch_size=64, seeds=(0, 1, 2, 3, 4), eval_every=50,
)
_SEQ2SEQ = dict(vocab_size=27, d_model=64, num_heads=4, num_layers=2, d_ff=128, max_len=13, positional="sinusoidal",
                pad_token_id=0, norm_first=True)  # TranslationTask(): 24 words + 3 special ids, 12 words + EOS
_VIT = dict(vocab_size=0, patch_dim=1, cls_token=True, d_model=32, num_heads=4, num_layers=2, d_ff=64, max_len=65,
            positional="learned", pad_token_id=None, norm_first=True)  # 64 pixel tokens + [CLS]
_INDUCTION_CHECKPOINTS = (0, 200, 400, 500, 600, 700, 800, 900, 1000, 1200, 1500, 2000)

#: Every shipped trained model family, by name (``make train`` walks it). Chapter 1:
#: ``ch1-h{1,2,4,8}``; chapter 2: ``ch2-tied-h4``, ``ch2-narrow-h4``; chapter 3 adds
#: ``ch1-h16``, ``ch1-h32`` and ``ch3-h8-kv{4,2,1}`` (same task, d_model and recipe);
#: chapter 4 uses ``ch4-l3h8`` (3 layers x 8 heads); chapter 5 the attention-only causal models
#: ``ch5-induction-l2`` (with training checkpoints), ``ch5-induction-l2-lr1e-3`` and ``ch5-induction-l1``
#: on :class:`InductionTask`; chapter 6 the encoder-decoder ``ch6-translation`` on :class:`TranslationTask`;
#: chapter 7 the Vision Transformers ``ch7-digits-h{1,2,4,8}`` on :class:`DigitsTask`.
SHIPPED: Dict[str, TrainedSpec] = {
    s.name: s
    for s in [
        *(_spec(f"ch1-h{h}", h) for h in (1, 2, 4, 8, 16, 32)),
        _spec("ch4-l3h8", 8, num_layers=3, seeds=tuple(range(8))),  # 8 seeds: per-seed intervals in chapter 4
        # chapter 2, section 4: 4 tied heads vs one head of width d_model/4 (3 of 4 heads pruned at init)
        TrainedSpec(name="ch2-tied-h4", version=1, task=_TASK, model=dict(_MODEL, num_heads=4), tied_heads=True,
                    **_RECIPE),
        TrainedSpec(name="ch2-narrow-h4", version=1, task=_TASK,
                    model=dict(_MODEL, num_heads=4, pruned_heads={"0": [1, 2, 3]}), **_RECIPE),
        # chapter 3: ch1-h8 with grouped-query (4, 2 key/value heads) and multi-query (1) attention
        *(TrainedSpec(name=f"ch3-h8-kv{kv}", version=1, task=_TASK, model=dict(_MODEL, num_heads=8, num_kv_heads=kv),
                      seeds=(0, 1, 2, 3, 4), **_RECIPE) for kv in (4, 2, 1)),
        # chapter 5: attention-only causal models on the repeat task, 2 layers at two learning rates, 1 layer
        TrainedSpec(name="ch5-induction-l2", lr=3e-3, checkpoints=_INDUCTION_CHECKPOINTS, **_INDUCTION),
        TrainedSpec(name="ch5-induction-l2-lr1e-3", lr=1e-3, **dict(_INDUCTION, steps=4000)),  # twice the steps
        TrainedSpec(name="ch5-induction-l1", lr=3e-3, **dict(_INDUCTION, model=dict(_INDUCTION["model"], num_layers=1))),
        # chapter 6: an encoder-decoder on the reversed "translation"
        # version 2: the learning curves score word positions only (no alignment for the EOS prediction)
        TrainedSpec(name="ch6-translation", version=2, task=TranslationTask().to_dict(), model=_SEQ2SEQ,
                    decoder=dict(_SEQ2SEQ, is_causal=True, cross_attention=True), steps=1200, batch_size=64,
                    lr=3e-3, eval_every=50),
        # chapter 7: a small Vision Transformer on 8x8 digits, one pixel per token, 1 to 8 heads at equal size
        *(TrainedSpec(name=f"ch7-digits-h{h}", version=1, task=DigitsTask().to_dict(), model=dict(_VIT, num_heads=h),
                      pooling="cls", steps=600, batch_size=64, lr=3e-3, eval_every=50) for h in (1, 2, 4, 8)),
    ]
}


BUDGET_SWEEP = Path(__file__).resolve().parent / "data" / "ch1_budget_sweep.json"
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
    from .model import read_json

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


def __getattr__(name: str):
    if name == "relation_shares":  # renamed in 0.2.0: analysis.relation_shares is the token-string one
        import warnings

        warnings.warn("mha_lib.tasks.relation_shares is deprecated: use mha_lib.tasks.target_shares",
                      DeprecationWarning, stacklevel=2)
        return target_shares
    raise AttributeError(f"module 'mha_lib.tasks' has no attribute {name!r}")


def _resolve(spec: Union[str, TrainedSpec]) -> TrainedSpec:
    if isinstance(spec, TrainedSpec):
        return spec
    if spec not in SHIPPED:
        raise ValueError(f"no shipped model named {spec!r}; known: {sorted(SHIPPED)}")
    return SHIPPED[spec]


def weight_files(spec: Union[str, TrainedSpec], directory: Union[str, Path, None] = None) -> Tuple[Path, Path]:
    """Paths ``(<name>.v<version>.safetensors, <name>.v<version>.json)`` in ``directory``
    (default: the package's ``weights/`` folder)."""
    spec = _resolve(spec)
    directory = WEIGHTS_DIR if directory is None else Path(directory)
    stem = f"{spec.name}.v{spec.version}"
    return directory / f"{stem}.safetensors", directory / f"{stem}.json"


def trained_info(spec: Union[str, TrainedSpec], directory: Union[str, Path, None] = None) -> dict:
    """The JSON metadata of a shipped model family: ``spec``, ``seeds``, ``accuracy``
    (per seed, on the shipped float16 weights, with :func:`evaluate`), ``curves`` (per seed:
    ``steps``, ``loss`` (mean training loss, nats, over each interval), ``accuracy`` (on
    ``eval_sequences`` fixed sequences)), ``train_seconds`` per seed and the software versions.

    Raises:
        FileNotFoundError: if the files are missing (run ``make train``).
        ValueError: the metadata is not valid JSON or lacks ``spec``/``seeds``, or the stored
            spec differs from the registry's (stale weights); the message names the file.
    """
    from .model import read_json

    spec = _resolve(spec)
    _, meta_path = weight_files(spec, directory)
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} is missing: run `make train` (scripts/train_all.py)")
    try:
        info = read_json(meta_path)  # the one guarded JSON reader: too deep, too big, not an object
        stored = TrainedSpec.from_dict(info["spec"])
        info["seeds"] = [checks.nonnegative_int(s, "seed") for s in info["seeds"]]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{meta_path} is not valid model metadata: {type(err).__name__}: {err}") from None
    if stored != spec:
        raise ValueError(
            f"{meta_path} was trained with a different spec than mha_lib.tasks.SHIPPED[{spec.name!r}]; "
            "retrain with `make train`"
        )
    return info


def load_trained(
    spec: Union[str, TrainedSpec], seed: Optional[int] = None, *, directory: Union[str, Path, None] = None,
    device: Union[str, torch.device] = "cpu", step: Optional[int] = None,
):
    """Load a shipped trained :class:`~mha_lib.model.TokenClassifier`, in eval mode.

    Args:
        spec: a name from :data:`SHIPPED` (e.g. ``"ch1-h4"``) or a :class:`TrainedSpec`.
        seed: which seed; default the spec's first seed.
        directory: where the files are (default: the package's ``weights/``; the training
            cache of :mod:`mha_lib.train` uses the same layout).
        device: where to put the model.
        step: a training checkpoint instead of the final weights: one of the spec's
            ``checkpoints`` (optimiser steps done; 0 = initialisation), of its first seed.

    Returns:
        a float32 TokenClassifier; its weights are the stored float16 values, upcast.

    Raises:
        ValueError: unknown name, seed or checkpoint step (or a step with a seed other than
            the first), stale files (spec mismatch), metadata that is not
            JSON, or a weights file that is unreadable or whose tensors do not fit the model or
            hold NaN/inf (naming the file and the key).
        FileNotFoundError: the files are missing.
    """
    from .model import build_checked

    spec = _resolve(spec)
    info = trained_info(spec, directory)
    seed = spec.seeds[0] if seed is None else checks.nonnegative_int(seed, "seed")
    if seed not in info["seeds"]:
        raise ValueError(f"{spec.name} has no seed {seed!r}; shipped seeds: {info['seeds']}")
    weights_path, _ = weight_files(spec, directory)
    prefix = f"seed{seed}/"
    if step is not None:
        step = checks.nonnegative_int(step, "step")
        if step not in spec.checkpoints or seed != spec.seeds[0]:
            raise ValueError(f"{spec.name} has checkpoints of seed {spec.seeds[0]} at steps {list(spec.checkpoints)}; "
                             f"got step={step}, seed={seed}")
        prefix = f"checkpoint{step}/"
    model = build_checked(spec.build, weights_path, prefix=prefix, source=f"{weights_path}[{prefix}]")
    return model.to(device).eval()  # float32: the stored float16 values, upcast


def load_trained_seeds(spec: Union[str, TrainedSpec], **kwargs) -> Dict[int, torch.nn.Module]:
    """``{seed: model}`` for every shipped seed of ``spec`` (keywords as :func:`load_trained`)."""
    spec = _resolve(spec)
    seeds = trained_info(spec, kwargs.get("directory"))["seeds"]
    return {s: load_trained(spec, s, **kwargs) for s in seeds}
