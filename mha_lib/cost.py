"""What attention costs: parameter, FLOP and memory formulas, and measurements to check them.

Read this file top to bottom:

1. Formulas for ONE attention layer, from (B, L, S, d_model, H, num_kv_heads, dtype):
   ``attention_params``, ``attention_flops``, ``attention_map_bytes``, ``kv_cache_bytes``, and
   ``attention_layer_cost``, which returns them all at once.
2. Published model configurations as data, with their sources (``PUBLISHED_CONFIGS``,
   ``get_config``), so the formulas can be applied to real models.
3. Measurements: ``measure_time`` (median seconds after warm-up), ``compare_times`` (several
   candidates timed round-robin, so a shared machine's noise hits them alike),
   ``measure_peak_memory`` (bytes, CUDA or CPU), ``measure_matmul_peak`` (the machine's matmul
   FLOP/s), ``measure_memory_bandwidth`` (its bytes/s), ``environment_string`` (what to print next to every timing), and
   ``benchmark_attention`` / ``sweep_heads`` / ``sweep_decode`` / ``measure_decode_step``,
   which apply them to ``MultiHeadAttention``.

Conventions:
    * FLOPs count matrix multiplications only, at **2 FLOPs per multiply-add** (an (m, k) @ (k, n)
      product costs 2*m*k*n). Bias additions, scaling, masking and the softmax are elementwise and
      are left out; ``torch.utils.flop_counter.FlopCounterMode`` counts the same way.
    * Bytes are bytes (not bits); ``format_bytes`` prints them in binary units (1 MiB = 2**20 B).
    * Times are seconds; FLOP/s are FLOPs per second.

Notation (as in ``mha_lib.attention``):
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

import contextlib
import math
import numbers
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Union

import torch

from . import checks

__all__ = [
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
    "timing_samples",
    "measure_time",
    "compare_times",
    "measure_peak_memory",
    "measure_matmul_peak",
    "measure_memory_bandwidth",
    "environment_string",
    "AttentionBenchmark",
    "benchmark_attention",
    "sweep_heads",
    "DecodeBenchmark",
    "sweep_decode",
    "measure_decode_step",
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
        batch: B (>= 0). q_len: L (>= 0). kv_len: S (>= 0), default L.
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
        params: parameters (count). param_bytes: their bytes in ``dtype``.
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
        """KV-cache bytes for the whole model (all ``num_layers``); see ``kv_cache_bytes``."""
        return kv_cache_bytes(num_layers=self.num_layers, num_kv_heads=self.num_kv_heads,
                              head_dim=self.head_dim, seq_len=seq_len, batch=batch, dtype=dtype)

    def attention_map_bytes(self, seq_len: int, batch: int = 1, dtype: DType = torch.float32) -> int:
        """Bytes of one layer's (B, H, L, L) self-attention map; see ``attention_map_bytes``."""
        return attention_map_bytes(batch, seq_len, seq_len, num_heads=self.num_heads, dtype=dtype)

    def attention_params(self, bias: bool = True) -> int:
        """Attention parameters of ONE layer (projections to and from H*head_dim features)."""
        # Written out instead of calling attention_params(d_model, ...): that one assumes
        # head_dim = d_model // H, while a published config states head_dim separately.
        d, H, H_kv, hd = self.d_model, self.num_heads, self.num_kv_heads, self.head_dim
        weights = 2 * d * H * hd + 2 * d * H_kv * hd  # W^Q and W^O; W^K and W^V
        biases = H * hd + 2 * H_kv * hd + d
        return weights + (biases if bias else 0)


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
# 3. Measurements
# ---------------------------------------------------------------------------------------------


