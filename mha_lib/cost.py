"""What attention costs: parameter, FLOP and memory formulas (measurements: :mod:`mha_lib.measure`).

Read this file top to bottom:

1. Formulas for ONE attention layer, from (B, L, S, d_model, H, num_kv_heads, dtype):
   ``attention_params``, ``attention_flops``, ``attention_map_bytes``, ``kv_cache_bytes`` (multi-head
   latent attention's is :func:`mha_lib.efficient.latent_kv_cache_bytes`), and
   ``attention_layer_cost``, which returns them all at once.
2. Published model configurations as data, with their sources (``PUBLISHED_CONFIGS``,
   ``get_config``), so the formulas can be applied to real models.
3. ``decode_traffic``: the bytes one decoding step reads (weights and KV cache).
4. ``pruned_attention_flops``: the FLOPs left after pruning heads (chapter 4).

The measurements that check these formulas on a machine (time, peak memory, matmul FLOP/s,
memory bandwidth, the environment) are in :mod:`mha_lib.measure`; their old names here were
removed in 0.3.0.

Conventions:
    * FLOPs count matrix multiplications only, at **2 FLOPs per multiply-add** (an (m, k) @ (k, n)
      product costs 2*m*k*n). Bias additions, scaling, masking and the softmax are elementwise and
      are left out; ``torch.utils.flop_counter.FlopCounterMode`` counts the same way.
    * Bytes are bytes (not bits); ``format_bytes`` prints them in binary units (1 MiB = 2**20 B).
    * Times are seconds; FLOP/s are FLOPs per second.

Notation (as in ``mha_lib.core``):
    B  batch size          L  query length        S  key/value length
    H  query heads         H_kv  key/value heads  hd  head_dim = d_model // H
    d_model  model width

Sources:
    Vaswani et al. 2017, "Attention Is All You Need" (multi-head attention; Table 3 configurations).
    Shazeer 2019, "Fast Transformer Decoding: One Write-Head is All You Need" (multi-query
    attention, the KV cache as the decoding bottleneck).
    Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from
    Multi-Head Checkpoints" (grouped-query attention).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Dict, Optional, Union

import torch

from . import checks

__all__ = [
    "pruned_attention_flops",
    "DecodeTraffic",
    "decode_traffic",
    "AttentionFlops",
    "AttentionLayerCost",
    "attention_params",
    "attention_flops",
    "attention_map_bytes",
    "kv_cache_bytes",
    "attention_layer_cost",
    "bytes_per_element",
    "format_bytes",
    "ModelConfig",
    "PUBLISHED_CONFIGS",
    "UNPUBLISHED_CLAIMS",
    "get_config",
]

DType = Union[torch.dtype, str]

# ---------------------------------------------------------------------------------------------
# 0. Argument checks: every formula says which value was wrong
# ---------------------------------------------------------------------------------------------


def _check_heads(d_model, num_heads, num_kv_heads) -> tuple:
    """Check (d_model, H, H_kv); return them with head_dim (``checks.head_sizes``)."""
    return checks.head_sizes(d_model, num_heads, num_kv_heads)


def _check_distinct(name: str, values: list) -> None:
    """A sweep times each configuration once: refuse a repeated value instead of dropping it."""
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"{name} lists {repeated} more than once ({values}); each configuration is timed once")


_DTYPE_NAMES = {
    "fp32": torch.float32, "float32": torch.float32, "float": torch.float32,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
    "fp64": torch.float64, "float64": torch.float64, "double": torch.float64,
    "int8": torch.int8, "uint8": torch.uint8,
}


def _to_dtype(dtype: DType) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype.lower().removeprefix("torch.") in _DTYPE_NAMES:
        return _DTYPE_NAMES[dtype.lower().removeprefix("torch.")]
    raise ValueError(
        f"dtype must be a torch.dtype or one of {sorted(_DTYPE_NAMES)}, got {dtype!r}"
    )


def bytes_per_element(dtype: DType) -> int:
    """Bytes one element of ``dtype`` takes: 4 for fp32, 2 for fp16/bf16, 1 for int8.

    Args:
        dtype: a ``torch.dtype`` or a name such as ``"fp16"``, ``"bf16"``, ``"float32"``.

    Raises:
        ValueError: an unknown dtype name.
    """
    return torch.empty((), dtype=_to_dtype(dtype)).element_size()


def format_bytes(n: float, digits: int = 3) -> str:
    """``n`` bytes in binary units with ``digits`` significant digits.

    Examples: ``'512 KiB'``, ``'1.5 GiB'``, ``'1000 MiB'``. A value of 1000 to 1023.x of a
    unit keeps its integer part (``'1000 B'``, ``'1023 KiB'``) rather than switching to
    scientific notation (so it may show more than ``digits`` digits); one that rounds to 1024
    is written in the next unit (``'1 KiB'``).

    Args:
        n: a number of bytes (int or float; negative values get a leading ``-``).
        digits: significant digits, an int >= 1.

    Returns:
        A string such as ``'1.5 GiB'`` (units B, KiB, MiB, GiB, TiB, PiB; powers of 1024).

    Raises:
        ValueError: ``n`` not a real number, or NaN or infinite; ``digits`` not an int >= 1.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Real):
        raise ValueError(f"n must be a number of bytes, got {n!r}")
    if not math.isfinite(n):
        raise ValueError(f"n must be a finite number of bytes, got {n!r}")
    digits = checks.int_at_least(digits, "digits", 1)
    if n < 0:
        return "-" + format_bytes(-n, digits)
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    n = float(n)
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n /= 1024
        i += 1
    text = f"{n:.{digits}g}"
    if "e" in text:  # 1000..1023.x (or beyond the last unit): %g would write e.g. "1e+03"
        text = f"{n:.0f}"
        if text == "1024" and i < len(units) - 1:
            n /= 1024
            i += 1
            text = f"{n:.{digits}g}"
    return f"{text} {units[i]}"


