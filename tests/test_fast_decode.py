"""Opt-in fast decode: reduced decoding, a box reduction before the resize, derived resizes.

What must hold exactly: output shapes and token counts (targets are computed from the stored
size), every other sample field, which images are reduced (only those much larger than their
targets), the largest output of an image that was not reduced (bit-identical to the exact
path), the per-call limits and the truncated-image behaviour. What may differ: pixel values,
within the documented quality floor:

    on generated photographic images (``tests/photos.py``) with the standard
    transforms (VAE ``ImageTransform(512, 256, 16)``, ViT ``ImageTransform(490, 224, 14)``),
    the outputs that differ from the exact path's have a mean PSNR of at least 38 dB against
    it; the worst is reported, not promised (``benchmarks/fast_decode.py`` has the tables: its
    edit-sized set has a worst of 33 dB, the ViT output, resized from the VAE output, of a
    WebP whose text and one-pixel stripes sit near the target's resolution). The images here,
    measured: JPEGs of 1024-3000 px, mean 43.6 dB, worst 39.0 dB; JPEG / PNG / WebP of
    640-2400 px, mean 42.5 dB, worst 37.3 dB; each test also asserts a worst of 35 dB, to
    catch a change that spoils a few images and not the mean.
"""

from __future__ import annotations

import io
import itertools
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from editstream import (
    ByteTokenizer,
    FrameSampler,
    ImageTransform,
    SftJSONLIterableDataset,
    T2IIterableDataset,
    UnifiedEditIterableDataset,
)
from editstream.format.images import DEFAULT_MAX_IMAGE_PIXELS
from editstream.loader.decode import ImageRejected, decode_image
from editstream.loader.fast_decode import FAST_DECODE_MARGIN, ReducedImage, decode_image_reduced
from editstream.loader.pixels import load_image
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import VAE, VIT, make_real_packer, synth_and_convert
from photos import photographic_image, photographic_jpeg

PSNR_FLOOR_DB = 35.0
PSNR_MEAN_GOAL_DB = 38.0
STANDARD = (ImageTransform(512, 256, 16), ImageTransform(490, 224, 14))
PHOTOS = ((1024, 768), (1600, 1200), (2048, 1536), (3000, 2000), (1200, 1800))


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = float(((a.double() - b.double()) ** 2).mean())
    return float("inf") if mse == 0 else 10 * np.log10(255**2 / mse)


@pytest.fixture(scope="module")
def photos() -> list[bytes]:
    return [photographic_jpeg(500 + i, w, h) for i, (w, h) in enumerate(PHOTOS)]


@pytest.fixture(scope="module")
def big_data(tmp_path_factory) -> Path:
    """Edit and t2i data (both backends) and vlm_sft data whose images reach 640 px: several times
    the test transforms' targets (VAE 128, ViT 112), so the JPEGs among them are reduced."""
    root = tmp_path_factory.mktemp("fast_decode")
    big = dict(min_side=300, max_side=640, corrupt_fraction=0.2, row_groups_per_file=2, rows_per_group=4)
    synth_and_convert(root / "edit", num_files=2, seed=31, **big)
    synth_and_convert(root / "t2i", schema="t2i_pretrain", num_files=2, seed=32, **big)
    write_synthetic_vlm_dataset(str(root / "sft"), num_lines=24, seed=33, min_side=300, max_side=640, video=False)
    return root


def _jpeg(img: Image.Image, **kwargs) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", **kwargs)
    return buf.getvalue()


# --------------------------------------------------------------------------- the decode