def _device_of(device) -> torch.device:
    if device is None:
        return torch.device("cpu")
    return torch.device(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def timing_samples(fn: Callable[[], object], *, repeats: int = 7, warmup: int = 2, number: int = 1,
                   device=None) -> List[float]:
    """Wall-clock seconds per call of ``fn()``, one sample per repeat, after ``warmup`` calls.

    Each sample times ``number`` back-to-back calls with ``time.perf_counter`` and divides by
    ``number``; on CUDA/MPS the device is synchronised before and after, so queued kernels are
    counted. ``fn`` runs with whatever grad mode the caller set (wrap it in
    ``torch.inference_mode()`` to time inference).

    Args:
        fn: a callable with no arguments.
        repeats: samples (> 0). warmup: untimed calls first (>= 0; lets allocators, caches and
            lazy initialisation settle). number: calls per sample (> 0).
        device: the device ``fn`` runs on (``torch.device`` or str); default CPU.

    Returns:
        A list of ``repeats`` floats, seconds per call.

    Raises:
        ValueError: repeats or number < 1, warmup < 0.
    """
    repeats = checks.int_at_least(repeats, "repeats", 1)
    warmup = checks.int_at_least(warmup, "warmup", 0)
    number = checks.int_at_least(number, "number", 1)
    dev = _device_of(device)
    for _ in range(warmup):
        fn()
    _sync(dev)
    samples = []
    for _ in range(repeats):
        _sync(dev)
        start = time.perf_counter()
        for _ in range(number):
            fn()
        _sync(dev)
        samples.append((time.perf_counter() - start) / number)
    return samples


def measure_time(fn: Callable[[], object], *, repeats: int = 7, warmup: int = 2, number: int = 1,
                 device=None) -> float:
    """Median wall-clock seconds per call of ``fn()`` (see ``timing_samples`` for the arguments).

    The median of several repeats after warm-up resists the outliers of a shared machine better
    than the mean. Print ``environment_string(device)`` next to any number this returns, and
    compare times as ratios measured in the same run.

    Returns:
        Seconds (float, > 0).

    Raises:
        ValueError: as ``timing_samples``.
    """
    return statistics.median(timing_samples(fn, repeats=repeats, warmup=warmup, number=number,
                                            device=device))


def compare_times(fns: Mapping[str, Callable[[], object]], *, repeats: int = 5, warmup: int = 1,
                  device=None) -> Dict[str, float]:
    """Median seconds per call of several callables, timed round-robin so they share the noise.

    On a shared or throttling machine the load changes from second to second. Timing candidate A
    for a while and then candidate B lets that drift masquerade as a difference between them.
    Here every repeat times each callable once, in turn, so a slow spell hits all of them; ratios
    of the returned medians are then much steadier than the absolute times.

    Args:
        fns: name -> callable with no arguments.
        repeats: rounds (> 0); each callable is timed once per round.
        warmup: untimed rounds first (>= 0).
        device: where the callables run (synchronised around each call on CUDA/MPS).

    Returns:
        name -> median seconds per call (floats, > 0), in the order of ``fns``.

    Raises:
        ValueError: an empty ``fns``, repeats < 1, warmup < 0.
    """
    if not fns:
        raise ValueError("compare_times needs at least one callable")
    repeats = checks.int_at_least(repeats, "repeats", 1)
    warmup = checks.int_at_least(warmup, "warmup", 0)
    dev = _device_of(device)
    samples: Dict[str, List[float]] = {name: [] for name in fns}
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            _sync(dev)
            start = time.perf_counter()
            fn()
            _sync(dev)
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in samples.items()}


