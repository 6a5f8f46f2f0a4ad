"""Twin of NeMo's ``multimodal.video``: frame sampling from video files and frame folders."""

from __future__ import annotations

from ..loader.video import (
    FrameSampler,
    extract_frame_number,
    get_frame_indices,
    read_frames_decord,
    read_frames_folder,
    sort_frames,
)

__all__ = [
    "FrameSampler",
    "extract_frame_number",
    "get_frame_indices",
    "read_frames_decord",
    "read_frames_folder",
    "sort_frames",
]