# ---------------------------------------------------------------------------------------------
# 1. Formulas for one attention layer
# ---------------------------------------------------------------------------------------------


def attention_params(d_model: int, num_heads: int, num_kv_heads: Optional[int] = None, *,
                     bias: bool = True) -> int:
    """Number of parameters (weights + biases) of one ``MultiHeadAttention`` layer.

    The layer is multi-head attention as defined by Vaswani et al. 2017, "Attention Is All You
    Need" (section 3.2.2): per-head projections of size d_model x hd with hd = d_model / H,
    concatenated and projected back by W^O. GQA/MQA follow Ainslie et al. 2023 and Shazeer 2019.

    W^Q is (H*hd, d_model), W^K and W^V are (H_kv*hd, d_model) each, W^O is (d_model, H*hd), with
    hd = d_model // H. Because H*hd = d_model, plain MHA has ``4*d_model**2 + 4*d_model``
    parameters (with bias) for EVERY H: more heads do not mean more parameters. GQA/MQA shrink
    only W^K and W^V: ``2*d_model**2 + 2*d_model*H_kv*hd`` weights.

    Args:
        d_model: model width (> 0).
        num_heads: query heads H (> 0, divides d_model).
        num_kv_heads: key/value heads H_kv (> 0, divides H); default H (MHA). 1 is MQA.
        bias: whether the four projections have biases (as ``MultiHeadAttention(bias=...)``).

    Returns:
        A count of scalars (int). Multiply by ``bytes_per_element(dtype)`` for bytes.

    Raises:
        ValueError: a non-positive or non-integer size, H not dividing d_model, H_kv not dividing H.
    """
    d, H, H_kv, hd = _check_heads(d_model, num_heads, num_kv_heads)
    q = d * H * hd + (H * hd if bias else 0)
    kv = 2 * (d * H_kv * hd + (H_kv * hd if bias else 0))
    out = H * hd * d + (d if bias else 0)
    return q + kv + out


