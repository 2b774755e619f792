"""Chapter 7's images: scikit-learn's bundled 8x8 digits as sequences of patches.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import checks
from ..model.layers import patchify
from .batch import TaskBatch


@dataclass(frozen=True)
class DigitsTask:
    """Classify scikit-learn's 8x8 handwritten digits from pixel patches (chapter 7).

    The 1,797 images of ``sklearn.datasets.load_digits`` (shipped inside scikit-learn, no
    download) are split once, by a fixed permutation, into ``num_test`` test images and the
    rest for training. Pixel values 0..16 are scaled to [0, 1]. Each image becomes a sequence
    of patches (:func:`mha_lib.model.patchify`): with ``patch_size=1`` every pixel is a token,
    an 8x8 grid of 64 tokens (a [CLS] vector is the model's business, ``cls_token=True``).

    Args:
        patch_size: 1, 2, 4 or 8 pixels.
        num_test: test images, in [1, 1796].

    Raises:
        ValueError: a patch size that does not divide 8, or a bad num_test.
    """

    patch_size: int = 1
    num_test: int = 360

    kind = "digits"
    image_side = 8
    num_classes = 10

    def __post_init__(self):
        p = checks.positive_int(self.patch_size, "patch_size")
        if 8 % p:
            raise ValueError(f"patch_size={p} does not divide the 8-pixel side")
        n = checks.positive_int(self.num_test, "num_test")
        if n >= 1797:
            raise ValueError(f"num_test={n} leaves no training image (1,797 in all)")

    @property
    def grid(self) -> int:
        """Patches per side, 8 / patch_size."""
        return self.image_side // self.patch_size

    @property
    def patch_dim(self) -> int:
        """Values per patch, patch_size**2."""
        return self.patch_size ** 2

    def images(self, split: str) -> Tuple[Tensor, Tensor]:
        """``(images (N, 8, 8) float32 in [0, 1], labels (N,) long)`` of ``"train"`` or ``"test"``.

        Raises:
            ValueError: another split name.
        """
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        images, labels = _digits_split(self.num_test)[split == "test"]
        return images.clone(), labels.clone()  # the caller's own copy: the cached split stays intact

    def _batch(self, images: Tensor, labels: Tensor, index: Tensor) -> TaskBatch:
        return TaskBatch(patchify(images, self.patch_size), None, labels, index)

    def sample(self, batch_size: int, generator: Optional[torch.Generator] = None) -> TaskBatch:
        """``batch_size`` training images drawn with replacement (deterministic given ``generator``).

        Returns:
            a :class:`TaskBatch`: ``input_ids`` (B, N, patch_dim) float patches, ``labels`` (B,)
            digits, ``marked`` (B,) the images' indices in the training split.

        Raises:
            ValueError: if ``batch_size`` is not an int >= 1.
        """
        B = checks.int_at_least(batch_size, "batch_size", 1)
        images, labels = self.images("train")
        index = torch.randint(0, len(labels), (B,), generator=generator)
        return self._batch(images[index], labels[index], index)

    def dataset(self, num_sequences: int, seed: int) -> TaskBatch:
        """Test images: the whole test split in a seeded order, or the first ``num_sequences``
        of that order when fewer are asked for (``marked`` holds their test-split indices).

        Raises:
            ValueError: on a bad size or a negative seed.
        """
        n = checks.int_at_least(num_sequences, "num_sequences", 1)
        seed = checks.seed(seed, "seed")
        images, labels = self.images("test")
        index = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))[:n]
        return self._batch(images[index], labels[index], index)

    def to_dict(self) -> dict:
        """JSON-able description, inverse of :func:`task_from_dict`."""
        return {"kind": self.kind, **asdict(self)}


@functools.lru_cache(maxsize=4)
def _digits_split(num_test: int) -> Tuple[Tuple[Tensor, Tensor], Tuple[Tensor, Tensor]]:
    """``((train images, labels), (test images, labels))``, split once by a fixed permutation and
    kept: every training step samples from it, so it must not be rebuilt per batch (that cost
    about 6 ms a step). :meth:`DigitsTask.images` hands out copies."""
    images, labels = _digits()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    train, test = order[num_test:], order[:num_test]
    return (images[train], labels[train]), (images[test], labels[test])


def _digits() -> Tuple[Tensor, Tensor]:
    """scikit-learn's digits as (images (1797, 8, 8) float32 in [0, 1], labels (1797,) long)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:  # pragma: no cover - scikit-learn is a requirement of the book
        raise ValueError("DigitsTask needs scikit-learn: pip install scikit-learn") from err
    data = load_digits()
    return torch.tensor(data.images / 16.0, dtype=torch.float32), torch.tensor(data.target, dtype=torch.long)
