"""Which heads matter: Michel et al. 2019's gradient importance and single-head ablation.

:func:`head_importance` is ``I_h = E_x |dL(x)/d xi_h|``, one forward and one backward pass per
batch; :func:`single_head_ablation` is the metric with one head masked, for every head. Scores
are head grids (see ``mha_lib/model/heads.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Mapping, Optional

import torch
from torch import Tensor, nn

from ..model.heads import _grid_values, attention_layers, kept_mask, layer_head_masks, num_heads_grid


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
        model: see :func:`~mha_lib.pruning.attention_layers`. Run in eval mode (dropout off) during the
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
        """The change, masked - baseline, (num_layers, H) float32; negative where removing the head hurts an accuracy."""
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
        model: see :func:`~mha_lib.pruning.attention_layers`.
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
