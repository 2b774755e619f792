"""The ``"timing"`` view's numbers (chapter 3): :func:`timing_config`, the book machine's time of
:func:`mha_lib.attention <mha_lib.core.attention>` at equal FLOPs for every head count, which the page sets beside the time the
reader's own browser measures (``attention-core.onnx``, :func:`mha_lib.export.export_attention_core`)."""
from __future__ import annotations

from typing import Any, Dict, Sequence

import torch

from .. import checks
from ..core.functional import attention
from ..measure import compare_times, environment_string

#: The site's file of the attention function alone (every size free).
ATTENTION_CORE = "attention-core"


@torch.inference_mode()
def timing_config(heads: Sequence[int] = (1, 2, 4, 8, 16, 32, 64), *, d_model: int = 512, seq_len: int = 128,
                  batch: int = 8, repeats: int = 5) -> Dict[str, Any]:
    """The initial state of a ``"timing"`` view: this machine's seconds per call of the explicit path.

    For each H, :func:`mha_lib.attention <mha_lib.core.attention>` on random q, k, v of shape (batch, H, seq_len,
    d_model / H): the same FLOPs (4 batch seq_len^2 d_model) for every H, the (batch, H, L, L)
    weights made on the way. Timed round-robin (:func:`mha_lib.measure.compare_times`), on the
    CPU with the threads torch has (the book's chapter sets one). Not deterministic: a measurement.

    Args:
        heads: the head counts, each dividing ``d_model``, ascending, at least two, the first the
            reference of the ratios.
        d_model, seq_len, batch: the layer's width, the sequence length L (= S), the batch B;
            ``batch * H_max * seq_len**2 * 4`` bytes of weights must stay below 256 MiB (a phone
            runs the same shapes).
        repeats: rounds of the round-robin (>= 1).

    Returns:
        a dict with ``models`` (``["attention-core"]``), ``heads``, ``d_model``, ``seq_len``,
        ``batch``, ``repeats``, ``flops`` (matmul FLOPs per call), ``book_ms`` (median milliseconds
        per call, one per H: a config keeps 4 decimals, so milliseconds keep sub-microsecond detail) and
        ``book_machine`` (:func:`mha_lib.measure.environment_string`).

    Raises:
        ValueError: a head count that does not divide d_model, fewer than two or unsorted heads,
            shapes whose weights pass 256 MiB, or a bad size (naming the value).
    """
    d = checks.positive_int(d_model, "d_model")
    L = checks.positive_int(seq_len, "seq_len")
    B = checks.positive_int(batch, "batch")
    repeats = checks.positive_int(repeats, "repeats")
    heads = [checks.positive_int(h, "heads") for h in heads]
    if len(heads) < 2 or heads != sorted(set(heads)):
        raise ValueError(f"heads must be at least two distinct head counts, ascending, got {heads}")
    wrong = [h for h in heads if d % h]
    if wrong:
        raise ValueError(f"heads {wrong} do not divide d_model={d}")
    biggest = B * heads[-1] * L * L * 4
    if biggest > 256 * 2**20:
        raise ValueError(f"batch={B}, H={heads[-1]}, seq_len={L} make {biggest / 2**20:.0f} MiB of weights; "
                         "keep them below 256 MiB (a reader's phone runs the same shapes)")
    g = torch.Generator().manual_seed(0)
    inputs = {h: [torch.randn(B, h, L, d // h, generator=g) for _ in range(3)] for h in heads}
    seconds = compare_times({h: (lambda x=inputs[h]: attention(*x)) for h in heads}, repeats=repeats, warmup=1)
    return {"models": [ATTENTION_CORE], "heads": heads, "d_model": d, "seq_len": L, "batch": B, "repeats": repeats,
            "flops": 4 * B * L * L * d, "book_ms": [1e3 * seconds[h] for h in heads],
            "book_machine": environment_string()}
