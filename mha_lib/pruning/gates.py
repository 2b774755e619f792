"""Voita et al. 2019's pruning method: a Hard-Concrete gate per head, trained with an L0 penalty.

:class:`HardConcreteGates` (Louizos et al. 2018), :func:`train_head_gates` on a frozen model, and
:func:`gates_for_fractions`, which bisects the penalty until a target fraction of heads is pruned.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from .. import checks
from ..model.heads import _grid_values, kept_mask, layer_head_masks, num_heads_grid
from .importance import _batch_size, _per_example_losses


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
        temperature: beta, a float32 number in [1.2e-38, 3.4e38] (default 2/3, Louizos et al.'s;
            Voita et al.'s code uses 0.33).
        limits: ``(l, r)`` with l < 0 and r > 1 (default (-0.1, 1.1)).
        init_log_alpha: starting log_alpha of every gate (finite, at most 3.4e38 in magnitude: float32). The default 3.0 starts
            every gate almost surely open (deterministic gate 1): pruning starts from the full
            model, the penalty closes heads.
        exists: optional (num_layers, H) grid mask of the heads that exist (0 = already pruned
            structurally, see :func:`kept_mask`): their gates are always 0 and do not count in
            the L0 norm. Only 0/1 values (or bool) are accepted.

    Attributes:
        log_alpha: ``nn.Parameter`` (num_layers, H) float32, the gates' locations.
        exists: buffer (num_layers, H) float32, 1 = the head exists.
        history: filled by :func:`train_head_gates`: ``{"loss": [...], "expected_l0": [...]}``
            per step (the task loss in the loss function's units, and the expected number of
            open heads).

    Raises:
        ValueError: a size that is not a positive integer, a non-positive or non-finite
            or non-float32 temperature, limits with l >= 0 or r <= 1, an ``init_log_alpha`` that is
            not a finite float32 number, an ``exists`` mask of the wrong shape or with values
            other than 0/1.
    """

    def __init__(self, num_layers: int, num_heads: int, *, temperature: float = HARD_CONCRETE_TEMPERATURE,
                 limits: Tuple[float, float] = HARD_CONCRETE_LIMITS, init_log_alpha: float = 3.0,
                 exists: Optional[Tensor] = None):
        super().__init__()
        n = checks.positive_int(num_layers, "num_layers")
        H = checks.positive_int(num_heads, "num_heads")
        self.temperature = checks.finite_real(temperature, "temperature", positive=True, float32=True)
        if not isinstance(limits, (tuple, list)) or len(limits) != 2:
            raise ValueError(f"limits must be a pair (l, r) with l < 0 < 1 < r, got {limits!r}")
        low, high = (checks.finite_real(v, "limits") for v in limits)
        if not (low < 0.0 and high > 1.0):
            raise ValueError(f"limits must satisfy l < 0 and r > 1 (the stretch of Louizos et al.), got {limits!r}")
        self.limits = (low, high)
        init = checks.finite_real(init_log_alpha, "init_log_alpha", float32=True)
        self.log_alpha = nn.Parameter(torch.full((n, H), init))
        mask = torch.ones(n, H) if exists is None else _grid_values(checks.has_values(exists, "exists"), (n, H), "exists")
        if not bool(((mask == 0) | (mask == 1)).all()):  # NaN or 0.5 is no answer to "does the head exist?"
            bad = mask[(mask != 0) & (mask != 1)]
            raise ValueError(f"exists must hold only 0/1 (or bool): 1 = the head exists; got {bad.numel()} other "
                             f"value(s), e.g. {float(bad[0])!r}")
        self.register_buffer("exists", mask.float())
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
        model: see :func:`~mha_lib.pruning.attention_layers`; run in eval mode during the call.
        batches: a non-empty list of batches, each passed unchanged to ``loss_fn``.
        loss_fn: ``loss_fn(model, batch, head_mask) -> (B,)`` float per-example losses, as
            for :func:`head_importance` (``head_mask`` = per-layer (B, H_l) gates).
        penalty: lambda >= 0, the weight of the expected L0 norm (the expected number of
            open heads); 0 trains the gates on the loss alone.
        steps: optimiser steps (> 0).
        lr: Adam's learning rate for ``log_alpha``, in [1.2e-38, 3.4e37] (``checks.learning_rate``).
        seed: seeds the gates' noise (a ``torch.Generator``); the same seed, batches and
            penalty give the same gates.
        temperature, limits, init_log_alpha: see :class:`HardConcreteGates`.

    Returns:
        the trained :class:`HardConcreteGates` (on the model's device), with ``history``
        filled; read the pruning with ``.mask()`` / ``.num_pruned``.

    Raises:
        ValueError: an empty or non-list ``batches``; a negative or non-finite ``penalty``;
            ``steps``/``lr`` out of range; ``loss_fn`` returning a shape other than (B,) or a
            non-finite loss, or a loss whose gradient is NaN/inf, or an update that leaves
            NaN/inf gates (each naming the step); bad gate settings (as :class:`HardConcreteGates`).
    """
    batches = _gate_batches(batches)
    penalty = checks.finite_real(penalty, "penalty")
    if penalty < 0:
        raise ValueError(f"penalty must be >= 0, got {penalty!r}")
    steps = checks.positive_int(steps, "steps")
    lr = checks.learning_rate(lr, "lr")  # Adam below, beta1 = 0.9
    seed = checks.seed(seed, "seed")
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
            _check_gate_step(gates, step, lr)
            opt.step()
            _check_gate_step(gates, step, lr, after=True)
            gates.history["loss"].append(float(losses.detach().mean()))
            gates.history["expected_l0"].append(float(l0.detach()))
    finally:
        for p, f in zip(model.parameters(), flags):
            p.requires_grad_(f)
        model.train(was_training)
    return gates.eval()


def _check_gate_step(gates: HardConcreteGates, step: int, lr: float, after: bool = False) -> None:
    """Refuse a NaN/inf gradient of ``log_alpha`` (before the step: it comes from ``loss_fn``'s
    graph, even when the loss itself is finite) or NaN/inf gates after the step (as
    :func:`mha_lib.train.train` checks its weights): NaN gates would read as "pruned"."""
    if after:
        bad = int((~torch.isfinite(gates.log_alpha.detach())).sum())
        if bad:
            raise ValueError(f"gate training stopped at step {step} (lr={lr}): the update left {bad} NaN or "
                             f"infinite log_alpha value(s); lower lr")
        return
    grad = gates.log_alpha.grad
    bad = 0 if grad is None else int((~torch.isfinite(grad)).sum())
    if bad:
        raise ValueError(f"gate training stopped at step {step}: the gradient of the objective holds {bad} NaN or "
                         f"infinite value(s) for log_alpha, although the loss was finite; loss_fn's graph has a "
                         f"NaN/inf derivative (e.g. sqrt or log at 0)")


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
        """The gates' :meth:`HardConcreteGates.mask`, (num_layers, H) float32, 1 keep, 0 pruned."""
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
    seed = checks.seed(seed, "seed")
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
