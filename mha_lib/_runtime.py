"""Seeding and device choice, shared by every module and every chapter."""
from __future__ import annotations

import os
import random
import sys

import numpy as np
import torch

from . import checks

__all__ = ["set_seed", "default_device"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # mha_lib/, every subpackage included


def set_seed(seed: int = 0) -> None:
    """Seed Python's ``random``, NumPy and torch (CPU and every CUDA device).

    Args:
        seed: an integer in [0, 2**64 - 1] (``checks.seed``: what torch's generators take).

    Raises:
        ValueError: if ``seed`` is not an integer in that range (naming it).

    Bitwise-identical results also need the same torch version, device and thread
    count; the chapters print those next to every measured number.
    """
    seed = checks.seed(seed, "seed")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def default_device() -> torch.device:
    """The best available device: CUDA, then Apple's MPS, then CPU.

    Set the environment variable ``MHA_LIB_DEVICE`` (e.g. ``cpu``) to override it.

    Returns:
        A ``torch.device``.

    Raises:
        ValueError: if ``MHA_LIB_DEVICE`` names a device torch cannot parse.
    """
    forced = os.environ.get("MHA_LIB_DEVICE")
    if forced:
        try:
            return torch.device(forced)
        except RuntimeError as err:
            raise ValueError(f"MHA_LIB_DEVICE={forced!r} is not a torch device: {err}") from None
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def user_stacklevel() -> int:
    """``stacklevel`` for a warning raised in mha_lib, pointing at the first caller outside mha_lib and torch.

    Checks are reached through ``attention``, ``MultiHeadAttention.forward`` (via nn.Module's
    call machinery), ``Encoder.forward`` and more, so no fixed number is right.
    """
    skip = (_PACKAGE_DIR, os.path.dirname(torch.__file__) + os.sep)
    frame, level = sys._getframe(1), 1  # level 1 = the function that calls warnings.warn
    while frame is not None and (frame.f_code.co_filename.startswith(skip)
                                 or frame.f_code.co_filename.startswith("<frozen importlib")):  # an import
        frame, level = frame.f_back, level + 1
    return level
