"""What a row source hands the shared iteration loop (:mod:`editstream.loader.iteration`): rows,
unreadable samples, and their positions."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..format.sft import LINE_COLUMN, MEDIA_COLUMN, MediaOutsideError, referenced_media
from .units import Position, Unit


class Row(dict[str, Any]):
    """A source row: a plain dict that also allows ``row.column`` like a pandas row does."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


@dataclass
class BadSample:
    """A row a source read but could not decode, yielded in its place and counted as ``bad_sample``;
    ``unreadable``: the unit's data could not be read at all, so it counts against the unit failure budget."""

    error: BaseException
    where: dict[str, Any] = field(default_factory=dict)
    unreadable: bool = False


class RowSource(Protocol):
    """What the shared loop reads: the rows of one unit, where they are, and the reading order."""

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, Any]]:
        """``(position, row)`` of ``unit`` after ``after`` (``None``: from the start); a row may be a BadSample."""
        ...

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]:
        """Where a unit (and a row in it) is, in the paths the user gave, for drop logs and errors."""
        ...

    def plan_units(self, units: Iterable[Unit]) -> None:
        """The units the stream will read, in order (an endless iterable), before the first is
        read, so the source can read ahead across them; an empty iterable ends the plan."""
        ...


class ListingRowSource(RowSource, Protocol):
    """A row source that also lists the units of data directories (the parquet and tar backends)."""

    def list_units(self, data_dir_list: Sequence[Any], num_used_data: Sequence[int]) -> list[Unit]:
        """The units of these directories (or shard patterns), in listing order."""
        ...


def close_rows(rows: Iterator[Any]) -> None:
    """Close a unit's row stream (a generator holding a file or a read-ahead) if it can be closed."""
    close = getattr(rows, "close", None)
    if close is not None:
        close()


class DropRow(Exception):
    """Raised by a ``parse_row`` to drop its row under a named reason (else a raise drops it as ``bad_row``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MediaReader(Protocol):
    """Where one row's media come from."""

    def image_bytes(self, name: Any) -> bytes:
        """The encoded bytes of image ``name``; raises when they cannot be read."""
        ...

    def frames(self, name: Any, frame_sampler: Any) -> list[Any]:
        """The frames ``frame_sampler`` chooses from the video or frame folder ``name``."""
        ...

    def stored(self, name: str, is_folder: bool, entries: int | None = None) -> Any:
        """Media ``name`` as the converter stores it (bytes, a frame folder's first ``entries`` frames, ``None``
        if missing); :class:`~editstream.format.sft.MediaOutsideError` for a name outside the media directory."""
        ...


@dataclass(frozen=True)
class LineRow:
    """The row of one JSONL-line unit: the line exactly as read, and where its media come from."""

    line: str
    media: MediaReader

    def read(self, frame_sampler: Any, decode: Callable[[bytes, int], Any]) -> tuple[Any, list[Any] | None]:
        """The parsed line and what its media give the parser, as the reference reads them: each ``"image"``
        through ``decode(data, img_num)``, else the frames ``frame_sampler`` draws from its ``"video"`` (``None``:
        a line naming neither); raises on a line or media that cannot be read."""
        item = json.loads(self.line)
        if "image" in item:
            value = item["image"]
            names = value if type(value) is list else [value]
            return item, [decode(self.media.image_bytes(name), len(names)) for name in names]
        if "video" in item:
            return item, self.media.frames(item["video"], frame_sampler)
        return item, None

    def record(self, entries: int | None = None, videos: bool = True) -> tuple[dict[str, Any], list[str]]:
        """The line as a converted sample holds it with its media read now, and the names refused as outside
        the media directory (video files only with ``videos``)."""
        try:
            item = json.loads(self.line)
        except (ValueError, RecursionError):
            item = None
        video_line = isinstance(item, dict) and "image" not in item
        media: dict[str, Any] = {}
        refused: list[str] = []
        for name, is_folder in referenced_media(item):
            if name in media or (video_line and not is_folder and not videos):
                continue
            try:
                media[name] = self.media.stored(name, is_folder, entries)
            except MediaOutsideError:
                refused.append(name)
        return {LINE_COLUMN: self.line, MEDIA_COLUMN: media}, list(dict.fromkeys(refused))
