"""The WebDataset backend of JSONL-line datasets: converted lines read one sample at a time by byte range.

Listing reads the manifest and the root's ``lines.jsonl`` copy, so units and epoch order match the source
backend; each sample is one ranged read, fetched ahead within the I/O budget along the planned order.
"""

from __future__ import annotations

import bisect
import io
import logging
from collections.abc import Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ...format.idx import read_idx, read_sample, sample_range
from ...format.keys import make_key
from ...format.manifest import Manifest, ManifestError
from ...format.rowcodec import decode_sample
from ...format.sft import (
    LINE_COLUMN,
    MEDIA_COLUMN,
    OPT_OUT,
    MediaOutsideError,
    SftInfo,
    check_media_name,
    is_frame_folder,
    sort_frames,
)
from ...io import service, storage
from ...io.lines import read_jsonl_lines
from ...io.prefetch import DEFAULT_PREFETCH_ITEMS, prefetch_ordered
from ...io.retry import RetryPolicy
from ...io.storage import StorageOptions
from ..drops import FATAL
from ..rows import BadSample, LineRow, Position
from ..units import Unit, as_unit
from .jsonl import LineEntry, LineListing, Place

logger = logging.getLogger("editstream")

Item = tuple[Place, str]
"""What is fetched: a line's place and its text (checked against the sample)."""


class SampleMismatchError(Exception):
    """A converted sample is not the line the dataset's ``lines.jsonl`` says it is."""


@dataclass(eq=False)
class SampleMedia:
    """A row's media from its converted sample; a name outside the media directory is refused as the source
    backend refuses it, so both backends drop the same lines (``None`` marks media missing at conversion)."""

    media: dict[str, Any]
    allow_outside: bool = False

    def _value(self, name: Any) -> Any:
        if not isinstance(name, str):
            raise TypeError(f"a media name must be a string, got {type(name).__name__}")
        if not self.allow_outside:
            check_media_name(name)
        if name not in self.media:  # absent (not None, which is missing): the converter refused it
            raise MediaOutsideError(
                f"media {name!r} is outside the media directory and was refused when the dataset was "
                f"converted (convert again with {OPT_OUT} to read it)"
            )
        value = self.media[name]
        if value is None:
            raise FileNotFoundError(f"media {name!r} was missing when the dataset was converted")
        return value

    def image_bytes(self, name: Any) -> bytes:
        value = self._value(name)
        if not isinstance(value, bytes):
            raise IsADirectoryError(f"media {name!r} is a folder, not an image")
        return value

    def frames(self, name: Any, frame_sampler: Any) -> list[Any]:
        value = self._value(name)
        if is_frame_folder(name):
            if not isinstance(value, dict):
                raise NotADirectoryError(f"media {name!r} was converted as a file, not a frame folder")
            blobs = []
            for entry in sort_frames(value):
                if not isinstance(value[entry], bytes):
                    raise IsADirectoryError(f"frame folder entry {name + entry!r} was not a readable file")
                blobs.append(value[entry])
            return frame_sampler.sample_folder_bytes(blobs)
        if not isinstance(value, bytes):
            raise IsADirectoryError(f"media {name!r} is a folder, not a video file")
        return frame_sampler.sample_video(io.BytesIO(value))

    def stored(self, name: str, is_folder: bool, entries: int | None = None) -> Any:
        if not self.allow_outside:
            check_media_name(name)
        value = self.media.get(name)
        if isinstance(value, dict):
            return {entry: value[entry] for entry in sort_frames(value)[:entries]}
        return value


@dataclass(frozen=True)
class _Shard:
    url: str
    idx_url: str
    first_line: int
    num_samples: int
    num_bytes: int


@dataclass(frozen=True)
class _Root:
    jsonl: str
    key_stem: str
    shards: list[_Shard]
    starts: list[int]


def _root_shards(root: str, manifest: Manifest, info: SftInfo) -> _Root:
    """The shards of a converted root in line order; each must hold one contiguous, complete line range."""
    shards = []
    covered = 0
    for shard in sorted(manifest.shards, key=lambda s: s.rows[0].start if s.rows else -1):
        rows = shard.rows
        if len(rows) != 1 or rows[0].start != covered or shard.dropped or shard.num_samples != rows[0].num_rows:
            raise ManifestError(f"{root}: shard {shard.path} does not hold the lines from {covered} on, every one")
        url, idx_url = storage.join(root, shard.path), storage.join(root, shard.idx_path)
        shards.append(_Shard(url, idx_url, rows[0].start, shard.num_samples, shard.num_bytes))
        covered = rows[0].stop
    if covered != info.num_lines:
        raise ManifestError(f"{root}: shards hold {covered} lines, the JSONL has {info.num_lines}")
    return _Root(info.jsonl, manifest.source_files[0].key_stem, shards, [s.first_line for s in shards])


