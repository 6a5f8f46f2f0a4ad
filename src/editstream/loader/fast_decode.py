"""The opt-in fast decode (``fast_decode=True``): less decoding and cheaper resizes, same shapes.

Every target is computed from the stored size, so no output changes shape or token count. A JPEG
at least ``2 * FAST_DECODE_MARGIN`` times its largest target is decoded at a reduced DCT scale;
any other image that large is decoded in full and box-reduced once (Pillow's ``reduce``); a
smaller target of the same image is resized from the largest output already made, which keeps
the exact path's bits for that largest output. Decode limits are
:func:`~editstream.loader.decode.decode_image`'s; the quality floor is in
``tests/test_fast_decode.py`` and the figures in ``docs/figures.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from PIL import Image

from ..format.images import DEFAULT_MAX_IMAGE_PIXELS
from .decode import load_pixels, opened_image, owned_rgb

FAST_DECODE_MARGIN = 1.5
"""A reduced image keeps at least this many times its largest target on each side.

Chosen by measurement (``benchmarks/fast_decode.py``, generated photographic images): a margin
of 1 is faster but puts the worst JPEG near 34 dB PSNR, since an image reduced to nearly its
target size is barely filtered by the bicubic resize; 1.5 keeps reduced JPEGs at a mean of
45-47 dB (worst 37-43 dB) and box-reduced PNG / WebP at 47-48 dB (worst 43 dB); 2 gains
5-8 dB and gives up a third of the speed-up on large images."""


class ReducedImage:
    """An RGB decode for the fast path: ``image`` is the stored image at ``1/scale`` of its size.

    ``source_size`` is the stored ``(width, height)``: :class:`~editstream.loader.transforms.ImageTransform`
    sizes its output from it, so shapes and token counts are those of the full decode. ``scale``
    is 1 when nothing was reduced; ``box`` is the region of ``image`` covering the whole source.
    The largest resize made so far is kept, for :meth:`resized` to derive smaller ones from.
    """

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
        """The whole image bicubic-resized to ``size`` (``(width, height)``); do not modify the result.

        From the largest resize already made when that covers ``size`` on both sides (the same
        image object when the size is equal), else from ``image``. With ``scale == 1`` the
        latter is the exact path's own call on the exact path's pixels.
        """
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


def _request(want: tuple[int, int]) -> tuple[int, int]:
    """The smallest ``(width, height)`` a reduced image may have for a largest target of ``want``."""
    return max(1, math.ceil(want[0] * FAST_DECODE_MARGIN)), max(1, math.ceil(want[1] * FAST_DECODE_MARGIN))


def decode_image_reduced(
    data: bytes | bytearray | memoryview,
    target: Callable[[int, int], tuple[int, int]],
    *,
    max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
) -> ReducedImage:
    """Decode like :func:`~editstream.loader.decode.decode_image` into a :class:`ReducedImage`.

    ``target(width, height)`` gives the largest ``(width, height)`` the image will be resized
    to. When the stored size is at least ``2 * FAST_DECODE_MARGIN`` times that on both sides, a
    JPEG is decoded at 1/2, 1/4 or 1/8 scale (the smallest that keeps the margin) and any other
    image is decoded in full and box-reduced by the largest integer factor that keeps it;
    otherwise the pixels are the exact decode's (``scale`` 1).
    """
    image = opened_image(bytes(data), max_pixels)
    width, height = image.size
    request = _request(target(width, height))
    factor = min(width // request[0], height // request[1])
    scale = 1
    if factor >= 2 and image.format == "JPEG" and image.draft(None, request) is not None:
        scale = int(image.decoderconfig[0])  # type: ignore[attr-defined]  # set by JpegImageFile.draft
    rgb = owned_rgb(load_pixels(image))
    if scale == 1 and factor >= 2:
        rgb, scale = rgb.reduce(factor), factor
    return ReducedImage(rgb, (width, height), scale)
