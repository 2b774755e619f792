"""mha_lib.live: the HTML of a live view and the configurations it starts from.

Checked here: hostile text (a reader's or the data's) cannot leave the data-config attribute; the
configurations have the shapes mha_lib/web/mha_live.mjs reads ([layer][head][query][key], one row per
token) and equal mha_lib's own forward passes; bad arguments raise ValueError naming the value.
The browser side is tested in tests/test_web.py (node) and tests/browser/test_live_views.py.
"""
from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from importlib import resources

import pytest
import torch

from mha_lib import live, tasks

HOSTILE = ['"><img src=x onerror=alert(1)>', "</script><script>alert('x')</script>", "a & b ' \" < >",
           "\u2028line\u2029separators", "&quot;&amp;&lt;"]
TOYS = ["ch1-h1", "ch1-h2", "ch1-h4", "ch1-h8"]
MINILM = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def bert(minilm):
    return minilm[0]  # loaded once per session (tests/conftest.py)


class _Elements(HTMLParser):
    """Every start tag and its attributes, as a browser's parser sees them."""

    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parse(markup: str):
    p = _Elements()
    p.feed(markup)
    p.close()
    return p.tags


def minimal_config(text: str) -> dict:
    return {"text": text, "tokens": ["[CLS]", text, "[SEP]"], "attentions": [[[[1.0, 0, 0], [0.5, 0.5, 0], [0, 0, 1.0]]]]}


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_stays_inside_the_attribute(text):
    view = live.live_view("sentence", "all-MiniLM-L6-v2", minimal_config(text))
    tags = parse(view.html)
    assert [t for t, _ in tags] == ["div", "p"]  # the view and its no-script note: nothing injected
    div = tags[0][1]
    assert div["class"] == "mha-live-view" and div["data-view"] == "sentence"
    assert json.loads(div["data-config"])["text"] == text  # the browser gets the text back, unchanged
    raw = view.html.split('data-config="', 1)[1].split('"', 1)[0]
    assert "<" not in raw and ">" not in raw and '"' not in raw and "'" not in raw
    assert view._repr_mimebundle_()["text/html"] == view.html == view._repr_html_()


def test_alt_text_and_caption_are_escaped():
    png = _tiny_png()
    view = live.live_view("sentence", MINILM, minimal_config("x"), fallback=png, alt='a "quoted" <b>alt</b>',
                          caption="<script>alert(1)</script>")
    tags = parse(view.html)
    assert [t for t, _ in tags] == ["div", "img", "p", "p"]
    assert tags[1][1]["alt"] == 'a "quoted" <b>alt</b>'
    assert tags[1][1]["src"].startswith("data:image/png;base64,")
    assert "<script>" not in view.html


def _tiny_png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (2, 2)).save(buf, format="PNG")
    return buf.getvalue()


def test_numbers_are_rounded_and_tensors_become_lists():
    extra = {"x": torch.tensor([[0.123456789, -1e-9]]), "n": 3, "flag": True, "none": None}
    view = live.live_view("sentence", MINILM, {**minimal_config("x"), **extra})
    assert {k: view.config[k] for k in extra} == {"x": [[0.1235, 0.0]], "n": 3, "flag": True, "none": None}
    assert "-0.0" not in view.html


@pytest.mark.parametrize("kwargs, match", [
    (dict(view="heatmap"), "view must be one of"),
    (dict(model="../../etc/passwd"), "model must be a model id"),
    (dict(model='m" onload="x'), "model must be a model id"),
    (dict(config=[1, 2]), "config must be a dict"),
    (dict(config={"x": float("nan")}), "non-finite"),
    (dict(config={"x": [1.0, float("inf")]}), "non-finite"),
    (dict(config={"x": object()}), "holds a object"),
    (dict(config={1: 2}), "keys must be str"),
    (dict(fallback=b"GIF89a..."), "fallback must be PNG"),
    (dict(alt="a figure"), "no fallback figure"),
    (dict(caption=3), "caption must be a str"),
    (dict(config={**minimal_config("x"), "layer": 10**400}), "beyond 2\\*\\*53"),  # JSON.parse: Infinity
    (dict(config={**minimal_config("x"), "n": -(2**53)}), "beyond 2\\*\\*53"),
    (dict(config=minimal_config("a\ud800b")), "lone surrogate"),
    (dict(config={"ok\udfff": 1, **minimal_config("x")}), "lone surrogate"),
    # the keys each view draws (mha_lib/web/view_contract.json, which contract.mjs checks too), and its model
    (dict(config={}), "'tokens' must be a non-empty list"),
    (dict(config={**minimal_config("x"), "tokens": ["a", "b"]}), r"must be a 2 x 2 map"),
    (dict(config={**minimal_config("x"), "attentions": []}), "'attentions' must be a non-empty"),
    (dict(model="ch1-h1"), 'model must be "all-MiniLM-L6-v2"'),
    (dict(view="prune"), "'num_anchors' must be an integer"),
    (dict(view="prune", config={**minimal_config("x"), "num_anchors": 2, "texts": ["a", "b", "c"]}), "'texts' must"),
    (dict(view="prune", config={**minimal_config("x"), "num_anchors": 1, "texts": ["a", "b"], "mask": [[1, 1]],
                                "fidelity": 1.0, "mrr": 1.0, "mrr_all": 1.0}), r"'mask'\[0\] must be a list of 1 values"),
    (dict(view="prune", config={**minimal_config("x"), "num_anchors": 1, "texts": ["a", "b"], "mask": [[1]],
                                "fidelity": 1.0, "mrr": True, "mrr_all": 1.0}), "'mrr' must be a number"),
    (dict(view="toy-compare", model="ch1-h1"), "'models' must be a non-empty list"),
])
def test_live_view_refuses_bad_arguments(kwargs, match):
    args = dict(view="sentence", model="all-MiniLM-L6-v2", config=minimal_config("x"))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        live.live_view(args.pop("view"), args.pop("model"), args.pop("config"), **args)


