"""Multi-head attention: :class:`MultiHeadAttention`.

Read :meth:`MultiHeadAttention._heads` top to bottom: it is the whole pass in the paper's order,
project -> split heads -> KV cache -> masks -> attend -> head_mask; ``forward`` then concatenates
the heads and applies W^O, and ``head_outputs`` returns the heads themselves.

Notation (used in every shape comment):
    B  batch size          L  query length        S  key/value length
    H  query heads         H_kv  key/value heads  hd  head_dim = d_k = d_model // num_heads
    G  query heads per key/value head = H // H_kv        d_model  model width

Papers followed:
    Vaswani et al. 2017, "Attention Is All You Need" (scaled dot-product and multi-head attention).
    Shazeer 2019, "Fast Transformer Decoding: One Write-Head is All You Need" (multi-query attention).
    Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from
    Multi-Head Checkpoints" (grouped-query attention).
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?" (head mask xi_h, head pruning).
"""
from __future__ import annotations

import warnings
from typing import Iterable, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import checks
from .._runtime import user_stacklevel
from .functional import _attend
from .kv_cache import KVCache, _check_past_kv
from .masks import _build_mask, _check_masks


# F.scaled_dot_product_attention grew ``enable_gqa`` in torch 2.5; before that we expand K/V ourselves.
_SDPA_HAS_GQA = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)
# need_weights=True returns (B, H, L, S) weights; above this many bytes we warn (see _check_forward).
WEIGHTS_WARN_BYTES = 2**30

