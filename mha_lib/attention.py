"""Scaled dot-product attention and multi-head attention.

Read this file top to bottom:

1. ``attention``: the functional form, softmax(Q K^T / sqrt(d_k) + mask) V, on tensors that are
   already split into heads.
2. ``build_attention_mask``: the ONE place where every kind of mask (key padding, attn_mask,
   causal) becomes a single additive float mask. Both paths of ``MultiHeadAttention`` use it.
3. ``MultiHeadAttention``: projections, the two attention paths (fused SDPA kernel, or the
   explicit teaching path that also returns weights), head_mask, GQA/MQA, KV cache, pruning,
   and ``from_torch``. Its ``forward`` is the entry point: it reads top to bottom, with shapes.

Notation (used in every shape comment):
    B  batch size          L  query length        S  key/value length
    H  query heads         H_kv  key/value heads  hd  head_dim = d_k = d_model // num_heads
    d_model  model width

Conventions:
    * Batch first, always: (B, L, d_model).
    * A bool mask means True = blocked (not allowed to attend), as in
      ``torch.nn.MultiheadAttention``. Careful: ``F.scaled_dot_product_attention`` uses the
      opposite polarity (True = keep); that is why our functional form is named ``attention``.
    * A float mask is ADDED to the scores; ``-inf`` blocks.
    * A query row whose keys are all blocked gets zero weights and a zero head output, never NaN.

Papers followed:
    Vaswani et al. 2017, "Attention Is All You Need" (scaled dot-product and multi-head attention).
    Shazeer 2019, "Fast Transformer Decoding: One Write-Head is All You Need" (multi-query attention).
    Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from
    Multi-Head Checkpoints" (grouped-query attention).
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?" (head mask xi_h, head pruning).
"""
from __future__ import annotations

import math
import numbers
import os
import operator
import warnings
from typing import Iterable, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["attention", "build_attention_mask", "MultiHeadAttention"]

# F.scaled_dot_product_attention grew ``enable_gqa`` in torch 2.5; before that we expand K/V ourselves.
_SDPA_HAS_GQA = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)

KVCache = Tuple[Tensor, Tensor]


def _as_int(value, name: str) -> int:
    """``value`` as a Python int, or a ValueError naming it.

    Accepts Python ints, numpy integers and 0-d integer tensors. Rejects bools (``True`` is not
    head 1), floats (even 2.0: a float index is usually a bug upstream), strings and anything
    else, instead of truncating them silently as ``int()`` would.
    """
    is_bool = isinstance(value, bool) or type(value).__name__ in ("bool_", "bool") or (
        isinstance(value, Tensor) and value.dtype == torch.bool
    )
    if not is_bool and not (isinstance(value, Tensor) and value.dim() != 0):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise ValueError(f"{name} must be an integer (int, numpy integer or 0-d integer tensor), got {value!r}")


def _as_head_indices(heads, name: str = "heads") -> list:
    """An iterable of head indices -> list of Python ints; ValueError naming a bad one."""
    if isinstance(heads, (str, bytes, numbers.Number)) or (isinstance(heads, Tensor) and heads.dim() == 0):
        raise ValueError(
            f"{name} must be an iterable of head indices, e.g. [1] or {{1, 2}}; got the single value {heads!r}"
        )
    try:
        items = list(heads)
    except TypeError:
        raise ValueError(f"{name} must be an iterable of head indices, got {heads!r}") from None
    return [_as_int(h, f"{name}: head index") for h in items]


