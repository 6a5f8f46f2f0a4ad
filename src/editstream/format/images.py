"""Media formats from their bytes: the extension a blob gets, and an image's size from its header alone
(JPEG, PNG, GIF and WebP parsed directly, anything else through ``PIL.Image.open``)."""

from __future__ import annotations

import io
import re
import warnings

_OBJECT_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
# JPEG start-of-frame markers: C0-CF except DHT (C4), JPG (C8) and DAC (CC).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE = frozenset([0x01, *range(0xD0, 0xD8)])


_BMP_DIB_SIZES = {12, 16, 40, 52, 56, 64, 108, 124}
# ISO base media brands of MP4 video (``ftyp`` major brand); QuickTime's is ``qt  ``.
_MP4_BRANDS = frozenset(
    [b"isom", b"iso2", b"iso4", b"iso5", b"iso6", b"mp41", b"mp42", b"avc1", b"M4V ", b"M4VH", b"M4VP", b"dash"]
)


def sniff_extension(data: bytes | bytearray | memoryview) -> str:
    """File extension for binary content from its magic bytes; ``bin`` when unknown (strict enough that
    a stock ``decode("pil")`` does not trip over random bytes named as an image)."""
    head = bytes(data[:64])
    if head.startswith(b"\xff\xd8\xff"):
        return "jpg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    if head[:2] == b"BM" and len(head) >= 18 and int.from_bytes(head[14:18], "little") in _BMP_DIB_SIZES:
        return "bmp"
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"avif", b"avis"):
            return "avif"
        if brand in (b"heic", b"heix", b"heim", b"heis", b"mif1", b"msf1"):
            return "heic"
    if head.startswith(b"\x00\x00\x00\x0cjP  \r\n\x87\n"):
        return "jp2"
    if head.startswith(b"\xff\x0a") or head.startswith(b"\x00\x00\x00\x0cJXL \r\n\x87\n"):
        return "jxl"
    return _video_extension(head) or "bin"


def _video_extension(head: bytes) -> str | None:
    """The container of video content (MP4/MOV ``ftyp`` brands, EBML, RIFF AVI), else ``None``."""
    if head[4:8] == b"ftyp":
        if head[8:12] in _MP4_BRANDS:
            return "mp4"
        if head[8:12] == b"qt  ":
            return "mov"
    if head.startswith(b"\x1a\x45\xdf\xa3"):  # EBML: Matroska, or its WebM profile
        return "webm" if b"webm" in head else "mkv"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "avi"
    return None


IMAGE_EXTENSIONS = frozenset({"jpg", "png", "gif", "webp", "tiff", "bmp", "avif", "heic", "jp2", "jxl"})
"""Extensions that ``sniff_extension`` gives to image content."""


def _jpeg_size(data: memoryview) -> tuple[int, int] | str:
    n = len(data)
    pos = 2
    while True:
        while pos < n and data[pos] != 0xFF:
            pos += 1  # tolerate junk between segments, as decoders do
        while pos < n and data[pos] == 0xFF:
            pos += 1
        if pos >= n:
            return "JPEG ends before its frame header"
        marker = data[pos]
        pos += 1
        if marker in _STANDALONE:
            continue
        if marker in (0xD9, 0xDA):
            return "JPEG has no frame header before its scan"
        if pos + 2 > n:
            return "JPEG segment is truncated"
        length = int.from_bytes(data[pos : pos + 2], "big")
        if length < 2:
            return f"JPEG segment length {length} is invalid"
        if marker in _SOF:
            if length < 8 or pos + 7 > n:
                return "JPEG frame header is truncated"
            return int.from_bytes(data[pos + 5 : pos + 7], "big"), int.from_bytes(data[pos + 3 : pos + 5], "big")
        pos += length


def _png_size(data: memoryview) -> tuple[int, int] | str:
    if len(data) < 33 or bytes(data[8:16]) != b"\x00\x00\x00\x0dIHDR":
        return "PNG has no IHDR chunk"
    width = int.from_bytes(data[16:20], "big")
    height = int.from_bytes(data[20:24], "big")
    depth, color = data[24], data[25]
    if depth not in _PNG_DEPTHS.get(color, ()):
        return f"PNG has an invalid bit depth {depth} for colour type {color}"
    return width, height


def _webp_size(data: memoryview) -> tuple[int, int] | str:
    if len(data) < 30:
        return "WebP header is truncated"
    chunk = bytes(data[12:16])
    if chunk == b"VP8 ":
        if bytes(data[23:26]) != b"\x9d\x01\x2a":
            return "WebP VP8 frame has no start code"
        return int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF
    if chunk == b"VP8L":
        if data[20] != 0x2F:
            return "WebP VP8L frame has no signature"
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return f"WebP has an unknown first chunk {chunk!r}"


