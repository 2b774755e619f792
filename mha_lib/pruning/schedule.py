"""Iterative pruning schedules (Michel et al. 2019) and structural pruning.

:func:`pruning_schedule` prunes e.g. 10% of all heads per step, globally sorted, with or without
rescoring; :func:`prune_heads` removes the chosen heads for good.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Union

import torch
from torch import Tensor, nn

from .. import checks
from ..core.multi_head import MultiHeadAttention
from ..model.heads import HeadsSpec, _grid_values, _validated_heads, attention_layers, mask_to_heads, num_heads_grid


# ----------------------------------------------------------------------------- schedules
@dataclass
class PruningStep:
    """One step of a :func:`pruning_schedule`.

    Attributes:
        step: 0, 1, 2, ... (step 0 is the starting mask).
        mask: (num_layers, H) float32, 1 keep, 0 pruned (cumulative).
        scores: (num_layers, H) the scores used to choose this step's heads (None at step 0).
    """

    step: int
    mask: Tensor
    scores: Optional[Tensor] = None

    @property
    def num_pruned(self) -> int:
        """Heads with mask 0."""
        return int((self.mask == 0).sum())

    @property
    def fraction_pruned(self) -> float:
        """num_pruned / all heads of the grid."""
        return self.num_pruned / self.mask.numel()

    @property
    def pruned(self) -> dict:
        """The heads with mask 0 as ``{layer: [heads]}``, what :func:`prune_heads` takes."""
        return mask_to_heads(self.mask)


def pruning_schedule(
    scores: Union[Tensor, Callable[[Tensor], Tensor]],
    *,
    fraction_per_step: float = 0.1,
    max_fraction: float = 1.0,
    min_heads_per_layer: int = 0,
    initial_mask: Optional[Tensor] = None,
) -> List[PruningStep]:
    """Iterative head pruning: at each step drop the lowest-scored live heads, globally sorted.

    Michel et al. 2019 (section 4) prune 10% of all heads at each step, ranking heads of
    every layer together by their (per-layer normalised) importance. Step k has
    ``round(k * fraction_per_step * N)`` heads pruned in all, N = num_layers * H, so the
    fractions on a curve are exact, until ``max_fraction`` (or the per-layer floor) stops it.
    Values of k whose count is no larger than the previous step's are skipped, so every
    returned step prunes at least one more head and there are at most N + 1 steps: a
    ``fraction_per_step`` below 1/N gives one more head per step.

    Args:
        scores: higher = more important. Either a (num_layers, H) tensor, a fixed ranking
            (not rescored), or a callable ``scores(mask) -> (num_layers, H)`` called with
            the current mask before every step (rescored, e.g. importance recomputed on the
            masked model). NaN scores mark heads that do not exist: they start pruned.
            Ties go to the lower (layer, head).
        fraction_per_step: fraction of all N heads pruned per step, in (0, 1].
        max_fraction: stop when this fraction of heads is pruned, in [0, 1].
        min_heads_per_layer: never prune a layer below this many heads (0 allows a layer
            with no heads: its attention then outputs only W^O's bias, see
            :meth:`~mha_lib.core.MultiHeadAttention.prune_heads`).
        initial_mask: optional (num_layers, H) starting mask (0 = already pruned).

    Returns:
        list of :class:`PruningStep`, step 0 first (the initial mask), each with a
        cumulative mask. Apply one with ``head_mask=layer_head_masks(model, step.mask)`` or
        for good with ``prune_heads(model, step.pruned)``.

    Raises:
        ValueError: fractions out of range, a negative ``min_heads_per_layer``, scores not
            2-D, an ``initial_mask`` not 2-D or not of the scores' shape, or a callable
            returning another shape than ``initial_mask``.
    """
    if not 0.0 < checks.finite_real(fraction_per_step, "fraction_per_step") <= 1.0:
        raise ValueError(f"fraction_per_step must be in (0, 1], got {fraction_per_step}")
    if not 0.0 <= checks.finite_real(max_fraction, "max_fraction") <= 1.0:
        raise ValueError(f"max_fraction must be in [0, 1], got {max_fraction}")
    min_heads_per_layer = checks.nonnegative_int(min_heads_per_layer, "min_heads_per_layer")
    rescore = callable(scores)
    if rescore and initial_mask is None:
        raise ValueError(
            "a callable scores(mask) needs initial_mask, the (num_layers, H) mask of the first call; "
            "pass initial_mask=mha_lib.pruning.kept_mask(model)"
        )
    if not rescore and (not isinstance(scores, Tensor) or scores.dim() != 2):
        raise ValueError(
            f"scores must be a (num_layers, H) tensor or a callable, got {getattr(scores, 'shape', type(scores))}"
        )
    if initial_mask is not None:
        if not isinstance(initial_mask, Tensor) or initial_mask.dim() != 2:
            raise ValueError(
                f"initial_mask must be a (num_layers, H) tensor, got "
                f"{tuple(initial_mask.shape) if isinstance(initial_mask, Tensor) else type(initial_mask).__name__}"
            )
        if not rescore and tuple(initial_mask.shape) != tuple(scores.shape):
            raise ValueError(
                f"initial_mask has shape {tuple(initial_mask.shape)} but scores has shape "
                f"{tuple(scores.shape)}; both are (num_layers, H) grids"
            )
    mask = (torch.ones(scores.shape) if initial_mask is None else initial_mask).detach().float().cpu().clone()

    def get_scores(current: Tensor) -> Tensor:
        s = scores(current.clone()) if rescore else scores
        if not isinstance(s, Tensor) or tuple(s.shape) != tuple(mask.shape):
            raise ValueError(
                f"scores(mask) must return a (num_layers, H) tensor of the initial_mask's shape "
                f"{tuple(mask.shape)}, got {tuple(s.shape) if isinstance(s, Tensor) else type(s).__name__}"
            )
        return s.detach().float().cpu()

    first = get_scores(mask)
    mask[torch.isnan(first)] = 0.0
    n, H = mask.shape
    N = n * H
    steps = [PruningStep(0, mask.clone(), None)]
    limit = math.floor(max_fraction * N + 1e-9)
    current_scores = first
    rate = fraction_per_step * N  # heads per step, possibly < 1

    def target_at(k: int) -> int:
        return min(math.floor(k * rate + 0.5 + 1e-9), limit)

    k = 0
    while True:  # every pass prunes >= 1 head or stops: at most N passes
        pruned_now = int((mask == 0).sum())
        if pruned_now >= limit:
            break
        if rate < 1:  # round(k * rate) then takes every integer: one more head per step
            k, target = k + 1, pruned_now + 1
        else:  # the first k whose count exceeds what is pruned (a few tries: rate >= 1)
            k = max(k + 1, math.ceil((pruned_now + 0.5) / rate) - 1)
            while target_at(k) <= pruned_now:
                k += 1
            target = target_at(k)
        if len(steps) > 1 and rescore:  # rescore before every step but the first
            current_scores = get_scores(mask)
        s = current_scores.clone()
        s[torch.isnan(s)] = -float("inf")
        live = (mask != 0).nonzero().tolist()  # ascending (layer, head)
        # stable ascending sort by score: lowest first, ties by (layer, head)
        live.sort(key=lambda lh: float(s[lh[0], lh[1]]))
        left = (mask != 0).sum(1).tolist()
        chosen = 0
        for layer, head in live:
            if chosen == target - pruned_now:
                break
            if left[layer] <= min_heads_per_layer:
                continue
            mask[layer, head] = 0.0
            left[layer] -= 1
            chosen += 1
        if chosen == 0:
            break  # nothing left that may be pruned
        steps.append(PruningStep(len(steps), mask.clone(), current_scores.clone()))
        if chosen < target - pruned_now or target >= limit:
            break
    return steps


# ----------------------------------------------------------------------------- structural
def prune_heads(model: nn.Module, heads: HeadsSpec) -> nn.Module:
    """Remove heads for good (structural pruning), in place; returns ``model``.

    Each removed head loses its rows of W^Q (and, in plain MHA, of W^K and W^V) and its
    input columns of W^O (:meth:`~mha_lib.core.MultiHeadAttention.prune_heads`), so the model gets
    smaller and faster. The result equals masking the same heads with ``head_mask`` to
    fp32 rounding (Michel et al. 2019). Models with ``prune_heads`` record the heads in
    their config, so ``save_pretrained`` / ``mha_lib.model.load`` round-trip them.

    Pruning every head of a layer is allowed: that layer's attention then outputs W^O's
    bias at every position (zeros without bias), and its attention weights are
    (B, 0, L, L); the residual stream carries the input past it.

    Args:
        model: see :func:`~mha_lib.pruning.attention_layers`.
        heads: ``{layer: [original head ids]}``, or a grid mask (num_layers, H) whose 0
            entries are pruned. Heads already pruned are ignored.

    Raises:
        ValueError: a layer or head index out of range, naming it (nothing is pruned
            then); a mask of the wrong shape.
    """
    if isinstance(heads, Tensor):
        heads = mask_to_heads(_grid_values(heads, num_heads_grid(model), "the heads mask of prune_heads"))
    todo = _validated_heads(model, heads)  # all checked before anything changes
    if hasattr(model, "prune_heads") and not isinstance(model, MultiHeadAttention):
        model.prune_heads(todo)
    else:
        layers = attention_layers(model)
        for layer, hs in todo.items():
            layers[layer].prune_heads(hs)
    return model
