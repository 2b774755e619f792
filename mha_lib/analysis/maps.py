"""Heads over image patches: attention rollout (Abnar and Zuidema 2020) and offset kernels.

:func:`offset_kernels` averages a head's weight by the key's offset from the query, a "kernel" per
head (Cordonnier et al. 2020).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from .. import checks


# ---------------------------------------------------------------------------------------------
# 5. Heads over image patches: rollout and relative-offset kernels
# ---------------------------------------------------------------------------------------------


def attention_rollout(attentions: Sequence[Tensor]) -> Tensor:
    """Attention rollout of Abnar and Zuidema 2020 ("Quantifying Attention Flow in Transformers").

    Each layer's weights are averaged over heads, the residual connection is added as an
    identity, ``A_l = (mean_h W_l + I) / 2`` (rows sum to 1 again), and the layers are
    multiplied, later layers on the left: ``R = A_n ... A_2 A_1``. Row i of R says how much of
    each input position flows into position i at the top of the stack, through every path.

    Args:
        attentions: per layer (B, H, L, L) float weights (e.g. a model's ``attentions``
            output), all with the same B and L.

    Returns:
        float32 tensor (B, L, L), rows summing to 1 (a query row that no layer lets attend,
        e.g. padding, sums to less).

    Raises:
        ValueError: an empty sequence, or layers that are not (B, H, L, L) attention weights
            of one shape.
    """
    if isinstance(attentions, Tensor) or not isinstance(attentions, (list, tuple)) or not attentions:
        raise ValueError("attentions must be a non-empty list of per-layer (B, H, L, L) tensors")
    layers = [checks.attention_rows(w, f"attentions[{i}]") for i, w in enumerate(attentions)]
    if len({tuple(w.shape[:1] + w.shape[2:]) for w in layers}) != 1:
        raise ValueError(f"layers differ in B or L: {[tuple(w.shape) for w in layers]}")
    B, _, L, _ = layers[0].shape
    eye = torch.eye(L, device=layers[0].device)
    rollout = eye.expand(B, L, L)
    for w in layers:
        a = 0.5 * w.mean(1) + 0.5 * eye  # (B, L, L), rows sum to 1
        rollout = a @ rollout
    return rollout


def offset_kernels(weights: Tensor, grid: int, *, first_patch: int = 1, margin: int = 0) -> Tensor:
    """Each head's mean attention weight as a function of the key's offset from the query, on a
    square grid of patches: a small 2-D "kernel" per head (the view of Cordonnier et al. 2020,
    "On the Relationship between Self-Attention and Convolutional Layers").

    Queries are the patches at least ``margin`` patches away from every border (interior
    queries see every offset up to ``margin`` on all sides); keys are all patches (a [CLS]
    position before them is left out). Each offset is averaged over the queries that have a
    key there, so far offsets, which few queries have, are not shrunk towards 0; within
    ``margin`` every query counts.

    Args:
        weights: (B, H, L, L) float attention weights of one layer, with L = first_patch +
            grid**2 positions, patches in row-major order (as :func:`mha_lib.model.patchify`).
        grid: patches per side, >= 1.
        first_patch: index of the first patch (1 after a [CLS] token, 0 without).
        margin: queries closer than this to a border are skipped; 0 <= 2 margin < grid.

    Returns:
        float32 tensor (H, 2 grid - 1, 2 grid - 1): entry [h, dy + grid - 1, dx + grid - 1] is
        head h's mean weight on the key dy rows and dx columns away from the query, averaged
        over the queries (and sequences) that have a key at that offset; 0 where none has.

    Raises:
        ValueError: weights that are not attention weights, L != first_patch + grid**2, or a
            bad grid, first_patch or margin.
    """

    w = checks.attention_rows(weights)
    g = checks.positive_int(grid, "grid")
    first = checks.nonnegative_int(first_patch, "first_patch")
    m = checks.nonnegative_int(margin, "margin")
    if w.shape[-1] != first + g * g:
        raise ValueError(f"weights have L = {w.shape[-1]} positions, expected first_patch + grid**2 = {first + g * g}")
    if 2 * m >= g:
        raise ValueError(f"margin={m} leaves no interior query on a {g} x {g} grid")
    H = w.shape[1]
    patches = w[:, :, first:, first:].reshape(w.shape[0], H, g, g, g, g)  # (B, H, qy, qx, ky, kx)
    kernel = torch.zeros(H, 2 * g - 1, 2 * g - 1, dtype=w.dtype, device=w.device)
    count = torch.zeros(2 * g - 1, 2 * g - 1, dtype=w.dtype, device=w.device)
    for qy in range(m, g - m):
        for qx in range(m, g - m):
            # keys at offsets (ky - qy, kx - qx) land at rows g-1-qy .. 2g-2-qy of the kernel
            window = (slice(g - 1 - qy, 2 * g - 1 - qy), slice(g - 1 - qx, 2 * g - 1 - qx))
            kernel[(slice(None), *window)] += patches[:, :, qy, qx].mean(0)
            count[window] += 1
    return kernel / count.clamp(min=1)