def _scores(images: list[bytes]) -> tuple[list[float], list[int]]:
    """PSNR of every standard output fast decode changed (against the exact path's), and each
    image's scale; shapes must match and the largest output of an unreduced image must not change."""
    scores, scales = [], []
    for data in images:
        exact, fast = load_image(data, STANDARD, False), load_image(data, STANDARD, True)
        assert isinstance(fast, ReducedImage) and fast.size == exact.size
        scales.append(fast.scale)
        for transform in STANDARD:
            a, b = transform.to_uint8(exact), transform.to_uint8(fast)
            assert a.shape == b.shape
            assert transform(fast).shape == transform(exact).shape
            if not torch.equal(a, b):
                scores.append(psnr(a, b))
            else:
                assert fast.scale == 1 or a.shape[1:] == (1, 1)  # a reduced image never keeps its bits
        if fast.scale == 1:  # the VAE output (the largest) is computed from the exact pixels
            assert torch.equal(STANDARD[0].to_uint8(exact), STANDARD[0].to_uint8(fast))
    return scores, scales


def test_quality_floor_on_generated_photos(photos):
    """The documented floor (module docstring) on JPEGs, with the shapes of the exact path."""
    scores, scales = _scores(photos)
    # 1024x768 is under 2 x 1.5 x its 512x384 target: not reduced (only its ViT output derived)
    assert scales == [1, 2, 2, 2, 2]
    assert min(scores) >= PSNR_FLOOR_DB, scores
    assert float(np.mean(scores)) >= PSNR_MEAN_GOAL_DB, scores


def test_quality_floor_on_png_webp_and_jpeg_near_their_target_size():
    """The same floor on the other formats and on edit-sized images: PNG and WebP large enough
    are box-reduced, the 600-1000 px ones are not reduced and only their ViT output is derived."""
    sizes = ((640, 880), (1000, 750), (1600, 1200), (2400, 1400), (900, 900), (1800, 2400))
    images = []
    for i, (w, h) in enumerate(sizes):
        for fmt in ("PNG", "WEBP", "JPEG"):
            buf = io.BytesIO()
            photographic_image(700 + i, w, h).save(buf, format=fmt, quality=90)
            images.append(buf.getvalue())
    scores, scales = _scores(images)
    assert scales == [1] * 6 + [2, 2, 2, 3, 3, 2] + [1] * 3 + [3, 3, 2]  # (w, h) // (1.5 x target)
    assert min(scores) >= PSNR_FLOOR_DB, scores
    assert float(np.mean(scores)) >= PSNR_MEAN_GOAL_DB, scores


