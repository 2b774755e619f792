"""Tied heads: multi-head attention with the heads' independence taken away.

:func:`tie_heads` forces every head of a :class:`~mha_lib.core.multi_head.MultiHeadAttention` to
share one head's W^Q_i, W^K_i, W^V_i (kept tied during training), and :func:`merge_tied_heads`
turns such a layer into the single head of width d_model/H that it equals:
Concat(h, ..., h) W^O = h sum_i W^O_i. Chapter 2 uses the pair to show that multi-head attention
is not H copies of one head (its shipped ``ch2-tied`` model is built with :func:`tie_heads`).
"""
from __future__ import annotations

from ..core.multi_head import MultiHeadAttention

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize


# ---------------------------------------------------------------------------------------------
# Tied heads: multi-head attention with the heads' independence taken away
# ---------------------------------------------------------------------------------------------


class _RepeatHead(nn.Module):
    """Parametrization: store one head's rows (hd, ...) and use them for every head (n*hd, ...)."""

    def __init__(self, copies: int, head_dim: int, source: int):
        super().__init__()
        self.copies, self.head_dim, self.source = copies, head_dim, source

    def forward(self, rows: Tensor) -> Tensor:  # (hd, ...) -> (copies*hd, ...)
        return rows.repeat(self.copies, *([1] * (rows.dim() - 1)))

    def right_inverse(self, full: Tensor) -> Tensor:  # (copies*hd, ...) -> the source head's rows
        return full[self.source * self.head_dim:(self.source + 1) * self.head_dim]


def tie_heads(mha, source: int = 0):
    """Make every head of ``mha`` use head ``source``'s W^Q_i, W^K_i, W^V_i (and biases), in place.

    The projections are re-parametrised with ``torch.nn.utils.parametrize``: only the source
    head's rows are stored, and every head reads them, so the heads stay tied while the module
    trains. W^O is left alone. Every head then computes the same weights and output, and the layer
    equals one head of width d_model/H whose output projection is the sum of W^O's H blocks (see
    :func:`merge_tied_heads`). Under GQA/MQA the key/value projections are tied to the KV head
    that ``source`` reads. The state_dict keys become ``q_proj.parametrizations.weight.original``
    and so on; ``parametrize.remove_parametrizations`` unties (keeping the tied values). Do not
    prune a tied module: pruning replaces the projections and drops the tie.

    Args:
        mha: a :class:`mha_lib.core.MultiHeadAttention`, not yet tied, with no pruned heads.
        source: the head whose projections every head gets (0-based, < num_heads).

    Returns:
        ``mha`` itself, tied.

    Raises:
        ValueError: ``source`` out of range, a module that is already tied, or one with pruned heads.
    """
    if not 0 <= source < mha.num_heads:
        raise ValueError(f"source={source} is out of range for num_heads={mha.num_heads}")
    if mha.pruned_heads:
        raise ValueError(f"tie_heads needs a module without pruned heads, got pruned_heads={sorted(mha.pruned_heads)}")
    if parametrize.is_parametrized(mha.q_proj):
        raise ValueError("this module's projections are already parametrized (tied?)")
    hd = mha.head_dim
    kv_source = mha._kv_index[source]  # a list: readable on the meta device too
    for proj, copies, src in ((mha.q_proj, mha.num_heads, source), (mha.k_proj, mha.num_kv_heads, kv_source),
                              (mha.v_proj, mha.num_kv_heads, kv_source)):
        for name in ("weight", "bias"):
            if getattr(proj, name) is not None:
                parametrize.register_parametrization(proj, name, _RepeatHead(copies, hd, src))
    return mha


@torch.no_grad()
def merge_tied_heads(mha):
    """The single head of width d_model/H that a tied layer (:func:`tie_heads`) equals.

    For tied heads, ``Concat(h, ..., h) W^O = h (W^O_1 + ... + W^O_H)``. The result is a new
    :class:`~mha_lib.core.MultiHeadAttention` with the same d_model and every head but one pruned (so its
    head_dim stays d_model/H), holding the shared W^Q_i, W^K_i, W^V_i and the merged output
    projection ``sum_i W^O_i``. Its outputs equal ``mha``'s (to float rounding), with any mask.

    Args:
        mha: a MultiHeadAttention whose heads are tied (all heads' query, key and value rows
            equal, e.g. after :func:`tie_heads`).

    Returns:
        a new MultiHeadAttention (1 query head, 1 KV head), in ``mha``'s dtype, device and mode.

    Raises:
        ValueError: if the heads of ``mha`` are not tied.
    """
    H, H_kv, hd, d = mha.num_heads, mha.num_kv_heads, mha.head_dim, mha.d_model
    for proj, copies in ((mha.q_proj, H), (mha.k_proj, H_kv), (mha.v_proj, H_kv)):
        w = proj.weight.view(copies, hd, d)
        if not torch.equal(w, w[:1].expand_as(w)):
            raise ValueError("merge_tied_heads: the heads of this module are not tied (use tie_heads first)")
    single = MultiHeadAttention(d, H, num_kv_heads=H_kv, bias=mha.bias,
                                pruned_heads=range(1, H)).to(mha.out_proj.weight)
    for mine, theirs in ((single.q_proj, mha.q_proj), (single.k_proj, mha.k_proj), (single.v_proj, mha.v_proj)):
        mine.weight.copy_(theirs.weight[:hd])
        if theirs.bias is not None:
            mine.bias.copy_(theirs.bias[:hd])
    single.out_proj.weight.copy_(mha.out_proj.weight.view(d, H, hd).sum(1))  # (d_model, hd): sum_i W^O_i
    if mha.out_proj.bias is not None:
        single.out_proj.bias.copy_(mha.out_proj.bias)
    return single.train(mha.training)
