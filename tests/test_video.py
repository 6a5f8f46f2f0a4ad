"""FrameSampler and get_frame_indices: hand-worked cases, the exact draws consumed, frame order, decord."""

from __future__ import annotations

import io
import logging
import random
import sys

import numpy as np
import pytest
from PIL import Image

from editstream.format.images import sniff_extension
from editstream.format.sft import extract_frame_number, sort_frames
from editstream.loader.video import FrameSampler, get_frame_indices, read_frames_folder
from editstream.sandbox.synth_vlm import can_write_video


def seeded(seed=0):
    random.seed(seed)
    np.random.seed(seed)


def states():
    return random.getstate(), np.random.get_state()[1].copy(), np.random.get_state()[2]


def test_vlen_10_t_8_falls_back_to_a_permutation_without_python_draws():
    # edges [0 1 2 3 5 6 7 8 10]: the first interval is range(0, 0), empty, so random.choice
    # raises before drawing and one numpy permutation decides
    seeded(3)
    py_before = random.getstate()
    got = get_frame_indices(8, 10)
    assert random.getstate() == py_before
    np.random.seed(3)
    want = sorted(np.random.permutation(10)[:8])
    assert got == want and all(isinstance(i, np.integer) for i in got)
    seeded(3)
    np.random.permutation(10)
    after = np.random.random()
    seeded(3)
    get_frame_indices(8, 10)
    assert np.random.random() == after


def test_vlen_16_t_8_is_forced_to_interval_starts_but_still_draws():
    seeded(5)
    got = get_frame_indices(8, 16)
    assert got == [0, 2, 4, 6, 8, 10, 12, 14] and all(type(i) is int for i in got)
    py_after = random.random()
    seeded(5)
    for _ in range(8):
        random.choice(range(1))  # one choice per interval, each from a single frame
    assert random.random() == py_after
    assert np.random.random() == np.random.RandomState(5).random_sample()  # numpy untouched


def test_rand_never_picks_the_last_frame_of_an_interval():
    seen = set()
    for seed in range(200):
        seeded(seed)
        seen.update(get_frame_indices(4, 16))  # intervals of 4: choices from the first 3 of each
    assert seen == {0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14}


def test_short_videos_are_padded_with_the_last_index():
    seeded(1)
    assert [int(i) for i in get_frame_indices(5, 3)] == [0, 1, 2, 2, 2]


def test_middle_fix_start_and_fps():
    assert get_frame_indices(4, 16, sample="middle") == [1, 5, 9, 13]  # (start + next_start - 1) // 2
    assert get_frame_indices(4, 16, sample="middle", fix_start=2) == [2, 6, 10, 14]
    assert [int(i) for i in get_frame_indices(0, 10, sample="fps0.5", input_fps=2)] == [2, 6]
    seeded(0)
    before = states()
    get_frame_indices(0, 100, sample="fps1", input_fps=4)
    after = states()
    assert before[0] == after[0] and np.array_equal(before[1], after[1])
    with pytest.raises(ValueError):
        get_frame_indices(4, 16, sample="uniform")


def test_frame_numbers_and_the_stable_sort():
    assert extract_frame_number("frame_0012.jpg") == 12
    assert extract_frame_number("a_7xjpg") == 7  # the reference's unescaped dot
    assert extract_frame_number("a_7.JPG") == -1 and extract_frame_number("0001.jpg") == -1
    names = ["z.png", "f_10.jpg", "b_2.jpg", "a.txt", "a_2.jpg", "f_1.jpg"]
    assert sort_frames(names) == ["z.png", "a.txt", "f_1.jpg", "b_2.jpg", "a_2.jpg", "f_10.jpg"]


def write_frames(folder, count, padded=True):
    folder.mkdir()
    for i in range(1, count + 1):
        name = f"frame_{i:04d}.jpg" if padded else f"frame_{i}.jpg"
        Image.new("RGB", (20, 12), (i * 10, 255 - i * 10, 0)).save(folder / name, quality=95)


def red_levels(frames):
    return [round(np.asarray(f)[0, 0, 0] / 10) for f in frames]


def test_a_folder_with_no_more_frames_than_t_returns_all_in_frame_order(tmp_path):
    write_frames(tmp_path / "clip", 12, padded=False)  # listing order is not frame order
    seeded(0)
    frames = FrameSampler(max_num_frames=20, min_num_frames=15)(f"{tmp_path}/clip/")
    assert red_levels(frames) == list(range(1, 13))
    assert all(f.mode == "RGB" for f in frames)


