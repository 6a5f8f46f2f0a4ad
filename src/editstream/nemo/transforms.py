"""Twin of NeMo's ``multimodal.transforms``: the image transform and its resize step, sized by ``target_size``
without torchvision; the interpolation may be torchvision's ``InterpolationMode`` (recognised by its value, so
torchvision is never imported here), a Pillow resampling filter, or ``None`` for bicubic as in NeMo."""

from __future__ import annotations

from typing import Any

import torch
from PIL import Image

from ..loader.transforms import ImageTransform, target_size

__all__ = ["ImageTransform", "MaxLongEdgeMinShortEdgeResize"]

PIL_FILTERS = {
    "nearest": Image.Resampling.NEAREST,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "box": Image.Resampling.BOX,
    "hamming": Image.Resampling.HAMMING,
    "lanczos": Image.Resampling.LANCZOS,
}
"""torchvision's interpolation names -> the Pillow filter torchvision resizes a PIL image with."""

TENSOR_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")
"""The interpolation names torchvision resizes a tensor with (``torch.nn.functional.interpolate``'s modes)."""


def interpolation_name(interpolation: Any) -> str:
    """torchvision's name for ``interpolation``: an ``InterpolationMode`` (its value), a Pillow filter, a name,
    or ``None`` (bicubic); anything else is a ``ValueError`` naming it."""
    if interpolation is None:
        return "bicubic"
    value = getattr(interpolation, "value", interpolation)
    if isinstance(value, str) and (value in PIL_FILTERS or value in TENSOR_MODES):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        for name, pil_filter in PIL_FILTERS.items():
            if int(pil_filter) == value:
                return name
    known = sorted({*PIL_FILTERS, *TENSOR_MODES})
    raise ValueError(f"MaxLongEdgeMinShortEdgeResize: interpolation {interpolation!r} is none of {known}")


class MaxLongEdgeMinShortEdgeResize(torch.nn.Module):
    """Resize so the long edge fits ``max_size``, the short edge reaches ``min_size``, both are
    multiples of ``stride`` and the area stays under ``max_pixels / img_num``."""

    def __init__(
        self,
        max_size: int,
        min_size: int,
        stride: int,
        max_pixels: float,
        interpolation: Any = None,
        antialias: bool = True,
    ) -> None:
        super().__init__()
        self.max_size = max_size
        self.min_size = min_size
        self.stride = stride
        self.max_pixels = max_pixels
        self.mode = interpolation_name(interpolation)
        self.interpolation = Image.Resampling.BICUBIC if interpolation is None else interpolation
        self.antialias = antialias

    def size_for(self, width: int, height: int, img_num: int = 1) -> tuple[int, int]:
        """The ``(width, height)`` a ``width`` x ``height`` image is resized to."""
        limits = {"max_size": self.max_size, "min_size": self.min_size, "stride": self.stride}
        return target_size(width, height, **limits, max_pixels=self.max_pixels, img_num=img_num)

    def forward(self, img: Any, img_num: int = 1) -> Any:
        """The resized image: a PIL image for a PIL image, a tensor (``...xHxW``) for a tensor."""
        if not isinstance(img, torch.Tensor):
            if self.mode not in PIL_FILTERS:
                raise ValueError(f"MaxLongEdgeMinShortEdgeResize: {self.mode!r} cannot resize a PIL image")
            source_width, source_height = img.size
            return img.resize(self.size_for(source_width, source_height, img_num), PIL_FILTERS[self.mode])
        if self.mode not in TENSOR_MODES:
            raise ValueError(f"MaxLongEdgeMinShortEdgeResize: {self.mode!r} cannot resize a tensor")
        width, height = self.size_for(int(img.shape[-1]), int(img.shape[-2]), img_num=img_num)
        batch = img.reshape(-1, *img.shape[-3:]) if img.dim() >= 3 else img[None, None]
        smooth = self.mode in ("bilinear", "bicubic")
        work = batch if batch.dtype in (torch.float32, torch.float64) else batch.float()
        resized = torch.nn.functional.interpolate(
            work,
            size=(height, width),
            mode=self.mode,
            align_corners=False if smooth else None,
            antialias=self.antialias and smooth,
        )
        if not img.is_floating_point():
            if self.mode == "bicubic":
                resized = resized.clamp(0, 255) if img.dtype == torch.uint8 else resized
            resized = resized.round()
        return resized.to(img.dtype).reshape(*img.shape[:-2], height, width)