@dataclass(frozen=True)
class AttentionFlops:
    """Matmul FLOPs of one attention layer's forward pass, term by term (2 FLOPs per multiply-add).

    Attributes:
        q_proj: X W^Q, 2*B*L*d_model*(H*hd).
        kv_proj: K and V projections, 2 * 2*B*S_proj*d_model*(H_kv*hd).
        scores: Q K^T for every head, 2*B*H*L*S*hd.
        weighted_sum: weights @ V for every head, 2*B*H*L*S*hd.
        out_proj: concat(heads) W^O, 2*B*L*(H*hd)*d_model.
    """

    q_proj: int
    kv_proj: int
    scores: int
    weighted_sum: int
    out_proj: int

    @property
    def projections(self) -> int:
        """FLOPs of the four projections (the part that grows with d_model**2)."""
        return self.q_proj + self.kv_proj + self.out_proj

    @property
    def attention(self) -> int:
        """FLOPs of scores and weighted sum (the part that grows with L*S)."""
        return self.scores + self.weighted_sum

    @property
    def total(self) -> int:
        """All matmul FLOPs."""
        return self.projections + self.attention

    def as_dict(self) -> Dict[str, int]:
        """The five terms plus ``total``, as a plain dict."""
        return {**asdict(self), "total": self.total}


def attention_flops(batch: int, q_len: int, kv_len: Optional[int] = None, *, d_model: int,
                    num_heads: int, num_kv_heads: Optional[int] = None,
                    kv_proj_len: Optional[int] = None) -> AttentionFlops:
    """Matmul FLOPs of one ``MultiHeadAttention`` forward pass, by term.

    The terms are the matmuls of Vaswani et al. 2017, "Attention Is All You Need" (section
    3.2): the Q, K, V projections, the scores ``Q K^T``, the weighted sum of the values, and W^O.

    Convention: 2 FLOPs per multiply-add; matmuls only (bias adds, scaling, masking, softmax are
    O(B*H*L*S) or O(B*L*d_model) elementwise work and are not counted), as
    ``torch.utils.flop_counter.FlopCounterMode`` counts. At fixed d_model every term is
    independent of H (H*hd = d_model); GQA/MQA shrink only ``kv_proj``. What does grow with H
    is elementwise work and memory: the B*H*L*S attention map (``attention_map_bytes``).

    Args:
        batch: B (>= 0).
        q_len: L, query positions (>= 0).
        kv_len: S, key/value positions attended to (>= 0); default L (self-attention). With a KV
            cache, S counts the cached positions too.
        d_model, num_heads, num_kv_heads: as in ``attention_params``.
        kv_proj_len: key/value positions PROJECTED in this call; default S. In a KV-cache decode
            step only the new token is projected: pass 1 (with L = 1, S = context length).

    Returns:
        ``AttentionFlops`` (FLOPs, ints; ``.total`` sums them).

    Raises:
        ValueError: negative or non-integer sizes, H not dividing d_model, H_kv not dividing H.
    """
    d, H, H_kv, hd = _check_heads(d_model, num_heads, num_kv_heads)
    B = checks.int_at_least(batch, "batch", 0)
    L = checks.int_at_least(q_len, "q_len", 0)
    S = L if kv_len is None else checks.int_at_least(kv_len, "kv_len", 0)
    S_proj = S if kv_proj_len is None else checks.int_at_least(kv_proj_len, "kv_proj_len", 0)
    return AttentionFlops(
        q_proj=2 * B * L * d * H * hd,
        kv_proj=2 * 2 * B * S_proj * d * H_kv * hd,
        scores=2 * B * H * L * S * hd,
        weighted_sum=2 * B * H * L * S * hd,
        out_proj=2 * B * L * H * hd * d,
    )


