"""Tests for chapter 7's pieces: the digits task, pooled classifiers, rollout and offset kernels."""
import re
import pytest
import torch

from mha_lib.analysis import attention_rollout, offset_kernels
from mha_lib.model import EncoderConfig, TokenClassifier
from mha_lib.tasks import DigitsTask, accuracy, per_example_loss, task_from_dict


@pytest.mark.slow
def test_digits_split_is_fixed_and_disjoint():
    task = DigitsTask()
    train_x, train_y = task.images("train")
    test_x, test_y = task.images("test")
    assert train_x.shape == (1437, 8, 8) and test_x.shape == (360, 8, 8)
    assert float(train_x.min()) >= 0 and float(train_x.max()) <= 1
    assert set(test_y.tolist()) == set(range(10))
    flat_train = {tuple(x.flatten().tolist()) for x in train_x}
    overlap = sum(tuple(x.flatten().tolist()) in flat_train for x in test_x)
    assert overlap <= 2  # the split is by image; sklearn's set holds a few pixel-identical duplicates at most
    again = DigitsTask().images("test")[0]
    assert torch.equal(again, test_x)
    batch = task.sample(16, torch.Generator().manual_seed(0))
    assert batch.input_ids.shape == (16, 64, 1) and batch.labels.shape == (16,)
    full = task.dataset(2048, seed=1)
    assert full.input_ids.shape[0] == 360  # the whole test split, in a seeded order
    assert task_from_dict(task.to_dict()) == task
    assert DigitsTask(patch_size=2).sample(3).input_ids.shape == (3, 16, 4)
    with pytest.raises(ValueError, match="patch_size=3"):
        DigitsTask(patch_size=3)
    with pytest.raises(ValueError, match="split"):
        task.images("val")


def _tiny_vit():
    """A one-layer ViT over the 64 one-pixel patches of a digit, [CLS] readout, seed 0."""
    cfg = EncoderConfig(vocab_size=0, patch_dim=1, cls_token=True, d_model=16, num_heads=2, num_layers=1, d_ff=32,
                        max_len=65, positional="learned", pad_token_id=None)
    torch.manual_seed(0)
    return TokenClassifier(cfg, 10, pooling="cls").eval()


def test_pooled_classifier_loss_and_accuracy():
    task = DigitsTask()
    model = _tiny_vit()
    batch = task.dataset(32, seed=0)
    loss = per_example_loss(model, batch)
    assert loss.shape == (32,) and bool(torch.isfinite(loss).all())
    logits = model(batch.input_ids).logits
    expected = (logits.argmax(-1) == batch.labels).float().mean()
    assert accuracy(model, batch) == pytest.approx(float(expected))


def _maps(L, target_of):
    w = torch.zeros(1, 1, L, L)
    for i in range(L):
        w[0, 0, i, target_of(i)] = 1.0
    return w


def test_rollout_of_self_attention_is_identity_and_one_layer_is_half_mixed():
    L = 5
    own = _maps(L, lambda i: i)
    torch.testing.assert_close(attention_rollout([own, own]), torch.eye(L)[None])
    first = _maps(L, lambda i: 0)
    one = attention_rollout([first])
    torch.testing.assert_close(one, 0.5 * first[:, 0] + 0.5 * torch.eye(L))
    two = attention_rollout([first, first])
    torch.testing.assert_close(two.sum(-1), torch.ones(1, L))
    assert float(two[0, 3, 0]) == pytest.approx(0.75)  # 1/2 directly + 1/2 * 1/2 through itself
    with pytest.raises(ValueError, match="non-empty"):
        attention_rollout([])
    with pytest.raises(ValueError, match="differ"):
        attention_rollout([own, _maps(4, lambda i: i)])


def test_offset_kernels_find_a_hand_set_shift():
    g = 4
    L = 1 + g * g  # [CLS] + 16 patches

    def right_neighbour(i):
        if i == 0:
            return 0
        y, x = divmod(i - 1, g)
        return 1 + y * g + min(x + 1, g - 1)

    kernel = offset_kernels(_maps(L, right_neighbour), g, margin=1)  # interior queries have a right neighbour
    assert kernel.shape == (1, 7, 7)
    assert float(kernel[0, g - 1, g]) == pytest.approx(1.0)  # dy = 0, dx = +1
    assert float(kernel.sum()) == pytest.approx(1.0)
    cls_only = offset_kernels(_maps(L, lambda i: 0), g)
    assert float(cls_only.sum()) == 0.0  # weight on [CLS] is not an offset
    with pytest.raises(ValueError, match="expected first_patch"):
        offset_kernels(_maps(L, lambda i: 0), 5)
    with pytest.raises(ValueError, match="margin=2"):
        offset_kernels(_maps(L, lambda i: 0), g, margin=2)