def _toy_view_config() -> dict:
    return {"models": ["ch1-h1"], "task": {"vocab_size": 8, "op": "sub"}, "ids": [1, 2], "types": [0, 1],
            "results": {"ch1-h1": {"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "predictions": [3, 1],
                                   "confidence": [0.5, 0.9]}}}


def test_live_view_checks_a_toy_compare_config():
    assert live.live_view("toy-compare", "ch1-h1", _toy_view_config()).model == "ch1-h1"
    with pytest.raises(ValueError, match=r"model must be one of 'models' \[\"ch1-h1\"\], got 'ch1-h2'"):
        live.live_view("toy-compare", "ch1-h2", _toy_view_config())
    with pytest.raises(ValueError, match=r"'task'\['op'\] must be one of \"sub\", \"add\""):
        live.live_view("toy-compare", "ch1-h1", {**_toy_view_config(), "task": {"vocab_size": 8, "op": "mul"}})
    with pytest.raises(ValueError, match=r"'types' must be a list of 2 items \(ids\)"):
        live.live_view("toy-compare", "ch1-h1", {**_toy_view_config(), "types": [0]})
    with pytest.raises(ValueError, match=r"'results'\['ch1-h1'\] must be an object"):
        live.live_view("toy-compare", "ch1-h1", {**_toy_view_config(), "results": {}})
    with pytest.raises(ValueError, match=r"\['attentions'\]\[0\]\[0\] must be a 2 x 2 map"):
        live.live_view("toy-compare", "ch1-h1", {**_toy_view_config(), "results": {"ch1-h1": {"attentions": [[[1]]],
                                                                                             "predictions": [0, 0],
                                                                                             "confidence": [1, 1]}}})


def test_fallback_needs_alt_text():
    with pytest.raises(ValueError, match="alt text"):
        live.live_view("sentence", MINILM, minimal_config("x"), fallback=_tiny_png())


def test_sentence_config_equals_mha_lib(bert):
    text = "The cat sat on the mat."
    config = live.sentence_config(bert, text, layer=2)
    with torch.no_grad():
        out, batch = bert.encode_text([text], output_attentions=True)
    L = len(batch.tokens[0])
    assert config["tokens"] == batch.tokens[0] and config["layer"] == 2 and not config["truncated"]
    att = torch.tensor(config["attentions"])
    assert att.shape == (6, 12, L, L)
    assert torch.allclose(att, torch.stack([a[0] for a in out.attentions]), atol=1e-6)
    view = live.live_view("sentence", "all-MiniLM-L6-v2", config)
    stored = torch.tensor(json.loads(html.unescape(re.search(r'data-config="([^"]*)"', view.html).group(1)))["attentions"])
    assert (stored - att).abs().max() <= 5e-5 + 1e-6  # rounded to 4 decimals (plus float32 storage)


