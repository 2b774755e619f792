"""Training the toy models: one loop with a progress bar, seeding, device choice and a checkpoint cache.

The loop is deliberately plain (AdamW, a warm-up + cosine learning-rate schedule, fresh
batches drawn from the task at every step, no early stopping), so that a reader can see that
every configuration of an experiment gets exactly the same budget.

Reproducibility: a run is a function of its :class:`~mha_lib.tasks.TrainedSpec` and its seed.
The seed sets torch's global RNG before the model is built (initial weights) and a separate
``torch.Generator`` for the training stream (seeded with ``DATA_SEED_OFFSET + seed``, so that
the weights and the data do not come from the same random numbers). Bitwise-equal weights also
need the same torch version, device and thread count; different CPUs round differently, and a
long run can amplify that (the retraining test therefore compares accuracies, with a tolerance).

Sources: AdamW, Loshchilov and Hutter 2019; warm-up then cosine decay as in Loshchilov and
Hutter 2017 (SGDR) without restarts.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import warnings
import os
import platform
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, Optional, Sequence, Union

import torch
from safetensors.torch import save_file
from torch import nn
from tqdm.auto import tqdm

from . import __version__, checks
from ._runtime import default_device, set_seed
from .model import build_checked, read_json
from .tasks import (
    SHIPPED,
    TrainedSpec,
    accuracy,
    evaluate,
    per_example_loss,
    weight_files,
)

__all__ = [
    "DATA_SEED_OFFSET",
    "TrainResult",
    "lr_at",
    "train",
    "train_spec",
    "save_trained",
    "default_cache_dir",
]

#: The training stream of seed k is ``torch.Generator().manual_seed(DATA_SEED_OFFSET + k)``.
DATA_SEED_OFFSET = 1_000_000


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        model: the trained model (eval mode, on the training device).
        curve: ``{"steps": [...], "loss": [...], "accuracy": [...]}``: at every
            ``eval_every`` steps, the mean training loss (nats) since the previous point and
            the accuracy on a fixed set of ``eval_sequences`` sequences.
        accuracy: final accuracy with :func:`mha_lib.tasks.evaluate` (2048 fixed sequences).
        seconds: wall time of the training loop (s), evaluation included.
        seed: the run's seed.
        cpu_seconds: CPU time of the process during the loop (s); unlike ``seconds`` it
            hardly depends on what else runs on the machine.
        cached: True when the result was read from the checkpoint cache, not trained.
        threads: torch's intra-op thread count while it trained (None when read from a cache
            entry that did not record it).
        checkpoints: ``{step: state_dict}`` (float32, CPU) of the weights after each step in
            ``checkpoint_steps``; empty when none were asked for.
    """

    model: nn.Module
    curve: Dict[str, list]
    accuracy: float
    seconds: float
    seed: int
    cpu_seconds: float = float("nan")
    cached: bool = False
    threads: Optional[int] = None
    checkpoints: Dict[int, dict] = field(default_factory=dict)


def lr_at(step: int, steps: int, lr: float, warmup: float) -> float:
    """Learning rate at optimiser step ``step`` (0-based) of ``steps``: warm-up, then cosine decay.

    Linear warm-up from ``lr / steps_w`` to ``lr`` over the first
    ``steps_w = max(1, round(warmup * steps))`` steps, then cosine decay to 0 at the end:
    ``lr * (1 + cos(pi * p)) / 2`` with p the fraction of the decay steps done. The cosine
    curve is the one of SGDR (Loshchilov and Hutter 2017, "SGDR: Stochastic Gradient Descent
    with Warm Restarts", ICLR), used once, without restarts.

    Args:
        step: the optimiser step, an int, 0-based.
        steps: the number of steps of the run, an int >= 1.
        lr: the peak learning rate (a float, the optimiser's units).
        warmup: fraction of ``steps`` spent warming up, in [0, 1).

    Returns:
        The learning rate, a float in (0, ``lr``] during warm-up and [0, ``lr``] after.

    This function raises no error itself and does not check its arguments: :func:`train`
    checks them before use.
    """
    steps_w = max(1, round(warmup * steps))
    if step < steps_w:
        return lr * (step + 1) / steps_w
    progress = (step - steps_w) / max(1, steps - steps_w)
    return lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def _progress_disabled(progress: bool) -> bool:
    return (not progress) or os.environ.get("TQDM_DISABLE", "") not in ("", "0", "false", "False")


