"""The opt-in uint8 hand-off: batches of uint8 pixels that normalize to the float32 batch, bit for bit.

Exactness is checked key by key (``assert_batches_equal``: same keys in the same order, same
dtypes, ``torch.equal``) against the default float32 path, on real synthetic data of every
dataset kind, flex and non-flex, in process, through a DataLoader with 2 workers and through
``BagelDataloaderConfig(...).build(...)`` with ``SimpleCustomBatch.to("cpu")``. Every check
also asserts the hand-off really happened (uint8 tensors, padding present), so none is vacuous.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import editstream
from editstream import (
    BagelDataloaderConfig,
    BagelDatasetConfig,
    ByteTokenizer,
    ImageTransform,
    PackedDataset,
    SimpleCustomBatch,
    collate_fn,
    normalize_batch,
)
from editstream.kinds.unified_edit.dataset import UnifiedEditIterableDataset
from editstream.loader.pixels import NORMALIZATION_KEY, transform_image
from editstream.loader.transforms import normalize_pixels
from editstream.packing import normalize as norm_mod
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import (
    REGISTRY,
    SMALL_PACKING,
    VAE,
    VIT,
    assert_batches_equal,
    check_state_contract,
    json_roundtrip,
    synth_pipeline_data,
    torch_roundtrip,
)

# ViT-sized images for vlm_sft (its one transform feeds vit_image items: stride = patch size 14).
SFT = dict(max_image_size=112, min_image_size=28, image_stride=14)
# A second normalization, so batches mix stats (the ViT transform of the edit group uses it).
CLIP = dict(image_mean=(0.48145466, 0.4578275, 0.40821073), image_std=(0.26862954, 0.26130258, 0.27577711))
KINDS = ("unified_edit", "t2i_pretrain", "vlm_sft")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = synth_pipeline_data(tmp_path_factory.mktemp("handoff"))
    write_synthetic_vlm_dataset(str(root / "sft"), num_lines=30, seed=3, max_side=64, video=False)
    return root


def groups_and_info(root: Path, kinds=KINDS, **group_extra):
    groups = {
        "unified_edit": {
            "dataset_names": ["edit"],
            "weight": 2.0,
            "num_used_data": [2],
            "image_transform_args": dict(VAE),
            "vit_image_transform_args": dict(VIT, **CLIP),
        },
        "t2i_pretrain": {
            "dataset_names": ["t2i"],
            "weight": 1.0,
            "num_used_data": [2],
            "image_transform_args": dict(VAE, image_mean=(0.4, 0.5, 0.6), image_std=(0.3, 0.2, 0.1)),
        },
        "vlm_sft": {
            "dataset_names": ["sft"],
            "weight": 1.0,
            "num_used_data": [30],
            "image_transform_args": dict(SFT),
            "frame_sampler_args": {"max_num_frames": 4, "min_num_frames": 2},
        },
    }
    info = {
        "unified_edit": {"edit": {"data_dir": str(root / "edit" / "pq")}},
        "t2i_pretrain": {"t2i": {"data_dir": str(root / "t2i" / "pq")}},
        "vlm_sft": {"sft": {"data_dir": str(root / "sft" / "media"), "jsonl_path": str(root / "sft" / "data.jsonl")}},
    }
    chosen = {kind: {**groups[kind], **group_extra} for kind in kinds}
    return chosen, {kind: info[kind] for kind in kinds}


def config(root: Path, image_dtype: str, kinds=KINDS, use_flex=False, **group_extra) -> BagelDatasetConfig:
    groups, info = groups_and_info(root, kinds, **group_extra)
    return BagelDatasetConfig(
        grouped_datasets=groups,
        dataset_info=info,
        **SMALL_PACKING,
        use_flex=use_flex,
        data_seed=7,
        image_dtype=image_dtype,
    )


def build(cfg: BagelDatasetConfig, num_workers: int = 0, registry=None) -> PackedDataset:
    tok = ByteTokenizer()
    return cfg.build(
        tokenizer=tok,
        special_tokens=tok.special_token_ids(),
        rank=0,
        world_size=1,
        num_workers=num_workers,
        global_seed=11,
        registry=registry,
    )


def assert_handed_off(batches, expect_vit: bool, expect_vae: bool = True) -> None:
    """The uint8 batches really carry uint8 images, and padding is exercised somewhere."""
    padded = [b for b in batches if "padded_images" in b]
    assert bool(padded) == expect_vae
    assert all(b["padded_images"].dtype == torch.uint8 for b in padded)
    sizes = [size for b in padded for size in b[NORMALIZATION_KEY]["padded_images"]["sizes"]]
    largest = [tuple(b["padded_images"].shape[2:]) for b in padded]
    assert not expect_vae or any(tuple(size) not in largest for size in sizes), "padding is never exercised"
    vit = [b for b in batches if "packed_vit_tokens" in b]
    assert bool(vit) == expect_vit
    assert all(b["packed_vit_tokens"].dtype == torch.uint8 for b in vit)


def assert_same_after_normalize(float_batches, uint8_batches) -> None:
    assert len(float_batches) == len(uint8_batches)
    for expected, actual in zip(float_batches, uint8_batches):
        assert NORMALIZATION_KEY not in expected
        assert_batches_equal(expected, normalize_batch(actual))


# --------------------------------------------------------------------------- the arithmetic


@pytest.mark.parametrize(
    "mean, std",
    [((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)), (CLIP["image_mean"], CLIP["image_std"]), ((0.1, 0.9, 0.3), (3.0, 0.01, 1.7))],
)
def test_to_uint8_then_normalize_has_the_bits_of_call(mean, std):
    rng = np.random.default_rng(0)
    transform = ImageTransform(96, 32, 16, image_mean=mean, image_std=std)
    for width, height in ((50, 70), (300, 41), (96, 96)):
        img = Image.fromarray(rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8), "RGB")
        pixels = transform.to_uint8(img)
        assert pixels.dtype == torch.uint8 and pixels.is_contiguous()
        expected = transform(img)
        assert pixels.shape == expected.shape
        assert torch.equal(norm_mod.normalize_uint8(pixels, transform.normalization, 0), expected)
        # channel-last (the ViT token layout) gives the same values, transposed
        last = norm_mod.normalize_uint8(pixels.permute(1, 2, 0).contiguous(), transform.normalization, -1)
        assert torch.equal(last.permute(2, 0, 1), expected)


def test_every_uint8_value_of_every_channel_matches_the_transform():
    """The float32 step is elementwise per channel, so all 256 values per channel cover every image."""
    mean, std = CLIP["image_mean"], CLIP["image_std"]
    transform = ImageTransform(256, 1, 1, image_mean=mean, image_std=std)
    values = np.tile(np.arange(256, dtype=np.uint8), (16, 1))
    img = Image.fromarray(np.stack([values] * 3, axis=-1), "RGB")  # 256x16: resized to itself
    expected = transform(img)
    pixels = transform.to_uint8(img)
    assert torch.equal(pixels[0], torch.from_numpy(values))
    assert torch.equal(norm_mod.normalize_uint8(pixels, (mean, std), 0), expected)


def test_device_arithmetic_and_the_lookup_fallback_reproduce_the_cpu_bits():
    """What another device runs (tensor operands, no scalar division) and its fallback, run on CPU."""
    stats = norm_mod.as_stats((CLIP["image_mean"], CLIP["image_std"]))
    x = torch.randint(0, 256, (2, 3, 17, 9), dtype=torch.uint8)
    expected = norm_mod.normalize_uint8(x, stats, 1)
    assert torch.equal(norm_mod._device_arithmetic(x, stats, 1), expected)
    assert torch.equal(norm_mod._lookup(x, stats, 1), expected)
    assert norm_mod._device_is_exact(torch.device("cpu"), stats)
    # the check is what catches a device dividing by a reciprocal: that is not exact here
    values = torch.arange(256, dtype=torch.uint8).repeat(3, 1).float()
    reciprocal = (values * (1 / 255) - torch.tensor(stats[0])[:, None]) / torch.tensor(stats[1])[:, None]
    assert not torch.equal(reciprocal, torch.from_numpy(norm_mod._reference_table(stats)))


def test_device_kernels_and_the_lookup_give_the_cpu_bits_on_real_batches(root, monkeypatch):
    """What ``.to(device)`` runs off the CPU (torch kernels, or the lookup table when a device fails
    its check), run here on CPU tensors, against the CPU path, on batches mixing normalizations."""
    batches = list(itertools.islice(iter(build(config(root, "uint8"))), 6))
    mixed = set()
    for batch in batches:
        spec, expected = batch[NORMALIZATION_KEY], normalize_batch(batch)
        for exact in (True, False):
            monkeypatch.setattr(norm_mod, "_device_is_exact", lambda device, stats, exact=exact: exact)
            if "padded_images" in spec:
                entry = spec["padded_images"]
                stats = [norm_mod.as_stats(pair) for pair in zip(entry["mean"], entry["std"])]
                mixed.add(("vae", len(set(stats)) > 1))
                sizes = [tuple(size) for size in entry["sizes"]]
                got = norm_mod._padded_on_device(batch["padded_images"], stats, sizes)
                assert torch.equal(got, expected["padded_images"])
            if "packed_vit_tokens" in spec:
                entry = spec["packed_vit_tokens"]
                stats = [norm_mod.as_stats(pair) for pair in zip(entry["mean"], entry["std"])]
                mixed.add(("vit", len(set(stats)) > 1))
                bounds = [0, *itertools.accumulate(entry["lengths"])]
                got = norm_mod._tokens_on_device(batch["packed_vit_tokens"], stats, bounds)
                assert torch.equal(got, expected["packed_vit_tokens"])
    assert {("vae", True), ("vit", True)} <= mixed  # batches whose images carry different stats


def test_normalize_pixels_is_the_transforms_arithmetic():
    x = np.arange(256, dtype=np.uint8).reshape(1, 1, 256).repeat(3, axis=0)
    mean = np.asarray([0.5, 0.25, 0.125], dtype=np.float32)[:, None, None]
    std = np.asarray([0.5, 0.3, 0.7], dtype=np.float32)[:, None, None]
    ref = (x.astype(np.float32) / np.float32(255) - mean) / std
    assert np.array_equal(normalize_pixels(x, mean, std), ref)


def test_transform_image_hands_out_uint8_only_for_plain_image_transforms():
    img = Image.new("RGB", (40, 30), (10, 200, 30))
    transform = ImageTransform(**VAE)
    tensor, norm = transform_image(transform, img, "uint8")
    assert tensor.dtype == torch.uint8 and norm == ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    tensor, norm = transform_image(transform, img, "float32")
    assert tensor.dtype == torch.float32 and norm is None

    class Custom(ImageTransform):
        def __call__(self, img, img_num=1):
            return super().__call__(img, img_num) * 2

    tensor, norm = transform_image(Custom(**VAE), img, "uint8")
    assert tensor.dtype == torch.float32 and norm is None


# --------------------------------------------------------------------------- datasets and packer


def test_dataset_samples_carry_uint8_pixels_and_their_normalization(root):
    def make(dtype):
        return UnifiedEditIterableDataset(
            "edit",
            ImageTransform(**VAE),
            ByteTokenizer(),
            ImageTransform(**VIT, **CLIP),
            data_dir_list=[str(root / "edit" / "pq")],
            num_used_data=[2],
            image_dtype=dtype,
        )

    a, b = make("float32"), make("uint8")
    for ds in (a, b):
        ds.set_epoch(3)
    samples = []
    for ds in (a, b):
        random.seed(5)  # the dataset draws from the global random
        samples.append(list(itertools.islice(iter(ds), 6)))
    for fs, us in zip(*samples):
        assert NORMALIZATION_KEY not in fs
        assert fs["num_tokens"] == us["num_tokens"] and fs["sequence_plan"] == us["sequence_plan"]
        assert len(us[NORMALIZATION_KEY]) == len(us["image_tensor_list"])
        for f, u, norm in zip(fs["image_tensor_list"], us["image_tensor_list"], us[NORMALIZATION_KEY]):
            assert u.dtype == torch.uint8 and u.shape == f.shape
            assert torch.equal(norm_mod.normalize_uint8(u, norm, 0), f)


def test_a_uint8_samples_images_share_one_storage(root):
    """One shared-memory segment and one fd transfer per sample when a DataLoader hands it over."""
    from multiprocessing import resource_sharer
    from multiprocessing.reduction import ForkingPickler

    packer = build(config(root, "uint8", ("unified_edit", "vlm_sft")))
    edit, sft = packer.grouped_datasets
    for ds in (edit, sft):
        ds.set_epoch(1)
    random.seed(2)
    samples = [*itertools.islice(iter(edit), 8), *itertools.islice(iter(sft), 8)]
    multi = [s for s in samples if len(s["image_tensor_list"]) >= 2]
    assert {s["data_indexes"]["dataset_name"] for s in multi} == {"unified_edit", "vlm_sft"}
    for sample in multi:
        assert len({t.untyped_storage().data_ptr() for t in sample["image_tensor_list"]}) == 1
        cache = resource_sharer._resource_sharer._cache
        before = list(cache)
        ForkingPickler.dumps(sample["image_tensor_list"])
        registered = [key for key in cache if key not in before]
        assert len(registered) == 1
        for key in registered:  # nobody will collect it: close the duplicated descriptor
            cache.pop(key)[1]()
    float_sample = next(iter(build(config(root, "float32", ("unified_edit",))).grouped_datasets[0]))
    assert len({t.untyped_storage().data_ptr() for t in float_sample["image_tensor_list"]}) > 1


@pytest.mark.parametrize("use_flex", [False, True])
@pytest.mark.parametrize("kind", [*KINDS, "all"])
def test_packed_batches_normalize_to_the_float32_batches(root, kind, use_flex):
    kinds = KINDS if kind == "all" else (kind,)
    runs = {}
    for dtype in ("float32", "uint8"):
        runs[dtype] = list(itertools.islice(iter(build(config(root, dtype, kinds, use_flex))), 6))
    assert_handed_off(runs["uint8"], expect_vit=kind != "t2i_pretrain", expect_vae=kind != "vlm_sft")
    assert_same_after_normalize(runs["float32"], runs["uint8"])


@pytest.mark.parametrize("use_flex", [False, True])
def test_through_a_dataloader_with_two_workers(root, use_flex):
    runs = {}
    for dtype in ("float32", "uint8"):
        packer = build(config(root, dtype, use_flex=use_flex), num_workers=2)
        loader = torch.utils.data.DataLoader(packer, batch_size=1, num_workers=2, collate_fn=collate_fn)
        runs[dtype] = list(itertools.islice(loader, 8))
    assert {b["batch_data_indexes"][0]["worker_id"] for b in runs["uint8"]} == {0, 1}
    assert_handed_off(runs["uint8"], expect_vit=True)
    assert_same_after_normalize(runs["float32"], runs["uint8"])


@pytest.mark.parametrize("use_flex", [False, True])
def test_through_bagel_dataloader_config_and_batch_to(root, use_flex):
    runs = {}
    for dtype in ("float32", "uint8"):
        loader_config = BagelDataloaderConfig(config(root, dtype, use_flex=use_flex), num_workers=2, pin_memory=False)
        tok = ByteTokenizer()
        built = loader_config.build(
            tokenizer=tok, special_tokens=tok.special_token_ids(), rank=0, world_size=1, batch_size=1, global_seed=5
        )
        runs[dtype] = list(itertools.islice(built.dataloader, 8))
    raw = [b.to_dict() for b in runs["uint8"]]
    assert_handed_off(raw, expect_vit=True)
    for expected, batch in zip(runs["float32"], runs["uint8"]):
        assert isinstance(batch, SimpleCustomBatch)
        moved = batch.to("cpu")
        assert moved is batch and not hasattr(batch, NORMALIZATION_KEY)
        assert_batches_equal(expected, moved)


def test_pin_memory_keeps_uint8_and_cuda_normalizes_after_the_copy(root, monkeypatch):
    batch = next(iter(build(config(root, "uint8"))))
    expected = next(iter(build(config(root, "float32"))))
    custom = SimpleCustomBatch([batch])
    pinned = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda t: pinned.append(t.dtype) or t.clone())
    custom.pin_memory()
    assert torch.uint8 in pinned and custom.padded_images.dtype == torch.uint8
    assert custom.to_dict()[NORMALIZATION_KEY] == batch[NORMALIZATION_KEY]
    copied = []
    real_to = torch.Tensor.to
    monkeypatch.setattr(torch.Tensor, "to", lambda t, *a, **k: copied.append(t.dtype) or real_to(t, *a, **k))
    custom.cuda("cpu")  # the recipe's call; the device here is the CPU
    assert copied.count(torch.uint8) == 2  # padded_images and packed_vit_tokens crossed as uint8
    assert_batches_equal(SimpleCustomBatch([expected]), custom)


def test_group_dtype_overrides_the_packer_either_way(root):
    """A uint8 group under a float32 packer is normalized in the worker; a float32 group under a
    uint8 packer makes that batch key float32. Either way the batch equals the default one."""
    expected = list(itertools.islice(iter(build(config(root, "float32"))), 6))
    mixed = config(root, "float32")
    mixed.grouped_datasets["unified_edit"]["image_dtype"] = "uint8"  # type: ignore[index]
    batches = list(itertools.islice(iter(build(mixed)), 6))
    assert all(NORMALIZATION_KEY not in b for b in batches)
    assert_batches_equal(expected, batches)
    partial = config(root, "uint8")
    partial.grouped_datasets["t2i_pretrain"]["image_dtype"] = "float32"  # type: ignore[index]
    batches = list(itertools.islice(iter(build(partial)), 6))
    assert any(b["padded_images"].dtype == torch.float32 for b in batches if "padded_images" in b)
    assert any(b["packed_vit_tokens"].dtype == torch.uint8 for b in batches if "packed_vit_tokens" in b)
    assert_same_after_normalize(expected, batches)


def test_foreign_float_samples_mix_with_uint8_ones(root):
    """A registry class that knows nothing of image_dtype (its transform-less float images) packs
    beside uint8 groups; the batches still equal the float32 packer's."""
    registry = {**editstream.DATASET_REGISTRY, **REGISTRY}
    runs = {}
    for dtype in ("float32", "uint8"):
        groups, info = groups_and_info(root, ("unified_edit",))
        groups["toy"] = {"dataset_names": ["d0"], "weight": 1.0, "kind": "mixed"}
        info["toy"] = {"d0": {"data_dir": "/data/toy/d0"}}
        cfg = BagelDatasetConfig(
            grouped_datasets=groups,
            dataset_info=info,
            **SMALL_PACKING,
            vit_patch_size=2,
            image_dtype=dtype,
        )
        packer = build(cfg, registry=registry)
        runs[dtype] = list(itertools.islice(iter(packer), 8))
    dtypes = {b["padded_images"].dtype for b in runs["uint8"] if "padded_images" in b}
    assert dtypes == {torch.uint8, torch.float32}  # pure-edit batches handed off, mixed ones not
    assert_same_after_normalize(runs["float32"], runs["uint8"])


