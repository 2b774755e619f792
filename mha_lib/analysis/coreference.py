"""Does a head resolve pronouns? Antecedent selection per head, and the baselines it must beat.

Clark et al. 2019 ("What Does BERT Look At?", section 4) score a head on coreference by the
mention a pronoun attends to most among the candidate antecedents, against simple rules. Here a
*case* is one pronoun in one sentence: ``Case(pronoun, candidates, answer, agrees)`` in word
indices (0-based, as :func:`~mha_lib.analysis.word_attention` numbers words), with ``agrees``
saying which candidates match the pronoun in number and gender ("she" and "Anna", not "the boys").

* :func:`antecedent_accuracy`: per head, the share of cases where the pronoun's row weighs the
  answer most among the candidates, with a Wilson interval for the best head, and per case the
  *weight* on the answer (the claim "a head puts almost all its weight on the antecedent" is about
  that weight, so the distribution over cases is what to report, not the best sentence).
* :func:`antecedent_baselines`: the nearest candidate before the pronoun, and the nearest one that
  agrees with it (per case: :func:`antecedent_rule_hits`, for a paired test against a head). A Winograd-style pair (one word flips the referent: "too big" / "too small")
  defeats both, which is why the book's sample is built of such pairs.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..stats import wilson_interval
from .dependencies import _best_head, _checked_word_maps

__all__ = ["Case", "AntecedentScore", "antecedent_accuracy", "antecedent_baselines", "antecedent_rule_hits",
           "coreference_sample"]


class Case(NamedTuple):
    """One pronoun to resolve, in word indices of its sentence.

    Attributes:
        pronoun: the pronoun's word index.
        candidates: the candidate antecedents' word indices (at least two, none the pronoun).
        answer: the correct one, an element of ``candidates``.
        agrees: optional, one bool per candidate: does it match the pronoun in number and gender.
    """

    pronoun: int
    candidates: Tuple[int, ...]
    answer: int
    agrees: Optional[Tuple[bool, ...]] = None


@dataclass(frozen=True)
class AntecedentScore:
    """Every head's antecedent selection over a sample (see :func:`antecedent_accuracy`).

    Attributes:
        cases: how many cases.
        accuracy: (NL, H) float64, each head's share of cases it resolves.
        best: the best head's label (``"L3.H9"``) and accuracy.
        interval: Wilson 95% interval of the best head's accuracy (optimistic: a maximum over heads).
        weight_on_answer: (cases, NL, H) float64, the weight each head's pronoun row puts on the answer
            (of the whole row, not only of the candidates).
        correct: (cases, NL, H) bool, whether each head chose the answer in each case (for scores on
            a subset of the cases, e.g. a held-out half).
    """

    cases: int
    accuracy: Tensor
    best: Tuple[str, float]
    interval: Tuple[float, float]
    weight_on_answer: Tensor
    correct: Tensor


def _checked_case(case, W: Optional[int], where: str) -> Case:
    if not isinstance(case, Case):
        raise ValueError(f"{where} = {case!r}: a case is a mha_lib.analysis.Case(pronoun, candidates, answer, agrees)")
    upper = "" if W is None else f" in 0..{W - 1}"
    ints = [case.pronoun, case.answer, *case.candidates]
    if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 or (W is not None and i >= W) for i in ints):
        raise ValueError(f"{where}: every index must be a word index{upper}, got {case!r}")
    if len(case.candidates) < 2 or len(set(case.candidates)) != len(case.candidates):
        raise ValueError(f"{where}: needs at least two distinct candidates, got {case.candidates!r}")
    if case.pronoun in case.candidates:
        raise ValueError(f"{where}: the pronoun {case.pronoun} is among its own candidates")
    if case.answer not in case.candidates:
        raise ValueError(f"{where}: the answer {case.answer} is not one of the candidates {case.candidates!r}")
    if case.agrees is not None and (len(case.agrees) != len(case.candidates)
                                    or not all(isinstance(a, bool) for a in case.agrees)):
        raise ValueError(f"{where}: agrees must hold one bool per candidate, got {case.agrees!r}")
    return case


def antecedent_accuracy(word_maps: Sequence[Tensor], cases: Sequence[Case]) -> AntecedentScore:
    """Each head's accuracy at choosing a pronoun's antecedent among its candidates (Clark et al. 2019).

    A head chooses the candidate that the pronoun's row of its word map weighs most (ties: the first
    candidate listed).

    Args:
        word_maps: per case, the (NL, H, W, W) float word attention of its sentence
            (:func:`~mha_lib.analysis.word_attention` of each layer, stacked); the same NL and H for all.
        cases: per case, a :class:`Case`.

    Returns:
        :class:`AntecedentScore`.

    Raises:
        ValueError: no cases, unequal lengths, a map that is not (NL, H, W, W) attention weights or has
            another NL x H, or a case that is not a :class:`Case` with word indices in range, two or more
            distinct candidates without the pronoun and the answer among them.
    """
    case_list = list(cases)
    maps, _, _ = _checked_word_maps(word_maps, case_list, "cases: one map per case", "no cases to score")
    hits, weights = [], []
    for c, (m, case) in enumerate(zip(maps, case_list)):
        case = _checked_case(case, m.shape[-1], f"cases[{c}]")
        row = m[:, :, case.pronoun].detach().double().cpu()           # (NL, H, W)
        on_candidates = row[:, :, list(case.candidates)]               # (NL, H, C)
        chosen = torch.tensor(case.candidates)[on_candidates.argmax(-1)]
        hits.append((chosen == case.answer).double())
        weights.append(row[:, :, case.answer])
    accuracy = torch.stack(hits).mean(0)                               # (NL, H)
    return AntecedentScore(len(case_list), accuracy, *_best_head(accuracy, len(case_list)), torch.stack(weights),
                           torch.stack(hits).bool())


def antecedent_rule_hits(cases: Sequence[Case]) -> Dict[str, Tensor]:
    """Per case, whether each rule a coreference head must beat chooses the answer (for a paired test).

    ``"nearest"``: the candidate closest before the pronoun (after it, the closest, if none is before).
    ``"nearest agreeing"``: the same among the candidates that agree with the pronoun (every case
    must give ``agrees``; a case where none agrees falls back to ``"nearest"``).

    Args:
        cases: :class:`Case` items.

    Returns:
        {rule: bool tensor (cases,)}, True where the rule picks the answer.

    Raises:
        ValueError: no cases, a case that is not a valid :class:`Case` (as :func:`antecedent_accuracy`
            checks, without the word count), or a case without ``agrees``.
    """
    case_list = [_checked_case(c, None, f"cases[{i}]") for i, c in enumerate(cases)]
    if not case_list:
        raise ValueError("cases is empty")

    def nearest(case: Case, allowed) -> int:
        pool = [c for c, ok in zip(case.candidates, allowed) if ok] or list(case.candidates)
        before = [c for c in pool if c < case.pronoun]
        return max(before) if before else min(pool, key=lambda c: abs(c - case.pronoun))

    out = {}
    for rule in ("nearest", "nearest agreeing"):
        hits = []
        for i, case in enumerate(case_list):
            if rule == "nearest agreeing" and case.agrees is None:
                raise ValueError(f"cases[{i}] gives no agrees: the 'nearest agreeing' rule needs it")
            allowed = case.agrees if rule == "nearest agreeing" else [True] * len(case.candidates)
            hits.append(nearest(case, allowed) == case.answer)
        out[rule] = torch.tensor(hits, dtype=torch.bool)
    return out


def antecedent_baselines(cases: Sequence[Case]) -> Dict[str, Tuple[float, Tuple[float, float]]]:
    """The rules a coreference head must beat (:func:`antecedent_rule_hits`), with their accuracy and
    Wilson 95% interval.

    Args:
        cases: :class:`Case` items.

    Returns:
        {rule: (accuracy in [0, 1], (low, high))}.

    Raises:
        ValueError: as :func:`antecedent_rule_hits`.
    """
    out = {}
    for rule, hits in antecedent_rule_hits(cases).items():
        right = int(hits.sum())
        out[rule] = (right / len(hits), wilson_interval(right, len(hits)))
    return out


def coreference_sample() -> List[Tuple[List[str], Case, str, str]]:
    """The book's pronoun sample: 204 sentences written for it (``mha_lib/data/coreference.json``,
    made by ``tools/make_coreference_sample.py``, whose docstring says how).

    Returns:
        ``[(words, case, family, pair)]``: the sentence's words (the final "." and "," are words),
        its :class:`Case` (``agrees`` given), the family (``"fit"``, ``"cross"``, ``"same-gender"``:
        pairs in which one word moves the referent; ``"gender"``, ``"number"``: agreement settles it)
        and the id shared by the cases of one pair.
    """
    raw = json.loads((resources.files("mha_lib") / "data" / "coreference.json").read_text(encoding="utf-8"))
    return [(c["words"], Case(c["pronoun"], tuple(c["candidates"]), c["answer"], tuple(c["agrees"])), c["family"],
             c["pair"]) for c in raw["cases"]]