def attention_map_bytes(batch: int, q_len: int, kv_len: Optional[int] = None, *, num_heads: int,
                        dtype: DType = torch.float32) -> int:
    """Bytes of ONE materialised attention map: a (B, H, L, S) tensor of ``dtype``.

    This is what ``need_weights=True`` returns and what the explicit path (softmax(QK^T)V) keeps
    per layer; it grows as H*L*S, unlike the FLOPs. The explicit path holds one such tensor at
    inference (mha_lib normalises the scores in place) and two (scores and weights) when
    gradients are needed; training keeps them for the backward pass. Fused kernels
    (FlashAttention; torch's SDPA on CPU and CUDA) never build it.

    Args:
        batch: B (>= 0).
        q_len: L (>= 0).
        kv_len: S (>= 0), default L.
        num_heads: H (> 0).
        dtype: element type of the map (``torch.dtype`` or a name like ``"fp16"``).

    Returns:
        Bytes (int): B*H*L*S*bytes_per_element(dtype).

    Raises:
        ValueError: negative or non-integer sizes, non-positive H, unknown dtype.
    """
    B = checks.int_at_least(batch, "batch", 0)
    L = checks.int_at_least(q_len, "q_len", 0)
    S = L if kv_len is None else checks.int_at_least(kv_len, "kv_len", 0)
    H = checks.int_at_least(num_heads, "num_heads", 1)
    return B * H * L * S * bytes_per_element(dtype)


def kv_cache_bytes(*, num_layers: int, num_kv_heads: int, head_dim: int, seq_len: int,
                   batch: int = 1, dtype: DType = torch.float16) -> int:
    """Bytes of a decoder's KV cache: 2 x layers x H_kv x head_dim x seq_len x batch x bytes/elt.

    The 2 is one K and one V tensor per layer, each (batch, H_kv, seq_len, head_dim), as
    ``MultiHeadAttention(..., use_cache=True)`` returns them. MQA (H_kv = 1, Shazeer 2019) and GQA
    (1 < H_kv < H, Ainslie et al. 2023) shrink it by H / H_kv. Example: LLaMA-2 7B (32 layers,
    32 KV heads, head_dim 128) in fp16 holds 2*32*32*128*2 B = 0.5 MiB per token.

    Args:
        num_layers: decoder layers with self-attention (> 0).
        num_kv_heads: H_kv per layer (> 0).
        head_dim: hd (> 0).
        seq_len: cached positions (>= 0).
        batch: sequences decoded together (>= 0).
        dtype: element type of the cache (``torch.dtype`` or a name); default fp16.

    Returns:
        Bytes (int).

    Raises:
        ValueError: non-positive layers/heads/head_dim, negative seq_len/batch, unknown dtype.
    """
    n = checks.int_at_least(num_layers, "num_layers", 1)
    h = checks.int_at_least(num_kv_heads, "num_kv_heads", 1)
    hd = checks.int_at_least(head_dim, "head_dim", 1)
    s = checks.int_at_least(seq_len, "seq_len", 0)
    b = checks.int_at_least(batch, "batch", 0)
    return 2 * n * h * hd * s * b * bytes_per_element(dtype)


@dataclass(frozen=True)
class AttentionLayerCost:
    """Every formula for one attention layer at one shape (see ``attention_layer_cost``).

    Attributes:
        params: parameters (count).
        param_bytes: their bytes in ``dtype``.
        flops: ``AttentionFlops`` (matmul FLOPs, 2 per multiply-add).
        attention_map_bytes: bytes of one (B, H, L, S) map.
        kv_cache_bytes: bytes of this layer's K and V for S positions (B, H_kv, S, hd) x 2.
        head_dim: hd = d_model // H.
    """

    params: int
    param_bytes: int
    flops: AttentionFlops
    attention_map_bytes: int
    kv_cache_bytes: int
    head_dim: int