class ShardLineSource(LineListing):
    """Lines from converted roots, media from the lines' samples; see the module docstring."""

    def __init__(
        self,
        *,
        dataset_name: str,
        storage_options: StorageOptions | None = None,
        retry: RetryPolicy | None = None,
        prefetch_bytes: int | None = None,
        prefetch_samples: int = DEFAULT_PREFETCH_ITEMS,
        allow_outside_media_dir: bool = False,
    ) -> None:
        """``prefetch_bytes`` caps this source's share of the I/O budget; ``prefetch_samples`` the samples ahead."""
        if (prefetch_bytes is not None and prefetch_bytes <= 0) or prefetch_samples <= 0:
            raise ValueError(
                f"dataset {dataset_name!r}: prefetch_bytes and prefetch_samples must be > 0, "
                f"got {prefetch_bytes} and {prefetch_samples}"
            )
        super().__init__()
        self.dataset_name = dataset_name
        self.storage_options = storage_options
        self.retry = retry or RetryPolicy()
        self.prefetch_bytes = prefetch_bytes
        self.prefetch_samples = prefetch_samples
        self.allow_outside_media_dir = allow_outside_media_dir
        self._roots: list[_Root] = []
        self._offsets: dict[str, tuple[list[int], int]] = {}  # idx URL -> (sample offsets, end)
        self._planned: Generator[tuple[Item, Future[SampleMedia]], None, None] | None = None

    # ---- listing -------------------------------------------------------------------------
    def listing_lists(self, entries: Sequence[Any]) -> tuple[Sequence[str] | None, Sequence[str]]:
        return None, list(entries)

    def read_entries(self, jsonl_path_list: Sequence[str] | None, data_dir_list: Sequence[str]) -> list[LineEntry]:
        """Every line of each converted root (its ``lines.jsonl``; ``jsonl_path_list`` is unused) with its media dir."""
        entries = []
        roots = []
        for root in data_dir_list:
            try:
                manifest = Manifest.read(root, self.storage_options)
                info = SftInfo.from_manifest(manifest, root)
            except ManifestError as exc:
                raise ManifestError(f"dataset {self.dataset_name!r}: {exc}") from None
            lines = read_jsonl_lines(storage.join(root, info.lines_path), self.storage_options)
            if len(lines) != info.num_lines:
                raise ManifestError(
                    f"dataset {self.dataset_name!r}: {root}/{info.lines_path} has {len(lines)} lines, "
                    f"the manifest says {info.num_lines}"
                )
            roots.append(_root_shards(root, manifest, info))
            entries.append(LineEntry(lines, info.media_dir, info.jsonl))
        self._roots = roots
        return entries

    def _locate(self, place: Place) -> tuple[_Root, _Shard, int, str]:
        entry, line = place
        root = self._roots[entry]
        shard = root.shards[bisect.bisect_right(root.starts, line) - 1]
        return root, shard, line - shard.first_line, make_key(root.key_stem, 0, line)

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]:
        """Where a line is: its source JSONL, 1-based line number, shard and sample key."""
        place = self.place(unit)
        root, shard, _, key = self._locate(place)
        return {"file": root.jsonl, "line": place[1] + 1, "shard": shard.url, "key": key}

    # ---- reading -------------------------------------------------------------------------
    def _sample_offsets(self, shard: _Shard) -> tuple[list[int], int]:
        cached = self._offsets.get(shard.idx_url)
        if cached is None:
            found = self.retry.call(lambda: read_idx(shard.idx_url, self.storage_options, shard.num_samples))
            cached = self._offsets.setdefault(shard.idx_url, found)
        return cached

    def _cost(self, item: Item) -> int:
        """Bytes the item's sample takes (the shard's average until its idx has been read)."""
        _, shard, index, _ = self._locate(item[0])
        cached = self._offsets.get(shard.idx_url)
        if cached is None:
            return shard.num_bytes // max(1, shard.num_samples)
        start, stop = sample_range(cached[0], cached[1], index)
        return stop - start

    def fetch(self, item: Item) -> SampleMedia:
        """The media of the line at ``place``: one ranged read of its sample, checked against ``line``."""
        place, line = item
        _, shard, index, key = self._locate(place)
        offsets, end = self._sample_offsets(shard)
        samples = read_sample(shard.url, offsets, end, index, self.storage_options, retry=self.retry)
        if [k for k, _ in samples] != [key]:
            start, stop = sample_range(offsets, end, index)
            raise SampleMismatchError(
                f"{shard.url}: bytes {start}:{stop} hold samples {[k for k, _ in samples]}, expected {key!r}"
            )
        row = decode_sample(key, samples[0][1])
        if row.get(LINE_COLUMN) != line:
            raise SampleMismatchError(f"{shard.url}: sample {key!r} does not hold the line lines.jsonl has")
        media = row.get(MEDIA_COLUMN)
        if not isinstance(media, dict):
            raise SampleMismatchError(f"{shard.url}: sample {key!r} has no media mapping")
        return SampleMedia(media, self.allow_outside_media_dir)

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another process (a DataLoader worker) leaves the fetches in flight behind."""
        return {**self.__dict__, "_planned": None, "_io": service.carry()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        service.adopt(state.pop("_io", None))
        self.__dict__.update(state)

    def plan_units(self, units: Iterable[Unit]) -> None:
        """Fetch the samples of ``units`` ahead in order; a new plan cancels the previous one's unstarted fetches."""
        if self._planned is not None:
            self._planned.close()
        items = ((self.place(unit), as_unit(unit).line) for unit in units)
        self._planned = prefetch_ordered(
            items, self.fetch, self._cost, max_bytes=self.prefetch_bytes, max_items=self.prefetch_samples
        )

    def _media(self, item: Item) -> SampleMedia:
        """The media of ``item``: the planned fetch when the plan is at it, else fetched now."""
        if self._planned is not None:
            planned, future = next(self._planned, (None, None))
            if planned == item and future is not None:
                return future.result()
            logger.debug("dataset %s: read %s outside the planned order; fetching directly", self.dataset_name, item)
            self._planned.close()
            self._planned = None
        return self.fetch(item)

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, LineRow | BadSample]]:
        """The one row of a line unit (a :class:`BadSample` when its sample cannot be read)."""
        if after is not None:
            return
        line = as_unit(unit).line
        try:
            media = self._media((self.place(unit), line))
        except FATAL:
            raise
        except Exception as exc:  # noqa: BLE001 - an unreadable sample is a counted, located, budgeted drop
            yield (), BadSample(exc, {}, unreadable=True)
            return
        yield (), LineRow(line, media)
