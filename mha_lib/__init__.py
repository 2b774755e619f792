"""mha_lib: multi-head attention you can read, test and prune.

The library behind the book "Multi-Head Attention, Interactively". ``import mha_lib``
needs only torch and numpy. The submodules that need extras (``mha_lib.viz`` needs
matplotlib and ipywidgets; ``mha_lib.pretrained`` needs Hugging Face's tokenizers) are
imported lazily, on first attribute access, and name the pip extra to install when
something is missing.

Layers, from the ground up; a module imports only from its own layer or below
(``tests/test_layers.py`` checks it, and that no import cycle exists):

1. ground: ``checks`` (the one argument policy), ``_runtime`` (seeding, device), ``stats``
   (intervals for success rates over seeds), ``_deprecated`` (the one table of old names);
2. ``core/``: attention itself: ``functional`` (``attention``), ``masks``, ``kv_cache``,
   ``multi_head`` (``MultiHeadAttention``); ``mha_lib.attention`` is the function (the module
   of that name, which re-exported the core, is deprecated since 0.3.0: import from ``core``);
3. ``model/``: ``EncoderConfig``, the one ``TransformerBlock``, ``Encoder``, ``TokenClassifier``,
   ``EncoderDecoder``, the head grid, tied heads, saving and the one loading path;
4. ``tasks/`` (synthetic tasks, the loss/accuracy pair, the shipped trained models) and
   ``pretrained`` (BERT-family checkpoints as an mha_lib encoder);
5. ``train``: the training loop, seeding and the checkpoint cache;
6. ``analysis/`` (reading heads) and ``cost`` (parameter, FLOP and memory formulas);
7. ``measure/``: timing, peak memory and machine speed, to check the formulas;
8. ``pruning/``: head importance, schedules, Hard-Concrete gates;
9. the book-facing modules: ``viz`` (heatmaps, the attention explorer, the bertviz adapter),
   ``live`` (the book's live views), ``export`` (ONNX files, extra ``export``), ``notebook``
   (glue, sig).
"""
from __future__ import annotations

import importlib
import sys
import types

__version__ = "0.3.0"

from ._runtime import default_device, set_seed  # noqa: E402

# Eager, and needs only torch. ``mha_lib.attention`` is the *function* (the contract's
# functional form); the deprecated module of that name rebinds it when imported (see attention.py).
from .core import MultiHeadAttention, attention  # noqa: E402



class _Package(types.ModuleType):
    """The package's module type: importing the deprecated module ``mha_lib.attention`` makes the
    import system set the package attribute ``attention`` to that module; the name stays the
    function's (one meaning)."""

    def __setattr__(self, name, value):
        if name == "attention" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

_SUBMODULES = ("checks", "core", "model", "tasks", "train", "pruning", "cost", "measure", "pretrained", "viz",
               "analysis", "stats", "notebook", "export", "live")
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
