"""Video frames for JSONL-line rows: the reference's ``FrameSampler`` (its draws in its order, SPEC 11,
its quirks too: the default fails on every call), reading kept apart from choosing for the shard backend."""

from __future__ import annotations

import io
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
from PIL import Image

from ..format.sft import extract_frame_number, is_frame_folder, media_path, sort_frames
from ..io import storage
from ..io.storage import StorageOptions
from .decode import load_pixels, opened_image

__all__ = [
    "FrameSampler",
    "extract_frame_number",
    "get_frame_indices",
    "read_frames_decord",
    "read_frames_folder",
    "sort_frames",
]

logger = logging.getLogger("editstream")

VIDEO_EXTRA = "pip install 'editstream[video]'"


def get_frame_indices(
    num_frames: int,
    vlen: int,
    sample: str = "rand",
    fix_start: int | None = None,
    input_fps: float = 1,
    max_num_frames: int = -1,
) -> list[Any]:
    """Which of ``vlen`` frames to take for ``num_frames`` output frames: the reference's rule and draws."""
    if sample in ("rand", "middle"):
        count = min(num_frames, vlen)
        edges = np.linspace(0, vlen, count + 1).astype(int)
        ranges = [(edges[i], edges[i + 1] - 1) for i in range(count)]
        if sample == "rand":
            try:
                indices: list[int] = [random.choice(range(low, high)) for low, high in ranges]
            except Exception:  # noqa: BLE001 - the reference falls back on any failure (an empty interval)
                chosen = np.random.permutation(vlen)[:count]
                chosen.sort()
                indices = list(chosen)
        elif fix_start is not None:
            indices = [low + fix_start for low, _ in ranges]
        else:
            indices = [(low + high) // 2 for low, high in ranges]
        if len(indices) < num_frames:
            indices = indices + [indices[-1]] * (num_frames - len(indices))
        return indices
    if "fps" in sample:
        out_fps = float(sample[3:])
        step = 1 / out_fps
        seconds = np.arange(step / 2, vlen / input_fps + step / 2, step)
        positions = [p for p in np.around(seconds * input_fps).astype(int) if p < vlen]
        return positions[:max_num_frames] if max_num_frames > 0 else positions
    raise ValueError(f"unknown frame sampling {sample!r}; use 'rand', 'middle' or 'fps<rate>'")


def decode_frame(data: bytes) -> Image.Image:
    """One folder frame as the reference reads it (``convert("RGB")``, alpha dropped), within the limits."""
    return load_pixels(opened_image(bytes(data))).convert("RGB")


def pick_folder_frames(
    frames: Sequence[Any], num_frames: int, sample: str = "rand", fix_start: int | None = None, min_num_frames: int = 4
) -> list[Any]:
    """The choosing half of :func:`read_frames_folder`, on frames already decoded in frame order."""
    chosen = list(frames)
    count = np.random.randint(min_num_frames, num_frames + 1)
    if len(chosen) > count:
        chosen = [chosen[i] for i in get_frame_indices(count, len(chosen), sample=sample, fix_start=fix_start)]
    return chosen


def read_frames_folder(
    video_path: str,
    num_frames: int,
    sample: str = "rand",
    fix_start: int | None = None,
    min_num_frames: int = 4,
    *,
    storage_options: StorageOptions | None = None,
) -> list[Any]:
    """Every frame of a folder (local or a URL) decoded in frame order, then a choice of them."""
    names = sort_frames(storage.list_names(video_path, storage_options))
    frames = [decode_frame(storage.read_bytes(media_path(video_path, name), storage_options)) for name in names]
    return pick_folder_frames(frames, num_frames, sample=sample, fix_start=fix_start, min_num_frames=min_num_frames)


def read_frames_decord(
    video_path: str | IO[bytes],
    num_frames: int,
    sample: str = "rand",
    fix_start: int | None = None,
    clip: tuple[float, float] | None = None,
    min_num_frames: int = 4,
    *,
    storage_options: StorageOptions | None = None,
) -> list[Any]:
    """Frames of a video file (a local path, a URL read whole, or a binary file) chosen as the reference does,
    as PIL images, through a one-thread ``decord.VideoReader`` (the ``video`` extra)."""
    try:
        import decord
    except ImportError:
        raise RuntimeError(f"decord is required to read video files; install it with: {VIDEO_EXTRA}") from None
    if isinstance(video_path, str) and "://" in video_path:
        video_path = io.BytesIO(storage.read_bytes(video_path, storage_options))
    reader = decord.VideoReader(video_path, num_threads=1)
    vlen = len(reader)
    fps = reader.get_avg_fps()
    start_index = 0
    if clip:
        start, end = clip
        vlen = int((end - start) * fps)
        start_index = int(start * fps)
    count = np.random.randint(min_num_frames, num_frames + 1)
    indices = get_frame_indices(count, vlen, sample=sample, fix_start=fix_start, input_fps=fps)
    frames = reader.get_batch([i + start_index for i in indices]).asnumpy()
    return [Image.fromarray(frames[i]) for i in range(frames.shape[0])]


@dataclass(eq=False)
class FrameSampler:
    """Frames of a JSONL line's ``"video"`` (a frame folder ending in ``/``, or a video file), as the reference."""

    max_num_frames: int = -1
    min_num_frames: int = 8
    sample: str = "rand"

    def __post_init__(self) -> None:
        if self.max_num_frames < self.min_num_frames:
            what = "%r: np.random.randint(%s, %s) fails, so every video row will be dropped (the reference"
            what += " behaves the same); set max_num_frames >= min_num_frames"
            logger.warning(what, self, self.min_num_frames, self.max_num_frames + 1)

    def __call__(self, file_name: str, storage_options: StorageOptions | None = None) -> list[Any]:
        """The chosen frames of the folder or video at ``file_name`` (local path or URL)."""
        if is_frame_folder(file_name):
            low, so = self.min_num_frames, storage_options
            return read_frames_folder(
                file_name, self.max_num_frames, self.sample, min_num_frames=low, storage_options=so
            )
        return self.sample_video(file_name, storage_options)

    reads_storage = True
    """Sources pass ``storage_options`` to :meth:`__call__` (a user's own sampler gets the path alone)."""

    def sample_folder_bytes(self, blobs: Sequence[bytes]) -> list[Any]:
        """The choice :meth:`__call__` makes for a folder, given its frames' encoded bytes in frame order."""
        return self.sample_folder_frames([decode_frame(blob) for blob in blobs])

    def sample_folder_frames(self, frames: Sequence[Any]) -> list[Any]:
        """The choice :meth:`__call__` makes for a folder, given its frames decoded in frame order."""
        return pick_folder_frames(frames, self.max_num_frames, sample=self.sample, min_num_frames=self.min_num_frames)

    def sample_video(self, source: str | IO[bytes], storage_options: StorageOptions | None = None) -> list[Any]:
        """The choice :meth:`__call__` makes for a video file, given its path or its bytes as a file object."""
        low, so = self.min_num_frames, storage_options
        return read_frames_decord(source, self.max_num_frames, self.sample, min_num_frames=low, storage_options=so)
