"""mha_lib.checks: the one argument policy (here: its tensor check for attention weights)."""
import pytest
import torch

from mha_lib import checks


def test_attention_weights_returns_good_weights_unchanged():
    w = torch.softmax(torch.randn(2, 3, 4, 4), -1)
    assert checks.attention_weights(w) is w
    assert checks.attention_weights(w[None], dims=5) is not None


@pytest.mark.parametrize("value, dims, match", [
    ([[0.5, 0.5]], 4, "must be a tensor"),
    (torch.rand(2, 4, 4), 4, r"4 dimensions, got shape \(2, 4, 4\)"),
    (torch.ones(1, 1, 2, 2, dtype=torch.int64), 4, "floating point.*int64"),
    (torch.tensor([[[[0.5, float("nan")]]]]), 4, "1 NaN or infinite value"),
    (torch.tensor([[[[float("inf"), float("-inf")]]]]), 4, "2 NaN or infinite value"),
    (torch.tensor([[[[1.5, -0.5]]]]), 4, r"1 negative value\(s\) \(min -0.5\)"),
])
def test_attention_weights_names_what_is_wrong(value, dims, match):
    with pytest.raises(ValueError, match=match):
        checks.attention_weights(value, dims=dims)
