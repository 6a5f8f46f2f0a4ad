"""The converter's output description: ``manifest.json``, written last, so its presence means a
conversion finished. Version 3 says the idx files are member tables (shard format 2), version 2 names the digest
algorithm; versions 1 (``sha256``) and 2 still read."""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..io import storage
from .digest import ALGORITHMS, HEX_LENGTH
from .paths import relative_path_problem

FORMAT_NAME = "editstream-webdataset"
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
MEMBER_TABLE_VERSION = 3
"""The first version whose shards' idx files are member tables (shard format 2, :mod:`.member_table`)."""
"""Versions this editstream reads: 1 (sha256 digests only) and 2 (the digest algorithm recorded)."""
MANIFEST_NAME = "manifest.json"
REPORT_NAME = "report.json"
LAYOUTS = ("rowgroup", "size")


class ManifestError(ValueError):
    """A manifest or idx file that is missing, unreadable, or inconsistent; names the path."""


def _check_path(path: object, field: str) -> None:
    problem = relative_path_problem(path)
    if problem is not None:
        raise ManifestError(f"{field} {path!r} {problem}; manifest paths must be relative to the dataset root")


@dataclass(frozen=True, kw_only=True)
class RowSlice:
    """Rows ``[start, stop)`` of one row group of one source file (name relative to the source root)."""

    file: str
    row_group: int
    start: int
    stop: int

    def __post_init__(self) -> None:
        if self.row_group < 0 or self.start < 0 or self.stop < self.start:
            raise ManifestError(f"bad row slice {self}")

    @property
    def num_rows(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True, kw_only=True)
class SourceFile:
    """A source parquet file: path relative to the source root, rows per row group, key stem."""

    path: str
    row_groups: list[int]
    key_stem: str
    """Sample keys of this file's rows are ``{key_stem}-rg{row_group:05d}-r{row:07d}``."""

    @property
    def num_rows(self) -> int:
        return sum(self.row_groups)

    @property
    def num_row_groups(self) -> int:
        return len(self.row_groups)


@dataclass(frozen=True, kw_only=True)
class ShardInfo:
    """One tar shard: where it is, what it holds, and how to check it (``source_file`` and ``row_group``:
    the one source row group of a rowgroup-layout shard)."""

    path: str
    idx_path: str
    num_samples: int
    num_bytes: int
    rows: list[RowSlice]
    """The source rows, in shard order (dropped bad rows are inside the slices but not in the shard)."""
    sha256: str | None = None
    xxh3_128: str | None = None
    """The shard's digest, under the name of its algorithm (the manifest's ``digest``)."""
    source_file: str | None = None
    row_group: int | None = None
    dropped: list[int] = field(default_factory=list)
    """Positions (within ``rows``, counted over the slices in order) of bad rows left out."""

    def kept_rows(self) -> Iterator[tuple[RowSlice, int]]:
        """``(slice, row index in its row group)`` of every sample, in shard order (dropped rows skipped)."""
        dropped = set(self.dropped)
        position = 0
        for s in self.rows:
            for row in range(s.start, s.stop):
                if position not in dropped:
                    yield s, row
                position += 1

    def _position(self, file: str, row_group: int, row: int) -> int | None:
        """Position of ``row`` counted over the slices (dropped rows included); the end of a
        slice counts as inside it, so a reader may ask where a row after the last one starts."""
        position = 0
        for s in self.rows:
            if s.file == file and s.row_group == row_group and s.start <= row <= s.stop:
                return position + row - s.start
            position += s.num_rows
        return None

    def samples_before(self, file: str, row_group: int, row: int) -> int | None:
        """How many samples of this shard come before ``row``: the index of its sample, or of
        the next one when ``row`` was left out; ``None`` when the shard's slices do not reach it."""
        position = self._position(file, row_group, row)
        if position is None:
            return None
        return position - bisect.bisect_left(sorted(self.dropped), position)

    def sample_index(self, file: str, row_group: int, row: int) -> int | None:
        """Index of ``row``'s sample in this shard; ``None`` when the shard does not hold it."""
        if self._position(file, row_group, row) in self.dropped:
            return None
        index = self.samples_before(file, row_group, row)
        return index if index is not None and index < self.num_samples else None

    def __post_init__(self) -> None:
        if self.num_samples < 0 or self.num_bytes < 0:
            raise ManifestError(f"shard {self.path}: negative counts")
        found = [(a, getattr(self, a)) for a in ALGORITHMS if getattr(self, a) is not None]
        if not found:
            raise ManifestError(f"shard {self.path}: no digest ({' or '.join(ALGORITHMS)})")
        for algorithm, value in found:
            if not isinstance(value, str) or len(value) != HEX_LENGTH[algorithm]:
                raise ManifestError(
                    f"shard {self.path}: {algorithm} must be {HEX_LENGTH[algorithm]} hex digits, got {value!r}"
                )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ShardInfo:
        """The shard ``to_json`` (or a manifest) wrote; ``TypeError``/``ManifestError`` when it is not one."""
        return cls(**{**d, "rows": [RowSlice(**r) for r in d["rows"]]})

    @property
    def digest(self) -> tuple[str, str]:
        """``(algorithm, hex digest)`` of the shard (the first of ``ALGORITHMS`` it carries; it has one)."""
        return next((a, getattr(self, a)) for a in ALGORITHMS if getattr(self, a) is not None)


