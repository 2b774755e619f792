"""Write mha_lib/data/coreference.json: the book's pronoun sample (issue 32, item 2), from the templates below.

Every sentence was written for the book. Each comes in a *pair* that differs in one word or two, and
the difference moves the pronoun's referent ("too big" / "too small"), so that neither the nearest
noun nor agreement in number and gender can resolve both; two families are there for the baselines
instead: one where gender settles it, one where number does. Words are split on spaces, with the
final "." and the "," as words of their own; indices are 0-based word indices.

Run: python tools/make_coreference_sample.py   (tests/test_dependencies.py checks the file is its output)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "coreference.json"

FEMALE = ["Anna", "Maria", "Emma", "Sarah", "Laura", "Julia"]
MALE = ["Tom", "David", "James", "Peter", "Daniel", "Mark"]

# (first, second, why first, why second): "The {0} did not fit into the {1} because it was too {2|3}."
FIT = [("trophy", "suitcase", "big", "small"), ("ball", "box", "big", "small"), ("book", "bag", "thick", "small"),
       ("bottle", "fridge", "tall", "full"), ("lamp", "box", "wide", "narrow"), ("coat", "drawer", "bulky", "shallow"),
       ("cake", "tin", "large", "small"), ("guitar", "case", "long", "short"), ("sofa", "van", "wide", "small"),
       ("painting", "frame", "large", "small"), ("pizza", "oven", "big", "small"), ("tree", "pot", "big", "small")]
# "The {0} did not cross the {1} because it was too {2|3}." (the seed's sentence, and its kind)
CROSS = [("animal", "street", "tired", "wide"), ("dog", "road", "tired", "busy"), ("horse", "river", "tired", "deep"),
         ("car", "bridge", "heavy", "narrow"), ("boat", "lake", "small", "stormy"), ("deer", "highway", "scared", "busy"),
         ("tractor", "field", "old", "muddy"), ("sheep", "bridge", "scared", "narrow"), ("bus", "bridge", "heavy", "weak"),
         ("cat", "yard", "lazy", "muddy")]
# same-gender pairs: "{A} {verb} {B} because {pronoun} was {adjective for A|for B}."
SAME = [("lent money to", "rich", "broke"), ("beat", "stronger", "weaker"), ("scolded", "angry", "late"),
        ("thanked", "grateful", "generous"), ("visited", "bored", "ill"), ("called", "worried", "away"),
        ("envied", "jealous", "famous"), ("comforted", "kind", "sad")]
SAME_PAIRS = [(0, 1), (2, 3), (4, 5)]  # name indices within one gender, both genders
# gender settles it: "{F} met {M} at the station, and {she|he} carried the bags.", and with M first
MET = [("met", "at the station, and", "carried the bags"), ("phoned", "after lunch, and", "sounded tired"),
       ("waited for", "outside, and", "was cold")]
MET_PAIRS = [(0, 0), (1, 2), (3, 4), (5, 1)]  # (female, male) name indices; both orders, both pronouns
# number settles it: "The {plural} {verb} the {singular} until {they ...|it ...}."
NUMBER = [("dogs", "chased", "cat", "they were tired", "it climbed a tree"),
          ("boys", "followed", "girl", "they got lost", "she ran home"),
          ("nurses", "helped", "patient", "they went home", "he could walk"),
          ("birds", "watched", "snake", "they flew away", "it slid away"),
          ("children", "teased", "dog", "they were told off", "it barked"),
          ("farmers", "fed", "horse", "they were done", "it was full"),
          ("guards", "searched", "man", "they found the key", "he gave up"),
          ("students", "asked", "teacher", "they understood", "she left")]
PRONOUN = {"F": ("she", "her"), "M": ("he", "him")}


def _case(words, pronoun, candidates, answer, agrees, family, pair):
    w = words.split(" ")
    if w[-1].endswith("."):
        w[-1] = w[-1][:-1]
        w.append(".")
    w = [x for part in w for x in ([part[:-1], ","] if part.endswith(",") and len(part) > 1 else [part])]
    def at(word):
        return w.index(word)  # the first occurrence: every word of a case's sentence is there once
    p = at(pronoun)
    cands = [at(c) for c in candidates]
    return {"words": w, "pronoun": p, "candidates": cands, "answer": cands[candidates.index(answer)],
            "agrees": list(agrees), "family": family, "pair": pair}


def sample() -> list:
    cases = []
    for k, (a, b, why_a, why_b) in enumerate(FIT):
        for why, answer in ((why_a, a), (why_b, b)):
            cases.append(_case(f"The {a} did not fit into the {b} because it was too {why}.", "it", [a, b], answer,
                               [True, True], "fit", f"fit-{k}"))
    for k, (a, b, why_a, why_b) in enumerate(CROSS):
        for why, answer in ((why_a, a), (why_b, b)):
            cases.append(_case(f"The {a} did not cross the {b} because it was too {why}.", "it", [a, b], answer,
                               [True, True], "cross", f"cross-{k}"))
    for k, (verb, why_a, why_b) in enumerate(SAME):
        for g, names in (("F", FEMALE), ("M", MALE)):
            she = PRONOUN[g][0]
            for i, j in SAME_PAIRS:
                a, b = names[i], names[j]
                for why, answer in ((why_a, a), (why_b, b)):
                    cases.append(_case(f"{a} {verb} {b} because {she} was {why}.", she, [a, b], answer,
                                       [True, True], "same-gender", f"same-{k}-{g}{i}{j}"))
    for k, (verb, middle, rest) in enumerate(MET):
        for i, j in MET_PAIRS:
            f, m = FEMALE[i], MALE[j]
            for first, second in ((f, m), (m, f)):
                for g in ("F", "M"):
                    she = PRONOUN[g][0]
                    answer = f if g == "F" else m
                    cases.append(_case(f"{first} {verb} {second} {middle} {she} {rest}.", she, [first, second],
                                       answer, [(first == f) == (g == "F"), (second == f) == (g == "F")],
                                       "gender", f"gender-{k}-{i}{j}-{'FM' if first == f else 'MF'}"))
    for k, (plural, verb, single, they, it) in enumerate(NUMBER):
        for tail, answer in ((they, plural), (it, single)):
            pronoun = tail.split(" ")[0]
            cases.append(_case(f"The {plural} {verb} the {single} until {tail}.", pronoun, [plural, single], answer,
                               [pronoun == "they", pronoun != "they"], "number", f"number-{k}"))
    return cases


def main() -> int:
    cases = sample()
    text = json.dumps({"about": __doc__.split("\n\n")[1].replace("\n", " "), "cases": cases}, indent=1) + "\n"
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT}: {len(cases)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
