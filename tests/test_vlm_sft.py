"""vlm_sft on the source backend against an independent mirror of the reference (SPEC 11).

``Mirror`` below re-implements the reference's ``SftJSONLIterableDataset`` and ``FrameSampler``
from the behavioural notes with ``open().readlines()``, ``os.path``, ``os.listdir``, PIL and
decord, without calling editstream's dataset, source, sample or video code. Only the transform
and the tokenizer (inputs of both, as in the reference) are shared. Streams must be equal:
plans, token ids, token counts, ``data_indexes`` and image tensors (``torch.equal``).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import random
import re

import numpy as np
import pytest
import torch
from PIL import Image

from editstream import ByteTokenizer, FrameSampler, ImageTransform, SftJSONLIterableDataset
from editstream.kinds.vlm_sft.sample import change_format
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import assert_batches_equal, first

SMALL = dict(max_image_size=64, min_image_size=32, image_stride=16)
FRAMES = dict(max_num_frames=8, min_num_frames=4)


# ---------------------------------------------------------------------------------------
# The mirror


def mirror_rgb(img):
    if img.mode == "RGBA" or img.info.get("transparency") is not None:
        img = img.convert("RGBA")
        white = Image.new("RGB", img.size, (255, 255, 255))
        white.paste(img, mask=img.split()[3])
        return white
    return img.convert("RGB")


def mirror_indices(num_frames, vlen, input_fps=1):
    acc = min(num_frames, vlen)
    edges = np.linspace(start=0, stop=vlen, num=acc + 1).astype(int)
    ranges = [(edges[i], edges[i + 1] - 1) for i in range(len(edges) - 1)]
    try:
        out = [random.choice(range(a, b)) for a, b in ranges]
    except IndexError:
        out = np.random.permutation(vlen)[:acc]
        out.sort()
        out = list(out)
    if len(out) < num_frames:
        padded = [out[-1]] * num_frames
        padded[: len(out)] = out
        out = padded
    return out


def mirror_frames(path, max_frames, min_frames):
    if path.endswith("/"):
        names = sorted(
            os.listdir(path),
            key=lambda n: int(m.group(1)) if (m := re.search(r"_(\d+).jpg$", os.path.basename(n))) else -1,
        )
        frames = [Image.open(os.path.join(path, n)).convert("RGB") for n in names]
        t = np.random.randint(min_frames, max_frames + 1)
        if len(frames) > t:
            frames = [frames[i] for i in mirror_indices(t, len(frames))]
        return frames
    import decord

    vr = decord.VideoReader(path, num_threads=1)
    fps = vr.get_avg_fps()
    t = np.random.randint(min_frames, max_frames + 1)
    arr = vr.get_batch(mirror_indices(t, len(vr), fps)).asnumpy()
    return [Image.fromarray(arr[i]) for i in range(arr.shape[0])]


class Mirror(torch.utils.data.IterableDataset):
    """The reference's vlm_sft iteration, straight from the notes (never ends; drops silently)."""

    def __init__(self, transform, tokenizer, jsonls, dirs, counts, *, rank=0, world=1, seed=42, shuffle=False):
        super().__init__()
        self.transform, self.tokenizer = transform, tokenizer
        rng = random.Random()
        pairs = []
        for path, image_dir, n in zip(jsonls, dirs, counts):
            with open(path) as f:
                lines = f.readlines()
            if shuffle:
                rng.seed(0)
                rng.shuffle(lines)
            pairs.extend((line, image_dir) for line in lines[:n])
        pairs = sorted(pairs, key=lambda x: (x[0], x[1]))
        rng.seed(seed)
        rng.shuffle(pairs)
        per = len(pairs) // world
        self.rank_pairs = pairs[rank * per : (rank + 1) * per]

    def parse(self, line, image_dir):
        item = json.loads(line)
        images = None
        if "image" in item:
            names = item["image"] if type(item["image"]) == list else [item["image"]]  # noqa: E721 - the reference's check
            images = [mirror_rgb(Image.open(os.path.join(image_dir, n))) for n in names]
        elif "video" in item:
            images = mirror_frames(os.path.join(image_dir, item["video"]), **FRAMES_MIRROR)
            for turn in item["conversations"]:
                if "<video>" in turn["value"]:
                    turn["value"] = turn["value"].replace("<video>", "<image>" * len(images))
                    break
                raise ValueError("Cannot find <video> in the conversation!")
        return item, images

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is None:
            rows, wid = self.rank_pairs, 0
        else:
            per = len(self.rank_pairs) // info.num_workers
            rows, wid = self.rank_pairs[per * info.id : per * (info.id + 1)][::-1], info.id
        while True:
            for row_idx, (line, image_dir) in enumerate(rows):
                try:
                    item, images = self.parse(line, image_dir)
                except Exception:  # noqa: BLE001 - the reference drops anything here
                    continue
                sample = self.build(item, images)
                if sample is not None:
                    sample["data_indexes"] = {"data_indexes": row_idx, "worker_id": wid, "dataset_name": "vlm_sft"}
                    yield sample

    @staticmethod
    def elements(item, num_images):
        elements = []
        for turn in item["conversations"]:
            if turn["from"] == "human" and "<image>" not in turn["value"]:
                elements.append(("text", 0, turn["value"]))
            elif turn["from"] == "human":
                pieces = turn["value"].split("<image>")
                for i, piece in enumerate(pieces):
                    if piece.strip():
                        elements.append(("text", 0, piece.strip()))
                    if i != len(pieces) - 1 and i < num_images:
                        elements.append(("image", 0, None))
            elif turn["from"] == "gpt":
                elements.append(("text", 1, turn["value"]))
        return elements

    def build(self, item, images):
        tensors, texts, plan, tokens = [], [], [], 0
        for img in images or []:
            t = self.transform(img, img_num=len(images))
            tensors.append(t)
            tokens += t.shape[1] * t.shape[2] // self.transform.stride**2
        for kind, loss, text in self.elements(item, len(tensors)):
            item_plan = {"type": "vit_image", "enable_cfg": 0, "loss": 0, "special_token_loss": 0}
            if kind == "text":
                ids = self.tokenizer.encode(text)
                if not ids:
                    continue
                texts.append(ids)
                tokens += len(ids)
                item_plan = {"type": "text", "enable_cfg": 0, "loss": loss, "special_token_loss": 0}
            plan.append({**item_plan, "special_token_label": None})
        if not any(p["loss"] for p in plan):
            return None
        return {"image_tensor_list": tensors, "text_ids_list": texts, "sequence_plan": plan, "num_tokens": tokens}


