"""The vlm_sft source backend: JSONL files read as text, media read from their directories.

This is the reference's way of reading, extended to fsspec URLs: the JSONL (local or
``s3://...``) is read in one request into the lines ``open(path).readlines()`` gives, and each
row's images, video file or frame folder are read through fsspec under the row's media
directory, joined with ``os.path.join`` exactly as the reference joins them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...format.sft import media_path
from ...io import storage
from ...io.lines import read_jsonl_lines
from ...io.storage import StorageOptions
from ..video import FrameSampler

Place = tuple[int, int]
"""``(entry index, line index)``: where a unit's line is, in the listing's entries."""


@dataclass(frozen=True)
class LineEntry:
    """One ``(jsonl, media directory)`` pair as listed: all its lines and the directory string."""

    lines: list[str]
    image_dir: str
    origin: str
    """The JSONL it came from (the source file, for a converted root), for drop locations."""


class DirectoryMedia:
    """A row's media read from files under its media directory (local path or URL)."""

    def __init__(self, image_dir: str, storage_options: StorageOptions | None = None) -> None:
        self.image_dir = image_dir
        self.storage_options = storage_options

    def image_bytes(self, name: Any) -> bytes:
        return storage.read_bytes(media_path(self.image_dir, name), self.storage_options)

    def frames(self, name: Any, frame_sampler: Any) -> list:
        path = media_path(self.image_dir, name)
        if isinstance(frame_sampler, FrameSampler):
            return frame_sampler(path, storage_options=self.storage_options)
        return frame_sampler(path)  # a user's own sampler gets the path, as in the reference


class JsonlLineSource:
    """Lines from JSONL files, media from the directories paired with them."""

    def __init__(self, *, dataset_name: str, storage_options: StorageOptions | None = None) -> None:
        self.dataset_name = dataset_name
        self.storage_options = storage_options
        self._entries: list[tuple[str, str]] = []  # (jsonl, image_dir) per entry

    def read_entries(self, jsonl_path_list: Sequence[str] | None, data_dir_list: Sequence[str]) -> list[LineEntry]:
        """Every line of each JSONL, paired with its media directory (the strings as given)."""
        if jsonl_path_list is None:
            raise ValueError(
                f"dataset {self.dataset_name!r}: the source backend needs jsonl_path_list (one JSONL per data_dir)"
            )
        entries = []
        for jsonl, image_dir in zip(jsonl_path_list, data_dir_list):
            try:
                lines = read_jsonl_lines(jsonl, self.storage_options)
            except FileNotFoundError:
                raise FileNotFoundError(f"dataset {self.dataset_name!r}: JSONL file not found: {jsonl}") from None
            entries.append(LineEntry(lines, image_dir, jsonl))
        self._entries = [(e.origin, e.image_dir) for e in entries]
        return entries

    def iter_media(self, items: Iterable[tuple[Place, str]]) -> Iterator[DirectoryMedia]:
        """A media reader per ``(place, line)``, in order; files are read when the row asks for them."""
        for (entry, _), _line in items:
            yield DirectoryMedia(self._entries[entry][1], self.storage_options)

    def describe(self, place: Place) -> dict[str, Any]:
        """Where a line is: its JSONL and 1-based line number."""
        entry, line = place
        return {"file": self._entries[entry][0], "line": line + 1}
