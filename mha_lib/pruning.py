"""Head importance scores and pruning schedules.

Which heads matter, and what happens when the others go? This module answers with these
tools, all working on any mha_lib model whose layers are :class:`MultiHeadAttention`
modules (:class:`~mha_lib.model.Encoder`, :class:`~mha_lib.model.TokenClassifier`,
the pretrained :class:`~mha_lib.pretrained.BertEncoder`):

* :func:`head_importance` -- Michel et al. 2019's gradient score
  ``I_h = E_x |dL(x)/d xi_h|``, one forward and one backward pass per batch;
* :func:`single_head_ablation` -- the metric with one head masked, for every head;
* Voita et al. 2019's head statistics (confidence, positional heads) live with the other head
  statistics in :mod:`mha_lib.analysis` (their old names here still work in 0.2.0, with a
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

import math


from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import checks
from .attention import MultiHeadAttention

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

HeadsSpec = Union[Mapping[int, Iterable[int]], Tensor]


# ----------------------------------------------------------------------------- the head grid
def attention_layers(model: nn.Module) -> List[MultiHeadAttention]:
    """The model's attention modules, one per layer, in layer order.

    Args:
        model: an mha_lib ``Encoder``, ``TokenClassifier``, ``BertEncoder``, a single
            ``MultiHeadAttention`` (one layer), or any module holding MultiHeadAttention
            modules (taken in ``model.modules()`` order).

    Returns:
        list of num_layers :class:`MultiHeadAttention`.

    Raises:
        ValueError: if the model holds no MultiHeadAttention.
    """
    if isinstance(model, MultiHeadAttention):
        return [model]
    encoder = getattr(model, "encoder", model)
    blocks = getattr(encoder, "blocks", None)
    if blocks is not None and all(isinstance(getattr(b, "attn", None), MultiHeadAttention) for b in blocks):
        return [b.attn for b in blocks]
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not layers:
        raise ValueError(f"{type(model).__name__} holds no mha_lib MultiHeadAttention module")
    return layers


def num_heads_grid(model: nn.Module) -> Tuple[int, int]:
    """(num_layers, H): the shape of the head grid, H = the most heads any layer had before pruning.

    Args:
        model: see :func:`attention_layers`.

    Returns:
        A tuple of two ints ``(num_layers, H)``.

    Raises:
        ValueError: if the model holds no MultiHeadAttention (from :func:`attention_layers`).
    """
    layers = attention_layers(model)
    return len(layers), max(a.original_num_heads for a in layers)


def kept_mask(model: nn.Module) -> Tensor:
    """Grid mask of the heads that exist: (num_layers, H) float32, 1 = kept, 0 = pruned (or absent).

    Args:
        model: see :func:`attention_layers`.

    Returns:
        A (num_layers, H) float32 CPU tensor indexed by original head numbers; a layer with
        fewer than H heads before pruning has 0 in the columns it never had.

    Raises:
        ValueError: if the model holds no MultiHeadAttention (from :func:`attention_layers`).
    """
    layers = attention_layers(model)
    n, H = num_heads_grid(model)
    mask = torch.zeros(n, H)
    for i, a in enumerate(layers):
        mask[i, a.kept_heads] = 1.0
    return mask


def _grid_values(mask: Tensor, shape: Tuple[int, int], name: str = "head_mask") -> Tensor:
    """A detached float32 CPU copy of a (num_layers, H) grid mask, after checking its shape."""
    if not isinstance(mask, Tensor) or tuple(mask.shape) != tuple(shape):
        raise ValueError(
            f"{name} must be a grid mask of shape (num_layers, H) = {tuple(shape)}, indexed by original "
            f"head numbers; got {tuple(mask.shape) if isinstance(mask, Tensor) else type(mask).__name__}"
        )
    return mask.detach().float().cpu()


def layer_head_masks(model: nn.Module, mask: Optional[Tensor]) -> Optional[List[Tensor]]:
    """Turn a grid mask into the per-layer masks the model's ``head_mask=`` expects.

    Args:
        model: see :func:`attention_layers`.
        mask: (num_layers, H) or (num_layers, B, H) float over ORIGINAL head numbers, or None.

    Returns:
        None for None; else a list of num_layers tensors, (H_l,) or (B, H_l), holding the
        columns of the layer's kept heads (``attn.kept_heads`` order), on the model's device
        and dtype. Gradients flow back to ``mask``.

    Raises:
        ValueError: wrong shape, or a non-float mask.
    """
    if mask is None:
        return None
    layers = attention_layers(model)
    n, H = num_heads_grid(model)
    if not isinstance(mask, Tensor) or mask.dim() not in (2, 3) or mask.shape[0] != n or mask.shape[-1] != H:
        raise ValueError(
            f"mask must have shape (num_layers, H) = ({n}, {H}) or (num_layers, B, H), indexed by "
            f"original head numbers; got {tuple(mask.shape) if isinstance(mask, Tensor) else type(mask).__name__}"
        )
    if not mask.is_floating_point():
        raise ValueError(f"mask must be floating point (1 keep, 0 drop), got dtype {mask.dtype}")
    param = next(layers[0].parameters())
    out = []
    for i, a in enumerate(layers):
        idx = torch.tensor(a.kept_heads, dtype=torch.long, device=mask.device)
        out.append(mask[i].index_select(-1, idx).to(device=param.device, dtype=param.dtype))
    return out


def heads_to_mask(model: nn.Module, heads: Mapping[int, Iterable[int]]) -> Tensor:
    """``{layer: [heads]}`` to drop -> grid mask (num_layers, H), 0 at those heads and at pruned ones.

    Raises:
        ValueError: a layer or head index out of range (naming it).
    """
    mask = kept_mask(model)
    n, H = mask.shape
    for layer, hs in _validated_heads(model, heads).items():
        mask[layer, hs] = 0.0
    return mask


def mask_to_heads(mask: Tensor) -> dict:
    """Grid mask (num_layers, H) -> ``{layer: [heads with mask 0]}``, layers with none omitted.

    Args:
        mask: a (num_layers, H) tensor of any dtype; 0 marks a dropped head.

    Returns:
        A dict from layer (int) to the sorted list of its head numbers (ints) whose mask is 0,
        what :func:`prune_heads` takes.

    Raises:
        ValueError: ``mask`` is not a 2-D tensor (naming its shape or type).
    """
    if not isinstance(mask, Tensor) or mask.dim() != 2:
        raise ValueError(f"mask must be a (num_layers, H) tensor, got {getattr(mask, 'shape', type(mask))}")
    return {
        int(layer): [int(h) for h in (mask[layer] == 0).nonzero().flatten().tolist()]
        for layer in range(mask.shape[0])
        if bool((mask[layer] == 0).any())
    }


def _validated_heads(model: nn.Module, heads: Mapping[int, Iterable[int]]) -> dict:
    layers = attention_layers(model)
    return checks.heads_by_layer(heads, "heads", num_layers=len(layers),
                                 num_heads=lambda i: layers[i].original_num_heads)


def _batch_size(batch: Any) -> int:
    """B of a batch: the first dim of its first tensor (tensor, tuple/list, dict, or object with input_ids)."""
    if isinstance(batch, Tensor):
        return batch.shape[0]
    if isinstance(batch, Mapping):
        items = list(batch.values())
    elif isinstance(batch, (tuple, list)):
        items = list(batch)
    elif hasattr(batch, "input_ids"):
        items = [batch.input_ids]
    else:
        items = []
    for item in items:
        if isinstance(item, Tensor) and item.dim() > 0:
            return item.shape[0]
        if isinstance(item, (list, tuple)) and item and isinstance(item[0], str):
            return len(item)
    if isinstance(batch, (list, tuple)) and batch and all(isinstance(t, str) for t in batch):
        return len(batch)  # a list of texts
    raise ValueError(f"cannot tell the batch size of a {type(batch).__name__}; pass tensors or texts")


def _per_example_losses(losses: Any, batch_size: int, where: str) -> Tensor:
    """``losses`` checked as loss_fn's per-example output: a finite (B,) tensor (``where`` ends the message)."""
    if not isinstance(losses, Tensor) or tuple(losses.shape) != (batch_size,):
        raise ValueError(
            f"loss_fn must return per-example losses of shape (B,) = ({batch_size},), got "
            f"{tuple(losses.shape) if isinstance(losses, Tensor) else type(losses).__name__}"
        )
    if not torch.isfinite(losses).all():
        raise ValueError(f"loss_fn returned non-finite losses{where}: {losses.detach().cpu().tolist()}")
    return losses