# ---------------------------------------------------------------------------------------------
# Multi-head attention
# ---------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention (Vaswani et al. 2017) with GQA/MQA, head_mask, a KV cache and pruning.

    :math:`\mathrm{out} = \mathrm{Concat}_h(\xi_h\, \mathrm{head}_h)\, W^O + b^O` with
    :math:`\mathrm{head}_h = \mathrm{softmax}\big(Q_h K_{g(h)}^\top / \sqrt{d_k} + M\big)\, V_{g(h)}`,
    where :math:`d_k` = ``head_dim = d_model // num_heads``, :math:`\xi_h` is the head mask (Michel
    et al. 2019) and :math:`g(h)` = ``kv_head_index[h]`` picks the key/value head that query head h reads
    (grouped-query attention, Ainslie et al. 2023; ``num_kv_heads=1`` is multi-query attention,
    Shazeer 2019).

    Two paths, same numbers: ``need_weights=False`` runs ``F.scaled_dot_product_attention``
    (fused kernels on GPU; plain causal attention passes ``is_causal`` to it and builds no mask
    tensor, so memory stays O(L) and CUDA may choose its flash kernel); ``need_weights=True``
    runs the explicit softmax(Q K^T / sqrt(hd)) V of :func:`attention` and returns the weights.

    Compared with ``torch.nn.MultiheadAttention`` (:meth:`from_torch` copies one, weights and all):

    * **batch first, always**: inputs (B, L, d_model), where torch's default is ``batch_first=False``,
      (L, B, E); ``key`` and ``value`` default to ``query`` and the other arguments are keywords;
    * **need_weights=False by default** (torch: True), and the weights are **per head**,
      (B, H, L, S), never averaged (torch's ``average_attn_weights=True`` gives (B, L, S)), taken
      **before dropout** (torch returns them after dropout, so its rows need not sum to 1 in training);
    * **masks: the same polarity as torch's module**: a bool ``key_padding_mask`` or ``attn_mask`` is
      True where a key is ignored, a float one is added (the opposite of
      ``F.scaled_dot_product_attention``, whose bool mask is True where attention is allowed);
    * **is_causal is a mask, not a hint**: torch's module raises without an ``attn_mask`` to go with
      it; here it builds the causal pattern itself, **aligned bottom-right** (query i sees keys
      j <= i + S - L, so a decode step sees its whole cache; SDPA aligns top-left when L != S);
    * a query whose keys are all blocked gets **zeros**, where torch gives NaN;
    * no ``kdim``/``vdim``, ``add_bias_kv`` or ``add_zero_attn`` (:meth:`from_torch` refuses them);
      in their place: grouped-query heads (``num_kv_heads``), ``head_mask``, a KV cache and
      structural pruning.

    Per-head outputs (for plots and analysis): ``head_out, weights = mha.head_outputs(x,
    need_weights=True)`` gives head_out (B, H, L, hd) and weights (B, H, L, S), and
    ``mha.merge_heads(head_out)`` equals ``mha(x)[0]``.

    Args:
        d_model: model width; must be divisible by ``num_heads``.
        num_heads: query heads H (> 0). ``head_dim = d_model // num_heads`` stays fixed even after
            pruning.
        num_kv_heads: key/value heads H_kv; must divide ``num_heads``. Default ``num_heads`` (MHA).
        dropout: dropout probability in [0, 1) on the attention weights, in training mode only.
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
        d_model, num_heads, num_kv_heads, _ = checks.head_sizes(d_model, num_heads, num_kv_heads)
        self.d_model = d_model
        self.head_dim = d_model // num_heads
        self.original_num_heads = self.num_heads = num_heads
        self.original_num_kv_heads = self.num_kv_heads = num_kv_heads
        self.dropout = checks.probability(dropout, "dropout")
        self.bias = checks.flag(bias, "bias")
        self.kept_heads: list[int] = list(range(num_heads))
        self.kept_kv_heads: list[int] = list(range(num_kv_heads))
        self.pruned_heads: set[int] = set()
        # Derived from (num_heads, num_kv_heads, pruned_heads), so not saved in the state_dict.
        self._kv_index = [i // (num_heads // num_kv_heads) for i in range(num_heads)]
        self.register_buffer("kv_head_index", torch.tensor(self._kv_index, dtype=torch.long), persistent=False)
        # True while kv_head_index is i // (H // H_kv): groups of consecutive query heads.
        self._regular_groups = True

        self.q_proj = nn.Linear(d_model, num_heads * self.head_dim, bias=bias)  # W^Q, all heads
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)  # W^K
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)  # W^V
        self.out_proj = nn.Linear(num_heads * self.head_dim, d_model, bias=bias)  # W^O
        self.reset_parameters()
        self.prune_heads(pruned_heads)

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
        past_kv: Union["KVCache", Tuple[Tensor, Tensor], None] = None,
        use_cache: bool = False,
    ):
        """Attend from ``query`` to ``key``/``value``: steps 1-5 (project, cache, masks, attend,
        ``head_mask``) in :meth:`_heads`, which :meth:`head_outputs` shares; step 6 (merge the
        heads, W^O) here.

        Args:
            query: (B, L, d_model), floating point.
            key: (B, S_new, d_model); default ``query`` (self-attention).
            value: (B, S_new, d_model); default ``key``.
            key_padding_mask: (B, S); bool, True = padding key (ignored), or float (added).
                S counts the cached keys too: S = S_past + S_new.
            attn_mask: bool (True = blocked) or float (added to the scores, -inf blocks),
                broadcastable to (B, H, L, S), or (B*H, L, S) as in torch. A float mask of only
                0/1 warns: it is added, it blocks nothing. See :func:`build_attention_mask`.
            is_causal: query i may attend key j only when j <= i + (S - L): bottom-right aligned,
                so a decode step with a KV cache sees all past keys. (This differs from
                ``F.scaled_dot_product_attention``, which aligns top-left when L != S.)
            head_mask: (H,) or (B, H), float, finite, differentiable: xi_h of Michel et al. 2019,
                multiplying each head's output before W^O (1 keep, 0 drop). Indexed by the
                CURRENT heads (``kept_heads`` order) after pruning.
            need_weights: if True, use the explicit path and return per-head weights; if False,
                use ``F.scaled_dot_product_attention`` (fused kernels) and return None.
            past_kv: a :class:`KVCache` from a previous call with ``use_cache=True`` (the new
                keys/values are written into it, in place), or a ``(k, v)`` pair of tensors,
                each (B, H_kv, S_past, hd) (copied once into a new cache; the pair is untouched).
            use_cache: if True, also return the cache, now holding S = S_past + S_new positions.

        Returns:
            ``(out, weights)``, or ``(out, weights, cache)`` with ``use_cache``: out
            (B, L, d_model) in the query's dtype; weights (B, H, L, S) per head, taken before
            dropout and head_mask (rows sum to 1, or are all 0 for a query whose keys are all
            blocked), or None; cache a :class:`KVCache` that unpacks as ``k, v = cache``, each
            (B, H_kv, S, hd). After pruning every head, out is the output bias broadcast (zeros
            without bias) and weights is (B, 0, L, S).

        Raises:
            ValueError: wrong input shapes, query/key/value of different dtypes, masks of the
                wrong shape or dtype, float masks with NaN or +inf (alone or added together),
                a head_mask that is not a finite float tensor of the right shape (a list is
                rejected), a past_kv of the wrong shape, dtype or device, or a flag that is not
                a bool.

        Warns:
            UserWarning: ``need_weights=True`` would return more than ``WEIGHTS_WARN_BYTES``.
        """
        head_out, weights, cache = self._heads(
            query, key, value, key_padding_mask=key_padding_mask, attn_mask=attn_mask, is_causal=is_causal,
            head_mask=head_mask, need_weights=need_weights, past_kv=past_kv, use_cache=use_cache,
        )  # (B, H, L, hd), (B, H, L, S) or None, KVCache or None
        # 6. Concatenate the heads and project with W^O.
        out = self.merge_heads(head_out)  # (B, L, d_model)
        return (out, weights, cache) if use_cache else (out, weights)

    def head_outputs(self, query: Tensor, key: Optional[Tensor] = None, value: Optional[Tensor] = None,
                     **kwargs) -> Tuple[Tensor, Optional[Tensor]]:
        """Per-head outputs: what ``forward`` concatenates and multiplies by W^O.

        Same arguments as :meth:`forward` (except ``use_cache``). ``self.merge_heads(head_out)``
        equals ``forward``'s ``out``.

        Returns:
            ``(head_out, weights)``: head_out (B, H, L, hd), already multiplied by ``head_mask``
            if given (zero for query rows with no allowed key); weights (B, H, L, S) or None.

        Raises:
            ValueError: as :meth:`forward`, and for ``use_cache``.
        """
        if kwargs.get("use_cache"):
            raise ValueError("head_outputs does not return a cache; call forward with use_cache=True")
        head_out, weights, _ = self._heads(query, key, value, **kwargs)
        return head_out, weights

    def _heads(
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
        past_kv: Union["KVCache", Tuple[Tensor, Tensor], None] = None,
        use_cache: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor], Optional["KVCache"]]:
        """Steps 1 to 5 of the pass, shared by :meth:`forward` and :meth:`head_outputs`.

        Same arguments as :meth:`forward`. Returns ``(head_out, weights, cache)``: head_out
        (B, H, L, hd) after ``head_mask``; weights (B, H, L, S) or None; cache the
        :class:`KVCache` written to (when ``past_kv`` or ``use_cache``) or None.
        """
        key = query if key is None else key
        value = key if value is None else value
        if not checks.tracing():  # every argument is checked here, once; the pass has no checks
            self._check_forward(query, key, value, key_padding_mask, attn_mask, is_causal,
                                head_mask, need_weights, past_kv, use_cache)
        B, L, _ = query.shape

        # 1. Project, and split d_model into heads of width hd.
        q, k, v = self._project(query, key, value)  # (B, H, L, hd), (B, H_kv, S_new, hd) x2
        # 2. KV cache: write the new keys/values after the past ones (no copy of the past).
        cache = None
        if past_kv is not None or use_cache:
            cache = KVCache.wrap(past_kv, like=k).append(k, v)
            k, v = cache.keys, cache.values  # (B, H_kv, S, hd), S = S_past + S_new
        S = k.shape[2]
        # 3. Masks -> one additive float mask; plain causal attention needs none on the fused path:
        # with L == S, SDPA's own is_causal equals ours; with one query (L == 1, a decode step) our
        # bottom-right causal mask blocks nothing, so no mask at all is needed.
        kernel_causal = (is_causal and not need_weights and attn_mask is None and key_padding_mask is None
                         and (L == S or L == 1 <= S))
        mask, empty_rows = _build_mask(key_padding_mask, attn_mask, is_causal and not kernel_causal,
                                       B, self.num_heads, L, S, q.dtype, q.device)  # (B|1, H|1, L, S)
        # 4. Attend: the explicit path keeps the weights, the fused kernel does not.
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            head_out, weights = _attend(q, *self._kv_per_group(k, v), mask, empty_rows, dropout_p,
                                        self.head_dim**-0.5)  # (B, H, L, hd), (B, H, L, S)
        else:
            head_out, weights = self._fused(q, k, v, mask, dropout_p, kernel_causal and L == S), None
            if empty_rows is not None:
                head_out = head_out.masked_fill(empty_rows, 0.0)  # rows with no allowed key -> 0
        # 5. head_mask: xi_h * head_h (Michel et al. 2019).
        if head_mask is not None:
            head_out = head_out * head_mask.to(head_out.dtype)[..., None, None]  # (B|1, H, 1, 1)
        return head_out, weights, cache

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
        if not checks.tracing() and (
            head_out.dim() != 4 or head_out.shape[1] != self.num_heads or head_out.shape[3] != self.head_dim
        ):
            raise ValueError(
                f"head_out must have shape (B, H, L, hd) = (B, {self.num_heads}, L, {self.head_dim}), "
                f"got {tuple(head_out.shape)}"
            )
        B, H, L, hd = head_out.shape
        concat = head_out.transpose(1, 2).reshape(B, L, H * hd)  # (B, L, H*hd)
        return self.out_proj(concat)  # (B, L, d_model)

    # -- the steps of forward --------------------------------------------------------------------

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """Q, K, V projections, split into heads: (B, H, L, hd), (B, H_kv, S, hd), (B, H_kv, S, hd)."""
        B, L, _ = query.shape
        S = key.shape[1]
        H, H_kv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        if key is query and value is query:
            # Self-attention: one matmul with [W^Q; W^K; W^V] instead of three (same numbers, faster).
            qkv = F.linear(query, *_stacked(self.q_proj, self.k_proj, self.v_proj))
            q, k, v = qkv.split([H * hd, H_kv * hd, H_kv * hd], dim=-1)  # (B, L, H*hd), (B, L, H_kv*hd) x2
        else:
            q = self.q_proj(query)  # (B, L, H*hd)
            if value is key:
                k, v = F.linear(key, *_stacked(self.k_proj, self.v_proj)).split([H_kv * hd] * 2, dim=-1)
            else:
                k, v = self.k_proj(key), self.v_proj(value)  # (B, S, H_kv*hd) each
        q = q.view(B, L, H, hd).transpose(1, 2)  # (B, H, L, hd)
        k = k.view(B, S, H_kv, hd).transpose(1, 2)  # (B, H_kv, S, hd)
        v = v.view(B, S, H_kv, hd).transpose(1, 2)  # (B, H_kv, S, hd)
        return q, k, v

    def _kv_per_group(self, k: Tensor, v: Tensor) -> Tuple[Tensor, Tensor]:
        """K/V laid out for :func:`_attend`: as they are while query head i reads KV head i // G;
        after uneven GQA pruning, one KV head per query head (index_select, a copy)."""
        if self._regular_groups:
            return k, v  # (B, H_kv, S, hd)
        return k.index_select(1, self.kv_head_index), v.index_select(1, self.kv_head_index)  # (B, H, S, hd)

    def _fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], dropout_p: float,
               is_causal: bool) -> Tensor:
        """F.scaled_dot_product_attention on heads: (B, H, L, hd). Our mask is additive float, so
        SDPA's opposite bool polarity never comes into play."""
        B, H, L, hd = q.shape
        if H == 0:  # every head pruned
            return q.new_zeros(B, 0, L, hd)
        gqa = _SDPA_HAS_GQA and self._regular_groups and H != k.shape[1]
        if (not gqa and H != k.shape[1]) or not self._regular_groups:  # one KV head per query head
            k, v = k.index_select(1, self.kv_head_index), v.index_select(1, self.kv_head_index)  # (B, H, S, hd)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=hd**-0.5,
            **({"enable_gqa": True} if gqa else {}),
        )  # (B, H, L, hd)

    # -- argument checks (run once per call, before the pass) -------------------------------------

    def _check_forward(self, query, key, value, key_padding_mask, attn_mask, is_causal, head_mask,
                       need_weights, past_kv, use_cache) -> None:
        for name, flag in (("is_causal", is_causal), ("need_weights", need_weights), ("use_cache", use_cache)):
            checks.flag(flag, name)
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} must have shape (B, L or S, d_model={self.d_model}) (batch first), "
                    f"got {tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__}"
                )
            if not t.is_floating_point():
                raise ValueError(f"{name} must be floating point, got dtype {t.dtype}")
        B, L, _ = query.shape
        if key.shape[0] != B or value.shape[0] != B:
            raise ValueError(
                f"batch sizes differ: query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key and value lengths differ: key {tuple(key.shape)}, value {tuple(value.shape)}")
        weight = self.q_proj.weight
        if key.dtype != query.dtype or value.dtype != query.dtype:
            raise ValueError(
                f"query, key and value must share one dtype, got query {query.dtype}, "
                f"key {key.dtype}, value {value.dtype}; cast them first (e.g. key.to(query.dtype))"
            )
        if query.dtype != weight.dtype or query.device != weight.device:
            raise ValueError(
                f"query is {query.dtype} on {query.device}, but the module's weights are {weight.dtype} on "
                f"{weight.device}; move one to the other (e.g. mha.to(query.dtype))"
            )
        S = key.shape[1]
        if past_kv is not None:
            S += _check_past_kv(past_kv, B, self.num_kv_heads, self.head_dim, query.dtype, query.device)
        H = self.num_heads
        _check_masks(key_padding_mask, attn_mask, B, H, L, S, query.dtype)
        if head_mask is not None:
            _check_head_mask(head_mask, B, H, query.dtype)
        if need_weights and B * H * L * S * query.element_size() > WEIGHTS_WARN_BYTES:
            warnings.warn(
                f"need_weights=True returns per-head weights of shape (B, H, L, S) = ({B}, {H}, {L}, {S}): "
                f"{B * H * L * S * query.element_size():,} bytes. Pass need_weights=False (the fused path "
                f"keeps no weights), or run fewer sequences or shorter ones.",
                UserWarning, stacklevel=user_stacklevel(),
            )

    # -- set-up, pruning, interop ----------------------------------------------------------------

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

    def new_kv_cache(self, batch: int, capacity: int, *, dtype: Optional[torch.dtype] = None,
                     device=None) -> "KVCache":
        """An empty :class:`KVCache` with room for ``capacity`` positions (no growth until then).

        Raises:
            ValueError: ``batch`` or ``capacity`` not a positive integer.
        """
        w = self.k_proj.weight
        return KVCache.empty(checks.positive_int(batch, "batch"), self.num_kv_heads, self.head_dim,
                             checks.positive_int(capacity, "capacity"),
                             dtype=dtype or w.dtype, device=device or w.device)

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
        heads = set(checks.head_indices(heads, "heads", upper=self.original_num_heads,
                                       upper_name="original_num_heads"))
        new = heads - self.pruned_heads
        if not new:
            return
        hd = self.head_dim
        keep = [i for i, h in enumerate(self.kept_heads) if h not in new]  # current positions
        kv_of_kept = [self._kv_index[i] for i in keep]  # current KV head of each kept query head
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
        self._kv_index = new_index  # the buffer's values as a list (readable on the meta device too)
        self.kv_head_index = torch.tensor(new_index, dtype=torch.long, device=self.kv_head_index.device)
        H, H_kv = self.num_heads, self.num_kv_heads
        self._regular_groups = H_kv > 0 and H % H_kv == 0 and new_index == [i // (H // H_kv) for i in range(H)]

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

def _check_head_mask(head_mask, B: int, H: int, dtype: torch.dtype = torch.float32) -> None:
    if not isinstance(head_mask, Tensor):
        raise ValueError(
            f"head_mask must be a float tensor of shape (H,) = ({H},) or (B, H), got a "
            f"{type(head_mask).__name__} ({head_mask!r}); wrap it: torch.tensor(..., dtype=torch.float32)"
        )
    if not head_mask.is_floating_point():
        raise ValueError(f"head_mask must be floating point (1 keep, 0 drop), got dtype {head_mask.dtype}")
    if tuple(head_mask.shape) not in ((H,), (B, H)):
        raise ValueError(
            f"head_mask must have shape (H,) = ({H},) or (B, H) = ({B}, {H}) over the current "
            f"(kept) heads, got {tuple(head_mask.shape)}"
        )
    if not bool(torch.isfinite(head_mask.to(dtype)).all()):  # also: 1e5 becomes inf in fp16
        raise ValueError(f"head_mask holds NaN or inf (in {dtype}): {head_mask.tolist()}")


def _stacked(*projs: nn.Linear) -> Tuple[Tensor, Optional[Tensor]]:
    """Weights (and biases) of several projections stacked, for one fused matmul."""
    weight = torch.cat([p.weight for p in projs])
    bias = None if projs[0].bias is None else torch.cat([p.bias for p in projs])
    return weight, bias


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
