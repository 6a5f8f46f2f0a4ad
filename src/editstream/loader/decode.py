"""Decoding image bytes to RGB exactly as the reference does, with limits applied per call.

The reference sets Pillow's process-wide globals when imported (``MAX_IMAGE_PIXELS`` to
200,000,000, ``LOAD_TRUNCATED_IMAGES`` on, ``MAX_TEXT_CHUNK`` to 1 GiB), which changes Pillow
for every other user in a training process. editstream changes nothing at import. Instead,
each of its decode calls:

- reads the declared size from the header (:mod:`editstream.format.images`) and refuses an
  image above ``max_pixels`` (default the reference's 200,000,000) or with an oversized
  metadata chunk before any pixel is decoded (the reference decodes up to twice that limit:
  a deliberate difference). The converter's ``report.json`` applies the same rule;
- opens the four common formats with Pillow's own format factory, so Pillow's global
  decompression-bomb limit (which a user may have set lower) does not cut in below ours;
- decodes truncated images grey-filled, as the reference does, with Pillow's
  ``LOAD_TRUNCATED_IMAGES`` true only inside editstream's own decode on the decoding thread:
  the flag is wrapped once in an object whose truth value is the process's own everywhere else.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from PIL import Image, ImageFile

from ..format.images import DEFAULT_MAX_IMAGE_PIXELS, image_size, limits_problem, sniff_extension

_FACTORY_FORMATS = {"jpg": "JPEG", "png": "PNG", "gif": "GIF", "webp": "WEBP"}


class ImageRejected(ValueError):
    """An image refused before decoding (too many pixels, an oversized metadata chunk)."""


class _TruncatedFlag:
    """Pillow's ``LOAD_TRUNCATED_IMAGES`` for this process, true inside editstream's decodes on this thread."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self._local = threading.local()

    def __bool__(self) -> bool:
        return bool(getattr(self._local, "on", False)) or bool(self.base)

    def __repr__(self) -> str:
        return repr(bool(self))

    def scoped(self) -> _Scope:
        return _Scope(self._local)


class _Scope:
    def __init__(self, local: threading.local) -> None:
        self.local = local
        self.before = False

    def __enter__(self) -> None:
        self.before = getattr(self.local, "on", False)
        self.local.on = True

    def __exit__(self, *exc: object) -> None:
        self.local.on = self.before


_FLAG_LOCK = threading.Lock()


def _truncated_flag() -> _TruncatedFlag:
    """The wrapper around Pillow's flag (installed on first use, re-wrapped if someone reassigned it)."""
    current: Any = ImageFile.LOAD_TRUNCATED_IMAGES
    if isinstance(current, _TruncatedFlag):
        return current
    with _FLAG_LOCK:
        current = ImageFile.LOAD_TRUNCATED_IMAGES
        if not isinstance(current, _TruncatedFlag):
            current = _TruncatedFlag(current)
            setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", current)  # noqa: B010 - a wrapper, not a new value
        return current


def pil_img2rgb(image: Image.Image) -> Image.Image:
    """Convert any PIL image to RGB; transparent images are composited onto white first.

    An image counts as transparent when its mode is RGBA or it carries a ``transparency``
    entry (palette / grey / RGB PNGs with tRNS); other modes (LA, L, CMYK ...) convert directly.
    """
    if image.mode == "RGBA" or image.info.get("transparency") is not None:
        rgba = image.convert("RGBA")
        canvas = Image.new("RGB", rgba.size, (255, 255, 255))
        canvas.paste(rgba, mask=rgba.getchannel("A"))
        return canvas
    return image.convert("RGB")


def _factory(kind: str) -> Any:
    """Pillow's own opener for format ``kind`` (the one ``Image.open`` would pick), plugins loaded as needed."""
    if kind not in Image.OPEN:
        Image.preinit()
    if kind not in Image.OPEN:
        Image.init()
    return Image.OPEN[kind][0]


def _opened(raw: bytes, max_pixels: int) -> Image.Image:
    """``raw`` opened (header read, pixels not decoded yet) after the per-call limits are checked."""
    size = image_size(raw)
    factory = None
    if isinstance(size, tuple):
        problem = limits_problem(raw, size, max_pixels)
        if problem is not None:
            raise ImageRejected(problem)
        kind = _FACTORY_FORMATS.get(sniff_extension(raw))
        if kind is not None:
            factory = _factory(kind)
    elif size.startswith("image declares more pixels"):
        raise ImageRejected(size)
    with warnings.catch_warnings(), _truncated_flag().scoped():  # headers are read under the same rules
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        image: Image.Image = factory(BytesIO(raw), "") if factory is not None else Image.open(BytesIO(raw))
    return image