def _check_dropout(value, name: str = "dropout") -> float:
    """A float in [0, 1), or a ValueError naming ``value`` (also for bools, strings and NaN)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name} must be a float in [0, 1), got {value!r}")
    return float(value)


# ---------------------------------------------------------------------------------------------
# 1. The functional form
# ---------------------------------------------------------------------------------------------


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    scale: Optional[float] = None,
    is_causal: bool = False,
) -> Tuple[Tensor, Tensor]:
    """Scaled dot-product attention that also returns the attention weights.

    ``out = dropout(softmax(q k^T * scale + mask)) v``, with ``scale = 1/sqrt(d_k)`` by default
    (Vaswani et al. 2017, eq. 1). ``k`` and ``v`` may have fewer heads than ``q``: query head ``i``
    then uses key/value head ``i // (H // H_kv)`` (grouped-query attention, Ainslie et al. 2023;
    H_kv = 1 is multi-query attention, Shazeer 2019), as ``F.scaled_dot_product_attention(...,
    enable_gqa=True)`` does.

    Args:
        q: (B, H, L, d_k), floating point.
        k: (B, H_kv, S, d_k), same dtype; H_kv must divide H.
        v: (B, H_kv, S, d_v), same dtype.
        attn_mask: optional, broadcastable to (B, H, L, S). ``bool``: True = blocked (the OPPOSITE
            of ``F.scaled_dot_product_attention``, which is why this function has another name).
            Floating point: cast to ``q.dtype`` and added to the scores; ``-inf`` blocks. A float
            mask holding only 0s and 1s warns (it is added, so it does not block anything).
        dropout_p: probability of zeroing an attention weight before it multiplies ``v``. Applied
            whenever > 0 (like torch's function; pass 0.0 in eval).
        scale: multiplies the scores; default ``1 / sqrt(d_k)``.
        is_causal: block key j for query i when j > i + (S - L) (bottom-right aligned, see
            ``build_attention_mask``). Combined with ``attn_mask`` by OR.

    Returns:
        ``(out, weights)``: out (B, H, L, d_v) in ``q.dtype``; weights (B, H, L, S), taken BEFORE
        dropout, so each row sums to 1, or is all zero for a query whose keys are all blocked
        (that query's output is zero too).

    Raises:
        ValueError: on tensors that are not 4-D, mismatched batch/head/feature sizes, H_kv not
            dividing H, q/k/v of different dtypes (or not floating point), or a mask of the
            wrong shape or dtype or holding NaN / +inf.
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"attention expects 4-D (B, H, L, d_k) tensors, got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    B, H, L, d_k = q.shape
    _, H_kv, S, _ = k.shape
    if k.shape[0] != B or v.shape[0] != B or k.shape[3] != d_k or v.shape[1:3] != k.shape[1:3]:
        raise ValueError(
            f"attention: shapes do not fit together: q {tuple(q.shape)} (B, H, L, d_k), "
            f"k {tuple(k.shape)} (B, H_kv, S, d_k), v {tuple(v.shape)} (B, H_kv, S, d_v)"
        )
    if H_kv == 0 or H % H_kv != 0:
        raise ValueError(f"attention: k/v have {H_kv} heads, which must divide q's {H} heads")
    if not q.is_floating_point() or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(
            f"attention: q, k, v must share one floating-point dtype, got q {q.dtype}, k {k.dtype}, "
            f"v {v.dtype}; cast them first (e.g. k.to(q.dtype))"
        )
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout_p must be in [0, 1], got {dropout_p}")
    if H_kv != H:  # GQA / MQA: query head i reads key/value head i // (H // H_kv)
        k = k.repeat_interleave(H // H_kv, dim=1)  # (B, H, S, d_k)
        v = v.repeat_interleave(H // H_kv, dim=1)  # (B, H, S, d_v)
    mask, empty_rows = build_attention_mask(
        attn_mask=attn_mask, is_causal=is_causal, batch=B, heads=H, q_len=L, k_len=S,
        dtype=q.dtype, device=q.device,
    )
    scale = d_k**-0.5 if scale is None else scale
    return _explicit_attention(q, k, v, mask, empty_rows, dropout_p, scale)


def _explicit_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], empty_rows: Optional[Tensor],
    dropout_p: float, scale: float,
) -> Tuple[Tensor, Tensor]:
    """The teaching path: softmax(q k^T * scale + mask) v, step by step.

    q (B, H, L, d_k), k (B, H, S, d_k), v (B, H, S, d_v); mask and empty_rows as returned by
    ``build_attention_mask``. Returns (out (B, H, L, d_v), weights (B, H, L, S)).
    """
    scores = (q * scale) @ k.transpose(-2, -1)  # (B, H, L, S); scaling q is cheaper than scores
    if mask is not None:
        # 0 = allowed, -inf = blocked, other floats = user bias. In place is safe for autograd
        # (matmul's backward does not need its output) and saves a (B, H, L, S) allocation.
        scores += mask
    if scores.requires_grad:
        weights = scores.softmax(dim=-1)  # (B, H, L, S), rows sum to 1
    else:  # inference: normalise in place, as torch.nn.MultiheadAttention's fast path does
        weights = torch.softmax(scores, dim=-1, out=scores)
    if empty_rows is not None:  # rows whose keys were all blocked: zero, not a 1-hot on key 0
        weights = weights.masked_fill(empty_rows, 0.0)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    out = dropped @ v  # (B, H, L, d_v); empty rows are already 0 because their weights are
    return out, weights


# ---------------------------------------------------------------------------------------------
# 2. Masks: one helper for every path
# ---------------------------------------------------------------------------------------------


def build_attention_mask(
    *,
    key_padding_mask: Optional[Tensor] = None,
    attn_mask: Optional[Tensor] = None,
    is_causal: bool = False,
    batch: int,
    heads: int,
    q_len: int,
    k_len: int,
    dtype: torch.dtype,
    device: torch.device,
) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """Turn every kind of mask into ONE additive float mask, plus a guard for empty rows.

    Masks combine by OR over blocked positions (float masks are summed, and -inf + x = -inf).

    Args:
        key_padding_mask: (B, S); bool with True = padding (ignored key), or float, added.
        attn_mask: bool (True = blocked) or float (added; -inf blocks), of any shape
            broadcastable to (B, H, L, S), or torch.nn.MultiheadAttention's (B*H, L, S).
        is_causal: query i may attend key j only when j <= i + (S - L). With L == S this is the
            usual lower-triangular mask. With L != S it is aligned BOTTOM-RIGHT (the last query
            sees every key), as a KV-cache decode step needs and as FlashAttention-2 does (Dao
            2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work
            Partitioning", arXiv:2307.08691, causal masking for L != S). This
            differs from ``F.scaled_dot_product_attention(is_causal=True)``, which aligns
            top-left (query i sees keys 0..i whatever S is).
        batch, heads, q_len, k_len: B, H, L, S.
        dtype, device: of the scores (the query's dtype).

    Returns:
        ``(mask, empty_rows)``. ``mask`` is None (nothing blocked) or a float tensor of ``dtype``
        broadcastable to (B, H, L, S), holding 0 for allowed, -inf for blocked and the user's
        float values. ``empty_rows`` is None or a bool tensor broadcastable to (B, H, L, 1), True
        for query rows whose keys were ALL blocked. For those rows key 0 is unblocked in
        ``mask`` (so every backend's softmax stays finite, values and gradients) and the caller
        must zero their weights and outputs. With S = 0 (no keys) every row is empty and
        ``mask`` has a last dimension of size 0. This one guard works on CPU and CUDA, in fp32, fp16
        and bf16, and needs no "-1e9" fill constant (which overflows to -inf in fp16).

    Raises:
        ValueError: a mask of the wrong shape; a dtype that is neither bool nor floating; a float
            mask holding NaN or +inf (also +inf after the cast to ``dtype``, e.g. 1e5 in fp16).

    Warns:
        UserWarning: a float mask holding only 0s and 1s (with at least one 1). It is added to the
            scores: a 1 raises that score by 1 and a 0 blocks nothing. It is NOT a keep mask or a
            causal mask. Use a bool mask with True = blocked (e.g. ``keep == 0``) instead.
    """
    B, H, L, S = batch, heads, q_len, k_len
    parts = []
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (B, S):
            raise ValueError(
                f"key_padding_mask must have shape (B, S) = ({B}, {S}), got {tuple(key_padding_mask.shape)}"
            )
        parts.append(_to_additive(key_padding_mask, "key_padding_mask", dtype, device)[:, None, None, :])
    if attn_mask is not None:
        parts.append(_to_additive(_broadcastable_attn_mask(attn_mask, B, H, L, S), "attn_mask", dtype, device))
    if is_causal:
        # keep j <= i + (S - L): bottom-right aligned
        keep = torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L)
        parts.append(torch.zeros(L, S, dtype=dtype, device=device).masked_fill(~keep, -math.inf))
    if not parts:
        return None, None

    mask = parts[0]
    for part in parts[1:]:
        mask = mask + part  # OR over blocked positions; broadcasts to the union of the shapes
    while mask.dim() < 4:
        mask = mask.unsqueeze(0)  # (.., .., L|1, S|1) -> 4-D

    # Guard for query rows with no allowed key: unblock key 0 so softmax never sees all -inf
    # (which gives NaN, and NaN gradients), and report the rows so the caller zeroes them.
    if mask.shape[-1] != S:  # a (.., 1) mask cannot block some keys and not others
        mask = mask.expand(*mask.shape[:-1], S)
    empty_rows = torch.isneginf(mask).all(dim=-1, keepdim=True)  # (B|1, H|1, L|1, 1)
    if not bool(empty_rows.any()):
        return mask, None
    if S == 0:  # no keys at all: every row is empty, and there is no key 0 to unblock
        return mask, empty_rows
    first_key = torch.zeros(S, dtype=torch.bool, device=device)
    first_key[0] = True
    mask = mask.masked_fill(empty_rows & first_key, 0.0)
    return mask, empty_rows


def _broadcastable_attn_mask(attn_mask: Tensor, B: int, H: int, L: int, S: int) -> Tensor:
    """Check attn_mask's shape; reshape torch's (B*H, L, S) layout to (B, H, L, S)."""
    shape = tuple(attn_mask.shape)
    if attn_mask.dim() == 3 and shape[0] == B * H and shape[0] not in (1, H) and shape[1:] == (L, S):
        return attn_mask.view(B, H, L, S)  # torch.nn.MultiheadAttention's layout
    target = (B, H, L, S)
    ok = attn_mask.dim() <= 4 and all(
        m in (1, t) for m, t in zip(reversed(shape), reversed(target))
    )
    if not ok:
        raise ValueError(
            f"attn_mask has shape {shape}; it must broadcast to (B, H, L, S) = {target} "
            f"(e.g. (L, S), (B, 1, L, S), (B, H, L, S)) or be (B*H, L, S) = ({B * H}, {L}, {S})"
        )
    return attn_mask


def _to_additive(mask: Tensor, name: str, dtype: torch.dtype, device: torch.device) -> Tensor:
    """bool (True = blocked) or float mask -> float mask of ``dtype``: 0 allowed, -inf blocked."""
    mask = mask.to(device)
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill(mask, -math.inf)
    if not mask.is_floating_point():
        raise ValueError(
            f"{name} has dtype {mask.dtype}; use bool (True = blocked) or a float mask (added to the scores)"
        )
    if bool(torch.isnan(mask).any()):
        raise ValueError(f"{name} contains NaN; a float mask is added to the scores, use -inf to block")
    cast = mask.to(dtype)
    if bool(torch.isposinf(cast).any()):
        raise ValueError(
            f"{name} contains +inf (or a value too large for {dtype}, max {torch.finfo(dtype).max:.3g}); "
            "a float mask is added to the scores, use -inf to block"
        )
    if bool(((mask == 0) | (mask == 1)).all()) and bool((mask == 1).any()):
        warnings.warn(
            f"float {name} holds only 0s and 1s. A float mask is ADDED to the scores, so a 1 raises "
            "a score by 1 and nothing is blocked: this is not a keep mask and not a causal mask. "
            "Use a bool mask with True = blocked (e.g. keep == 0), or -inf in a float mask.",
            UserWarning,
            stacklevel=_user_stacklevel(),
        )
    return cast


def _user_stacklevel() -> int:
    """``stacklevel`` for a warning raised here, pointing at the first caller outside mha_lib and torch.

    The mask helpers are reached through ``attention``, ``MultiHeadAttention.forward`` (via
    nn.Module's call machinery), ``Encoder.forward`` and more, so no fixed number is right.
    """
    import sys

    skip = (os.path.dirname(os.path.abspath(__file__)) + os.sep, os.path.dirname(torch.__file__) + os.sep)
    frame, level = sys._getframe(1), 1  # level 1 = the function that calls warnings.warn
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame, level = frame.f_back, level + 1
    return level


# ---------------------------------------------------------------------------------------------
# 3. Multi-head attention
# ---------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017) with GQA/MQA, head_mask, a KV cache and pruning.

    ``out = concat_h(xi_h * head_h) W^O + b^O`` with ``head_h = softmax(Q_h K_{g(h)}^T / sqrt(hd)
    + mask) V_{g(h)}``, where ``hd = d_model // num_heads``, ``xi_h`` is the head mask (Michel et
    al. 2019) and ``g(h) = kv_head_index[h]`` picks the key/value head that query head h reads
    (grouped-query attention, Ainslie et al. 2023; ``num_kv_heads=1`` is multi-query attention,
    Shazeer 2019).

    Args:
        d_model: model width; must be divisible by ``num_heads``.
        num_heads: query heads H (> 0). ``head_dim = d_model // num_heads`` stays fixed even after
            pruning.
        num_kv_heads: key/value heads H_kv; must divide ``num_heads``. Default ``num_heads`` (MHA).
        dropout: dropout probability on the attention weights, in training mode only.
        bias: whether the four projections have biases.
        pruned_heads: original indices of query heads to prune at construction, so a pruned
            module's ``state_dict`` loads into ``MultiHeadAttention(..., pruned_heads=same)``.

    Attributes:
        q_proj, k_proj, v_proj, out_proj: the ``nn.Linear`` projections W^Q (d_model -> H*hd),
            W^K, W^V (d_model -> H_kv*hd) and W^O (H*hd -> d_model). Head h owns rows
            ``h*hd:(h+1)*hd`` of W^Q and columns ``h*hd:(h+1)*hd`` of W^O.
        num_heads, num_kv_heads: CURRENT numbers of heads (they shrink when pruning).
        original_num_heads, original_num_kv_heads: the numbers at construction.
        head_dim: hd.
        kept_heads: original indices of the surviving query heads, ascending. Current head i is
            original head ``kept_heads[i]``; ``weights``, ``head_mask`` and ``head_outputs`` use this
            current order.
        pruned_heads: set of original indices of pruned query heads.
        kept_kv_heads: original indices of the surviving key/value heads, ascending.
        kv_head_index: buffer (H,), long: current query head i reads current KV head
            ``kv_head_index[i]``. Starts as ``i // (num_heads // num_kv_heads)``.

    Per-head outputs (for plots and analysis): ``head_out, weights = mha.head_outputs(x,
    need_weights=True)`` gives head_out (B, H, L, hd) and weights (B, H, L, S), and
    ``mha.merge_heads(head_out)`` equals ``mha(x)[0]``; ``forward`` is exactly these two steps.

    Two paths, same numbers: ``need_weights=False`` runs ``F.scaled_dot_product_attention``
    (fused kernels on GPU); ``need_weights=True`` runs the explicit softmax(Q K^T / sqrt(hd)) V of
    ``attention`` and returns the weights. Both take their mask from ``build_attention_mask``.

    Raises:
        ValueError: ``d_model``, ``num_heads`` or ``num_kv_heads`` not a positive integer (Python
            and numpy integers are accepted, bools and floats are not), ``d_model`` not divisible
            by ``num_heads``, ``num_kv_heads`` not dividing ``num_heads``, ``dropout`` not a
            number in [0, 1), ``bias`` not a bool, or ``pruned_heads`` out of range or not
            integers.

    Example:
        >>> mha = MultiHeadAttention(64, 8, num_kv_heads=2)
        >>> x = torch.randn(2, 5, 64)
        >>> out, weights = mha(x, need_weights=True, is_causal=True)
        >>> out.shape, weights.shape
        (torch.Size([2, 5, 64]), torch.Size([2, 8, 5, 5]))
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        num_kv_heads: Optional[int] = None,
        dropout: float = 0.0,
        bias: bool = True,
        pruned_heads: Iterable[int] = (),
    ) -> None:
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        sizes = {}
        for name, value in (("d_model", d_model), ("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
            try:
                sizes[name] = _as_int(value, name)
            except ValueError:
                sizes[name] = 0
            if sizes[name] <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        d_model, num_heads, num_kv_heads = sizes["d_model"], sizes["num_heads"], sizes["num_kv_heads"]
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}: "
                f"each head needs d_model // num_heads features"
            )
        if num_heads % num_kv_heads != 0:
            raise ValueError(
                f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads} "
                f"(each key/value head serves a group of num_heads // num_kv_heads query heads)"
            )
        dropout = _check_dropout(dropout)
        if not isinstance(bias, bool):
            raise ValueError(f"bias must be True or False, got {bias!r}")

        self.d_model = d_model
        self.head_dim = d_model // num_heads
        self.original_num_heads = num_heads
        self.original_num_kv_heads = num_kv_heads
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.dropout = dropout
        self.bias = bias
        self.kept_heads: list[int] = list(range(num_heads))
        self.kept_kv_heads: list[int] = list(range(num_kv_heads))
        self.pruned_heads: set[int] = set()
        group = num_heads // num_kv_heads
        # Derived from (num_heads, num_kv_heads, pruned_heads), so not saved in the state_dict.
        self.register_buffer("kv_head_index", torch.arange(num_heads) // group, persistent=False)
        # True while kv_head_index is i // (H // H_kv), the layout SDPA's enable_gqa assumes.
        self._regular_groups = True

        self.q_proj = nn.Linear(d_model, num_heads * self.head_dim, bias=bias)  # W^Q, all heads
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)  # W^K
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)  # W^V
        self.out_proj = nn.Linear(num_heads * self.head_dim, d_model, bias=bias)  # W^O
        self.reset_parameters()
        self.prune_heads(pruned_heads)

    def reset_parameters(self) -> None:
        """Initialise as ``torch.nn.MultiheadAttention`` does: Xavier-uniform W^Q, W^K, W^V, zero biases."""
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight)
        self.out_proj.reset_parameters()
        if self.bias:
            for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
                nn.init.zeros_(proj.bias)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, dropout={self.dropout}, pruned_heads={sorted(self.pruned_heads)}"
        )

    # -- forward ---------------------------------------------------------------------------------

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        *,
        key_padding_mask: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        is_causal: bool = False,
        head_mask: Optional[Tensor] = None,
        need_weights: bool = False,
        past_kv: Optional[KVCache] = None,
        use_cache: bool = False,
    ):
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: (B, L, d_model), floating point.
            key: (B, S_new, d_model); default ``query`` (self-attention).
            value: (B, S_new, d_model); default ``key``.
            key_padding_mask: (B, S); bool, True = padding key (ignored), or float (added).
                S counts the cached keys too: S = S_past + S_new.
            attn_mask: bool (True = blocked) or float (added to the scores, -inf blocks),
                broadcastable to (B, H, L, S), or (B*H, L, S) as in torch. A float mask of only
                0/1 warns: it is added, it blocks nothing. See ``build_attention_mask``.
            is_causal: query i may attend key j only when j <= i + (S - L): bottom-right aligned,
                so a decode step with a KV cache sees all past keys. (This differs from
                ``F.scaled_dot_product_attention``, which aligns top-left when L != S.)
            head_mask: (H,) or (B, H), float, differentiable: xi_h of Michel et al. 2019,
                multiplying each head's output before W^O (1 keep, 0 drop). Indexed by the
                CURRENT heads (``kept_heads`` order) after pruning.
            need_weights: if True, use the explicit path and return per-head weights; if False,
                use ``F.scaled_dot_product_attention`` (fused kernels) and return None.
            past_kv: optional ``(k, v)`` from a previous call with ``use_cache=True``, each
                (B, H_kv, S_past, hd). The new keys/values are appended to them.
            use_cache: if True, also return ``present_kv``.

        Returns:
            ``(out, weights)``, or ``(out, weights, present_kv)`` with ``use_cache``:
            out (B, L, d_model); weights (B, H, L, S) per head, taken before dropout and
            head_mask (rows sum to 1, or are all 0 for a query whose keys are all blocked), or
            None; present_kv ``(k, v)``, each (B, H_kv, S, hd). After pruning every head,
            out is the output bias broadcast (zeros without bias) and weights is (B, 0, L, S).

        Raises:
            ValueError: wrong input shapes, query/key/value of different dtypes, masks of the
                wrong shape or dtype, float masks with NaN or +inf, a head_mask that is not a
                float tensor of the right shape (a list is rejected), or a wrong past_kv.
        """
        # MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W^O: the heads first (right below) ...
        head_out, weights, present_kv = self._attend_heads(
            query, key, value, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
            is_causal=is_causal, head_mask=head_mask, need_weights=need_weights, past_kv=past_kv,
        )  # (B, H, L, hd), (B, H, L, S) or None
        out = self.merge_heads(head_out)  # ... then concatenate and project: (B, L, d_model)
        if use_cache:
            return out, weights, present_kv
        return out, weights

    def _attend_heads(
        self, query, key, value, *, key_padding_mask, attn_mask, is_causal, head_mask, need_weights, past_kv,
    ) -> Tuple[Tensor, Optional[Tensor], KVCache]:
        """The body of forward, up to the per-head outputs (B, H, L, hd)."""
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        B, L, _ = query.shape
        H, H_kv, hd = self.num_heads, self.num_kv_heads, self.head_dim

        q, k, v = self._project(query, key, value)  # (B, H, L, hd), (B, H_kv, S_new, hd) x2
        if past_kv is not None:
            past_k, past_v = self._check_past_kv(past_kv, B)
            k = torch.cat([past_k, k], dim=2)  # (B, H_kv, S, hd), S = S_past + S_new
            v = torch.cat([past_v, v], dim=2)  # (B, H_kv, S, hd)
        present_kv = (k, v)
        S = k.shape[2]

        # One helper turns every mask into one additive mask (+ the rows with no allowed key).
        mask, empty_rows = build_attention_mask(
            key_padding_mask=key_padding_mask, attn_mask=attn_mask, is_causal=is_causal,
            batch=B, heads=H, q_len=L, k_len=S, dtype=q.dtype, device=q.device,
        )
        dropout_p = self.dropout if self.training else 0.0

        if H == 0:  # every head pruned: nothing to attend with; W^O maps an empty vector to its bias
            head_out = q.new_zeros(B, 0, L, hd)
            weights = q.new_zeros(B, 0, L, S) if need_weights else None
        elif need_weights:
            # Teaching path: the explicit softmax(Q K^T / sqrt(hd) + mask) V, which keeps the weights.
            k, v = self._expand_kv(k), self._expand_kv(v)  # (B, H, S, hd): head i reads kv_head_index[i]
            head_out, weights = _explicit_attention(q, k, v, mask, empty_rows, dropout_p, hd**-0.5)
        else:
            # Fast path: the same math in one fused kernel (flash / memory-efficient on GPU).
            # Our mask is additive float, so SDPA's opposite bool polarity never comes into play.
            gqa = _SDPA_HAS_GQA and H != H_kv and self._regular_groups
            if not gqa:
                k, v = self._expand_kv(k), self._expand_kv(v)  # (B, H, S, hd)
            head_out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=hd**-0.5,
                **({"enable_gqa": True} if gqa else {}),
            )  # (B, H, L, hd)
            if empty_rows is not None:
                head_out = head_out.masked_fill(empty_rows, 0.0)  # rows with no allowed key -> 0
            weights = None

        if head_mask is not None:
            head_out = head_out * self._head_mask_4d(head_mask, B, head_out.dtype)  # xi_h * head_h
        return head_out, weights, present_kv

    def merge_heads(self, head_out: Tensor) -> Tensor:
        """Concatenate heads and apply W^O: (B, H, L, hd) -> (B, L, d_model).

        Args:
            head_out: (B, H, L, hd) float, H the CURRENT number of heads (as from
                :meth:`head_outputs`), in W^O's dtype.

        Returns:
            (B, L, d_model), ``concat_h(head_h) W^O + b^O`` (Vaswani et al. 2017, section 3.2.2).

        Raises:
            ValueError: ``head_out`` not 4-D, or its head count or head size not
                (num_heads, head_dim).
        """
        if head_out.dim() != 4 or head_out.shape[1] != self.num_heads or head_out.shape[3] != self.head_dim:
            raise ValueError(
                f"head_out must have shape (B, H, L, hd) = (B, {self.num_heads}, L, {self.head_dim}), "
                f"got {tuple(head_out.shape)}"
            )
        B, H, L, hd = head_out.shape
        concat = head_out.transpose(1, 2).reshape(B, L, H * hd)  # (B, L, H*hd)
        return self.out_proj(concat)  # (B, L, d_model)

    def head_outputs(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        *,
        key_padding_mask: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        is_causal: bool = False,
        head_mask: Optional[Tensor] = None,
        need_weights: bool = False,
        past_kv: Optional[KVCache] = None,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """Per-head outputs: what ``forward`` concatenates and multiplies by W^O.

        Same arguments as ``forward``. ``self.merge_heads(head_out)`` equals ``forward``'s ``out``.

        Returns:
            ``(head_out, weights)``: head_out (B, H, L, hd), already multiplied by ``head_mask``
            if given (zero for query rows with no allowed key); weights (B, H, L, S) or None.

        Raises:
            ValueError: as :meth:`forward`: wrong input shapes or dtypes, a bad mask, head_mask
                or past_kv.
        """
        head_out, weights, _ = self._attend_heads(
            query, key, value, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
            is_causal=is_causal, head_mask=head_mask, need_weights=need_weights, past_kv=past_kv,
        )
        return head_out, weights

    # -- pieces of forward ------------------------------------------------------------------------

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """Q, K, V projections, split into heads: (B, H, L, hd), (B, H_kv, S, hd), (B, H_kv, S, hd)."""
        B, L, _ = query.shape
        S = key.shape[1]
        H, H_kv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        if key is query and value is query:
            # Self-attention: one matmul with [W^Q; W^K; W^V] instead of three (same numbers, faster).
            qkv = F.linear(query, *self._stacked(self.q_proj, self.k_proj, self.v_proj))
            q, k, v = qkv.split([H * hd, H_kv * hd, H_kv * hd], dim=-1)  # (B, L, H*hd), (B, L, H_kv*hd) x2
        else:
            q = self.q_proj(query)  # (B, L, H*hd)
            if value is key:
                k, v = F.linear(key, *self._stacked(self.k_proj, self.v_proj)).split([H_kv * hd] * 2, dim=-1)
            else:
                k, v = self.k_proj(key), self.v_proj(value)  # (B, S, H_kv*hd) each
        q = q.view(B, L, H, hd).transpose(1, 2)  # (B, H, L, hd)
        k = k.view(B, S, H_kv, hd).transpose(1, 2)  # (B, H_kv, S, hd)
        v = v.view(B, S, H_kv, hd).transpose(1, 2)  # (B, H_kv, S, hd)
        return q, k, v

    @staticmethod
    def _stacked(*projs: nn.Linear) -> Tuple[Tensor, Optional[Tensor]]:
        weight = torch.cat([p.weight for p in projs])
        bias = None if projs[0].bias is None else torch.cat([p.bias for p in projs])
        return weight, bias

    def _expand_kv(self, kv: Tensor) -> Tensor:
        """(B, H_kv, S, hd) -> (B, H, S, hd): query head i gets KV head kv_head_index[i]."""
        if self._regular_groups and self.num_heads == self.num_kv_heads:
            return kv  # plain MHA: head i reads KV head i
        return kv.index_select(1, self.kv_head_index)

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} must have shape (B, L or S, d_model={self.d_model}) (batch first), "
                    f"got {tuple(t.shape)}"
                )
            if not t.is_floating_point():
                raise ValueError(f"{name} must be floating point, got dtype {t.dtype}")
        if key.shape[0] != query.shape[0] or value.shape[0] != query.shape[0]:
            raise ValueError(
                f"batch sizes differ: query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key and value lengths differ: key {tuple(key.shape)}, value {tuple(value.shape)}")
        if key.dtype != query.dtype or value.dtype != query.dtype:
            raise ValueError(
                f"query, key and value must share one dtype, got query {query.dtype}, key {key.dtype}, "
                f"value {value.dtype}; cast them first (e.g. key.to(query.dtype))"
            )

    def _check_past_kv(self, past_kv, B: int) -> KVCache:
        if not isinstance(past_kv, (tuple, list)) or len(past_kv) != 2:
            raise ValueError("past_kv must be a (k, v) pair, as returned with use_cache=True")
        past_k, past_v = past_kv
        for name, t in (("past_kv[0]", past_k), ("past_kv[1]", past_v)):
            if t.dim() != 4 or (t.shape[0], t.shape[1], t.shape[3]) != (B, self.num_kv_heads, self.head_dim):
                raise ValueError(
                    f"{name} must have shape (B, H_kv, S_past, head_dim) = "
                    f"({B}, {self.num_kv_heads}, S_past, {self.head_dim}), got {tuple(t.shape)}"
                )
        if past_k.shape != past_v.shape:
            raise ValueError(f"past_kv shapes differ: {tuple(past_k.shape)} vs {tuple(past_v.shape)}")
        return past_k, past_v

    def _head_mask_4d(self, head_mask: Tensor, B: int, dtype: torch.dtype) -> Tensor:
        H = self.num_heads
        if not isinstance(head_mask, Tensor):
            raise ValueError(
                f"head_mask must be a float tensor of shape (H,) = ({H},) or (B, H), got a "
                f"{type(head_mask).__name__} ({head_mask!r}); wrap it: torch.tensor(..., dtype=torch.float32)"
            )
        if not head_mask.is_floating_point():
            raise ValueError(f"head_mask must be floating point (1 keep, 0 drop), got dtype {head_mask.dtype}")
        if tuple(head_mask.shape) == (H,):
            return head_mask.to(dtype).view(1, H, 1, 1)
        if tuple(head_mask.shape) == (B, H):
            return head_mask.to(dtype).view(B, H, 1, 1)
        raise ValueError(
            f"head_mask must have shape (H,) = ({H},) or (B, H) = ({B}, {H}) over the current "
            f"(kept) heads, got {tuple(head_mask.shape)}"
        )

    # -- pruning -----------------------------------------------------------------------------------

    @torch.no_grad()
    def prune_heads(self, heads: Iterable[int]) -> None:
        """Remove query heads for good (Michel et al. 2019).

        Head h's rows of W^Q and its input columns of W^O are removed. Under GQA/MQA a key/value
        head (its rows of W^K and W^V) is removed together with the last query head that reads it;
        ``kv_head_index`` keeps the mapping, so uneven groups still work. The parameters are
        replaced by smaller ones, so build a new optimizer afterwards.

        Args:
            heads: an iterable of ORIGINAL head indices (0 .. original_num_heads - 1): Python
                ints, numpy integers or 0-d integer tensors. Heads already pruned are ignored,
                so pruning is idempotent: ``prune_heads({1})`` then ``prune_heads({1, 2})``
                prunes 1 and 2. A bare int is rejected (write ``prune_heads([1])``), so that
                a typo never prunes a different set than meant.

        Raises:
            ValueError: an index outside [0, original_num_heads); a bool or non-integer index
                (e.g. ``1.5`` or ``True``, never truncated); ``heads`` a single value, not an
                iterable. Nothing is pruned when it raises.

        Pruning every head is allowed: the output is then W^O's bias, broadcast to
        (B, L, d_model), and ``weights`` have shape (B, 0, L, S).
        """
        heads = set(_as_head_indices(heads))
        bad = sorted(h for h in heads if not 0 <= h < self.original_num_heads)
        if bad:
            raise ValueError(
                f"head indices {bad} are out of range for original_num_heads={self.original_num_heads}"
            )
        new = heads - self.pruned_heads
        if not new:
            return
        hd = self.head_dim
        keep = [i for i, h in enumerate(self.kept_heads) if h not in new]  # current positions
        kv_of_kept = self.kv_head_index[keep].tolist()  # current KV head of each kept query head
        keep_kv = sorted(set(kv_of_kept))  # a KV head survives while some query head reads it
        renumber = {old: new_i for new_i, old in enumerate(keep_kv)}

        q_rows = _head_rows(keep, hd, self.q_proj.weight.device)
        kv_rows = _head_rows(keep_kv, hd, self.k_proj.weight.device)
        self.q_proj = _select_linear(self.q_proj, q_rows, dim=0)
        self.k_proj = _select_linear(self.k_proj, kv_rows, dim=0)
        self.v_proj = _select_linear(self.v_proj, kv_rows, dim=0)
        self.out_proj = _select_linear(self.out_proj, q_rows.to(self.out_proj.weight.device), dim=1)

        self.kept_heads = [self.kept_heads[i] for i in keep]
        self.kept_kv_heads = [self.kept_kv_heads[i] for i in keep_kv]
        self.pruned_heads |= new
        self.num_heads = len(self.kept_heads)
        self.num_kv_heads = len(self.kept_kv_heads)
        new_index = [renumber[i] for i in kv_of_kept]
        self.kv_head_index = torch.tensor(new_index, dtype=torch.long, device=self.kv_head_index.device)
        H, H_kv = self.num_heads, self.num_kv_heads
        self._regular_groups = H_kv > 0 and H % H_kv == 0 and new_index == [i // (H // H_kv) for i in range(H)]

    # -- interop -----------------------------------------------------------------------------------

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy a ``torch.nn.MultiheadAttention`` into a new ``MultiHeadAttention``.

        The result is batch first whatever ``m.batch_first`` is (transpose (L, B, E) inputs
        yourself for a ``batch_first=False`` module). Outputs and per-head weights then match
        ``m``'s to fp32 rounding on every query row with at least one allowed key, in eval mode or
        with dropout 0 (torch gives NaN on rows with no allowed key and returns weights after
        dropout; we give zeros and weights before dropout). The copy has ``m``'s dtype and device.

        Raises:
            ValueError: ``m`` uses ``add_bias_kv``, ``add_zero_attn``, or kdim/vdim != embed_dim.
        """
        if not isinstance(m, nn.MultiheadAttention):
            raise ValueError(f"from_torch expects a torch.nn.MultiheadAttention, got {type(m).__name__}")
        if m.bias_k is not None or m.bias_v is not None:
            raise ValueError("from_torch: add_bias_kv=True has no equivalent in MultiHeadAttention")
        if m.add_zero_attn:
            raise ValueError("from_torch: add_zero_attn=True has no equivalent in MultiHeadAttention")
        if not m._qkv_same_embed_dim:
            raise ValueError(
                f"from_torch: kdim={m.kdim} / vdim={m.vdim} differ from embed_dim={m.embed_dim}; "
                "MultiHeadAttention needs key and value of width d_model"
            )
        d = m.embed_dim
        bias = m.in_proj_bias is not None
        w = m.in_proj_weight
        new = cls(d, m.num_heads, dropout=m.dropout, bias=bias).to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            for i, proj in enumerate((new.q_proj, new.k_proj, new.v_proj)):
                proj.weight.copy_(w[i * d:(i + 1) * d])
                if bias:
                    proj.bias.copy_(m.in_proj_bias[i * d:(i + 1) * d])
            new.out_proj.weight.copy_(m.out_proj.weight)
            if bias:
                new.out_proj.bias.copy_(m.out_proj.bias)
        new.train(m.training)
        return new