def _snapshot(model: nn.Module) -> Dict[str, torch.Tensor]:
    """A float32 CPU copy of the model's state, for a checkpoint."""
    return {k: v.detach().float().cpu().clone() for k, v in model.state_dict().items()}


@contextlib.contextmanager
def _stop_if_diverged(step: int, lr: float):
    """Re-raise a ValueError from the loss or the accuracy (NaN or inf logits) naming the step."""
    try:
        yield
    except ValueError as err:
        raise ValueError(f"training stopped at step {step} (lr={lr}): {err}") from None


def _check_finite_weights(model: nn.Module, step: int, lr: float) -> None:
    """ValueError naming the step when an optimiser step left NaN or inf in the weights."""
    finite = torch.stack([torch.isfinite(p.detach()).all() for p in model.parameters()])  # (n_tensors,)
    if not bool(finite.all()):
        names = [n for (n, _), ok in zip(model.named_parameters(), finite.tolist()) if not ok]
        raise ValueError(f"training stopped at step {step} (lr={lr}): the update left NaN or inf in "
                         f"{names[:3]}{' ...' if len(names) > 3 else ''}")


def train(
    model: nn.Module,
    task,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    weight_decay: float = 0.01,
    warmup: float = 0.05,
    seed: int = 0,
    device: Union[str, torch.device, None] = None,
    eval_every: int = 100,
    eval_sequences: int = 256,
    progress: bool = True,
    desc: Optional[str] = None,
    checkpoint_steps: Sequence[int] = (),
) -> TrainResult:
    """Train ``model`` on ``task`` for exactly ``steps`` AdamW steps.

    The optimiser is AdamW (Loshchilov and Hutter 2019, "Decoupled Weight Decay
    Regularization", ICLR), ``torch.optim.AdamW``; the learning rate follows :func:`lr_at`
    (linear warm-up, then the cosine decay of SGDR, Loshchilov and Hutter 2017).

    Every step draws ``batch_size`` fresh sequences from ``task`` (a
    :class:`~mha_lib.tasks.PrevMarkedTask`) with the generator of ``seed``, and minimises the
    mean cross-entropy over labelled positions. The model is *not* re-initialised: build it
    after ``mha_lib.set_seed(seed)`` (or use :func:`train_spec`, which does).

    A task with a ``curve_scores(model, batch) -> dict`` method (e.g.
    :class:`~mha_lib.tasks.InductionTask`: per-head previous-token and induction scores) also
    gets those values in the curve at every point, under their keys.

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier` whose classes match the task; it
            maps (B, L) long token ids to (B, L, num_classes) float logits.
        task: a task of :mod:`mha_lib.tasks` (:class:`~mha_lib.tasks.PrevMarkedTask`,
            :class:`~mha_lib.tasks.InductionTask`, ...): anything with ``num_classes``,
            ``sample(batch_size, generator)`` and ``dataset(n, seed=...)`` returning a
            :class:`~mha_lib.tasks.TaskBatch`.
        steps: number of optimiser steps, >= 1.
        batch_size: sequences per step, >= 1.
        lr: peak learning rate, in [1.2e-38, 3.4e37] (``checks.learning_rate``: Adam's first
            step lr / (1 - 0.9) must fit float32); schedule :func:`lr_at`.
        weight_decay: AdamW weight decay (>= 0, lr * weight_decay <= 3.4e38), applied to every parameter.
        warmup: fraction of the steps spent warming up, in [0, 1).
        seed: seed of the training stream (``DATA_SEED_OFFSET + seed``), an int in [0, 2**64 - 1 -
            DATA_SEED_OFFSET].
        device: where to train; default :func:`mha_lib.default_device`.
        eval_every: steps between learning-curve points (>= 1).
        eval_sequences: size of the fixed set the curve is measured on.
        progress: show a tqdm progress bar (also off when the environment sets
            ``TQDM_DISABLE=1``). The bar writes to stderr, never to a checked cell.
        desc: progress-bar label.
        checkpoint_steps: numbers of optimiser steps done (0 = the initial weights, up to
            ``steps``) after which a copy of the weights goes into ``TrainResult.checkpoints``.

    Returns:
        a :class:`TrainResult`.

    Raises:
        ValueError: on a bad argument (naming it; also a model whose ``num_classes`` differs
            from the task's), or when training diverges (naming the step), instead of
            training on silently or returning a NaN model as trained: the loss or the logits
            become NaN or infinite, or an update leaves NaN or inf in the weights.
    """
    for name, value in (("steps", steps), ("batch_size", batch_size), ("eval_every", eval_every),
                        ("eval_sequences", eval_sequences)):
        checks.positive_int(value, name)
    checks.learning_rate(lr, "lr")  # AdamW below, beta1 = 0.9
    if checks.finite_real(weight_decay, "weight_decay") < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
    if lr * weight_decay > torch.finfo(torch.float32).max:  # AdamW multiplies by 1 - lr * weight_decay
        raise ValueError(f"weight_decay={weight_decay!r} times lr={lr!r} must fit float32 (<= 3.4e38): "
                         f"AdamW scales the weights by 1 - lr * weight_decay")
    checks.probability(warmup, "warmup")  # a fraction of the steps, in [0, 1)
    seed = checks.seed(seed, "seed")
    if seed > checks.SEED_MAX - DATA_SEED_OFFSET:  # the training stream's generator takes DATA_SEED_OFFSET + seed
        raise ValueError(f"seed must be an integer in [0, 2**64 - 1 - DATA_SEED_OFFSET] (the training stream is "
                         f"seeded with DATA_SEED_OFFSET={DATA_SEED_OFFSET:,} + seed), got {seed}")
    keep_at = set(checks.head_indices(checkpoint_steps, "checkpoint_steps", upper=steps + 1, upper_name="steps + 1"))
    if getattr(model, "num_classes", task.num_classes) != task.num_classes:
        raise ValueError(f"model has num_classes={model.num_classes}, the task has {task.num_classes}")
    device = torch.device(device) if device is not None else default_device()
    model = model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(DATA_SEED_OFFSET + seed)
    eval_batch = task.dataset(eval_sequences, seed=DATA_SEED_OFFSET - 1)  # fixed, shared by all runs
    curve: Dict[str, list] = {"steps": [], "loss": [], "accuracy": []}
    curve_scores = getattr(task, "curve_scores", None)
    checkpoints: Dict[int, dict] = {}
    if 0 in keep_at:  # step 0: the initial weights
        checkpoints[0] = _snapshot(model)
    running, count = 0.0, 0
    start, cpu_start = time.perf_counter(), time.process_time()
    bar = tqdm(range(steps), desc=desc, disable=_progress_disabled(progress), leave=False, mininterval=0.5)
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup)
        batch = task.sample(batch_size, generator).to(device)
        with _stop_if_diverged(step, lr):
            loss = per_example_loss(model, batch).mean()  # refuses NaN/inf logits
        if not torch.isfinite(loss):
            raise ValueError(f"training loss became {loss.item()} at step {step} (lr={lr})")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        running += loss.item()
        count += 1
        _check_finite_weights(model, step, lr)  # the last step's update is seen by no later loss
        if step + 1 in keep_at:
            checkpoints[step + 1] = _snapshot(model)
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            model.eval()
            with _stop_if_diverged(step, lr):
                acc = accuracy(model, eval_batch)  # refuses NaN/inf logits (e.g. huge, finite weights)
            scores = curve_scores(model, eval_batch) if curve_scores is not None else {}
            model.train()
            curve["steps"].append(step + 1)
            curve["loss"].append(running / count)
            curve["accuracy"].append(acc)
            for key, value in scores.items():
                curve.setdefault(key, []).append(value)
            bar.set_postfix(loss=f"{running / count:.3f}", acc=f"{acc:.3f}")
            running, count = 0.0, 0
    model.eval()
    with _stop_if_diverged(steps - 1, lr):
        final = evaluate(model, task)
    return TrainResult(model, curve, final, time.perf_counter() - start, seed, time.process_time() - cpu_start,
                       threads=torch.get_num_threads(), checkpoints=checkpoints)


