"""Builders, token counts and the RNG contract of parse_row (SPEC 3, 5b, 6) on real images."""

from __future__ import annotations

import io
import os
import random

import PIL
import pytest
import torch
from PIL import Image

from editstream import (
    ByteTokenizer,
    ImageTransform,
    InterleavedBaseIterableDataset,
    T2IIterableDataset,
    UnifiedEditIterableDataset,
    write_synthetic_dataset,
)
from editstream.loader.decode import decode_image
from helpers import VAE, VIT


def png(w, h, color=(200, 10, 10), fmt="PNG"):
    buf = io.BytesIO()
    Image.new("RGB", (w, h), color).save(buf, format=fmt)
    return buf.getvalue()


class Builder(InterleavedBaseIterableDataset):
    def __init__(self):
        super().__init__("builder")
        self.tokenizer = ByteTokenizer()
        self.transform = ImageTransform(**VAE)
        self.vit_transform = ImageTransform(**VIT)


def edit_dataset(root, **kw):
    kw.setdefault("num_workers", 0)
    return UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(**VAE),
        ByteTokenizer(),
        ImageTransform(**VIT),
        [str(root)],
        [kw.pop("num_used", 2)],
        None,
        **kw,
    )


def test_add_text_counts_tokens_and_flags():
    b = Builder()
    data = b._add_text(b._init_data(), "héllo", need_loss=True, enable_cfg=False)
    assert data["text_ids_list"] == [list("héllo".encode())]
    assert data["num_tokens"] == 6
    assert data["sequence_plan"] == [
        {"type": "text", "enable_cfg": 0, "loss": 1, "special_token_loss": 0, "special_token_label": None}
    ]


