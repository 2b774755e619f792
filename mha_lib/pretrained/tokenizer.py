"""The checkpoint's WordPiece tokenizer (through the ``tokenizers`` extra) and its :class:`TokenBatch`.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import List

import torch

from .. import checks
from .checkpoint import _read_json, _require


# ----------------------------------------------------------------------------- tokenizer
@dataclass
class TokenBatch:
    """A tokenized, right-padded batch.

    Attributes:
        input_ids: (B, L) long.
        token_type_ids: (B, L) long: 0 for the first text (and padding), 1 for the second.
        key_padding_mask: (B, L) bool, True = padding (mha_lib's polarity; transformers'
            ``attention_mask`` is ``~key_padding_mask``).
        tokens: B lists of token strings, unpadded, e.g. ``["[CLS]", "the", ..., "[SEP]"]``.
        truncated: B bools, True where the text was cut to the length limit.
    """

    input_ids: torch.Tensor
    token_type_ids: torch.Tensor
    key_padding_mask: torch.Tensor
    tokens: List[List[str]]
    truncated: List[bool]

    @property
    def lengths(self) -> List[int]:
        """Real (unpadded) length of each sequence, in tokens."""
        return [len(t) for t in self.tokens]

    def model_inputs(self) -> dict:
        """``dict(input_ids=..., token_type_ids=..., key_padding_mask=...)`` for ``model(**...)``."""
        return dict(input_ids=self.input_ids, token_type_ids=self.token_type_ids,
                    key_padding_mask=self.key_padding_mask)

    def to(self, device) -> "TokenBatch":
        """The same batch with its tensors on ``device``."""
        return TokenBatch(self.input_ids.to(device), self.token_type_ids.to(device),
                          self.key_padding_mask.to(device), self.tokens, self.truncated)


def _check_text(text: str, where: str) -> None:
    """Refuse a lone surrogate (U+D800..U+DFFF alone, e.g. ``"\\ud800"`` from a broken decode),
    naming its position: it is not a character, has no UTF-8 form, and the Rust tokenizer raises a
    bare TypeError on it. This differs, on purpose, from the page's tokenizer (``wordpiece.mjs``),
    which sees a JavaScript string's lone surrogate as one unknown word, [UNK]: Python refuses
    text that is not valid Unicode rather than guess a token for it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{where}: lone surrogate {text[err.start]!r} at position {err.start} is not a "
                         f"character (no UTF-8 form); fix the text's decoding") from None