# ----------------------------------------------------------------------------- importance
def head_importance(
    model: nn.Module,
    batches: Iterable[Any],
    loss_fn: Callable[[nn.Module, Any, List[Tensor]], Tensor],
    *,
    head_mask: Optional[Tensor] = None,
    normalize: bool = True,
) -> Tensor:
    r"""Head importance of Michel et al. 2019: ``I_h = E_x |dL(x)/d xi_h|``.

    For each batch, every layer gets a per-example gate ``xi`` of shape (B, H_l), filled
    with the current ``head_mask`` values (1 by default) and requiring grad. The model runs
    once, ``loss_fn`` returns the per-example losses (B,), and ONE backward pass of their
    sum gives every example's derivative in its own row: example b's loss depends only on
    row b of the gates (layers mix positions, never examples), so
    d(sum_b L_b)/d xi[b, h] = dL_b/d xi_h. The absolute values are averaged over all
    examples, then (``normalize=True``) each layer's vector is divided by its l2 norm, as
    in the paper.

    How this differs from the paper's code (and from transformers' old bertology example,
    which follows it; https://github.com/pmichel31415/are-16-heads-really-better-than-1):
    that code takes the gradient of a *batch* loss with respect to each head's context
    vectors and sums ``|<dL/d ctx_{h,t}, ctx_{h,t}>|`` over every token t, then divides by
    the token count: the absolute value is taken per token. Here it is taken per example,
    on the exact derivative dL(x)/d xi_h of that example's loss, which is the quantity the
    paper's formula states. The two can rank heads differently: per-token absolute values
    cannot cancel between the tokens of one example, per-example ones can.

    Args:
        model: see :func:`attention_layers`. Run in eval mode (dropout off) during the
            call; its mode is restored afterwards. Parameter ``.grad`` is not touched.
        batches: an iterable of batches, each passed unchanged to ``loss_fn``.
        loss_fn: ``loss_fn(model, batch, head_mask) -> (B,)`` float per-example losses,
            where ``head_mask`` is a list of per-layer (B, H_l) gates to pass as the
            model's ``head_mask=``. See :func:`mha_lib.tasks.per_example_loss`.
        head_mask: optional grid mask (num_layers, H): the gates' values, i.e. the point
            where the derivative is taken (e.g. the current mask of a pruning schedule).
        normalize: divide each layer's scores by their l2 norm (a layer whose scores are
            all 0 stays 0).

    Returns:
        float32 tensor (num_layers, H) on CPU, >= 0, indexed by original head numbers;
        NaN at heads the model has already pruned structurally.

    Raises:
        ValueError: no batches; ``loss_fn`` returning a shape other than (B,); a loss or
            gradient that is NaN or infinite; a ``head_mask`` of the wrong shape; losses that
            do not depend on any layer's gates (``loss_fn`` did not pass ``head_mask`` on to
            the model). A layer whose gates are used but get a zero gradient is not an error:
            its scores are 0.
    """
    layers = attention_layers(model)
    n, H = num_heads_grid(model)
    exists = kept_mask(model)
    base = exists.clone() if head_mask is None else _grid_values(head_mask, (n, H)) * exists
    param = next(model.parameters())
    total = torch.zeros(n, H, dtype=torch.float64)
    count = 0
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            B = _batch_size(batch)
            gates = []
            for i, a in enumerate(layers):
                row = base[i, a.kept_heads].to(device=param.device, dtype=param.dtype)  # (H_l,)
                gates.append(row.expand(B, -1).clone().requires_grad_(True))  # (B, H_l)
            with torch.enable_grad():
                losses = loss_fn(model, batch, gates)
                losses = _per_example_losses(losses, B, "")
                grads = torch.autograd.grad(losses.sum(), gates, allow_unused=True)
            # None (the gate never entered the graph) is not the same as a zero gradient (it
            # did, and the loss happens not to move with it): the first means loss_fn dropped
            # the mask, and the scores would be zeros that look like real ones.
            if any(a.kept_heads for a in layers) and all(
                g is None for a, g in zip(layers, grads) if a.kept_heads
            ):
                raise ValueError(
                    "no layer's head gates received a gradient: loss_fn's losses do not depend on "
                    "the head_mask it was given. The likely cause: loss_fn must pass head_mask to the "
                    "model, e.g. model(..., head_mask=head_mask)"
                )
            for i, (a, g) in enumerate(zip(layers, grads)):
                if g is None or not a.kept_heads:
                    continue
                if not torch.isfinite(g).all():
                    raise ValueError(f"non-finite gradient for the head gates of layer {i}")
                total[i, a.kept_heads] += g.detach().abs().sum(0).double().cpu()  # sum over examples
            count += B
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("head_importance got no batches (or only empty ones)")
    importance = (total / count).float()
    if normalize:
        norms = importance.norm(dim=1, keepdim=True)  # (num_layers, 1), l2 per layer
        importance = torch.where(norms > 0, importance / norms.clamp_min(1e-30), importance)
    importance[exists == 0] = float("nan")
    return importance


