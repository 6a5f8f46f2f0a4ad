"""Twin of NeMo's ``multimodal.transforms``: the image transform and its resize step, sized by ``target_size``
without torchvision (Pillow's bicubic for a PIL image, torch's antialiased bicubic for a tensor)."""

from __future__ import annotations

from typing import Any

import torch
from PIL import Image

from ..loader.transforms import ImageTransform, target_size

__all__ = ["ImageTransform", "MaxLongEdgeMinShortEdgeResize"]


class MaxLongEdgeMinShortEdgeResize(torch.nn.Module):
    """Resize so the long edge fits ``max_size``, the short edge reaches ``min_size``, both are
    multiples of ``stride`` and the area stays under ``max_pixels / img_num``."""

    def __init__(
        self,
        max_size: int,
        min_size: int,
        stride: int,
        max_pixels: float,
        interpolation: Image.Resampling = Image.Resampling.BICUBIC,
        antialias: bool = True,
    ) -> None:
        super().__init__()
        self.max_size = max_size
        self.min_size = min_size
        self.stride = stride
        self.max_pixels = max_pixels
        self.interpolation = interpolation
        self.antialias = antialias

    def size_for(self, width: int, height: int, img_num: int = 1) -> tuple[int, int]:
        """The ``(width, height)`` a ``width`` x ``height`` image is resized to."""
        limits = {"max_size": self.max_size, "min_size": self.min_size, "stride": self.stride}
        return target_size(width, height, **limits, max_pixels=self.max_pixels, img_num=img_num)

    def forward(self, img: Any, img_num: int = 1) -> Any:
        """The resized image: a PIL image for a PIL image, a tensor (``...xHxW``) for a tensor."""
        if not isinstance(img, torch.Tensor):
            source_width, source_height = img.size
            return img.resize(self.size_for(source_width, source_height, img_num), self.interpolation)
        width, height = self.size_for(int(img.shape[-1]), int(img.shape[-2]), img_num=img_num)
        batch = img.reshape(-1, *img.shape[-3:]) if img.dim() >= 3 else img[None, None]
        resized = torch.nn.functional.interpolate(
            batch.float(), size=(height, width), mode="bicubic", align_corners=False, antialias=self.antialias
        )
        if img.dtype == torch.uint8:
            resized = resized.round().clamp(0, 255).to(torch.uint8)
        return resized.reshape(*img.shape[:-2], height, width)
