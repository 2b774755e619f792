"""The browser code's own tests: ``node --test mha_lib/web/test/``, with fixtures computed here by mha_lib.

``mha_lib/web/wordpiece.mjs`` must give exactly the ids of :class:`mha_lib.pretrained.WordPieceTokenizer`,
and ``mha_lib/web/compute.mjs`` must compute chapter 1's labels and chapter 4's scores as mha_lib does.
Below the node run: the modules that :func:`mha_lib.live.widget_esm` joins declare no name twice, the
joined module needs no file beside it, and Python (``live_view``) and the page (``contract.mjs``) refuse
the same configurations, naming the same key, since both read ``mha_lib/web/view_contract.json``.
The expected values are never committed: ``tools/web_fixture.py`` computes them with mha_lib (>= 200
texts tokenized, every code point through tokenizers' normaliser and pre-tokeniser, task sequences
with their labels, scores, the shipped toy models' readings) into a temporary JSON file, and this
file runs node's test runner with ``MHA_WEB_FIXTURE`` pointing at it. pytest fails when node fails
or skips a test. (Run alone, ``node --test mha_lib/web/test/`` calls that script itself.)

``python tests/test_web.py`` prints the Unicode exception table of ``mha_lib/web/wordpiece.mjs``
(``OLD_UNICODE``) again, computed from tokenizers and Node; the sweep below fails when the
committed table is out of date.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "mha_lib" / "web"
NODE = shutil.which("node")

pytest.importorskip("tokenizers")
sys.path.insert(0, str(ROOT / "tools"))
from web_fixture import _tokenizer, texts_for_tests, write_fixture  # noqa: E402  (the fixture's writer)


def test_fixture_covers_what_the_issue_asks():
    texts = texts_for_tests()
    assert len(texts) >= 200
    for needle in ("", " ", "é", "日", "😀", "!", "<img src=x onerror=alert(1)>", "</script>", "a" * 100):
        assert any(needle in t if needle.strip() else t == needle for t in texts), needle
    tokenizer, _ = _tokenizer()
    assert any(tokenizer([t], warn=False).truncated[0] for t in texts)  # some text is cut at 256


@pytest.mark.slow
@pytest.mark.skipif(NODE is None, reason="node is not installed (the book's build needs it: npm ci)")
def test_node_tests_of_web(tmp_path):
    fixture = tmp_path / "web_fixture.json"
    write_fixture(fixture)
    env = {**os.environ, "MHA_WEB_FIXTURE": str(fixture)}
    tests = sorted(str(p) for p in (WEB / "test").glob("*.test.mjs"))
    assert tests, "no tests in mha_lib/web/test/"
    proc = subprocess.run([NODE, "--test", *tests], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"node --test failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    assert "# fail 0" in proc.stdout and "# skipped" in proc.stdout
    skipped = int(proc.stdout.split("# skipped")[1].split()[0])
    assert skipped == 0, f"node skipped {skipped} tests:\n{proc.stdout[-3000:]}"


# ----------------------------------------------------------------------------- the modules and their contract
def _top_level_names(text: str) -> list:
    """Names a module declares at its top level (column 0): functions, classes, const/let/var."""
    pattern = r"^(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\*?|class|const|let|var)\s+([A-Za-z_$][\w$]*)"
    return re.findall(pattern, text, re.M)


def test_the_widget_modules_are_every_module_and_declare_no_name_twice():
    from mha_lib.live import WIDGET_MODULES

    assert sorted(WIDGET_MODULES) == sorted(p.name for p in WEB.glob("*.mjs"))
    assert WIDGET_MODULES[-1] == "mha_live.mjs"  # the page's entry: mounting and render
    owner = {}
    for name in WIDGET_MODULES:
        for declared in _top_level_names((WEB / name).read_text(encoding="utf-8")):
            assert declared not in owner, f"{declared} is declared by {owner[declared]} and {name}"
            owner[declared] = name
    assert {"checkConfig", "kernelBackend", "mount", "render", "WordPieceTokenizer"} <= set(owner)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_widget_module_is_one_text_with_the_css_and_the_contract_inlined(tmp_path):
    from mha_lib import live

    esm = live.widget_esm()
    assert 'from "./' not in esm and "INLINE_CSS = null" not in esm and "INLINE_CONTRACT = null" not in esm
    assert json.dumps((WEB / "mha_live.css").read_text(encoding="utf-8"), ensure_ascii=False) in esm
    path = tmp_path / "widget.mjs"  # no view_contract.json beside it: the module must not need one
    path.write_text(esm, encoding="utf-8")
    script = (f"const m = await import({json.dumps(path.as_uri())});"
              "console.log(JSON.stringify([m.VIEW_CONTRACT, typeof m.default.render, typeof m.mountAll]));")
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    contract, render, mount_all = json.loads(out.stdout)
    assert contract == live.view_contract() and render == mount_all == "function"


def _map(n):
    return [[1.0 / n] * n for _ in range(n)]


_SENTENCE = {"text": "a b", "tokens": ["[CLS]", "a", "[SEP]"], "attentions": [[_map(3), _map(3)]], "layer": 0}
_PRUNE = {**_SENTENCE, "num_anchors": 1, "texts": ["a", "b", "c"], "mask": [[1, 0]], "fidelity": 0.9, "mrr": 1.0,
          "mrr_all": 1.0, "token_ids": [0, 101, 102]}
_TOY = {"models": ["ch1-h1", "ch1-h2"], "task": {"kind": "prev_marked", "vocab_size": 8, "op": "sub"}, "ids": [3, 5],
        "types": [0, 1], "results": {m: {"attentions": [[_map(2)] * h], "predictions": [0, 2], "confidence": [0.5, 0.9]}
                                     for m, h in (("ch1-h1", 1), ("ch1-h2", 2))}}
_MINILM = "all-MiniLM-L6-v2"
_INDUCTION = {"models": ["m.step0", "m.step10"], "steps": [0, 10], "checkpoint": 1,
              "task": {"vocab_size": 8, "seq_len": 4}, "ids": [1, 2, 1], "attentions": [[_map(3)] * 2] * 2,
              "mask": [[1, 1], [1, 0]], "predictions": [2, 1, 2], "confidence": [0.5, 0.5, 0.9],
              "previous": [[0.5, 0.5], [0.5, 0.5]], "induction": [[0.1, 0.2], [0.3, 0.4]], "copyable": [],
              "accuracy": 1.0}
_TRANSLATE = {"models": ["ch6-translation"], "task": {"num_words": 4, "min_words": 1, "max_words": 3, "bos": 1, "eos": 2},
              "dictionary": [0, 1, 2, 4, 3, 6, 5], "words": [0, 1], "source_ids": [3, 4, 2], "tokens": [3, 4, 2],
              "confidence": [0.9, 0.9, 0.9], "expected": [3, 4, 2],
              "cross": [[[[0.5, 0.5, 0.0]] * 3] * 2] * 2, "aligned": [[0.5, 0.5], [0.5, 0.5]]}
_TIMING = {"models": ["attention-core"], "heads": [1, 2], "d_model": 8, "seq_len": 4, "batch": 1, "repeats": 1,
           "flops": 512, "book_ms": [1.0, 2.0], "book_machine": "torch | cpu"}
_PIXELS = [0.0] * 32 + [1.0] * 32
_PATTERN = {"kind": "window", "window": 2, "sinks": 0, "block": 4}
_PATTERNS = {"models": ["a.pattern", "b.pattern"], "labels": ["every key", "window"], "trained": [_PATTERN, _PATTERN],
             "model": 0, "pattern": _PATTERN, "layouts": [{"block": 2, "seen": [[1, 0], [1, 1]]}],
             "task": {"vocab_size": 8, "seq_len": 4}, "cache": {"num_layers": 2, "num_heads": 2, "head_dim": 4,
                                                              "kv_rank": 3, "rope_dim": 2},
             **{k: v for k, v in _INDUCTION.items() if k not in ("models", "steps", "checkpoint", "mask", "task")},
             "copyable": [1], "reach": [0]}
_DIGIT = {"models": ["ch7-digits-h1", "ch7-digits-h2"], "side": 8, "pixels": _PIXELS, "label": 3,
          "examples": [{"label": 3, "pixels": _PIXELS}],
          "results": {m: {"probabilities": [0.1] * 10, "prediction": 3, "cls_self": [[0.1] * h] * 2,
                          "cls": [[_map(8)] * h] * 2, "rollout": _map(8)}
                      for m, h in (("ch7-digits-h1", 1), ("ch7-digits-h2", 2))}}


def _with(config, path, value):
    """A deep copy of ``config`` with ``value`` at ``path`` (a tuple of keys and indices); REMOVE deletes it."""
    out = json.loads(json.dumps(config))
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is REMOVE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


REMOVE = object()
#: (view, model, config, the key path both checkers must name; None: both accept it)
CONTRACT_CASES = [
    ("sentence", _MINILM, _SENTENCE, None),
    ("sentence", _MINILM, _with(_SENTENCE, ("layer",), REMOVE), None),
    ("prune", _MINILM, _PRUNE, None),
    ("prune", _MINILM, _with(_PRUNE, ("mask",), [[True, False]]), None),
    ("toy-compare", "ch1-h2", _TOY, None),
    ("toy-compare", "ch1-h1", _with(_TOY, ("ids",), [3.0, 5.0]), None),  # JSON.parse reads 3.0 as the integer 3
    ("sentence", _MINILM, {}, "'tokens'"),
    ("sentence", _MINILM, _with(_SENTENCE, ("tokens",), ["a", "b"]), "'attentions'[0][0]"),
    ("sentence", _MINILM, _with(_SENTENCE, ("tokens",), []), "'tokens'"),
    ("sentence", _MINILM, _with(_SENTENCE, ("tokens", 1), 7), "'tokens'[1]"),
    ("sentence", _MINILM, _with(_SENTENCE, ("attentions",), []), "'attentions'"),
    ("sentence", _MINILM, _with(_SENTENCE, ("attentions",), [[]]), "'attentions'[0]"),
    ("sentence", _MINILM, _with(_SENTENCE, ("attentions", 0, 1, 2), [0.5]), "'attentions'[0][1]"),
    ("sentence", _MINILM, _with(_SENTENCE, ("layer",), 1), "'layer'"),
    ("sentence", _MINILM, _with(_SENTENCE, ("roles",), [{"layer": 0, "head": 1, "role": "det"}]), None),
    ("sentence", _MINILM, _with(_SENTENCE, ("roles",), {"L0.H1": "det"}), "'roles'"),
    ("sentence", _MINILM, _with(_SENTENCE, ("roles",), [{"layer": 1, "head": 0, "role": "det"}]), "'roles'[0]['layer']"),
    ("sentence", _MINILM, _with(_SENTENCE, ("roles",), [{"layer": 0, "head": 0, "role": 3}]), "'roles'[0]['role']"),
    ("sentence", _MINILM, _with(_SENTENCE, ("layer",), -1), "'layer'"),
    ("sentence", _MINILM, _with(_SENTENCE, ("layer",), 0.5), "'layer'"),
    ("sentence", _MINILM, _with(_SENTENCE, ("text",), 3), "'text'"),
    ("sentence", "ch1-h1", _SENTENCE, "model"),
    ("prune", _MINILM, _with(_PRUNE, ("text",), REMOVE), "'text'"),
    ("prune", _MINILM, _with(_PRUNE, ("num_anchors",), 0), "'num_anchors'"),
    ("prune", _MINILM, _with(_PRUNE, ("num_anchors",), True), "'num_anchors'"),
    ("prune", _MINILM, _with(_PRUNE, ("num_anchors",), 2), "'texts'"),
    ("prune", _MINILM, _with(_PRUNE, ("texts", 0), 1), "'texts'[0]"),
    ("prune", _MINILM, _with(_PRUNE, ("mask",), [[1, 1], [1, 1]]), "'mask'"),
    ("prune", _MINILM, _with(_PRUNE, ("mask",), [[1]]), "'mask'[0]"),
    ("prune", _MINILM, _with(_PRUNE, ("mask",), [[1, 2]]), "'mask'[0][1]"),
    ("prune", _MINILM, _with(_PRUNE, ("mask",), [["1", 1]]), "'mask'[0][0]"),
    ("prune", _MINILM, _with(_PRUNE, ("mrr",), True), "'mrr'"),
    ("prune", _MINILM, _with(_PRUNE, ("fidelity",), "0.9"), "'fidelity'"),
    ("prune", _MINILM, _with(_PRUNE, ("mrr_all",), REMOVE), "'mrr_all'"),
    ("prune", _MINILM, _with(_PRUNE, ("token_ids", 1), -1), "'token_ids'[1]"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("models",), []), "'models'"),
    ("toy-compare", "ch1-h4", _TOY, "model"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("task",), "sub"), "'task'"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("task", "vocab_size"), 0), "'task'['vocab_size']"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("task", "op"), "mul"), "'task'['op']"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("ids",), []), "'ids'"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("ids", 0), 1.5), "'ids'[0]"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("types",), [0]), "'types'"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("types", 1), 2), "'types'[1]"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("types",), [False, True]), "'types'[0]"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("results",), REMOVE), "'results'"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("results", "ch1-h2"), REMOVE), "'results'['ch1-h2']"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("results", "ch1-h2", "attentions", 0, 1), _map(3)),
     "'results'['ch1-h2']['attentions'][0][1]"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("results", "ch1-h1", "predictions"), [1]), "'results'['ch1-h1']['predictions']"),
    ("toy-compare", "ch1-h1", _with(_TOY, ("results", "ch1-h1", "confidence", 0), "x"),
     "'results'['ch1-h1']['confidence'][0]"),
    ("induction", "m.step10", _INDUCTION, None),
    ("induction", "m.step0", _with(_with(_INDUCTION, ("induction",), REMOVE), ("accuracy",), REMOVE), None),
    ("induction", "m.step20", _INDUCTION, "model"),
    ("induction", "m.step0", _with(_INDUCTION, ("steps",), [0]), "'steps'"),
    ("induction", "m.step0", _with(_INDUCTION, ("checkpoint",), 2), "'checkpoint'"),
    ("induction", "m.step0", _with(_INDUCTION, ("task", "seq_len"), 1), "'task'['seq_len']"),
    ("induction", "m.step0", _with(_INDUCTION, ("ids",), [1]), "'ids'"),
    ("induction", "m.step0", _with(_INDUCTION, ("attentions", 1, 0), _map(2)), "'attentions'[1][0]"),
    ("induction", "m.step0", _with(_INDUCTION, ("mask", 1), [1]), "'mask'[1]"),
    ("induction", "m.step0", _with(_INDUCTION, ("predictions",), [2, 1]), "'predictions'"),
    ("induction", "m.step0", _with(_INDUCTION, ("previous",), [[0.5, 0.5]]), "'previous'"),
    ("induction", "m.step0", _with(_INDUCTION, ("induction", 0, 1), None), "'induction'[0][1]"),
    ("induction", "m.step0", _with(_INDUCTION, ("copyable",), [-1]), "'copyable'[0]"),
    ("induction", "m.step0", _with(_INDUCTION, ("accuracy",), "1"), "'accuracy'"),
    ("patterns", "b.pattern", _PATTERNS, None),
    ("patterns", "a.pattern", _with(_with(_PATTERNS, ("induction",), REMOVE), ("accuracy",), REMOVE), None),
    ("patterns", "c.pattern", _PATTERNS, "model"),
    ("patterns", "a.pattern", _with(_PATTERNS, ("labels",), ["x"]), "'labels'"),
    ("patterns", "a.pattern", _with(_PATTERNS, ("model",), 2), "'model'"),
    ("patterns", "a.pattern", _with(_PATTERNS, ("pattern", "kind"), "dilated"), "'pattern'['kind']"),
    ("patterns", "a.pattern", _with(_PATTERNS, ("pattern", "window"), 0), "'pattern'['window']"),
    ("patterns", "a.pattern", _with(_PATTERNS, ("trained", 1, "block"), 3), "'trained'[1]['block']"),
    ("patterns", "a.pattern", _with(_PATTERNS, ("layouts", 0, "seen", 1, 0), 2), "'layouts'[0]['seen'][1][0]"),
    ("patterns", "a.pattern", _with(_PATTERNS, ("cache", "kv_rank"), 0), "'cache'['kv_rank']"),
    ("patterns", "a.pattern", _with(_PATTERNS, ("reach",), [0, 1]), "'reach'"),
    ("patterns", "a.pattern", _with(_PATTERNS, ("attentions", 0, 1), _map(2)), "'attentions'[0][1]"),
    ("timing", "attention-core", _TIMING, None),
    ("timing", "ch1-h1", _TIMING, "model"),
    ("timing", "attention-core", _with(_TIMING, ("heads",), [1]), "'heads'"),
    ("timing", "attention-core", _with(_TIMING, ("book_ms",), [1.0]), "'book_ms'"),
    ("timing", "attention-core", _with(_TIMING, ("book_machine",), REMOVE), "'book_machine'"),
    ("translate", "ch6-translation", _TRANSLATE, None),
    ("translate", "ch1-h1", _TRANSLATE, "model"),
    ("translate", "ch6-translation", _with(_TRANSLATE, ("models",), ["ch6-translation", "x"]), "'models'"),
    ("translate", "ch6-translation", _with(_TRANSLATE, ("task", "bos"), -1), "'task'['bos']"),
    ("translate", "ch6-translation", _with(_TRANSLATE, ("words",), []), "'words'"),
    ("translate", "ch6-translation", _with(_TRANSLATE, ("confidence",), [0.9]), "'confidence'"),
    ("translate", "ch6-translation", _with(_TRANSLATE, ("cross", 1, 0), [[0.5, 0.5]] * 3), "'cross'[1][0]"),
    ("translate", "ch6-translation", _with(_TRANSLATE, ("cross", 0, 1), [[0.5, 0.5, 0.0]] * 2), "'cross'[0][1]"),
    ("translate", "ch6-translation", _with(_TRANSLATE, ("aligned",), [[0.5]]), "'aligned'"),
    ("digit", "ch7-digits-h2", _DIGIT, None),
    ("digit", "ch7-digits-h1", _with(_DIGIT, ("label",), REMOVE), None),
    ("digit", "ch7-digits-h4", _DIGIT, "model"),
    ("digit", "ch7-digits-h1", _with(_DIGIT, ("side",), 4), "'side'"),
    ("digit", "ch7-digits-h1", _with(_DIGIT, ("pixels",), _PIXELS[:63]), "'pixels'"),
    ("digit", "ch7-digits-h1", _with(_DIGIT, ("pixels", 5), "ink"), "'pixels'[5]"),
    ("digit", "ch7-digits-h1", _with(_DIGIT, ("examples",), []), "'examples'"),
    ("digit", "ch7-digits-h1", _with(_DIGIT, ("examples", 0, "label"), -1), "'examples'[0]['label']"),
    ("digit", "ch7-digits-h1", _with(_DIGIT, ("examples", 0, "pixels"), [0.5]), "'examples'[0]['pixels']"),
    ("digit", "ch7-digits-h1", _with(_DIGIT, ("results", "ch7-digits-h2", "probabilities"), [1.0]),
     "'results'['ch7-digits-h2']['probabilities']"),
    ("digit", "ch7-digits-h1", _with(_DIGIT, ("results", "ch7-digits-h1", "cls", 1, 0), _map(7)),
     "'results'['ch7-digits-h1']['cls'][1][0]"),
    ("digit", "ch7-digits-h1", _with(_DIGIT, ("results", "ch7-digits-h1", "rollout", 2), [0.1] * 7),
     "'results'['ch7-digits-h1']['rollout'][2]"),
]


@pytest.fixture(scope="module")
def js_contract_answers(tmp_path_factory):
    """checkConfig of mha_lib/web/contract.mjs on every case, in one node run: {"ok": bool, "message": str}."""
    from mha_lib.live.values import _rounded

    cases = [{"view": v, "model": m, "config": _rounded(c, "config")} for v, m, c, _ in CONTRACT_CASES]
    path = tmp_path_factory.mktemp("contract") / "cases.json"
    path.write_text(json.dumps(cases), encoding="utf-8")
    script = (f"import {{ checkConfig }} from {json.dumps((WEB / 'contract.mjs').as_uri())};"
              "import fs from 'node:fs';"
              f"const cases = JSON.parse(fs.readFileSync({json.dumps(str(path))}, 'utf8'));"
              "console.log(JSON.stringify(cases.map(({view, model, config}) => {"
              "  try { checkConfig(view, config, model); return {ok: true, message: ''}; }"
              "  catch (err) { return {ok: false, message: err.message}; } })));")
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _core(message: str) -> str:
    """A refusal without the language's prefix and its quoting of the value: "'texts' must be ..."."""
    return re.sub(r"^(data-)?config of a ['\"][\w-]+['\"] view: ", "", message).split(", got ")[0]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("index", range(len(CONTRACT_CASES)),
                         ids=[f"{v}-{p or 'valid'}-{i}" for i, (v, _, _, p) in enumerate(CONTRACT_CASES)])
