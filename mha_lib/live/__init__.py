"""Live views: attention maps recomputed as the reader acts, in the book's pages and in a kernel.

A live view is one HTML element, ``<div class="mha-live-view" data-view=... data-model=...
data-config=...>``, holding a static fallback figure. In the built book, ``_static/mha_book.js``
finds it and imports ``_static/live/mha_live.mjs`` (the source is ``mha_lib/web/mha_live.mjs``),
which draws the maps on canvas from the numbers in ``data-config`` -- computed here, by mha_lib,
when the notebook ran -- and loads the ONNX model (:mod:`mha_lib.export`, written to
``_static/models/`` by ``tools/export_site_models.py``) only at the reader's first action: the
reader's browser recomputes the maps (onnxruntime-web). MiniLM is served split by layer
(:func:`mha_lib.export.split_layers_for_web`: float16 weights, an embeddings file and one file per layer, the
first maps drawn after the runtime, the embeddings and one layer); the page fetches the rows of each text's
tokens from ``_static/models/all-MiniLM-L6-v2.rows/``.

In a kernel (Jupyter, Colab, VS Code) with ``anywidget`` installed (the ``viz`` extra), the same
output is also a widget, ``LiveWidget``: its ES module is the book's modules of
``mha_lib/web/`` joined in the order of ``WIDGET_MODULES`` (:func:`widget_esm`), the view
looks the same, and the kernel computes the maps -- the module sends
the model's inputs (token ids, token types, padding mask, head mask) as a widget message and
:meth:`KernelRunner.answer` runs mha_lib's own model on them (all-MiniLM-L6-v2 from
:func:`mha_lib.pretrained.load_bert`, the toy models from :func:`mha_lib.tasks.load_trained`).
``LiveView._repr_mimebundle_`` gives both: ``text/html`` (the element, which the static book
shows; ``_config.yml`` makes the html builder prefer it) and the widget's view. Without anywidget,
or outside a kernel, it is ``text/html`` only; where no script runs, the fallback figure shows.

Ten views (``data-view``):

* ``"sentence"`` -- all-MiniLM-L6-v2 on a sentence the reader types, every head of a layer
  (:func:`sentence_config`);
* ``"toy-compare"`` -- chapter 1's task (:class:`~mha_lib.tasks.PrevMarkedTask`) read by the 1-,
  2-, 4- and 8-head models side by side; the reader edits the tokens and moves the mark
  (:func:`toy_compare_config`);
* ``"prune"`` -- MiniLM with head toggles: embedding fidelity and paraphrase ranking against the
  unpruned model, and one sentence's maps (:func:`prune_config`);
* ``"timing"`` -- chapter 3's question in the reader's browser: the time of the attention function
  at equal FLOPs for H = 1 ... 64, beside the book machine's (:func:`timing_config`);
* ``"induction"`` -- chapter 5's two-layer model at each of its training checkpoints on a token
  sequence the reader edits, heads switched off at will: maps, previous-token and induction
  scores, next-token predictions (:func:`induction_config`);
* ``"translate"`` -- chapter 6's encoder-decoder on a source sentence the reader types: greedy
  decoding step by step, each step's cross-attention (:func:`translation_config`);
* ``"digit"`` -- chapter 7's Vision Transformers on an 8x8 digit the reader draws: the ten
  probabilities, each head's [CLS] attention over the pixels and the attention rollout
  (:func:`digit_config`);
* ``"patterns"`` -- chapter 9: a sparse pattern the reader picks (every key, a sliding window with
  sinks, BigBird's blocks) run on the weights of chapter 5's or 9's models: the mask, the maps, the
  predictions and the bytes a KV cache would hold (:func:`patterns_config`).
* ``"speed"`` -- "How to use the interactive figures": every view above (:func:`speed_views`) timed on the
  reader's device, its first update and later ones, beside the book's machine (:func:`speed_config`, the
  record of ``benchmarks/bench_live.py --write``).
* ``"steps"`` -- chapter 2: one head of one layer taken apart on the reader's sentence (MiniLM) or
  sequence (chapter 1's models): X, the head's Q, K and V, Q K^T, / sqrt(d_k), the mask, the softmax,
  the weighted values, the heads concatenated, the head's term through W^O and the output, step by
  step (:func:`steps_config`; the page runs the model's ``layer_inputs`` and the layer's steps file).

Usage in a chapter cell::

    from mha_lib import live
    config = live.sentence_config(bert, "The animal didn't cross the street because it was too tired.")
    live.live_view("sentence", "all-MiniLM-L6-v2", config, fallback=fig, alt=fig.alt_text)

Safety: the configuration is JSON inside an HTML attribute, escaped with ``html.escape`` (``<``,
``>``, ``&``, both quotes), so no text -- a reader's or the data's -- can end the attribute or
open a tag; the module shows every text with ``textContent``. Numbers are rounded to 4 decimals
to keep pages small; NaN and infinity are refused.

The files, each importing only those before it: ``values.py`` (a config's numbers as JSON:
:data:`DECIMALS`), ``contract.py`` (``view_contract()``, the check of a config against
``view_contract.json``), ``configs.py`` (:func:`sentence_config`, :func:`toy_compare_config`,
:func:`prune_config`, :func:`paraphrase_scores`), ``digit.py`` (chapter 7's view: :func:`digit_config`,
:func:`digit_readings`), ``induction.py`` (chapter 5's view: :func:`induction_config`,
:func:`induction_readings`, :func:`copyable_positions`), ``patterns.py`` (chapter 9's view: :func:`patterns_config`,
:func:`patterns_readings`, :func:`pattern_model`, :func:`reader_pattern_mask`, :func:`pattern_cache_bytes`),
``timing.py`` (chapter 3's view: :func:`timing_config`), ``translate.py`` (chapter 6's view:
:func:`translation_config`, :func:`translation_readings`), ``speed.py`` (the speed view: :func:`speed_views`,
:func:`speed_config`, :func:`book_speed`), ``steps.py`` (chapter 2's step-by-step view:
:func:`steps_config`, :func:`steps_readings`, :func:`steps_id`), ``esm.py`` (:func:`widget_esm`,
``WIDGET_MODULES``), ``kernel.py`` (:class:`KernelRunner`, the kernel's models and the check of
a run message's feeds), ``widget.py`` (``LiveWidget``, made on first use), ``element.py``
(:func:`live_view`, :class:`LiveView`). This module re-exports them.
"""
from __future__ import annotations

