"""The 8-bit single file (:func:`quantize_for_web`): MatMulNBits weights, int8 token tables."""
from __future__ import annotations

import logging
import os
from typing import Tuple, Union

import numpy as np

from .. import checks
from .common import (METADATA_PREFIX, _checked_onnx_output, _checked_path, _logging_level, _quiet, _refuse_non_finite,
                     _replacing, _require)

#: The ``block_size`` values :func:`quantize_for_web` takes: onnxruntime's blockwise quantiser
#: (``MlasQuantizeBlockwise``) supports only these; 512 and up stop it with an assertion
#: (measured with onnxruntime 1.32 on the toy and MiniLM files, whose matrices are 64 to 1536 rows).
QUANT_BLOCK_SIZES: Tuple[int, ...] = (16, 32, 64, 128, 256)


def quantize_for_web(src: Union[str, os.PathLike], dst: Union[str, os.PathLike], *, block_size: int = 32,
                     min_table_elements: int = 1 << 16) -> dict:
    """Weight-only 8-bit copy of an exported file, in one file, for onnxruntime-web's WebAssembly backend.

    The smallest single file, for when its size matters more than exact weights; the book serves
    :func:`split_for_web`'s float16 copy instead, whose attention weights stay within 0.002.

    * Every ``MatMul`` whose second input is a weight initializer becomes onnxruntime's
      ``com.microsoft.MatMulNBits`` with ``bits=8``: symmetric int8 blocks of ``block_size``
      weights along the input dimension, one float32 scale per block
      (``onnxruntime.quantization.matmul_nbits_quantizer``). Activations stay float32; the
      attention products (Q K^T, weights V) are not weights and stay float32 ``MatMul``.
    * Every ``Gather`` (axis 0) from a float32 2-D table of at least ``min_table_elements`` values
      (the token embedding) reads an int8 table instead: each row is rotated by a block-diagonal
      Hadamard matrix R, then stored as int8 with one scale per row (see ``_int8_tables``), and the
      graph computes ``(Cast(Gather(q, ids)) * Gather(scale, ids)) R^T``. Smaller tables
      (positions, token types) stay float32.

    What it costs on all-MiniLM-L6-v2 (90.3 MB -> 24.8 MB), measured with :func:`compare_on_sentences`
    on :data:`CHECK_SENTENCES` at real positions: attention weights move by at most 0.026 (99.9% of them
    by less than 0.007), sentence embeddings keep cosine >= 0.9994. The weight matrices cause most of
    it: a sharp head turns a small change of its scores into a large one of its weights when two keys
    nearly tie, and one 8-bit matrix alone already moves some weight by up to 0.016. Within 0.01 would
    take about 10 bits a value for the table and for the matrices, at least 27.9 MB in one file
    (measured with a simulation of these roundings on 36 + 64 + 128 texts). Plain dynamic int8
    quantisation (activations too) moved attention weights by up to 0.34.

    Args:
        src: an ``.onnx`` file written by :func:`export_onnx`.
        dst: where to write the quantised file (may equal ``src``), replaced only once the new one
            is complete and checked; its name must end in ``.onnx`` (any case; other extensions
            would make onnx save a text format, so they are refused).
        block_size: weights per quantisation block: one of :data:`QUANT_BLOCK_SIZES` (16, 32, 64,
            128, 256), the sizes onnxruntime's quantiser (MLAS) takes; it asserts on others.
        min_table_elements: smallest embedding table (rows x columns) stored as int8, >= 1.

    Returns:
        a dict with ``bytes`` (the file size), ``matmuls`` (weight MatMuls quantised),
        ``tables`` (int8 tables) and ``block_size``.

    Raises:
        ValueError: ``src`` missing or not an ONNX file, ``dst`` a folder, in a missing one or not
            ending in ``.onnx``, a
            bad ``block_size`` or ``min_table_elements``; a file with no weight MatMul to
            quantise, or one already quantised (``MatMulNBits`` nodes or the ``mha_lib.quantized``
            mark: quantising again would only lose precision); a weight initializer holding NaN
            or infinite values (named, with their count); a dst that cannot be written (dst is
            left as it was).
        ImportError: onnx or onnxruntime missing (names ``pip install "mha_lib[export]"``).
    """
    src = _checked_path(src, "src", must_exist=True)
    dst = _checked_onnx_output(dst, "dst")
    block_size = checks.positive_int(block_size, "block_size")
    if block_size not in QUANT_BLOCK_SIZES:
        raise ValueError(f"block_size={block_size} is not one onnxruntime's 8-bit quantiser takes: "
                         f"{', '.join(map(str, QUANT_BLOCK_SIZES))}")
    min_table_elements = checks.positive_int(min_table_elements, "min_table_elements")
    onnx = _require("onnx")
    _require("onnxruntime")
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        nbits = _require("onnxruntime.quantization.matmul_nbits_quantizer")
    finally:  # its import calls logging.basicConfig(level=INFO), which would print every library's INFO lines
        root.handlers[:], root.level = handlers, level

    try:
        model = onnx.load(src)
    except Exception as err:  # protobuf's DecodeError, or a truncated file
        raise ValueError(f"src={src!r} is not an ONNX model ({type(err).__name__}: {err})") from None
    meta = {p.key: p.value for p in model.metadata_props}
    if METADATA_PREFIX + "quantized" in meta or any(n.op_type == "MatMulNBits" for n in model.graph.node):
        raise ValueError(f"src={src!r} is already quantised (MatMulNBits): quantise the float32 file from "
                         "export_onnx instead")
    if METADATA_PREFIX + "web" in meta:
        raise ValueError(f"src={src!r} is already {meta[METADATA_PREFIX + 'web']!r}: quantise the float32 file from "
                         "export_onnx instead")
    _refuse_non_finite(model, src)
    weights = {t.name for t in model.graph.initializer}
    matmuls = sum(n.op_type == "MatMul" and n.input[1] in weights for n in model.graph.node)
    if not matmuls:
        raise ValueError(f"src={src!r} has no MatMul with a weight initializer to quantise")
    quantizer = nbits.MatMulNBitsQuantizer(model, bits=8, block_size=block_size, is_symmetric=True,
                                           op_types_to_quantize=("MatMul",))
    with _quiet(), _logging_level("onnxruntime", logging.WARNING):
        quantizer.process()
    model = quantizer.model.model
    tables = _int8_tables(model, min_table_elements)
    meta[METADATA_PREFIX + "quantized"] = f"MatMulNBits bits=8 block_size={block_size}; int8 tables: {tables}"
    del model.metadata_props[:]
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    with _replacing(dst) as staged:  # dst (maybe src) is replaced only by a complete, checked file
        onnx.save(model, staged)
        onnx.checker.check_model(staged)
    return {"bytes": os.path.getsize(dst), "matmuls": matmuls, "tables": tables, "block_size": block_size}