# ----------------------------------------------------------------------------- ablation
@dataclass
class AblationResult:
    """What :func:`single_head_ablation` returns.

    Attributes:
        baseline: the metric with every head on (under ``head_mask``, if one was given).
        masked: (num_layers, H) float32: the metric with that one head masked; NaN at heads
            already pruned or already masked.
    """

    baseline: float
    masked: Tensor

    @property
    def delta(self) -> Tensor:
        """masked - baseline, (num_layers, H): negative where removing the head hurts an accuracy."""
        return self.masked - self.baseline


@torch.no_grad()
def single_head_ablation(
    model: nn.Module,
    metric_fn: Callable[[nn.Module, Optional[List[Tensor]]], float],
    *,
    head_mask: Optional[Tensor] = None,
) -> AblationResult:
    """Mask each head alone and record the metric (Michel et al. 2019, section 3.2).

    Runs ``metric_fn`` 1 + (number of live heads) times, without autograd, with the model
    in eval mode (restored afterwards).

    Args:
        model: see :func:`attention_layers`.
        metric_fn: ``metric_fn(model, head_mask) -> float``: e.g. accuracy or mean loss on
            held-out data; ``head_mask`` is None or a list of per-layer (H_l,) gates to pass
            to the model. See :func:`mha_lib.tasks.accuracy`.
        head_mask: optional grid mask (num_layers, H) of heads already off; each ablation
            masks one more head on top of it.

    Returns:
        :class:`AblationResult` (``baseline``, ``masked`` (num_layers, H), ``delta``).

    Raises:
        ValueError: ``metric_fn`` returning something that is not a finite number; a
            ``head_mask`` of the wrong shape.
    """
    n, H = num_heads_grid(model)
    base = kept_mask(model) if head_mask is None else _grid_values(head_mask, (n, H)) * kept_mask(model)
    was_training = model.training
    model.eval()
    try:
        baseline = _metric(metric_fn, model, layer_head_masks(model, base) if head_mask is not None else None)
        masked = torch.full((n, H), float("nan"))
        for layer in range(n):
            for head in range(H):
                if base[layer, head] == 0:
                    continue
                m = base.clone()
                m[layer, head] = 0.0
                masked[layer, head] = _metric(metric_fn, model, layer_head_masks(model, m))
    finally:
        model.train(was_training)
    return AblationResult(baseline, masked)


def _metric(metric_fn, model, masks) -> float:
    value = metric_fn(model, masks)
    value = float(value.item() if isinstance(value, Tensor) else value)
    if not math.isfinite(value):
        raise ValueError(f"metric_fn returned a non-finite value {value}")
    return value


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
        """``{layer: [heads]}`` with mask 0: what :func:`prune_heads` takes."""
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
            :meth:`MultiHeadAttention.prune_heads`).
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
    input columns of W^O (:meth:`MultiHeadAttention.prune_heads`), so the model gets
    smaller and faster. The result equals masking the same heads with ``head_mask`` to
    fp32 rounding (Michel et al. 2019). Models with ``prune_heads`` record the heads in
    their config, so ``save_pretrained`` / ``mha_lib.model.load`` round-trip them.

    Pruning every head of a layer is allowed: that layer's attention then outputs W^O's
    bias at every position (zeros without bias), and its attention weights are
    (B, 0, L, L); the residual stream carries the input past it.

    Args:
        model: see :func:`attention_layers`.
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


