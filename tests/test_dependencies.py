"""Tests for mha_lib.analysis.dependencies: word-level attention and per-relation head accuracy
(Clark et al. 2019, section 4), on hand-built maps whose answers can be worked out by hand."""
from __future__ import annotations

import json
import re

import pytest
import torch

from mha_lib.analysis import offset_baseline, relation_accuracy, word_attention


def _rows(*rows):
    return torch.tensor(rows, dtype=torch.float32)


# "[CLS] play ##ing cats [SEP]": word 0 = play ##ing (tokens 1, 2), word 1 = cats (token 3)
WORD_IDS = [None, 0, 0, 1, None]
TOKENS = _rows([0.2, 0.2, 0.2, 0.2, 0.2],
               [0.1, 0.1, 0.2, 0.5, 0.1],
               [0.0, 0.3, 0.3, 0.4, 0.0],
               [0.5, 0.1, 0.1, 0.2, 0.1],
               [0.2, 0.2, 0.2, 0.2, 0.2])


def test_word_attention_sums_keys_and_averages_queries_of_a_split_word():
    got = word_attention(TOKENS, WORD_IDS)
    # from "playing": mean of token rows 1 and 2; to "playing": the sum of columns 1 and 2
    want = _rows([(0.1 + 0.2 + 0.3 + 0.3) / 2, (0.5 + 0.4) / 2],
                 [0.1 + 0.1, 0.2])
    assert torch.allclose(got, want, atol=1e-6)
    # a word's row keeps what its tokens gave to words ([CLS]/[SEP] weight is not in any word)
    assert torch.allclose(got.sum(-1), _rows([0.9, 0.4]).squeeze(0), atol=1e-6)


def test_word_attention_keeps_leading_dims_and_is_the_identity_for_one_token_words():
    maps = torch.softmax(torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0)), -1)
    assert torch.allclose(word_attention(maps, [0, 1, 2, 3]), maps)
    assert word_attention(maps, [None, 0, 0, None]).shape == (2, 3, 1, 1)


