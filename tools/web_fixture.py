"""The fixture of the browser code's tests (``node --test mha_lib/web/test/``): what mha_lib computes, as JSON.

Usage: python tools/web_fixture.py OUT.json

``mha_lib/web/wordpiece.mjs`` must give exactly the ids of :class:`mha_lib.pretrained.WordPieceTokenizer`,
and ``mha_lib/web/compute.mjs`` and ``compute_toys.mjs`` must compute chapters 1, 4, 5, 6 and 7's readings as mha_lib does, and
``mha_lib/web/steps.mjs`` read chapter 2's steps as :func:`mha_lib.live.steps_readings` gives them. This
script tokenizes >= 200 texts with mha_lib (accents, CJK, emoji, punctuation, long words, empty and
whitespace-only text, mixed scripts, special tokens, hostile HTML, text past 256 tokens), runs every code
point through tokenizers' normaliser and pre-tokeniser, draws task sequences with their labels, scores
random embeddings with :func:`mha_lib.live.paraphrase_scores`, runs the shipped toy models, and writes all
of it to OUT.json. The expected values are never committed: they are computed from mha_lib each time.

Who runs it: ``tests/test_web.py`` (pytest), which then runs node with ``MHA_WEB_FIXTURE=OUT.json``; and
the node tests themselves when run alone without that variable (``mha_lib/web/test/fixture.mjs`` calls
this script once and keeps its output under ``_build/web-fixture/``, keyed by the sources that make it).
"""
from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # mha_lib from this checkout
MAX_LENGTH = 256  # all-MiniLM-L6-v2: sentence-transformers' max_seq_length


@lru_cache(maxsize=1)
def _tokenizer():
    """mha_lib's tokenizer of all-MiniLM-L6-v2, and the folder holding its vocab.txt."""
    from mha_lib.pretrained import WordPieceTokenizer, resolve_checkpoint

    folder, _ = resolve_checkpoint()
    return WordPieceTokenizer.from_folder(folder, MAX_LENGTH), Path(folder)


HAND_WRITTEN = [
    "", " ", "   \t\n  ", "\u3000\u00a0\u2003", "\n",
    "The cat sat on the mat.",
    "The animal didn't cross the street because it was too tired.",
    "Anna lost her keys, so she looked for them everywhere.",
    "Café, naïve, résumé, jalapeño, Ångström, Øresund, façade, coöperate.",
    "ÀÉÎÕÜ àéîõü ÇÑ ß ẞ Œuvre Æther",
    "Ελληνικά: Σοφία ΟΔΟΣ ὁδός",  # Greek capitals, final sigma, polytonic accents
    "Русский текст: Ёлка и ЙОД.",
    "İstanbul'da ılık bir gün. IĞDIR",  # Turkish dotted/dotless i
    "日本語のテキストです。",
    "中文句子，包含标点符号！",
    "한국어 문장입니다.",
    "mixed 日本 and English, 中文 too",
    "emoji: 😀 🤖 👩🏽‍💻 🏳️‍🌈 ❤️ 🇫🇷",
    "🥲🫠🫶 newer emoji",
    "punctuation!!! ...and more?! (yes) [no] {maybe} <tag> \"quotes\" 'single' `back`",
    "dashes — – - and ellipsis … and « guillemets » „low“ ‘curly’",
    "math: 2+2=4, x^2, 3.14159, 1,000,000, 50% off, $5.99, €10, £3, ¥100",
    "email@example.com http://example.org/path?q=1&r=2#frag",
    "antidisestablishmentarianism supercalifragilisticexpialidocious",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "a" * 100,
    "b" * 101,
    "x" * 250 + " short",
    "<img src=x onerror=alert(1)>",
    "</script><script>alert('x')</script>",
    "&lt;b&gt; &amp; &quot; &#39;",
    "[CLS] hello [SEP] world [MASK] [PAD] [UNK]",
    "[cls] lower-case specials [mask]",
    "a[MASK]b [[MASK]] [MASK][MASK]",
    "[unused0] [unused12]",
    "tab\tnewline\ncarriage\rreturn",
    "zero\u200bwidth\u200cjoiner\u200dmarks\ufeffbom",
    "control\u0000chars\u0001\u0007\u001b\u007f\u0085here",
    "replacement \ufffd char",
    "soft\u00adhyphen and non\u2011breaking",
    "combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323",
    "Hangul jamo: \u1100\u1161\u11a8 and syllable \uac01",
    "Fullwidth ＡＢＣ ａｂｃ １２３ ！？",
    "ﬁ ﬂ ligatures and Ⅻ roman and ① circled",
    "Arabic: مرحبا بالعالم، كيف حالك؟",
    "Hebrew: שָׁלוֹם עולם",
    "Hindi: नमस्ते दुनिया।",
    "Thai: สวัสดีชาวโลก",
    "Devanagari with nukta: क़ ख़ ग़",
    "Private use \ue000\uf8ff and plane 15 \U000f0000",
    "Astral CJK 𠀀𠀁 𪜀 𫝀 𫠠 and compatibility 丽",
    "Math letters 𝐀𝐁𝐂 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "I.B.M. U.S.A. e.g. i.e. etc.",
    "don't can't won't it's y'all",
    "snake_case camelCase kebab-case PascalCase",
    "#hashtag @mention ~tilde |pipe| \\backslash/",
    "numbers 0 1 22 333 4444 55555 666666 7777777",
    "ALL CAPS SENTENCE WITH SHOUTING",
    "The keys that the man who lives next door lost yesterday were found under the sofa.",
]