# ----------------------------------------------------------------------------- Hard-Concrete (L0) gates
#: Louizos et al. 2018's defaults: temperature beta = 2/3 and the stretch interval (l, r) = (-0.1, 1.1).
HARD_CONCRETE_TEMPERATURE = 2.0 / 3.0
HARD_CONCRETE_LIMITS = (-0.1, 1.1)


class HardConcreteGates(nn.Module):
    r"""One stochastic Hard-Concrete gate per head: Voita et al. 2019's way of pruning heads.

    Every head h has a learnable location ``log_alpha[layer, h]``. Following Louizos, Welling
    and Kingma 2018 ("Learning Sparse Neural Networks through L0 Regularization", ICLR, sec.
    4), a gate is drawn from the stretched, clipped ("hard") concrete distribution:

    .. math::

        u &\sim U(0, 1), \\
        s &= \sigma\big((\log u - \log(1 - u) + \log\alpha) / \beta\big), \\
        z &= \min(1, \max(0, s\,(r - l) + l)),

    with temperature :math:`\beta` and stretch interval :math:`(l, r) = (-0.1, 1.1)`, so
    that z is exactly 0 or exactly 1 with positive probability and differentiable in
    :math:`\log\alpha` in between (the reparametrisation trick). The probability that a gate
    is not zero (Louizos et al., eq. 12) is
    :math:`P(z \ne 0) = \sigma(\log\alpha - \beta \log(-l / r))`; its sum over heads is the
    expected L0 norm, the number of heads expected to stay on, which Voita, Talbot, Moiseev,
    Sennrich and Titov 2019 ("Analyzing Multi-Head Self-Attention", ACL, sec. 6) add to the
    loss with a weight lambda. At test time the gate is deterministic (Louizos et al., eq. 13):
    :math:`\hat z = \min(1, \max(0, \sigma(\log\alpha)(r - l) + l))`, and a head whose
    :math:`\hat z` is 0 is pruned. The gate multiplies the head's output before W^O, i.e. it is
    the head's entry of mha_lib's ``head_mask`` (grid convention of this module).

    Args:
        num_layers: layers of the head grid (> 0).
        num_heads: H, heads per layer of the grid (> 0).
        temperature: beta > 0 (default 2/3, Louizos et al.'s; Voita et al.'s code uses 0.33).
        limits: ``(l, r)`` with l < 0 and r > 1 (default (-0.1, 1.1)).
        init_log_alpha: starting log_alpha of every gate (finite). The default 3.0 starts
            every gate almost surely open (deterministic gate 1): pruning starts from the full
            model, the penalty closes heads.
        exists: optional (num_layers, H) grid mask of the heads that exist (0 = already pruned
            structurally, see :func:`kept_mask`): their gates are always 0 and do not count in
            the L0 norm.

    Attributes:
        log_alpha: ``nn.Parameter`` (num_layers, H) float32, the gates' locations.
        exists: buffer (num_layers, H) float32, 1 = the head exists.
        history: filled by :func:`train_head_gates`: ``{"loss": [...], "expected_l0": [...]}``
            per step (the task loss in the loss function's units, and the expected number of
            open heads).

    Raises:
        ValueError: a size that is not a positive integer, a non-positive or non-finite
            temperature, limits with l >= 0 or r <= 1, a non-finite ``init_log_alpha``, an
            ``exists`` mask of the wrong shape.
    """

    def __init__(self, num_layers: int, num_heads: int, *, temperature: float = HARD_CONCRETE_TEMPERATURE,
                 limits: Tuple[float, float] = HARD_CONCRETE_LIMITS, init_log_alpha: float = 3.0,
                 exists: Optional[Tensor] = None):
        super().__init__()
        n = checks.positive_int(num_layers, "num_layers")
        H = checks.positive_int(num_heads, "num_heads")
        self.temperature = checks.finite_real(temperature, "temperature", positive=True)
        if not isinstance(limits, (tuple, list)) or len(limits) != 2:
            raise ValueError(f"limits must be a pair (l, r) with l < 0 < 1 < r, got {limits!r}")
        low, high = (checks.finite_real(v, "limits") for v in limits)
        if not (low < 0.0 and high > 1.0):
            raise ValueError(f"limits must satisfy l < 0 and r > 1 (the stretch of Louizos et al.), got {limits!r}")
        self.limits = (low, high)
        init = checks.finite_real(init_log_alpha, "init_log_alpha")
        self.log_alpha = nn.Parameter(torch.full((n, H), init))
        mask = torch.ones(n, H) if exists is None else _grid_values(exists, (n, H), "exists")
        self.register_buffer("exists", (mask != 0).float())
        self.history: dict = {"loss": [], "expected_l0": []}

    @property
    def shape(self) -> Tuple[int, int]:
        """(num_layers, H)."""
        return tuple(self.log_alpha.shape)

    def sample(self, batch_size: Optional[int] = None, generator: Optional[torch.Generator] = None) -> Tensor:
        """Draw stochastic gates (training time), differentiable in ``log_alpha``.

        Args:
            batch_size: None for one gate per head, shape (num_layers, H); an int B > 0 for a
                separate draw per example, shape (num_layers, B, H) (less variance in the
                gradient; pass it through :func:`layer_head_masks` as a per-example mask).
            generator: optional CPU ``torch.Generator`` for the uniform noise (reproducible
                draws); default torch's global RNG.

        Returns:
            float32 gates in [0, 1] on ``log_alpha``'s device; 0 where a head does not exist.

        Raises:
            ValueError: ``batch_size`` not a positive integer.
        """
        n, H = self.shape
        shape = (n, H) if batch_size is None else (n, checks.positive_int(batch_size, "batch_size"), H)
        eps = 1e-6  # keeps log u and log(1 - u) finite
        u = torch.rand(shape, generator=generator).clamp(eps, 1.0 - eps).to(self.log_alpha.device)
        la, ex = (self.log_alpha, self.exists) if batch_size is None else (
            self.log_alpha[:, None, :], self.exists[:, None, :])  # broadcast over the B draws
        s = torch.sigmoid((u.log() - (-u).log1p() + la) / self.temperature)  # concrete sample in (0, 1)
        low, high = self.limits
        return (s * (high - low) + low).clamp(0.0, 1.0) * ex  # stretched, then clipped: the "hard" gate

    def deterministic(self) -> Tensor:
        """The test-time gates ``min(1, max(0, sigmoid(log_alpha) (r - l) + l))`` (Louizos et al.,
        eq. 13): float32 (num_layers, H) in [0, 1], 0 where a head does not exist; no gradient."""
        low, high = self.limits
        with torch.no_grad():
            return ((torch.sigmoid(self.log_alpha) * (high - low) + low).clamp(0.0, 1.0) * self.exists).detach()

    def p_open(self) -> Tensor:
        """P(gate != 0) per head, ``sigmoid(log_alpha - beta log(-l / r))`` (Louizos et al., eq. 12):
        float32 (num_layers, H), differentiable; 0 where a head does not exist."""
        low, high = self.limits
        return torch.sigmoid(self.log_alpha - self.temperature * math.log(-low / high)) * self.exists

    def expected_l0(self) -> Tensor:
        """The expected number of open gates (the L0 penalty of Louizos et al. and Voita et al.):
        a 0-d float32 tensor, differentiable in ``log_alpha``."""
        return self.p_open().sum()

    def mask(self) -> Tensor:
        """The pruning the deterministic gates decide: float32 (num_layers, H), 1 where the
        test-time gate is above 0 (the head stays), 0 where it is exactly 0 (pruned)."""
        return (self.deterministic() > 0).float()

    @property
    def num_pruned(self) -> int:
        """Heads whose test-time gate is 0 (heads that do not exist included)."""
        return int((self.mask() == 0).sum())

    @property
    def fraction_pruned(self) -> float:
        """num_pruned / all heads of the grid."""
        return self.num_pruned / self.log_alpha.numel()


