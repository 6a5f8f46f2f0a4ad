"""JSONL-line sources: units are ``(line, media_dir)``, each one row; the source backend reads JSONL and media
files as the reference does, except that a name outside the media directory is dropped as ``media_outside``."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...format.sft import check_links, contained_media_path, is_frame_folder, media_path, sort_frames
from ...io import storage
from ...io.lines import decode_lines, read_jsonl_lines
from ...io.retry import RetryPolicy
from ...io.storage import StorageOptions
from ..rows import LineRow, Position
from ..units import LineUnit, Unit, as_unit, refuse_repeated_sources

ABSENT = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)
"""Errors that mean "this media is not there" (stored as ``None``) rather than a storage fault."""

Place = tuple[int, int]
"""``(entry index, line index)``: where a unit's line is, in the listing's entries."""


@dataclass(frozen=True)
class LineEntry:
    """One ``(jsonl, media directory)`` pair as listed: all its lines and the directory string."""

    lines: list[str]
    image_dir: str
    origin: str
    """The JSONL it came from (the source file, for a converted root), for drop locations."""


def read_line_range(
    url: str, start: int, stop: int, sha256: str, num_lines: int, so: StorageOptions | None = None
) -> list[str]:
    """The lines in bytes ``[start, stop)`` of the JSONL at ``url`` (a conversion's shard of consecutive lines),
    read with retries; an error when they are not the ``num_lines`` lines hashing to ``sha256`` that were planned."""
    data = RetryPolicy().call(lambda: storage.read_bytes(url, so, start=start, end=stop))
    where = f"{url}: bytes {start}:{stop}"
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"{where} changed since planning; convert again")
    lines = decode_lines(data, url)
    if len(lines) != num_lines:
        raise ValueError(f"{where} hold {len(lines)} lines, planned {num_lines}")
    return lines


class LineListing:
    """The ``(line, media_dir)`` units of JSONL-line sources and where each line came from; a subclass reads
    the entries (:meth:`read_entries`) and the rows."""

    dataset_name: str

    def __init__(self) -> None:
        self._places: dict[Unit, Place] = {}
        self._origins: list[str] = []

    def read_entries(self, jsonl_path_list: Sequence[str] | None, data_dir_list: Sequence[str]) -> list[LineEntry]:
        raise NotImplementedError

    def list_lines(
        self,
        jsonl_path_list: Sequence[str] | None,
        data_dir_list: Sequence[str],
        num_used_data: Sequence[int],
        shuffle: bool,
        shuffle_seed: int,
        rng: random.Random,
    ) -> list[Unit]:
        """``(line, media_dir)`` pairs: per entry its lines, shuffled with ``rng`` if asked, cut to its count."""
        entries = self.read_entries(jsonl_path_list, data_dir_list)
        units: list[Unit] = []
        places: dict[Unit, Place] = {}
        for entry_index, (entry, count) in enumerate(zip(entries, num_used_data)):
            # Shuffling positions with the same rng state is the same permutation as shuffling the
            # lines; the positions also say where each kept line came from.
            order = list(range(len(entry.lines)))
            if shuffle:
                rng.seed(shuffle_seed)
                rng.shuffle(order)
            for line_index in order[:count]:
                unit = LineUnit(entry.lines[line_index], entry.image_dir)
                units.append(unit)
                places.setdefault(unit, (entry_index, line_index))
        self._places = places
        self._origins = [entry.origin for entry in entries]
        return units

    def listing_lists(self, entries: Sequence[Any]) -> tuple[Sequence[str] | None, Sequence[str]]:
        """``(jsonl_path_list, data_dir_list)`` of the entries a raw listing is given."""
        raise NotImplementedError

    def list_units(self, entries: Sequence[Any], num_used_data: Sequence[int]) -> list[Unit]:
        """The lines of ``entries`` in file order, none shuffled: the raw-row reader's listing."""
        jsonl_path_list, data_dir_list = self.listing_lists(entries)
        return self.list_lines(jsonl_path_list, data_dir_list, num_used_data, False, 0, random.Random(0))

    def place(self, unit: Unit) -> Place:
        """Where the line of ``unit`` is (its first occurrence, for a line listed twice)."""
        return self._places[unit]

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]:
        """Where a line is: its JSONL and 1-based line number."""
        entry, line = self.place(unit)
        return {"file": self._origins[entry], "line": line + 1}


