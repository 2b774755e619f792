"""mha_lib: multi-head attention you can read, test and prune.

The library behind the book "Multi-Head Attention, Interactively". ``import mha_lib``
needs only torch and numpy. The submodules that need extras (``mha_lib.viz`` needs
matplotlib and ipywidgets; ``mha_lib.pretrained`` needs transformers' tokenizers) are
imported lazily, on first attribute access, and name the pip extra to install when
something is missing.

Modules, in the order data flows through them:

* ``checks``: the one argument-checking policy every public function uses;
* ``attention``: scaled dot-product attention, ``MultiHeadAttention`` and its KV cache;
* ``model``: one configurable Transformer block and the encoders built from it;
* ``tasks``: synthetic tasks, and the trained toy models shipped with the package;
* ``train``: the training loop, seeding and device choice;
* ``pruning``: head importance scores and pruning schedules;
* ``cost``: parameter, FLOP and memory formulas;
* ``measure``: timing, peak memory and machine speed, to check the formulas;
* ``pretrained``: BERT-family checkpoints as an mha_lib encoder;
* ``analysis``: reading heads (relation shares, tied heads, norm-based maps, circuits, rollout,
  Voita et al.'s statistics);
* ``stats``: intervals for success rates over seeds;
* ``viz``: per-head heatmaps, the attention explorer widget, the bertviz adapter;
* ``export``: ONNX files of the encoders for onnxruntime and the book's live views (extra ``export``);
* ``live``: the HTML of the book's live views (maps the reader's browser recomputes) and their data;
* ``notebook``: small helpers the chapters share (glue, sig).
"""
from __future__ import annotations

import importlib

__version__ = "0.2.0"

from ._runtime import default_device, set_seed  # noqa: E402

# Eager, and needs only torch: importing the submodule first and then binding the names
# keeps ``mha_lib.attention`` the *function* (the contract's functional form), whatever
# other submodule is imported later.
from .attention import MultiHeadAttention, attention  # noqa: E402

_SUBMODULES = ("checks", "attention", "model", "tasks", "train", "pruning", "cost", "measure", "pretrained", "viz", "analysis", "stats", "notebook",
               "export", "live")
# Public names re-exported at the top level, resolved lazily from their module.
_EXPORTS = {
    "head_importance": "pruning",
    "load_bert": "pretrained",
    "load_trained": "tasks",
}

# Names only: listing the submodules here would make ``from mha_lib import *`` import the
# ones that need extras (viz, pretrained). Submodules stay reachable as ``mha_lib.viz`` etc.
__all__ = ["__version__", "default_device", "set_seed", "MultiHeadAttention", "attention", *_EXPORTS]


def __getattr__(name: str):
    # PEP 562 lazy attributes: submodules and re-exported names load on first use, so
    # ``import mha_lib`` stays cheap and needs only torch and numpy.
    if name in _EXPORTS:
        module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
        value = getattr(module, name)
        if name != _EXPORTS[name]:
            globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'mha_lib' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