def attention_layer_cost(batch: int, q_len: int, kv_len: Optional[int] = None, *, d_model: int,
                         num_heads: int, num_kv_heads: Optional[int] = None,
                         dtype: DType = torch.float32, bias: bool = True) -> AttentionLayerCost:
    """All formulas for one attention layer: parameters, FLOPs, attention-map and KV-cache bytes.

    Args:
        batch, q_len, kv_len: B, L, S (S defaults to L), each >= 0.
        d_model, num_heads, num_kv_heads: as in ``attention_params``.
        dtype: element type for the byte counts.
        bias: whether the projections have biases.

    Returns:
        ``AttentionLayerCost``.

    Raises:
        ValueError: as the individual formulas.
    """
    _, H, H_kv, hd = _check_heads(d_model, num_heads, num_kv_heads)
    S = q_len if kv_len is None else kv_len
    params = attention_params(d_model, H, H_kv, bias=bias)
    return AttentionLayerCost(
        params=params,
        param_bytes=params * bytes_per_element(dtype),
        flops=attention_flops(batch, q_len, S, d_model=d_model, num_heads=H, num_kv_heads=H_kv),
        attention_map_bytes=attention_map_bytes(batch, q_len, S, num_heads=H, dtype=dtype),
        kv_cache_bytes=kv_cache_bytes(num_layers=1, num_kv_heads=H_kv, head_dim=hd, seq_len=S,
                                      batch=batch, dtype=dtype),
        head_dim=hd,
    )


# ---------------------------------------------------------------------------------------------
# 2. Published model configurations
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelConfig:
    """The attention shape of a published model.

    Attributes:
        name: display name.
        kind: ``"encoder"``, ``"decoder"`` or ``"encoder-decoder"``.
        num_layers: layers with self-attention that a KV cache would hold (the decoder's for an
            encoder-decoder model) or that an encoder runs.
        d_model: model width.
        num_heads: query heads per layer.
        num_kv_heads: key/value heads per layer (= num_heads for MHA).
        head_dim: per-head width.
        context_len: the longest sequence the model was built for (its position table or
            published context window), or None when it has none (sinusoidal positions).
        source: where the numbers were published.
        note: anything a reader should know when using them.
        nominal_params: the parameter count the publication names the model by (Vaswani et al.
            Table 3: 65M; GPT-2 Table 2: 117M and 1542M; GPT-3 175B; Llama 2 7B and 70B), or
            None; an approximation of the true count, good enough for byte estimates.
    """

    name: str
    kind: str
    num_layers: int
    d_model: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    context_len: Optional[int]
    source: str
    note: str = ""
    nominal_params: Optional[float] = None  # the parameter count in the model's published name/table

    def kv_cache_bytes(self, seq_len: int, batch: int = 1, dtype: DType = torch.float16) -> int:
        """KV-cache bytes (int) for the whole model (all ``num_layers``) at ``seq_len`` cached positions.

        ``batch`` sequences, elements of ``dtype`` (default fp16); as :func:`kv_cache_bytes`, which
        raises ValueError on a negative or non-integer size or an unknown dtype.
        """
        return kv_cache_bytes(num_layers=self.num_layers, num_kv_heads=self.num_kv_heads,
                              head_dim=self.head_dim, seq_len=seq_len, batch=batch, dtype=dtype)

    def attention_map_bytes(self, seq_len: int, batch: int = 1, dtype: DType = torch.float32) -> int:
        """Bytes (int) of one layer's (B, H, L, L) self-attention map, L = ``seq_len``, B = ``batch``.

        Elements of ``dtype`` (default fp32); as :func:`attention_map_bytes`, which raises ValueError
        on a negative or non-integer size or an unknown dtype.
        """
        return attention_map_bytes(batch, seq_len, seq_len, num_heads=self.num_heads, dtype=dtype)

    def attention_params(self, bias: bool = True) -> int:
        """Attention parameters (a count) of ONE layer: projections to and from H*head_dim features, with biases if ``bias``."""
        # Written out instead of calling attention_params(d_model, ...): that one assumes
        # head_dim = d_model // H, while a published config states head_dim separately.
        d, H, H_kv, hd = self.d_model, self.num_heads, self.num_kv_heads, self.head_dim
        weights = 2 * d * H * hd + 2 * d * H_kv * hd  # W^Q and W^O; W^K and W^V
        biases = H * hd + 2 * H_kv * hd + d
        return weights + (biases if bias else 0)