def _gate_batches(batches: Any) -> list:
    if isinstance(batches, (str, bytes)) or not isinstance(batches, Sequence) or len(batches) == 0:
        raise ValueError(
            f"batches must be a non-empty list (or tuple) of batches, cycled in order; got "
            f"{type(batches).__name__}{'' if not isinstance(batches, Sequence) else ' of length 0'}"
        )
    return list(batches)


def train_head_gates(
    model: nn.Module,
    batches: Sequence[Any],
    loss_fn: Callable[[nn.Module, Any, List[Tensor]], Tensor],
    penalty: float,
    *,
    steps: int = 200,
    lr: float = 0.1,
    seed: int = 0,
    temperature: float = HARD_CONCRETE_TEMPERATURE,
    limits: Tuple[float, float] = HARD_CONCRETE_LIMITS,
    init_log_alpha: float = 3.0,
) -> HardConcreteGates:
    r"""Train Hard-Concrete head gates on a frozen model with an L0 penalty (Voita et al. 2019).

    Minimises, over the gates' ``log_alpha`` only, the objective of Voita et al. 2019 (sec. 6),
    with the gates of Louizos et al. 2018:

    .. math::

        \mathbb{E}_{x}\,\mathbb{E}_{z}\big[\mathcal{L}(x; z)\big]
        + \lambda \sum_h P(z_h \ne 0),

    where z are gates drawn by :meth:`HardConcreteGates.sample`, one draw per example (each
    example's loss sees its own row of gates), and :math:`\lambda` = ``penalty``, in the loss's
    units per open head. Optimiser: Adam on ``log_alpha`` (Kingma and Ba 2015), ``steps``
    steps, batch ``t`` = ``batches[t % len(batches)]``; the objective is divided by
    ``max(1, penalty)``, which leaves Adam's steps as they are (Adam does not see the loss's
    scale, up to its epsilon) and keeps a huge penalty finite. Unlike Voita et al., who train the
    gates together with the model, the model here is frozen: its parameters get no gradient
    and are never changed (their ``requires_grad`` flags and the model's train/eval mode are
    restored afterwards), so the gates choose heads for the trained model as it is, like the
    other pruning orders of this module.

    Args:
        model: see :func:`attention_layers`; run in eval mode during the call.
        batches: a non-empty list of batches, each passed unchanged to ``loss_fn``.
        loss_fn: ``loss_fn(model, batch, head_mask) -> (B,)`` float per-example losses, as
            for :func:`head_importance` (``head_mask`` = per-layer (B, H_l) gates).
        penalty: lambda >= 0, the weight of the expected L0 norm (the expected number of
            open heads); 0 trains the gates on the loss alone.
        steps: optimiser steps (> 0).
        lr: Adam's learning rate for ``log_alpha`` (> 0).
        seed: seeds the gates' noise (a ``torch.Generator``); the same seed, batches and
            penalty give the same gates.
        temperature, limits, init_log_alpha: see :class:`HardConcreteGates`.

    Returns:
        the trained :class:`HardConcreteGates` (on the model's device), with ``history``
        filled; read the pruning with ``.mask()`` / ``.num_pruned``.

    Raises:
        ValueError: an empty or non-list ``batches``; a negative or non-finite ``penalty``;
            ``steps``/``lr`` out of range; ``loss_fn`` returning a shape other than (B,) or a
            non-finite loss; bad gate settings (as :class:`HardConcreteGates`).
    """
    batches = _gate_batches(batches)
    penalty = checks.finite_real(penalty, "penalty")
    if penalty < 0:
        raise ValueError(f"penalty must be >= 0, got {penalty!r}")
    steps = checks.positive_int(steps, "steps")
    lr = checks.finite_real(lr, "lr", positive=True)
    seed = checks.nonnegative_int(seed, "seed")
    n, H = num_heads_grid(model)
    param = next(model.parameters())
    gates = HardConcreteGates(n, H, temperature=temperature, limits=limits, init_log_alpha=init_log_alpha,
                              exists=kept_mask(model)).to(param.device)
    generator = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(gates.parameters(), lr=lr)
    scale = max(1.0, penalty)
    flags = [p.requires_grad for p in model.parameters()]
    was_training = model.training
    model.eval()
    try:
        for p in model.parameters():
            p.requires_grad_(False)  # frozen: the gates are the only thing trained
        for step in range(steps):
            batch = batches[step % len(batches)]
            B = _batch_size(batch)
            with torch.enable_grad():
                z = gates.sample(B, generator)  # (n, B, H): one draw per example
                losses = _per_example_losses(loss_fn(model, batch, layer_head_masks(model, z)), B,
                                             f" at gate step {step}")
                l0 = gates.expected_l0()
                # Divided by max(1, penalty): Adam's steps do not change when the loss is scaled, and
                # a huge penalty (1e30) no longer overflows Adam's squared gradients to inf.
                objective = losses.mean() / scale + (penalty / scale) * l0
                opt.zero_grad(set_to_none=True)
                objective.backward()
            opt.step()
            gates.history["loss"].append(float(losses.detach().mean()))
            gates.history["expected_l0"].append(float(l0.detach()))
    finally:
        for p, f in zip(model.parameters(), flags):
            p.requires_grad_(f)
        model.train(was_training)
    return gates.eval()


