"""The head grid: a model's heads as a (num_layers, H) table indexed by ORIGINAL head numbers.

Every score and every mask of :mod:`mha_lib.pruning` and :mod:`mha_lib.analysis` is such a
tensor, H = the heads per layer before any pruning. A head that a model has already pruned
structurally has mask 0 (and score NaN). Masks are float, 1 = keep, 0 = drop (the xi_h of Michel
et al. 2019); :func:`layer_head_masks` turns a grid mask into the per-layer masks over the *kept*
heads that ``model(..., head_mask=...)`` expects.
"""
from __future__ import annotations

from typing import Iterable, List, Mapping, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .. import checks
from ..core.multi_head import MultiHeadAttention


HeadsSpec = Union[Mapping[int, Iterable[int]], Tensor]


# ----------------------------------------------------------------------------- the head grid
def attention_layers(model: nn.Module) -> List[MultiHeadAttention]:
    """The model's attention modules, one per layer, in layer order.

    Args:
        model: an mha_lib ``Encoder``, ``TokenClassifier``, ``BertEncoder``, a single
            ``MultiHeadAttention`` (one layer), or any module holding MultiHeadAttention
            modules (taken in ``model.modules()`` order).

    Returns:
        list of num_layers :class:`~mha_lib.core.MultiHeadAttention`.

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
        model: see :func:`~mha_lib.pruning.attention_layers`.

    Returns:
        A tuple of two ints ``(num_layers, H)``.

    Raises:
        ValueError: if the model holds no MultiHeadAttention (from :func:`~mha_lib.pruning.attention_layers`).
    """
    layers = attention_layers(model)
    return len(layers), max(a.original_num_heads for a in layers)


def kept_mask(model: nn.Module) -> Tensor:
    """Grid mask of the heads that exist: (num_layers, H) float32, 1 = kept, 0 = pruned (or absent).

    Args:
        model: see :func:`~mha_lib.pruning.attention_layers`.

    Returns:
        A (num_layers, H) float32 CPU tensor indexed by original head numbers; a layer with
        fewer than H heads before pruning has 0 in the columns it never had.

    Raises:
        ValueError: if the model holds no MultiHeadAttention (from :func:`~mha_lib.pruning.attention_layers`).
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
        model: see :func:`~mha_lib.pruning.attention_layers`.
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