#: Published attention shapes by display name, each :class:`ModelConfig` with its ``source``.
PUBLISHED_CONFIGS: Dict[str, ModelConfig] = {c.name: c for c in (
    ModelConfig("Transformer base", "encoder-decoder", 6, 512, 8, 8, 64, None,
                "Vaswani et al. 2017, Table 3 (base: N=6, d_model=512, h=8, d_k=64)",
                "6 encoder + 6 decoder layers; num_layers counts the decoder's self-attention "
                "(a decoder also caches the cross-attention K/V of the encoder output). "
                "Sinusoidal positions: no fixed maximum length.", 65e6),
    ModelConfig("BERT-base", "encoder", 12, 768, 12, 12, 64, 512,
                "Devlin et al. 2019, Section 3 (L=12, H=768, A=12); sequences of up to 512 tokens"),
    ModelConfig("BERT-large", "encoder", 24, 1024, 16, 16, 64, 512,
                "Devlin et al. 2019, Section 3 (L=24, H=1024, A=16); sequences of up to 512 tokens"),
    ModelConfig("GPT-2 small", "decoder", 12, 768, 12, 12, 64, 1024,
                "Radford et al. 2019, Table 2 and Section 2.3 (context 1024); released config "
                "(n_layer=12, n_embd=768, n_head=12)", nominal_params=117e6),
    ModelConfig("GPT-2 XL", "decoder", 48, 1600, 25, 25, 64, 1024,
                "Radford et al. 2019, Table 2 and Section 2.3 (context 1024); released config "
                "(n_layer=48, n_embd=1600, n_head=25)", nominal_params=1542e6),
    ModelConfig("GPT-3 175B", "decoder", 96, 12288, 96, 96, 128, 2048,
                "Brown et al. 2020, Table 2.1 (n_layers=96, d_model=12288, n_heads=96, d_head=128) "
                "and Section 2.1 (context window 2048)", nominal_params=175e9),
    ModelConfig("LLaMA-2 7B", "decoder", 32, 4096, 32, 32, 128, 4096,
                "Touvron et al. 2023 (Llama 2), Table 1 (context 4096); released params.json "
                "(dim=4096, n_layers=32, n_heads=32)", nominal_params=7e9),
    ModelConfig("LLaMA-2 70B", "decoder", 80, 8192, 64, 8, 128, 4096,
                "Touvron et al. 2023 (Llama 2), Table 1 (GQA, context 4096); released params.json "
                "(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8)",
                "grouped-query attention: 8 KV heads serve 64 query heads", 70e9),
    ModelConfig("all-MiniLM-L6-v2", "encoder", 6, 384, 12, 12, 32, 512,
                "sentence-transformers/all-MiniLM-L6-v2 config.json (num_hidden_layers=6, "
                "hidden_size=384, num_attention_heads=12, max_position_embeddings=512)",
                "sentence-transformers truncates its inputs at max_seq_length=256"),
)}

@dataclass(frozen=True)
class DecodeTraffic:
    """Bytes one decode step reads, in the cost model of Shazeer 2019 (section 2.2): every
    weight once per step, and every cached key and value once per sequence.

    Attributes:
        weight_bytes: all parameters at ``dtype`` (bytes).
        cache_bytes: the KV cache of ``batch`` sequences at ``context`` positions (bytes).
        crossover_tokens: batch x context at which the cache reads equal the weight reads.
    """

    weight_bytes: float
    cache_bytes: float
    crossover_tokens: float