def _hadamard(n: int) -> np.ndarray:
    """The n x n Sylvester-Hadamard matrix over sqrt(n) (n a power of two): orthogonal and symmetric."""
    H = np.ones((1, 1))
    while H.shape[0] < n:
        H = np.block([[H, H], [H, -H]])
    return (H / np.sqrt(n)).astype(np.float32)


def _rotation_block(d: int) -> int:
    """The largest power of two <= 128 that divides d, or 0 when it is below 16 (no rotation)."""
    block = 128
    while block >= 16 and d % block:
        block //= 2
    return block if block >= 16 else 0


def _int8_tables(model, min_elements: int) -> int:
    """Replace each large float32 Gather table by an int8 table with one scale per row (in place).

    Each row is first rotated by a block-diagonal Hadamard matrix R (blocks of 128 columns for
    d = 384), as in incoherence processing (Chee et al. 2023, QuIP; Ashkboos et al. 2024, QuaRot):
    a few outlier columns no longer set every row's scale. Stored: q = round(E R / s) with
    s_v = max_j |(E R)[v, j]| / 127; the graph computes ``(Cast(Gather(q)) * Gather(s)) R^T``, with
    R^T = R applied block by block (a (128, 128) MatMul). For MiniLM this cuts the largest attention
    change the table causes from 0.049 (plain per-row int8) to 0.013.
    """
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    done = {}  # table name -> (int8 name, scale name, rotation name or None, d, block)
    new_nodes, count = [], 0
    for node in graph.node:
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
        table = inits.get(node.input[0]) if node.op_type == "Gather" and node.domain in ("", "ai.onnx") else None
        if table is None or axis != 0 or table.data_type != TensorProto.FLOAT or len(table.dims) != 2 \
                or int(np.prod(table.dims)) < min_elements:
            new_nodes.append(node)
            continue
        if table.name not in done:
            E = numpy_helper.to_array(table).astype(np.float32)  # (V, d)
            V, d = E.shape
            block = _rotation_block(d)
            if block:
                E = (E.reshape(V, d // block, block) @ _hadamard(block)).reshape(V, d)  # E R, block by block
            scale = np.abs(E).max(axis=1, keepdims=True) / 127.0  # (V, 1), one per row
            scale = np.where(scale > 0, scale, 1.0).astype(np.float32)  # an all-zero row: any scale
            q = np.clip(np.rint(E / scale), -127, 127).astype(np.int8)  # (V, d)
            names = (f"{table.name}_int8", f"{table.name}_row_scale", f"{table.name}_hadamard{block}")
            graph.initializer.extend([numpy_helper.from_array(q, names[0]), numpy_helper.from_array(scale, names[1])])
            if block:
                graph.initializer.append(numpy_helper.from_array(_hadamard(block), names[2]))
                graph.initializer.append(numpy_helper.from_array(np.array([d // block, block], np.int64),
                                                                 f"{table.name}_blocks"))
                graph.initializer.append(numpy_helper.from_array(np.array([d], np.int64), f"{table.name}_width"))
            done[table.name] = (*names, block)
            count += 1
        q_name, s_name, r_name, block = done[table.name]
        ids, out, tag = node.input[1], node.output[0], node.output[0]
        rows = out if not block else f"{tag}_rotated"
        new_nodes += [
            helper.make_node("Gather", [q_name, ids], [f"{tag}_q"], axis=0),  # (..., d) int8
            helper.make_node("Cast", [f"{tag}_q"], [f"{tag}_f"], to=TensorProto.FLOAT),
            helper.make_node("Gather", [s_name, ids], [f"{tag}_s"], axis=0),  # (..., 1)
            helper.make_node("Mul", [f"{tag}_f", f"{tag}_s"], [rows]),  # (..., d) float32: rows of E R
        ]
        if block:  # undo the rotation: (..., d) -> (..., d/block, block) @ R -> (..., d)
            new_nodes += [
                helper.make_node("Shape", [ids], [f"{tag}_ids_shape"]),
                helper.make_node("Concat", [f"{tag}_ids_shape", f"{table.name}_blocks"], [f"{tag}_split"], axis=0),
                helper.make_node("Concat", [f"{tag}_ids_shape", f"{table.name}_width"], [f"{tag}_merged"], axis=0),
                helper.make_node("Reshape", [rows, f"{tag}_split"], [f"{tag}_blocked"]),
                helper.make_node("MatMul", [f"{tag}_blocked", r_name], [f"{tag}_unrotated"]),
                helper.make_node("Reshape", [f"{tag}_unrotated", f"{tag}_merged"], [out]),
            ]
    if count:
        del graph.node[:]
        graph.node.extend(new_nodes)
        used = {i for n in graph.node for i in n.input}
        keep = [t for t in graph.initializer if t.name in used]
        del graph.initializer[:]
        graph.initializer.extend(keep)
    return count