@dataclass(kw_only=True)
class Manifest:
    """Everything a reader or verifier needs to trust and use a converted dataset (fields in file order)."""

    format: str = FORMAT_NAME
    format_version: int = FORMAT_VERSION
    created_by: str = ""
    schema: str
    layout: str
    digest: str = "sha256"
    """Digest algorithm of the shards (``xxh3_128`` or ``sha256``); version 1 manifests are all sha256."""
    columns: list[dict[str, str]]
    """``[{"name": ..., "type": <arrow type string>}]`` in column order."""
    source_root: str
    drop_bad_rows: bool = False
    num_bad_rows: int = 0
    source_files: list[SourceFile]
    shards: list[ShardInfo]
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    @property
    def num_samples(self) -> int:
        return sum(s.num_samples for s in self.shards)

    @property
    def member_tables(self) -> bool:
        """Whether its shards' idx files are member tables (format 2), which readers slice shards through."""
        return self.format_version >= MEMBER_TABLE_VERSION

    @property
    def num_bytes(self) -> int:
        return sum(s.num_bytes for s in self.shards)

    @property
    def num_source_rows(self) -> int:
        return sum(f.num_rows for f in self.source_files)

    def validate(self) -> None:
        """Check internal consistency; raise ``ManifestError`` describing the first problem."""
        self._validate_header()
        for i, source in enumerate(self.source_files):
            _check_path(source.path, f"source_files[{i}].path")
        for i, shard in enumerate(self.shards):
            _check_path(shard.path, f"shards[{i}].path")
            _check_path(shard.idx_path, f"shards[{i}].idx_path")
        files = {f.path: f for f in self.source_files}
        if len(files) != len(self.source_files):
            raise ManifestError("source files listed twice")
        if len({f.key_stem for f in self.source_files}) != len(self.source_files):
            raise ManifestError("two source files share a key stem")
        paths: set[str] = set()
        for shard in self.shards:
            if shard.path in paths:
                raise ManifestError(f"shard {shard.path} listed twice")
            paths.add(shard.path)
            if getattr(shard, self.digest) is None:
                raise ManifestError(f"shard {shard.path}: no {self.digest} digest (the manifest's digest)")
            self._validate_shard(shard, files)
        if self.layout == "rowgroup":
            self._validate_rowgroup_cover()

    def _validate_header(self) -> None:
        """The format, its version, the digest and the layout are ones this editstream reads."""
        if self.format != FORMAT_NAME:
            raise ManifestError(f"not an editstream manifest (format {self.format!r})")
        if self.format_version not in READABLE_VERSIONS:
            raise ManifestError(
                f"manifest format version {self.format_version} is not supported "
                f"(this editstream reads versions {', '.join(map(str, READABLE_VERSIONS))})"
            )
        if self.digest not in ALGORITHMS or (self.format_version == 1 and self.digest != "sha256"):
            raise ManifestError(f"unknown digest {self.digest!r} for format version {self.format_version}")
        if self.layout not in LAYOUTS:
            raise ManifestError(f"unknown layout {self.layout!r}; expected one of {LAYOUTS}")

    def _validate_rowgroup_cover(self) -> None:
        """With one shard per source row group, every row group has exactly one shard."""
        units = {(s.source_file, s.row_group) for s in self.shards}
        if len(units) != len(self.shards):
            raise ManifestError("two shards claim the same source row group")
        expected = sum(f.num_row_groups for f in self.source_files)
        if len(units) != expected:
            missing = next(
                (f.path, rg) for f in self.source_files for rg in range(f.num_row_groups) if (f.path, rg) not in units
            )
            raise ManifestError(
                f"{expected - len(units)} of {expected} source row groups have no shard "
                f"(first: {missing[0]!r} row group {missing[1]})"
            )

    def _validate_shard(self, shard: ShardInfo, files: dict[str, SourceFile]) -> None:
        rows = 0
        for s in shard.rows:
            src = files.get(s.file)
            if src is None:
                raise ManifestError(f"shard {shard.path}: unknown source file {s.file!r}")
            if s.row_group >= src.num_row_groups or s.stop > src.row_groups[s.row_group]:
                raise ManifestError(
                    f"shard {shard.path}: rows {s.start}:{s.stop} of {s.file!r} row group "
                    f"{s.row_group} are outside the file"
                )
            rows += s.num_rows
        if shard.num_samples != rows - len(shard.dropped):
            raise ManifestError(
                f"shard {shard.path}: {shard.num_samples} samples from {rows} source rows "
                f"with {len(shard.dropped)} dropped"
            )
        if shard.dropped and not self.drop_bad_rows:
            raise ManifestError(f"shard {shard.path}: rows dropped although drop_bad_rows is off")
        if self.layout == "rowgroup":
            if shard.source_file is None or shard.row_group is None:
                raise ManifestError(f"shard {shard.path}: rowgroup layout needs source_file and row_group")
            if [(s.file, s.row_group) for s in shard.rows] != [(shard.source_file, shard.row_group)]:
                raise ManifestError(f"shard {shard.path}: rows do not match its source unit")

    def to_dict(self) -> dict[str, Any]:
        """The manifest as JSON-able data, keys in field order, each shard with only the digests it has."""
        d = asdict(self)
        d["shards"] = [
            {k: v for k, v in s.to_json().items() if k not in ALGORITHMS or v is not None} for s in self.shards
        ]
        if self.format_version == 1:
            del d["digest"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Manifest:
        """Build and validate a manifest from ``to_dict`` output; ``ManifestError`` when malformed."""
        try:
            data = dict(d)
            data["source_files"] = [SourceFile(**f) for f in d["source_files"]]
            data["shards"] = [ShardInfo.from_json(s) for s in d["shards"]]
            return cls(**data)
        except ManifestError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
            raise ManifestError(f"malformed manifest: {type(exc).__name__}: {exc}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n"

    def write(self, root: str, storage_options: storage.StorageOptions | None = None) -> str:
        """Write ``root/manifest.json`` atomically; returns its URL."""
        url = storage.join(root, MANIFEST_NAME)
        storage.write_bytes(url, self.to_json().encode("utf-8"), storage_options)
        return url

    @classmethod
    def read(cls, root: str, storage_options: storage.StorageOptions | None = None) -> Manifest:
        """Read and validate ``root/manifest.json``."""
        url = storage.join(root, MANIFEST_NAME)
        try:
            raw = storage.read_bytes(url, storage_options)
        except FileNotFoundError:
            raise ManifestError(
                f"no manifest at {url} (the conversion has not finished, or this is not a converted dataset)"
            ) from None
        try:
            d = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ManifestError(f"{url}: not valid JSON: {exc}") from None
        except RecursionError:
            raise ManifestError(f"{url}: nested too deeply to be a manifest") from None
        if not isinstance(d, dict):
            raise ManifestError(f"{url}: expected a JSON object")
        try:
            return cls.from_dict(d)
        except ManifestError as exc:
            raise ManifestError(f"{url}: {exc}") from None
