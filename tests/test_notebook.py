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


def test_glue_text_glues_the_english_and_the_chinese_under_two_keys(monkeypatch):
    import myst_nb

    from mha_lib import prose
    from mha_lib.notebook import ZH_SUFFIX, glue_text

    calls = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: calls.append((name, value, display)))
    glue_text("abl_vs_imp", *prose.paired_verdicts("importance", {0.4: 0, 0.6: 1}, 16))
    assert calls == [("abl_vs_imp", "not distinguishable from importance with 16 seeds at 40%, and better than it "
                      "at 60%", False),
                     ("abl_vs_imp" + ZH_SUFFIX, "在 40% 时与重要性分不出高下（16 个种子不足以区分），而在 60% 时优于重要性",
                      False)]
    for bad in (("", "a", "一"), ("k", "", "一"), ("k", "a", " "), ("k", "a", None)):
        with pytest.raises(ValueError, match="glue"):
            glue_text(*bad)