@dataclass
class GateSearch:
    """What :func:`gates_for_fraction` returns for one target fraction.

    Attributes:
        target_fraction: the fraction of heads asked for, in [0, 1].
        target_pruned: the head count it means, ``round(target_fraction * N)``, N = all heads of
            the grid.
        gates: the trained :class:`HardConcreteGates` of the chosen penalty.
        penalty: the chosen lambda.
        num_pruned: heads its test-time gates prune.
        trials: ``(penalty, num_pruned)`` of every run of the search, in the order they ran
            (shared between the targets of one :func:`gates_for_fractions` call).
    """

    target_fraction: float
    target_pruned: int
    gates: HardConcreteGates
    penalty: float
    num_pruned: int
    trials: List[Tuple[float, int]]

    @property
    def fraction_pruned(self) -> float:
        """num_pruned / all heads of the grid."""
        return self.num_pruned / self.gates.log_alpha.numel()

    @property
    def mask(self) -> Tensor:
        """(num_layers, H) float32, 1 keep, 0 pruned: the gates' :meth:`HardConcreteGates.mask`."""
        return self.gates.mask()


def gates_for_fractions(
    model: nn.Module,
    batches: Sequence[Any],
    loss_fn: Callable[[nn.Module, Any, List[Tensor]], Tensor],
    fractions: Sequence[float],
    *,
    penalty_range: Tuple[float, float] = (1e-4, 1.0),
    max_trials: int = 10,
    tolerance: int = 0,
    seed: int = 0,
    **train_kwargs: Any,
) -> List[GateSearch]:
    """Find, by bisection of the L0 penalty, gates that prune given fractions of the heads.

    The pruned count grows with the penalty lambda of :func:`train_head_gates` (more
    weight on the number of open heads closes more of them), but not smoothly: it is a
    step function, slightly noisy in lambda. For each target count k = round(fraction * N),
    lambda is bisected on a log scale inside ``penalty_range``: the bracket is [the largest
    lambda tried that pruned fewer than k heads, the smallest that pruned more] (the ends
    of ``penalty_range`` before any run has fallen on that side), the next run is at its
    geometric middle, and the search stops once a run prunes within ``tolerance`` heads of
    k, after ``max_trials`` runs for that target, or when the bracket closes (a
    non-monotone count). Every run of every target is remembered, so later targets start
    from the earlier runs' brackets. The result for a target is the run whose count is
    nearest k (ties: the smaller lambda). Every run uses the same ``seed`` (the same gate
    noise), which makes the count a steadier function of lambda.

    Args:
        model, batches, loss_fn: as :func:`train_head_gates`.
        fractions: target fractions of pruned heads, each in [0, 1].
        penalty_range: ``(low, high)``, 0 < low < high: the lambdas the bisection may try.
        max_trials: new runs allowed per target (> 0).
        tolerance: stop a target's search once a run prunes within this many heads of it (>= 0).
        seed: the gate seed of every run.
        **train_kwargs: ``steps``, ``lr``, ``temperature``, ``limits``, ``init_log_alpha`` of
            :func:`train_head_gates`.

    Returns:
        one :class:`GateSearch` per fraction, in the order given. Check ``num_pruned`` against
        ``target_pruned``: a target outside what ``penalty_range`` reaches comes back with
        the nearest run found.

    Raises:
        ValueError: a fraction outside [0, 1] or no fractions; a bad ``penalty_range``,
            ``max_trials`` or ``tolerance``; anything :func:`train_head_gates` refuses.
    """
    batches = _gate_batches(batches)
    if isinstance(fractions, (str, bytes)) or not isinstance(fractions, Sequence) or len(fractions) == 0:
        raise ValueError(f"fractions must be a non-empty list of numbers in [0, 1], got {fractions!r}")
    targets = []
    for f in fractions:
        if not 0.0 <= checks.finite_real(f, "fraction") <= 1.0:
            raise ValueError(f"each fraction must be in [0, 1], got {f!r}")
        targets.append(float(f))
    if not isinstance(penalty_range, (tuple, list)) or len(penalty_range) != 2:
        raise ValueError(f"penalty_range must be a pair (low, high) with 0 < low < high, got {penalty_range!r}")
    low, high = (checks.finite_real(v, "penalty_range", positive=True) for v in penalty_range)
    if not low < high:
        raise ValueError(f"penalty_range must have low < high, got {penalty_range!r}")
    max_trials = checks.positive_int(max_trials, "max_trials")
    tolerance = checks.nonnegative_int(tolerance, "tolerance")
    seed = checks.nonnegative_int(seed, "seed")
    n, H = num_heads_grid(model)
    N = n * H
    runs: List[Tuple[float, HardConcreteGates]] = []  # (penalty, gates), in the order they ran

    def nearest(k: int) -> Tuple[float, HardConcreteGates]:
        return min(runs, key=lambda r: (abs(r[1].num_pruned - k), r[0]))

    results = []
    for fraction in targets:
        k = math.floor(fraction * N + 0.5 + 1e-9)
        for _ in range(max_trials):
            if runs and abs(nearest(k)[1].num_pruned - k) <= tolerance:
                break
            lo = max([math.log(p) for p, g in runs if g.num_pruned < k], default=math.log(low))
            hi = min([math.log(p) for p, g in runs if g.num_pruned > k], default=math.log(high))
            if lo >= hi:  # the count is not monotone around k: keep the nearest run
                break
            penalty = math.exp((lo + hi) / 2)
            runs.append((penalty, train_head_gates(model, batches, loss_fn, penalty, seed=seed, **train_kwargs)))
        penalty, gates = nearest(k)
        results.append(GateSearch(fraction, k, gates, penalty, gates.num_pruned, []))
    trials = [(p, g.num_pruned) for p, g in runs]
    for r in results:
        r.trials = list(trials)
    return results


