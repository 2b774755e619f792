"""The trained toy models shipped as package data: the registry :data:`SHIPPED` and its loaders.

For each name, one ``<name>.v<version>.safetensors`` file in ``mha_lib/weights/`` with the weights
of every seed (tensor names ``seed<k>/<parameter name>``, float16) and one ``.json`` file with the
model config, the task, the recipe, the seeds, per-seed accuracies and learning curves.
:func:`load_trained` rebuilds the model from them; nothing is loaded with pickle.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple, Union

import torch

from .. import checks
from ..model import EncoderConfig, EncoderDecoder, TokenClassifier, build_checked, read_json
from ..model.tied import tie_heads
from .digits import DigitsTask
from .induction import InductionTask
from .kinds import task_from_dict
from .prev_marked import PrevMarkedTask
from .translation import TranslationTask


# ----------------------------------------------------------------------------- shipped models
WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "weights"


@dataclass(frozen=True)
class TrainedSpec:
    """Everything that defines one shipped family of trained models (all seeds of one config).

    Attributes:
        name: registry key, e.g. ``"ch1-h4"``; also the file stem.
        version: training-version number; bump it whenever the recipe or the code that
            trains changes the weights, so old files never pass for new ones.
        task: :meth:`PrevMarkedTask.to_dict` of the task.
        model: keyword arguments of :class:`~mha_lib.model.EncoderConfig`
            (``vocab_size`` and ``max_len`` must match the task).
        steps: optimiser steps.
        batch_size: sequences per step.
        lr: peak learning rate of AdamW (one-cycle schedule: linear warm-up over ``warmup`` of
            the steps, then cosine decay: :func:`mha_lib.train.lr_at`).
        weight_decay: AdamW's decoupled weight decay (default 0.01).
        warmup: the fraction of ``steps`` spent warming up, in [0, 1) (default 0.05).
        seeds: the seeds trained; seed k sets the initialisation and the training stream.
        eval_every: steps between learning-curve points.
        eval_sequences: sequences in the small fixed set used for the curves (the final
            accuracy uses :func:`evaluate`).
        tied_heads: when True, every head of every block shares head 0's W^Q, W^K and W^V
            (:func:`mha_lib.analysis.tie_heads`, kept tied during training); chapter 2 uses
            it to show that tied heads are one narrow head.
        checkpoints: optimiser-step counts at which the first seed's weights are also saved
            (0 = initialisation), for chapters that show training unfold; load one with
            ``load_trained(name, step=n)``.
        decoder: for an :class:`~mha_lib.model.EncoderDecoder`, the keyword arguments of its
            decoder's :class:`~mha_lib.model.EncoderConfig` (``model`` is then the encoder's);
            None for a :class:`~mha_lib.model.TokenClassifier`.
        pooling: the TokenClassifier's readout (``"token"``, ``"cls"`` or ``"mean"``).
    """

    name: str
    version: int
    task: dict
    model: dict
    steps: int
    batch_size: int
    lr: float
    weight_decay: float = 0.01
    warmup: float = 0.05
    seeds: Tuple[int, ...] = (0, 1, 2, 3, 4)
    eval_every: int = 100
    eval_sequences: int = 256
    tied_heads: bool = False
    checkpoints: Tuple[int, ...] = ()
    decoder: Optional[dict] = None
    pooling: str = "token"

    def make_task(self):
        """The task object."""
        return task_from_dict(self.task)

    def encoder_config(self, num_heads: Optional[int] = None):
        """The :class:`~mha_lib.model.EncoderConfig` (optionally with another ``num_heads``)."""
        kwargs = dict(self.model)
        if num_heads is not None:
            kwargs["num_heads"] = num_heads
        return EncoderConfig(**kwargs)

    def build(self):
        """A freshly initialised :class:`~mha_lib.model.TokenClassifier`, or
        :class:`~mha_lib.model.EncoderDecoder` when the spec has a ``decoder`` (uses torch's
        global RNG)."""
        if self.decoder is not None:
            return EncoderDecoder(self.encoder_config(), EncoderConfig(**self.decoder), self.make_task().num_classes)
        model = TokenClassifier(self.encoder_config(), self.make_task().num_classes, pooling=self.pooling)
        if self.tied_heads:  # chapter 2: every head shares head 0's W^Q, W^K, W^V (kept tied in training)
            for block in model.encoder.blocks:
                tie_heads(block.attn)
        return model

    def to_dict(self) -> dict:
        d = asdict(self)
        d["seeds"] = list(self.seeds)
        d["checkpoints"] = list(self.checkpoints)
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "TrainedSpec":
        d = dict(d)
        d["seeds"] = tuple(d["seeds"])
        d["checkpoints"] = tuple(d.get("checkpoints", ()))
        return cls(**d)


_TASK = PrevMarkedTask(vocab_size=8, seq_len=16, op="sub").to_dict()
_MODEL = dict(
    vocab_size=8,
    d_model=64,
    num_heads=1,
    num_layers=1,
    d_ff=256,
    max_len=16,
    positional="sinusoidal",
    type_vocab_size=2,
    pad_token_id=None,  # every token id is a real token: none may lose its gradient
    norm_first=True,
    activation="gelu",
)
_RECIPE = dict(steps=2000, batch_size=64, lr=3e-3)


def _spec(name: str, num_heads: int, num_layers: int = 1, seeds=(0, 1, 2, 3, 4)) -> TrainedSpec:
    model = dict(_MODEL, num_heads=num_heads, num_layers=num_layers)
    return TrainedSpec(name=name, version=1, task=_TASK, model=model, seeds=tuple(seeds), **_RECIPE)


_INDUCTION = dict(
    version=2,  # 2: curves log analysis.induction_score (all earlier occurrences)
    task=InductionTask(vocab_size=64, seq_len=32, repeat_lengths=(3, 4, 5, 6, 7, 8)).to_dict(),
    model=dict(vocab_size=64, d_model=64, num_heads=4, num_layers=2, d_ff=0, max_len=32, positional="sinusoidal",
               pad_token_id=None, is_causal=True, norm_first=True),  # attention-only (d_ff=0), causal
    steps=2000, batch_size=64, seeds=(0, 1, 2, 3, 4), eval_every=50,
)
_SEQ2SEQ = dict(vocab_size=27, d_model=64, num_heads=4, num_layers=2, d_ff=128, max_len=13, positional="sinusoidal",
                pad_token_id=0, norm_first=True)  # TranslationTask(): 24 words + 3 special ids, 12 words + EOS
_VIT = dict(vocab_size=0, patch_dim=1, cls_token=True, d_model=32, num_heads=4, num_layers=2, d_ff=64, max_len=65,
            positional="learned", pad_token_id=None, norm_first=True)  # 64 pixel tokens + [CLS]
_INDUCTION_CHECKPOINTS = (0, 200, 400, 500, 600, 700, 800, 900, 1000, 1200, 1500, 2000)

#: Every shipped trained model family, by name (``make train`` walks it). Chapter 1:
#: ``ch1-h{1,2,4,8}``; chapter 2: ``ch2-tied-h4``, ``ch2-narrow-h4``; chapter 3 adds
#: ``ch1-h16``, ``ch1-h32`` and ``ch3-h8-kv{4,2,1}`` (same task, d_model and recipe);
#: chapter 4 uses ``ch4-l3h8`` (3 layers x 8 heads); chapter 5 the attention-only causal models
#: ``ch5-induction-l2`` (with training checkpoints), ``ch5-induction-l2-lr1e-3`` and ``ch5-induction-l1``
#: on :class:`InductionTask`; chapter 6 the encoder-decoder ``ch6-translation`` on :class:`TranslationTask`;
#: chapter 7 the Vision Transformers ``ch7-digits-h{1,2,4,8}`` on :class:`DigitsTask`; chapter 9 the
#: cheaper-attention models ``ch9-{window4,window8,sparse4,latent,latent64,latent-rope}`` on chapter 5's task, and
#: ``ch9-{full,window8,sparse4,latent}-6k`` with three times the steps.
SHIPPED: Dict[str, TrainedSpec] = {
    s.name: s
    for s in [
        *(_spec(f"ch1-h{h}", h) for h in (1, 2, 4, 8, 16, 32)),
        _spec("ch4-l3h8", 8, num_layers=3, seeds=tuple(range(8))),  # 8 seeds: per-seed intervals in chapter 4
        # chapter 2, section 4: 4 tied heads vs one head of width d_model/4 (3 of 4 heads pruned at init)
        TrainedSpec(name="ch2-tied-h4", version=1, task=_TASK, model=dict(_MODEL, num_heads=4), tied_heads=True,
                    **_RECIPE),
        TrainedSpec(name="ch2-narrow-h4", version=1, task=_TASK,
                    model=dict(_MODEL, num_heads=4, pruned_heads={"0": [1, 2, 3]}), **_RECIPE),
        # chapter 3: ch1-h8 with grouped-query (4, 2 key/value heads) and multi-query (1) attention
        *(TrainedSpec(name=f"ch3-h8-kv{kv}", version=1, task=_TASK, model=dict(_MODEL, num_heads=8, num_kv_heads=kv),
                      seeds=(0, 1, 2, 3, 4), **_RECIPE) for kv in (4, 2, 1)),
        # chapter 5: attention-only causal models on the repeat task, 2 layers at two learning rates, 1 layer
        TrainedSpec(name="ch5-induction-l2", lr=3e-3, checkpoints=_INDUCTION_CHECKPOINTS, **_INDUCTION),
        TrainedSpec(name="ch5-induction-l2-lr1e-3", lr=1e-3, **dict(_INDUCTION, steps=4000)),  # twice the steps
        TrainedSpec(name="ch5-induction-l1", lr=3e-3, **dict(_INDUCTION, model=dict(_INDUCTION["model"], num_layers=1))),
        # chapter 6: an encoder-decoder on the reversed "translation"
        # version 2: the learning curves score word positions only (no alignment for the EOS prediction)
        TrainedSpec(name="ch6-translation", version=2, task=TranslationTask().to_dict(), model=_SEQ2SEQ,
                    decoder=dict(_SEQ2SEQ, is_causal=True, cross_attention=True), steps=1200, batch_size=64,
                    lr=3e-3, eval_every=50),
        # chapter 7: a small Vision Transformer on 8x8 digits, one pixel per token, 1 to 8 heads at equal size
        *(TrainedSpec(name=f"ch7-digits-h{h}", version=1, task=DigitsTask().to_dict(), model=dict(_VIT, num_heads=h),
                      pooling="cls", steps=600, batch_size=64, lr=3e-3, eval_every=50) for h in (1, 2, 4, 8)),
        # chapter 9: chapter 5's model and recipe (ch5-induction-l2 is the full-attention baseline) with a
        # sliding window of 4 or 8 keys, BigBird's block-sparse pattern on blocks of 4, or multi-head latent
        # attention (a 29-number latent and an 8-number RoPE key: 16,645 attention parameters per layer
        # against MHA's 16,640)
        *(TrainedSpec(name=f"ch9-{name}", lr=3e-3, **dict(_INDUCTION, version=1, model=dict(_INDUCTION["model"], **extra)))
          for name, extra in [("window4", {"attention_window": 4}), ("window8", {"attention_window": 8}),
                              ("sparse4", {"sparse_block": 4}), ("latent", {"kv_rank": 29, "rope_dim": 8}),
                              ("latent64", {"kv_rank": 64, "rope_dim": 8}),  # a latent as wide as d_model
                              # positions only in the RoPE key, as DeepSeek-V2 (the two above also add
                              # chapter 5's sinusoidal positions to the embeddings)
                              ("latent-rope", {"kv_rank": 29, "rope_dim": 8, "positional": "none"})]),
        # ... and three times the budget (6,000 steps): 2,000 steps leave the window, the blocks and MLA short
        *(TrainedSpec(name=f"ch9-{name}-6k", lr=3e-3, **dict(_INDUCTION, version=1, steps=6000,
                                                             model=dict(_INDUCTION["model"], **extra)))
          for name, extra in [("full", {}), ("window8", {"attention_window": 8}), ("sparse4", {"sparse_block": 4}),
                              ("latent", {"kv_rank": 29, "rope_dim": 8})]),
    ]
}



def _resolve(spec: Union[str, TrainedSpec]) -> TrainedSpec:
    if isinstance(spec, TrainedSpec):
        return spec
    if spec not in SHIPPED:
        raise ValueError(f"no shipped model named {spec!r}; known: {sorted(SHIPPED)}")
    return SHIPPED[spec]


def weight_files(spec: Union[str, TrainedSpec], directory: Union[str, Path, None] = None) -> Tuple[Path, Path]:
    """Paths ``(<name>.v<version>.safetensors, <name>.v<version>.json)`` in ``directory``
    (default: the package's ``weights/`` folder)."""
    spec = _resolve(spec)
    directory = WEIGHTS_DIR if directory is None else Path(directory)
    stem = f"{spec.name}.v{spec.version}"
    return directory / f"{stem}.safetensors", directory / f"{stem}.json"


def trained_info(spec: Union[str, TrainedSpec], directory: Union[str, Path, None] = None) -> dict:
    """The JSON metadata of a shipped model family: ``spec``, ``seeds``, ``accuracy``
    (per seed, on the shipped float16 weights, with :func:`evaluate`), ``curves`` (per seed:
    ``steps``, ``loss`` (mean training loss, nats, over each interval), ``accuracy`` (on
    ``eval_sequences`` fixed sequences)), ``train_seconds`` per seed and the software versions.

    Raises:
        FileNotFoundError: if the files are missing (run ``make train``).
        ValueError: the metadata is not valid JSON or lacks ``spec``/``seeds``, or the stored
            spec differs from the registry's (stale weights); the message names the file.
    """
    spec = _resolve(spec)
    _, meta_path = weight_files(spec, directory)
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} is missing: run `make train` (scripts/train_all.py)")
    try:
        info = read_json(meta_path)  # the one guarded JSON reader: too deep, too big, not an object
        stored = TrainedSpec.from_dict(info["spec"])
        info["seeds"] = [checks.seed(s, "seed") for s in info["seeds"]]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{meta_path} is not valid model metadata: {type(err).__name__}: {err}") from None
    if stored != spec:
        raise ValueError(
            f"{meta_path} was trained with a different spec than mha_lib.tasks.SHIPPED[{spec.name!r}]; "
            "retrain with `make train`"
        )
    return info


