"""Twin of NeMo's ``multimodal.video``: frame sampling from video files and frame folders."""

from __future__ import annotations

from collections.abc import Iterable

from ..format import sft
from ..loader.video import FrameSampler, get_frame_indices, read_frames_decord, read_frames_folder

__all__ = [
    "FrameSampler",
    "extract_frame_number",
    "get_frame_indices",
    "read_frames_decord",
    "read_frames_folder",
    "sort_frames",
]


def extract_frame_number(filename: str) -> int:
    """The frame number in a name ending ``_<digits>.jpg``, else -1 (NeMo's keyword name ``filename``)."""
    return sft.extract_frame_number(filename)


def sort_frames(frame_paths: Iterable[str]) -> list[str]:
    """Frame names or paths in frame order, stable for unnumbered ones (NeMo's keyword name ``frame_paths``)."""
    return sft.sort_frames(frame_paths)
