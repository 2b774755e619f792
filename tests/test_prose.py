"""mha_lib.prose: the chapters' computed verdicts, composed in English and in Chinese (issue 52, item 3).

Each expected Chinese sentence was written as a Chinese technical writer would put it (place first, clauses set
against each other with 而, lists with 、 and 和), and read back by a native reader."""
from __future__ import annotations

import re

import pytest

from mha_lib import prose as P

ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")


def test_at_fractions_lists_in_increasing_order():
    assert P.at_fractions([0.81, 0.4, 0.6]) == ("at 40%, 60% and 81%", "在 40%、60% 和 81% 时")
    assert P.at_fractions([0.5]) == ("at 50%", "在 50% 时")


@pytest.mark.parametrize("verdicts, en, zh", [
    ({0.4: 0, 0.6: 1, 0.81: 1},
     "not distinguishable from importance with 16 seeds at 40%, and better than it at 60% and 81%",
     "在 40% 时与重要性分不出高下（16 个种子不足以区分），而在 60% 和 81% 时都优于重要性"),
    ({0.4: 1, 0.6: 1, 0.81: 1}, "better than importance at 40%, 60% and 81%", "在 40%、60% 和 81% 时都优于重要性"),
    ({0.5: -1, 0.58: 0}, "worse than importance at 50%, and not distinguishable from it with 16 seeds at 58%",
     "在 50% 时不如重要性，而在 58% 时与重要性分不出高下（16 个种子不足以区分）"),
    ({0.4: 0, 0.6: -1, 0.81: 1},
     "not distinguishable from importance with 16 seeds at 40%, worse than it at 60%, and better than it at 81%",
     "在 40% 时与重要性分不出高下（16 个种子不足以区分），在 60% 时不如重要性，而在 81% 时优于重要性"),
])
def test_paired_verdicts_read_as_written_in_each_language(verdicts, en, zh):
    assert P.paired_verdicts("importance", verdicts, 16) == (en, zh)


def test_above_at_says_only_every_and_none():
    targets = [0.4, 0.6, 0.81]
    assert P.above_at("importance", [0.4], targets) == ("above importance only at 40%", "只在 40% 时高于重要性")
    assert P.above_at("importance", targets, targets) == ("above importance at every target", "在每个目标比例下都高于重要性")
    assert P.above_at("importance", [], targets) == ("above importance at none of the targets",
                                                     "在任何目标比例下都不高于重要性")


def test_placement_among_random_orders():
    assert P.placement_among([0.4, 0.6], {0.81: 17}, [], n_orders=20) == (
        "above every one of the 20 random orders at 40% and 60%, and within their spread at 81% (above 17 of the 20)",
        "在 40% 和 60% 时高于全部 20 种随机顺序，而在 81% 时落在它们的范围之内（高于其中 17 种）")
    assert P.placement_among([0.4], [0.6], [0.81]) == (
        "above every random order at 40%, within their spread at 60%, and below every one of them at 81%",
        "在 40% 时高于每一种随机顺序，在 60% 时落在它们的范围之内，而在 81% 时低于每一种随机顺序")
    assert P.placement_among([], [], [0.4, 0.6, 0.81]) == ("below every random order at 40%, 60% and 81%",
                                                          "在 40%、60% 和 81% 时低于每一种随机顺序")
    assert P.placement_among([], {0.6: 3, 0.81: 5}, [], 20)[1] == "在 60% 和 81% 时落在随机顺序的范围之内（分别高于其中 3 种和 5 种）"


def test_runs_agreeing_is_a_whole_clause():
    assert P.runs_agreeing({0.4: 3, 0.6: 2, 0.81: 2}, 3) == (
        "all 3 gate runs reach the same verdict at 40%, and 2 of them at 60% and 81%",
        "在 40% 时，3 次门控训练都得出同样的结论，而在 60% 和 81% 时是 3 次中有 2 次")
    assert P.runs_agreeing({0.4: 3, 0.6: 3}, 3) == ("all 3 gate runs reach the same verdict at 40% and 60%",
                                                    "在 40% 和 60% 时，3 次门控训练都得出同样的结论")
    assert P.runs_agreeing({0.4: 1, 0.6: 0, 0.81: 3}, 3) == (
        "1 of the 3 gate runs reaches the same verdict at 40%, none of them at 60%, and all of them at 81%",
        "在 40% 时，3 次门控训练中有 1 次得出同样的结论，在 60% 时一次也没有，而在 81% 时全部如此")


def test_best_per_fraction():
    assert P.best_per_fraction({0.4: "importance", 0.6: "confidence", 0.81: "confidence"}) == (
        "importance at 40% and confidence at 60% and 81%", "40% 时是重要性，60% 和 81% 时是置信度")
    assert P.best_per_fraction({0.4: "gates", 0.6: "gates"}) == ("gates at every fraction", "每个比例下都是门控")


def test_every_chinese_phrase_is_chinese_and_every_method_has_its_term():
    phrases = [P.paired_verdicts(name, {0.4: 0, 0.6: 1, 0.81: -1}, 16) for name in P.TERMS]
    phrases += [P.above_at(("the baseline", "基线"), [0.6], [0.4, 0.6])]
    for en, zh in phrases:
        assert not ENGLISH_WORD.search(zh) and ENGLISH_WORD.search(en), (en, zh)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, match", [
    (lambda: P.paired_verdicts("magic", {0.4: 1}, 16), "magic"),
    (lambda: P.paired_verdicts("importance", {0.4: 2}, 16), "1, 0 or -1"),
    (lambda: P.paired_verdicts("importance", {0.4: True}, 16), "1, 0 or -1"),
    (lambda: P.paired_verdicts("importance", {}, 16), "at least one"),
    (lambda: P.paired_verdicts("importance", {1.5: 1}, 16), "fractions"),
    (lambda: P.paired_verdicts("importance", {0.4: 1}, 0), "n_seeds"),
    (lambda: P.at_fractions([]), "at least one"),
    (lambda: P.at_fractions([0.4, 0.4]), "repeats"),
    (lambda: P.at_fractions("0.4"), "sequence"),
    (lambda: P.above_at("importance", [0.5], [0.4, 0.6]), "among the targets"),
    (lambda: P.placement_among([0.4], [0.4], []), "exactly one place"),
    (lambda: P.placement_among([], {0.4: 3}, []), "need n_orders"),
    (lambda: P.placement_among([], {0.4: 20}, [], 20), "1 to 19"),
    (lambda: P.runs_agreeing({0.4: 4}, 3), "0 to 3"),
    (lambda: P.runs_agreeing({0.4: 1}, 3, runs="runs"), "pair"),
    (lambda: P.best_per_fraction({}), "at least one"),
    (lambda: P.percent(1.2), "fraction"),
])
def test_bad_input_is_refused_by_name(call, match):
    with pytest.raises(ValueError, match=match):
        call()
