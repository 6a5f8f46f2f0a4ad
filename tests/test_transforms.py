"""Image decoding (pil_img2rgb, decode_image) and ImageTransform: size rule, tensor bits, settings."""

from __future__ import annotations

import io
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from PIL import Image, UnidentifiedImageError

from editstream.loader.decode import decode_image, pil_img2rgb
from editstream.loader.transforms import DEFAULT_MAX_PIXELS, ImageTransform, target_size

VAE = dict(max_size=1024, min_size=512, stride=16, max_pixels=DEFAULT_MAX_PIXELS)
VIT = dict(max_size=980, min_size=224, stride=14, max_pixels=DEFAULT_MAX_PIXELS)


def _png(img: Image.Image, **save_kwargs) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", **save_kwargs)
    return buf.getvalue()


def _random_rgb(width: int, height: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8), "RGB")


# --------------------------------------------------------------------------- size rule


def test_default_max_pixels_is_the_reference_value():
    assert DEFAULT_MAX_PIXELS == 14 * 14 * 9 * 1024 == 1806336


@pytest.mark.parametrize(
    "size, cfg, img_num, expected",
    [
        # 10000x8000, VAE: s = min(1024/10000, 1) = 0.1024 (> 512/8000); w = 1024; h = round(819.2) = 819,
        # 819/16 = 51.19 -> 816. 1024*816 < max_pixels, long edge 1024 not > 1024.
        ((10000, 8000), VAE, 1, (1024, 816)),
        # 1x1, VAE: s = max(1, 512/1) = 512 -> 512x512, under every cap.
        ((1, 1), VAE, 1, (512, 512)),
        # 3x500, VAE: s = 512/3; w = 512, h = round(85333.3) = 85333 -> 85328 (5333*16).
        # area 512*85328 > max_pixels: s = 1806336 / 43687936; w = round(21.17) = 21 -> 16;
        # h = round(3528.0) = 3528, 3528/16 = 220.5 rounds half-to-even to 220 -> 3520.
        # 3520 > 1024: s = 1024/3520; w = round(4.65) = 5 -> max(16, 0) = 16; h = 1024.
        ((3, 500), VAE, 1, (16, 1024)),
        # 1x4000, ViT: s = 224; w = 224, h = 896000; area way over: s = 1806336/200704000 = 0.009;
        # w = round(2.016) = 2 -> 14; h = round(8064.0) = 8064 (576*14). 8064 > 980: s = 980/8064;
        # w = round(1.70) = 2 -> 14; h = 980 (70*14).
        ((1, 4000), VIT, 1, (14, 980)),
        # 1024x1024, VAE, img_num=4: s = 1 -> 1024x1024 > 1806336/4 = 451584; s = 451584/1048576
        # scales each SIDE by the area ratio: 1024*s = 441.0 -> 441/16 = 27.56 -> 448.
        ((1024, 1024), VAE, 4, (448, 448)),
        # same image, one image per sample: 1048576 < 1806336, kept as is.
        ((1024, 1024), VAE, 1, (1024, 1024)),
        # 300x200, max 512, min 64, stride 16, max_pixels 4096: s = 1; 300/16 = 18.75 -> 304;
        # 200/16 = 12.5 -> 12 (half-to-even) -> 192; 304*192 = 58368 > 4096: s = 4096/58368;
        # w = round(21.33) = 21 -> 16; h = round(13.47) = 13 -> max(16, 16) = 16.
        ((300, 200), dict(max_size=512, min_size=64, stride=16, max_pixels=4096), 1, (16, 16)),
        # 640x480, ViT: s = min(980/640, 1) = 1, max(1, 224/480) = 1; 640/14 = 45.71 -> 644;
        # 480/14 = 34.29 -> 476; 644*476 = 306544 < max_pixels.
        ((640, 480), VIT, 1, (644, 476)),
    ],
)
def test_target_size_hand_computed(size, cfg, img_num, expected):
    assert target_size(*size, img_num=img_num, **cfg) == expected
    transform = ImageTransform(cfg["max_size"], cfg["min_size"], cfg["stride"], max_pixels=cfg["max_pixels"])
    assert transform.target_size(*size, img_num=img_num) == expected


def test_target_size_properties_over_many_shapes():
    rng = random.Random(1234)
    for _ in range(3000):
        stride = rng.choice([8, 14, 16, 32])
        max_size = stride * rng.randint(2, 80)
        min_size = rng.randint(1, max_size)
        max_pixels = rng.choice([DEFAULT_MAX_PIXELS, stride * stride * rng.randint(1, 500)])
        img_num = rng.randint(1, 6)
        w = rng.choice([1, 2, 3, rng.randint(1, 64), rng.randint(1, 5000), rng.randint(1, 20000)])
        h = rng.choice([1, 2, 3, rng.randint(1, 64), rng.randint(1, 5000), rng.randint(1, 20000)])
        nw, nh = target_size(
            w, h, max_size=max_size, min_size=min_size, stride=stride, max_pixels=max_pixels, img_num=img_num
        )
        assert nw % stride == 0 and nh % stride == 0, (w, h, nw, nh, stride)
        assert nw >= stride and nh >= stride
        assert max(nw, nh) <= max_size, (w, h, nw, nh, max_size)