def _head_rows(heads: Sequence[int], head_dim: int, device: torch.device) -> Tensor:
    """Indices of the rows (features) that belong to ``heads``: head h owns h*hd .. (h+1)*hd - 1."""
    heads_t = torch.tensor(list(heads), dtype=torch.long, device=device)
    return (heads_t[:, None] * head_dim + torch.arange(head_dim, device=device)).reshape(-1)


def _select_linear(linear: nn.Linear, index: Tensor, dim: int) -> nn.Linear:
    """A new nn.Linear keeping ``index`` along ``dim`` of the weight (0: outputs, 1: inputs)."""
    weight = linear.weight.index_select(dim, index).clone()
    has_bias = linear.bias is not None
    # Build a 1x1 layer and swap in the selected tensors: initialising a zero-size layer (all
    # heads pruned) would only warn, and the values are overwritten anyway.
    new = nn.Linear(1, 1, bias=has_bias, device=weight.device, dtype=weight.dtype)
    new.in_features, new.out_features = weight.shape[1], weight.shape[0]
    new.weight = nn.Parameter(weight, requires_grad=linear.weight.requires_grad)
    if has_bias:
        bias = linear.bias.clone() if dim == 1 else linear.bias.index_select(0, index).clone()
        new.bias = nn.Parameter(bias, requires_grad=linear.bias.requires_grad)
    return new
