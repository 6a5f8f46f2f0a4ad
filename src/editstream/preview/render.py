"""Records drawn as a self-contained HTML page or a PNG contact sheet, one row each, laid out as the record
says; an image that does not decode is a grey box saying so."""

from __future__ import annotations

import base64
import html
import io
import textwrap
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from .record import Layout, Record

THUMB = 160
"""Longest thumbnail side in pixels."""
_GAP = 12
_TEXT_W = 150
_BG = (250, 250, 248)
_INK = (30, 30, 30)
_MUTED = (110, 110, 110)


TRUNCATED_NOTE = "truncated: trained grey-filled"
"""The label of an image whose bytes end early: the loader decodes it with the rest grey, as the reference does."""


MAX_DRAWN_PIXELS = 64_000_000
"""Images larger than this are named, not drawn, unless their decoder can reduce while it decodes
(JPEG): a preview's memory must not grow with one huge PNG."""
MAX_TEXT = 2000
"""Characters of one text a preview shows; the rest is counted, not drawn."""


class TooLargeToDraw(ValueError):
    """An image the preview names instead of decoding (see :data:`MAX_DRAWN_PIXELS`)."""


def _strict_thumbnail(data: bytes, side: int) -> Image.Image:
    """A thumbnail decoded by Pillow's rules (a truncated image raises), reduced while decoding where it can."""
    with Image.open(io.BytesIO(data)) as image:
        image.draft("RGB", (side, side))
        width, height = image.size
        if width * height > MAX_DRAWN_PIXELS:
            raise TooLargeToDraw(f"{width}x{height}, not drawn")
        factor = max(1, min(width, height) // (2 * side))
        reducible = factor > 1 and image.mode in ("L", "LA", "RGB", "RGBA", "RGBX", "CMYK")
        thumb = (image.reduce(factor) if reducible else image).convert("RGB")
        thumb.thumbnail((side, side))
        return thumb


def shown_text(text: str) -> str:
    """``text`` cut to :data:`MAX_TEXT` characters, saying how many more there were."""
    return text if len(text) <= MAX_TEXT else f"{text[:MAX_TEXT]}… (+{len(text) - MAX_TEXT:,} characters)"


def _labelled(image: Image.Image, label: str) -> Image.Image:
    """``image`` with ``label`` written on a light band at its top, wrapped to the image's width."""
    out = image.copy()
    lines = textwrap.wrap(label, max(8, out.width // 7))
    draw = ImageDraw.Draw(out)
    draw.rectangle([(0, 0), (out.width, 4 + 13 * len(lines))], fill=(200, 200, 200))
    for i, line in enumerate(lines):
        draw.text((3, 2 + 13 * i), line, fill=_INK, font=_font(11))
    return out


def describe_image(data: bytes | None, side: int = THUMB) -> tuple[Image.Image, str | None]:
    """An RGB thumbnail of ``data`` as the loader sees it, and a label when there is something to say: a grey box
    for "missing" and "undecodable", a truncated image drawn grey-filled as trained (:data:`TRUNCATED_NOTE`)."""
    if data is None:
        return _placeholder("missing", side), "missing"
    try:
        return _strict_thumbnail(data, side), None
    except TooLargeToDraw as large:
        return _placeholder(str(large).replace(", ", "\n", 1), side), str(large)
    except Exception as strict:  # noqa: BLE001 - a broken image is shown as broken, not fatal
        from ..loader.decode import decode_image

        try:
            image = decode_image(data)
        except Exception as exc:  # noqa: BLE001 - the loader refuses it too
            label = f"undecodable {type(exc).__name__}"
            return _placeholder(label.replace(" ", "\n", 1), side), label
        thumb = image.copy()
        thumb.thumbnail((side, side))
        if "truncated" in str(strict) or "broken data stream" in str(strict):
            return _labelled(thumb, TRUNCATED_NOTE), TRUNCATED_NOTE
        return thumb, None


def _placeholder(label: str, side: int) -> Image.Image:
    box = Image.new("RGB", (side, side * 3 // 4), (200, 200, 200))
    ImageDraw.Draw(box).text((8, 8), label, fill=_INK, font=_font(12))
    return box


_FONTS = ("DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "Arial.ttf")


def _font(size: int = 13) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """A font with wide coverage when the system has one (DejaVu, Arial), else Pillow's own."""
    for name in _FONTS:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one bitmap size
        return ImageFont.load_default()


def _cells(record: Record) -> list[tuple[str, Any]]:
    """The row's cells in order: ("image", (Image, label)) and ("text", str); edit instructions sit between images."""
    thumbs = [describe_image(data) for data in record.images]
    if record.layout is Layout.CHAIN:
        cells: list[tuple[str, Any]] = []
        for i, thumb in enumerate(thumbs):
            cells.append(("image", thumb))
            if i < len(thumbs) - 1:
                cells.append(("text", shown_text(record.texts[i]) if i < len(record.texts) else "(no instruction)"))
        return cells
    return [("image", t) for t in thumbs] + [("text", "\n".join(shown_text(t) for t in record.texts))]


def to_html(records: list[Record], title: str) -> str:
    """A self-contained page: no file besides itself is needed to see the images."""
    rows = []
    for record in records:
        cells = []
        for kind, value in _cells(record):
            if kind == "image":
                image, label = value
                jpeg = io.BytesIO()
                image.save(jpeg, format="JPEG", quality=82)
                src = f"data:image/jpeg;base64,{base64.b64encode(jpeg.getvalue()).decode('ascii')}"
                note = html.escape(label or "image", quote=True)
                cells.append(f'<img src="{src}" alt="{note}" title="{note}">')
            else:
                text = html.escape(str(value)).replace("\n", "<br>")
                cls = "edit" if record.layout is Layout.CHAIN else "say"
                cells.append(f'<div class="{cls}">{text}</div>')
        rows.append(
            f'<section class="record {record.kind}"><h2>{html.escape(record.title)}</h2>'
            f'<div class="cells">{"".join(cells)}</div></section>'
        )
    style = (
        "body{font:14px system-ui,sans-serif;background:#fafaf8;color:#1e1e1e;margin:24px}"
        "section{border-bottom:1px solid #ddd;padding:10px 0}h2{font-size:12px;color:#666;margin:0 0 6px}"
        ".cells{display:flex;align-items:center;gap:10px;flex-wrap:wrap}img{max-height:160px;border-radius:4px}"
        ".edit{max-width:160px;color:#444}.edit:before{content:'\\2192  '}.say{max-width:640px;white-space:normal}"
    )
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>{''.join(rows)}</body></html>\n"
    )


def _wrap(text: str, width_chars: int, max_lines: int) -> list[str]:
    lines: list[str] = []
    for para in text.split("\n"):
        lines.extend(textwrap.wrap(para, width_chars) or [""])
    return lines[:max_lines] + (["..."] if len(lines) > max_lines else [])


def to_png(records: list[Record], title: str, max_width: int = 1400) -> Image.Image:
    """A contact sheet: one row per record, thumbnails with the texts beside or between them."""
    font, small = _font(13), _font(11)
    laid: list[tuple[Record, list[Image.Image | list[str]]]] = []
    for record in records:
        cells: list[Image.Image | list[str]] = []
        for kind, value in _cells(record):
            if kind == "image":
                cells.append(value[0])
            else:
                wide = _TEXT_W if record.layout is Layout.CHAIN else 420
                cells.append(_wrap("-> " * (record.layout is Layout.CHAIN) + str(value), wide // 7, 9))
        laid.append((record, cells))
    heights = [
        24 + max([c.height if isinstance(c, Image.Image) else 16 * len(c) for c in cells] or [16]) for _, cells in laid
    ]
    sheet = Image.new("RGB", (max_width, 40 + sum(heights) + _GAP * len(laid)), _BG)
    draw = ImageDraw.Draw(sheet)
    draw.text((_GAP, 10), title, fill=_INK, font=_font(16))
    y, right = 40, 0
    for (record, cells), height in zip(laid, heights):
        draw.text((_GAP, y), record.title, fill=_MUTED, font=small)
        x = _GAP
        for cell in cells:
            if isinstance(cell, Image.Image):
                if x + cell.width > max_width:
                    break
                sheet.paste(cell, (x, y + 20))
                x += cell.width + _GAP
            else:
                for i, line in enumerate(cell):
                    draw.text((x, y + 20 + 16 * i), line, fill=_INK, font=font)
                x += (_TEXT_W if record.layout is Layout.CHAIN else 420) + _GAP
        right = max(right, x)
        y += height + _GAP
        draw.line([(_GAP, y - _GAP // 2), (max_width - _GAP, y - _GAP // 2)], fill=(220, 220, 220))
    return sheet.crop((0, 0, max(min(right + _GAP, max_width), 480), sheet.height))


def save_png(sheet: Image.Image, path: str) -> None:
    """Save a contact sheet as a small PNG (256 colours are plenty for thumbnails)."""
    sheet.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)
