"""The HTML element of a live view (:func:`live_view`) and the notebook output that holds it (:class:`LiveView`)."""
from __future__ import annotations

import base64
import html
import json
import re
from typing import Any, Mapping, Optional

from .contract import _check_config, view_contract
from .values import _rounded
from .widget import _in_kernel, _widget_class

#: The kinds of live view that ``mha_lib/web/mha_live.mjs`` draws: the views of ``view_contract.json``, the one
#: list (a node test checks that ``mha_live.mjs``'s ``VIEWS`` names the same).
VIEWS = tuple(view_contract()["views"])

_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # a file stem under _static/models/


WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


class LiveView:
    """One live view; a notebook cell that returns it shows it.

    Its MIME bundle (``_repr_mimebundle_``) holds ``text/html`` (the element; the built book
    shows it) and, in a kernel with ``anywidget`` installed, the view of a ``LiveWidget``
    (Jupyter and Colab show that: the kernel computes the maps).

    Attributes:
        view: one of :data:`VIEWS`.
        model: the model id (a file stem under ``_static/models/``).
        config: the rounded, JSON-able configuration (a dict).
        html: the element, ``<div class="mha-live-view" ...>`` with the fallback inside.
        fallback_src: the fallback figure as a ``data:image/png;base64,...`` URL, or "".
        alt, caption: the fallback's alt text and the caption ("" when none).
    """

    def __init__(self, view: str, model: str, config: dict, html_text: str, *, fallback_src: str = "",
                 alt: str = "", caption: str = ""):
        self.view, self.model, self.config, self.html = view, model, config, html_text
        self.fallback_src, self.alt, self.caption = fallback_src, alt, caption
        self._widget = None

    def _repr_html_(self) -> str:
        return self.html

    def widget(self):
        """The ``LiveWidget`` of this view, made on the first call.

        Returns:
            the widget, or None when ``anywidget`` is not installed (the view is then HTML only).
        """
        if self._widget is None:
            cls = _widget_class()
            if cls is None:
                return None
            self._widget = cls(self)
        return self._widget

    def _repr_mimebundle_(self, include=None, exclude=None):
        """``text/plain``, ``text/html`` and, in a kernel with anywidget, the widget's view.

        Returns:
            ``{mime type: data}``, or ``(data, metadata)`` with the widget (anywidget's metadata:
            in Colab, its custom widget manager).
        """
        data = {"text/plain": repr(self), "text/html": self.html}
        widget = self.widget() if _in_kernel() else None
        if widget is None:
            return data
        bundle = widget._repr_mimebundle_()
        view_data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        data[WIDGET_VIEW_MIME] = view_data[WIDGET_VIEW_MIME]
        return data, metadata

    def __repr__(self) -> str:
        return f"LiveView(view={self.view!r}, model={self.model!r})"


def live_view(view: str, model: str, config: Mapping[str, Any], *, fallback: Any = None,
              alt: Optional[str] = None, caption: Optional[str] = None) -> LiveView:
    """Write the HTML element of a live view (see :mod:`mha_lib.live`).

    Args:
        view: ``"sentence"``, ``"toy-compare"``, ``"prune"``, ``"timing"``, ``"induction"``, ``"translate"``, ``"digit"``,
            ``"patterns"`` or ``"steps"`` (:data:`VIEWS`).
        model: the model id the view runs, e.g. ``"all-MiniLM-L6-v2"`` or ``"ch1-h1"`` (the first
            of a toy-compare's models): letters, digits, ``_ . -``.
        config: the view's configuration, from :func:`sentence_config`,
            :func:`toy_compare_config`, :func:`prune_config`, :func:`timing_config`, :func:`induction_config`,
            :func:`translation_config`, :func:`digit_config` or :func:`steps_config` (a dict of numbers, strings,
            lists and tensors; floats are rounded to 4 decimals).
        fallback: the static figure shown where the view cannot run: PNG bytes, or an object
            with ``to_png()`` (a :class:`mha_lib.viz.HeadsFigure`), or None.
        alt: the fallback's alt text; required with a fallback (default: the figure's
            ``alt_text`` when it has one).
        caption: optional text under the view.

    Returns:
        a :class:`LiveView`: ``text/html`` (``_repr_html_``), and in a kernel with anywidget also
        a ``LiveWidget`` view (``_repr_mimebundle_``), which the kernel computes.

    Raises:
        ValueError: an unknown ``view``; a ``model`` that is not a plain id, or not the view's
            (``"sentence"`` and ``"prune"`` run all-MiniLM-L6-v2; any other view's
            model must be one of ``config["models"]``); a ``config`` that is not a dict, holds NaN/inf, an
            integer beyond 2**53 - 1, a str with a lone surrogate or other objects, or lacks
            what the view draws (``mha_lib/web/view_contract.json``, which the page checks too: tokens
            and [layer][head][query][key] maps of one row per token, ...; the message names the
            key path); a ``fallback`` that is not PNG, or a fallback without alt text.
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    if not isinstance(model, str) or not _MODEL_ID.fullmatch(model):
        raise ValueError(f"model must be a model id (letters, digits, '_', '.', '-'), got {model!r}")
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict, got {type(config).__name__}")
    data = _rounded(dict(config), "config")
    _check_config(view, model, data)
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    figure = ""
    if fallback is not None:
        if alt is None:
            alt = getattr(fallback, "alt_text", None)
        png = fallback.to_png() if hasattr(fallback, "to_png") else fallback
        if not isinstance(png, (bytes, bytearray)) or not bytes(png[:8]) == b"\x89PNG\r\n\x1a\n":
            raise ValueError(f"fallback must be PNG bytes or have to_png(), got {type(fallback).__name__}")
        if not isinstance(alt, str) or not alt.strip():
            raise ValueError(f"a fallback figure needs alt text (alt=...), got {alt!r}")
        src = "data:image/png;base64," + base64.b64encode(bytes(png)).decode("ascii")
        figure = (f'<img class="mha-live-fallback" src="{src}" alt="{html.escape(alt, quote=True)}" '
                  'style="max-width:100%;height:auto">')
    elif alt is not None:
        raise ValueError("alt is given but there is no fallback figure")
    if caption is not None and not isinstance(caption, str):
        raise ValueError(f"caption must be a str, got {type(caption).__name__}")
    note = ('<p class="mha-live-noscript">This figure is live where JavaScript and WebAssembly SIMD run (the book\'s '
            "web pages in a recent Chrome, Edge, Firefox or Safari): your browser recomputes it. Here it shows what "
            "the notebook computed; run the cell in Jupyter, Colab or VS Code (with anywidget) and the kernel recomputes "
            "it.</p>")
    cap = f'<p class="mha-live-caption">{html.escape(caption)}</p>' if caption else ""
    markup = (f'<div class="mha-live-view" data-view="{view}" data-model="{model}" '
              f'data-config="{html.escape(payload, quote=True)}">{figure}{note}{cap}</div>')
    return LiveView(view, model, data, markup, fallback_src=src if fallback is not None else "",
                    alt=alt or "", caption=caption or "")
