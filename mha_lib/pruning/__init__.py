"""Head importance scores and pruning schedules.

Which heads matter, and what happens when the others go? This module answers with these
tools, all working on any mha_lib model whose layers are :class:`~mha_lib.core.MultiHeadAttention`
modules (:class:`~mha_lib.model.Encoder`, :class:`~mha_lib.model.TokenClassifier`,
the pretrained :class:`~mha_lib.pretrained.BertEncoder`):

* :func:`head_importance` -- Michel et al. 2019's gradient score
  ``I_h = E_x |dL(x)/d xi_h|``, one forward and one backward pass per batch;
* :func:`single_head_ablation` -- the metric with one head masked, for every head;
* Voita et al. 2019's head statistics (confidence, positional heads) live with the other head
  statistics in :mod:`mha_lib.analysis` (their old names here still work, with a
  DeprecationWarning);
* :func:`pruning_schedule` -- iterative pruning, e.g. 10% of all heads per step,
  globally sorted, with or without rescoring; :func:`prune_heads` removes the chosen
  heads for good (structural pruning);
* :class:`HardConcreteGates`, :func:`train_head_gates`, :func:`gates_for_fraction` -- Voita et
  al. 2019's pruning method: a stochastic Hard-Concrete gate per head (Louizos et al. 2018)
  trained with an L0 penalty, here on a frozen model, the penalty bisected to reach a target
  fraction of pruned heads.

Conventions (the "head grid"):
    Every score and every mask here is a (num_layers, H) tensor indexed by the ORIGINAL
    head numbers, H = the heads per layer before any pruning. Labels are "L{layer}.H{head}",
    0-based. A head that a model has already pruned structurally has score NaN and mask 0:
    NaN marks "this head does not exist", never a failed computation, and every function
    here skips those cells. Masks are float, 1 = keep, 0 = drop (the xi_h of Michel et
    al. 2019). :func:`layer_head_masks` turns a grid mask into the per-layer masks over the
    *kept* heads that ``model(..., head_mask=...)`` expects.

The files: ``importance.py`` (importance, ablation), ``schedule.py`` (schedules, structural
pruning), ``gates.py`` (Hard-Concrete gates). The head grid itself is ``mha_lib/model/heads.py``;
the cost of pruned heads (:func:`~mha_lib.cost.pruned_attention_flops`) is in :mod:`mha_lib.cost` and the
speed-up benchmark (:func:`measure_pruning_speedup`) in :mod:`mha_lib.measure`; all are
re-exported here.

Callbacks the caller writes (a few lines, see :func:`mha_lib.tasks.per_example_loss`):
    ``loss_fn(model, batch, head_mask) -> (B,)`` per-example losses, float;
    ``metric_fn(model, head_mask) -> float`` e.g. accuracy on a held-out set;
    ``attentions_fn(model, batch) -> (attentions, key_padding_mask)``.
    ``head_mask`` is a list of num_layers per-layer masks ((H_l,) or (B, H_l)), or None;
    pass it straight to the model.

Sources: Michel, Levy, Neubig, "Are Sixteen Heads Really Better than One?", NeurIPS 2019
(head masks, importance, iterative pruning); Voita, Talbot, Moiseev, Sennrich, Titov,
"Analyzing Multi-Head Self-Attention", ACL 2019 (confidence, positional heads, head gates with an
L0 penalty); Louizos, Welling, Kingma, "Learning Sparse Neural Networks through L0
Regularization", ICLR 2018 (the Hard-Concrete distribution).
"""
from __future__ import annotations

from .. import _deprecated
from ..cost import pruned_attention_flops
from ..measure import measure_pruning_speedup
from ..model.heads import HeadsSpec, attention_layers, heads_to_mask, kept_mask, layer_head_masks, mask_to_heads, num_heads_grid
from .gates import GateSearch, HardConcreteGates, gates_for_fraction, gates_for_fractions, train_head_gates
from .importance import AblationResult, head_importance, single_head_ablation
from .schedule import PruningStep, prune_heads, pruning_schedule

__all__ = [
    "attention_layers",
    "num_heads_grid",
    "kept_mask",
    "layer_head_masks",
    "heads_to_mask",
    "mask_to_heads",
    "head_importance",
    "single_head_ablation",
    "AblationResult",
    "pruning_schedule",
    "PruningStep",
    "prune_heads",
    "pruned_attention_flops",
    "measure_pruning_speedup",
    "HardConcreteGates",
    "train_head_gates",
    "GateSearch",
    "gates_for_fraction",
    "gates_for_fractions",
]


def __getattr__(name: str):
    return _deprecated.resolve(__name__, name)  # old names (mha_lib/_deprecated.py), with a warning
