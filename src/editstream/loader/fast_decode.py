"""The opt-in fast decode (``fast_decode=True``): less decoding and cheaper resizes, same shapes (every
target comes from the stored size); quality floor in ``tests/test_fast_decode.py``, figures in docs."""

from __future__ import annotations

import math
from collections.abc import Callable

from PIL import Image

from ..format.images import DEFAULT_MAX_IMAGE_PIXELS
from .decode import load_pixels, opened_image, owned_rgb

FAST_DECODE_MARGIN = 1.5
"""A reduced image keeps at least this many times its largest target on each side: measured
(``benchmarks/fast_decode.py``), 1 puts the worst JPEG near 34 dB PSNR, 1.5 keeps 37-43 dB at worst."""


class ReducedImage:
    """The stored image decoded at ``1/scale`` of its ``source_size``, which transforms size their output from."""

    __slots__ = ("_largest", "image", "scale", "source_size")

    def __init__(self, image: Image.Image, source_size: tuple[int, int], scale: int) -> None:
        self.image = image
        self.source_size = source_size
        self.scale = scale
        self._largest: Image.Image | None = None

    def __repr__(self) -> str:
        return f"ReducedImage(source_size={self.source_size}, scale={self.scale}, image={self.image.size})"

    @property
    def size(self) -> tuple[int, int]:
        """The stored size (as ``PIL.Image.size`` of the full decode would be)."""
        return self.source_size

    @property
    def box(self) -> tuple[float, float, float, float]:
        """``(0, 0, width / scale, height / scale)``: the source's extent in ``image`` pixels."""
        width, height = self.source_size
        return (0.0, 0.0, width / self.scale, height / self.scale)

    def resized(self, size: tuple[int, int]) -> Image.Image:
        """The whole image bicubic-resized to ``size``, from the largest resize already made when that
        covers it (the same object when equal: do not modify the result), else from ``image``."""
        largest = self._largest
        if largest is not None and largest.width >= size[0] and largest.height >= size[1]:
            return largest if largest.size == size else largest.resize(size, Image.Resampling.BICUBIC)
        if self.scale == 1:
            out = self.image.resize(size, Image.Resampling.BICUBIC)
        else:
            out = self.image.resize(size, Image.Resampling.BICUBIC, box=self.box)
        if largest is None or out.width * out.height > largest.width * largest.height:
            self._largest = out
        return out


def decode_image_reduced(
    data: bytes | bytearray | memoryview,
    target: Callable[[int, int], tuple[int, int]],
    *,
    max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
) -> ReducedImage:
    """Decode like :func:`~editstream.loader.decode.decode_image` into a :class:`ReducedImage`: when the
    stored size is at least ``2 * FAST_DECODE_MARGIN`` times ``target(width, height)``, a JPEG at a
    reduced DCT scale and any other image box-reduced by an integer factor, keeping the margin."""
    image = opened_image(bytes(data), max_pixels)
    width, height = image.size
    want_w, want_h = target(width, height)  # a reduced image keeps the margin around the largest target
    request = max(1, math.ceil(want_w * FAST_DECODE_MARGIN)), max(1, math.ceil(want_h * FAST_DECODE_MARGIN))
    factor = min(width // request[0], height // request[1])
    scale = 1
    if factor >= 2 and image.format == "JPEG" and image.draft(None, request) is not None:
        scale = int(image.decoderconfig[0])  # type: ignore[attr-defined]  # set by JpegImageFile.draft
    rgb = owned_rgb(load_pixels(image))
    if scale == 1 and factor >= 2:
        rgb, scale = rgb.reduce(factor), factor
    return ReducedImage(rgb, (width, height), scale)
