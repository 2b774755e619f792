"""Write mha_lib/data/syntax.json: English sentences with their dependency arcs (issue 32, item 1).

These parses are not a parser's: the sentences are generated from a small grammar whose every rule
states its arcs, so the arcs are gold by construction, in the Stanford basic dependency labels that
Clark et al. 2019 score (det, poss, amod, nsubj, dobj, aux, advmod, prep, pobj). The book uses them
twice: as a sample on which a head's score is certain to be scored against the right arcs, and to
measure the parser behind the book's real-text sample (``parsed.json``, tools/make_parsed_sample.py)
against gold. The price: a narrow grammar
(one clause; subject, optional modal and adverb, verb, object, an optional "of" phrase on the object
and an optional time phrase on the verb), so what it shows holds for such sentences, not for
newspaper text. Determiners, possessives and 0 to 2 adjectives vary the distance between a word and
its head, so a fixed offset cannot score every arc. Words are split on spaces, the final "." is a
word with no arc; indices are 0-based; the verb is the root (no arc).

Run: python tools/make_syntax_sample.py   (tests/test_dependencies.py checks the file is its output)
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "mha_lib" / "data" / "syntax.json"
SENTENCES = 600
SEED = 0

DETERMINERS = ["the", "a", "this", "that", "every"]
POSSESSIVES = ["my", "his", "her", "our", "their"]
ADJECTIVES = ["old", "small", "red", "happy", "quiet", "young", "heavy", "bright", "tired", "clever", "wooden", "new"]
PEOPLE = ["teacher", "farmer", "doctor", "child", "driver", "painter", "neighbour", "student", "baker", "pilot"]
THINGS = ["box", "book", "car", "letter", "garden", "table", "window", "house", "boat", "picture", "basket", "door"]
OWNERS = ["king", "village", "family", "school", "museum", "captain"]
# (past tense, base form after a modal)
VERBS = [("painted", "paint"), ("found", "find"), ("opened", "open"), ("carried", "carry"), ("watched", "watch"),
         ("cleaned", "clean"), ("built", "build"), ("sold", "sell"), ("moved", "move"), ("fixed", "fix")]
MODALS = ["will", "can", "must", "should", "might"]
ADVERBS = ["quickly", "slowly", "carefully", "quietly", "finally"]
TIMES = ["before", "after", "during"]
EVENTS = ["storm", "meeting", "party", "winter", "holiday", "match"]


def _noun_phrase(rng, nouns, words, arcs, *, allow_possessive=True):
    """Append a noun phrase: (det | poss) adj{0,2} noun. Returns the noun's index; arcs to it are added."""
    first = len(words)
    if allow_possessive and rng.random() < 0.3:
        words.append(rng.choice(POSSESSIVES))
        kind = "poss"
    else:
        words.append(rng.choice(DETERMINERS))
        kind = "det"
    adjectives = rng.choice([0, 0, 1, 1, 2])
    for adj in rng.sample(ADJECTIVES, adjectives):
        words.append(adj)
    words.append(rng.choice(nouns))
    noun = len(words) - 1
    arcs.append((first, noun, kind))
    arcs.extend((i, noun, "amod") for i in range(first + 1, noun))
    return noun


def sentence(rng):
    words, arcs = [], []
    subject = _noun_phrase(rng, PEOPLE, words, arcs)
    past, base = rng.choice(VERBS)
    modal = rng.random() < 0.4
    if modal:
        words.append(rng.choice(MODALS))
        aux = len(words) - 1
    adverb = rng.random() < 0.35
    if adverb:
        words.append(rng.choice(ADVERBS))
        adv = len(words) - 1
    words.append(base if modal else past)
    verb = len(words) - 1
    arcs.append((subject, verb, "nsubj"))
    if modal:
        arcs.append((aux, verb, "aux"))
    if adverb:
        arcs.append((adv, verb, "advmod"))
    obj = _noun_phrase(rng, THINGS, words, arcs)
    arcs.append((obj, verb, "dobj"))
    if rng.random() < 0.35:  # "the box of the old king": the phrase belongs to the object
        words.append("of")
        of = len(words) - 1
        owner = _noun_phrase(rng, OWNERS, words, arcs, allow_possessive=False)
        arcs += [(of, obj, "prep"), (owner, of, "pobj")]
    if rng.random() < 0.4:  # "after the storm": the phrase belongs to the verb
        words.append(rng.choice(TIMES))
        when = len(words) - 1
        event = _noun_phrase(rng, EVENTS, words, arcs, allow_possessive=False)
        arcs += [(when, verb, "prep"), (event, when, "pobj")]
    words[0] = words[0].capitalize()
    words.append(".")
    return {"words": words, "root": verb, "arcs": sorted(arcs)}


def sample() -> list:
    rng = random.Random(SEED)
    out, seen = [], set()
    while len(out) < SENTENCES:
        s = sentence(rng)
        text = " ".join(s["words"])
        if text not in seen:  # every sentence once
            seen.add(text)
            out.append(s)
    return out


def main() -> int:
    sentences = sample()
    about = __doc__.split("\n\n")[1].replace("\n", " ")
    OUT.write_text(json.dumps({"about": about, "sentences": sentences}) + "\n", encoding="utf-8")
    arcs = sum(len(s["arcs"]) for s in sentences)
    print(f"{OUT}: {len(sentences)} sentences, {arcs} arcs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
