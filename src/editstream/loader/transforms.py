"""The BAGEL image transform with Pillow and numpy only, bit-identical to the reference's torchvision
path for PIL inputs; ``to_uint8`` and :func:`normalize_pixels` are its two halves, for the uint8 hand-off."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image

from .fast_decode import ReducedImage

DEFAULT_MAX_PIXELS = 14 * 14 * 9 * 1024

Normalization = tuple[tuple[float, float, float], tuple[float, float, float]]
"""``(mean, std)`` per RGB channel, as an :class:`ImageTransform` applies them."""


def normalize_pixels(
    pixels: np.ndarray, mean: np.ndarray, std: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """``(pixels / 255 - mean) / std`` in float32 in the reference's order, as a new array or into ``out``."""
    if out is None:
        x = pixels.astype(np.float32, order="C")
    else:
        np.copyto(out, pixels)  # the same exact uint8 -> float32 conversion
        x = out
    np.divide(x, np.float32(255), out=x)
    np.subtract(x, mean, out=x)
    np.divide(x, std, out=x)
    return x


def _snap(value: float, stride: int) -> int:
    """Round ``value`` to the nearest multiple of ``stride``, never below ``stride``."""
    return max(stride, int(round(value / stride) * stride))


def _scaled(width: int, height: int, scale: float, stride: int) -> tuple[int, int]:
    return _snap(round(width * scale), stride), _snap(round(height * scale), stride)


def target_size(
    width: int, height: int, *, max_size: int, min_size: int, stride: int, max_pixels: float, img_num: int = 1
) -> tuple[int, int]:
    """The ``(width, height)`` an image of this size is resized to (SPEC section 5)."""
    if width < 1 or height < 1:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    scale = min(max_size / max(width, height), 1.0)
    scale = max(scale, min_size / min(width, height))
    new_w, new_h = _scaled(width, height, scale, stride)
    if new_w * new_h > max_pixels / img_num:
        scale = max_pixels / img_num / (new_w * new_h)
        new_w, new_h = _scaled(new_w, new_h, scale, stride)
    if max(new_w, new_h) > max_size:
        scale = max_size / max(new_w, new_h)
        new_w, new_h = _scaled(new_w, new_h, scale, stride)
    return new_w, new_h


class ImageTransform:
    """Resize a PIL image to a stride-aligned size and turn it into a normalized float32 CxHxW tensor."""

    def __init__(
        self,
        max_image_size: int,
        min_image_size: int,
        image_stride: int,
        max_pixels: float = DEFAULT_MAX_PIXELS,
        image_mean: Sequence[float] = (0.5, 0.5, 0.5),
        image_std: Sequence[float] = (0.5, 0.5, 0.5),
    ) -> None:
        if image_stride < 1:
            raise ValueError(f"image_stride must be >= 1, got {image_stride}")
        if max_image_size < 1 or min_image_size < 1:
            raise ValueError(
                f"image sizes must be >= 1, got max_image_size={max_image_size}, min_image_size={min_image_size}"
            )
        if max_pixels <= 0:
            raise ValueError(f"max_pixels must be > 0, got {max_pixels}")
        if len(image_mean) != 3 or len(image_std) != 3:
            raise ValueError(f"image_mean and image_std need 3 values, got {image_mean!r} and {image_std!r}")
        if any(s == 0 for s in image_std):
            raise ValueError(f"image_std must not contain 0, got {image_std!r}")
        self.max_image_size = max_image_size
        self.min_image_size = min_image_size
        self.stride = image_stride
        self.max_pixels = max_pixels
        self.image_mean = tuple(float(m) for m in image_mean)
        self.image_std = tuple(float(s) for s in image_std)
        self._mean = np.asarray(self.image_mean, dtype=np.float32)[:, None, None]
        self._std = np.asarray(self.image_std, dtype=np.float32)[:, None, None]

    def __repr__(self) -> str:
        return (
            f"ImageTransform(max_image_size={self.max_image_size}, min_image_size={self.min_image_size}, "
            f"image_stride={self.stride}, max_pixels={self.max_pixels}, image_mean={self.image_mean}, "
            f"image_std={self.image_std})"
        )

    def target_size(self, width: int, height: int, img_num: int = 1) -> tuple[int, int]:
        """The ``(width, height)`` this transform resizes a ``width`` x ``height`` image to."""
        limits = {"max_size": self.max_image_size, "min_size": self.min_image_size, "stride": self.stride}
        return target_size(width, height, **limits, max_pixels=self.max_pixels, img_num=img_num)

    @property
    def normalization(self) -> Normalization:
        """The ``(mean, std)`` this transform normalizes with, per channel."""
        mean, std = self.image_mean, self.image_std
        return (mean[0], mean[1], mean[2]), (std[0], std[1], std[2])

    def _resized(self, img: Image.Image | ReducedImage, img_num: int) -> Image.Image:
        if isinstance(img, ReducedImage):
            # Sized from the stored size, so shapes and token counts match the full decode.
            _check_rgb(img.image)
            return img.resized(self.target_size(*img.source_size, img_num=img_num))
        _check_rgb(img)
        w, h = self.target_size(*img.size, img_num=img_num)
        # Always resize, even to the same size (Pillow then copies): keeps the reference path.
        return img.resize((w, h), Image.Resampling.BICUBIC)

    def to_uint8(self, img: Image.Image | ReducedImage, img_num: int = 1) -> torch.Tensor:
        """The resized pixels as a uint8 3xHxW tensor: ``__call__`` before its float32 step."""
        pixels = np.asarray(self._resized(img, img_num), dtype=np.uint8)
        return torch.from_numpy(np.ascontiguousarray(pixels.transpose(2, 0, 1)))

    def __call__(self, img: Image.Image | ReducedImage, img_num: int = 1) -> torch.Tensor:
        """Resize ``img`` (an RGB PIL image) and return it as a normalized float32 tensor of shape 3xHxW."""
        # The reference's torchvision path (to_tensor, then Normalize) done in numpy: the same
        # float32 operations in the same order, so the same bits, without torch's intra-op
        # thread pool, which costs 10x more than the arithmetic on a busy machine.
        pixels = np.asarray(self._resized(img, img_num), dtype=np.uint8).transpose(2, 0, 1)
        return torch.from_numpy(normalize_pixels(pixels, self._mean, self._std))


def _check_rgb(img: Image.Image) -> None:
    if img.mode != "RGB":
        raise ValueError(f"ImageTransform expects an RGB image (use pil_img2rgb), got mode {img.mode!r}")
