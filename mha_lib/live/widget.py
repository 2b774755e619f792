"""The anywidget ``LiveWidget``, made on first use (``anywidget`` is optional: the ``viz`` extra)."""
from __future__ import annotations

import functools

from .esm import widget_esm
from .kernel import KernelRunner


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (Jupyter, Colab, VS Code, nbclient): a widget can be shown."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


@functools.lru_cache(maxsize=1)
def _widget_class():
    """``LiveWidget``, defined on first use; None when ``anywidget`` is not installed."""
    try:
        import anywidget
        import traitlets
    except ImportError:
        return None

    class LiveWidget(anywidget.AnyWidget):
        """A live view in a kernel: ``mha_live.mjs`` draws it, the kernel computes it (mha_lib).

        Made by :meth:`LiveView.widget` (a cell shows it through :func:`live_view`'s output).
        The traits carry what the HTML element carries; run messages from the view are answered
        by :attr:`runner` (a :class:`KernelRunner`): results as binary float32 buffers, failures
        as an error message that the view shows -- a bad message never raises in the kernel.
        """

        _esm = widget_esm()
        live_view = traitlets.Unicode().tag(sync=True)
        live_model = traitlets.Unicode().tag(sync=True)
        live_config = traitlets.Dict().tag(sync=True)
        live_fallback = traitlets.Unicode().tag(sync=True)  # data:image/png;base64,... or ""
        live_alt = traitlets.Unicode().tag(sync=True)
        live_caption = traitlets.Unicode().tag(sync=True)

        def __init__(self, view):  # a LiveView (element.py, which imports this module)
            super().__init__(live_view=view.view, live_model=view.model, live_config=view.config,
                             live_fallback=view.fallback_src, live_alt=view.alt, live_caption=view.caption)
            self.runner = KernelRunner(view.view, view.model, view.config)
            self.on_msg(self._answer)

        def _answer(self, _widget, content, buffers) -> None:
            reply, out = self.runner.answer(content)
            self.send(reply, out)

        def __repr__(self) -> str:
            return f"LiveWidget(view={self.live_view!r}, model={self.live_model!r})"

    LiveWidget.__module__, LiveWidget.__qualname__ = __package__, "LiveWidget"  # its path: mha_lib.live.LiveWidget
    return LiveWidget