def _pil_size(data: bytes | bytearray | memoryview) -> tuple[int, int] | str:
    from PIL import Image  # only the formats parsed above are common: Pillow loads when another turns up

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                return img.size
    except Image.DecompressionBombError as exc:
        return f"image declares more pixels than Pillow accepts ({_OBJECT_ADDRESS.sub('', str(exc))})"
    except Image.UnidentifiedImageError:
        return "undecodable image header (no image format recognised)"
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types for bad bytes
        detail = _OBJECT_ADDRESS.sub("", str(exc))  # keep reports deterministic
        return f"undecodable image header ({type(exc).__name__}: {detail})"


def image_size(data: bytes | bytearray | memoryview) -> tuple[int, int] | str:
    """``(width, height)`` from the image header, or a string saying why the header is bad."""
    view = memoryview(data).cast("B")
    kind = sniff_extension(view)
    try:
        if kind == "jpg":
            return _jpeg_size(view)
        if kind == "png":
            return _png_size(view)
        if kind == "gif":
            if len(view) < 13:
                return "GIF header is truncated"
            return int.from_bytes(view[6:8], "little"), int.from_bytes(view[8:10], "little")
        if kind == "webp":
            return _webp_size(view)
    except IndexError:
        return "image header is truncated"
    return _pil_size(data)


GREY16_NOTE = (
    "16-bit greyscale PNG: decoded as the reference decodes it (Pillow mode I;16 to RGB), its 0-65535 "
    "values are clipped at 255, so it trains as (almost) pure white"
)
"""What report.json says of a 16-bit greyscale PNG."""


def image_decode_note(data: object) -> str | None:
    """What the reference's decode (``convert("RGB")``) silently does wrong to image ``data``, or ``None``,
    from the header alone: only 16-bit greyscale PNGs are clipped (other 16-bit PNGs scale correctly)."""
    if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) < 33:
        return None
    head = bytes(memoryview(data).cast("B")[:33])
    if sniff_extension(head) != "png" or head[12:16] != b"IHDR":
        return None
    return GREY16_NOTE if (head[24], head[25]) == (16, 0) else None  # (bit depth, colour type)


DEFAULT_MAX_IMAGE_PIXELS = 200_000_000
"""Largest image (width x height) editstream decodes; the reference's Pillow setting."""
MAX_ANCILLARY_BYTES = 16 << 20
"""Largest metadata chunk (PNG iCCP / text / eXIf, WebP ICCP / EXIF / XMP) an image may carry."""

_PNG_CRITICAL_END = (b"IDAT", b"IEND")


def _big_chunk(view: memoryview, png: bool) -> tuple[bytes, int] | None:
    """The first metadata chunk larger than the limit, ``(type, length)``: of a PNG before its image data
    (length then type, big-endian), of a WebP anywhere (type then length, little-endian, padded to even)."""
    pos = 8 if png else 12
    while pos + 8 <= len(view):
        first, second = bytes(view[pos : pos + 4]), bytes(view[pos + 4 : pos + 8])
        kind, length = (second, int.from_bytes(first, "big")) if png else (first, int.from_bytes(second, "little"))
        if png and kind in _PNG_CRITICAL_END:
            return None
        if length > MAX_ANCILLARY_BYTES:
            return kind, length
        pos += 12 + length if png else 8 + length + (length & 1)
    return None


def limits_problem(
    data: bytes | bytearray | memoryview, size: tuple[int, int], max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
) -> str | None:
    """Why an image of header size ``size`` must not be decoded (too many pixels declared, or a metadata
    chunk too large), or ``None``: the one rule set of the converter's report and the loader's decode."""
    width, height = size
    if width * height > max_pixels:
        return f"image declares {width}x{height} = {width * height} pixels, above the limit of {max_pixels}"
    view = memoryview(data).cast("B")
    kind = sniff_extension(view)
    big = _big_chunk(view, kind == "png") if kind in ("png", "webp") else None
    if big is not None:
        name = big[0].decode("latin-1")
        return f"image has a {name!r} metadata chunk of {big[1]} bytes, above the limit of {MAX_ANCILLARY_BYTES}"
    return None


def image_header_problem(data: object, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> str | None:
    """Why ``data`` is not an image with a parseable header within the limits, or ``None`` when it is."""
    if data is None:
        return "image is null"
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return f"image is a {type(data).__name__}, not bytes"
    if len(data) == 0:
        return "image is empty"
    size = image_size(data)
    if isinstance(size, str):
        return size
    width, height = size
    if width <= 0 or height <= 0:
        return f"image has size {width}x{height}"
    return limits_problem(data, size, max_pixels)
