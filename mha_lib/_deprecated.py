"""Every deprecated name of mha_lib, in ONE table, and the one function that resolves them.

A module keeps an old name working with two lines at its end::

    def __getattr__(name: str):
        return _deprecated.resolve(__name__, name)

Accessing ``module.old_name`` then warns (DeprecationWarning, pointing at the caller) and returns
the new object, imported at that moment by name (``importlib``), so that no module imports a
higher layer to keep an alias. Removed in 0.3.0: the 13 ``mha_lib.cost`` names of the
measurements that moved to :mod:`mha_lib.measure` in 0.2.0 (``cost.measure_time`` etc.).
"""
from __future__ import annotations

import importlib
import warnings
from typing import Dict, Tuple

# (old module, old name) -> (new module, new name, warning)
_MOVED_TO_ANALYSIS = ("attention_confidence", "positional_offsets", "head_attention_stats", "HeadStats")
DEPRECATED: Dict[Tuple[str, str], Tuple[str, str, str]] = {
    # 0.2.0: Voita et al.'s head statistics live with the other head statistics
    **{("mha_lib.pruning", name): ("mha_lib.analysis", name,
                                   f"mha_lib.pruning.{name} moved to mha_lib.analysis.{name} in 0.2.0")
       for name in _MOVED_TO_ANALYSIS},
    # 0.2.0: one loss/accuracy pair for every token classifier
    ("mha_lib.pruning", "token_classification_loss"): (
        "mha_lib.tasks", "per_example_loss",
        "mha_lib.pruning.token_classification_loss is deprecated: use mha_lib.tasks.per_example_loss"),
    ("mha_lib.pruning", "token_accuracy"): (
        "mha_lib.tasks", "accuracy", "mha_lib.pruning.token_accuracy is deprecated: use mha_lib.tasks.accuracy"),
    # 0.2.0: analysis.relation_shares is the token-string one
    ("mha_lib.tasks", "relation_shares"): (
        "mha_lib.tasks", "target_shares",
        "mha_lib.tasks.relation_shares is deprecated: use mha_lib.tasks.target_shares"),
}


def resolve(module: str, name: str):
    """The object that ``module.name`` (a deprecated name) now is, with a DeprecationWarning.

    Raises:
        AttributeError: ``name`` is not a deprecated name of ``module`` (the usual message).
    """
    if (module, name) not in DEPRECATED:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new_module, new_name, message = DEPRECATED[module, name]
    warnings.warn(message, DeprecationWarning, stacklevel=3)  # 3: past resolve and the module's __getattr__
    return getattr(importlib.import_module(new_module), new_name)
