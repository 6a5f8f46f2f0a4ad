"""Synthetic VLM fine-tuning datasets: a LLaVA-style JSONL plus its media (images, frame folders, tiny MP4s),
with planted bad rows, a CRLF, a last line without newline and duplicates; the same seed writes the same bytes."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..io import storage
from ..io.storage import StorageOptions
from .synth_content import IMAGE_FORMATS, caption, garbage, make_image, pick

GOOD_KINDS = ("image", "images", "folder", "video", "text", "two_turns")
BAD_KINDS = ("missing_image", "bad_json", "no_assistant", "undecodable_image", "video_without_marker", "blank")
"""Planted bad rows: dropped as ``jsonl_parse`` (``no_assistant`` as ``no_loss_labels``)."""
BAD_EVERY = 7
"""Every 7th line (from line 3) is a bad one, cycling through :data:`BAD_KINDS`."""

_QUESTIONS = (
    "Describe the picture in detail.",
    "What stands out here?",
    "Give a short caption.",
    "Which colours dominate this scene, and why might that be?",
)
_ANSWERS = (
    "The scene is calm and evenly lit; nothing in it moves quickly.",
    "Shapes overlap near the centre and the colours fade towards the edges — a soft gradient.",
    "It looks like a quick study made outdoors, with a café-like warmth in its palette.",
)


def can_write_video() -> bool:
    """Whether OpenCV (``opencv-python-headless``) is importable to write the MP4 test videos."""
    try:
        import cv2  # noqa: F401
    except ImportError:
        return False
    return True


def _mp4(path: str, rng: np.random.Generator, num_frames: int) -> None:
    import cv2

    writer = cv2.VideoWriter(path, cv2.VideoWriter.fourcc(*"mp4v"), 4, (32, 24))
    try:
        for i in range(num_frames):
            frame = np.empty((24, 32, 3), np.uint8)
            frame[:] = rng.integers(0, 256, size=3, dtype=np.uint8)
            frame[:, : (i % 32) + 1] = 255 - frame[0, 0]
            writer.write(frame)
    finally:
        writer.release()


@dataclass
class _Writer:
    """Writes one dataset's media and lines; every media name is relative to the media dir."""

    media_dir: str
    rng: np.random.Generator
    sides: tuple[int, int]
    video: bool
    so: StorageOptions | None
    counter: Counter[str] = field(default_factory=Counter)

    def _name(self, prefix: str) -> str:
        self.counter[prefix] += 1
        return f"{prefix}_{self.counter[prefix]:04d}"

    def image(self, data: bytes | None = None) -> str:
        fmt = pick(self.rng, IMAGE_FORMATS)
        name = f"images/{self._name('img')}.{'jpg' if fmt == 'jpeg' else fmt.split('_')[0]}"
        blob = data if data is not None else make_image(self.rng, self.sides[0], self.sides[1], fmt)
        storage.write_bytes(storage.join(self.media_dir, name), blob, self.so)
        return name

    def folder(self) -> str:
        clip = self._name("clip")
        count = int(self.rng.integers(5, 13))
        padded = self.counter["clip"] % 2 == 0
        for i in self.rng.permutation(count) + 1:  # created out of order: the listing order is not frame order
            frame = f"frame_{int(i):04d}.jpg" if padded else f"frame_{int(i)}.jpg"
            blob = make_image(self.rng, self.sides[0], self.sides[0] + 8, "jpeg")
            storage.write_bytes(storage.join(self.media_dir, "clips", clip, frame), blob, self.so)
        return f"clips/{clip}/"

    def video_file(self) -> str:
        import tempfile

        name = f"videos/{self._name('vid')}.mp4"
        with tempfile.TemporaryDirectory() as tmp:
            path = f"{tmp}/v.mp4"
            _mp4(path, self.rng, int(self.rng.integers(6, 20)))
            with open(path, "rb") as f:
                storage.write_bytes(storage.join(self.media_dir, name), f.read(), self.so)
        return name

    def talk(self, human: str, answer: bool = True) -> list[dict[str, str]]:
        turns = [{"from": "human", "value": human}]
        if answer:
            turns.append({"from": "gpt", "value": f"{caption(self.rng).capitalize()}. {pick(self.rng, _ANSWERS)}"})
        return turns

    def good(self, kind: str, index: int) -> dict[str, Any]:
        ask = pick(self.rng, _QUESTIONS)
        item: dict[str, Any] = {"id": f"sample-{index:05d}"}
        if kind == "image":
            item["image"] = self.image()
            item["conversations"] = self.talk(f"<image>\n{ask}")
        elif kind == "images":
            item["image"] = [self.image() for _ in range(int(self.rng.integers(2, 4)))]
            item["conversations"] = self.talk(f"Compare <image> with <image>: {ask} <image>  ")
        elif kind in ("folder", "video"):
            item["video"] = self.video_file() if kind == "video" and self.video else self.folder()
            item["conversations"] = self.talk(f"<video>\n{ask}")
        elif kind == "text":
            item["conversations"] = [{"from": "system", "value": "Be brief."}, *self.talk(f"  {ask}  ")]
        else:  # two human turns, each with a marker: the per-turn image counter
            item["image"] = [self.image(), self.image()]
            item["conversations"] = self.talk(f"<image>{ask}") + self.talk("And now? <image>")
        return item

    def bad(self, kind: str, index: int) -> str:
        ask = pick(self.rng, _QUESTIONS)
        item: dict[str, Any] = {"id": f"bad-{index:05d}"}
        if kind == "blank":
            return ""
        if kind == "video_without_marker":
            item["video"] = self.folder()
            item["conversations"] = self.talk(ask)
            item["conversations"][1]["value"] += " <video>"
            return json.dumps(item, ensure_ascii=False)
        if kind == "missing_image":
            item["image"] = f"images/missing_{index:04d}.jpg"
        else:
            item["image"] = self.image(garbage(self.rng) if kind == "undecodable_image" else None)
        item["conversations"] = self.talk(f"<image>\n{ask}", answer=kind != "no_assistant")
        line = json.dumps(item, ensure_ascii=False)
        return line[:-9] if kind == "bad_json" else line  # bad_json: a line cut short