def test_folder_sampling_draws_randint_then_choices(tmp_path):
    write_frames(tmp_path / "clip", 12)
    seeded(11)
    frames = FrameSampler(max_num_frames=6, min_num_frames=4)(f"{tmp_path}/clip/")
    seeded(11)
    t = np.random.randint(4, 7)
    indices = get_frame_indices(t, 12)
    assert red_levels(frames) == [i + 1 for i in indices] and len(frames) == t
    after = (random.random(), np.random.random())
    seeded(11)
    FrameSampler(max_num_frames=6, min_num_frames=4)(f"{tmp_path}/clip/")
    assert (random.random(), np.random.random()) == after


def test_the_default_sampler_always_fails_after_reading_the_folder(tmp_path, caplog):
    write_frames(tmp_path / "clip", 3)
    with caplog.at_level(logging.WARNING, logger="editstream"):
        sampler = FrameSampler()
    assert "randint(8, 0)" in caplog.text
    with pytest.raises(ValueError, match="low >= high"):
        sampler(f"{tmp_path}/clip/")
    with pytest.raises(FileNotFoundError):
        sampler(f"{tmp_path}/missing/")  # reading fails first, before any draw


def test_sample_folder_frames_is_the_same_choice_as_reading_the_folder(tmp_path):
    write_frames(tmp_path / "clip", 9)
    sampler = FrameSampler(max_num_frames=5, min_num_frames=3)
    seeded(2)
    from_disk = sampler(f"{tmp_path}/clip/")
    decoded = [Image.open(tmp_path / "clip" / f"frame_{i:04d}.jpg").convert("RGB") for i in range(1, 10)]
    seeded(2)
    from_frames = sampler.sample_folder_frames(decoded)
    assert [f.tobytes() for f in from_disk] == [f.tobytes() for f in from_frames]
    seeded(2)
    assert [f.tobytes() for f in read_frames_folder(f"{tmp_path}/clip/", 5, min_num_frames=3)] == [
        f.tobytes() for f in from_disk
    ]


def test_video_containers_are_sniffed_without_breaking_images():
    assert sniff_extension(b"\x00\x00\x00\x1cftypisom\x00\x00\x02\x00") == "mp4"
    assert sniff_extension(b"\x00\x00\x00\x14ftypqt  \x00\x00\x00\x00") == "mov"
    assert sniff_extension(b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00") == "avif"
    ebml = b"\x1aE\xdf\xa3\x9fB\x86\x81\x01B\xf7\x81\x01B\xf2\x81\x04B\xf3\x81\x08B\x82\x84"
    assert sniff_extension(ebml + b"webm") == "webm"
    assert sniff_extension(b"\x1aE\xdf\xa3\xa3B\x86\x81\x01B\x82\x88matroska") == "mkv"
    assert sniff_extension(b"RIFF\x10\x00\x00\x00AVI LIST") == "avi"
    assert sniff_extension(b"RIFF\x10\x00\x00\x00WEBPVP8 ") == "webp"
    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, format="PNG")
    assert sniff_extension(buf.getvalue()) == "png"


def write_mp4(path, frames=10):
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), 5, (32, 24))
    for i in range(frames):
        writer.write(np.full((24, 32, 3), i * 20, np.uint8))
    writer.release()
    return path


needs_video = pytest.mark.skipif(not can_write_video(), reason="opencv-python-headless is not installed")


@needs_video
def test_a_real_video_through_decord_from_a_path_and_from_bytes(tmp_path):
    pytest.importorskip("decord")
    path = write_mp4(tmp_path / "v.mp4", frames=10)
    sampler = FrameSampler(max_num_frames=12, min_num_frames=12)
    seeded(4)
    from_path = sampler(str(path))
    after = (random.random(), np.random.random())
    seeded(4)
    from_bytes = sampler.sample_video(io.BytesIO(path.read_bytes()))
    assert (random.random(), np.random.random()) == after
    # vlen 10 < t 12: every interval is empty -> permutation fallback, then the last frame repeats
    assert len(from_path) == 12 and [f.tobytes() for f in from_path] == [f.tobytes() for f in from_bytes]
    levels = [round(float(np.asarray(f)[0, 0].mean()) / 20) for f in from_path]
    assert levels == list(range(10)) + [9, 9]


def test_without_decord_a_video_is_a_clear_error_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "decord", None)  # as if it were not installed: import fails
    (tmp_path / "v.mp4").write_bytes(b"\x00\x00\x00\x1cftypisom")
    seeded(0)
    before = states()
    with pytest.raises(RuntimeError, match=r"pip install 'editstream\[video\]'"):
        FrameSampler(8, 4)(str(tmp_path / "v.mp4"))
    after = states()
    assert before[0] == after[0] and np.array_equal(before[1], after[1])  # failed before drawing
