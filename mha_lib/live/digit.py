"""The ``"digit"`` view's numbers (chapter 7): :func:`digit_config`, and :func:`digit_readings`, what
the page computes from one run of a Vision Transformer on the reader's drawing."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

import torch

from .. import checks
from .. import tasks as T
from ..analysis.maps import attention_rollout
from ..model import TokenClassifier, patchify
from .configs import _check_toy_model

#: Most example images a ``"digit"`` view carries (each is 64 numbers in the page).
MAX_DIGIT_EXAMPLES = 24


@torch.no_grad()
def digit_readings(model, image: torch.Tensor) -> Dict[str, Any]:
    """What the ``"digit"`` view shows of one model on one 8x8 image: the page computes the same.

    Args:
        model: a chapter-7 :class:`~mha_lib.model.TokenClassifier` (one-pixel patches, [CLS],
            ``pooling="cls"``), e.g. ``tasks.load_trained("ch7-digits-h4")``.
        image: (8, 8) float grey levels in [0, 1] (0 = paper, 1 = ink), as
            :meth:`~mha_lib.tasks.DigitsTask.images` gives them.

    Returns:
        a dict with ``probabilities`` (10 floats: the softmax of the logits), ``prediction``
        (int), ``cls`` ([layer][head][row][column]: [CLS]'s weight on each pixel, 8 x 8 a head),
        ``cls_self`` ([layer][head]: [CLS]'s weight on itself; with ``cls`` each head's row sums
        to 1) and ``rollout`` ([row][column]: row 0 of :func:`~mha_lib.analysis.attention_rollout`,
        Abnar and Zuidema 2020, on the pixels: how much of each pixel flows into [CLS] at the top).

    Raises:
        ValueError: ``image`` not an (8, 8) real tensor with values in [0, 1]; a model that is not a
            TokenClassifier with a [CLS] token and 1-value patches on an 8x8 grid.
    """
    if not isinstance(model, TokenClassifier):
        raise ValueError(f"model must be a chapter-7 TokenClassifier (tasks.load_trained('ch7-digits-h4')), got "
                         f"{type(model).__name__}")
    cfg = model.encoder.config
    if cfg.patch_dim != 1 or not cfg.cls_token or cfg.max_len != 65:
        raise ValueError(f"model reads patch_dim={cfg.patch_dim}, cls_token={cfg.cls_token}, max_len={cfg.max_len}: "
                         "the digit view draws one-pixel patches of an 8x8 image after [CLS] (1, True, 65)")
    if not isinstance(image, torch.Tensor) or tuple(image.shape) != (8, 8) or not image.dtype.is_floating_point:
        raise ValueError(f"image must be an (8, 8) float tensor of grey levels, got "
                         f"{getattr(image, 'dtype', type(image).__name__)} {tuple(getattr(image, 'shape', ()))}")
    if not bool(torch.isfinite(image).all()) or float(image.min()) < 0 or float(image.max()) > 1:
        raise ValueError(f"image values must lie in [0, 1], got [{float(image.min()):.4g}, {float(image.max()):.4g}]")
    was_training = model.training
    model.eval()
    try:
        out = model(patchify(image.float()[None], 1), output_attentions=True)  # logits (1, 10)
    finally:
        model.train(was_training)
    probs = out.logits[0].float().softmax(-1)  # (10,)
    rows = torch.stack([w[0, :, 0] for w in out.attentions]).float()  # (layers, H, 65): [CLS]'s rows
    rollout = attention_rollout(out.attentions)[0, 0, 1:]  # (64,)
    return {"probabilities": probs.tolist(), "prediction": int(probs.argmax()),
            "cls": rows[..., 1:].reshape(*rows.shape[:2], 8, 8).tolist(), "cls_self": rows[..., 0].tolist(),
            "rollout": rollout.reshape(8, 8).tolist()}


@torch.no_grad()
def digit_config(spec_names: Sequence[str], images: torch.Tensor, labels: torch.Tensor, *, index: int = 0,
                 seed: Optional[int] = None, models: Optional[Mapping[str, torch.nn.Module]] = None) -> Dict[str, Any]:
    """The initial state of a ``"digit"`` view: chapter 7's ViTs on a digit the reader can redraw.

    The page shows an 8x8 drawing pad holding ``images[index]``, a button per example image, and
    for the model chosen: its ten probabilities, each head's [CLS] attention over the pixels
    and the attention rollout; the other models' predictions in a line.

    Args:
        spec_names: names from :data:`mha_lib.tasks.SHIPPED` trained on
            :class:`~mha_lib.tasks.DigitsTask` with ``patch_size=1`` (chapter 7:
            ``["ch7-digits-h1", "ch7-digits-h2", "ch7-digits-h4", "ch7-digits-h8"]``); the site
            ships seed 0 of each.
        images: (N, 8, 8) float grey levels in [0, 1], 1 <= N <= :data:`MAX_DIGIT_EXAMPLES`: the
            examples the reader can load (e.g. test images).
        labels: (N,) integer digits 0-9 of ``images``.
        index: the example drawn first.
        seed: the seed of the shipped weights (default the spec's first, as the site's models).
        models: already loaded models ``{name: TokenClassifier}`` (checked against their spec);
            names left out are loaded with :func:`mha_lib.tasks.load_trained`.

    Returns:
        a dict with ``models`` (the names), ``side`` (8), ``pixels`` (64 floats, row by row: the
        image drawn first), ``label`` (its digit), ``examples`` (``[{"label", "pixels"}]``, one
        per image) and ``results``: per name, :func:`digit_readings` of ``images[index]``.

    Raises:
        ValueError: ``spec_names`` not a (list of) shipped names, empty or with a repeat; a model
            not trained on one-pixel DigitsTask patches; ``images`` not (N, 8, 8) in [0, 1] with
            1 <= N <= 24; ``labels`` not N integers in 0-9; ``index`` out of range; ``models``
            not a mapping of names to TokenClassifiers built as their spec says.
    """
    if isinstance(spec_names, str):
        spec_names = [spec_names]
    try:
        names = list(spec_names)
    except TypeError:
        raise ValueError(f"spec_names must be a list of names from mha_lib.tasks.SHIPPED, got {spec_names!r:.60}") \
            from None
    if not names:
        raise ValueError("spec_names is empty: name at least one shipped model")
    for name in names:
        if not isinstance(name, str) or name not in T.SHIPPED:
            raise ValueError(f"{name!r:.60} is not a shipped model (mha_lib.tasks.SHIPPED)")
        task = T.SHIPPED[name].make_task()
        if not isinstance(task, T.DigitsTask) or task.patch_size != 1:
            raise ValueError(f"{name!r} was trained on {task.to_dict()}: a digit view draws one-pixel patches of "
                             "chapter 7's DigitsTask (patch_size=1)")
    if len(set(names)) != len(names):
        raise ValueError(f"spec_names {names} names a model twice")
    if models is not None and not isinstance(models, Mapping):
        raise ValueError(f"models must be a dict {{name: model}} or None, got {type(models).__name__}")
    for name, model in (models or {}).items():
        if name not in names:
            raise ValueError(f"models has {name!r}, which is not in spec_names {names}")
        _check_toy_model(model, T.SHIPPED[name], f"models[{name!r}]", TokenClassifier)
    if (not isinstance(images, torch.Tensor) or images.dim() != 3 or tuple(images.shape[1:]) != (8, 8)
            or not images.dtype.is_floating_point or not 1 <= images.shape[0] <= MAX_DIGIT_EXAMPLES):
        raise ValueError(f"images must be an (N, 8, 8) float tensor with 1 <= N <= {MAX_DIGIT_EXAMPLES}, got "
                         f"{getattr(images, 'dtype', type(images).__name__)} {tuple(getattr(images, 'shape', ()))}")
    if not bool(torch.isfinite(images).all()) or float(images.min()) < 0 or float(images.max()) > 1:
        raise ValueError(f"images must hold grey levels in [0, 1], got [{float(images.min()):.4g}, "
                         f"{float(images.max()):.4g}]")
    N = images.shape[0]
    if (not isinstance(labels, torch.Tensor) or labels.shape != (N,) or labels.dtype.is_floating_point
            or labels.dtype == torch.bool or int(labels.min()) < 0 or int(labels.max()) > 9):
        raise ValueError(f"labels must be {N} integer digits in 0-9, got {labels!r:.80}")
    index = checks.as_int(index, "index")
    if not 0 <= index < N:
        raise ValueError(f"index={index} is out of range for {N} images")
    images = images.detach().float().cpu()
    results = {name: digit_readings(models[name] if models and name in models else T.load_trained(name, seed),
                                    images[index]) for name in names}
    return {"models": names, "side": 8, "pixels": images[index].flatten().tolist(), "label": int(labels[index]),
            "examples": [{"label": int(y), "pixels": x.flatten().tolist()} for x, y in zip(images, labels)],
            "results": results}
