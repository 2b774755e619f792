"""Synthetic tasks that need attention relations, and the trained toy models shipped with mha_lib.

The task: previous-minus-marked
===============================

:class:`PrevMarkedTask` is chapter 1's task. It is built so that *every* labelled output needs
two different attention relations at once, and so that neither relation alone tells anything
about the label.

Input, one sequence of length L (default 16):

* ``input_ids`` (B, L) long: tokens x_0 .. x_{L-1}, drawn independently and uniformly from
  {0, ..., V-1} (default V = 16).
* ``token_type_ids`` (B, L) long: 1 at exactly one position m (the *marked* position, drawn
  uniformly from {0, ..., L-1}), 0 elsewhere. The mark is an input feature, like BERT's
  segment ids: the model adds a learned token-type embedding to the marked token.

Label at position i (``labels`` (B, L) long):

* ``op="sub"`` (default): y_i = (x_{i-1} - x_m) mod V, for i = 1 .. L-1;
* ``op="add"``: y_i = (x_{i-1} + x_m) mod V;
* y_0 = -100 (ignored: position 0 has no previous token).

Why two relations. To produce y_i, query i must read x_{i-1} (a *positional* relation: one
position back, whatever the tokens) and x_m (a *content* relation: the key that carries the
mark, wherever it is). For a fixed x_m, y_i runs over all V classes as x_{i-1} does, and vice
versa, so either token alone leaves the label uniform: a model that reads only one of them is
at chance (1/V, plus the positions i = m + 1, where both relations point at the same key and
y_i = 0 for ``"sub"``). The query's own token x_i is independent of y_i.

Why ``"sub"`` and ``"add"``. A single head gives query i one distribution over keys. If it
puts weight w on key i-1 and 1-w on key m, its output carries w v(x_{i-1}) + (1-w) v(x_m)
(plus position and mark terms that do not depend on the tokens). With w = 1/2 that sum is
symmetric in the two tokens: it tells the unordered pair {x_{i-1}, x_m}, which fixes their sum
but not their difference. ``"sub"`` therefore needs a single head to keep the order some other
way (unequal weights w != 1/2), while two heads can read the two tokens into separate output
slots. ``"add"`` is the control: there the even blend already carries everything.

Positional encoding: the models of :data:`SHIPPED` use ``EncoderConfig.positional`` as their
spec says (chapter 1's use fixed sinusoidal encodings, Vaswani et al. 2017, sec. 3.5, added to
the token and token-type embeddings).

Shipped models
==============

:data:`SHIPPED` names every trained toy model that ships as package data in
``mha_lib/weights/``: for each name, one ``<name>.v<version>.safetensors`` file with the weights
of every seed (tensor names ``seed<k>/<parameter name>``, float16 to keep the package small)
and one ``<name>.v<version>.json`` file with the model config, the task, the training recipe,
the seeds, per-seed accuracies (measured on the float16 weights) and learning curves.
:func:`load_trained` rebuilds a :class:`~mha_lib.model.TokenClassifier` from them; nothing is
loaded with pickle. ``scripts/train_all.py`` (``make train``) retrains them all with
:mod:`mha_lib.train`.

The files
=========

* ``batch.py``: :class:`TaskBatch`, ``IGNORE_INDEX``, ``EVAL_SEED``;
* one file per task: ``prev_marked.py`` (chapter 1), ``induction.py`` (chapter 5, with the
  previous-token and induction scores), ``translation.py`` (chapter 6), ``digits.py`` (chapter 7);
  ``kinds.py``: :func:`task_from_dict` and the table of task kinds (register a new task there);
* ``metrics.py``: running a model on a batch, the one loss/accuracy pair, :func:`evaluate`;
* ``heads.py``: head specialisation (:func:`target_shares`, :func:`best_heads`, attention maps);
* ``shipped.py``: :data:`SHIPPED`, :class:`TrainedSpec` and the loaders (add a chapter's trained
  family there); ``sweeps.py``: the shipped training sweeps (:func:`budget_sweep`) and run records
  (:func:`shipped_record`).
"""
from __future__ import annotations

from .. import _deprecated
from . import batch as _batch
from . import shipped as _shipped
from . import sweeps as _sweeps
from .batch import TaskBatch
from .digits import DigitsTask
from .heads import attention_maps, best_heads, logits_and_attentions, target_shares
from .induction import InductionTask, accuracy_by_copy_distance
from .kinds import task_from_dict
from .metrics import accuracy, evaluate, logits, per_example_loss
from .prev_marked import PrevMarkedTask
from .shipped import WEIGHTS_DIR, TrainedSpec, load_trained, load_trained_seeds, trained_info, weight_files
from .sweeps import BUDGET_SWEEP, RECORDS, budget_sweep, shipped_record
from .translation import TranslationTask

# The package's data, bound here with their doc comments (the API page reads them from this file).
#: Label value of positions that do not count (position 0), as in ``torch.nn.CrossEntropyLoss``.
IGNORE_INDEX = _batch.IGNORE_INDEX
#: Seed of the fixed evaluation set of :func:`evaluate` (training streams use the run's seed).
EVAL_SEED = _batch.EVAL_SEED
#: Every shipped trained model family, by name (``make train`` walks it). Chapter 1:
#: ``ch1-h{1,2,4,8}``; chapter 2: ``ch2-tied-h4``, ``ch2-narrow-h4``; chapter 3 adds
#: ``ch1-h16``, ``ch1-h32`` and ``ch3-h8-kv{4,2,1}`` (same task, d_model and recipe);
#: chapter 4 uses ``ch4-l3h8`` (3 layers x 8 heads); chapter 5 the attention-only causal models
#: ``ch5-induction-l2`` (with training checkpoints), ``ch5-induction-l2-lr1e-3`` and ``ch5-induction-l1``
#: on :class:`InductionTask`; chapter 6 the encoder-decoder ``ch6-translation`` on :class:`TranslationTask`;
#: chapter 7 the Vision Transformers ``ch7-digits-h{1,2,4,8}`` on :class:`DigitsTask`; chapter 9 the
#: cheaper-attention models ``ch9-{window4,window8,sparse4,latent,latent64,latent-rope}`` on chapter 5's task, and
#: ``ch9-{full,window8,sparse4,latent}-6k`` with three times the steps.
SHIPPED = _shipped.SHIPPED
#: The shipped run records :func:`shipped_record` reads (``mha_lib/data/<name>.json``), by name,
#: each with the script that writes it.
RECORDS = _sweeps.RECORDS

__all__ = [
    "IGNORE_INDEX",
    "EVAL_SEED",
    "TaskBatch",
    "PrevMarkedTask",
    "InductionTask",
    "accuracy_by_copy_distance",
    "TranslationTask",
    "DigitsTask",
    "task_from_dict",
    "target_shares",
    "attention_maps",
    "budget_sweep",
    "shipped_record",
    "RECORDS",
    "best_heads",
    "logits",
    "per_example_loss",
    "accuracy",
    "evaluate",
    "TrainedSpec",
    "SHIPPED",
    "WEIGHTS_DIR",
    "weight_files",
    "trained_info",
    "load_trained",
    "load_trained_seeds",
]


def __getattr__(name: str):
    return _deprecated.resolve(__name__, name)  # old names (mha_lib/_deprecated.py), with a warning