def test_uint8_packer_resumes_by_the_state_contract(root):
    def make():
        return build(config(root, "uint8"))

    def compare(expected, actual):
        assert_batches_equal(normalize_batch(expected), normalize_batch(actual))

    state = check_state_contract(make, 3, 3, compare=compare, roundtrips=(json_roundtrip, torch_roundtrip))
    # buffered uint8 samples are saved as references to their rows and parsed again on restore
    assert state["buffer"] and all("sample" not in entry and "num_tokens" in entry for entry in state["buffer"])


# --------------------------------------------------------------------------- normalize_batch, settings


def test_normalize_batch_leaves_other_batches_alone_and_checks_its_entry(root):
    batch = next(iter(build(config(root, "uint8"))))
    plain = normalize_batch({"a": torch.ones(2)})
    assert list(plain) == ["a"]
    with pytest.raises(TypeError, match="packed batch dict or SimpleCustomBatch"):
        normalize_batch([batch])
    broken = dict(batch, **{NORMALIZATION_KEY: {"padded_images": {**batch[NORMALIZATION_KEY]["padded_images"]}}})
    broken[NORMALIZATION_KEY]["padded_images"]["sizes"] = broken[NORMALIZATION_KEY]["padded_images"]["sizes"][:-1]
    with pytest.raises(ValueError, match="image_normalization lists"):
        normalize_batch(broken)
    unknown = dict(batch, **{NORMALIZATION_KEY: {"padded_images_x": {}}})
    with pytest.raises(ValueError, match="unknown keys"):
        normalize_batch(unknown)
    with pytest.raises(TypeError, match="expects a uint8 tensor"):
        norm_mod.normalize_uint8(torch.zeros(3, 2, 2), ((0.5,) * 3, (0.5,) * 3), 0)