def _random_texts(n: int, seed: int = 0):
    """``n`` texts of words drawn from many scripts and symbol blocks, seeded."""
    rng = random.Random(seed)
    blocks = [(0x20, 0x7e), (0xa0, 0x24f), (0x300, 0x36f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x6ff),
              (0x900, 0x97f), (0xe00, 0xe7f), (0x1100, 0x11ff), (0x2000, 0x206f), (0x2190, 0x22ff),
              (0x3000, 0x30ff), (0x4e00, 0x4e80), (0xac00, 0xac80), (0xff00, 0xffef), (0x1f300, 0x1f64f),
              (0x1f900, 0x1f9ff), (0x0, 0x1f)]
    texts = []
    for _ in range(n):
        words = []
        for _ in range(rng.randint(1, 12)):
            lo, hi = rng.choice(blocks)
            words.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8))))
        texts.append(rng.choice([" ", "  ", "\t", ""]).join(words))
    return texts


def texts_for_tests():
    """The >= 200 texts the JS tokenizer must get right."""
    data = ROOT / "mha_lib" / "data"
    real = [s.strip() for s in (data / "sentences.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
    triples = json.loads((data / "paraphrases.json").read_text(encoding="utf-8"))["pairs"]
    long_text = " ".join(real)  # several hundred tokens: truncated at 256
    return (HAND_WRITTEN + real[:60] + [t["a"] for t in triples[:20]] + _random_texts(120)
            + [long_text, long_text.upper(), "word " * 300, "日本" * 200])


def sweep_code_points():
    """Every code point of planes 0-3 and 14 (no surrogates), and a sample of private use."""
    cps = [c for c in range(0x40000) if not 0xD800 <= c <= 0xDFFF]
    return cps + list(range(0xE0000, 0xE0200)) + list(range(0xF0000, 0x110000, 4099))


def sweep_text(cps):
    """Each code point between two letters, space-separated: "a?b a?b ..."."""
    return " ".join("a" + chr(c) + "b" for c in cps)


def _task_cases():
    """Sequences of chapter 1's task (both ops, several V) with mha_lib's labels (None at 0)."""
    from mha_lib.tasks import PrevMarkedTask

    cases = []
    for V, L, op in [(8, 16, "sub"), (16, 16, "sub"), (5, 7, "add"), (2, 2, "sub")]:
        task = PrevMarkedTask(vocab_size=V, seq_len=L, op=op)
        batch = task.dataset(6, seed=V)
        for b in range(6):
            labels = [None if y < 0 else y for y in batch.labels[b].tolist()]
            cases.append({"task": task.to_dict(), "ids": batch.input_ids[b].tolist(),
                          "types": batch.token_type_ids[b].tolist(), "labels": labels})
    return cases


def _score_cases():
    """Random unit embeddings (some near a reference, with ties) and mha_lib.live's scores of them."""
    import torch

    from mha_lib.live import paraphrase_scores

    cases = []
    gen = torch.Generator().manual_seed(0)
    for N, d, A, noise in [(24, 16, 8, 0.3), (6, 4, 3, 1.0), (10, 8, 2, 0.0), (7, 5, 1, 2.0)]:
        ref = torch.nn.functional.normalize(torch.randn(N, d, generator=gen), dim=-1)
        emb = torch.nn.functional.normalize(ref + noise * torch.randn(N, d, generator=gen), dim=-1)
        if noise == 0.0:
            emb[A + 1] = emb[A]  # a candidate that ties with the paraphrase
        cases.append({"emb": emb.flatten().tolist(), "ref": ref.flatten().tolist(), "d": d, "A": A,
                      **paraphrase_scores(emb, ref, A)})
    return cases


def _digit_cases():
    """Chapter 7's models' attentions and logits on a few images, with what mha_lib.live.digit_readings reads."""
    import torch

    from mha_lib import tasks
    from mha_lib.live import digit_readings
    from mha_lib.model import patchify

    images, _ = tasks.SHIPPED["ch7-digits-h4"].make_task().images("test")
    blank = torch.zeros(8, 8)
    cases = []
    for name, image in [("ch7-digits-h4", images[0]), ("ch7-digits-h8", images[1]), ("ch7-digits-h1", blank)]:
        model = tasks.load_trained(name)
        with torch.no_grad():
            out = model(patchify(image[None], 1), output_attentions=True)
        cases.append({"attentions": [w[0].tolist() for w in out.attentions], "logits": out.logits[0].tolist(),
                      **digit_readings(model, image)})
    return cases


def _induction_cases():
    """Chapter 5's checkpoints' attentions and logits on sequences, heads off, and mha_lib.live.induction_readings."""
    import torch

    from mha_lib import tasks
    from mha_lib.live import induction_readings

    task = tasks.SHIPPED["ch5-induction-l2"].make_task()
    repeat = task.dataset(1, seed=3).input_ids[0].tolist()
    cases = []
    for step, ids, mask in [(2000, repeat, None), (600, repeat, [[0, 1, 1, 1], [1, 1, 0, 1]]),
                            (2000, list(range(20)), None), (0, [5, 5, 5, 5, 5], [[0, 0, 0, 0], [0, 0, 0, 0]])]:
        model = tasks.load_trained("ch5-induction-l2", step=step)
        with torch.no_grad():
            out = model(torch.tensor([ids]), head_mask=None if mask is None else torch.tensor(mask, dtype=torch.float32),
                        output_attentions=True)
        cases.append({"ids": ids, "logits": out.logits[0].flatten().tolist(),
                      "attentions": [w[0].tolist() for w in out.attentions], **induction_readings(model, ids, mask)})
    return cases


def _translation_cases():
    """Chapter 6's model: the last greedy step's logits and cross-attention, and mha_lib.live.translation_readings."""
    import torch

    from mha_lib import tasks
    from mha_lib.live import translation_readings

    task = tasks.SHIPPED["ch6-translation"].make_task()
    model = tasks.load_trained("ch6-translation")
    cases = []
    for words in ([14, 3, 18, 19], [0], list(range(12)), [5, 5, 5, 5, 5]):
        r = translation_readings(model, task, words)
        with torch.no_grad():
            out = model(torch.tensor([[task.BOS] + r["tokens"][:-1]]), src_ids=torch.tensor([r["source_ids"]]),
                        output_attentions=True)
        cases.append({"words": words, "logits": out.logits[0].flatten().tolist(), "dictionary": task.dictionary().tolist(),
                      "task": {"bos": task.BOS, "eos": task.EOS}, **r})
    return cases


def _steps_cases() -> list:
    """One layer's stages (every head, as the steps file gives them) and mha_lib.live.steps_readings of one head:
    chapter 1's toy model with and without a causal mask, and a MiniLM layer on a short sentence."""
    import torch

    from mha_lib import tasks
    from mha_lib.analysis import STAGES, layer_steps
    from mha_lib.live import steps_readings
    from mha_lib.pretrained import load_bert

    toy = tasks.load_trained("ch1-h4")
    bert, _ = load_bert(verbose=False)
    batch = bert.tokenizer(["The cat sat."], warn=False)
    cases = []
    for model, sequence, inputs, layer, head, causal in [
            (toy, {"ids": [3, 1, 4, 1, 5, 2], "types": [0, 0, 1, 0, 0, 0]},
             dict(input_ids=torch.tensor([[3, 1, 4, 1, 5, 2]]), token_type_ids=torch.tensor([[0, 0, 1, 0, 0, 0]])), 0, 2, False),
            (toy, {"ids": [7, 0, 6, 2], "types": [1, 0, 0, 0]},
             dict(input_ids=torch.tensor([[7, 0, 6, 2]]), token_type_ids=torch.tensor([[1, 0, 0, 0]])), 0, 3, True),
            (bert, "The cat sat.", dict(input_ids=batch.input_ids, token_type_ids=batch.token_type_ids), 4, 7, False)]:
        steps = layer_steps(model, layer, **inputs, causal=causal)
        outputs = {name: {"dims": list(steps[name].shape), "type": "bool" if name == "blocked" else "float32",
                          "data": steps[name].flatten().int().tolist() if name == "blocked"
                          else steps[name].flatten().tolist()} for name in STAGES}
        cases.append({"head": head, "layer": layer, "causal": causal, "outputs": outputs,
                      "readings": steps_readings(model, sequence, layer=layer, head=head, causal=causal)})
    return cases


def _onnx_cases() -> list:
    """ONNX files written by the onnx package, with and without metadata, and what they hold (onnx_file.mjs)."""
    import base64

    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                              initializer=[helper.make_tensor("w", TensorProto.FLOAT, [300], [0.5] * 300)])
    cases = []
    for meta in ({}, {"mha_lib.kind": "bert", "mha_lib.vocab_size": "30522", "mha_lib.num_heads": "12"},
                 {"ключ": "值 ✓", "": "empty key", "mha_lib.max_length": ""}):
        model = helper.make_model(graph, producer_name="test")
        onnx.helper.set_model_props(model, meta)
        data = model.SerializeToString()
        assert {p.key: p.value for p in onnx.load_from_string(data).metadata_props} == meta
        cases.append({"base64": base64.b64encode(data).decode(), "metadata": meta})
    return cases


def write_fixture(path: Path) -> dict:
    tokenizer, folder = _tokenizer()
    cases = []
    for text in texts_for_tests():
        batch = tokenizer([text], warn=False)
        n = batch.lengths[0]
        cases.append({"text": text, "ids": batch.input_ids[0, :n].tolist(), "tokens": batch.tokens[0],
                      "truncated": bool(batch.truncated[0])})
    backend = tokenizer.backend
    text = sweep_text(sweep_code_points())
    normalized = backend.normalizer.normalize_str(text)
    words = [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(normalized)]
    fixture = {"vocab": str(folder / "vocab.txt"), "max_length": tokenizer.max_length, "cases": cases,
               "sweep": {"text": text, "words": words}, "prev_marked": _task_cases(), "scores": _score_cases(),
               "digits": _digit_cases(), "induction": _induction_cases(),
               "translation": _translation_cases(), "onnx": _onnx_cases(), "steps": _steps_cases()}
    path.write_text(json.dumps(fixture, ensure_ascii=False), encoding="utf-8")
    return fixture


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    # whole or absent: a reader never sees half a file; a temporary name of its own, since node's test runner
    # runs the test files in parallel processes and each may be making the same missing fixture
    fd, name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write_fixture(tmp)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