from .configs import paraphrase_scores, prune_config, sentence_config, toy_compare_config
from .digit import MAX_DIGIT_EXAMPLES, digit_config, digit_readings
from .induction import checkpoint_id, copyable_positions, induction_config, induction_readings
from .patterns import (pattern_cache_bytes, pattern_model, patterns_config, patterns_readings,
                       reader_pattern_mask)
from .steps import STEPS_SUFFIX, steps_config, steps_id, steps_readings
from .timing import timing_config
from .speed import SPEED_VIEWS, book_speed, speed_config, speed_views
from .translate import translation_config, translation_readings
from .contract import view_contract
from .element import VIEWS, WIDGET_VIEW_MIME, LiveView, live_view
from .esm import WIDGET_MODULES, widget_esm
from .kernel import MAX_KERNEL_ROWS, MAX_KERNEL_TOKENS, MINILM_ID, KernelRunner
from .values import DECIMALS
from .widget import _widget_class
from . import digit as _digit, element as _element, kernel as _kernel, speed as _speed, values as _values

# The data, bound again with their doc comments so that the API page (autodoc reads ``#:``) lists them.
#: The kinds of live view that ``mha_lib/web/mha_live.mjs`` draws (``mha_lib/live/element.py``).
VIEWS = _element.VIEWS
#: Decimals kept for every float of a configuration (for attention weights, 1e-4 is below what a
#: colour shows, and the readout prints 3 decimals).
DECIMALS = _values.DECIMALS
#: Most rows (texts) one kernel run message may hold (the prune view sends about 25).
MAX_KERNEL_ROWS = _kernel.MAX_KERNEL_ROWS
#: Most positions (rows x length, padding included) one kernel run message may hold, the prune
#: view's 25 texts at MiniLM's 256 tokens.
MAX_KERNEL_TOKENS = _kernel.MAX_KERNEL_TOKENS
#: Most example images a ``"digit"`` view carries (each is 64 numbers in the page).
MAX_DIGIT_EXAMPLES = _digit.MAX_DIGIT_EXAMPLES
#: The views the speed table times, in its order (every kind that runs a model, and chapter 3's timing).
SPEED_VIEWS = _speed.SPEED_VIEWS

__all__ = ["VIEWS", "LiveView", "live_view", "sentence_config", "toy_compare_config", "prune_config",
           "digit_config", "digit_readings", "MAX_DIGIT_EXAMPLES", "induction_config", "induction_readings",
           "copyable_positions", "checkpoint_id", "translation_config", "translation_readings",
           "timing_config", "patterns_config", "patterns_readings", "pattern_model", "reader_pattern_mask",
           "pattern_cache_bytes", "speed_views", "speed_config", "book_speed", "SPEED_VIEWS",
           "steps_config", "steps_readings", "steps_id", "STEPS_SUFFIX",
           "paraphrase_scores", "DECIMALS", "KernelRunner", "widget_esm", "MAX_KERNEL_ROWS", "MAX_KERNEL_TOKENS"]


def __getattr__(name: str):
    # ``mha_lib.live.LiveWidget``: the anywidget class, made on first use (anywidget is optional)
    if name == "LiveWidget":
        cls = _widget_class()
        if cls is None:
            raise ImportError("mha_lib.live.LiveWidget needs anywidget: pip install 'mha_lib[viz]'")
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
