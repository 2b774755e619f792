"""Do heads follow syntax? Word-level attention and per-relation head accuracy, after Clark et al. 2019.

Clark, Khandelwal, Levy and Manning 2019, "What Does BERT Look At? An Analysis of BERT's Attention"
(BlackboxNLP), section 4: a parser splits a sentence into words and labels the arcs between them
(``det``: "the" -> "cat", ``nsubj``: "cat" -> "sat"); a WordPiece model reads tokens. So

1. :func:`word_attention` turns a token map into a word map: attention *to* a word is the sum of the
   weights on its tokens, attention *from* a word the mean of its tokens' rows (their section 4).
   A word's row then still sums to the weight its tokens put on words (1 less what went to
   ``[CLS]``, ``[SEP]`` or padding, which belong to no word).
2. :func:`relation_accuracy` scores every head on every relation: the head "predicts" the word its
   dependent attends to most (``direction="dependent"``), or the word the syntactic head attends to
   most (``direction="head"``); its accuracy on a relation is the share of that relation's arcs it
   predicts. Clark et al. report, per relation, the best head and direction.
3. :func:`offset_baseline` is their baseline: the best *fixed offset* per relation (always the
   next word, always two words to the left, ...), which any claim of a "syntax head" must beat.

Each score comes with its arc count and a Wilson interval (:func:`mha_lib.stats.wilson_interval`):
the best of 72 heads on 40 arcs is an optimistic estimate, which the book says where it reports one.

Shapes: NL layers, H heads, L tokens, W words. Arcs are ``(dependent, head, relation)`` triples of
0-based word indices and a relation label; the root arc (head = -1 in some formats) is left out by
the caller.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .. import checks
from ..stats import wilson_interval
from .relations import head_label

__all__ = ["word_attention", "sentence_word_maps", "relation_accuracy", "offset_baseline", "RelationScore",
           "syntax_sample", "parsed_sample"]

Arc = Tuple[int, int, str]


def word_attention(weights: Tensor, word_ids: Sequence[Optional[int]]) -> Tensor:
    """Word-to-word attention from token-to-token attention (Clark et al. 2019, section 4).

    Args:
        weights: (..., L, L) float attention weights over one sentence's tokens (rows: queries);
            any leading dims (layers, heads).
        word_ids: L entries, the word each token belongs to (0-based, non-decreasing, every word
            0..W-1 present), or None for a token of no word ([CLS], [SEP], padding).

    Returns:
        (..., W, W) tensor, same dtype and device: row i is the mean of word i's tokens' rows,
        column j the sum of the weights on word j's tokens.

    Raises:
        ValueError: ``weights`` not at least 2-D and square in its last two dims, not float, with NaN,
            infinite or negative values; ``word_ids`` not L entries, an id that is not an int >= 0, ids that
            skip a word or go back, or no word at all.
    """
    if not isinstance(weights, Tensor) or weights.dim() < 2 or weights.shape[-1] != weights.shape[-2]:
        shape = tuple(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__
        raise ValueError(f"weights must be a (..., L, L) tensor, got {shape}")
    checks.attention_weights(weights, "weights", dims=weights.dim())  # float, finite, >= 0
    L = weights.shape[-1]
    ids = [None if w is None else checks.nonnegative_int(w, f"word_ids[{t}]") for t, w in enumerate(word_ids)]
    if len(ids) != L:
        raise ValueError(f"word_ids has {len(ids)} entries for {L} tokens")
    last = -1
    for t, w in enumerate(ids):
        if w is None:
            continue
        if w < last or w > last + 1:
            raise ValueError(f"word_ids[{t}] = {w} after word {last}: words must come in order, none skipped")
        last = w
    if last < 0:
        raise ValueError("word_ids names no word (all None)")
    W = last + 1
    member = torch.zeros(L, W, dtype=weights.dtype, device=weights.device)  # token t belongs to word w
    for t, w in enumerate(ids):
        if w is not None:
            member[t, w] = 1.0
    to_words = weights @ member                          # (..., L, W): sum over each word's key tokens
    mean_rows = member / member.sum(0, keepdim=True)     # (L, W): each word's tokens, weight 1/count
    return mean_rows.transpose(0, 1) @ to_words          # (..., W, W): mean over each word's query tokens


def sentence_word_maps(model, tokenizer, sentences: Sequence[Sequence[str]], *,
                       batch_size: int = 32) -> List[Tensor]:
    """Word maps of a BERT-family encoder on sentences given as words (a parser's tokens).

    Each sentence's words are tokenized one by one (``is_pretokenized``: a word is never split
    across two words, as Clark et al. 2019 do), framed with [CLS] and [SEP], run through ``model``
    in batches with padding masked, and every layer's maps turned into word maps by
    :func:`word_attention`.

    Args:
        model: a :class:`~mha_lib.pretrained.BertEncoder` (or any encoder with the same call and
            ``output_attentions``), in eval mode.
        tokenizer: its :class:`~mha_lib.pretrained.WordPieceTokenizer`.
        sentences: per sentence, a non-empty list of non-empty str words.
        batch_size: sentences per forward pass, an int >= 1.

    Returns:
        Per sentence, an (NL, H, W, W) float32 CPU tensor (W its number of words).

    Raises:
        ValueError: no sentences, a sentence that is not a non-empty list of non-empty str, a word
            that gives no token, a sentence longer than the tokenizer's ``max_length`` (naming it),
            or a bad ``batch_size``.
    """
    batch_size = checks.positive_int(batch_size, "batch_size")
    sentences = [list(s) if isinstance(s, (list, tuple)) else s for s in sentences]
    if not sentences:
        raise ValueError("sentences is empty: nothing to read")
    for i, words in enumerate(sentences):
        if not isinstance(words, list) or not words or not all(isinstance(w, str) and w.strip() for w in words):
            raise ValueError(f"sentences[{i}] must be a non-empty list of non-empty str words, got {words!r}"[:300])
    device = next(model.parameters()).device
    out: List[Tensor] = []
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start:start + batch_size]
        encodings = tokenizer.backend.encode_batch(chunk, is_pretokenized=True)
        for i, (words, e) in enumerate(zip(chunk, encodings)):
            if e.overflowing:
                raise ValueError(f"sentences[{start + i}] has more than max_length={tokenizer.max_length} tokens")
            missing = sorted(set(range(len(words))) - {w for w in e.word_ids if w is not None})
            if missing:
                raise ValueError(f"sentences[{start + i}]: word {missing[0]} ({words[missing[0]]!r}) gives no token")
        L = max(len(e.ids) for e in encodings)
        ids = torch.full((len(chunk), L), tokenizer.pad_token_id, dtype=torch.long)
        padding = torch.ones(len(chunk), L, dtype=torch.bool)
        for b, e in enumerate(encodings):
            ids[b, :len(e.ids)] = torch.tensor(e.ids)
            padding[b, :len(e.ids)] = False
        with torch.no_grad():
            attentions = model(ids.to(device), token_type_ids=torch.zeros_like(ids).to(device),
                               key_padding_mask=padding.to(device), output_attentions=True).attentions
        stacked = torch.stack(attentions, 1).float().cpu()   # (B, NL, H, L, L)
        for b, e in enumerate(encodings):
            n = len(e.ids)
            out.append(word_attention(stacked[b, :, :, :n, :n], list(e.word_ids)))
    return out


@dataclass(frozen=True)
class RelationScore:
    """One relation's scores over a sample (see :func:`relation_accuracy`).

    Attributes:
        relation: the label (``"nsubj"``).
        arcs: how many arcs of it the sample has.
        accuracy: (NL, H) float tensor, each head's share of those arcs predicted.
        best: the best head's label (``"L3.H9"``, 0-based) and its accuracy.
        interval: the Wilson 95% interval of the best head's accuracy (optimistic: it is a maximum).
    """

    relation: str
    arcs: int
    accuracy: Tensor
    best: Tuple[str, float]
    interval: Tuple[float, float]


def _checked_word_maps(word_maps: Sequence[Tensor], items: Sequence, what: str,
                       empty: str) -> Tuple[List[Tensor], int, int]:
    """Check one (NL, H, W, W) word map per item (a sentence's arcs, a pronoun case): attention weights,
    every map the same NL x H. ``what`` names the items in the length message ("arc lists: one of each
    per sentence"), ``empty`` the message for no maps. Returns (the maps as a list, NL, H). Raises ValueError."""
    maps = list(word_maps)
    if not maps:
        raise ValueError(f"word_maps is empty: {empty}")
    if len(maps) != len(items):
        raise ValueError(f"{len(maps)} word maps but {len(items)} {what}")
    shape = None
    for s, m in enumerate(maps):
        if not isinstance(m, Tensor) or m.dim() != 4 or m.shape[-1] != m.shape[-2]:
            got = tuple(m.shape) if isinstance(m, Tensor) else type(m).__name__
            raise ValueError(f"word_maps[{s}] must be (NL, H, W, W), got {got}")
        checks.attention_weights(m, f"word_maps[{s}]")
        if shape is not None and m.shape[:2] != shape:
            raise ValueError(f"word_maps[{s}] has {tuple(m.shape[:2])} layers x heads, word_maps[0] {tuple(shape)}")
        shape = m.shape[:2]
    return maps, int(shape[0]), int(shape[1])


def _best_head(accuracy: Tensor, n: int) -> Tuple[Tuple[str, float], Tuple[float, float]]:
    """The best head of an (NL, H) accuracy over ``n`` items: ((label, accuracy), Wilson 95% interval)."""
    H = accuracy.shape[1]
    flat = int(accuracy.flatten().argmax())
    best = (head_label(flat // H, flat % H), float(accuracy.flatten()[flat]))
    return best, wilson_interval(int(round(best[1] * n)), n)


def _check_sample(word_maps: Sequence[Tensor], arcs: Sequence[Sequence[Arc]]) -> Tuple[List, List, int, int]:
    """(maps, arc lists, NL, H) of a sample, checked (see relation_accuracy's Raises)."""
    arc_lists = list(arcs)
    maps, NL, H = _checked_word_maps(word_maps, arc_lists, "arc lists: one of each per sentence", "no sentences to score")
    for s, (m, sentence_arcs) in enumerate(zip(maps, arc_lists)):
        W = m.shape[-1]
        for a, arc in enumerate(sentence_arcs):
            if not (isinstance(arc, (tuple, list)) and len(arc) == 3 and isinstance(arc[2], str)):
                raise ValueError(f"arcs[{s}][{a}] = {arc!r}: an arc is (dependent, head, relation)")
            for name, i in (("dependent", arc[0]), ("head", arc[1])):
                if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < W:
                    raise ValueError(f"arcs[{s}][{a}]: {name} = {i!r} is not a word index in 0..{W - 1}")
            if arc[0] == arc[1]:
                raise ValueError(f"arcs[{s}][{a}] = {arc!r}: a word is not its own head")
    return maps, arc_lists, NL, H


def relation_accuracy(word_maps: Sequence[Tensor], arcs: Sequence[Sequence[Arc]], *,
                      direction: str = "dependent") -> Dict[str, RelationScore]:
    """Every head's accuracy at each dependency relation (Clark et al. 2019, section 4).

    A head predicts, for an arc (dependent d, head h), the word that d's row of its word map weighs
    most (``direction="dependent"``: correct if that word is h), or that h's row weighs most
    (``direction="head"``: correct if it is d). The word itself counts as a prediction like any
    other (a head looking at itself is wrong); ties go to the earlier word (``torch.argmax``).

    Args:
        word_maps: per sentence, an (NL, H, W, W) float tensor of word attention
            (:func:`word_attention` of each layer's (H, L, L) maps, stacked); every sentence the same
            NL and H.
        arcs: per sentence, its ``(dependent, head, relation)`` arcs (0-based word indices, the root
            left out).
        direction: ``"dependent"`` or ``"head"``.

    Returns:
        {relation: :class:`RelationScore`}, relations in order of first appearance.

    Raises:
        ValueError: no sentences, unequal lengths, a map not (NL, H, W, W) or of another NL x H, an
            arc that is not three items with word indices in range and a string label, an arc from a
            word to itself, a ``direction`` other than the two, or no arc at all.
    """
    if direction not in ("dependent", "head"):
        raise ValueError(f"direction must be 'dependent' or 'head', got {direction!r}")
    maps, arc_lists, NL, H = _check_sample(word_maps, arcs)
    correct: Dict[str, Tensor] = {}
    counts: Dict[str, int] = {}
    for m, sentence_arcs in zip(maps, arc_lists):
        if not sentence_arcs:
            continue
        looked_at = m.argmax(-1)                              # (NL, H, W): each word's most-weighed word
        for d, h, rel in sentence_arcs:
            src, want = (d, h) if direction == "dependent" else (h, d)
            hit = (looked_at[:, :, src] == want).to(torch.float64)   # (NL, H)
            correct[rel] = correct.get(rel, torch.zeros(NL, H, dtype=torch.float64)) + hit.cpu()
            counts[rel] = counts.get(rel, 0) + 1
    if not counts:
        raise ValueError("the sample has no arcs to score")
    out = {}
    for rel, n in counts.items():
        acc = correct[rel] / n
        out[rel] = RelationScore(rel, n, acc, *_best_head(acc, n))
    return out


def offset_baseline(arcs: Sequence[Sequence[Arc]], *, max_offset: int = 10,
                    direction: str = "dependent") -> Dict[str, Tuple[int, float, int]]:
    """The best fixed offset per relation: Clark et al. 2019's baseline for :func:`relation_accuracy`.

    For ``direction="dependent"`` the offset k predicts word d + k as the head of dependent d; for
    ``"head"``, word h + k as the dependent of h. The best k in [-max_offset, max_offset] (0 excluded;
    ties to the smaller ``abs(k)``, then the negative one) is the one that predicts most arcs.

    Args:
        arcs: per sentence, ``(dependent, head, relation)`` arcs (0-based word indices).
        max_offset: the largest ``abs(k)`` tried, an int >= 1.
        direction: ``"dependent"`` or ``"head"``.

    Returns:
        {relation: (offset k, accuracy in [0, 1], arcs)}, relations in order of first appearance.

    Raises:
        ValueError: ``max_offset`` not an int >= 1, a ``direction`` other than the two, an arc that is
            not (int, int, str) with distinct indices >= 0, or no arc at all.
    """
    max_offset = checks.positive_int(max_offset, "max_offset")
    if direction not in ("dependent", "head"):
        raise ValueError(f"direction must be 'dependent' or 'head', got {direction!r}")
    offsets: Dict[str, Dict[int, int]] = {}
    counts: Dict[str, int] = {}
    for s, sentence_arcs in enumerate(arcs):
        for a, arc in enumerate(sentence_arcs):
            if not (isinstance(arc, (tuple, list)) and len(arc) == 3 and isinstance(arc[2], str)
                    and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in arc[:2])
                    and arc[0] != arc[1]):
                raise ValueError(f"arcs[{s}][{a}] = {arc!r}: an arc is (dependent, head, relation), distinct "
                                 "word indices >= 0")
            d, h, rel = arc
            k = h - d if direction == "dependent" else d - h
            offsets.setdefault(rel, {})
            offsets[rel][k] = offsets[rel].get(k, 0) + 1
            counts[rel] = counts.get(rel, 0) + 1
    if not counts:
        raise ValueError("the sample has no arcs")
    candidates = sorted((k for k in range(-max_offset, max_offset + 1) if k), key=lambda k: (abs(k), k))
    out = {}
    for rel, n in counts.items():
        k = max(candidates, key=lambda k: (offsets[rel].get(k, 0), -candidates.index(k)))
        out[rel] = (k, offsets[rel].get(k, 0) / n, n)
    return out


def syntax_sample() -> List[Tuple[List[str], List[Arc], int]]:
    """The book's parsed sentences: 600 sentences of a small English grammar with their dependency arcs,
    gold by construction (``mha_lib/data/syntax.json``, made by ``tools/make_syntax_sample.py``, whose
    docstring says how and what it does not cover). :func:`parsed_sample` holds real sentences with a
    parser's arcs.

    Returns:
        ``[(words, arcs, root)]``: the words (the final "." is a word with no arc), the
        ``(dependent, head, relation)`` arcs (0-based word indices; det, poss, amod, nsubj, dobj, aux,
        advmod, prep, pobj) and the root's index (the verb, which has no arc).
    """
    raw = json.loads((resources.files("mha_lib") / "data" / "syntax.json").read_text(encoding="utf-8"))
    return [(s["words"], [(d, h, r) for d, h, r in s["arcs"]], s["root"]) for s in raw["sentences"]]


def parsed_sample() -> Dict[str, object]:
    """Real English sentences with a parser's (silver) arcs, and that parser's arcs on :func:`syntax_sample`.

    ``mha_lib/data/parsed.json``, made by ``tools/make_parsed_sample.py`` (whose docstring says how):
    sentences of the Python Language Reference parsed by spaCy's ``en_core_web_sm`` 3.8.0 (ClearNLP
    labels), punctuation and root arcs left out.

    ``"gold"`` holds the 110 sentences whose arcs were checked one by one and corrected
    (``mha_lib/data/parsed_gold.json``, whose ``about`` says by whom and how).

    Returns:
        A dict: ``sentences``, a list of (words, arcs, root); ``grammar_parses``, a list of (arcs,
        root), one per :func:`syntax_sample` sentence, parsed from the same words; ``gold``, a dict
        from sentence index to the checked (arcs, root); ``parser`` and ``source``, dicts saying
        what made the file; ``about`` and ``gold_about``, str.
    """
    data = resources.files("mha_lib") / "data"
    raw = json.loads((data / "parsed.json").read_text(encoding="utf-8"))
    checked = json.loads((data / "parsed_gold.json").read_text(encoding="utf-8"))
    arcs = lambda a: [(int(d), int(h), str(r)) for d, h, r in a]  # noqa: E731
    sentences = [(s["words"], arcs(s["arcs"]), s["root"]) for s in raw["sentences"]]
    gold = {}
    for i in checked["verified"]:
        fixed = {d: (h, r) for d, h, r in arcs(checked["corrections"].get(str(i), []))}
        root = checked["root_corrections"].get(str(i), sentences[i][2])
        kept = [(d, h, r) for d, h, r in sentences[i][1] if d not in fixed and d != root]
        added = [(d, h, r) for d, (h, r) in fixed.items() if r != "punct" and d != root]
        gold[i] = (sorted(kept + added), root)
    return {"sentences": sentences, "grammar_parses": [(arcs(p["arcs"]), p["root"]) for p in raw["grammar_parses"]],
            "gold": gold, "parser": raw["parser"], "source": raw["source"], "about": raw["about"],
            "gold_about": checked["about"]}
