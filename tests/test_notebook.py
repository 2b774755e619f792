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


def test_table_shows_html_and_aligned_text():
    from mha_lib.notebook import table

    t = table([["MHA", 8, 0.123456, True], ["MQA <b>", 1, float("nan"), None]], ["kind", "H_kv", "time", "ok"],
              caption="one & two")
    text = repr(t).splitlines()
    assert text[0] == "one & two"
    assert text[1].split() == ["kind", "H_kv", "time", "ok"]
    assert text[3].split() == ["MHA", "8", "0.123", "yes"] and text[4].split() == ["MQA", "<b>", "1", "nan"]
    assert text[3].index("8") == text[4].index("1")  # numbers right-aligned in their column
    page = t._repr_html_()
    assert page.startswith('<table class="mha-table"><caption>one &amp; two</caption>')
    assert "MQA &lt;b&gt;" in page and "<b>" not in page  # escaped: no text becomes HTML
    assert '<td class="mha-num">0.123</td>' in page and "<td>yes</td>" in page  # bools are no numbers
    assert t.numeric == (False, True, True, False)
    counts = table([["1,024", 1050624, "0.92"], ["12%", 3, "-1.5e-07"], ["[0.1, 0.2]", 4, ""]], ["a", "b", "c"])
    assert counts.rows[0][1] == "1,050,624" and counts.numeric == (False, True, True)
    units = table([["4.5 MiB", "1.92x", "5 of 5"], ["512 B", "100%", "all"]], ["a", "b", "c"])
    assert units.numeric == (True, True, False)
    page = units._repr_html_()
    assert '<td class="mha-num">4.5 MiB</td>' in page and '<td class="mha-nowrap">5 of 5</td>' in page
    assert "<td>all</td>" in page  # words may wrap


@pytest.mark.parametrize("rows, columns, kwargs, match", [
    ([[1, 2]], [], {}, "columns"),
    ([[1, 2]], "ab", {}, "columns"),
    ([[1, 2]], ["a", ""], {}, "column name"),
    ([[1]], ["a", "b"], {}, r"row 0 must have 2 cells"),
    ("ab", ["a", "b"], {}, "rows"),
    ([[1, object()]], ["a", "b"], {}, r"\[0\]\['b'\]"),
    ([[1, 2]], ["a", "b"], {"caption": 3}, "caption"),
    ([[1, 2]], ["a", "b"], {"digits": 0}, "digits"),
])
def test_table_refuses_bad_input(rows, columns, kwargs, match):
    from mha_lib.notebook import table

    with pytest.raises(ValueError, match=match):
        table(rows, columns, **kwargs)


def test_figure_pair_gives_the_phone_its_own_rendering():
    import base64

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mha_lib.notebook import figure_pair

    wide, _ = plt.subplots(1, 3, figsize=(9, 3))
    narrow, _ = plt.subplots(3, 1, figsize=(4, 8))
    pair = figure_pair(wide, narrow, alt='three panels "a" <b>')
    assert plt.get_fignums() == []  # both closed: the inline backend shows neither again
    page = pair._repr_html_()
    assert page.startswith('<picture class="mha-figure-pair"><source media="(max-width: 600px)" srcset="data:image/png;base64,')
    assert 'alt="three panels &quot;a&quot; &lt;b&gt;"' in page
    narrow_src = page.split('srcset="')[1].split('"')[0]
    assert base64.b64decode(narrow_src.split(",")[1]) == pair.narrow and pair._repr_png_() == pair.wide
    width = lambda png: int.from_bytes(png[16:20], "big")  # noqa: E731 - the PNG header's width
    assert width(pair.wide) > width(pair.narrow)
    assert repr(pair) == "<FigurePair: a wide and a narrow rendering>"
    with pytest.raises(ValueError, match="alt"):
        figure_pair(pair.wide, pair.narrow, alt=" ")
    with pytest.raises(ValueError, match="narrow must be a matplotlib figure"):
        figure_pair(pair.wide, "x.png", alt="a")
    with pytest.raises(ValueError, match="wide is not a PNG"):
        figure_pair(b"GIF89a", pair.narrow, alt="a")
    with pytest.raises(ValueError, match="breakpoint"):
        figure_pair(pair.wide, pair.narrow, alt="a", breakpoint=0)


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