FRAMES_MIRROR = dict(max_frames=8, min_frames=4)


# ---------------------------------------------------------------------------------------
# Data and helpers


@pytest.fixture(scope="module")
def two_sets(tmp_path_factory):
    """Two JSONL + media dir pairs (one with MP4s when OpenCV can write them)."""
    root = tmp_path_factory.mktemp("vlm")
    a = write_synthetic_vlm_dataset(str(root / "a"), num_lines=40, seed=3, max_side=64)
    b = write_synthetic_vlm_dataset(str(root / "b"), num_lines=30, seed=4, max_side=64, video=False)
    return a, b


def sft(jsonls, dirs, counts, **kw):
    kw.setdefault("num_workers", 0)
    sampler = kw.pop("frame_sampler", None) or FrameSampler(**FRAMES)
    return SftJSONLIterableDataset(
        "vlm_sft", ImageTransform(**SMALL), ByteTokenizer(), sampler, jsonls, dirs, counts, **kw
    )


def run(ds, n, workers=0, seed=0):
    random.seed(seed)
    np.random.seed(seed)
    if workers == 0:
        return first(iter(ds), n)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=workers, generator=torch.Generator().manual_seed(seed)
    )
    return first(loader, n)


# ---------------------------------------------------------------------------------------
# The source backend is the reference


@pytest.mark.parametrize("seed", [0, 1, 7, 42, 1234])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("counts", [(100, 100), (25, 12)])
def test_source_backend_equals_the_mirror(two_sets, seed, shuffle, counts):
    (a, b), transform, tok = two_sets, ImageTransform(**SMALL), ByteTokenizer()
    jsonls, dirs = [a["jsonl"], b["jsonl"]], [a["media_dir"], b["media_dir"]]
    mirror = Mirror(transform, tok, jsonls, dirs, counts, seed=seed, shuffle=shuffle)
    ds = sft(jsonls, dirs, list(counts), shuffle_lines=shuffle, shuffle_seed=0)
    ds.set_epoch(seed)
    n = len(mirror.rank_pairs) + 5  # more than a pass: the wrap-around is covered too
    assert list(ds.data_paths_per_rank) == mirror.rank_pairs
    assert_batches_equal(run(mirror, n, seed=seed), run(ds, n, seed=seed))


@pytest.mark.parametrize("world,rank,workers", [(2, 1, 0), (2, 0, 2), (3, 2, 2)])
def test_source_backend_equals_the_mirror_per_rank_and_worker(two_sets, world, rank, workers):
    (a, b), transform, tok = two_sets, ImageTransform(**SMALL), ByteTokenizer()
    jsonls, dirs = [a["jsonl"], b["jsonl"]], [a["media_dir"], b["media_dir"]]
    mirror = Mirror(transform, tok, jsonls, dirs, [100, 100], rank=rank, world=world, seed=5)
    ds = sft(jsonls, dirs, [100, 100], local_rank=rank, world_size=world, num_workers=workers)
    ds.set_epoch(5)
    assert_batches_equal(run(mirror, 30, workers, seed=9), run(ds, 30, workers, seed=9))