def write_synthetic_vlm_dataset(
    out: str,
    *,
    num_lines: int = 48,
    seed: int = 0,
    bad_rows: bool = True,
    video: bool | None = None,
    min_side: int = 32,
    max_side: int = 96,
    jsonl_name: str = "data.jsonl",
    media_name: str = "media",
    storage_options: StorageOptions | None = None,
) -> dict[str, Any]:
    """Write ``out/<jsonl_name>`` and ``out/<media_name>/``; return a summary (``bad_lines``: 1-based line ->
    planted kind). ``video=None`` writes MP4s when OpenCV is installed, frame folders otherwise."""
    if num_lines < 1:
        raise ValueError(f"num_lines must be >= 1, got {num_lines}")
    with_video = can_write_video() if video is None else video
    media_dir = storage.join(out, media_name)
    writer = _Writer(media_dir, np.random.default_rng(seed), (min_side, max_side), with_video, storage_options)
    lines: list[str] = []
    kinds: Counter[str] = Counter()
    bad_lines: dict[int, str] = {}
    for index in range(num_lines):
        if bad_rows and index % BAD_EVERY == 3:
            kind = BAD_KINDS[(index // BAD_EVERY) % len(BAD_KINDS)]
            lines.append(writer.bad(kind, index))
            bad_lines[index + 1] = kind
        elif index > 0 and index % 11 == 0:
            kind = "duplicate"
            lines.append(lines[-1] if lines[-1] and (index - 1) % BAD_EVERY != 3 else lines[0])
        else:
            kind = GOOD_KINDS[int(writer.rng.integers(0, len(GOOD_KINDS)))]
            if kind == "video" and not with_video:
                kind = "folder"
            lines.append(json.dumps(writer.good(kind, index), ensure_ascii=False))
        kinds[kind] += 1
    endings = ["\n"] * num_lines
    endings[len(endings) // 2] = "\r\n"  # universal newlines: read back as "\n"
    endings[-1] = ""  # the last line has no newline
    text = "".join(line + end for line, end in zip(lines, endings))
    jsonl = storage.join(out, jsonl_name)
    storage.write_bytes(jsonl, text.encode("utf-8"), storage_options)
    return {
        "jsonl": jsonl,
        "media_dir": writer.media_dir,
        "num_lines": num_lines,
        "kinds": dict(sorted(kinds.items())),
        "bad_lines": bad_lines,
        "video": with_video,
    }