def gates_for_fraction(model: nn.Module, batches: Sequence[Any],
                       loss_fn: Callable[[nn.Module, Any, List[Tensor]], Tensor], fraction: float,
                       **kwargs: Any) -> GateSearch:
    """:func:`gates_for_fractions` for one target fraction (same keywords, same errors):
    Hard-Concrete gates whose L0 penalty was bisected until they prune ``round(fraction * N)``
    heads (Louizos et al. 2018; Voita et al. 2019)."""
    return gates_for_fractions(model, batches, loss_fn, [fraction], **kwargs)[0]


# ----------------------------------------------------------------------------- deprecated names
_MOVED_TO_ANALYSIS = frozenset({"attention_confidence", "positional_offsets", "head_attention_stats", "HeadStats"})


def __getattr__(name: str):
    # 0.2.0: the loss/accuracy pair lives in mha_lib.tasks (one pair for every token classifier)
    if name in _MOVED_TO_ANALYSIS:  # 0.2.0: Voita et al.'s head statistics live in mha_lib.analysis
        import warnings

        from . import analysis

        warnings.warn(f"mha_lib.pruning.{name} moved to mha_lib.analysis.{name} in 0.2.0", DeprecationWarning,
                      stacklevel=2)
        return getattr(analysis, name)
    renamed = {"token_classification_loss": "per_example_loss", "token_accuracy": "accuracy"}
    if name in renamed:
        import warnings

        from . import tasks

        warnings.warn(f"mha_lib.pruning.{name} is deprecated: use mha_lib.tasks.{renamed[name]}",
                      DeprecationWarning, stacklevel=2)
        return getattr(tasks, renamed[name])
    raise AttributeError(f"module 'mha_lib.pruning' has no attribute {name!r}")


# ----------------------------------------------------------------------------- cost of heads
def pruned_attention_flops(batch: int, seq_len: int, d_model: int, num_heads: int, kept_heads: int) -> int:
    """Matmul FLOPs of one self-attention forward pass with ``kept_heads`` of ``num_heads`` left.

    Pruning keeps head_dim = d_model // num_heads, so each of the five matmul terms of
    :func:`mha_lib.cost.attention_flops` (Q, K, V and output projections, scores, weighted
    sum; plain MHA, where a head's K and V rows go with it) shrinks in proportion to the heads
    kept: FLOPs(kept) = FLOPs(all) * kept / num_heads. Pruning a fraction p of the heads
    therefore ideally speeds attention up 1 / (1 - p) times.

    Returns:
        int FLOPs (2 per multiply-add).

    Raises:
        ValueError: ``kept_heads`` outside [0, num_heads], or sizes ``cost.attention_flops`` rejects.
    """
    from .cost import attention_flops

    if not 0 <= kept_heads <= num_heads:
        raise ValueError(f"kept_heads={kept_heads} must lie in [0, num_heads={num_heads}]")
    full = attention_flops(batch, seq_len, d_model=d_model, num_heads=num_heads).total
    return full * kept_heads // num_heads