def test_shuffle_lines_only_chooses_which_lines_survive_the_cut(two_sets):
    a, _ = two_sets
    cut = sft([a["jsonl"]], [a["media_dir"]], [15], shuffle_lines=True, shuffle_seed=3)
    full = sft([a["jsonl"]], [a["media_dir"]], [100])
    with open(a["jsonl"]) as f:
        lines = f.readlines()
    order = list(range(len(lines)))
    random.Random(3).shuffle(order)
    assert sorted(cut.data_paths) == sorted((lines[i], a["media_dir"]) for i in order[:15])
    assert sorted(full.data_paths) == sorted((line, a["media_dir"]) for line in lines)
    # the line texts keep their newline, CRLF read back as "\n", the last line has none
    assert all(line.endswith("\n") for line, _ in full.data_paths if line != lines[-1])
    assert not lines[-1].endswith("\n") and not any("\r" in line for line in lines)


# ---------------------------------------------------------------------------------------
# Drops, resume, errors


def test_every_bad_row_kind_is_dropped_at_its_point_with_its_location(two_sets, caplog):
    a, _ = two_sets
    ds = sft([a["jsonl"]], [a["media_dir"]], [100])
    with caplog.at_level(logging.WARNING, logger="editstream.drops"):
        samples = run(ds, len(ds.data_paths_per_rank))  # sure to cover a whole pass
    where = {d.location["line"]: d for d in ds.drops.recent}
    for line, kind in a["bad_lines"].items():
        drop = where[line]
        assert drop.location["file"] == a["jsonl"]
        assert drop.reason == ("no_loss_labels" if kind == "no_assistant" else "jsonl_parse"), (kind, drop)
    marker_line = next(k for k, v in a["bad_lines"].items() if v == "video_without_marker")
    assert "Cannot find <video>" in where[marker_line].error
    assert set(ds.drop_counts) == {"jsonl_parse", "no_loss_labels"}
    assert f"file={a['jsonl']}, line=" in caplog.text
    # every other row comes through, once, in order, and the stream then starts over
    with open(a["jsonl"]) as f:
        bad_texts = {line for number, line in enumerate(f.readlines(), 1) if number in a["bad_lines"]}
    good = [i for i, (line, _) in enumerate(ds.data_paths_per_rank) if line not in bad_texts]
    indexes = [s["data_indexes"]["data_indexes"] for s in samples]
    assert indexes[: len(good)] == good and indexes[len(good)] == good[0]


def test_default_frame_sampler_drops_every_video_row_as_the_reference_does(two_sets, caplog):
    a, _ = two_sets
    with caplog.at_level(logging.WARNING, logger="editstream"):
        ds = sft([a["jsonl"]], [a["media_dir"]], [100], frame_sampler=FrameSampler())
    assert "every video row will be dropped" in caplog.text
    samples = run(ds, len(ds.data_paths_per_rank))
    lines = [json.loads(u[0]) for u in ds.data_paths_per_rank if u[0].strip()[-1:] == "}"]
    assert any("video" in item for item in lines)
    for s in samples:
        assert s["sequence_plan"][0]["type"] in ("text", "vit_image")
    video_drops = [d for d in ds.drops.recent if "low >= high" in d.error]
    assert video_drops and all(d.reason == "jsonl_parse" for d in video_drops)


@pytest.mark.parametrize("n", [1, 6, 19])
def test_resume_after_n_samples_continues_the_uninterrupted_stream(two_sets, n):
    a, b = two_sets
    args = ([a["jsonl"], b["jsonl"]], [a["media_dir"], b["media_dir"]], [100, 100])
    total = 40
    reference = run(sft(*args), total)
    random.seed(0)
    np.random.seed(0)
    ds = sft(*args)
    it = iter(ds)
    head = [next(it) for _ in range(n)]
    state = ds.state_dict()
    assert state == {"data_status": [head[-1]["data_indexes"]["data_indexes"]]}
    resumed = sft(*args)
    resumed.load_state_dict(state)
    tail = first(iter(resumed), total - n)
    assert_batches_equal(reference, head + tail)


def test_constructor_is_cheap_and_checks_its_arguments(tmp_path):
    ds = sft([str(tmp_path / "nope.jsonl")], [str(tmp_path)], [5])  # no I/O yet
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        ds.set_epoch(1)
    with pytest.raises(TypeError, match="bogus"):
        sft(["x.jsonl"], ["d"], [1], bogus=3)
    with pytest.raises(ValueError, match="one entry per dataset"):
        sft(["x.jsonl", "y.jsonl"], ["d"], [1])
    with pytest.raises(ValueError, match="jsonl_path_list"):
        sft(None, ["d"], [1])
    with pytest.raises(ValueError, match=">= 0"):
        sft(["x.jsonl"], ["d"], [-1])
    with pytest.raises(ValueError, match="unknown backend"):
        sft(["x.jsonl"], ["d"], [1], backend="arrow")
    assert sft(["x.jsonl"], ["d"], [1], backend="source").backend == "parquet"
    with pytest.raises(ValueError, match="row index"):
        bad = sft(["x.jsonl"], ["d"], [1], data_status=[[0, 3]])
        bad.resume_point(0)


