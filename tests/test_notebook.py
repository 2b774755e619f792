"""mha_lib.notebook: the helpers the chapters share (glue, sig)."""
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


