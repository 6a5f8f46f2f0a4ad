"""What a conversion plans: ``ShardTask`` (one picklable shard, whose fingerprint decides whether an
earlier run's shard is kept) and ``Plan`` (all of them, and what the manifest needs)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..format import manifest as mf
from ..format.digest import DEFAULT_DIGEST

if TYPE_CHECKING:
    from .config import ConvertConfig


@dataclass(frozen=True, kw_only=True)
class ParquetPart:
    """A parquet task's checks: the one source file and row group a rowgroup-layout shard holds (whole,
    whatever the plan knew), and the row counts the plan expects of the slices, when known."""

    source_file: str | None = None
    row_group: int | None = None
    expected_rows: tuple[int, ...] | None = None

    def fingerprint_fields(self) -> dict[str, Any]:
        """Nothing beyond the shared fields."""
        return {}


@dataclass(frozen=True, kw_only=True)
class LinePart:
    """Where a JSONL task's lines are in its file (their ``sha256``: a task refuses a JSONL that changed
    since planning), and where their media are read from (resolved, so any worker reads the same files)."""

    byte_start: int
    byte_stop: int
    sha256: str
    media_dir: str
    allow_outside: bool = False
    """Whether media names outside ``media_dir`` are read rather than refused (the user opted out)."""
    source_file: ClassVar[None] = None
    row_group: ClassVar[None] = None

    def fingerprint_fields(self) -> dict[str, Any]:
        """The range, hash, media directory and opt-out (left out when off, so older fingerprints hold)."""
        fields = asdict(self)
        if not self.allow_outside:
            del fields["allow_outside"]
        return {"jsonl": fields}


@dataclass(frozen=True, kw_only=True)
class ShardTask:
    """Everything needed to build one shard, as plain picklable values."""

    src_root: str
    dst_root: str
    shard_path: str
    slices: tuple[mf.RowSlice, ...]
    stems: tuple[tuple[str, str], ...]
    schema: str
    columns: tuple[tuple[str, str], ...]
    drop_bad_rows: bool
    part: ParquetPart | LinePart
    storage_options: dict[str, Any] | None = None
    digest: str = DEFAULT_DIGEST
    sources: tuple[tuple[str, str], ...] = ()
    """``(source file, its identity as JSON)`` for each file the task reads (``data.identity``): checked
    when the file is opened, and part of the fingerprint, so a changed source is never trusted."""

    def describe(self) -> str:
        """How errors name this task."""
        return f"shard {self.shard_path} (from {self.src_root})"

    def fingerprint(self, sources: Mapping[str, Any] | None = None) -> str:
        """A hash of what determines the shard's bytes; ``sources`` (file -> identity) stands in for the
        task's own identities (``{}`` leaves them out, as a plan made before they were recorded)."""
        whole = self.part.row_group is not None
        d = {
            "format_version": mf.FORMAT_VERSION,
            "source": self.src_root,
            "shard": self.shard_path,
            # A rowgroup shard always holds its whole row group, whether or not the plan knew its size.
            "slices": [(s.file, s.row_group, s.start, None if whole else s.stop) for s in self.slices],
            "stems": self.stems,
            "schema": self.schema,
            "columns": self.columns,
            "drop": self.drop_bad_rows,
            "digest": self.digest,
            **self.part.fingerprint_fields(),
        }
        if sources is None:
            identity = dict(self.sources)
        else:
            identity = {f: _as_json(sources.get(f)) for f, _ in self.sources} if sources else {}
        if identity:
            d["sources"] = identity
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def _as_json(identity: Any) -> str:
    return json.dumps(identity, sort_keys=True)


@dataclass
class Plan:
    """The shard tasks of one conversion plus what the manifest needs about the source."""

    tasks: list[ShardTask]
    schema: str
    columns: tuple[tuple[str, str], ...]
    files: list[str]
    """Source file names relative to the source root, sorted."""
    row_groups: dict[str, list[int] | None]
    """Rows per row group of each file, ``None`` where only the count is known (``num_row_groups``)."""
    num_row_groups: dict[str, int]
    stems: dict[str, str]
    source_bytes: int
    source_root: str | None = None
    """The directory the manifest's source files are relative to, when it is not the source itself (JSONL)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Kind-specific manifest records (``extra`` of the manifest), part of the fingerprint."""
    side_files: dict[str, bytes] = field(default_factory=dict)
    """Small files the converted root holds besides its shards (name -> bytes), written before them."""
    sources: dict[str, Any] = field(default_factory=dict)
    """Each source file's identity (``data.identity``), as the tasks that read it have it."""
    listing_order: list[str] | None = None
    """The source files (relative names) in the order the source directory lists them, when not sorted."""

    def fingerprint(self, sources: Mapping[str, Any] | None = None) -> str:
        """A hash of every task's fingerprint (and the extra records): equal plans write equal outputs."""
        parts = [t.fingerprint(sources) for t in self.tasks]
        if self.extra:
            parts.append(json.dumps(self.extra, sort_keys=True))
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class TaskMaker:
    """Makes the shard tasks of one plan: what they share is given once; each task gets the key stems and
    the identities (when the plan records them) of the source files it reads."""

    cfg: ConvertConfig
    src_root: str
    schema: str
    columns: tuple[tuple[str, str], ...]
    stems: dict[str, str]
    identities: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, shard_path: str, slices: tuple[mf.RowSlice, ...], part: ParquetPart | LinePart) -> ShardTask:
        files = dict.fromkeys(s.file for s in slices)  # in source order
        return ShardTask(
            src_root=self.src_root,
            dst_root=self.cfg.dst.rstrip("/"),
            shard_path=shard_path,
            slices=slices,
            stems=tuple((f, self.stems[f]) for f in files),
            schema=self.schema,
            columns=self.columns,
            drop_bad_rows=self.cfg.drop_bad_rows,
            part=part,
            storage_options=self.cfg.storage_options,
            digest=self.cfg.digest,
            sources=tuple((f, _as_json(self.identities[f])) for f in sorted(files) if f in self.identities),
        )


@dataclass
class ShardCutter:
    """Cuts consecutive source rows into shards of about ``target_bytes`` and ``target_rows`` (the size layout)."""

    target_bytes: int | None
    target_rows: int | None
    shards: list[tuple[mf.RowSlice, ...]] = field(default_factory=list)
    current: list[mf.RowSlice] = field(default_factory=list)
    rows: int = 0
    bytes: float = 0.0

    def flush(self) -> None:
        """Close the shard being filled, if it holds any rows."""
        if self.current:
            self.shards.append(tuple(self.current))
        self.current, self.rows, self.bytes = [], 0, 0.0

    def add(self, file: str, row_group: int, start: int, stop: int, per_row: float) -> None:
        """Rows ``[start, stop)`` of one row group, about ``per_row`` bytes each (0: counted, not sized)."""
        while start < stop:
            room = stop - start
            if self.target_rows is not None:
                room = min(room, self.target_rows - self.rows)
            if self.target_bytes is not None and per_row > 0:
                room = min(room, int((self.target_bytes - self.bytes) // per_row))
            if room <= 0 and self.rows > 0:
                self.flush()
                continue
            room = max(room, 1)  # a single row above the target still gets a shard
            self.current.append(mf.RowSlice(file=file, row_group=row_group, start=start, stop=start + room))
            self.rows += room
            self.bytes += room * per_row
            start += room
            if self.target_rows is not None and self.rows >= self.target_rows:
                self.flush()