def decode_traffic(config: ModelConfig, *, batch: int = 1, context: int, dtype: DType = torch.float16) -> DecodeTraffic:
    """Bytes a decoder reads for one generated token per sequence: weights and KV cache.

    At small batch the weights dominate (a 7B model reads about 14 GB of fp16 weights per step
    against a 2 GiB cache at batch 1 and 4096 tokens); the cache reads overtake them only
    beyond ``crossover_tokens`` cached tokens per step (batch x context). Both terms are in
    Shazeer 2019's analysis of incremental decoding; grouped-query attention (Ainslie et al.
    2023) shrinks only the second.

    Args:
        config: a published :class:`ModelConfig` with ``nominal_params``.
        batch: sequences decoded together (> 0).
        context: cached positions per sequence (>= 0).
        dtype: of the weights and the cache.

    Returns:
        A :class:`DecodeTraffic` (bytes, bytes, tokens).

    Raises:
        ValueError: a config without ``nominal_params``, or bad sizes.
    """
    if config.nominal_params is None:
        raise ValueError(f"{config.name} has no published parameter count in mha_lib.cost")
    batch = checks.positive_int(batch, "batch")
    context = checks.nonnegative_int(context, "context")
    element = bytes_per_element(dtype)
    per_token = config.kv_cache_bytes(seq_len=1, batch=1, dtype=dtype)
    weights = config.nominal_params * element
    return DecodeTraffic(weights, float(per_token) * batch * context, weights / per_token)


#: Models whose attention shape was never published, by name, each with why (:func:`get_config` says it).
UNPUBLISHED_CLAIMS: Dict[str, str] = {
    "GPT-4": (
        "OpenAI has not published GPT-4's architecture (the GPT-4 Technical Report, 2023, gives "
        "no layer or head counts). The 'GPT-4: 120 layers, 128 heads' row in popular tables is "
        "speculation, not a published figure, so mha_lib computes nothing from it."
    ),
}


def get_config(name: str) -> ModelConfig:
    """A published configuration by name, case-insensitive (e.g. ``"llama-2 70b"``).

    Raises:
        ValueError: ``name`` is not in ``PUBLISHED_CONFIGS``. For a model whose architecture was
            never published (GPT-4) the message says so instead of guessing numbers.
    """
    key = " ".join(str(name).lower().replace("_", " ").split())
    for cfg_name, cfg in PUBLISHED_CONFIGS.items():
        if cfg_name.lower() == key:
            return cfg
    for claim, note in UNPUBLISHED_CLAIMS.items():
        if key.startswith(claim.lower()):
            raise ValueError(f"{name!r}: {note}")
    raise ValueError(f"no published configuration named {name!r}; known: {sorted(PUBLISHED_CONFIGS)}")


# ---------------------------------------------------------------------------------------------
# 4. The cost of pruned heads (mha_lib.pruning re-exports it)
# ---------------------------------------------------------------------------------------------
def pruned_attention_flops(batch: int, seq_len: int, d_model: int, num_heads: int, kept_heads: int) -> int:
    """Matmul FLOPs of one self-attention forward pass with ``kept_heads`` of ``num_heads`` left.

    Pruning keeps head_dim = d_model // num_heads, so each of the five matmul terms of
    :func:`mha_lib.cost.attention_flops` (Q, K, V and output projections, scores, weighted
    sum; plain MHA, where a head's K and V rows go with it) shrinks in proportion to the heads
    kept: FLOPs(kept) = FLOPs(all) * kept / num_heads. Pruning a fraction p of the heads
    therefore ideally speeds attention up 1 / (1 - p) times.

    Returns:
        int FLOPs (2 per multiply-add).

    Raises:
        ValueError: ``kept_heads`` outside [0, num_heads], or sizes ``cost.attention_flops`` rejects.
    """
    if not 0 <= kept_heads <= num_heads:
        raise ValueError(f"kept_heads={kept_heads} must lie in [0, num_heads={num_heads}]")
    full = attention_flops(batch, seq_len, d_model=d_model, num_heads=num_heads).total
    return full * kept_heads // num_heads