@dataclass(eq=False)
class DirectoryMedia:
    """A row's media read from files under its media directory; names outside it are refused first."""

    image_dir: str
    storage_options: StorageOptions | None = None
    allow_outside: bool = False
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def image_bytes(self, name: Any) -> bytes:
        path = contained_media_path(self.image_dir, name, self.allow_outside)
        return storage.read_bytes(path, self.storage_options)

    def frames(self, name: Any, frame_sampler: Any) -> list[Any]:
        path = contained_media_path(self.image_dir, name, self.allow_outside)
        if not self.allow_outside and is_frame_folder(name) and storage.is_local(path):
            for entry in storage.list_names(path, self.storage_options):  # a frame linked out is refused too
                check_links(self.image_dir, media_path(path, entry), name + entry)
        if getattr(frame_sampler, "reads_storage", False):  # editstream's FrameSampler reads fsspec URLs
            return frame_sampler(path, storage_options=self.storage_options)
        result: list[Any] = frame_sampler(path)  # a user's own sampler gets the path, as in the reference
        return result

    def stored(self, name: str, is_folder: bool, entries: int | None = None) -> Any:
        """A file's bytes or a folder's ``{entry: bytes}`` (``None`` where absent); storage faults are retried,
        then raised, so a conversion never records readable media as missing."""
        path = contained_media_path(self.image_dir, name, self.allow_outside)
        if not is_folder:
            return self._file(path)
        try:
            names = self.retry.call(lambda: storage.list_names(path, self.storage_options))
        except ABSENT:
            return None
        chosen = names if entries is None else sort_frames(names)[:entries]
        return {entry: self._entry(path, name, entry) for entry in chosen}

    def _entry(self, folder: str, name: str, entry: str) -> bytes | None:
        """A frame folder's entry, refused when it is a link out of the media directory."""
        path = media_path(folder, entry)
        if not self.allow_outside:
            check_links(self.image_dir, path, name + entry)
        return self._file(path)

    def _file(self, url: str) -> bytes | None:
        try:
            return self.retry.call(lambda: storage.read_bytes(url, self.storage_options))
        except ABSENT:
            return None


class JsonlLineSource(LineListing):
    """Lines from JSONL files, media from the directories paired with them (read when a row asks)."""

    def __init__(
        self,
        *,
        dataset_name: str,
        storage_options: StorageOptions | None = None,
        allow_outside_media_dir: bool = False,
        media_dirs: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.dataset_name = dataset_name
        self.storage_options = storage_options
        self.allow_outside_media_dir = allow_outside_media_dir
        self.media_dirs = list(media_dirs)
        """The media directory of each JSONL a raw listing (:meth:`list_units`) is given."""

    def listing_lists(self, entries: Sequence[Any]) -> tuple[Sequence[str] | None, Sequence[str]]:
        return list(entries), self.media_dirs

    def read_entries(self, jsonl_path_list: Sequence[str] | None, data_dir_list: Sequence[str]) -> list[LineEntry]:
        """Every line of each JSONL, paired with its media directory (the strings as given)."""
        if jsonl_path_list is None:
            raise ValueError(
                f"dataset {self.dataset_name!r}: the source backend needs jsonl_path_list (one JSONL per data_dir)"
            )
        pairs = list(zip(jsonl_path_list, data_dir_list))
        refuse_repeated_sources(self.dataset_name, pairs, "jsonl_path_list with data_dir_list")
        entries = []
        for jsonl, image_dir in pairs:
            try:
                lines = read_jsonl_lines(jsonl, self.storage_options)
            except FileNotFoundError:
                raise FileNotFoundError(f"dataset {self.dataset_name!r}: JSONL file not found: {jsonl}") from None
            entries.append(LineEntry(lines, image_dir, jsonl))
        return entries

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, LineRow]]:
        """The one row of a line unit (nothing once ``after`` says it was read)."""
        if after is not None:
            return
        line, image_dir = as_unit(unit)
        yield (), LineRow(line, DirectoryMedia(image_dir, self.storage_options, self.allow_outside_media_dir))

    def plan_units(self, units: Iterable[Unit]) -> None:
        """Nothing to read ahead: a row's media files are read when its parser asks for them."""