def _load(image: Image.Image) -> Image.Image:
    """Decode the pixels of an opened image, truncated images grey-filled (see the module docstring)."""
    with warnings.catch_warnings(), _truncated_flag().scoped():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        image.load()
    return image


def open_image(data: bytes | bytearray | memoryview, *, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> Image.Image:
    """A decoded (loaded) PIL image of ``data``, within the limits; raises for bytes no decoder accepts."""
    return _load(_opened(bytes(data), max_pixels))


def decode_image(data: bytes | bytearray | memoryview, *, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> Image.Image:
    """Decode encoded image bytes into an RGB PIL image exactly as the reference loader does.

    Raises :class:`ImageRejected` for an image over the limits and ``PIL.UnidentifiedImageError``
    / ``OSError`` for bytes no decoder accepts.
    """
    return pil_img2rgb(open_image(data, max_pixels=max_pixels))


# --------------------------------------------------------------------------- opt-in fast decode

FAST_DECODE_MARGIN = 1.5
"""Fast decode keeps a reduced JPEG at least this many times its largest target on each side.

Chosen by measurement on 16 generated photographic JPEGs (``editstream.testing.photos``,
1024-4000 px; decode plus the VAE 512 and ViT 490 resizes, against the exact path): a margin of
1 is 5.2x faster but its worst image is at 34 dB PSNR, since a JPEG decoded at nearly its
target size is barely filtered by the resize; 1.5 is 4.7x faster, mean 46 dB, worst 37 dB;
2 reduces fewer images (3.0x, mean 51 dB, worst 38 dB)."""


@dataclass(frozen=True, eq=False)
class ReducedImage:
    """An RGB image a JPEG decoder produced at ``1/scale`` of the stored size (reduced DCT scale).

    ``source_size`` is the stored ``(width, height)``: :class:`~editstream.loader.transforms.ImageTransform`
    sizes its output from it, so shapes and token counts are those of the full decode; only
    pixel values differ. ``box`` is the region of ``image`` covering the whole source.
    """

    image: Image.Image
    source_size: tuple[int, int]
    scale: int

    @property
    def size(self) -> tuple[int, int]:
        """The stored size (as ``PIL.Image.size`` of the full decode would be)."""
        return self.source_size

    @property
    def box(self) -> tuple[float, float, float, float]:
        """``(0, 0, width / scale, height / scale)``: the source's extent in ``image`` pixels."""
        width, height = self.source_size
        return (0.0, 0.0, width / self.scale, height / self.scale)


def decode_image_reduced(
    data: bytes | bytearray | memoryview,
    target: Callable[[int, int], tuple[int, int]],
    *,
    max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
) -> Image.Image | ReducedImage:
    """Decode like :func:`decode_image`, but a JPEG much larger than its target at a reduced scale.

    ``target(width, height)`` gives the largest ``(width, height)`` the image will be resized to.
    When the stored size is at least ``2 * FAST_DECODE_MARGIN`` times that on both sides, the
    JPEG is decoded at 1/2, 1/4 or 1/8 scale (Pillow's ``draft``: the largest that keeps the
    margin) and returned as a :class:`ReducedImage`; anything else (other formats, smaller
    images, JPEGs the decoder cannot scale) is decoded exactly and returned as a PIL image. The
    limits and the truncated-image behaviour are those of :func:`decode_image`.
    """
    image = _opened(bytes(data), max_pixels)
    width, height = image.size
    want_w, want_h = target(width, height)
    request = (max(1, math.ceil(want_w * FAST_DECODE_MARGIN)), max(1, math.ceil(want_h * FAST_DECODE_MARGIN)))
    if image.format != "JPEG" or min(width // request[0], height // request[1]) < 2:
        return pil_img2rgb(_load(image))
    if image.draft(None, request) is None:
        return pil_img2rgb(_load(image))
    scale = int(image.decoderconfig[0])  # type: ignore[attr-defined]  # set by JpegImageFile.draft
    rgb = pil_img2rgb(_load(image))
    if scale < 2:
        return rgb
    return ReducedImage(rgb, (width, height), scale)
