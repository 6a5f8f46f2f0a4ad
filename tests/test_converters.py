"""Per-schema row checks and the fast image-header parser (checked against Pillow)."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from editstream.conversion.parquet_plan import check_columns
from editstream.format.images import image_header_problem, image_size
from editstream.kinds import detect_kind, get_kind


def _first_problem(kind: str):
    def check(row):
        problem = get_kind(kind).first_problem(row)
        return None if problem is None else problem.text

    return check


def encode(fmt: str, size=(37, 21), mode="RGB", **kw) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, None).save(buf, format=fmt, **kw)
    return buf.getvalue()


CASES = [
    ("JPEG", "RGB", {}),
    ("JPEG", "L", {"progressive": True}),
    ("JPEG", "CMYK", {}),
    ("PNG", "RGB", {}),
    ("PNG", "RGBA", {}),
    ("PNG", "P", {}),
    ("PNG", "1", {}),
    ("PNG", "I;16", {}),
    ("WEBP", "RGB", {"lossless": False}),
    ("WEBP", "RGB", {"lossless": True}),
    ("WEBP", "RGBA", {}),
    ("GIF", "P", {}),
    ("BMP", "RGB", {}),
    ("TIFF", "RGB", {}),
]


@pytest.mark.parametrize("fmt,mode,kw", CASES)
@pytest.mark.parametrize("size", [(1, 1), (37, 21), (300, 17), (4000, 3)])
def test_header_size_matches_pillow(fmt, mode, kw, size):
    data = encode(fmt, size, mode, **kw)
    assert image_size(data) == Image.open(io.BytesIO(data)).size == size
    assert image_size(memoryview(data)) == size
    assert image_header_problem(data) is None


def test_animated_webp_with_vp8x_header():
    frames = [Image.new("RGB", (19, 11), c) for c in ("red", "blue")]
    buf = io.BytesIO()
    frames[0].save(buf, format="WEBP", save_all=True, append_images=frames[1:])
    assert image_size(buf.getvalue()) == (19, 11)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "GIF"])
def test_truncated_and_damaged_headers_are_problems(fmt):
    data = encode(fmt)
    assert image_header_problem(data[:12]) is not None
    assert image_header_problem(data[:4] + b"\0" * 40) is not None


def test_non_images_are_problems():
    assert "no image format" in image_header_problem(b"NOT-AN-IMAGE\x00" + bytes(100))
    assert image_header_problem(b"") == "image is empty"
    assert image_header_problem(None) == "image is null"
    assert "not bytes" in image_header_problem("a string")
    # a JPEG whose scan starts before any frame header
    assert "frame header" in image_header_problem(b"\xff\xd8\xff\xda\x00\x08" + bytes(20))


def test_unified_edit_checks():
    check = _first_problem("unified_edit")
    img = encode("PNG")
    assert check({"image_list": [img, img], "instruction_list": [["a"]]}) is None
    assert check({"image_list": [img, img, img], "instruction_list": [["a"], ["b"], ["extra"]]}) is None
    assert "fewer than 2" in check({"image_list": [img], "instruction_list": []})
    assert "needs 2" in check({"image_list": [img, img, img], "instruction_list": [["a"]]})
    assert "no phrasings" in check({"image_list": [img, img], "instruction_list": [[]]})
    assert "image 1" in check({"image_list": [img, b"junk"], "instruction_list": [["a"]]})
    assert "not a list" in check({"image_list": None, "instruction_list": [["a"]]})


def test_t2i_checks():
    check = _first_problem("t2i")
    img = encode("JPEG")
    assert check({"image": img, "captions": '{"a": "x"}'}) is None
    assert check({"image": img, "captions": "{}"}) is None
    assert "does not parse" in check({"image": img, "captions": '{"a": '})
    assert "not an object" in check({"image": img, "captions": '["a"]'})
    assert "image" in check({"image": b"nope", "captions": "{}"})


def test_schema_names_and_detection():
    assert get_kind("t2i").name == "t2i_pretrain"
    assert detect_kind(["row_id", "image_list", "instruction_list"]).name == "unified_edit"
    assert detect_kind(["image", "captions", "x"]).name == "t2i_pretrain"
    assert detect_kind(["a", "b"]) is None
    with pytest.raises(ValueError, match="missing"):
        check_columns(get_kind("unified_edit"), ["image_list"])
    with pytest.raises(ValueError, match="unknown dataset kind"):
        get_kind("nope")