def measure_peak_memory(fn: Callable[[], object], *, device=None) -> int:
    """Peak bytes of tensor memory allocated while ``fn()`` runs, above what was live before.

    * CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus the
      bytes allocated before the call.
    * CPU: ``torch.profiler`` with ``profile_memory=True``; the allocation and free events are
      replayed in time order and the running total's maximum is returned. (Python's
      ``tracemalloc`` sees none of torch's tensor memory, so it cannot be used.) Tensors freed
      inside ``fn`` count while they were alive; the returned tensor counts too.

    The profiler adds a little time, so do not time and measure memory in the same call.

    Args:
        fn: a callable with no arguments.
        device: where ``fn`` allocates (``torch.device`` or str): ``cuda`` or ``cpu``; default CPU.

    Returns:
        Bytes (int, >= 0).

    Raises:
        ValueError: a device other than CPU or CUDA (MPS has no peak-memory counter).
    """
    dev = _device_of(device)
    if dev.type == "cuda":
        _sync(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        fn()
        _sync(dev)
        return max(0, torch.cuda.max_memory_allocated(dev) - before)
    if dev.type != "cpu":
        raise ValueError(f"measure_peak_memory supports cpu and cuda devices, got {dev}")
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():  # kineto prints "USDT: profiler_start" from C++ on every start/stop
        prof.start()
    try:
        fn()
    finally:
        with _quiet_stderr():
            prof.stop()
    return _cpu_peak_from_profile(prof)


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2, where C++ writes go; only around profiler start/stop.

    Always fd 2, not ``sys.stderr.fileno()``: in a Jupyter kernel the latter is a saved copy of
    the terminal's stderr, while the C++ library writes to fd 2, which the kernel forwards into
    the notebook.
    """
    fd = 2
    try:
        sys.stderr.flush()
        saved = os.dup(fd)
    except (OSError, ValueError):
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def _cpu_peak_from_profile(prof) -> int:
    """Replay the profiler's CPU memory events (+bytes on alloc, -bytes on free) in time order."""
    events = None
    try:  # the direct route: kineto's raw events carry signed byte counts and timestamps
        raw = prof.profiler.kineto_results.events()
        events = [(e.start_ns(), e.nbytes()) for e in raw
                  if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
    except (AttributeError, RuntimeError):
        pass
    if events is None:  # fallback through the public chrome-trace export
        import json

        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
        finally:
            os.remove(path)
        events = [(e["ts"], e["args"]["Bytes"]) for e in trace.get("traceEvents", [])
                  if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0]
    running = peak = 0
    for _, nbytes in sorted(events, key=lambda t: t[0]):
        running += nbytes
        peak = max(peak, running)
    return int(peak)


def measure_matmul_peak(*, device=None, dtype: DType = torch.float32, sizes=None, repeats: int = 3,
                        warmup: int = 1) -> float:
    """The machine's best measured matmul throughput in FLOP/s: the "physical limit" for attention.

    Times square (n, n) @ (n, n) products (2*n**3 FLOPs each) for each n in ``sizes`` and returns
    the highest median throughput. Large square GEMMs are the friendliest work a BLAS library
    gets, so this is a practical ceiling, not the vendor's datasheet peak. On CUDA with fp32 the
    result depends on ``torch.backends.cuda.matmul.allow_tf32``.

    Args:
        device: ``torch.device`` or str; default CPU.
        dtype: element type (``torch.dtype`` or a name); default fp32.
        sizes: matrix sizes n to try; default (512, 1024, 2048) on CPU, (4096, 8192) elsewhere.
        repeats, warmup: as in ``timing_samples``.

    Returns:
        FLOP/s (float, > 0).

    Raises:
        ValueError: an empty ``sizes`` or a non-positive size; bad repeats/warmup.
    """
    dev = _device_of(device)
    dt = _to_dtype(dtype)
    if sizes is None:
        sizes = (512, 1024, 2048) if dev.type == "cpu" else (4096, 8192)
    sizes = [checks.int_at_least(n, "size", 1) for n in sizes]
    if not sizes:
        raise ValueError("sizes must name at least one matrix size")
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n, device=dev, dtype=dt)
        b = torch.randn(n, n, device=dev, dtype=dt)
        with torch.inference_mode():
            t = measure_time(lambda: torch.mm(a, b), repeats=repeats, warmup=warmup, device=dev)
        best = max(best, 2 * n**3 / t)
        del a, b
    return best


def measure_memory_bandwidth(*, device=None, nbytes: int = 256 * 2**20, repeats: int = 3,
                             warmup: int = 1) -> float:
    """The machine's measured memory bandwidth in bytes/s: the other "physical limit".

    Times ``dst.copy_(src)`` of two ``nbytes`` buffers (much larger than any cache) and counts
    2*nbytes per copy (one read, one write). An operation that moves N bytes cannot take less
    than N / bandwidth seconds, however few FLOPs it does; with ``measure_matmul_peak`` this gives
    the two ceilings of a roofline model.

    Args:
        device: ``torch.device`` or str; default CPU.
        nbytes: size of each buffer in bytes (> 0); default 256 MiB (512 MiB allocated in all).
        repeats, warmup: as in ``timing_samples``.

    Returns:
        Bytes per second (float, > 0).

    Raises:
        ValueError: non-positive ``nbytes``; bad repeats/warmup.
    """
    dev = _device_of(device)
    n = checks.int_at_least(nbytes, "nbytes", 1)
    src = torch.ones(max(1, n // 4), device=dev)  # fp32
    dst = torch.empty_like(src)
    with torch.inference_mode():
        t = measure_time(lambda: dst.copy_(src), repeats=repeats, warmup=warmup, device=dev)
    return 2 * src.numel() * src.element_size() / t


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def environment_string(device=None) -> str:
    """One line describing where a timing was taken: torch version, device, thread count.

    Example: ``'torch 2.13.0+cpu | cpu: Intel(R) Xeon(R) Processor | 2 threads'``. Print it
    next to every measured time: the same code gives very different numbers elsewhere.

    Args:
        device: ``torch.device`` or str; default CPU.
    """
    dev = _device_of(device)
    if dev.type == "cuda":
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        where = f"cuda:{idx}: {torch.cuda.get_device_name(idx)}"
    else:
        where = f"{dev.type}: {_cpu_name()}" if dev.type == "cpu" else str(dev)
    n = torch.get_num_threads()
    return f"torch {torch.__version__} | {where} | {n} thread{'s' if n != 1 else ''}"


@dataclass(frozen=True)
class AttentionBenchmark:
    """One measured forward pass of ``MultiHeadAttention`` (see ``benchmark_attention``).

    Attributes:
        num_heads, batch, seq_len, d_model: the shape. need_weights: which path.
        seconds: median seconds per forward. peak_bytes: peak tensor bytes during one forward
            (None if not measured). flops: matmul FLOPs of one forward (``attention_flops``).
        flop_per_s: flops / seconds. map_bytes: bytes of one (B, H, L, L) map.
    """

    num_heads: int
    batch: int
    seq_len: int
    d_model: int
    need_weights: bool
    seconds: float
    peak_bytes: Optional[int]
    flops: int
    flop_per_s: float
    map_bytes: int


def sweep_heads(*, d_model: int, num_heads: Sequence[int], batch: int, seq_len: int,
                need_weights: Sequence[bool] = (True, False), num_kv_heads: Optional[int] = None,
                device=None, dtype: DType = torch.float32, repeats: int = 5, warmup: int = 1,
                memory: bool = True, seed: int = 0) -> List[AttentionBenchmark]:
    """Time (and measure the peak memory of) self-attention forward passes for several H and paths.

    For every H in ``num_heads`` and every path in ``need_weights`` a
    ``MultiHeadAttention(d_model, H, num_kv_heads=...)`` is built in eval mode and run under
    ``torch.inference_mode()`` on the same random (batch, seq_len, d_model) input.
    ``need_weights=True`` takes the explicit path, which materialises the (B, H, L, L) weights;
    ``False`` takes ``F.scaled_dot_product_attention`` (a fused kernel that builds no map on CPU
    and CUDA). All configurations are timed round-robin by ``compare_times``, so the noise of a
    shared machine hits them alike and their ratios are meaningful.

    Args:
        d_model: model width; every H must divide it.
        num_heads: the H values to sweep.
        batch, seq_len: B and L (= S), each > 0.
        need_weights: the paths to time, ``True`` (explicit) and/or ``False`` (SDPA).
        num_kv_heads: H_kv for every configuration (must divide each H); default MHA.
        device, dtype: where and in what precision; default CPU, fp32.
        repeats, warmup: as in ``compare_times``.
        memory: also measure each configuration's peak memory (``measure_peak_memory``); the
            profiled call doubles as the first warm-up.
        seed: for the weights and the input.

    Returns:
        A list of ``AttentionBenchmark``, H-major, in the order given.

    Raises:
        ValueError: bad sizes (as ``attention_flops``), an empty sweep, a value listed twice
            (each configuration is timed once), bad repeats/warmup.
    """
    from .attention import MultiHeadAttention

    heads = list(num_heads)
    paths = [bool(p) for p in need_weights]
    if not heads or not paths:
        raise ValueError(f"nothing to sweep: num_heads={heads}, need_weights={paths}")
    _check_distinct("num_heads", heads)
    _check_distinct("need_weights", paths)
    for H in heads:
        _check_heads(d_model, H, num_kv_heads)
    checks.int_at_least(batch, "batch", 1)
    checks.int_at_least(seq_len, "seq_len", 1)
    checks.int_at_least(repeats, "repeats", 1)
    checks.int_at_least(warmup, "warmup", 0)
    dev, dt = _device_of(device), _to_dtype(dtype)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, seq_len, d_model, generator=gen).to(device=dev, dtype=dt)

    fns: Dict[tuple, Callable[[], object]] = {}
    for H in heads:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            mha = MultiHeadAttention(d_model, H, num_kv_heads=num_kv_heads).to(device=dev, dtype=dt).eval()
        for nw in paths:
            fns[(H, nw)] = (lambda m=mha, nw=nw: m(x, need_weights=nw))

    peaks: Dict[tuple, Optional[int]] = {}
    with torch.inference_mode():
        for key, fn in fns.items():
            # The profiled call doubles as a warm-up: profiling slows a call a little, which
            # does not matter for a call whose time is thrown away.
            peaks[key] = measure_peak_memory(fn, device=dev) if memory else None
        seconds = compare_times(fns, repeats=repeats, warmup=max(0, warmup - 1) if memory else warmup,
                                device=dev)

    results = []
    for (H, nw), t in seconds.items():
        flops = attention_flops(batch, seq_len, d_model=d_model, num_heads=H,
                                num_kv_heads=num_kv_heads).total
        results.append(AttentionBenchmark(
            num_heads=H, batch=batch, seq_len=seq_len, d_model=d_model, need_weights=nw,
            seconds=t, peak_bytes=peaks[(H, nw)], flops=flops, flop_per_s=flops / t,
            map_bytes=attention_map_bytes(batch, seq_len, num_heads=H, dtype=dt),
        ))
    return results


def benchmark_attention(*, d_model: int, num_heads: int, batch: int, seq_len: int,
                        need_weights: bool, num_kv_heads: Optional[int] = None, device=None,
                        dtype: DType = torch.float32, repeats: int = 5, warmup: int = 1,
                        memory: bool = True, seed: int = 0) -> AttentionBenchmark:
    """One configuration of ``sweep_heads``: time (and measure the peak memory of) one forward pass.

    Args and Raises: as ``sweep_heads``, with a single ``num_heads`` and ``need_weights``.

    Returns:
        ``AttentionBenchmark`` (seconds, bytes, FLOPs, FLOP/s).
    """
    return sweep_heads(d_model=d_model, num_heads=[num_heads], batch=batch, seq_len=seq_len,
                       need_weights=[need_weights], num_kv_heads=num_kv_heads, device=device,
                       dtype=dtype, repeats=repeats, warmup=warmup, memory=memory, seed=seed)[0]


@dataclass(frozen=True)
class DecodeBenchmark:
    """One measured KV-cache decode step (see ``sweep_decode``).

    Attributes:
        num_heads, num_kv_heads, context_len, batch, d_model: the shape.
        need_weights: which path (True: explicit, False: SDPA).
        seconds_per_token: median seconds for one step (one new token per sequence).
        cache_bytes: bytes of the (k, v) the layer returned (measured with ``numel``).
        formula_bytes: ``kv_cache_bytes`` for one layer at context_len + 1 positions.
        flops: matmul FLOPs of the step (``attention_flops`` with L=1, kv_proj_len=1).
    """

    num_heads: int
    num_kv_heads: int
    context_len: int
    batch: int
    d_model: int
    need_weights: bool
    seconds_per_token: float
    cache_bytes: int
    formula_bytes: int
    flops: int


def sweep_decode(*, d_model: int, num_heads: int, num_kv_heads: Sequence[int], context_len: int,
                 batch: int = 1, need_weights: Sequence[bool] = (False,), device=None,
                 dtype: DType = torch.float32, repeats: int = 7, warmup: int = 2,
                 seed: int = 0) -> List[DecodeBenchmark]:
    """Time one autoregressive decode step of one attention layer with a KV cache, for several H_kv.

    For each H_kv (H_kv = H: MHA; 1: MQA, Shazeer 2019; otherwise GQA, Ainslie et al. 2023) a
    cache of ``context_len`` positions, (B, H_kv, context_len, hd) for K and for V, is handed to
    ``MultiHeadAttention(..., past_kv=cache, use_cache=True)`` with one new token per sequence.
    The step is what mha_lib's cache does: project the new token, write its K and V into the
    preallocated :class:`~mha_lib.attention.KVCache` (in place: no copy of the past) and attend
    to context_len + 1 keys. Before every step the cache is cropped back to ``context_len``, so
    every repeat sees the same context. No causal mask: one new query may see every cached key,
    so it would block nothing.

    The cache holds seeded random values instead of the projections of a real prefix: the values
    do not change the time, and building a 4096-token prefix would cost far more than the steps.
    All configurations are timed round-robin (``compare_times``).

    Args:
        d_model, num_heads: the layer (H must divide d_model).
        num_kv_heads: the H_kv values to compare (each must divide H).
        context_len: cached positions before the step (> 0).
        batch: sequences decoded together (> 0).
        need_weights: the paths to time: False (SDPA, which reads shared K/V heads in place with
            ``enable_gqa``) and/or True (explicit; each group's queries share their K/V head, no copy).
        device, dtype: where and in what precision; default CPU, fp32.
        repeats, warmup: as in ``compare_times``.
        seed: for the weights, the cache and the token.

    Returns:
        A list of ``DecodeBenchmark``, H_kv-major, in the order given.

    Raises:
        ValueError: bad sizes (as ``attention_flops``), an empty sweep, a value listed twice
            (each configuration is timed once), bad repeats/warmup.
    """
    from .attention import KVCache, MultiHeadAttention

    kvs, paths = list(num_kv_heads), [bool(p) for p in need_weights]
    if not kvs or not paths:
        raise ValueError(f"nothing to sweep: num_kv_heads={kvs}, need_weights={paths}")
    _check_distinct("num_kv_heads", kvs)
    _check_distinct("need_weights", paths)
    for H_kv in kvs:
        _, H, _, hd = _check_heads(d_model, num_heads, H_kv)
    checks.int_at_least(context_len, "context_len", 1)
    checks.int_at_least(batch, "batch", 1)
    dev, dt = _device_of(device), _to_dtype(dtype)
    gen = torch.Generator().manual_seed(seed)
    token = torch.randn(batch, 1, d_model, generator=gen).to(device=dev, dtype=dt)
    fns: Dict[tuple, Callable[[], object]] = {}
    for H_kv in kvs:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            mha = MultiHeadAttention(d_model, H, num_kv_heads=H_kv).to(device=dev, dtype=dt).eval()
        k, v = (torch.randn(batch, H_kv, context_len, hd, generator=gen).to(device=dev, dtype=dt)
                for _ in range(2))  # (B, H_kv, context_len, hd)
        for nw in paths:
            cache = KVCache(k, v).copy()  # one cache per configuration, room to grow

            def step(m=mha, c=cache, nw=nw):
                return m(token, past_kv=c.crop(context_len), use_cache=True, need_weights=nw)

            fns[(H_kv, nw)] = step
    with torch.inference_mode():
        cache = {}
        for key, fn in fns.items():
            _, _, present = fn()
            cache[key] = sum(t.numel() * t.element_size() for t in present)
            del present
        seconds = compare_times(fns, repeats=repeats, warmup=max(0, warmup - 1), device=dev)
    return [
        DecodeBenchmark(
            num_heads=H, num_kv_heads=H_kv, context_len=context_len, batch=batch, d_model=d_model,
            need_weights=nw, seconds_per_token=t, cache_bytes=cache[(H_kv, nw)],
            formula_bytes=kv_cache_bytes(num_layers=1, num_kv_heads=H_kv, head_dim=hd,
                                         seq_len=context_len + 1, batch=batch, dtype=dt),
            flops=attention_flops(batch, 1, context_len + 1, d_model=d_model, num_heads=H,
                                  num_kv_heads=H_kv, kv_proj_len=1).total,
        )
        for (H_kv, nw), t in seconds.items()
    ]


def measure_decode_step(*, d_model: int, num_heads: int, num_kv_heads: Optional[int] = None,
                        context_len: int, batch: int = 1, need_weights: bool = False, device=None,
                        dtype: DType = torch.float32, repeats: int = 7, warmup: int = 2,
                        seed: int = 0) -> DecodeBenchmark:
    """One configuration of ``sweep_decode`` (H_kv defaults to H: MHA).

    Args, Returns and Raises: as ``sweep_decode``, with a single ``num_kv_heads`` and path.
    """
    H_kv = num_heads if num_kv_heads is None else num_kv_heads
    return sweep_decode(d_model=d_model, num_heads=num_heads, num_kv_heads=[H_kv],
                        context_len=context_len, batch=batch, need_weights=[need_weights],
                        device=device, dtype=dtype, repeats=repeats, warmup=warmup, seed=seed)[0]