def test_add_image_order_tokens_and_distinct_tensors():
    b = Builder()
    img = decode_image(png(100, 60))
    data = b._add_image(b._init_data(), img, need_loss=True, need_vae=True, need_vit=True, enable_cfg=True)
    plan = data["sequence_plan"]
    assert [(p["type"], p["enable_cfg"], p["loss"]) for p in plan] == [
        ("vae_image", 0, 1),
        ("vae_image", 1, 0),
        ("vit_image", 1, 0),
    ]
    vae1, vae2, vit = data["image_tensor_list"]
    assert vae1 is not vae2 and torch.equal(vae1, vae2)
    assert torch.equal(vae1, b.transform(img)) and torch.equal(vit, b.vit_transform(img))
    expect = 2 * (vae1.shape[1] * vae1.shape[2] // 16**2) + vit.shape[1] * vit.shape[2] // 14**2
    assert data["num_tokens"] == expect
    with pytest.raises(ValueError, match="_add_image needs at least one of need_loss, need_vae, need_vit"):
        b._add_image(b._init_data(), img, False, False, False)


def test_add_image_vae_only_and_vit_only():
    b = Builder()
    img = decode_image(png(64, 64))
    d = b._add_image(b._init_data(), img, need_loss=False, need_vae=True, need_vit=False, enable_cfg=False)
    assert [(p["type"], p["enable_cfg"], p["loss"]) for p in d["sequence_plan"]] == [("vae_image", 0, 0)]
    d = b._add_image(b._init_data(), img, need_loss=False, need_vae=False, need_vit=True)
    assert [p["type"] for p in d["sequence_plan"]] == ["vit_image"]


@pytest.mark.parametrize("need_loss", [True, False])
def test_add_video_frames(need_loss):
    b = Builder()
    frames = [decode_image(png(64, 48, (i * 40, 0, 0))) for i in range(3)]
    d = b._add_video(b._init_data(), frames, [0, 4, 10], need_loss=need_loss, need_vae=not need_loss)
    plan = d["sequence_plan"]
    assert [p["split_start"] for p in plan] == [True, False, False]
    assert [p["split_end"] for p in plan] == [False, False, True]
    assert [p.get("frame_delta") for p in plan] == [4, 6, None]
    assert [(p["loss"], p["enable_cfg"]) for p in plan] == [(int(need_loss), int(not need_loss))] * 3
    t = d["image_tensor_list"][0]
    assert d["num_tokens"] == 3 * (t.shape[1] * t.shape[2] // 256)
    with pytest.raises(ValueError, match="_add_video needs exactly one of need_loss, need_vae"):
        b._add_video(b._init_data(), frames, [0, 1, 2], need_loss=True, need_vae=True)


def count_tokens(data):
    """Text ids plus one token per 16x16 (VAE) or 14x14 (ViT) patch of each image."""
    tokens = sum(len(t) for t in data["text_ids_list"])
    images = [p for p in data["sequence_plan"] if p["type"] != "text"]
    for item, image in zip(images, data["image_tensor_list"]):
        tokens += image.shape[1] * image.shape[2] // (14 if item["type"] == "vit_image" else 16) ** 2
    return tokens


def edit_row(n_images, phrasings=2):
    colors = [(i * 50 % 256, 100, 200 - i * 30) for i in range(n_images)]
    return {
        "image_list": [png(64 + 16 * i, 48, c) for i, c in enumerate(colors)],
        "instruction_list": [[f"edit{i}-v{j}" for j in range(phrasings)] for i in range(n_images - 1)],
    }


def bare_edit():
    """A UnifiedEditIterableDataset with transforms and tokenizer but no data directory."""
    ds = UnifiedEditIterableDataset.__new__(UnifiedEditIterableDataset)
    InterleavedBaseIterableDataset.__init__(ds, "unified_edit")
    ds.tokenizer, ds.transform, ds.vit_transform = ByteTokenizer(), ImageTransform(**VAE), ImageTransform(**VIT)
    return ds


def parse(row, seed):
    ds = bare_edit()
    random.seed(seed)
    data = ds.parse_row(row)
    return data, random.random()


def mirror(n, instructions, seed):
    """The SPEC 6 draw sequence computed independently with a private Random."""
    r = random.Random(seed)
    start = r.choice(range(n - 1))
    end = r.choice(range(start + 1, min(start + 3, n)))
    items = [("vae_image", 1, 0), ("vit_image", 1, 0)]
    texts = []
    if end - start > 1 and r.random() < 0.5:
        if end == n - 1:
            end -= 1
        texts.append(". ".join(r.choice(instructions[i - 1]) for i in range(start + 1, end + 1)) + ".")
        items += [("text", 1, 0), ("vae_image", 0, 1)]
    else:
        for i in range(start + 1, end + 1):
            texts.append(r.choice(instructions[i - 1]))
            items.append(("text", 1, 0))
            items += (
                [("vae_image", 0, 1)] if i == end else [("vae_image", 0, 1), ("vae_image", 1, 0), ("vit_image", 1, 0)]
            )
    return items, texts, r.random()


def test_two_images_hand_worked():
    # n = 2: start must be 0 and end 1, no u is drawn; the only other draw picks the phrasing.
    row = edit_row(2, phrasings=3)
    data, next_draw = parse(row, seed=123)
    r = random.Random(123)
    assert r.choice(range(1)) == 0 and r.choice(range(1, 2)) == 1
    phrase = r.choice(row["instruction_list"][0])
    assert next_draw == r.random()
    assert [(p["type"], p["enable_cfg"], p["loss"]) for p in data["sequence_plan"]] == [
        ("vae_image", 1, 0),
        ("vit_image", 1, 0),
        ("text", 1, 0),
        ("vae_image", 0, 1),
    ]
    assert data["text_ids_list"] == [list(phrase.encode())]


@pytest.mark.parametrize("n", [3, 4, 5])
@pytest.mark.parametrize("seed", range(12))
def test_rng_contract_matches_independent_mirror(n, seed):
    row = edit_row(n)
    data, next_draw = parse(row, seed)
    items, texts, mirror_next = mirror(n, row["instruction_list"], seed)
    assert [(p["type"], p["enable_cfg"], p["loss"]) for p in data["sequence_plan"]] == items
    assert [bytes(t).decode() for t in data["text_ids_list"]] == texts
    assert next_draw == mirror_next  # same number of draws, in the same order
    assert data["num_tokens"] == count_tokens(data)


def test_concatenated_instruction_path_is_exercised():
    # Find seeds that take the u < 0.5 branch for n = 4 and check the joined instruction text.
    row = edit_row(4)
    hits = 0
    for seed in range(60):
        items, texts, _ = mirror(4, row["instruction_list"], seed)
        if len(texts) == 1 and texts[0].endswith("."):
            data, _ = parse(row, seed)
            assert bytes(data["text_ids_list"][0]).decode() == texts[0]
            hits += 1
    assert hits > 0


def test_bad_rows_fail_after_the_same_draws():
    # fewer than 2 images: fails at step 1, before any draw
    random.seed(5)
    expected = random.random()
    with pytest.raises(IndexError, match="Cannot choose from an empty sequence"):
        parse({"image_list": [png(32, 32)], "instruction_list": []}, seed=5)
    random.seed(5)
    assert random.random() == expected
    # undecodable selected image: fails after the two index draws
    row = edit_row(2)
    row["image_list"][0] = b"not an image at all"
    ds = bare_edit()
    random.seed(9)
    with pytest.raises(PIL.UnidentifiedImageError, match="cannot identify image file"):
        ds.parse_row(row)
    after = random.random()
    r = random.Random(9)
    r.choice(range(1)), r.choice(range(1, 2))
    assert after == r.random()
    # instruction_list too short: fails when the missing entry is drawn, not before
    row = edit_row(3)
    row["instruction_list"] = row["instruction_list"][:1]
    outcomes = set()
    for seed in range(20):
        try:
            parse(row, seed)
            outcomes.add("ok")
        except IndexError:
            outcomes.add("fail")
    assert outcomes == {"ok", "fail"}  # only chains that reach the missing entry fail


def test_edit_stream_drops_planted_bad_rows_and_keeps_order(tmp_path):
    summary = write_synthetic_dataset(
        str(tmp_path / "edit"),
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=6,
        seed=3,
        corrupt_fraction=0.25,
        max_side=96,
    )
    ds = edit_dataset(tmp_path / "edit")
    random.seed(0)
    it = iter(ds)
    total = summary["num_rows"]
    samples = []
    while True:
        s = next(it)
        samples.append(s)
        if ds.drops.total + len(samples) >= total:
            break
    # One pass: every row was yielded, in order, or dropped, once.
    positions = [s["data_indexes"]["data_indexes"] for s in samples]
    assert positions == sorted(positions) and len({tuple(p) for p in positions}) == len(positions)
    units = ds.data_paths_per_rank
    yielded = {(*units[unit], row) for unit, row in positions}
    dropped = [(d.location["file"], d.location["row_group"], d.location["row"]) for d in ds.drops.recent]
    assert len(set(dropped)) == len(dropped) == ds.drops.counts["bad_row"] == ds.drops.total
    assert yielded.isdisjoint(dropped) and yielded | set(dropped) == {(*u, row) for u in units for row in range(6)}
    # A single-image row always fails; a garbage image or a missing instruction only when drawn.
    kinds = {(c["file"], c["row_group"], c["row"]): c["kind"] for c in summary["corrupt_rows"]}
    always = {position for position, kind in kinds.items() if kind == "single_image"}
    assert always and always <= set(dropped) <= set(kinds)
    for s in samples:
        assert s["num_tokens"] == count_tokens(s)
        assert len(s["image_tensor_list"]) == sum(p["type"] != "text" for p in s["sequence_plan"])


def test_t2i_stream_units_are_files(tmp_path):
    summary = write_synthetic_dataset(
        str(tmp_path / "t2i"),
        schema="t2i_pretrain",
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=4,
        seed=1,
        corrupt_fraction=0.2,
        max_side=96,
    )
    ds = T2IIterableDataset(
        "t2i_pretrain", ImageTransform(**VAE), ByteTokenizer(), [str(tmp_path / "t2i")], [2], num_workers=0
    )
    assert sorted(ds.data_paths) == [str(tmp_path / "t2i" / f"part-0000{f}.parquet") for f in (0, 1)]
    listed = [n for n in os.listdir(tmp_path / "t2i") if n.endswith(".parquet")]
    assert ds.data_paths == [str(tmp_path / "t2i" / n) for n in listed]  # the directory's order, as NeMo's
    random.seed(0)
    it = iter(ds)
    good = summary["num_rows"] - len(summary["corrupt_rows"])
    samples = [next(it) for _ in range(good)]
    # [file, row_group, row] of every good row, in the shuffled file order (bad rows always fail here)
    corrupt = {(c["file"], c["row_group"], c["row"]) for c in summary["corrupt_rows"]}
    expected = [
        [unit, rg, row]
        for unit, path in enumerate(ds.data_paths_per_rank)
        for rg in range(2)
        for row in range(4)
        if (path, rg, row) not in corrupt
    ]
    assert [s["data_indexes"]["data_indexes"] for s in samples] == expected
    assert ds.drops.counts["bad_row"] == len(summary["corrupt_rows"])
    s = samples[0]
    assert [p["type"] for p in s["sequence_plan"]] == ["text", "vae_image"]
    assert s["sequence_plan"][0]["enable_cfg"] == 1 and s["sequence_plan"][1]["loss"] == 1
