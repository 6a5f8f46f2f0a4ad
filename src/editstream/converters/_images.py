"""Cheap image validity check shared by the schema modules: parse the header, never the pixels."""

from __future__ import annotations

import io
import re
import warnings

from PIL import Image

_OBJECT_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def image_header_problem(data: object) -> str | None:
    """Why ``data`` is not an image whose header Pillow can parse, or ``None`` when it is.

    Only the header is read (``Image.open`` is lazy), so this costs microseconds per image.
    Images above Pillow's pixel limit count as valid here: their header parsed fine.
    """
    if data is None:
        return "image is null"
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return f"image is a {type(data).__name__}, not bytes"
    if len(data) == 0:
        return "image is empty"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                width, height = img.size
    except Image.DecompressionBombError:
        return None
    except Image.UnidentifiedImageError:
        return "undecodable image header (no image format recognised)"
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types for bad bytes
        detail = _OBJECT_ADDRESS.sub("", str(exc))  # keep reports deterministic
        return f"undecodable image header ({type(exc).__name__}: {detail})"
    if width <= 0 or height <= 0:
        return f"image has size {width}x{height}"
    return None