# ----------------------------------------------------------------------------- specs and the cache
def default_cache_dir() -> Path:
    """Checkpoint cache of live retraining: ``$MHA_LIB_CACHE`` or ``~/.cache/mha_lib/checkpoints``."""
    return Path(os.environ.get("MHA_LIB_CACHE", Path.home() / ".cache" / "mha_lib" / "checkpoints"))


def _resolve_spec(spec: Union[str, TrainedSpec]) -> TrainedSpec:
    """A TrainedSpec, or the shipped one of that name; the same ValueError as ``tasks.load_trained``."""
    if isinstance(spec, TrainedSpec):
        return spec
    if not isinstance(spec, str) or spec not in SHIPPED:
        raise ValueError(f"no shipped model named {spec!r}; known: {sorted(SHIPPED)}")
    return SHIPPED[spec]


def _spec_hash(spec: TrainedSpec) -> str:
    text = json.dumps(spec.to_dict(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _cache_paths(spec: TrainedSpec, seed: int, cache_dir: Path, device: torch.device):
    stem = f"{spec.name}.v{spec.version}-{_spec_hash(spec)}-seed{seed}-{device.type}"
    return cache_dir / f"{stem}.safetensors", cache_dir / f"{stem}.json"


def train_spec(
    spec: Union[str, TrainedSpec],
    seed: int,
    *,
    device: Union[str, torch.device, None] = None,
    progress: bool = True,
    cache_dir: Union[str, Path, None, bool] = None,
    steps: Optional[int] = None,
) -> TrainResult:
    """Train one seed of a :class:`~mha_lib.tasks.TrainedSpec` from scratch (or read it from the cache).

    Seeds with ``mha_lib.set_seed(seed)``, builds ``spec.build()``, then calls :func:`train`
    with the spec's recipe.

    Args:
        spec: a name from :data:`mha_lib.tasks.SHIPPED` or a spec.
        seed: the seed (any non-negative int, not only the spec's shipped seeds).
        device: default :func:`mha_lib.default_device`.
        progress: progress bar on/off.
        cache_dir: a folder for the checkpoint cache; ``None`` uses
            :func:`default_cache_dir`, ``False`` disables caching. A cached run (same spec,
            seed and device type) is loaded instead of retrained; the entry holds the
            float32 weights (safetensors) and the curve (JSON), never a pickle.
        steps: override the spec's step count (e.g. a longer budget on a GPU); it becomes
            part of the spec, hence of the cache key.

    Returns:
        a :class:`TrainResult`.

    Raises:
        ValueError: ``spec`` is neither a :class:`~mha_lib.tasks.TrainedSpec` nor a name in
            :data:`mha_lib.tasks.SHIPPED` (the message lists the known names), or a bad
            recipe value (as :func:`train`).
    """
    spec = _resolve_spec(spec)
    if steps is not None:
        spec = replace(spec, steps=steps)
    device = torch.device(device) if device is not None else default_device()
    if cache_dir is not False:
        cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        w_path, m_path = _cache_paths(spec, seed, cache, device)
        if w_path.is_file() and m_path.is_file():
            try:
                meta = read_json(m_path)  # ValueError (so: retrain) on a broken, too deep or huge file
                if not (isinstance(meta, dict) and isinstance(meta.get("curve"), dict)
                        and checks.finite_real(meta.get("accuracy"), "accuracy") >= 0
                        and checks.finite_real(meta.get("seconds"), "seconds") >= 0):
                    raise ValueError(f"{m_path.name} does not hold a training record")
                model = build_checked(spec.build, w_path, prefix="final/")
                saved = [checks.nonnegative_int(n, "checkpoint step") for n in meta.get("checkpoints", [])]
                checkpoints = {n: build_checked(spec.build, w_path, prefix=f"step{n}/").state_dict() for n in saved}
                return TrainResult(model.to(device).eval(), meta["curve"], meta["accuracy"], meta["seconds"],
                                   seed, meta.get("cpu_seconds", float("nan")), cached=True,
                                   threads=meta.get("threads"), checkpoints=checkpoints)
            except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:  # a truncated entry
                warnings.warn(f"ignoring a broken cache entry {w_path.name} ({err}); retraining", UserWarning,
                              stacklevel=2)
    set_seed(seed)
    model = spec.build()
    result = train(
        model,
        spec.make_task(),
        steps=spec.steps,
        batch_size=spec.batch_size,
        lr=spec.lr,
        weight_decay=spec.weight_decay,
        warmup=spec.warmup,
        seed=seed,
        device=device,
        eval_every=spec.eval_every,
        eval_sequences=spec.eval_sequences,
        progress=progress,
        desc=f"{spec.name} seed {seed}",
        checkpoint_steps=spec.checkpoints if seed == spec.seeds[0] else (),
    )
    if cache_dir is not False:
        cache.mkdir(parents=True, exist_ok=True)
        state = {f"final/{k}": v.detach().float().cpu().contiguous() for k, v in result.model.state_dict().items()}
        for n, ckpt in result.checkpoints.items():
            state.update({f"step{n}/{k}": v.contiguous() for k, v in ckpt.items()})
        meta = {"curve": result.curve, "accuracy": result.accuracy, "seconds": result.seconds,
                "cpu_seconds": result.cpu_seconds, "threads": result.threads,
                "checkpoints": sorted(result.checkpoints)}
        # write, then rename: an interrupted run leaves no half-written entry behind
        save_file(state, str(w_path) + ".tmp")
        Path(str(m_path) + ".tmp").write_text(json.dumps(meta), encoding="utf-8")
        os.replace(str(w_path) + ".tmp", w_path)
        os.replace(str(m_path) + ".tmp", m_path)
    return result


def save_trained(
    spec: TrainedSpec, results: Sequence[TrainResult], directory: Union[str, Path, None] = None
) -> Dict[str, object]:
    """Write one spec's trained seeds as shipped package data (see :mod:`mha_lib.tasks`).

    The weights are stored as float16 (half the bytes); the recorded per-seed accuracy is
    measured again on the float16 weights, so that loading the files reproduces it exactly
    on the same device.

    Args:
        spec: the spec the results were trained from.
        results: one :class:`TrainResult` per seed of ``spec.seeds``, in that order.
        directory: target folder (default the package's ``weights/``).

    Returns:
        the metadata written to the JSON file.

    Raises:
        ValueError: if the results' seeds differ from ``spec.seeds``.
    """
    seeds = [r.seed for r in results]
    if tuple(seeds) != tuple(spec.seeds):
        raise ValueError(f"results are for seeds {seeds}, spec {spec.name} has seeds {list(spec.seeds)}")
    w_path, m_path = weight_files(spec, directory)
    w_path.parent.mkdir(parents=True, exist_ok=True)
    task = spec.make_task()
    state, accuracies = {}, []
    for r in results:
        model = spec.build()
        half = {k: v.detach().cpu().to(torch.float16) for k, v in r.model.state_dict().items()}
        model.load_state_dict({k: v.float() for k, v in half.items()})
        accuracies.append(evaluate(model, task))
        state.update({f"seed{r.seed}/{k}": v.contiguous() for k, v in half.items()})
        for n, ckpt in sorted(r.checkpoints.items()):  # the first seed's, when the spec asks for them
            state.update({f"checkpoint{n}/{k}": v.to(torch.float16).contiguous() for k, v in ckpt.items()})
    save_file(state, str(w_path), metadata={"format": "mha_lib-trained", "name": spec.name, "version": str(spec.version)})
    meta = {
        "spec": spec.to_dict(),
        "seeds": seeds,
        "accuracy": accuracies,
        "accuracy_float32": [r.accuracy for r in results],
        "curves": [r.curve for r in results],
        "train_seconds": [r.seconds for r in results],
        "train_cpu_seconds": [r.cpu_seconds for r in results],
        "train_threads": [r.threads for r in results],  # per run (the workers'), not this process's
        "checkpoints": sorted(results[0].checkpoints) if results else [],
        "versions": {
            "mha_lib": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "device": str(next(results[0].model.parameters()).device) if results else "cpu",
            "threads": torch.get_num_threads(),  # of the process that wrote this file
        },
    }
    m_path.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta

