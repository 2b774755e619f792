"""mha_lib.checks: the one argument policy (here: its tensor checks of attention weights and padding masks)."""
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


def test_padding_mask_is_one_rule_for_every_reader_of_padding():
    ok = torch.tensor([[False, True]])
    assert checks.padding_mask(ok, (1, 2)) is ok
    for bad in (ok.float(), ok[0], [[False, True]], None):
        with pytest.raises(ValueError, match=r"key_padding_mask must be a bool tensor of shape \(B, S\) = \(1, 2\)"):
            checks.padding_mask(bad, (1, 2))
    with pytest.raises(ValueError, match=r"mask must be a bool tensor of shape \(B, L\) = \(1, 3\)"):
        checks.padding_mask(ok, (1, 3), name="mask", axes="B, L")


def test_attention_rows_refuses_what_is_not_one_layer_of_weights():
    w = torch.tensor([[[[1.0, 0.0], [0.5, 0.5]]]])  # (1, 1, 2, 2)
    assert torch.equal(checks.attention_rows(w), w)
    with pytest.raises(ValueError, match=r"must be one layer's \(B, H, L, L\) tensor"):
        checks.attention_rows(w[0])
    with pytest.raises(ValueError, match="rows must be >= 0 and sum to 1"):
        checks.attention_rows(w * 2)
    with pytest.raises(ValueError, match="NaN or infinite"):
        checks.attention_rows(w.masked_fill(w == 0, float("nan")))
