"""What a head matches and what it writes: QK and OV circuits (Elhage et al. 2021).

Row-vector convention, as everywhere in mha_lib: scores_ij = x_i W_QK x_j^T / sqrt(hd), and a
head adds alpha_ij x_j W_OV to position i. The previous-token and induction scores that find the
heads of these circuits (Olsson et al. 2022) live with the induction task, in
``mha_lib/tasks/induction.py``, and are re-exported by :mod:`mha_lib.analysis`.
"""
from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from .. import checks
from ..core.multi_head import MultiHeadAttention


def _head_matrices(mha, head: int) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """W_Q, W_K, W_V (d_model, hd) and W_O (hd, d_model) of current head ``head`` (GQA-aware)."""
    if not isinstance(mha, MultiHeadAttention):
        raise ValueError(f"mha must be an mha_lib MultiHeadAttention, got {type(mha).__name__}")
    h = checks.as_int(head, "head")
    if not 0 <= h < mha.num_heads:
        raise ValueError(f"head={h} is outside range(num_heads={mha.num_heads}) of this layer")
    hd = mha.head_dim
    kv = int(mha.kv_head_index[h])  # the key/value head it reads (its group's, also after pruning)
    rows, kv_rows = slice(h * hd, (h + 1) * hd), slice(kv * hd, (kv + 1) * hd)
    w_q = mha.q_proj.weight[rows].T  # (d_model, hd)
    w_k = mha.k_proj.weight[kv_rows].T
    w_v = mha.v_proj.weight[kv_rows].T
    w_o = mha.out_proj.weight[:, rows].T  # (hd, d_model)
    return w_q, w_k, w_v, w_o


@torch.no_grad()
def qk_circuit(mha, head: int) -> Tensor:
    """W_QK = W_Q W_K^T of one head (Elhage et al. 2021): scores_ij = x_i W_QK x_j^T / sqrt(hd),
    biases aside.

    Args:
        mha: a :class:`~mha_lib.core.MultiHeadAttention`.
        head: a current head index in range(mha.num_heads).

    Returns:
        (d_model, d_model) tensor in the module's dtype, of rank <= head_dim.

    Raises:
        ValueError: ``mha`` not a MultiHeadAttention, or a head index that is not an int in range.
    """
    w_q, w_k, _, _ = _head_matrices(mha, head)
    return w_q @ w_k.T


@torch.no_grad()
def ov_circuit(mha, head: int) -> Tensor:
    """W_OV = W_V W_O of one head (Elhage et al. 2021): the head adds sum_j alpha_ij x_j W_OV to
    position i, biases aside.

    Args, returns and errors as :func:`qk_circuit`.
    """
    _, _, w_v, w_o = _head_matrices(mha, head)
    return w_v @ w_o


@torch.no_grad()
def full_ov_circuit(model, layer: int, head: int) -> Tensor:
    """Token to logit through one head alone: W_E diag(g_l) W_OV diag(g_f) W_U, (V, V).

    Row t is how much the head, attending fully to a token t (through the direct path from the
    embedding, not through earlier layers), raises each output logit. Approximation: each
    LayerNorm is replaced by its elementwise gain g (its centring and its per-position factor
    1/sigma are dropped; the latter rescales rows and can move eigenvalues a little);
    position embeddings and biases are left out, as in Elhage et al. 2021. Pre-LN models
    without an embedding LayerNorm only.

    Args:
        model: a :class:`~mha_lib.model.TokenClassifier` with a token front-end and
            ``num_classes == vocab_size`` (a language model).
        layer: block index; head: current head index of that block.

    Returns:
        float tensor (V, V).

    Raises:
        ValueError: a model without token embeddings or with num_classes != vocab_size, a
            post-LN model or one with an embedding LayerNorm (where the approximation does not
            hold), or a layer or head out of range.
    """

    encoder = model.encoder
    if encoder.token_embedding is None or model.num_classes != encoder.config.vocab_size:
        raise ValueError("full_ov_circuit needs a language model: token embeddings and num_classes == vocab_size")
    if not encoder.config.norm_first or encoder.config.embedding_norm:
        raise ValueError("full_ov_circuit replaces pre-LN LayerNorms by their gains; this model is post-LN or has an "
                         "embedding LayerNorm (norm_first=False or embedding_norm=True)")
    l = checks.as_int(layer, "layer")
    if not 0 <= l < len(encoder.blocks):
        raise ValueError(f"layer={l} is outside range(num_layers={len(encoder.blocks)})")
    block = encoder.blocks[l]
    w_e = encoder.token_embedding.weight  # (V, d_model)
    gain_in = block.norm1.weight if block.norm_first else torch.ones_like(w_e[0])
    gain_out = encoder.final_norm.weight if encoder.final_norm is not None else torch.ones_like(w_e[0])
    w_u = model.readout.weight.T  # (d_model, V)
    return (w_e * gain_in) @ ov_circuit(block.attn, head) @ (gain_out[:, None] * w_u)


def copying_score(matrix: Tensor) -> float:
    """Elhage et al. 2021's copying score: sum of the eigenvalues over the sum of their absolute
    values, ``sum(eig) / sum(abs(eig))``, real part.

    Near 1 when the circuit maps each token mostly to itself (copying: the identity scores 1),
    near -1 when it suppresses it (-identity scores -1), near 0 without a preference.

    Args:
        matrix: a square (n, n) float tensor, e.g. :func:`full_ov_circuit`.

    Returns:
        a float in [-1, 1].

    Raises:
        ValueError: not a square 2-D float tensor, non-finite entries, or all eigenvalues 0.
    """
    if not isinstance(matrix, Tensor) or matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] \
            or not matrix.is_floating_point():
        raise ValueError(f"matrix must be a square 2-D float tensor, got "
                         f"{tuple(matrix.shape) if isinstance(matrix, Tensor) else type(matrix).__name__}")
    if not bool(torch.isfinite(matrix).all()):
        raise ValueError("matrix holds NaN or infinite values")
    eig = torch.linalg.eigvals(matrix.detach().double())  # complex (n,)
    total = float(eig.abs().sum())
    if total == 0.0:
        raise ValueError("every eigenvalue is 0: the copying score is undefined")
    return float(eig.sum().real) / total