@pytest.mark.parametrize("kwargs, match", [
    (dict(text=""), "is empty"),
    (dict(text="   "), "is empty"),
    (dict(text=None), "must be a str"),
    (dict(layer=6), "out of range"),
    (dict(layer=1.0), "layer must be an integer"),
    (dict(text="a\ud800b"), "lone surrogate"),
])
def test_sentence_config_refuses_bad_arguments(bert, kwargs, match):
    args = dict(text="A sentence.", layer=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        live.sentence_config(bert, args.pop("text"), **args)


def test_sentence_config_carries_the_books_head_roles(bert):
    config = live.sentence_config(bert, "The cat sat on the mat.", roles={"L3.H1": "det", "L2.H0": " pobj dobj "})
    assert config["roles"] == [{"layer": 3, "head": 1, "role": "det"}, {"layer": 2, "head": 0, "role": "pobj dobj"}]
    live.live_view("sentence", "all-MiniLM-L6-v2", config)  # the contract takes them


@pytest.mark.parametrize("roles, match", [
    ({"L6.H0": "det"}, "'L6.H0' is not a head of this model"),
    ({"L0.H12": "det"}, "'L0.H12' is not a head"),
    ({"3.1": "det"}, "'3.1' is not a head"),
    ({"L0.H0": ""}, "a role is a name of 1 to 24 characters"),
    ({"L0.H0": "x" * 25}, "1 to 24 characters"),
    ({"L0.H0": 5}, "1 to 24 characters"),
    (["L0.H0"], "roles must be a dict"),
])
def test_sentence_config_refuses_bad_roles_by_name(bert, roles, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        live.sentence_config(bert, "A sentence.", roles=roles)


@pytest.mark.parametrize("model", [lambda: tasks.load_trained("ch1-h1"), lambda: None, lambda: "bert"])
def test_sentence_config_needs_a_bert_encoder(model):
    with pytest.raises(ValueError, match="bert must be a mha_lib.pretrained.BertEncoder"):
        live.sentence_config(model(), "A sentence.")


def test_toy_compare_config_equals_mha_lib():
    task = tasks.SHIPPED["ch1-h1"].make_task()
    batch = task.dataset(3, seed=5)
    config = live.toy_compare_config(TOYS, batch, index=2)
    assert config["models"] == TOYS and config["task"] == task.to_dict()
    assert config["ids"] == batch.input_ids[2].tolist() and config["types"] == batch.token_type_ids[2].tolist()
    assert config["labels"] == batch.labels[2].tolist()
    for name in TOYS:
        model = tasks.load_trained(name)
        with torch.no_grad():
            logits, attentions = tasks.logits_and_attentions(model, batch[2:3])
        r = config["results"][name]
        H = tasks.SHIPPED[name].model["num_heads"]
        assert torch.tensor(r["attentions"]).shape == (1, H, 16, 16)
        assert torch.allclose(torch.tensor(r["attentions"]), attentions[0][0][None], atol=1e-6)
        assert r["predictions"] == logits[0].argmax(-1).tolist()
        assert all(0 < c <= 1 for c in r["confidence"])


@pytest.mark.parametrize("names, match", [
    ([], "spec_names is empty"),
    (["ch1-h3"], "not a shipped model"),
    (["ch1-h1", "ch5-induction-l2"], "different tasks"),
    (["ch5-induction-l2"], "edits chapter 1's PrevMarkedTask"),
    (None, "spec_names must be a list"),
    ([["ch1-h1"]], "spec_names must hold names"),
    ([1], "spec_names must hold names"),
    (["ch1-h1", "ch1-h1"], "names a model twice"),
])
def test_toy_compare_config_refuses_bad_names(names, match):
    batch = tasks.SHIPPED["ch1-h1"].make_task().dataset(1, seed=0)
    with pytest.raises(ValueError, match=match):
        live.toy_compare_config(names, batch)


def test_toy_compare_config_refuses_bad_batches():
    batch = tasks.SHIPPED["ch1-h1"].make_task().dataset(2, seed=0)
    with pytest.raises(ValueError, match="index=2 is out of range"):
        live.toy_compare_config(["ch1-h1"], batch, index=2)
    with pytest.raises(ValueError, match="no token_type_ids"):
        live.toy_compare_config(["ch1-h1"], batch._replace(token_type_ids=None))
    for bad in (None, {"input_ids": batch.input_ids}, tuple(batch)):
        with pytest.raises(ValueError, match="batch must be a mha_lib.tasks.TaskBatch"):
            live.toy_compare_config(["ch1-h1"], bad)
    with pytest.raises(ValueError, match="input_ids must be an integer tensor"):
        live.toy_compare_config(["ch1-h1"], batch._replace(input_ids=batch.input_ids.float()))


def _other(**task) -> "tasks.TaskBatch":
    return tasks.PrevMarkedTask(**{"vocab_size": 8, "seq_len": 16, "op": "sub", **task}).dataset(2, seed=1)


def _marks(*positions) -> "tasks.TaskBatch":
    batch = _other()
    types = torch.zeros_like(batch.token_type_ids)
    types[0, list(positions)] = 1
    return batch._replace(token_type_ids=types)


@pytest.mark.parametrize("make, match", [
    (lambda: _other(op="add"), r"batch.labels row 0 are not the labels of the task .*'op': 'sub'"),
    (lambda: _other(vocab_size=16), r"outside \[0, vocab_size=8\)"),
    (lambda: _other(seq_len=5), "length 5, .* seq_len=16"),
    (lambda: _marks(), "row 0 is .*exactly one mark"),
    (lambda: _marks(3, 5), "row 0 is .*exactly one mark"),
    (lambda: _other()._replace(labels=_other().labels.roll(1, 1)), "are not the labels"),
])
def test_toy_compare_config_refuses_a_batch_of_another_task(make, match):
    """The config says the task is the models' (op "sub"); ids, marks and labels must be that task's."""
    with pytest.raises(ValueError, match=match):
        live.toy_compare_config(["ch1-h1"], make())


def test_toy_compare_config_checks_the_models_it_is_given():
    batch = _other()
    h1 = tasks.load_trained("ch1-h1")
    config = live.toy_compare_config(["ch1-h1"], batch, models={"ch1-h1": h1})  # the right one is taken
    assert len(config["results"]["ch1-h1"]["attentions"][0]) == 1
    with pytest.raises(ValueError, match=r"models\['ch1-h1'\] is not a ch1-h1 model: it has \{'num_heads': 8\}"):
        live.toy_compare_config(["ch1-h1"], batch, models={"ch1-h1": tasks.load_trained("ch1-h8")})
    with pytest.raises(ValueError, match="not a ch4-l3h8 model: it has .*'num_layers': 1"):
        live.toy_compare_config(["ch4-l3h8"], batch, models={"ch4-l3h8": tasks.load_trained("ch1-h8")})
    with pytest.raises(ValueError, match="models must be a dict"):
        live.toy_compare_config(["ch1-h1"], batch, models=[h1])
    for bad in ("x", None, torch.nn.Linear(2, 2)):
        with pytest.raises(ValueError, match=r"models\['ch1-h1'\] must be a mha_lib TokenClassifier"):
            live.toy_compare_config(["ch1-h1"], batch, models={"ch1-h1": bad})
    with pytest.raises(ValueError, match="models has 'ch1-h2', which is not in spec_names"):
        live.toy_compare_config(["ch1-h1"], batch, models={"ch1-h2": tasks.load_trained("ch1-h2")})


def test_paraphrase_scores_by_hand():
    ref = torch.eye(4)  # anchors 0, 1; paraphrases 2, 3
    emb = torch.nn.functional.normalize(torch.tensor([[1.0, 0, 1, 0], [0, 1, 0.5, 1], [1, 0, 1, 0], [0, 1, 0, 1]]), dim=-1)
    s = live.paraphrase_scores(emb, ref, 2)
    # anchor 0: its paraphrase (text 2) is its twin: rank 1; anchor 1: text 3 is closer than text 2: rank 1
    assert s["mrr"] == pytest.approx(1.0)
    assert s["fidelity"] == pytest.approx(float(torch.nn.functional.cosine_similarity(emb, ref).mean()))
    swapped = emb[[0, 1, 3, 2]]  # now each anchor's paraphrase ranks second
    assert live.paraphrase_scores(swapped, ref, 2)["mrr"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="cannot hold 3 anchors"):
        live.paraphrase_scores(emb, ref, 3)
    with pytest.raises(ValueError, match="one shape"):
        live.paraphrase_scores(emb, ref[:3], 1)


def test_prune_config_with_a_mask_equals_mha_lib(bert):
    pairs = json.loads((resources.files("mha_lib") / "data" / "paraphrases.json").read_text(encoding="utf-8"))["pairs"][:4]
    anchors, paras, negs = [p["a"] for p in pairs], [p["b"] for p in pairs], [p["negative"] for p in pairs]
    mask = torch.ones(6, 12)
    mask[0, :6] = 0
    mask[3, 2] = 0
    config = live.prune_config(bert, "She caught the last bus.", anchors, paras, negs, mask=mask.bool())
    assert config["mask"] == mask.int().tolist() and config["num_anchors"] == 4
    assert config["texts"] == anchors + paras + negs
    texts = anchors + paras + negs
    ref = bert.sentence_embeddings(texts)
    pruned = bert.sentence_embeddings(texts, head_mask=mask)
    expected = live.paraphrase_scores(pruned, ref, 4)
    assert config["fidelity"] == pytest.approx(expected["fidelity"], abs=1e-6) and config["fidelity"] < 1
    assert config["mrr"] == pytest.approx(expected["mrr"])
    assert config["mrr_all"] == pytest.approx(live.paraphrase_scores(ref, ref, 4)["mrr"])
    with torch.no_grad():
        out, _ = bert.encode_text(["She caught the last bus."], output_attentions=True, head_mask=mask)
    assert torch.allclose(torch.tensor(config["attentions"]), torch.stack([a[0] for a in out.attentions]), atol=1e-6)
    full = live.prune_config(bert, "She caught the last bus.", anchors, paras, negs)
    assert full["fidelity"] == pytest.approx(1.0) and full["mask"] == [[1] * 12] * 6


@pytest.mark.parametrize("kwargs, match", [
    (dict(anchors=[]), "anchors is empty"),
    (dict(paraphrases=["only one"]), "2 anchors but 1 paraphrases"),
    (dict(distractors=["x", " "]), r"distractors\[1\] is empty"),
    (dict(mask=torch.ones(6, 11)), r"shape \(num_layers, H\) = \(6, 12\)"),
    (dict(mask=torch.full((6, 12), 0.5)), "0 \\(head off\\) and 1"),
    (dict(mask=[[1] * 12] * 5 + [[1] * 11]), "mask must be a \\(num_layers, H\\) = \\(6, 12\\) grid"),  # ragged
    (dict(mask=[["1"] * 12] * 6), "mask must be a \\(num_layers, H\\)"),
    (dict(mask="all"), "mask must be a \\(num_layers, H\\)"),
    (dict(anchors="ab", paraphrases="cd"), "anchors must be a list of str"),  # not read letter by letter
    (dict(paraphrases=None), "paraphrases must be a list of str"),
    (dict(distractors="xyz"), "distractors must be a list of str"),
    (dict(anchors=[1, "c d"]), r"anchors\[0\] must be a str"),
])
def test_prune_config_refuses_bad_arguments(bert, kwargs, match):
    args = dict(anchors=["a b", "c d"], paraphrases=["b a", "d c"], distractors=[], mask=None)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        live.prune_config(bert, "A sentence.", args.pop("anchors"), args.pop("paraphrases"), args.pop("distractors"),
                          **args)


def test_prune_config_takes_distractors_none_as_none(bert):
    config = live.prune_config(bert, "A sentence.", ["a b"], ["b a"], None)
    assert config["texts"] == ["a b", "b a"] and config["mrr"] == config["mrr_all"] == 1.0


@pytest.mark.parametrize("model", [lambda: tasks.load_trained("ch1-h1"), lambda: None])
def test_prune_config_needs_a_bert_encoder(model):
    with pytest.raises(ValueError, match="bert must be a mha_lib.pretrained.BertEncoder"):
        live.prune_config(model(), "A sentence.", ["a b"], ["b a"])


# ----------------------------------------------------------------------------- the digit view (chapter 7)
DIGITS = ["ch7-digits-h1", "ch7-digits-h2", "ch7-digits-h4", "ch7-digits-h8"]


def _test_digits(n=4):
    images, labels = tasks.SHIPPED["ch7-digits-h4"].make_task().images("test")
    return images[:n], labels[:n]


def test_digit_config_equals_mha_lib():
    from mha_lib.analysis import attention_rollout
    from mha_lib.model import patchify

    images, labels = _test_digits()
    config = live.digit_config(DIGITS, images, labels, index=2)
    assert config["models"] == DIGITS and config["side"] == 8 and config["label"] == int(labels[2])
    assert config["pixels"] == images[2].flatten().tolist()
    assert [x["label"] for x in config["examples"]] == labels.tolist()
    for name in DIGITS:
        model = tasks.load_trained(name)
        with torch.no_grad():
            out = model(patchify(images[2:3], 1), output_attentions=True)
        r = config["results"][name]
        H = tasks.SHIPPED[name].model["num_heads"]
        cls = torch.tensor(r["cls"])
        assert cls.shape == (2, H, 8, 8)
        assert torch.allclose(cls.flatten(2), torch.stack([w[0, :, 0, 1:] for w in out.attentions]), atol=1e-6)
        assert torch.allclose(cls.sum((-1, -2)) + torch.tensor(r["cls_self"]), torch.ones(2, H), atol=1e-5)
        assert torch.allclose(torch.tensor(r["rollout"]).flatten(), attention_rollout(out.attentions)[0, 0, 1:],
                              atol=1e-6)
        probs = out.logits[0].softmax(-1)
        assert torch.allclose(torch.tensor(r["probabilities"]), probs, atol=1e-6)
        assert r["prediction"] == int(probs.argmax())
    view = live.live_view("digit", "ch7-digits-h4", config)  # the contract holds
    assert 'data-view="digit"' in view.html


def test_digit_config_takes_loaded_models_and_checks_them():
    images, labels = _test_digits(2)
    mine = tasks.load_trained("ch7-digits-h4", 1)  # another seed than the site's
    config = live.digit_config(["ch7-digits-h4"], images, labels, models={"ch7-digits-h4": mine})
    assert config["results"]["ch7-digits-h4"] == live.digit_readings(mine, images[0])
    with pytest.raises(ValueError, match="is not a ch7-digits-h8 model"):
        live.digit_config(["ch7-digits-h8"], images, labels, models={"ch7-digits-h8": mine})
    with pytest.raises(ValueError, match="models has 'ch7-digits-h2', which is not in spec_names"):
        live.digit_config(["ch7-digits-h4"], images, labels, models={"ch7-digits-h2": mine})


@pytest.mark.parametrize("kwargs, match", [
    ({"spec_names": []}, "spec_names is empty"),
    ({"spec_names": ["ch1-h1"]}, "one-pixel patches of chapter 7's DigitsTask"),
    ({"spec_names": ["ch7-digits-h3"]}, "not a shipped model"),
    ({"spec_names": ["ch7-digits-h1", "ch7-digits-h1"]}, "names a model twice"),
    ({"images": torch.zeros(2, 8)}, r"images must be an \(N, 8, 8\) float tensor"),
    ({"images": torch.zeros(25, 8, 8), "labels": torch.zeros(25, dtype=torch.long)}, "1 <= N <= 24"),
    ({"images": torch.full((2, 8, 8), 16.0)}, r"grey levels in \[0, 1\], got \[16, 16\]"),
    ({"images": torch.full((2, 8, 8), float("nan"))}, "grey levels"),
    ({"images": torch.zeros(2, 8, 8, dtype=torch.long)}, "float tensor"),
    ({"labels": torch.tensor([3, 10])}, "labels must be 2 integer digits in 0-9"),
    ({"labels": torch.tensor([3.0, 1.0])}, "labels must be 2 integer digits"),
    ({"labels": torch.tensor([3])}, "labels must be 2 integer digits"),
    ({"index": 2}, "index=2 is out of range for 2 images"),
    ({"index": "0"}, "index"),
    ({"models": ["x"]}, "models must be a dict"),
])
def test_digit_config_refuses_bad_arguments(kwargs, match):
    images, labels = _test_digits(2)
    args = {"spec_names": ["ch7-digits-h1"], "images": images, "labels": labels, **kwargs}
    with pytest.raises(ValueError, match=match):
        live.digit_config(args.pop("spec_names"), args.pop("images"), args.pop("labels"), **args)


@pytest.mark.parametrize("image, match", [
    (torch.zeros(64), r"image must be an \(8, 8\) float tensor"),
    (torch.full((8, 8), -0.5), r"values must lie in \[0, 1\]"),
    (torch.full((8, 8), float("inf")), r"values must lie in \[0, 1\]"),
])
def test_digit_readings_refuses_bad_images_and_models(image, match):
    model = tasks.load_trained("ch7-digits-h1")
    with pytest.raises(ValueError, match=match):
        live.digit_readings(model, image)
    with pytest.raises(ValueError, match="the digit view draws one-pixel patches"):
        live.digit_readings(tasks.load_trained("ch1-h1"), torch.zeros(8, 8))
    with pytest.raises(ValueError, match="chapter-7 TokenClassifier"):
        live.digit_readings("ch7-digits-h1", torch.zeros(8, 8))


# ----------------------------------------------------------------------------- the induction view (chapter 5)
def test_copyable_positions_are_the_task_labels_on_a_repeat():
    task = tasks.SHIPPED["ch5-induction-l2"].make_task()
    batch = task.dataset(16, seed=2)
    for b in range(16):
        ids = batch.input_ids[b].tolist()
        labelled = (batch.labels[b] != tasks.IGNORE_INDEX).nonzero().flatten().tolist()
        got = live.copyable_positions(ids)
        assert set(labelled) <= set(got)  # every asked position; a repeat by chance adds more
        assert all(any(ids[j] == ids[i] and ids[j + 1] == ids[i + 1] for j in range(i)) for i in got)
    assert live.copyable_positions([4, 5, 4, 6, 4, 5]) == [4]


def test_induction_config_and_readings_equal_mha_lib():
    from mha_lib.analysis import induction_score, previous_token_score

    task = tasks.SHIPPED["ch5-induction-l2"].make_task()
    ids = task.dataset(1, seed=3).input_ids[0].tolist()
    config = live.induction_config("ch5-induction-l2", ids)
    spec = tasks.SHIPPED["ch5-induction-l2"]
    assert config["models"] == [live.checkpoint_id("ch5-induction-l2", s) for s in spec.checkpoints]
    assert config["steps"] == list(spec.checkpoints) and config["checkpoint"] == len(spec.checkpoints) - 1
    assert config["mask"] == [[1] * 4, [1] * 4] and config["ids"] == ids
    mask = torch.tensor([[0.0, 1, 1, 1], [1, 1, 1, 0]])
    for step, head_mask in [(2000, None), (600, mask)]:
        model = tasks.load_trained("ch5-induction-l2", step=step)
        r = live.induction_readings(model, ids, head_mask)
        with torch.no_grad():
            out = model(torch.tensor([ids]), head_mask=head_mask, output_attentions=True)
        assert torch.allclose(torch.tensor(r["attentions"]), torch.stack(out.attentions)[:, 0], atol=1e-6)
        assert r["predictions"] == out.logits[0].argmax(-1).tolist()
        x = torch.tensor([ids])
        assert torch.allclose(torch.tensor(r["previous"]), torch.stack([previous_token_score(w) for w in out.attentions]))
        assert torch.allclose(torch.tensor(r["induction"]), torch.stack([induction_score(w, x) for w in out.attentions]))
        right = [r["predictions"][i] == ids[i + 1] for i in r["copyable"]]
        assert r["accuracy"] == sum(right) / len(right)
    final = live.induction_readings(tasks.load_trained("ch5-induction-l2", step=2000), ids)
    assert {k: config[k] for k in final} == final
    assert final["accuracy"] == 1.0  # the trained circuit continues the repeat ...
    blind = live.induction_readings(tasks.load_trained("ch5-induction-l2", step=2000), ids, [[0] * 4, [1] * 4])
    assert blind["accuracy"] < 0.5  # ... and fails without its previous-token layer
    view = live.live_view("induction", config["models"][-1], config)
    assert 'data-view="induction"' in view.html


def test_induction_readings_leave_out_what_a_sequence_cannot_score():
    model = tasks.load_trained("ch5-induction-l2", step=0)
    r = live.induction_readings(model, list(range(10)))  # no token twice
    assert "induction" not in r and "accuracy" not in r and r["copyable"] == []


@pytest.mark.parametrize("kwargs, match", [
    ({"spec_name": "ch1-h1"}, "no training checkpoints on chapter 5's InductionTask"),
    ({"spec_name": "ch5-induction-l1"}, "no training checkpoints"),
    ({"spec_name": "nope"}, "not a shipped model"),
    ({"ids": [3]}, "ids has 1 tokens; the model reads 2 to 32"),
    ({"ids": list(range(33))}, "ids has 33 tokens"),
    ({"ids": [3, 64]}, r"ids\[1\] = 64 is not a token id in \[0, 64\)"),
    ({"ids": [3, True]}, r"ids\[1\] = True is not a token id"),
    ({"ids": "3 4"}, "ids must be a list of token ids, got str"),
    ({"models": {5: None}}, r"models must be a dict \{step: model\}"),
])
def test_induction_config_refuses_bad_arguments(kwargs, match):
    args = {"spec_name": "ch5-induction-l2", "ids": [1, 2, 1, 2], **kwargs}
    with pytest.raises(ValueError, match=match):
        live.induction_config(args.pop("spec_name"), args.pop("ids"), **args)


def test_induction_readings_refuse_bad_masks_and_models():
    model = tasks.load_trained("ch5-induction-l2", step=0)
    for bad in ([[1, 1, 1, 1]], [[1, 1, 1, 2], [1, 1, 1, 1]], "on"):
        with pytest.raises(ValueError, match=r"head_mask must be a \(2, 4\) grid of 0/1"):
            live.induction_readings(model, [1, 2, 1], bad)
    with pytest.raises(ValueError, match="not a causal language model"):
        live.induction_readings(tasks.load_trained("ch1-h1"), [1, 2, 1])


# ----------------------------------------------------------------------------- the translate view (chapter 6)
def _pair(seed=1):
    task = tasks.SHIPPED["ch6-translation"].make_task()
    pair = task.dataset(1, seed=seed)
    n = int(pair.marked[0])
    return task, pair, (pair.inputs["src_ids"][0, :n] - 3).tolist()


def test_translation_readings_are_generate_and_its_cross_attention():
    task, pair, words = _pair()
    model = tasks.load_trained("ch6-translation")
    r = live.translation_readings(model, task, words)
    tokens = model.generate(pair.inputs["src_ids"], bos_id=task.BOS, max_new_tokens=task.seq_len, eos_id=task.EOS)[0]
    assert r["tokens"] == tokens[: len(r["tokens"])].tolist() and r["tokens"][-1] == task.EOS
    assert r["expected"] == pair.labels[0, : len(words) + 1].tolist()  # the task's own translation
    assert r["source_ids"] == pair.inputs["src_ids"][0, : len(words) + 1].tolist()
    with torch.no_grad():
        _, steps = model.generate(pair.inputs["src_ids"][:, : len(words) + 1], bos_id=task.BOS,
                                  max_new_tokens=len(r["tokens"]), eos_id=task.EOS, output_attentions=True)
    for t, (_, cross) in enumerate(steps):  # each step's new row, decoded with the cache
        for layer in range(2):
            assert torch.allclose(torch.tensor(r["cross"][layer])[:, t], cross[layer][0, :, 0], atol=1e-5)
    n = len(words)
    for layer in range(2):
        for h in range(4):
            want = sum(r["cross"][layer][h][j][n - 1 - j] for j in range(n)) / n
            assert r["aligned"][layer][h] == pytest.approx(want)
    config = live.translation_config("ch6-translation", words)
    assert config["words"] == words and config["dictionary"] == task.dictionary().tolist()
    assert 'data-view="translate"' in live.live_view("translate", "ch6-translation", config).html


@pytest.mark.parametrize("kwargs, match", [
    ({"spec_name": "ch1-h1"}, "a translate view runs chapter 6's TranslationTask"),
    ({"spec_name": "nope"}, "not a shipped model"),
    ({"words": []}, "words has 0 words; a source sentence has 1 to 12"),
    ({"words": list(range(13))}, "words has 13 words"),
    ({"words": [3, 24]}, r"words\[1\] = 24 is not a word number in \[0, 24\)"),
    ({"words": [3, -1]}, r"words\[1\] = -1"),
    ({"words": "s1 s2"}, "words must be a list of source word numbers"),
])
def test_translation_config_refuses_bad_arguments(kwargs, match):
    args = {"spec_name": "ch6-translation", "words": [1, 2, 3, 4], **kwargs}
    with pytest.raises(ValueError, match=match):
        live.translation_config(args.pop("spec_name"), args.pop("words"))


def test_translation_readings_refuse_other_models_and_tasks():
    task, _, words = _pair()
    with pytest.raises(ValueError, match="chapter 6's EncoderDecoder"):
        live.translation_readings(tasks.load_trained("ch1-h1"), task, words)
    with pytest.raises(ValueError, match="task must be a TranslationTask"):
        live.translation_readings(tasks.load_trained("ch6-translation"), tasks.SHIPPED["ch1-h1"].make_task(), words)


# ----------------------------------------------------------------------------- the timing view (chapter 3)
def test_timing_config_measures_every_head_count_at_equal_flops():
    config = live.timing_config((1, 4, 64), d_model=64, seq_len=16, batch=2, repeats=2)
    assert config["heads"] == [1, 4, 64] and config["flops"] == 4 * 2 * 16 * 16 * 64
    assert len(config["book_ms"]) == 3 and all(t > 0 for t in config["book_ms"])
    assert config["models"] == ["attention-core"] and "torch" in config["book_machine"]
    assert 'data-view="timing"' in live.live_view("timing", "attention-core", config).html


@pytest.mark.parametrize("kwargs, match", [
    ({"heads": (1,)}, "at least two distinct head counts, ascending"),
    ({"heads": (4, 2)}, "ascending"),
    ({"heads": (1, 3)}, r"heads \[3\] do not divide d_model=512"),
    ({"heads": (1, 64), "seq_len": 1024}, "MiB of weights; keep them below 256 MiB"),
    ({"repeats": 0}, "repeats"),
    ({"d_model": "512"}, "d_model"),
])
def test_timing_config_refuses_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        live.timing_config(**kwargs)


def test_speed_config_lists_every_kind_of_view_with_the_books_times_and_is_the_same_at_every_run(bert):
    """Issue 49, item 5: the speed view's config holds one view of each kind (each a valid config of its own), and
    the book machine's cold and warm times of each from mha_lib/data/live_speed.json; deterministic (the timing
    view's own times are the recorded ones), so the notebook's output is stable."""
    config = live.speed_config(bert)
    assert [v["view"] for v in config["views"]] == list(live.SPEED_VIEWS)
    assert [r["view"] for r in config["book"]["rows"]] == list(live.SPEED_VIEWS)
    book = live.book_speed()
    for row in config["book"]["rows"]:
        assert row["cold_ms"] == book["views"][row["view"]]["cold_ms"] > row["warm_ms"] > 0
    timing = next(v for v in config["views"] if v["view"] == "timing")
    assert timing["config"]["book_ms"] == book["timing_book_ms"]
    for v in config["views"]:  # each mounts on its own
        live.live_view(v["view"], v["model"], v["config"])
    assert "all-MiniLM-L6-v2" in config["models"] and "attention-core" in config["models"]
    view = live.live_view("speed", "all-MiniLM-L6-v2", config)
    assert view.html == live.live_view("speed", "all-MiniLM-L6-v2", live.speed_config(bert)).html


def test_speed_config_refuses_a_record_without_a_view(bert, monkeypatch):
    from mha_lib.live import speed

    record = live.book_speed()
    del record["views"]["digit"]
    monkeypatch.setattr(speed, "book_speed", lambda: record)
    with pytest.raises(ValueError, match=r"live_speed.json has no times for \['digit'\]: run benchmarks/bench_live.py"):
        live.speed_config(bert)