class WordPieceTokenizer:
    """BERT's WordPiece tokenizer (the checkpoint's ``tokenizer.json``, via ``tokenizers``).

    Call it on a string, a list of strings, or a list of (text_a, text_b) pairs (or pass
    ``text_pairs``) to get a :class:`TokenBatch`. Sequences are cut to ``max_length``
    tokens, [CLS] and [SEP] included, with transformers' "longest_first" strategy for
    pairs, and a ``warnings.warn`` says how many were cut.

    Args:
        backend: a ``tokenizers.Tokenizer``.
        max_length: the limit: sentence-transformers' ``max_seq_length`` when the checkpoint
            has one (256 for all-MiniLM-L6-v2), else ``max_position_embeddings``.
        pad_token_id: id used for padding.

    Raises:
        ValueError: ``max_length`` not an int >= 3 (a pair needs three special tokens),
            ``pad_token_id`` negative or outside the vocabulary, or a special token ([CLS], [SEP],
            [UNK]) that the vocabulary lacks or that fails to encode (naming ``source`` and the token).
    """

    def __init__(self, backend, max_length: int, pad_token_id: int = 0, *, source: str = "the tokenizer"):
        self.backend = backend
        self.max_length = checks.positive_int(max_length, "max_length")
        if self.max_length < 3:  # [CLS] text [SEP], or [CLS] a [SEP] b [SEP] for a pair
            raise ValueError(f"max_length={max_length} is too short: a pair needs 3 special tokens, so at least 3")
        self.pad_token_id = checks.nonnegative_int(pad_token_id, "pad_token_id")
        # The file may carry its own truncation/padding (all-MiniLM-L6-v2's: 128, fixed
        # padding); we set ours, and pad to the batch's longest sequence ourselves.
        self.backend.no_padding()
        self.backend.enable_truncation(self.max_length, strategy="longest_first")
        self._untruncated = type(backend).from_str(backend.to_str())  # to report full lengths
        self._untruncated.no_truncation()
        self._check_special_tokens(source)

    def _check_special_tokens(self, source: str) -> None:
        """Refuse at load what would fail only on some text later: the special tokens the encoder
        uses ([CLS], [SEP] from the post-processor, [UNK] for unknown words, the padding id) must
        exist and have ids in [0, vocab_size) (``load_bert`` also checks vocab_size against the
        embedding table). A probe pair with an unknown character exercises all of them."""
        n = self.vocab_size
        if self.pad_token_id >= n:
            raise ValueError(f"{source}: pad_token_id={self.pad_token_id} is outside the vocabulary [0, {n})")
        unk = getattr(getattr(self.backend, "model", None), "unk_token", None)
        if unk is None or self.backend.token_to_id(unk) is None:
            raise ValueError(f"{source}: the unknown-word token {unk!r} is not in the vocabulary: an unknown "
                             f"word would fail to tokenize")
        try:
            probe = self._untruncated.encode("a \u0378", "b")  # U+0378 is unassigned: [UNK]
        except Exception as err:  # tokenizers raises plain Exception (e.g. "Missing [UNK] token")
            raise ValueError(f"{source}: the tokenizer fails on a probe pair: {type(err).__name__}: {err}") from None
        bad = [(t, i) for t, i in zip(probe.tokens, probe.ids) if not 0 <= i < n]
        if bad:
            raise ValueError(f"{source}: token(s) {bad[:3]} have ids outside the vocabulary [0, {n}) (the "
                             f"post-processor's special tokens?); the embedding table has no row for them")

    @classmethod
    def from_folder(cls, folder: str, max_length: int, pad_token_id: int = 0) -> "WordPieceTokenizer":
        """Load ``tokenizer.json`` (or build one from ``vocab.txt``) in ``folder``.

        Raises:
            ValueError: neither file present (naming what was found); a file that does not load,
                or whose special tokens ([UNK], the post-processor's [CLS]/[SEP], padding) are
                missing or have ids outside the vocabulary (naming the file).
            ImportError: ``tokenizers`` missing (names the pip extra).
        """
        tokenizers = _require("tokenizers")
        path = os.path.join(folder, "tokenizer.json")
        vocab = os.path.join(folder, "vocab.txt")
        try:
            if os.path.isfile(path):
                return cls(tokenizers.Tokenizer.from_file(path), max_length, pad_token_id, source=path)
            if os.path.isfile(vocab):
                lower = (_read_json(os.path.join(folder, "tokenizer_config.json")) or {}).get("do_lower_case", True)
                wp = tokenizers.implementations.BertWordPieceTokenizer(vocab, lowercase=checks.flag(lower, "do_lower_case"))
                return cls(wp._tokenizer, max_length, pad_token_id, source=vocab)
        except ValueError:
            raise
        except Exception as err:  # tokenizers raises plain Exception / TypeError on broken files
            broken = path if os.path.isfile(path) else vocab
            raise ValueError(f"{broken} is not a usable tokenizer file: {type(err).__name__}: {err}") from None
        raise ValueError(f"no tokenizer in {folder}: need tokenizer.json or vocab.txt, found {sorted(os.listdir(folder))}")

    @property
    def vocab_size(self) -> int:
        """Number of token ids the tokenizer knows (int; 30522 for BERT's uncased vocabulary).

        Valid ids are ``0 .. vocab_size - 1``, added special tokens included.
        """
        return self.backend.get_vocab_size()

    def tokenize(self, text: str) -> List[str]:
        """Token strings of one text, without [CLS]/[SEP] and without truncation.

        Args:
            text: one str.

        Returns:
            The word pieces as a list of str, e.g. ``["the", "cat", "##s"]``.

        Raises:
            ValueError: ``text`` is not a str (naming its type), or holds a lone surrogate.
        """
        if not isinstance(text, str):
            raise ValueError(f"tokenize takes one str, got {type(text).__name__}: {text!r}"[:200])
        _check_text(text, "tokenize: text")
        return self._untruncated.encode(text, add_special_tokens=False).tokens

    def convert_ids_to_tokens(self, ids) -> List[str]:
        """Token strings for a sequence of ids.

        Args:
            ids: an iterable of integer ids (ints, numpy integers or a 1-D integer tensor).

        Returns:
            One str per id.

        Raises:
            ValueError: an id that is not an integer or lies outside [0, vocab_size)
                (naming it).
        """
        if isinstance(ids, torch.Tensor):
            ids = ids.reshape(-1).tolist() if not ids.is_floating_point() else ids.tolist()
        out = []
        for i in ids:
            idx = checks.as_int(i, "convert_ids_to_tokens: id")
            token = self.backend.id_to_token(idx) if idx >= 0 else None
            if token is None:
                raise ValueError(f"convert_ids_to_tokens: id {idx} is outside [0, vocab_size={self.vocab_size})")
            out.append(token)
        return out

    def __call__(self, texts, text_pairs=None, *, warn: bool = True) -> TokenBatch:
        """Tokenize, add [CLS]/[SEP], truncate to ``max_length``, pad to the longest.

        Args:
            texts: a str, a list of str, or a list of (text_a, text_b) tuples.
            text_pairs: optional list of second texts, as long as ``texts``.
            warn: warn when anything was truncated.

        Returns:
            :class:`TokenBatch` (tensors on CPU).

        Raises:
            ValueError: an empty batch, a non-string text, a text holding a lone surrogate
                (naming the text and position), or ``text_pairs`` of another length.
        """
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        if not texts:
            raise ValueError("texts is empty: nothing to tokenize")
        if text_pairs is not None:
            text_pairs = list(text_pairs)
            if len(text_pairs) != len(texts):
                raise ValueError(f"{len(texts)} texts but {len(text_pairs)} text_pairs")
            inputs = list(zip(texts, text_pairs))
        else:
            inputs = [tuple(t) if isinstance(t, (tuple, list)) else t for t in texts]
        for item in inputs:
            parts = item if isinstance(item, tuple) else (item,)
            if len(parts) not in (1, 2) or not all(isinstance(p, str) for p in parts):
                raise ValueError(f"each input must be a str or a (str, str) pair, got {item!r}")
        for b, item in enumerate(inputs):
            for part in item if isinstance(item, tuple) else (item,):
                _check_text(part, f"text {b}")
        encodings = self.backend.encode_batch(inputs)
        truncated = [len(e.overflowing) > 0 for e in encodings]
        if warn and any(truncated):
            self._warn_truncated([x for x, t in zip(inputs, truncated) if t], len(inputs), stacklevel=3)
        B, L = len(encodings), max(len(e.ids) for e in encodings)
        input_ids = torch.full((B, L), self.pad_token_id, dtype=torch.long)
        token_type_ids = torch.zeros((B, L), dtype=torch.long)
        key_padding_mask = torch.ones((B, L), dtype=torch.bool)
        for b, e in enumerate(encodings):
            n = len(e.ids)
            input_ids[b, :n] = torch.tensor(e.ids, dtype=torch.long)
            token_type_ids[b, :n] = torch.tensor(e.type_ids, dtype=torch.long)
            key_padding_mask[b, :n] = False
        return TokenBatch(input_ids, token_type_ids, key_padding_mask, [list(e.tokens) for e in encodings], truncated)

    def _warn_truncated(self, cut_inputs, total: int, stacklevel: int = 2) -> None:
        longest = max(self._full_length(x) for x in cut_inputs)
        warnings.warn(
            f"{len(cut_inputs)} of {total} inputs were truncated to max_length={self.max_length} "
            f"tokens (the longest had {longest})",
            stacklevel=stacklevel,
        )

    def _full_length(self, item) -> int:
        return len(self._untruncated.encode(*item) if isinstance(item, tuple) else self._untruncated.encode(item))

    def __repr__(self) -> str:
        return f"WordPieceTokenizer(vocab_size={self.vocab_size}, max_length={self.max_length})"
