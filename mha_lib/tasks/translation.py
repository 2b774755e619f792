"""Chapter 6's translation task (a dictionary plus reversed order), for the encoder-decoder.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

from .. import checks
from .batch import IGNORE_INDEX, TaskBatch, _SeededDataset
from .heads import target_shares


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
        checks.seed(self.dictionary_seed, "dictionary_seed")

    @property
    def num_classes(self) -> int:
        """C = num_words + 3 (padding, BOS and EOS ids included)."""
        return self.num_words + 3

    @property
    def seq_len(self) -> int:
        """Positions of a source or target sequence, max_words + 1 (EOS)."""
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

        Raises:
            ValueError: if ``batch_size`` is not an int >= 1.
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