def load_trained(
    spec: Union[str, TrainedSpec], seed: Optional[int] = None, *, directory: Union[str, Path, None] = None,
    device: Union[str, torch.device] = "cpu", step: Optional[int] = None,
):
    """Load a shipped trained :class:`~mha_lib.model.TokenClassifier`, in eval mode.

    Args:
        spec: a name from :data:`SHIPPED` (e.g. ``"ch1-h4"``) or a :class:`TrainedSpec`.
        seed: which seed; default the spec's first seed.
        directory: where the files are (default: the package's ``weights/``; the training
            cache of :mod:`mha_lib.train` uses the same layout).
        device: where to put the model.
        step: a training checkpoint instead of the final weights: one of the spec's
            ``checkpoints`` (optimiser steps done; 0 = initialisation), of its first seed.

    Returns:
        a float32 TokenClassifier; its weights are the stored float16 values, upcast.

    Raises:
        ValueError: unknown name, seed or checkpoint step (or a step with a seed other than
            the first), stale files (spec mismatch), metadata that is not
            JSON, or a weights file that is unreadable or whose tensors do not fit the model or
            hold NaN/inf (naming the file and the key).
        FileNotFoundError: the files are missing.
    """
    spec = _resolve(spec)
    info = trained_info(spec, directory)
    seed = spec.seeds[0] if seed is None else checks.seed(seed, "seed")
    if seed not in info["seeds"]:
        raise ValueError(f"{spec.name} has no seed {seed!r}; shipped seeds: {info['seeds']}")
    weights_path, _ = weight_files(spec, directory)
    prefix = f"seed{seed}/"
    if step is not None:
        step = checks.nonnegative_int(step, "step")
        if step not in spec.checkpoints or seed != spec.seeds[0]:
            raise ValueError(f"{spec.name} has checkpoints of seed {spec.seeds[0]} at steps {list(spec.checkpoints)}; "
                             f"got step={step}, seed={seed}")
        prefix = f"checkpoint{step}/"
    model = build_checked(spec.build, weights_path, prefix=prefix, source=f"{weights_path}[{prefix}]")
    return model.to(device).eval()  # float32: the stored float16 values, upcast


def load_trained_seeds(spec: Union[str, TrainedSpec], **kwargs) -> Dict[int, torch.nn.Module]:
    """``{seed: model}`` for every shipped seed of ``spec`` (keywords as :func:`load_trained`)."""
    spec = _resolve(spec)
    seeds = trained_info(spec, kwargs.get("directory"))["seeds"]
    return {s: load_trained(spec, s, **kwargs) for s in seeds}
