"""Attention benchmarks built on the timing loop: ``benchmark_attention``, ``sweep_heads``,
``sweep_decode``, ``measure_decode_step``, and chapter 4's ``measure_pruning_speedup``.

Units: seconds, bytes, FLOPs (2 per multiply-add, as in :mod:`mha_lib.cost`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from .. import checks
from ..core.kv_cache import KVCache
from ..core.multi_head import MultiHeadAttention
from ..cost import (DType, _check_distinct, _check_heads, _to_dtype, attention_flops, attention_map_bytes,
                    kv_cache_bytes, pruned_attention_flops)
from ..model import Encoder, EncoderConfig
from .machine import measure_peak_memory
from .timing import _device_of, compare_times, round_robin_times


@dataclass(frozen=True)
class AttentionBenchmark:
    """One measured forward pass of ``MultiHeadAttention`` (see ``benchmark_attention``).

    Attributes:
        num_heads, batch, seq_len, d_model: the shape (H, B, L, d_model).
        need_weights: which path (True: the explicit softmax(QK^T)V that returns the weights).
        seconds: median seconds per forward.
        peak_bytes: peak tensor bytes during one forward (None if not measured).
        flops: matmul FLOPs of one forward (``attention_flops``, 2 per multiply-add).
        flop_per_s: flops / seconds.
        map_bytes: bytes of one (B, H, L, L) map.
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
    gen = torch.Generator().manual_seed(checks.seed(seed, "seed"))
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
    preallocated :class:`~mha_lib.core.KVCache` (in place: no copy of the past) and attend
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
    gen = torch.Generator().manual_seed(checks.seed(seed, "seed"))
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


# ----------------------------------------------------------------------------- pruned heads (chapter 4)
def _best_times(fns: Sequence[Callable[[], Any]], repeats: int, min_seconds: float = 0.0,
                warmup: int = 1, device=None) -> Tuple[List[float], List[float]]:
    """Fastest wall-clock and fastest CPU seconds of each fn, timed round-robin by
    :func:`mha_lib.measure.round_robin_times`. The minimum, not the median: on a shared CPU
    interference only ever adds time.

    Returns:
        ``(wall, cpu)``: two lists of seconds, one entry per fn.
    """
    samples = round_robin_times({str(i): fn for i, fn in enumerate(fns)}, repeats=repeats, warmup=warmup,
                                min_seconds=min_seconds, device=device)
    return [min(v["wall"]) for v in samples.values()], [min(v["cpu"]) for v in samples.values()]


@torch.inference_mode()
def measure_pruning_speedup(
    *,
    d_model: int = 512,
    num_heads: int = 8,
    seq_len: int = 256,
    batch_sizes: Sequence[int] = (1, 16, 64),
    keep_heads: Sequence[int] = (4,),
    whole_model_layers: int = 1,
    d_ff: Optional[int] = None,
    repeats: int = 5,
    min_seconds: float = 0.5,
    warmup: int = 1,
    seed: int = 0,
    device: Union[str, torch.device] = "cpu",
) -> List[dict]:
    """Time structurally pruned attention (and a whole encoder) against the unpruned one.

    For each batch size and each number of kept heads, heads are physically removed with
    ``prune_heads`` (the first ``num_heads - keep`` heads; which ones does not matter for
    speed) from one ``MultiHeadAttention(d_model, num_heads)`` and from every layer of an
    ``Encoder`` of ``whole_model_layers`` blocks (MLP width ``d_ff``, default 4·d_model).
    Self-attention forward passes (fast SDPA path, no weights returned) are timed,
    interleaved with the unpruned reference in the same loop; the fastest of at least
    ``repeats`` runs (more, until each variant has run ``min_seconds``), after ``warmup``
    untimed runs of each, is kept. Ratios of
    process CPU time are reported too: other jobs on a shared machine inflate wall time
    but not this process's CPU time. Ratios, not absolute times, are the result: they survive a
    shared, noisy CPU far better.

    Returns:
        one dict per (batch, keep) with keys ``batch``, ``heads``, ``kept``,
        ``attn_s`` / ``attn_ref_s`` (best seconds), ``attn_speedup`` (ref / pruned),
        ``attn_ideal`` (FLOP ratio, :func:`~mha_lib.cost.pruned_attention_flops`), ``attn_of_ideal``
        (speedup / ideal), ``attn_cpu_speedup`` (the same ratio in CPU seconds, see
        below), and the same for the whole model (``model_*``; ideal from
        attention FLOPs plus the MLP's 2·2·B·L·d·d_ff per layer; embeddings and norms left
        out).

    Raises:
        ValueError: keep counts outside [0, num_heads], or bad sizes.
    """
    if any(not 0 <= k <= num_heads for k in keep_heads):
        raise ValueError(f"keep_heads {list(keep_heads)} must lie in [0, num_heads={num_heads}]")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    seed = checks.seed(seed, "seed")
    d_ff = 4 * d_model if d_ff is None else d_ff
    device = torch.device(device)
    torch.manual_seed(seed)
    ref_attn = MultiHeadAttention(d_model, num_heads).to(device).eval()
    cfg = EncoderConfig(vocab_size=128, d_model=d_model, num_heads=num_heads, num_layers=whole_model_layers,
                        d_ff=d_ff, max_len=seq_len)
    ref_model = Encoder(cfg).to(device).eval()
    state_attn, state_model = ref_attn.state_dict(), ref_model.state_dict()
    rows = []
    for B in batch_sizes:
        x = torch.randn(B, seq_len, d_model, device=device)
        ids = torch.randint(1, 128, (B, seq_len), device=device)
        for keep in keep_heads:
            attn = MultiHeadAttention(d_model, num_heads).to(device).eval()
            attn.load_state_dict(state_attn)
            attn.prune_heads(range(num_heads - keep))
            model = Encoder(cfg).to(device).eval()
            model.load_state_dict(state_model)
            model.prune_heads({i: list(range(num_heads - keep)) for i in range(whole_model_layers)})
            def run(m, inp):
                return lambda: m(inp)

            (t_ref, t_pruned), (c_ref, c_pruned) = _best_times(
                [run(ref_attn, x), run(attn, x)], repeats, min_seconds, warmup, device)
            (m_ref, m_pruned), (mc_ref, mc_pruned) = _best_times(
                [run(ref_model, ids), run(model, ids)], repeats, min_seconds, warmup, device)
            f_ref = pruned_attention_flops(B, seq_len, d_model, num_heads, num_heads)
            f_kept = pruned_attention_flops(B, seq_len, d_model, num_heads, keep)
            mlp = 2 * 2 * B * seq_len * d_model * d_ff
            ideal_attn = f_ref / f_kept if f_kept else float("inf")
            ideal_model = (f_ref + mlp) / (f_kept + mlp)
            rows.append(dict(
                batch=B, heads=num_heads, kept=keep,
                attn_ref_s=t_ref, attn_s=t_pruned, attn_speedup=t_ref / t_pruned, attn_ideal=ideal_attn,
                attn_of_ideal=(t_ref / t_pruned) / ideal_attn, attn_cpu_speedup=c_ref / max(c_pruned, 1e-9),
                model_ref_s=m_ref, model_s=m_pruned, model_speedup=m_ref / m_pruned, model_ideal=ideal_model,
                model_of_ideal=(m_ref / m_pruned) / ideal_model, model_cpu_speedup=mc_ref / max(mc_pruned, 1e-9),
            ))
    return rows
