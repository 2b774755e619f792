"""The ``viz`` extra (matplotlib, ipywidgets, Pillow), imported once for every file of :mod:`mha_lib.viz`.

Missing, it raises an ImportError that names the pip extra to install. bertviz is not part of it:
it brings transformers (and with it an AWS SDK and sentencepiece), so it has its own extra,
``bertviz``, imported only by :func:`mha_lib.viz.bertviz_view` when it is called.
"""
from __future__ import annotations

_EXTRA_HINT = 'pip install "mha_lib[viz]"'
_BERTVIZ_HINT = 'pip install "mha_lib[bertviz]"'

try:
    import ipywidgets as widgets
    import matplotlib
    from matplotlib.figure import Figure
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageFont
except ImportError as err:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        f"mha_lib.viz needs {getattr(err, 'name', None) or 'matplotlib, ipywidgets and Pillow'!s}: "
        f"{_EXTRA_HINT}"
    ) from err

__all__ = ["widgets", "matplotlib", "Figure", "PILImage", "ImageDraw", "ImageFont"]
