"""Photo-like images, edit instructions and captions for synthetic datasets, drawn from a generator seeded per row."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

IMAGE_FORMATS = ("jpeg", "png_rgb", "png_rgba", "png_palette", "webp")
"""Image formats, cycled by position; the names are the labels a synth summary counts."""

_COLORS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "white", "black", "golden", "silver", "teal")
_OBJECTS = (
    "sky",
    "car",
    "house",
    "tree",
    "dog",
    "cat",
    "river",
    "mountain",
    "door",
    "hat",
    "boat",
    "flower",
    "bicycle",
    "lamp",
    "bench",
    "cup",
)
_PLACES = ("left corner", "background", "foreground", "table", "roof", "road", "window", "top right")
_STYLES = (
    "a watercolor painting",
    "an oil painting",
    "a pencil sketch",
    "a vintage photo",
    "a cartoon",
    "a neon poster",
    "a mosaic",
)
_SCENES = ("a beach", "a snowy forest", "a city street at night", "a desert", "a meadow", "outer space")
_MATERIALS = ("glass", "wood", "gold", "stone", "ice", "paper")
SOURCES = ("web", "studio", "synthetic", "archive", None)
TAGS = ("outdoor", "indoor", "people", "animal", "vehicle", "night", "day", "macro", "portrait")


def _photo_like(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """An RGB image with a smooth two-colour gradient, a few flat shapes and mild noise."""
    c0 = rng.uniform(0, 255, size=3).astype(np.float32)
    c1 = rng.uniform(0, 255, size=3).astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    t = np.cos(angle) * xs + np.sin(angle) * ys
    t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
    pixels = c0 + t[:, :, None] * (c1 - c0)
    # Grain in 2x2 cells: looks like sensor noise, yet keeps PNGs near real-photo sizes.
    grain = rng.integers(-4, 5, size=((height + 1) // 2, (width + 1) // 2, 1), dtype=np.int8)
    noise = np.repeat(np.repeat(grain, 2, axis=0), 2, axis=1)[:height, :width].astype(np.float32)
    pixels = np.clip(pixels + noise, 0, 255).astype(np.uint8)
    img = Image.fromarray(pixels, "RGB")
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(2, 6))):
        x0, x1 = sorted(int(v) for v in rng.integers(0, width, size=2))
        y0, y1 = sorted(int(v) for v in rng.integers(0, height, size=2))
        fill = tuple(int(v) for v in rng.integers(0, 256, size=3))
        kind = int(rng.integers(0, 3))
        if kind == 0:
            draw.ellipse((x0, y0, x1, y1), fill=fill)
        elif kind == 1:
            draw.rectangle((x0, y0, x1, y1), fill=fill)
        else:
            draw.polygon([(x0, y1), ((x0 + x1) // 2, y0), (x1, y1)], fill=fill)
    return img


def _alpha_band(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """A varying alpha channel: a radial fade with a fully transparent hole and opaque parts."""
    cx, cy = rng.uniform(0.2, 0.8, size=2)
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :] - np.float32(cx)
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None] - np.float32(cy)
    dist = np.sqrt(xs * xs + ys * ys)
    alpha = np.clip(255.0 - dist * 400.0, 0, 255).astype(np.uint8)
    band = Image.fromarray(alpha, "L")
    draw = ImageDraw.Draw(band)
    draw.rectangle((0, 0, max(1, width // 4), max(1, height // 4)), fill=255)
    return band


def _encode(img: Image.Image, fmt: str, rng: np.random.Generator) -> bytes:
    """Encode ``img`` as ``fmt`` (one of ``IMAGE_FORMATS``) with fixed encoder options."""
    buf = io.BytesIO()
    w, h = img.size
    if fmt == "jpeg":
        img.save(buf, format="JPEG", quality=85, optimize=False, progressive=False)
    elif fmt == "png_rgb":
        img.save(buf, format="PNG", compress_level=1)
    elif fmt == "png_rgba":
        rgba = img.convert("RGBA")
        rgba.putalpha(_alpha_band(rng, w, h))
        rgba.save(buf, format="PNG", compress_level=1)
    elif fmt == "png_palette":
        pal = img.quantize(colors=255, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        palette = (pal.getpalette() or [])[: 255 * 3]
        palette += [0] * (256 * 3 - len(palette))
        pal.putpalette(palette)
        # Index 255 is reserved for the transparent region.
        draw = ImageDraw.Draw(pal)
        x0, y0 = int(rng.integers(0, max(1, w // 2))), int(rng.integers(0, max(1, h // 2)))
        draw.ellipse((x0, y0, x0 + max(2, w // 3), y0 + max(2, h // 3)), fill=255)
        pal.save(buf, format="PNG", transparency=255, compress_level=1)
    elif fmt == "webp":
        img.save(buf, format="WEBP", quality=80, method=2, lossless=False, exact=False)
    else:  # pragma: no cover - guarded by IMAGE_FORMATS
        raise ValueError(f"unknown image format {fmt!r}")
    return buf.getvalue()


def _sides(rng: np.random.Generator, min_side: int, max_side: int) -> tuple[int, int]:
    """Width and height, each log-uniform in ``[min_side, max_side]``, now and then the most elongated shape."""
    lo, hi = np.log(min_side), np.log(max_side + 1)
    w = min(max_side, int(np.exp(rng.uniform(lo, hi))))
    h = min(max_side, int(np.exp(rng.uniform(lo, hi))))
    if rng.random() < 0.1:
        w, h = (max_side, min_side) if rng.random() < 0.5 else (min_side, max_side)
    return w, h


def make_image(rng: np.random.Generator, min_side: int, max_side: int, fmt: str) -> bytes:
    """An encoded photo-like image of random size in ``[min_side, max_side]``, as ``fmt``."""
    w, h = _sides(rng, min_side, max_side)
    return _encode(_photo_like(rng, w, h), fmt, rng)


def garbage(rng: np.random.Generator) -> bytes:
    """Bytes no image decoder accepts: a text prefix that matches no magic, then noise."""
    return b"NOT-AN-IMAGE\x00" + rng.integers(0, 256, size=int(rng.integers(16, 200)), dtype=np.uint8).tobytes()


def pick(rng: np.random.Generator, words: tuple[Any, ...]) -> Any:
    """One of ``words``, drawn from ``rng``."""
    return words[int(rng.integers(0, len(words)))]


_INSTRUCTIONS: tuple[tuple[tuple[str, ...], tuple[str, str, str]], ...] = (
    ((), ("make the {obj} {color}", "change the color of the {obj} to {color}", "turn the {obj} {color}")),
    (_PLACES, ("add a {color} {obj} to the {x}", "put a {color} {obj} in the {x}", "place a {color} {obj} on the {x}")),
    ((), ("remove the {obj}", "delete the {obj} from the picture", "erase the {obj}")),
    (
        _MATERIALS,
        ("turn the {obj} into {x}", "make the {obj} look like it is made of {x}", "replace the {obj} with a {x} one"),
    ),
    (_SCENES, ("change the background to {x}", "move everything to {x}", "set the scene in {x}")),
    (_STYLES, ("make it look like {x}", "restyle the image as {x}", "render this as {x}")),
)
"""Edit instructions: the words a kind draws besides the object and colour (``{x}``), and its three phrasings."""


def instruction(rng: np.random.Generator) -> list[str]:
    """1-3 phrasings of one short edit instruction."""
    words, phrasings = _INSTRUCTIONS[int(rng.integers(0, len(_INSTRUCTIONS)))]
    obj, color = pick(rng, _OBJECTS), pick(rng, _COLORS)
    x = pick(rng, words) if words else ""
    options = [phrasing.format(obj=obj, color=color, x=x) for phrasing in phrasings]
    count = int(rng.integers(1, 4))
    order = rng.permutation(len(options))[:count]
    return [options[int(i)] for i in order]


def caption(rng: np.random.Generator) -> str:
    """A short caption of a photo-like image: a style, a coloured object and a scene."""
    color, obj, scene = pick(rng, _COLORS), pick(rng, _OBJECTS), pick(rng, _SCENES)
    style = pick(rng, ("a photo of", "a close-up of", "a wide shot of", "a drawing of"))
    return f"{style} a {color} {obj} in {scene}"
