"""Large photographic-looking JPEGs, generated (no downloads), to measure opt-in fast decode on.

Each image is a pure function of its seed and size and mixes what makes a resize hard, in
amounts a real photo could have: a smooth sky-like gradient, multi-octave value-noise texture
(foliage, grass), sensor noise, hard-edged shapes and thin lines, lines of small text, and a
patch of one-pixel stripes (fabric, railings) that only survives a good low-pass filter.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw, ImageFont

PHOTO_SIZES = ((1024, 768), (1600, 1200), (2048, 1536), (3000, 2000), (4000, 3000), (1200, 1800), (3840, 2160))
"""Sizes (width, height) of the standard set: common camera and screen sizes, 1024-4000 px."""


def _value_noise(rng: np.random.Generator, width: int, height: int, cell: int) -> np.ndarray:
    """Smooth noise in [0, 1] with features about ``cell`` pixels across (a bicubic-upsampled random grid)."""
    grid_w, grid_h = width // cell + 2, height // cell + 2
    grid = rng.uniform(0.0, 1.0, size=(grid_h, grid_w)).astype(np.float32)
    big = Image.fromarray(grid, "F").resize((grid_w * cell, grid_h * cell), Image.Resampling.BICUBIC)
    return np.asarray(big)[:height, :width]


def _colour(rng: np.random.Generator) -> tuple[int, int, int]:
    r, g, b = (int(v) for v in rng.integers(0, 256, size=3))
    return r, g, b


def photographic_image(seed: int, width: int, height: int) -> Image.Image:
    """An RGB ``width`` x ``height`` image of photo-like content (see the module docstring)."""
    rng = np.random.default_rng(seed)
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    slope = xs * np.float32(rng.uniform(-1, 1)) + ys * np.float32(rng.uniform(-1, 1))
    slope = (slope - slope.min()) / max(float(slope.max() - slope.min()), 1e-6)
    top, bottom = rng.uniform(0, 255, size=3), rng.uniform(0, 255, size=3)
    base = np.clip(top + slope[..., None] * (bottom - top), 0, 255).astype(np.uint8)
    img = Image.fromarray(base, "RGB")
    draw = ImageDraw.Draw(img)
    for _ in range(10):  # objects: hard edges, textured below like the rest
        x0, x1 = sorted(int(v) for v in rng.integers(0, width, size=2))
        y0, y1 = sorted(int(v) for v in rng.integers(0, height, size=2))
        kind = int(rng.integers(0, 3))
        if kind == 0:
            draw.ellipse((x0, y0, x1, y1), fill=_colour(rng))
        elif kind == 1:
            draw.rectangle((x0, y0, x1, y1), fill=_colour(rng))
        else:
            draw.line((x0, y0, x1, y1), fill=_colour(rng), width=int(rng.integers(1, 6)))
    short = min(width, height)
    texture = sum(
        _value_noise(rng, width, height, max(2, short // div)) / (octave + 1) ** 0.5
        for octave, div in enumerate((4, 32, 256, 600))
    )
    pixels = np.asarray(img, dtype=np.float32)
    pixels += (texture[..., None] - np.float32(texture.mean())) * rng.uniform(10, 30, size=3).astype(np.float32)
    pixels += rng.standard_normal(size=(height, width, 1), dtype=np.float32) * np.float32(2.5)
    img = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=max(10, height // 70))
    for _ in range(6):  # signs, captions
        at = (int(rng.integers(0, width // 2)), int(rng.integers(0, height)))
        draw.text(at, "Quarterly report 2024: 1,234 units (+5.6%)  " * 2, fill=_colour(rng), font=font)
    x0, y0 = int(rng.integers(0, width // 2)), int(rng.integers(0, height // 2))
    for x in range(x0, x0 + width // 5, 3):  # a railing / fabric: one-pixel stripes
        draw.line((x, y0, x, y0 + height // 5), fill=(25, 25, 25), width=1)
    return img


def photographic_jpeg(seed: int, width: int, height: int, quality: int = 90) -> bytes:
    """:func:`photographic_image` encoded as a baseline JPEG (4:2:0, as cameras and the web mostly store them)."""
    buf = io.BytesIO()
    photographic_image(seed, width, height).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()