@pytest.mark.parametrize("weights, ids, message", [
    (torch.ones(3, 4), [0, 1, 2], "(..., L, L)"),
    (TOKENS, [None, 0, 0, 1], "4 entries for 5 tokens"),
    (TOKENS, [None, 0, 2, 2, None], "words must come in order"),
    (TOKENS, [None, 1, 0, 0, None], "words must come in order"),
    (TOKENS, [None, 0, -1, 1, None], "word_ids[2]"),
    (TOKENS, [None, 0, 0.5, 1, None], "word_ids[2]"),
    (TOKENS, [None] * 5, "names no word"),
    (TOKENS * float("nan"), WORD_IDS, "NaN"),
    (-TOKENS, WORD_IDS, "negative"),
])
def test_word_attention_refuses_bad_input_by_name(weights, ids, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        word_attention(weights, ids)


def _one_hot_map(targets, W):
    """(W, W): word i puts all its weight on targets[i]."""
    m = torch.zeros(W, W)
    for i, t in enumerate(targets):
        m[i, t] = 1.0
    return m


def test_relation_accuracy_counts_the_most_attended_word_per_head_and_direction():
    # "the cat sat": det 0 -> 1, nsubj 1 -> 2. Head (0, 0) looks at the next word, head (0, 1) at the
    # previous one, head (1, 0) at itself, head (1, 1) at word 1 whatever the query.
    W = 3
    heads = [[_one_hot_map([1, 2, 2], W), _one_hot_map([0, 0, 1], W)],
             [_one_hot_map([0, 1, 2], W), _one_hot_map([1, 1, 1], W)]]
    maps = [torch.stack([torch.stack(layer) for layer in heads])]  # (2, 2, 3, 3)
    arcs = [[(0, 1, "det"), (1, 2, "nsubj")]]
    dep = relation_accuracy(maps, arcs)
    assert dep["det"].accuracy.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert dep["nsubj"].accuracy.tolist() == [[1.0, 0.0], [0.0, 0.0]]
    assert dep["det"].best == ("L0.H0", 1.0) and dep["det"].arcs == 1
    assert dep["det"].interval[1] == 1.0 and dep["det"].interval[0] < 0.5  # one arc proves little
    head = relation_accuracy(maps, arcs, direction="head")
    # det's head is "cat" (1), which must look at "the" (0): head (0, 1) does
    assert head["det"].accuracy.tolist() == [[0.0, 1.0], [0.0, 0.0]]
    assert head["nsubj"].accuracy.tolist() == [[0.0, 1.0], [0.0, 1.0]]
    assert list(dep) == ["det", "nsubj"]


def test_relation_accuracy_pools_arcs_over_sentences():
    next_word = lambda W: _one_hot_map([min(i + 1, W - 1) for i in range(W)], W)  # noqa: E731
    maps = [next_word(3)[None, None], next_word(4)[None, None]]
    arcs = [[(0, 1, "det")], [(0, 1, "det"), (2, 0, "det")]]  # the last one points back: missed
    r = relation_accuracy(maps, arcs)["det"]
    assert r.arcs == 3 and r.accuracy.item() == pytest.approx(2 / 3)


@pytest.mark.parametrize("maps, arcs, message", [
    ([], [], "empty"),
    ([torch.eye(3)[None, None]], [], "1 word maps but 0 arc lists"),
    ([torch.eye(3)], [[(0, 1, "det")]], "(NL, H, W, W)"),
    ([torch.eye(3)[None, None]], [[(0, 3, "det")]], "head = 3"),
    ([torch.eye(3)[None, None]], [[(1, 1, "det")]], "its own head"),
    ([torch.eye(3)[None, None]], [[(0, 1)]], "(dependent, head, relation)"),
    ([torch.eye(3)[None, None]], [[]], "no arcs"),
    ([torch.eye(3)[None, None], torch.eye(3)[None, None].repeat(1, 2, 1, 1)], [[], []], "layers x heads"),
])
def test_relation_accuracy_refuses_bad_input_by_name(maps, arcs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        relation_accuracy(maps, arcs)
    with pytest.raises(ValueError, match="direction"):
        relation_accuracy([torch.eye(3)[None, None]], [[(0, 1, "det")]], direction="both")


def test_offset_baseline_picks_the_best_fixed_offset_per_relation():
    arcs = [[(0, 1, "det"), (3, 4, "det"), (1, 4, "nsubj")], [(2, 3, "det"), (5, 3, "amod"), (0, 3, "nsubj")]]
    got = offset_baseline(arcs)
    assert got["det"] == (1, 1.0, 3)
    assert got["nsubj"] == (3, 1.0, 2)
    assert got["amod"] == (-2, 1.0, 1)
    back = offset_baseline(arcs, direction="head")
    assert back["det"] == (-1, 1.0, 3)
    # out of range: no offset within 2 predicts nsubj; ties go to the nearest, then the left
    assert offset_baseline(arcs, max_offset=2)["nsubj"] == (-1, 0.0, 2)


@pytest.mark.parametrize("arcs, kwargs, message", [
    ([[]], {}, "no arcs"),
    ([[(0, 0, "det")]], {}, "distinct"),
    ([[(0, -1, "root")]], {}, "distinct"),
    ([[(0, 1, 5)]], {}, "(dependent, head, relation)"),
    ([[(0, 1, "det")]], {"max_offset": 0}, "max_offset"),
    ([[(0, 1, "det")]], {"direction": "up"}, "direction"),
])
def test_offset_baseline_refuses_bad_input_by_name(arcs, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        offset_baseline(arcs, **kwargs)


def test_a_syntax_head_in_a_real_model_is_scored_like_the_hand_built_case(minilm):
    """MiniLM on one parsed sentence: the scores are a function of the maps (recomputed by hand here)."""
    bert, tokenizer = minilm
    words = ["The", "dogs", "were", "chasing", "a", "ball"]
    arcs = [(0, 1, "det"), (1, 3, "nsubj"), (2, 3, "aux"), (4, 5, "det"), (5, 3, "dobj")]
    enc = tokenizer.backend.encode(words, is_pretokenized=True)
    ids = torch.tensor([enc.ids])
    with torch.no_grad():
        out = bert(ids, token_type_ids=torch.zeros_like(ids), output_attentions=True)
    word_ids = list(enc.word_ids)
    maps = torch.stack([word_attention(a[0], word_ids) for a in out.attentions])  # (6, 12, 6, 6)
    scores = relation_accuracy([maps], [arcs])
    for rel, score in scores.items():
        wanted = [a for a in arcs if a[2] == rel]
        by_hand = torch.stack([(maps[:, :, d].argmax(-1) == h).double() for d, h, _ in wanted]).mean(0)
        assert torch.equal(score.accuracy, by_hand)
    assert scores["det"].arcs == 2 and 0.0 <= scores["det"].best[1] <= 1.0


# ----------------------------------------------------------------------------- local and spread-out heads
from mha_lib.analysis import local_share_and_spread  # noqa: E402


def _layer(*heads):
    return torch.stack([torch.tensor(h, dtype=torch.float64) for h in heads])[None]  # (1, H, L, L)


def test_local_share_and_spread_of_heads_worked_out_by_hand():
    L = 4
    previous = [[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]   # row 0 looks at itself
    uniform = [[0.25] * L] * L
    two_back = [[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]]
    within_1, within_2, spread = local_share_and_spread(_layer(previous, uniform, two_back))
    assert within_1.tolist() == pytest.approx([0.75, (1 + 2 + 2 + 1) / 16, 0.25])  # uniform: 1 or 2 neighbours of 4
    assert within_2.tolist() == pytest.approx([0.75, (2 + 3 + 3 + 2) / 16, 0.75])
    assert spread.tolist() == pytest.approx([0.0, 1.0, 0.0])


def test_sinks_are_left_out_and_rows_renormalised():
    # every row: half on [SEP] (key 3), the rest spread evenly over keys 0-2
    row = [1 / 6, 1 / 6, 1 / 6, 0.5]
    weights = _layer([row] * 4)
    sinks = torch.tensor([[False, False, False, True]])
    _, _, spread = local_share_and_spread(weights)
    _, _, without = local_share_and_spread(weights, sink_keys=sinks)
    assert spread.item() < 0.9 and without.item() == pytest.approx(1.0)   # evenly spread over what is left
    # a row with all its weight on the sink has nothing left: left out
    only_sink = _layer([[0, 0, 0, 1]] * 3 + [[0.5, 0.5, 0, 0]])
    _, w2, _ = local_share_and_spread(only_sink, sink_keys=sinks)
    assert w2.item() == pytest.approx(0.5)  # the one row left: query 3, half its weight two back, half three back


def test_padding_does_not_count_as_keys_or_queries():
    L = 4
    rows = [[0.5, 0.5, 0, 0]] * L
    mask = torch.tensor([[False, False, True, True]])
    _, _, spread = local_share_and_spread(_layer(rows), key_padding_mask=mask)
    assert spread.item() == pytest.approx(1.0)  # even over the 2 real keys


@pytest.mark.parametrize("kwargs, message", [
    ({"weights": torch.ones(1, 1, 3, 4) / 4}, "L == S"),
    ({"weights": torch.ones(1, 1, 3, 3) / 3, "sink_keys": torch.zeros(1, 3)}, "sink_keys must be a bool"),
    ({"weights": torch.ones(1, 1, 3, 3) / 3, "sink_keys": torch.ones(1, 3, dtype=torch.bool)}, "no query row left"),
    ({"weights": torch.full((1, 1, 3, 3), float("nan"))}, "NaN"),
])
def test_local_share_and_spread_refuses_bad_input_by_name(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        local_share_and_spread(**kwargs)


# ----------------------------------------------------------------------------- coreference heads
from mha_lib.analysis import Case, antecedent_accuracy, antecedent_baselines, antecedent_rule_hits  # noqa: E402

# "The trophy did not fit in the suitcase because it was too big": words 1 trophy, 6 suitcase, 8 it
BIG = Case(pronoun=8, candidates=(1, 6), answer=1, agrees=(True, True))
SMALL = Case(pronoun=8, candidates=(1, 6), answer=6, agrees=(True, True))


def _pronoun_rows(W, pronoun, weights_by_head):
    """(1, H, W, W) maps: row `pronoun` of head h is weights_by_head[h] ({word: weight}, the rest on word 0)."""
    maps = torch.zeros(1, len(weights_by_head), W, W)
    maps[..., 0] = 1.0
    for h, spec in enumerate(weights_by_head):
        maps[0, h, pronoun] = 0.0
        for w, x in spec.items():
            maps[0, h, pronoun, w] = x
        maps[0, h, pronoun, 0] += 1.0 - sum(spec.values())
    return maps


def test_antecedent_accuracy_chooses_among_candidates_and_keeps_the_weight_on_the_answer():
    # head 0 follows the referent (trophy when big, suitcase when small); head 1 always looks at the
    # nearest noun (suitcase) with little weight; head 2 puts most weight on [CLS]-like word 0
    big = _pronoun_rows(12, 8, [{1: 0.9}, {6: 0.2}, {1: 0.01, 6: 0.02}])
    small = _pronoun_rows(12, 8, [{6: 0.8}, {6: 0.2}, {1: 0.01, 6: 0.02}])
    r = antecedent_accuracy([big, small], [BIG, SMALL])
    assert r.cases == 2 and r.accuracy.tolist() == [[1.0, 0.5, 0.5]]
    assert r.best == ("L0.H0", 1.0) and r.interval[1] == 1.0
    assert r.weight_on_answer[:, 0, 0].tolist() == pytest.approx([0.9, 0.8])
    assert r.weight_on_answer[:, 0, 2].tolist() == pytest.approx([0.01, 0.02])  # chose right once, with 2% weight


def test_baselines_are_fooled_by_a_winograd_pair():
    got = antecedent_baselines([BIG, SMALL])
    assert got["nearest"][0] == 0.5 and got["nearest agreeing"][0] == 0.5
    # agreement settles "Anna thanked the boys because she ...": she -> Anna, not the nearer boys
    she = Case(pronoun=5, candidates=(0, 3), answer=0, agrees=(True, False))
    got = antecedent_baselines([she])
    assert got["nearest"][0] == 0.0 and got["nearest agreeing"][0] == 1.0
    # per case, for a paired test against a head: right on SMALL (the nearer suitcase), wrong on BIG
    hits = antecedent_rule_hits([BIG, SMALL, she])
    assert hits["nearest"].tolist() == [False, True, False] and hits["nearest agreeing"].tolist() == [False, True, True]
    assert hits["nearest"].dtype == torch.bool


@pytest.mark.parametrize("case, message", [
    ((8, (1, 6), 1), "a case is a mha_lib.analysis.Case"),
    (Case(8, (1,), 1), "at least two distinct candidates"),
    (Case(8, (1, 8), 1), "among its own candidates"),
    (Case(8, (1, 6), 2), "not one of the candidates"),
    (Case(8, (1, 6), 1, (True,)), "one bool per candidate"),
    (Case(8, (1, 60), 1), "word index in 0..11"),
])
def test_antecedent_accuracy_refuses_bad_cases_by_name(case, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        antecedent_accuracy([_pronoun_rows(12, 8, [{1: 0.5}])], [case])


def test_the_agreeing_baseline_needs_agreement_and_some_case():
    with pytest.raises(ValueError, match="gives no agrees"):
        antecedent_baselines([Case(8, (1, 6), 1)])
    with pytest.raises(ValueError, match="empty"):
        antecedent_baselines([])
    with pytest.raises(ValueError, match="gives no agrees"):
        antecedent_rule_hits([Case(8, (1, 6), 1)])
    with pytest.raises(ValueError, match="2 word maps but 1 cases"):
        antecedent_accuracy([_pronoun_rows(12, 8, [{1: 0.5}])] * 2, [BIG])


def test_the_shipped_pronoun_sample_is_its_tools_output_and_annotated_consistently():
    import json
    import sys
    from collections import defaultdict
    from pathlib import Path

    from mha_lib.analysis import coreference_sample

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import make_coreference_sample

    shipped = json.loads(make_coreference_sample.OUT.read_text(encoding="utf-8"))["cases"]
    assert shipped == make_coreference_sample.sample()  # the file is what the templates give
    sample = coreference_sample()
    assert len(sample) >= 200
    pairs = defaultdict(list)
    for words, case, family, pair in sample:
        assert words[case.pronoun] in {"it", "she", "he", "they"} and words[-1] == "."
        assert all(words.count(words[i]) == 1 for i in (case.pronoun, *case.candidates))
        assert max(case.candidates) < case.pronoun  # every candidate comes before its pronoun
        pairs[pair].append((case, family))
        if family in ("gender", "number"):  # agreement settles these, and only these
            assert [c == case.answer for c in case.candidates] == list(case.agrees)
        else:
            assert all(case.agrees)
    for pair, members in pairs.items():
        if members[0][1] in ("fit", "cross", "same-gender", "number"):
            assert len(members) == 2 and members[0][0].answer != members[1][0].answer, pair  # the referent moves
    # so the nearest candidate is right exactly half the time on the pair families
    flipped = [case for _, case, family, _ in sample if family in ("fit", "cross", "same-gender")]
    assert antecedent_baselines(flipped)["nearest"][0] == 0.5
    assert antecedent_baselines([c for _, c, f, _ in sample if f == "gender"])["nearest agreeing"][0] == 1.0


def test_the_shipped_parsed_sentences_are_their_tools_output_and_well_formed_trees():
    import json
    import sys
    from pathlib import Path

    from mha_lib.analysis import syntax_sample

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import make_syntax_sample

    shipped = json.loads(make_syntax_sample.OUT.read_text(encoding="utf-8"))["sentences"]
    assert shipped == json.loads(json.dumps(make_syntax_sample.sample()))  # the file is what the grammar gives
    sample = syntax_sample()
    assert len(sample) >= 500 and len({" ".join(w) for w, _, _ in sample}) == len(sample)
    labels = set()
    for words, arcs, root in sample:
        heads = {d: h for d, h, _ in arcs}
        assert len(heads) == len(arcs) == len(words) - 2  # every word has one head, but the root and "."
        assert root not in heads and words[-1] == "." and len(words) - 1 not in heads
        for d in heads:  # every word reaches the root: a tree, no cycle
            seen, w = set(), d
            while w != root:
                assert w not in seen
                seen.add(w)
                w = heads[w]
        for d, h in heads.items():  # projective: nothing between a word and its head hangs outside them
            lo, hi = min(d, h), max(d, h)
            for k in range(lo + 1, hi):
                w = k
                while w not in (lo, hi) and w != root:
                    w = heads[w]
                assert w in (lo, hi) or (w == root and root in (lo, hi)), (words, d, h, k)
        labels |= {r for _, _, r in arcs}
    assert labels == {"det", "poss", "amod", "nsubj", "dobj", "aux", "advmod", "prep", "pobj"}
    # the distances vary: no fixed offset scores every det or nsubj arc
    baseline = offset_baseline([arcs for _, arcs, _ in sample])
    assert baseline["det"][1] < 0.9 and baseline["nsubj"][1] < 0.9


# ----------------------------------------------------------------------------- sentences as words, the parsed sample
from mha_lib.analysis import parsed_sample, sentence_word_maps  # noqa: E402


def test_sentence_word_maps_in_a_batch_equal_one_sentence_at_a_time(minilm):
    bert, tokenizer = minilm
    sentences = [["The", "dogs", "were", "chasing", "a", "ball", "."], ["Unbelievably", ",", "it", "worked", "."]]
    batched = sentence_word_maps(bert, tokenizer, sentences, batch_size=2)
    for words, maps in zip(sentences, batched):
        enc = tokenizer.backend.encode(words, is_pretokenized=True)
        ids = torch.tensor([enc.ids])
        with torch.no_grad():
            out = bert(ids, token_type_ids=torch.zeros_like(ids), output_attentions=True)
        alone = torch.stack([word_attention(a[0], list(enc.word_ids)) for a in out.attentions])
        assert maps.shape == (6, 12, len(words), len(words))
        assert torch.allclose(maps, alone, atol=1e-5)  # padding in the batch changes nothing


@pytest.mark.parametrize("sentences, message", [
    ([], "empty"),
    ([["a", ""]], "non-empty str"),
    (["not a list"], "non-empty list"),
    ([["word"] * 300], "max_length"),
])
def test_sentence_word_maps_refuses_bad_sentences_by_name(minilm, sentences, message):
    bert, tokenizer = minilm
    with pytest.raises(ValueError, match=re.escape(message)):
        sentence_word_maps(bert, tokenizer, sentences)


def test_the_parsed_sample_holds_real_sentences_and_a_hand_checked_subset():
    sample = parsed_sample()
    sentences = sample["sentences"]
    assert len(sentences) >= 500 and len(sample["grammar_parses"]) == 600
    for words, arcs, root in sentences:
        assert 0 <= root < len(words)
        assert all(0 <= d < len(words) and 0 <= h < len(words) and d != h and d != root for d, h, _ in arcs)
    assert len(sample["gold"]) >= 100
    for i, (arcs, root) in sample["gold"].items():
        words = sentences[i][0]
        dependents = [d for d, _, _ in arcs]
        assert len(dependents) == len(set(dependents)) and root not in dependents
        assert all(0 <= h < len(words) for _, h, _ in arcs)
    assert "silver" in sample["about"] and sample["parser"]["licence"] == "MIT"


def test_the_parsed_sample_is_its_tools_output():
    """Its texts are what the filter keeps (on the Python that made the file); its arcs are spaCy's where installed."""
    import platform
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import make_parsed_sample

    shipped = json.loads(make_parsed_sample.OUT.read_text(encoding="utf-8"))
    if platform.python_version() != shipped["source"]["python"]:
        pytest.skip(f"the file was made on Python {shipped['source']['python']}, whose reference text may differ")
    kept = set(make_parsed_sample.prose_sentences())
    assert {s["text"] for s in shipped["sentences"]} <= kept
    spacy = pytest.importorskip("spacy")
    nlp = spacy.load(make_parsed_sample.PIPELINE)
    for s in shipped["sentences"][:20]:
        arcs, root = make_parsed_sample.arcs_of(nlp(s["text"]))
        assert (arcs, root) == (s["arcs"], s["root"])


def test_antecedent_score_says_which_cases_each_head_got_right():
    maps = [torch.tensor([[[[0.2, 0.0, 0.8], [0.1, 0.8, 0.1], [0.7, 0.2, 0.1]]]]),   # pronoun 2 -> word 0
            torch.tensor([[[[0.2, 0.0, 0.8], [0.1, 0.8, 0.1], [0.1, 0.7, 0.2]]]])]   # pronoun 2 -> word 1
    cases = [Case(2, (0, 1), 0), Case(2, (0, 1), 0)]
    score = antecedent_accuracy(maps, cases)
    assert score.correct[:, 0, 0].tolist() == [True, False]
    assert torch.equal(score.correct.double().mean(0), score.accuracy)