def test_a_pass_with_only_bad_rows_is_an_error_naming_the_dataset(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"image": "nope.jpg", "conversations": []}\n\nnot json\n')
    ds = sft([str(tmp_path / "bad.jsonl")], [str(tmp_path)], [10])
    with pytest.raises(RuntimeError, match=r"'vlm_sft'.*whole pass over 3 JSONL lines.*jsonl_parse"):
        next(iter(ds))


def test_rows_the_reference_would_crash_on_are_dropped_and_counted(tmp_path):
    lines = [
        {"conversations": [{"value": "no speaker"}]},  # change_format KeyError
        {"conversations": [{"from": "gpt", "value": 5}]},  # tokenizer TypeError
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "ok"}]},
    ]
    (tmp_path / "x.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ds = sft([str(tmp_path / "x.jsonl")], [str(tmp_path)], [10])
    samples = first(iter(ds), 2)  # the second one comes from the second pass: every row was read
    assert [s["text_ids_list"] for s in samples] == [[list(b"hi"), list(b"ok")]] * 2
    assert set(ds.drop_counts) == {"bad_row"} and ds.drop_counts["bad_row"] >= 2
    assert {d.location["line"] for d in ds.drops.recent} == {1, 2}


def test_change_format_counts_images_per_turn_and_strips_only_split_pieces():
    data = {
        "conversations": [
            {"from": "system", "value": "ignored"},
            {"from": "human", "value": "  keep me  "},
            {"from": "human", "value": " a <image> b <image><image> c "},
            {"from": "human", "value": "<image> again"},
            {"from": "gpt", "value": " <image> literal "},
        ]
    }
    got = change_format(data, 2)
    assert got == [
        {"type": "text", "has_loss": 0, "text": "  keep me  "},
        {"type": "text", "has_loss": 0, "text": "a"},
        {"type": "image"},
        {"type": "text", "has_loss": 0, "text": "b"},
        {"type": "image"},
        {"type": "text", "has_loss": 0, "text": "c"},
        {"type": "image"},  # the counter restarted in this turn
        {"type": "text", "has_loss": 0, "text": "again"},
        {"type": "text", "has_loss": 1, "text": " <image> literal "},
    ]


def test_images_go_through_the_transform_with_img_num(tmp_path):
    calls = []

    class Recording(ImageTransform):
        def __call__(self, img, img_num=1):
            calls.append(img_num)
            return super().__call__(img, img_num)

    for i in range(3):
        Image.new("RGB", (40, 30), (i * 50, 0, 0)).save(tmp_path / f"{i}.png")
    line = {
        "image": ["0.png", "1.png", "2.png"],
        "conversations": [{"from": "human", "value": "<image><image><image>"}, {"from": "gpt", "value": "x"}],
    }
    (tmp_path / "x.jsonl").write_text(json.dumps(line) + "\n")
    ds = SftJSONLIterableDataset(
        "vlm_sft", Recording(**SMALL), ByteTokenizer(), None, [str(tmp_path / "x.jsonl")], [str(tmp_path)], [1],
        num_workers=0,
    )  # fmt: skip
    sample = next(iter(ds))
    assert calls == [3, 3, 3] and len(sample["image_tensor_list"]) == 3
    assert [p["type"] for p in sample["sequence_plan"]] == ["vit_image"] * 3 + ["text"]


def test_registry_and_exports():
    import editstream
    from editstream.loader.datasets.registry import DATASET_REGISTRY
    from editstream.loader.video import FrameSampler as Direct

    assert DATASET_REGISTRY["vlm_sft"] is SftJSONLIterableDataset
    assert editstream.SftJSONLIterableDataset is SftJSONLIterableDataset and editstream.FrameSampler is Direct
    assert {"SftJSONLIterableDataset", "FrameSampler"} <= set(editstream.__all__)
    s = FrameSampler()
    assert (s.max_num_frames, s.min_num_frames, s.sample) == (-1, 8, "rand")


def test_unused_helper_names_stay_importable():
    from editstream.loader import video

    for name in ("get_frame_indices", "read_frames_folder", "read_frames_decord", "extract_frame_number"):
        assert callable(getattr(video, name))
    assert list(itertools.islice(video.sort_frames(["a_2.jpg", "b_1.jpg"]), 2)) == ["b_1.jpg", "a_2.jpg"]