def test_reduction_keeps_the_margin_and_the_stored_size():
    img = Image.fromarray(np.random.default_rng(1).integers(0, 256, (1000, 1600, 3), dtype=np.uint8), "RGB")
    data = _jpeg(img, quality=90)
    for target, scale in (((100, 62), 8), ((200, 125), 4), ((400, 250), 2), ((600, 375), 1)):
        out = decode_image_reduced(data, lambda w, h, t=target: t)
        assert isinstance(out, ReducedImage) and out.scale == scale
        assert out.source_size == out.size == (1600, 1000)
        assert out.image.size == (1600 // scale, 1000 // scale) and out.image.mode == "RGB"
        assert out.image.width >= FAST_DECODE_MARGIN * target[0]
        assert out.box == (0.0, 0.0, 1600 / scale, 1000 / scale)
        if scale == 1:  # 1600 / (600 * 1.5) < 2: the exact decode's pixels
            assert out.image.tobytes() == decode_image(data).tobytes()


def test_other_formats_are_box_reduced_and_small_images_decode_exactly():
    img = Image.fromarray(np.random.default_rng(2).integers(0, 256, (900, 1200, 3), dtype=np.uint8), "RGB")
    for fmt in ("PNG", "WEBP", "GIF"):
        buf = io.BytesIO()
        img.save(buf, format=fmt)
        exact = decode_image(buf.getvalue())
        out = decode_image_reduced(buf.getvalue(), lambda w, h: (150, 100))  # 1200 // 225 = 5, 900 // 150 = 6
        assert out.scale == 5 and out.source_size == (1200, 900)
        assert out.image.tobytes() == exact.reduce(5).tobytes()  # (240, 180): the box is the whole source
        assert out.box == (0.0, 0.0, 240.0, 180.0) and out.image.size == (240, 180)
        out = decode_image_reduced(buf.getvalue(), lambda w, h: (500, 400))  # 1200 // 750 = 1
        assert out.scale == 1 and out.image.tobytes() == exact.tobytes()
    odd = io.BytesIO()
    img.crop((0, 0, 1001, 899)).save(odd, format="PNG")
    out = decode_image_reduced(odd.getvalue(), lambda w, h: (100, 100))  # factor 5: 201 x 180, last ones partial
    assert out.scale == 5 and out.image.size == (201, 180) and out.box == (0.0, 0.0, 200.2, 179.8)
    small = _jpeg(img.resize((200, 150)))
    out = decode_image_reduced(small, lambda w, h: (80, 60))  # 200 // (80 * 1.5) < 2
    assert out.scale == 1 and out.image.tobytes() == decode_image(small).tobytes()


def test_smaller_targets_are_resized_from_the_largest_output():
    img = photographic_image(9, 900, 700)
    fast = ReducedImage(img, img.size, 1)
    big = fast.resized((512, 400))
    assert big.tobytes() == img.resize((512, 400), Image.Resampling.BICUBIC).tobytes()  # the exact call
    assert fast.resized((512, 400)) is big  # the same size again: the same pixels, not recomputed
    small = fast.resized((490, 378))
    assert small.tobytes() == big.resize((490, 378), Image.Resampling.BICUBIC).tobytes()
    wider = fast.resized((600, 300))  # not covered by the largest output: from the decode
    assert wider.tobytes() == img.resize((600, 300), Image.Resampling.BICUBIC).tobytes()
    assert fast.resized((512, 400)) is big  # the larger by area stays the one kept


def test_grey_and_cmyk_jpegs_come_out_rgb():
    rng = np.random.default_rng(3)
    grey = Image.fromarray(rng.integers(0, 256, (800, 800), dtype=np.uint8), "L")
    cmyk = Image.fromarray(rng.integers(0, 256, (800, 800, 4), dtype=np.uint8), "CMYK")
    for img in (grey, cmyk):
        out = decode_image_reduced(_jpeg(img), lambda w, h: (64, 64))
        assert isinstance(out, ReducedImage) and out.image.mode == "RGB" and out.image.size == (100, 100)


def test_limits_and_truncated_images_behave_as_in_the_exact_decode():
    img = Image.fromarray(np.random.default_rng(4).integers(0, 256, (1024, 1024, 3), dtype=np.uint8), "RGB")
    data = _jpeg(img, quality=90)
    with pytest.raises(ImageRejected, match="above the limit"):
        decode_image_reduced(data, lambda w, h: (64, 64), max_pixels=1024 * 1024 - 1)
    assert DEFAULT_MAX_IMAGE_PIXELS > 1024 * 1024
    half = data[: len(data) // 2]
    out = decode_image_reduced(half, lambda w, h: (64, 64))
    assert isinstance(out, ReducedImage) and out.image.size == (128, 128)
    assert np.asarray(out.image)[-4:].std() == 0  # the missing part grey-filled, as decode_image does
    with pytest.raises(OSError, match="truncated"):
        Image.open(io.BytesIO(half)).load()  # and Pillow's own flag is still off


# --------------------------------------------------------------------------- the datasets


def _edit(root: Path, fast: bool, backend="parquet", **kw):
    sub = "pq" if backend == "parquet" else "wds"
    return UnifiedEditIterableDataset(
        "edit",
        ImageTransform(**VAE),
        ByteTokenizer(),
        ImageTransform(**VIT),
        data_dir_list=[str(root / "edit" / sub)],
        num_used_data=[2],
        backend=backend,
        fast_decode=fast,
        **kw,
    )


def _t2i(root: Path, fast: bool, **kw):
    return T2IIterableDataset(
        "t2i", ImageTransform(**VAE), ByteTokenizer(), [str(root / "t2i" / "pq")], [2], fast_decode=fast, **kw
    )


def _sft(root: Path, fast: bool, **kw):
    return SftJSONLIterableDataset(
        "sft",
        ImageTransform(**VIT),
        ByteTokenizer(),
        FrameSampler(max_num_frames=4, min_num_frames=2),
        [str(root / "sft" / "data.jsonl")],
        [str(root / "sft" / "media")],
        [24],
        fast_decode=fast,
        **kw,
    )


def _samples(ds, n: int) -> list[dict]:
    ds.set_epoch(5)
    random.seed(1)
    np.random.seed(1)
    return list(itertools.islice(iter(ds), n))


@pytest.mark.parametrize("kind", ["edit", "edit_wds", "t2i", "sft"])
def test_fast_decode_keeps_every_shape_and_token_count(big_data, kind):
    make = {"edit": _edit, "edit_wds": lambda r, f: _edit(r, f, "webdataset"), "t2i": _t2i, "sft": _sft}[kind]
    exact, fast = _samples(make(big_data, False), 16), _samples(make(big_data, True), 16)
    differing = 0
    for a, b in zip(exact, fast, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if key != "image_tensor_list":
                assert a[key] == b[key], key
        assert [t.shape for t in a["image_tensor_list"]] == [t.shape for t in b["image_tensor_list"]]
        differing += sum(not torch.equal(x, y) for x, y in zip(a["image_tensor_list"], b["image_tensor_list"]))
    assert differing > 0  # some JPEGs really were reduced


def test_fast_decode_and_uint8_together_keep_shapes(big_data):
    exact = _samples(_edit(big_data, False), 8)
    both = _samples(_edit(big_data, True, image_dtype="uint8"), 8)
    for a, b in zip(exact, both):
        assert a["num_tokens"] == b["num_tokens"]
        assert [t.shape for t in a["image_tensor_list"]] == [t.shape for t in b["image_tensor_list"]]
        assert all(t.dtype == torch.uint8 for t in b["image_tensor_list"])


def test_foreign_transforms_get_the_exact_decode(big_data):
    class Foreign:
        stride = 16

        def __init__(self):
            self.sizes = []
            self.inner = ImageTransform(**VAE)

        def __call__(self, img):
            self.sizes.append(img.size)
            return self.inner(img)

    ds = _t2i(big_data, True)
    ds.transform = Foreign()
    exact = _samples(_t2i(big_data, False), 6)
    assert [s["image_tensor_list"][0].shape for s in _samples(ds, 6)] == [
        s["image_tensor_list"][0].shape for s in exact
    ]
    assert all(isinstance(size, tuple) for size in ds.transform.sizes)  # PIL sizes, never a ReducedImage


def test_fast_decode_is_off_by_default_and_reaches_datasets_from_a_group_config(big_data):
    assert _edit(big_data, False).fast_decode is False
    assert UnifiedEditIterableDataset.fast_decode is False and SftJSONLIterableDataset.fast_decode is False
    with pytest.raises(TypeError, match="fast_decode must be True or False"):
        _t2i(big_data, "yes")
    packer = make_real_packer(big_data, "parquet")
    assert [ds.fast_decode for ds in packer.grouped_datasets] == [False, False]
    from editstream import make_bagel_multimodal_dataset

    tok = ByteTokenizer()
    groups = {
        "t2i_pretrain": {
            "dataset_names": ["t2i"],
            "weight": 1.0,
            "num_used_data": [2],
            "image_transform_args": dict(VAE),
            "fast_decode": True,
        }
    }
    info = {"t2i_pretrain": {"t2i": {"data_dir": str(big_data / "t2i" / "pq")}}}
    packer = make_bagel_multimodal_dataset(
        tokenizer=tok, special_tokens=tok.special_token_ids(), grouped_datasets=groups, dataset_info=info, num_workers=0
    )
    assert packer.grouped_datasets[0].fast_decode is True
