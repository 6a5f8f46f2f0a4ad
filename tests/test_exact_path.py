"""The exact path (the default) gives the reference's tensors bit for bit, for every format.

The reference (BAGEL / NeMo's ``ImageTransform``) decodes with ``Image.open``, converts with its
``pil_img2rgb``, resizes with torchvision's ``F.resize`` on the PIL image (Pillow's bicubic
resize), then ``ToTensor`` and ``Normalize(inplace=True)`` in torch. That computation is written
out here in torch (torchvision is not needed for it) and compared with editstream's decode and
transform, which skip copies and do the arithmetic in numpy.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from editstream import ImageTransform
from editstream.loader.decode import decode_image
from editstream.loader.pixels import load_image
from photos import photographic_image

TRANSFORMS = (
    ImageTransform(512, 256, 16),
    ImageTransform(490, 224, 14),
    ImageTransform(256, 64, 8, image_mean=(0.485, 0.456, 0.406), image_std=(0.229, 0.224, 0.225)),
)


def _reference_rgb(image: Image.Image) -> Image.Image:
    """The reference's ``pil_img2rgb``: transparent images composited on white, the rest converted."""
    if image.mode == "RGBA" or image.info.get("transparency") is not None:
        image = image.convert("RGBA")
        white = Image.new("RGB", image.size, (255, 255, 255))
        white.paste(image, mask=image.split()[3])
        return white
    return image.convert("RGB")


def _reference_tensor(data: bytes, transform: ImageTransform) -> torch.Tensor:
    """Decode, resize, ``ToTensor`` and ``Normalize`` as the reference does them (torch ops, their order)."""
    image = _reference_rgb(Image.open(io.BytesIO(data)))
    width, height = transform.target_size(*image.size)
    image = image.resize((width, height), Image.Resampling.BICUBIC)
    pixels = torch.from_numpy(np.array(image, np.uint8, copy=True)).view(height, width, 3)
    x = pixels.permute((2, 0, 1)).contiguous().to(dtype=torch.float32).div(255)
    mean = torch.as_tensor(transform.image_mean, dtype=torch.float32)
    std = torch.as_tensor(transform.image_std, dtype=torch.float32)
    return x.sub_(mean[:, None, None]).div_(std[:, None, None])


def _encoded(image: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt, **({"quality": 90} if fmt in ("JPEG", "WEBP") else {}))
    return buf.getvalue()


def _cases() -> list[tuple[str, bytes]]:
    cases = []
    for i, (w, h) in enumerate(((97, 61), (640, 880), (1000, 750), (1700, 1100))):
        photo = photographic_image(40 + i, w, h)
        for fmt in ("JPEG", "PNG", "WEBP"):
            cases.append((f"{fmt}-{w}x{h}", _encoded(photo, fmt)))
    photo = photographic_image(50, 300, 200)
    rgba = photo.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(photo.size))
    cases.append(("PNG-rgba", _encoded(rgba, "PNG")))
    cases.append(("WEBP-rgba", _encoded(rgba, "WEBP")))
    palette = photo.convert("P", palette=Image.Palette.ADAPTIVE)
    palette.info["transparency"] = 0
    cases.append(("PNG-palette-transparent", _encoded(palette, "PNG")))
    cases.append(("JPEG-grey", _encoded(photo.convert("L"), "JPEG")))
    cases.append(("JPEG-cmyk", _encoded(photo.convert("CMYK"), "JPEG")))
    cases.append(("GIF", _encoded(photo, "GIF")))
    return cases


CASES = _cases()


@pytest.mark.parametrize("name, data", CASES, ids=[name for name, _ in CASES])
def test_the_exact_path_is_the_reference_computation(name, data):
    image = load_image(data, TRANSFORMS, False)
    assert image.mode == "RGB"
    for transform in TRANSFORMS:
        expected = _reference_tensor(data, transform)
        got = transform(image)
        assert got.dtype == torch.float32 and got.is_contiguous()
        assert torch.equal(got, expected), (name, transform)


def test_the_uint8_half_is_the_references_resized_pixels():
    for _, data in CASES[:12]:
        image = decode_image(data)
        for transform in TRANSFORMS:
            resized = _reference_rgb(Image.open(io.BytesIO(data))).resize(
                transform.target_size(*image.size), Image.Resampling.BICUBIC
            )
            expected = torch.from_numpy(np.asarray(resized).copy()).permute(2, 0, 1)
            assert torch.equal(transform.to_uint8(image), expected)


def test_decode_image_keeps_its_own_decode_and_the_callers_images_alone():
    """An RGB decode is handed out as it is (no copy); a converted one is a new image, and
    ``pil_img2rgb`` (public) still returns a copy as the reference does."""
    from editstream import pil_img2rgb

    photo = photographic_image(60, 120, 80)
    assert pil_img2rgb(photo) is not photo and pil_img2rgb(photo).tobytes() == photo.tobytes()
    for fmt, mode in (("JPEG", "RGB"), ("PNG", "RGB"), ("WEBP", "RGB")):
        out = decode_image(_encoded(photo, fmt))
        assert out.mode == mode and out.size == photo.size
    grey = decode_image(_encoded(photo.convert("L"), "PNG"))
    assert grey.mode == "RGB" and grey.tobytes() == photo.convert("L").convert("RGB").tobytes()
