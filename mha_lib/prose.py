"""Sentences the chapters compute, written in English and in Chinese.

A chapter states what its numbers show in words it computes ("better than importance at 60% and 81%") and
glues them into its prose. Translating such a phrase afterwards, word by word, gives Chinese in English order
("在 40% 时，消融凭 16 个种子无法判定优于还是差于重要性"). Here each kind of verdict is composed once per language,
as a person writes it: Chinese puts the place or condition first ("在 60% 和 81% 时"), joins clauses with "，" and
"，而", lists with "、" and "和", and never needs "it". Each function returns ``(english, chinese)``;
:func:`mha_lib.notebook.glue_text` glues both, and the Chinese edition pastes the Chinese one.

Every phrase is a predicate whose subject the prose gives, so that the sentence around it reads the same in
both languages: "ablation is {phrase}." / "消融{phrase}。".

* :func:`at_fractions` -- where: "at 40%, 60% and 81%" / "在 40%、60% 和 81% 时".
* :func:`paired_verdicts` -- a paired difference over seeds, per fraction: better than, worse than, or not
  distinguishable from the other method with this many seeds (the 95% interval of the difference).
* :func:`above_at` -- where one method is above another, "only at", "at every", "at none of".
* :func:`placement_among` -- a method against a set of random orders: above every one, within their spread
  (with how many it beats), below every one.
* :func:`runs_agreeing` -- how many single runs reach the mean's verdict, per fraction.
* :func:`best_per_fraction` -- which method is best at each fraction.

Method names are :data:`TERMS` (the Chinese of ``locale/zh_CN/terms.yml``) or ``(english, chinese)`` pairs.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence

from . import checks

__all__ = ["TERMS", "percent", "at_fractions", "paired_verdicts", "above_at", "placement_among", "runs_agreeing",
           "best_per_fraction"]

# The methods and things the verdicts name, with the book's Chinese terms.
TERMS = {
    "importance": "重要性", "confidence": "置信度", "ablation": "消融", "gates": "门控", "random": "随机顺序",
    "rescoring": "重新打分", "the fixed ranking": "固定排序", "fixed importance": "固定的重要性排序",
    "the ablation order": "消融顺序", "the gates": "门控",
}
_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def _term(name) -> tuple[str, str]:
    if isinstance(name, tuple) and len(name) == 2 and all(isinstance(n, str) and n for n in name):
        return name
    if isinstance(name, str) and name in TERMS:
        return name, TERMS[name]
    raise ValueError(f"a method is one of {sorted(TERMS)} or an (english, chinese) pair, got {name!r}")


def percent(fraction: float) -> str:
    """``fraction`` as a whole percentage, "40%" (the chapters' ``pct``).

    Raises:
        ValueError: ``fraction`` not a finite number in [0, 1].
    """
    fraction = checks.probability(fraction, "fraction")
    return f"{round(100 * fraction)}%"


def _fractions(fractions: Sequence[float], name: str = "fractions") -> list[float]:
    if isinstance(fractions, (str, bytes)) or not hasattr(fractions, "__iter__"):
        raise ValueError(f"{name} must be a sequence of fractions, got {fractions!r}")
    out = [checks.probability(f, name) for f in fractions]
    if len(set(out)) != len(out):
        raise ValueError(f"{name} repeats a fraction: {list(fractions)!r}")
    return sorted(out)


def _listed(items: Sequence[str], language: str) -> str:
    """"a", "a and b", "a, b and c" / "a"、"a 和 b"、"a、b 和 c"."""
    if len(items) == 1:
        return items[0]
    if language == "en":
        return ", ".join(items[:-1]) + " and " + items[-1]
    # a space between Chinese and a number or Latin letter, none between two Chinese characters
    left, right = ("" if _CJK.match(side) else " " for side in (items[-2][-1], items[-1][0]))
    return "、".join(items[:-1]) + f"{left}和{right}" + items[-1]


def _clauses(en: list[str], zh: list[str]) -> tuple[str, str]:
    """Clauses joined: "a, b, and c" / "a，b，而c" (the last one set against the others)."""
    if len(en) == 1:
        return en[0], zh[0]
    return ", ".join(en[:-1]) + ", and " + en[-1], "，".join(zh[:-1]) + "，而" + zh[-1]


def at_fractions(fractions: Sequence[float]) -> tuple[str, str]:
    """Where: ("at 40%, 60% and 81%", "在 40%、60% 和 81% 时"), in increasing order.

    Raises:
        ValueError: no fraction, a fraction outside [0, 1], or one given twice.
    """
    names = [percent(f) for f in _fractions(fractions)]
    if not names:
        raise ValueError("at_fractions needs at least one fraction")
    return f"at {_listed(names, 'en')}", f"在 {_listed(names, 'zh')} 时"


def _groups(by_fraction: Mapping[float, object]) -> list[tuple[object, list[float]]]:
    """[(value, fractions)] of a {fraction: value} map, in the order of each value's first fraction."""
    order: dict[object, list[float]] = {}
    for f in _fractions(list(by_fraction)):
        order.setdefault(by_fraction[f], []).append(f)
    return list(order.items())


def paired_verdicts(other, verdicts: Mapping[float, int], n_seeds: int) -> tuple[str, str]:
    """A method against ``other``, per fraction, from the 95% interval of their paired difference over seeds.

    Args:
        other: the method compared with (a :data:`TERMS` name or an (english, chinese) pair).
        verdicts: {fraction: 1 (interval above 0: better), -1 (below 0: worse), 0 (contains 0)}.
        n_seeds: how many seeds the intervals are over.

    Returns:
        (english, chinese) predicates, e.g. for ablation against importance ({0.4: 0, 0.6: 1, 0.81: 1}, 16):
        ("not distinguishable from importance with 16 seeds at 40%, and better than it at 60% and 81%",
        "在 40% 时与重要性分不出高下（16 个种子不足以区分），而在 60% 和 81% 时优于重要性").

    Raises:
        ValueError: an unknown method, a verdict not in {-1, 0, 1}, no fraction, or ``n_seeds`` not positive.
    """
    other_en, other_zh = _term(other)
    n_seeds = checks.positive_int(n_seeds, "n_seeds")
    if not verdicts:
        raise ValueError("paired_verdicts needs a verdict for at least one fraction")
    bad = {f: v for f, v in verdicts.items() if isinstance(v, bool) or v not in (-1, 0, 1)}
    if bad:
        raise ValueError(f"a verdict is 1, 0 or -1, got {bad!r}")
    en, zh = [], []
    for verdict, fractions in _groups(verdicts):
        where_en, where_zh = at_fractions(fractions)
        them = other_en if not en else "it"
        all_ = "都" if len(fractions) > 1 else ""
        if verdict == 1:
            en.append(f"better than {them} {where_en}")
            zh.append(f"{where_zh}{all_}优于{other_zh}")
        elif verdict == -1:
            en.append(f"worse than {them} {where_en}")
            zh.append(f"{where_zh}{all_}不如{other_zh}")
        else:
            en.append(f"not distinguishable from {them} with {n_seeds} seeds {where_en}")
            zh.append(f"{where_zh}{all_}与{other_zh}分不出高下（{n_seeds} 个种子不足以区分）")
    return _clauses(en, zh)


def above_at(other, fractions: Sequence[float], targets: Sequence[float]) -> tuple[str, str]:
    """Where a method is above ``other``, out of all the ``targets``.

    Returns:
        ("above importance only at 40%", "只在 40% 时高于重要性"); at every target ("above importance at every
        target", "在每个目标比例下都高于重要性"); at none ("above importance at none of the targets",
        "在任何目标比例下都不高于重要性").

    Raises:
        ValueError: an unknown method, no target, or a fraction that is not one of the targets.
    """
    other_en, other_zh = _term(other)
    targets, fractions = _fractions(targets, "targets"), _fractions(fractions)
    if not targets:
        raise ValueError("above_at needs at least one target")
    if not set(fractions) <= set(targets):
        raise ValueError(f"fractions {fractions!r} are not all among the targets {targets!r}")
    if not fractions:
        return f"above {other_en} at none of the targets", f"在任何目标比例下都不高于{other_zh}"
    if len(fractions) == len(targets):
        return f"above {other_en} at every target", f"在每个目标比例下都高于{other_zh}"
    where_en, where_zh = at_fractions(fractions)
    return f"above {other_en} only {where_en}", f"只{where_zh}高于{other_zh}"


def placement_among(above: Sequence[float], within: Mapping[float, int] | Sequence[float], below: Sequence[float],
                    n_orders: int | None = None) -> tuple[str, str]:
    """A method against a set of random orders cut to the same head counts, per fraction.

    Args:
        above: fractions where it is above every random order.
        within: fractions where it is within their spread: a sequence, or {fraction: how many orders it is
            above} (said in brackets, which needs ``n_orders``).
        below: fractions where it is below every one.
        n_orders: how many random orders; named when given ("every one of the 20 random orders").

    Returns:
        e.g. ("above every one of the 20 random orders at 40% and 60%, and within their spread at 81% (above 17 of
        the 20)", "在 40% 和 60% 时高于全部 20 种随机顺序，而在 81% 时落在它们的范围之内（高于其中 17 种）").

    Raises:
        ValueError: a fraction in two places, none at all, counts without ``n_orders``, or a count outside
            [1, n_orders - 1].
    """
    counts = dict(within) if isinstance(within, Mapping) else None
    places = {"above": _fractions(above, "above"), "within": _fractions(list(within), "within"),
              "below": _fractions(below, "below")}
    every = [f for fs in places.values() for f in fs]
    if not every or len(set(every)) != len(every):
        raise ValueError(f"each fraction must be in exactly one place, got {places!r}")
    if n_orders is not None:
        n_orders = checks.int_at_least(n_orders, "n_orders", 2)
    if counts and n_orders is None:
        raise ValueError("placement_among: counts of the orders beaten need n_orders")
    if counts and not all(isinstance(k, int) and 0 < k < n_orders for k in counts.values()):
        raise ValueError(f"within the spread, a method is above 1 to {n_orders - 1} orders, got {counts!r}")
    en, zh = [], []
    if places["above"]:
        where_en, where_zh = at_fractions(places["above"])
        if n_orders is None:
            en.append(f"above every random order {where_en}")
            zh.append(f"{where_zh}高于每一种随机顺序")
        else:
            en.append(f"above every one of the {n_orders} random orders {where_en}")
            zh.append(f"{where_zh}高于全部 {n_orders} 种随机顺序")
    if places["within"]:
        where_en, where_zh = at_fractions(places["within"])
        beaten = [str(counts[f]) for f in places["within"]] if counts else []
        en.append(f"within their spread {where_en}" + (f" (above {_listed(beaten, 'en')} of the {n_orders})"
                                                        if beaten else ""))
        zh.append(f"{where_zh}落在{'它们' if en[:-1] else '随机顺序'}的范围之内"
                  + (f"（分别高于其中 {_listed([b + ' 种' for b in beaten], 'zh')}）" if len(beaten) > 1 else
                     f"（高于其中 {beaten[0]} 种）" if beaten else ""))
    if places["below"]:
        where_en, where_zh = at_fractions(places["below"])
        en.append(f"below every one of them {where_en}" if en else f"below every random order {where_en}")
        zh.append(f"{where_zh}低于每一种随机顺序")
    return _clauses(en, zh)


def runs_agreeing(agree: Mapping[float, int], n_runs: int, runs=("gate runs", "次门控训练")) -> tuple[str, str]:
    """How many single runs reach the same verdict as their mean, per fraction: a whole clause.

    Args:
        agree: {fraction: runs that agree}.
        n_runs: runs per fraction.
        runs: what a run is, (english plural, chinese with its measure word: "次门控训练").

    Returns:
        e.g. ({0.4: 3, 0.6: 2, 0.81: 2}, 3): ("all 3 gate runs reach the same verdict at 40%, and 2 of them at 60%
        and 81%", "在 40% 时，3 次门控训练都得出同样的结论，而在 60% 和 81% 时是 3 次中有 2 次").

    Raises:
        ValueError: no fraction, a count outside [0, n_runs], or ``n_runs`` not positive.
    """
    n_runs = checks.positive_int(n_runs, "n_runs")
    if not (isinstance(runs, tuple) and len(runs) == 2 and all(isinstance(r, str) and r for r in runs)):
        raise ValueError(f"runs must be an (english, chinese) pair, got {runs!r}")
    runs_en, runs_zh = runs
    if not agree or not all(isinstance(k, int) and not isinstance(k, bool) and 0 <= k <= n_runs
                            for k in agree.values()):
        raise ValueError(f"agree maps each fraction to 0 to {n_runs} runs, got {agree!r}")
    en, zh = [], []
    for k, fractions in _groups(agree):
        where_en, where_zh = at_fractions(fractions)
        if not en:
            who = "all" if k == n_runs else "none of the" if k == 0 else f"{k} of the"
            verb = "reaches" if k in (0, 1) else "reach"
            en.append(f"{who} {n_runs} {runs_en} {verb} the same verdict {where_en}")
            zh.append(f"{where_zh}，{n_runs} {runs_zh}" + ("都得出同样的结论" if k == n_runs else
                                                          "都没有得出同样的结论" if k == 0 else
                                                          f"中有 {k} 次得出同样的结论"))
        else:
            en.append(f"{'all' if k == n_runs else 'none' if k == 0 else k} of them {where_en}")
            zh.append(f"{where_zh}" + ("全部如此" if k == n_runs else "一次也没有" if k == 0 else
                                       f"是 {n_runs} 次中有 {k} 次"))
    return _clauses(en, zh)


def best_per_fraction(best: Mapping[float, object]) -> tuple[str, str]:
    """Which method is best at each fraction: ("importance at 40% and confidence at 60% and 81%",
    "40% 时是重要性，60% 和 81% 时是置信度"); one method everywhere: ("importance at every fraction",
    "每个比例下都是重要性").

    Raises:
        ValueError: no fraction, or an unknown method.
    """
    if not best:
        raise ValueError("best_per_fraction needs at least one fraction")
    groups = [(_term(name), fractions) for name, fractions in _groups(best)]
    if len(groups) == 1 and len(best) > 1:
        (name_en, name_zh), _ = groups[0]
        return f"{name_en} at every fraction", f"每个比例下都是{name_zh}"
    en = [f"{name_en} {at_fractions(fs)[0]}" for (name_en, _), fs in groups]
    zh = [f"{at_fractions(fs)[1][2:]}是{name_zh}" for (_, name_zh), fs in groups]
    return _listed(en, "en"), "，".join(zh)