def _best_times(fns: Sequence[Callable[[], Any]], repeats: int, min_seconds: float = 0.0,
                warmup: int = 1, device=None) -> Tuple[List[float], List[float]]:
    """Fastest wall-clock and fastest CPU seconds of each fn, timed round-robin by
    :func:`mha_lib.measure.round_robin_times`. The minimum, not the median: on a shared CPU
    interference only ever adds time.

    Returns:
        ``(wall, cpu)``: two lists of seconds, one entry per fn.
    """
    from .measure import round_robin_times

    samples = round_robin_times({str(i): fn for i, fn in enumerate(fns)}, repeats=repeats, warmup=warmup,
                                min_seconds=min_seconds, device=device)
    return [min(v["wall"]) for v in samples.values()], [min(v["cpu"]) for v in samples.values()]


@torch.inference_mode()
def measure_pruning_speedup(
    *,
    d_model: int = 512,
    num_heads: int = 8,
    seq_len: int = 256,
    batch_sizes: Sequence[int] = (1, 16, 64),
    keep_heads: Sequence[int] = (4,),
    whole_model_layers: int = 1,
    d_ff: Optional[int] = None,
    repeats: int = 5,
    min_seconds: float = 0.5,
    warmup: int = 1,
    seed: int = 0,
    device: Union[str, torch.device] = "cpu",
) -> List[dict]:
    """Time structurally pruned attention (and a whole encoder) against the unpruned one.

    For each batch size and each number of kept heads, heads are physically removed with
    ``prune_heads`` (the first ``num_heads - keep`` heads; which ones does not matter for
    speed) from one ``MultiHeadAttention(d_model, num_heads)`` and from every layer of an
    ``Encoder`` of ``whole_model_layers`` blocks (MLP width ``d_ff``, default 4·d_model).
    Self-attention forward passes (fast SDPA path, no weights returned) are timed,
    interleaved with the unpruned reference in the same loop; the fastest of at least
    ``repeats`` runs (more, until each variant has run ``min_seconds``), after ``warmup``
    untimed runs of each, is kept. Ratios of
    process CPU time are reported too: other jobs on a shared machine inflate wall time
    but not this process's CPU time. Ratios, not absolute times, are the result: they survive a
    shared, noisy CPU far better.

    Returns:
        one dict per (batch, keep) with keys ``batch``, ``heads``, ``kept``,
        ``attn_s`` / ``attn_ref_s`` (best seconds), ``attn_speedup`` (ref / pruned),
        ``attn_ideal`` (FLOP ratio, :func:`pruned_attention_flops`), ``attn_of_ideal``
        (speedup / ideal), ``attn_cpu_speedup`` (the same ratio in CPU seconds, see
        below), and the same for the whole model (``model_*``; ideal from
        attention FLOPs plus the MLP's 2·2·B·L·d·d_ff per layer; embeddings and norms left
        out).

    Raises:
        ValueError: keep counts outside [0, num_heads], or bad sizes.
    """
    from .model import Encoder, EncoderConfig

    if any(not 0 <= k <= num_heads for k in keep_heads):
        raise ValueError(f"keep_heads {list(keep_heads)} must lie in [0, num_heads={num_heads}]")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    d_ff = 4 * d_model if d_ff is None else d_ff
    device = torch.device(device)
    torch.manual_seed(seed)
    ref_attn = MultiHeadAttention(d_model, num_heads).to(device).eval()
    cfg = EncoderConfig(vocab_size=128, d_model=d_model, num_heads=num_heads, num_layers=whole_model_layers,
                        d_ff=d_ff, max_len=seq_len)
    ref_model = Encoder(cfg).to(device).eval()
    state_attn, state_model = ref_attn.state_dict(), ref_model.state_dict()
    rows = []
    for B in batch_sizes:
        x = torch.randn(B, seq_len, d_model, device=device)
        ids = torch.randint(1, 128, (B, seq_len), device=device)
        for keep in keep_heads:
            attn = MultiHeadAttention(d_model, num_heads).to(device).eval()
            attn.load_state_dict(state_attn)
            attn.prune_heads(range(num_heads - keep))
            model = Encoder(cfg).to(device).eval()
            model.load_state_dict(state_model)
            model.prune_heads({i: list(range(num_heads - keep)) for i in range(whole_model_layers)})
            def run(m, inp):
                return lambda: m(inp)

            (t_ref, t_pruned), (c_ref, c_pruned) = _best_times(
                [run(ref_attn, x), run(attn, x)], repeats, min_seconds, warmup, device)
            (m_ref, m_pruned), (mc_ref, mc_pruned) = _best_times(
                [run(ref_model, ids), run(model, ids)], repeats, min_seconds, warmup, device)
            f_ref = pruned_attention_flops(B, seq_len, d_model, num_heads, num_heads)
            f_kept = pruned_attention_flops(B, seq_len, d_model, num_heads, keep)
            mlp = 2 * 2 * B * seq_len * d_model * d_ff
            ideal_attn = f_ref / f_kept if f_kept else float("inf")
            ideal_model = (f_ref + mlp) / (f_kept + mlp)
            rows.append(dict(
                batch=B, heads=num_heads, kept=keep,
                attn_ref_s=t_ref, attn_s=t_pruned, attn_speedup=t_ref / t_pruned, attn_ideal=ideal_attn,
                attn_of_ideal=(t_ref / t_pruned) / ideal_attn, attn_cpu_speedup=c_ref / max(c_pruned, 1e-9),
                model_ref_s=m_ref, model_s=m_pruned, model_speedup=m_ref / m_pruned, model_ideal=ideal_model,
                model_of_ideal=(m_ref / m_pruned) / ideal_model, model_cpu_speedup=mc_ref / max(mc_pruned, 1e-9),
            ))
    return rows
