"""The live views that the speed table times (issue 49): :func:`speed_views`, one of each kind, and the book
machine's times of them (:func:`book_speed`, ``mha_lib/data/live_speed.json``, written by
``benchmarks/bench_live.py --write``)."""
from __future__ import annotations

import json
from importlib import resources
from typing import Any, Dict, List, Optional

from .. import tasks
from ..measure import environment_string
from ..pretrained import load_bert
from .configs import prune_config, sentence_config, toy_compare_config
from .digit import digit_config
from .element import LiveView, live_view
from .induction import induction_config
from .patterns import patterns_config
from .timing import ATTENTION_CORE, timing_config
from .translate import translation_config

#: The views the speed table times, in its order (every kind that runs a model, and chapter 3's timing).
SPEED_VIEWS = ("sentence", "prune", "toy-compare", "timing", "induction", "translate", "digit", "patterns")
_MINILM = "all-MiniLM-L6-v2"
_SENTENCE = "The animal didn't cross the street because it was too tired."
_PRUNE_SENTENCE = "She caught the last bus and did not have to walk home."
_PATTERN_IDS = [7, 41, 3, 12, 55, 9, 30, 18, 61, 2, 44, 27, 5, 36, 50, 13, 22, 7, 41, 3, 12, 55, 9, 30, 18, 8, 19, 33,
                46, 58, 1, 24]  # chapter 9's: a segment repeated 17 tokens later


def book_speed() -> Dict[str, Any]:
    """``mha_lib/data/live_speed.json``: the book machine's cold and warm times of each speed view (ms), its parts,
    the machine and its load average when measured; ``{}`` before ``bench_live.py --write`` ran."""
    path = resources.files("mha_lib") / "data" / "live_speed.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def speed_views(bert=None, *, timing_ms: Optional[List[float]] = None) -> List[LiveView]:
    """One live view of each kind of :data:`SPEED_VIEWS`, as the chapters show them: MiniLM on a sentence
    (chapter 2's view) and with head toggles on 8 paraphrase pairs (chapter 4's), chapter 1's four toy models,
    chapter 3's timing shapes, chapter 5's twelve checkpoints, chapter 6's encoder-decoder, chapter 7's four
    ViTs and chapter 9's patterns. ``benchmarks/bench_live.py`` times each alone on a page; the speed table
    (:func:`speed_config`) times them on the reader's device.

    Args:
        bert: MiniLM (:func:`mha_lib.pretrained.load_bert`); loaded when None.
        timing_ms: the book machine's times for the timing view (one per head count, ms); None measures them
            now (:func:`timing_config`: not deterministic).

    Returns:
        a list of :class:`LiveView`, in the order of :data:`SPEED_VIEWS`.
    """
    if bert is None:
        bert, _ = load_bert(verbose=False)
    pairs = json.loads((resources.files("mha_lib") / "data" / "paraphrases.json").read_text(encoding="utf-8"))["pairs"][:8]
    toys = ["ch1-h1", "ch1-h2", "ch1-h4", "ch1-h8"]
    heads = (1, 2, 4, 8, 16, 32, 64)
    if timing_ms is None:
        timing = timing_config(heads)
    else:  # the same shapes, the recorded times: no measurement
        timing = {"models": [ATTENTION_CORE], "heads": list(heads), "d_model": 512, "seq_len": 128, "batch": 8,
                  "repeats": 5, "flops": 4 * 8 * 128 * 128 * 512, "book_ms": list(timing_ms),
                  "book_machine": environment_string()}
    repeat = tasks.SHIPPED["ch5-induction-l2"].make_task().dataset(1, seed=3).input_ids[0].tolist()
    induction = induction_config("ch5-induction-l2", repeat)
    images, labels = tasks.SHIPPED["ch7-digits-h4"].make_task().images("test")
    digits = [f"ch7-digits-h{h}" for h in (1, 2, 4, 8)]
    patterns = patterns_config(_PATTERN_IDS, {"kind": "window", "window": 8, "sinks": 0, "block": 4})
    return [
        live_view("sentence", _MINILM, sentence_config(bert, _SENTENCE)),
        live_view("prune", _MINILM, prune_config(bert, _PRUNE_SENTENCE, [p["a"] for p in pairs], [p["b"] for p in pairs],
                                                 [p["negative"] for p in pairs])),
        live_view("toy-compare", toys[0], toy_compare_config(toys, tasks.SHIPPED["ch1-h1"].make_task().dataset(1, seed=0))),
        live_view("timing", ATTENTION_CORE, timing),
        live_view("induction", induction["models"][-1], induction),
        live_view("translate", "ch6-translation", translation_config("ch6-translation", [14, 3, 18, 19])),
        live_view("digit", "ch7-digits-h4", digit_config(digits, images[:10], labels[:10])),
        live_view("patterns", patterns["models"][0], patterns),
    ]


def speed_config(bert=None) -> Dict[str, Any]:
    """The initial state of a ``"speed"`` view: the views of :func:`speed_views` (their configurations, which the
    page mounts and times on the reader's device when asked) and the book machine's times of them
    (:func:`book_speed`). Deterministic: the timing view's own numbers are the recorded ones.

    Args:
        bert: MiniLM (:func:`mha_lib.pretrained.load_bert`); loaded when None.

    Returns:
        a dict with ``models`` (every model the views run), ``views`` (``[{"view", "model", "config"}]``, in the
        order of :data:`SPEED_VIEWS`) and ``book`` (``{"machine", "load_average", "runs", "rows": [{"view",
        "cold_ms", "warm_ms"}]}``: the cold update and the median warm one, ms).

    Raises:
        ValueError: ``mha_lib/data/live_speed.json`` is missing or holds no time for a view (run
            ``benchmarks/bench_live.py --write``).
    """
    book = book_speed()
    missing = [v for v in SPEED_VIEWS if v not in book.get("views", {})]
    if missing or "timing_book_ms" not in book:
        raise ValueError(f"mha_lib/data/live_speed.json has no times for {missing or ['timing_book_ms']}: run "
                         "benchmarks/bench_live.py --write on the book's machine")
    views = speed_views(bert, timing_ms=book["timing_book_ms"])
    models = []
    for v in views:
        for m in v.config.get("models", [v.model]):
            if m not in models:
                models.append(m)
    rows = [{"view": v, "cold_ms": book["views"][v]["cold_ms"], "warm_ms": book["views"][v]["warm_ms"]} for v in SPEED_VIEWS]
    return {"models": models, "views": [{"view": v.view, "model": v.model, "config": v.config} for v in views],
            "book": {"machine": book["machine"], "load_average": book["load_average"], "runs": book["runs"], "rows": rows}}