def test_unpatchify_inverts_patchify_and_the_front_end_is_per_patch():
    from mha_lib.model import patchify, unpatchify

    images = torch.rand(2, 3, 8, 12)
    for p in (1, 2, 4):
        torch.testing.assert_close(unpatchify(patchify(images, p), 8, 12, p), images)
    with pytest.raises(ValueError, match="do not tile a 8x8 image"):
        unpatchify(torch.rand(1, 5, 4), 8, 8, 2)
    with pytest.raises(ValueError, match="8x6 is not divisible"):
        unpatchify(torch.rand(1, 12, 4), 8, 6, 4)
    # the ViT front-end: [CLS] + position, then per patch W p + b + position
    cfg = EncoderConfig(vocab_size=0, patch_dim=4, cls_token=True, d_model=8, num_heads=2, num_layers=1, d_ff=16,
                        max_len=5, positional="learned", pad_token_id=None)
    torch.manual_seed(0)
    enc = TokenClassifier(cfg, 3, pooling="cls").encoder.eval()
    patches = patchify(torch.rand(1, 4, 4), 2)  # (1, 4, 4)
    x = enc.embed(patches)
    pos = enc.position_embedding.weight
    torch.testing.assert_close(x[0, 0], enc.cls_embedding[0, 0] + pos[0])
    for i in range(4):
        torch.testing.assert_close(x[0, i + 1], enc.patch_embedding(patches[0, i]) + pos[i + 1])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_patch_inputs_of_another_dtype_are_refused_naming_both(dtype):
    model = _tiny_vit()
    x = DigitsTask().dataset(4, seed=0).input_ids.to(dtype)
    with pytest.raises(ValueError, match=rf"dtype {dtype}, the model's parameters are torch.float32"):
        model(x)
    assert model.to(dtype)(x).logits.dtype == dtype  # a converted model takes them


@pytest.mark.parametrize("size", [(0, 0), (1, 1), (0, 8), (8, 1)])
def test_an_image_smaller_than_one_patch_is_refused(size):
    from mha_lib.model import patchify

    H, W = size
    with pytest.raises(ValueError, match=rf"image size {H}x{W} .*holds no 2x2 patch"):
        patchify(torch.rand(1, H, W), 2)
    with pytest.raises(ValueError, match="holds no 1x1 patch"):
        patchify(torch.rand(1, 0, 4, 4), 1)  # no channels: patches of no values
    with pytest.raises(ValueError, match=r"\(3, 0, 1\) hold no patch"):
        _tiny_vit()(torch.rand(3, 0, 1))  # zero patches: [CLS] alone would still get a class


def test_pooled_labels_and_causal_cls_are_checked():
    task = DigitsTask()
    model = _tiny_vit()
    batch = task.dataset(8, seed=0)
    x, y = batch.input_ids, batch.labels
    with pytest.raises(ValueError, match=r"shape \(B,\)"):
        accuracy(model, (x, y[:, None]))
    with pytest.raises(ValueError, match=r"lie in \[0, 10\)"):
        per_example_loss(model, (x, torch.full_like(y, 10)))
    with pytest.raises(ValueError, match="labels must be an integer tensor"):
        per_example_loss(model, (x, y.float()))
    with pytest.raises(ValueError, match="causal"):
        model(x, is_causal=True)


def test_offset_kernels_average_each_offset_over_the_queries_that_have_it():
    g, L = 4, 17
    uniform = torch.full((1, 1, L, L), 1.0 / L)
    kernel = offset_kernels(uniform, g)  # every query, every offset that exists
    assert torch.allclose(kernel[kernel > 0], torch.tensor(1.0 / L))  # flat: far offsets are not shrunk


@pytest.mark.parametrize("value", [1e20, -1e7])
def test_patch_values_beyond_patch_max_are_refused_not_turned_into_nan(value):
    from mha_lib.model.encoder import PATCH_MAX

    model = _tiny_vit()
    x = DigitsTask().dataset(2, seed=0).input_ids
    with pytest.raises(ValueError, match=re.escape(f"magnitude {abs(value):.3g}, beyond PATCH_MAX=1e+06")):
        model(x.clone().fill_(value))  # 1e20: LayerNorm's variance overflows float32, all logits NaN
    assert torch.isfinite(model(x.clone().fill_(PATCH_MAX)).logits).all()  # the bound itself is fine


def test_meta_patches_are_refused_by_name():
    with pytest.raises(ValueError, match="patch inputs is on the meta device"):
        _tiny_vit()(torch.zeros(2, 64, 1, device="meta"))
