"""mha_lib.notebook: the helpers the chapters share (glue, glue_html, sig)."""
from __future__ import annotations

import math

import pytest


def test_notebook_helpers():
    from mha_lib.notebook import glue, sig

    assert sig(0.123456) == 0.123 and sig(123456, 2) == 120000.0 and math.isnan(sig(float("nan")))
    with pytest.raises(ValueError, match="digits"):
        sig(1.0, 0)
    with pytest.raises(ValueError, match="sig needs a number"):
        sig("x")
    with pytest.raises(ValueError, match="glue name"):
        glue("", 1)




def test_glue_html_glues_the_html_alone(monkeypatch):
    import myst_nb

    from mha_lib.notebook import glue_html

    class View:  # like mha_lib.live.LiveView: HTML, and in a kernel a widget view beside it
        def _repr_html_(self):
            return "<div class='mha-live-view'></div>"

        def _repr_mimebundle_(self, include=None, exclude=None):
            return {"text/html": self._repr_html_(), "application/vnd.jupyter.widget-view+json": {"model_id": "x"}}

    calls = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: calls.append((name, value, display)))
    glue_html("live_x", View())
    (name, value, display), = calls
    assert name == "live_x" and display is False
    assert value._repr_html_() == "<div class='mha-live-view'></div>"
    assert not hasattr(value, "_repr_mimebundle_")  # an IPython HTML object: no widget view to store
    with pytest.raises(ValueError, match="_repr_html_"):
        glue_html("live_x", 3)
    with pytest.raises(ValueError, match="glue name"):
        glue_html("", View())