def test_python_and_the_page_refuse_the_same_configs_naming_the_same_key(index, js_contract_answers):
    """mha_lib.live.live_view and contract.mjs's checkConfig read one view_contract.json: a config one
    refuses, the other refuses too, with the same words and the same key path."""
    from mha_lib import live

    view, model, config, path = CONTRACT_CASES[index]
    js = js_contract_answers[index]
    if path is None:
        live.live_view(view, model, config)
        assert js["ok"], js["message"]
        return
    with pytest.raises(ValueError) as raised:
        live.live_view(view, model, config)
    assert not js["ok"], f"the page accepts what Python refuses: {raised.value}"
    assert _core(str(raised.value)) == _core(js["message"]), (str(raised.value), js["message"])
    assert _core(js["message"]).startswith(f"{path} must be "), js["message"]


def print_unicode_table() -> None:
    """Print ``OLD_UNICODE.unassigned`` of mha_lib/web/wordpiece.mjs: the code points that tokenizers'
    tables treat as unassigned while Node's Unicode does not (merged into ranges)."""
    tokenizer, _ = _tokenizer()
    backend = tokenizer.backend
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    py = [backend.normalizer.normalize_str(t) for t in ("a" + chr(c) + "b" for c in cps)]
    script = ("import {normalize, preTokenize} from './mha_lib/web/wordpiece.mjs';"
              "import fs from 'node:fs';"
              "const texts = JSON.parse(fs.readFileSync(0, 'utf8'));"
              "process.stdout.write(JSON.stringify(texts.map((t) => [normalize(t), preTokenize(normalize(t))])));")
    # Node with an empty table: what the browser's own Unicode does.
    source = (WEB / "wordpiece.mjs").read_text(encoding="utf-8")
    start = source.index("  unassigned: [") + len("  unassigned: [")
    bare = source[:start] + source[source.index("  ],", start):]
    tmp = WEB / "_bare_wordpiece.mjs"
    tmp.write_text(bare, encoding="utf-8")
    try:
        out = subprocess.run([NODE, "--input-type=module", "-e", script.replace("wordpiece.mjs", tmp.name)],
                             input=json.dumps(["a" + chr(c) + "b" for c in cps]), capture_output=True,
                             text=True, cwd=ROOT, check=True).stdout
    finally:
        tmp.unlink()
    js = json.loads(out)

    def inert(i):  # tokenizers leaves the character alone
        t = "a" + chr(cps[i]) + "b"
        return py[i] == t and [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(py[i])] == [t]

    ranges = []  # [first, last] code points, and the index in cps of the last
    for i, c in enumerate(cps):
        pre = [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(py[i])]
        if js[i][0] == py[i] and js[i][1] == pre:
            continue
        if not inert(i):
            print(f"// not an unassigned character: U+{c:04X} tokenizers {py[i]!r} {pre}, node {js[i]}")
            continue
        if ranges and all(inert(j) for j in range(ranges[-1][2] + 1, i)):
            ranges[-1][1:] = [c, i]
        else:
            ranges.append([c, c, i])
    for k in range(0, len(ranges), 6):
        print("    " + " ".join(f"[0x{a:x}, 0x{b:x}]," for a, b, _ in ranges[k:k + 6]))


if __name__ == "__main__":
    sys.exit(print_unicode_table())
