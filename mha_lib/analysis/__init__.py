"""Reading heads: where their weight goes, and how much their values actually move.

Two questions a reader asks of a trained model, each with one function family:

1. **Where does each head look?** :func:`relation_shares` measures, for every head, the average
   share of its attention weight that lands on the previous token, the next token, the same
   token, or on tokens such as ``[CLS]``, ``[SEP]`` or ``"."`` -- the statistics of Clark et al.
   2019, "What Does BERT Look At?", section 3. :func:`find_heads` lists the heads above a
   threshold, labelled ``L{layer}.H{head}`` (both 0-based).

2. **Are the heads really different?** :func:`tie_heads` forces every head of a
   :class:`~mha_lib.core.MultiHeadAttention` to share one head's W^Q_i, W^K_i, W^V_i (kept tied during
   training), and :func:`merge_tied_heads` turns such a layer into the single head of width
   d_model/H that it equals: Concat(h, ..., h) W^O = h sum_i W^O_i. Chapter 2 uses the pair to
   show that multi-head attention is not H copies of one head.

3. **Does a large weight mean a large effect?** Not necessarily: a weight multiplies a value
   vector, and that vector can be short. Kobayashi et al. 2020, "Attention is Not Only a Weight:
   Analyzing Transformers with Vector Norms", split the attention output of query i into one
   vector per head h and key j,

       y_i = sum_h sum_j alpha_{h,ij} f_h(x_j) + b^O,    f_h(x) = (x W^V_h + b^V_h) W^O_h,

   and read ``||alpha_{h,ij} f_h(x_j)||`` (per head) or ``||sum_h alpha_{h,ij} f_h(x_j)||`` (per
   layer) instead of ``alpha``. :func:`value_norms`, :func:`norm_weighted_attention` and
   :func:`encoder_norm_maps` compute them from an mha_lib :class:`~mha_lib.core.MultiHeadAttention` /
   :class:`~mha_lib.model.Encoder`; :func:`attention_contributions` returns the vectors themselves, which sum
   (with ``b^O``) to the layer's output -- the identity the tests check.

4. **Which heads work together across layers?** :func:`previous_token_score` and
   :func:`induction_score` find previous-token and induction heads (Olsson et al. 2022);
   :func:`qk_circuit`, :func:`ov_circuit`, :func:`full_ov_circuit` and :func:`copying_score`
   read what a head matches and what it writes from its weights (Elhage et al. 2021).

5. **Heads over image patches.** :func:`attention_rollout` follows attention through the
   layers (Abnar and Zuidema 2020); :func:`offset_kernels` averages a head's weight by the
   key's offset from the query, a "kernel" per head (Cordonnier et al. 2020).

6. **Voita et al. 2019's statistics.** :func:`attention_confidence`, :func:`positional_offsets`
   and :func:`head_attention_stats`: how sharply a head attends, and whether it attends at a
   fixed offset (chapter 4 uses them as a pruning baseline); :func:`local_share_and_spread`: the
   weight on the query's neighbours and the normalised entropy of the rows, with or without sinks.

8. **One head, step by step.** :func:`attention_steps` takes one block's self-attention apart: X, the
   head's Q, K and V, Q K^T, the scaling by sqrt(d_k), the mask, the softmax, the weighted values, the
   heads concatenated, each head's term through W^O and the output (Vaswani et al. 2017, eq. 1-2);
   :func:`layer_steps` runs a model up to layer l and gives that layer's stages (chapter 2's live
   ``"steps"`` view).

7. **Do heads follow syntax?** :func:`word_attention` turns WordPiece-token maps into word maps (:func:`sentence_word_maps`
   runs an encoder on parsed sentences and gives them), :func:`syntax_sample` and :func:`parsed_sample`
   hold parsed sentences,
   :func:`relation_accuracy` scores every head on each dependency relation of parsed sentences and
   :func:`offset_baseline` gives the fixed-offset baseline (Clark et al. 2019, section 4);
   :func:`antecedent_accuracy` scores every head at choosing a pronoun's antecedent, against
   :func:`antecedent_baselines` (the nearest candidate, the nearest agreeing one; per case
   :func:`antecedent_rule_hits`).

The files: ``relations.py`` (1), ``norms.py`` (3), ``circuits.py`` (4), ``maps.py`` (5),
``statistics.py`` (6), ``dependencies.py`` and ``coreference.py`` (7), ``steps.py`` (8). :func:`tie_heads` and :func:`merge_tied_heads` (2) build models, so they
live in ``mha_lib/model/tied.py``; :func:`previous_token_score`, :func:`induction_targets` and
:func:`induction_score` (4) are the induction task's scores, in ``mha_lib/tasks/induction.py``.
Both are re-exported here.

Shapes: B batch, H heads (current, i.e. kept, heads after pruning), L queries, S keys,
d_model model width, hd head_dim. Everything works in the dtype of its inputs (float32 in the
book) and on their device.
"""
from __future__ import annotations

from ..model.tied import merge_tied_heads, tie_heads
from ..tasks.induction import induction_score, induction_targets, previous_token_score
from . import relations as _relations, steps as _steps
from .circuits import copying_score, full_ov_circuit, ov_circuit, qk_circuit
from .coreference import (AntecedentScore, Case, antecedent_accuracy, antecedent_baselines, antecedent_rule_hits,
                          coreference_sample)
from .dependencies import (RelationScore, offset_baseline, parsed_sample, relation_accuracy, sentence_word_maps,
                           syntax_sample, word_attention)
from .maps import attention_rollout, offset_kernels
from .norms import attention_contributions, encoder_norm_maps, norm_weighted_attention, value_norms
from .relations import HeadFinding, find_heads, head_label, relation_shares
from .steps import STAGES, attention_steps, layer_steps
from .statistics import (HeadStats, attention_confidence, head_attention_stats, local_share_and_spread,
                         positional_offsets)

#: The relations of Clark et al. 2019's first analyses, positional offsets and special tokens.
RELATIONS = _relations.RELATIONS
#: The stages :func:`attention_steps` returns, in the order of the computation.
STAGES = _steps.STAGES

__all__ = [
    "RELATIONS",
    "STAGES",
    "attention_steps",
    "layer_steps",
    "word_attention",
    "sentence_word_maps",
    "parsed_sample",
    "syntax_sample",
    "Case",
    "AntecedentScore",
    "antecedent_accuracy",
    "antecedent_baselines",
    "antecedent_rule_hits",
    "coreference_sample",
    "local_share_and_spread",
    "relation_accuracy",
    "offset_baseline",
    "RelationScore",
    "head_label",
    "relation_shares",
    "find_heads",
    "HeadFinding",
    "tie_heads",
    "merge_tied_heads",
    "value_norms",
    "attention_contributions",
    "norm_weighted_attention",
    "encoder_norm_maps",
    "previous_token_score",
    "induction_targets",
    "induction_score",
    "qk_circuit",
    "ov_circuit",
    "full_ov_circuit",
    "copying_score",
    "attention_rollout",
    "offset_kernels",
    "attention_confidence",
    "positional_offsets",
    "HeadStats",
    "head_attention_stats",
]