def test_a_sample_with_a_malformed_normalization_is_dropped(root):
    from editstream.packing.validation import sample_problem

    image = torch.zeros(3, 28, 28, dtype=torch.uint8)
    sample = {
        "sequence_plan": [{"type": "vit_image", "enable_cfg": 0, "loss": 0, "special_token_loss": 0}],
        "text_ids_list": [],
        "image_tensor_list": [image],
        "num_tokens": 4,
        "data_indexes": 0,
    }
    assert sample_problem(dict(sample, image_normalization=[((0.5,) * 3, (0.5,) * 3)]), 14) is None
    assert sample_problem(dict(sample, image_normalization=[None]), 14) is None
    assert "one (mean, std) or None per image" in sample_problem(dict(sample, image_normalization=[]), 14)
    assert "3 numbers each" in sample_problem(dict(sample, image_normalization=[((0.5,) * 2, (0.5,) * 3)]), 14)
    assert "zero std" in sample_problem(dict(sample, image_normalization=[((0.5,) * 3, (0.5, 0, 1))]), 14)


def test_image_dtype_is_validated_everywhere(root):
    with pytest.raises(ValueError, match="image_dtype must be 'float32' or 'uint8', got 'float16'"):
        config(root, "float16")
    cfg = config(root, "float32")
    tok = ByteTokenizer()
    with pytest.raises(ValueError, match="PackedDataset: image_dtype must be one of"):
        PackedDataset(cfg, tok, tok.special_token_ids(), 0, 1, 0, image_dtype="uint16")
    with pytest.raises(ValueError, match="dataset 'edit': image_dtype must be one of"):
        UnifiedEditIterableDataset(
            "edit", ImageTransform(**VAE), tok, None, [str(root / "edit" / "pq")], [1], image_dtype="int8"
        )


def test_the_packer_passes_uint8_only_to_classes_that_take_it(root):
    registry = {**editstream.DATASET_REGISTRY, **REGISTRY}
    groups, info = groups_and_info(root, ("t2i_pretrain",))
    groups["toy"] = {"dataset_names": ["d0"], "weight": 1.0}
    info["toy"] = {"d0": {"data_dir": "/data/toy/d0"}}
    packer = build(
        BagelDatasetConfig(grouped_datasets=groups, dataset_info=info, image_dtype="uint8"), registry=registry
    )
    t2i, toy = packer.grouped_datasets
    assert t2i.image_dtype == "uint8"
    assert "image_dtype" not in toy.extra  # ToyDataset takes **extra, not image_dtype
    assert build(config(root, "float32", ("t2i_pretrain",))).grouped_datasets[0].image_dtype == "float32"