def test_target_size_rejects_empty_images():
    with pytest.raises(ValueError, match="0x5"):
        target_size(0, 5, **VAE)


def test_constructor_validates():
    with pytest.raises(ValueError, match="image_stride must be >= 1, got 0"):
        ImageTransform(512, 256, 0)
    with pytest.raises(ValueError, match=r"image_std must not contain 0, got \(0.5, 0.0, 0.5\)"):
        ImageTransform(512, 256, 16, image_std=(0.5, 0.0, 0.5))
    with pytest.raises(ValueError, match=r"image_mean and image_std need 3 values, got \(0.5,\)"):
        ImageTransform(512, 256, 16, image_mean=(0.5,))


# --------------------------------------------------------------------------- tensors


def test_call_shape_dtype_range_and_stride():
    transform = ImageTransform(512, 64, 16)
    assert transform.stride == 16
    img = _random_rgb(333, 120)
    out = transform(img)
    w, h = transform.target_size(333, 120)
    assert out.dtype == torch.float32 and out.is_contiguous()
    assert tuple(out.shape) == (3, h, w)
    assert out.min().item() >= -1.0 and out.max().item() <= 1.0
    # noise image: the extremes are actually reached
    assert out.min().item() == -1.0 and out.max().item() == 1.0


@pytest.mark.parametrize(
    "size, mean, std",
    [
        ((97, 61), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
        ((64, 64), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),  # no size change: resize still applied (a copy)
        ((200, 40), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    ],
)
def test_tensor_bits_equal_an_independent_numpy_computation(size, mean, std):
    transform = ImageTransform(128, 32, 16, image_mean=mean, image_std=std)
    img = _random_rgb(*size, seed=size[0])
    out = transform(img)
    w, h = transform.target_size(*size)
    pixels = np.asarray(img.resize((w, h), Image.BICUBIC)).astype(np.float32)
    expected = (pixels / np.float32(255) - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    expected = np.ascontiguousarray(expected.transpose(2, 0, 1))
    assert torch.equal(out, torch.from_numpy(expected))


def test_call_is_deterministic_and_uses_img_num():
    transform = ImageTransform(1024, 16, 16, max_pixels=64 * 64)
    img = _random_rgb(64, 64, seed=3)
    assert torch.equal(transform(img), transform(img))
    assert tuple(transform(img).shape) == (3, 64, 64)
    # img_num=4: 4096/4 = 1024 < 64*64 -> side scale 0.25 -> 16x16
    assert tuple(transform(img, img_num=4).shape) == (3, 16, 16)


def test_call_rejects_non_rgb_images():
    with pytest.raises(ValueError, match="RGBA"):
        ImageTransform(64, 16, 16)(Image.new("RGBA", (20, 20)))


# --------------------------------------------------------------------------- pil_img2rgb


def test_rgba_is_composited_on_white():
    arr = np.zeros((2, 3, 4), dtype=np.uint8)
    arr[0, 0] = (10, 20, 30, 0)  # fully transparent -> white
    arr[0, 1] = (10, 20, 30, 255)  # opaque -> unchanged
    arr[0, 2] = (0, 0, 0, 128)  # half transparent black -> mid grey
    out = pil_img2rgb(Image.fromarray(arr, "RGBA"))
    assert out.mode == "RGB" and out.size == (3, 2)
    px = np.asarray(out)
    assert tuple(px[0, 0]) == (255, 255, 255)
    assert tuple(px[0, 1]) == (10, 20, 30)
    assert tuple(px[0, 2]) == (127, 127, 127)  # 255 * (255 - 128) // 255: white under half-opaque black


def test_palette_with_transparency_is_composited_on_white():
    img = Image.new("P", (4, 1))
    img.putpalette([255, 0, 0, 0, 0, 255] + [0] * (254 * 3))
    img.putdata([0, 1, 0, 1])
    decoded = Image.open(io.BytesIO(_png(img, transparency=1)))
    assert decoded.mode == "P" and decoded.info.get("transparency") == 1
    px = np.asarray(pil_img2rgb(decoded))
    assert [tuple(p) for p in px[0]] == [(255, 0, 0), (255, 255, 255), (255, 0, 0), (255, 255, 255)]


def test_grey_with_transparency_zero_counts_as_transparent():
    # transparency == 0 is falsy but present: the "is not None" test must still composite.
    img = Image.fromarray(np.array([[0, 100]], dtype=np.uint8), "L")
    decoded = Image.open(io.BytesIO(_png(img, transparency=0)))
    assert decoded.info.get("transparency") == 0
    px = np.asarray(pil_img2rgb(decoded))
    assert tuple(px[0, 0]) == (255, 255, 255) and tuple(px[0, 1]) == (100, 100, 100)


def test_la_and_other_modes_convert_directly():
    # LA carries alpha but is neither RGBA nor has a transparency entry: the reference drops it.
    la = Image.fromarray(np.array([[[40, 0], [200, 255]]], dtype=np.uint8), "LA")
    assert [tuple(p) for p in np.asarray(pil_img2rgb(la))[0]] == [(40, 40, 40), (200, 200, 200)]
    grey = Image.fromarray(np.array([[7, 250]], dtype=np.uint8), "L")
    assert [tuple(p) for p in np.asarray(pil_img2rgb(grey))[0]] == [(7, 7, 7), (250, 250, 250)]
    cmyk = Image.new("CMYK", (3, 2), (0, 255, 255, 0))
    out = pil_img2rgb(cmyk)
    assert out.mode == "RGB" and np.array_equal(np.asarray(out), np.asarray(cmyk.convert("RGB")))
    assert tuple(np.asarray(out)[0, 0]) == (255, 0, 0)


# --------------------------------------------------------------------------- decode_image


def test_importing_and_decoding_leave_pillows_process_settings_alone():
    """Pillow's globals keep their values for every other user; only editstream's own decode
    calls decode truncated images (checked in a fresh process so nothing else ran first)."""
    script = textwrap.dedent("""
        import io
        from PIL import Image, ImageFile, PngImagePlugin
        before = (Image.MAX_IMAGE_PIXELS, bool(ImageFile.LOAD_TRUNCATED_IMAGES), PngImagePlugin.MAX_TEXT_CHUNK)
        import editstream
        from editstream.loader.decode import decode_image
        import numpy as np
        buf = io.BytesIO()
        noise = np.random.default_rng(0).integers(0, 256, (256, 256, 3), dtype=np.uint8)
        Image.fromarray(noise).save(buf, format="JPEG", quality=90)
        half = buf.getvalue()[: len(buf.getvalue()) // 2]
        assert decode_image(half).size == (256, 256)
        after = (Image.MAX_IMAGE_PIXELS, bool(ImageFile.LOAD_TRUNCATED_IMAGES), PngImagePlugin.MAX_TEXT_CHUNK)
        assert before == after, (before, after)
        try:
            Image.open(io.BytesIO(half)).load()
        except OSError as exc:
            assert "truncated" in str(exc)
        else:
            raise AssertionError("plain Pillow decoded a truncated JPEG: the flag leaked")
        ImageFile.LOAD_TRUNCATED_IMAGES = True  # a user who wants it gets it
        Image.open(io.BytesIO(half)).load()
        ImageFile.LOAD_TRUNCATED_IMAGES = False
        assert decode_image(half).size == (256, 256)  # and editstream still decodes after a reassignment
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_decode_image_formats_to_rgb():
    src = _random_rgb(40, 30, seed=9)
    for fmt in ("JPEG", "PNG", "WEBP"):
        buf = io.BytesIO()
        src.save(buf, format=fmt)
        out = decode_image(buf.getvalue())
        assert out.mode == "RGB" and out.size == (40, 30)
    assert np.array_equal(np.asarray(decode_image(_png(src))), np.asarray(src))


def test_truncated_jpeg_still_decodes():
    buf = io.BytesIO()
    _random_rgb(256, 256, seed=5).save(buf, format="JPEG", quality=90)
    data = buf.getvalue()
    out = decode_image(data[: len(data) // 2])
    assert out.mode == "RGB" and out.size == (256, 256)
    px = np.asarray(out)
    # the missing lower part is filled with a flat colour
    assert px[-8:].std() == 0


@pytest.mark.parametrize("data", [b"", b"not an image at all", bytes(range(256)) * 4])
def test_garbage_bytes_raise(data):
    with pytest.raises(UnidentifiedImageError, match="cannot identify image file"):
        decode_image(data)


@pytest.mark.parametrize("fmt", ["jpeg", "png_rgb", "png_rgba", "png_palette", "webp"])
def test_decode_image_equals_plain_pillow_for_every_synthetic_format(fmt):
    """editstream's decode (limits, Pillow's format factory) gives the reference's pixels:
    ``pil_img2rgb(Image.open(BytesIO(b)))``, for every format the synthetic data writes."""
    from editstream.sandbox.synth_content import make_image

    for seed in range(3):
        data = make_image(np.random.default_rng(seed), 24, 200, fmt)
        expected = pil_img2rgb(Image.open(io.BytesIO(data)))
        got = decode_image(data)
        assert got.mode == expected.mode == "RGB" and got.size == expected.size
        assert got.tobytes() == expected.tobytes()
