"""Check a converted dataset against its manifest (and optionally its source), each shard in one
hashed pass; problems are collected, never raised, so one run reports everything that is wrong."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from ..data.layouts import ConvertedRoot
from ..data.sources.parquet_slices import PlannedSlices
from ..format import manifest as mf
from ..format.idx import decode_idx
from ..format.keys import make_key
from ..format.member_table import MemberTable, TableBuilder, is_member_table
from ..format.rowcodec import RowCodecError, decode_sample
from ..format.tarblock import BLOCK, TarFormatError
from ..format.tarreader import iter_samples
from ..format.tarwriter import lay_out
from ..io import storage
from ..io.progress import Progress
from ..io.ranged import open_read
from ..io.words import counted
from ..kinds import UnknownKindError, get_kind, kind_choices
from .executors import make_executor
from .problems import Problem
from .records import HashingReader
from .shapes import SampleCheck, strategy_of

_MAX_PROBLEMS_PER_SHARD = 20


@dataclass
class VerifyReport:
    """The outcome of ``verify``: counts of what was checked and every problem found."""

    root: str
    shards_checked: int = 0
    samples_checked: int = 0
    rows_compared: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {"root": d.pop("root"), "ok": self.ok, **d}

    def format(self) -> str:
        head = (
            f"{self.root}: {'OK' if self.ok else 'FAILED'} - {counted(self.shards_checked, 'shard')}, "
            f"{counted(self.samples_checked, 'sample')}, {counted(self.rows_compared, 'source row')} compared, "
            f"{counted(len(self.problems), 'problem')}"
        )
        return "\n".join([head] + [f"  {p}" for p in self.problems])


def rows_equal(a: Any, b: Any) -> bool:
    """Exact equality of decoded rows, treating NaN as equal to itself and keeping int/float apart."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(rows_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(rows_equal(a[k], b[k]) for k in a)
    return a == b


def _first_difference(row: dict[str, Any], original: dict[str, Any]) -> str:
    if list(row) != list(original):
        return f"columns {list(row)} != {list(original)}"
    differs = (f"column {column!r} differs" for column in original if not rows_equal(row[column], original[column]))
    return next(differs, "rows differ")


@dataclass(kw_only=True)
class _ShardVerifier:
    """Checks one shard in one streaming pass (sent to a worker and back with what it found); memory
    stays bounded whatever the manifest claims."""

    root: str
    shard: mf.ShardInfo
    stems: dict[str, str]
    source: str | None
    storage_options: dict[str, Any] | None
    columns: tuple[str, ...] = ()
    """The manifest's column names: every sample must hold exactly these, in this order."""
    sample_check: SampleCheck | None = None
    """What every sample is compared with beyond its source row (``verify --source`` on JSONL + media)."""
    problems: list[Problem] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    compared: int = 0
    end_offset: int | None = None
    columns_reported: bool = False
    tabled: bool = False
    """The manifest says the idx is a member table (version 3 on): it must be the table of what the walk reads."""
    table: TableBuilder = field(default_factory=TableBuilder)

    @property
    def url(self) -> str:
        return storage.join(self.root, self.shard.path)

    def describe(self) -> str:
        return f"verify {self.shard.path}"

    def problem(self, kind: str, detail: str) -> None:
        if len(self.problems) < _MAX_PROBLEMS_PER_SHARD:
            self.problems.append(Problem(kind, self.shard.path, detail))

    def _source_rows(self) -> Iterator[dict[str, Any] | None]:
        """The source rows of the shard's samples, in order (streamed, a slice at a time, through the reader the
        converter used); ``None`` where unreadable."""
        assert self.source is not None
        for s, kept in itertools.groupby(self.shard.kept_rows(), key=lambda slot: slot[0]):
            cannot = f"cannot read {s.file} row group {s.row_group}"
            reading = PlannedSlices(self.source, [s], self.storage_options, zero_copy=False).rows()
            rows: Iterator[tuple[mf.RowSlice, int, dict[str, Any]]] = reading
            try:
                for _, row_index in kept:
                    try:
                        found = next((dict(row) for _, index, row in rows if index == row_index), None)
                    except (OSError, IndexError, ValueError) as exc:
                        self.problem("source", f"{cannot}: {exc}")
                        rows, found = iter(()), None
                    else:
                        if found is None:
                            self.problem("source", f"source {s.file} row group {s.row_group} has no row {row_index}")
                    yield found
            finally:
                reading.close()

    def compare(self, key: str, row: dict[str, Any], slot: tuple[mf.RowSlice, int] | None, original: Any) -> None:
        """The sample against its source row (when read) and the shape's own check (a JSONL line's media now)."""
        if slot is not None and original is not None:
            self.compared += 1
            if not rows_equal(row, original):
                where = f"{slot[0].file} row group {slot[0].row_group} row {slot[1]}"
                self.problem("row_mismatch", f"sample {key!r} != source {where}: {_first_difference(row, original)}")
        if self.sample_check is not None:
            self.compared += 1
            for text in self.sample_check(row):
                self.problem("source", f"sample {key!r}: {text}")

    def check_columns(self, key: str, row: dict[str, Any]) -> None:
        """A sample must hold the manifest's columns (the first sample that does not is reported, once a shard)."""
        if list(row) != list(self.columns) and not self.columns_reported:
            self.columns_reported = True
            self.problem("columns", f"sample {key!r} holds {list(row)}, the manifest lists {list(self.columns)}")

    def walk(self, reader: HashingReader) -> None:
        """Read every sample: keys in the expected order, every sample decodes, rows equal the source."""
        expected = self.shard.kept_rows()
        originals = self._source_rows() if self.source is not None else None
        try:
            for i, (key, offset, members) in enumerate(iter_samples(reader, source=self.url)):
                self.keys.append(key)
                self.offsets.append(offset)
                if self.tabled:
                    self.table.add(key, offset, lay_out(key, offset, [(s, len(d)) for s, d in members.items()])[0])
                slot = next(expected, None)
                original = next(originals, None) if originals is not None and slot is not None else None
                want = None if slot is None else make_key(self.stems[slot[0].file], slot[0].row_group, slot[1])
                if want is not None and key != want:
                    self.problem("key", f"sample {i} has key {key!r}, expected {want!r}")
                try:
                    row = decode_sample(key, members, invalid_text=True)
                except RowCodecError as exc:
                    self.problem("decode", str(exc))
                    continue
                self.check_columns(key, row)
                self.compare(key, row, slot, original)
            self.end_offset = reader.pos - BLOCK
        except TarFormatError as exc:
            self.problem("tar_format", f"{type(exc).__name__}: {exc}")

    def check_table(self, data: bytes, size: int) -> None:
        """A format-2 idx must be, byte for byte, the member table of the samples the walk read."""
        if not is_member_table(data):
            self.problem("idx", "the manifest's version says the idx is a member table, but it holds plain offsets")
            return
        if self.end_offset is None:
            return  # the walk stopped at a tar fault, already reported
        found = MemberTable.decode(data)
        want = self.table.finish(self.end_offset, size)
        if found != want:
            fields = ("keys", "sample_offsets", "first_member", "suffixes", "data_offsets", "sizes", "shard_size")
            differs = [name for name in fields if getattr(found, name) != getattr(want, name)]
            self.problem("idx", f"the member table differs from the shard in its {', '.join(differs)}")

    def totals(self, size: int, digest: str, idx: tuple[list[int], int] | None) -> None:
        shard = self.shard
        if size != shard.num_bytes:
            self.problem("size", f"{size} bytes, manifest says {shard.num_bytes}")
        algorithm, want = shard.digest
        if digest != want:
            self.problem("digest", f"{algorithm} {digest}, manifest says {want}")
        if len(self.keys) != shard.num_samples:
            self.problem("sample_count", f"{len(self.keys)} samples, manifest says {shard.num_samples}")
        if idx is None:
            return
        idx_offsets, idx_end = idx
        if len(idx_offsets) != shard.num_samples:
            self.problem("idx", f"idx has {len(idx_offsets)} offsets, manifest says {shard.num_samples} samples")
        if idx_offsets[: len(self.offsets)] != self.offsets[: len(idx_offsets)]:
            i = next(i for i, (a, b) in enumerate(zip(idx_offsets, self.offsets)) if a != b)
            self.problem("idx", f"idx offset of sample {i} is {idx_offsets[i]}, the tar has it at {self.offsets[i]}")
        if self.end_offset is not None and idx_end != self.end_offset:
            self.problem("idx", f"idx end offset {idx_end}, the tar's samples end at {self.end_offset}")


def _check_shard(verifier: _ShardVerifier) -> _ShardVerifier:
    so = verifier.storage_options
    if not storage.exists(verifier.url, so):
        verifier.problem("missing_shard", f"{verifier.url} does not exist")
        return verifier
    idx_url = storage.join(verifier.root, verifier.shard.idx_path)
    idx: tuple[list[int], int] | None = None
    data: bytes | None = None
    try:
        data = storage.read_bytes(idx_url, so)
        idx = decode_idx(data, idx_url)
    except FileNotFoundError:
        verifier.problem("missing_idx", f"{idx_url} does not exist")
    except mf.ManifestError as exc:
        verifier.problem("idx", str(exc))
    with open_read(verifier.url, so, block_size=8 * 1024 * 1024) as f:
        reader = HashingReader(f, verifier.shard.digest[0])
        verifier.walk(reader)
        reader.drain()
    verifier.totals(reader.pos, reader.hash.hexdigest(), idx)
    if verifier.tabled and idx is not None and data is not None:
        verifier.check_table(data, reader.pos)
    return verifier


def schema_problems(manifest: mf.Manifest) -> list[Problem]:
    """Whether the manifest's ``schema`` fits its columns and ``extra`` (no other kind's record), so a
    hand-edited ``schema`` is reported; kinds whose data look alike cannot be told apart here."""
    try:
        kind = get_kind(manifest.schema)
    except UnknownKindError:
        return []
    names = [c["name"] for c in manifest.columns]
    changed = "the schema was changed after the conversion"
    details: list[str] = []
    if missing := [c for c in kind.columns if c not in names]:
        details.append(
            f"the manifest's schema {manifest.schema!r} needs columns {list(kind.columns)}, but its shards "
            f"hold {names} (missing {missing}): {changed}"
        )
    details += [
        f"the manifest's schema is {manifest.schema!r}, but extra holds the record of a {key!r} conversion: {changed}"
        for key in manifest.extra
        if key in kind_choices() and key not in kind.names
    ]
    return [Problem("schema", None, detail) for detail in details]


def _tally(report: VerifyReport, shards: list[mf.ShardInfo], outcomes: dict[str, _ShardVerifier]) -> None:
    """Add each shard's outcome to the report, in manifest order; a key in two shards is a problem."""
    seen: dict[str, str] = {}
    for shard in shards:
        outcome = outcomes[shard.path]
        report.shards_checked += 1
        report.samples_checked += len(outcome.keys)
        report.rows_compared += outcome.compared
        report.problems.extend(outcome.problems)
        for key in outcome.keys:
            if key in seen and seen[key] != shard.path:
                report.problems.append(Problem("duplicate_key", shard.path, f"key {key!r} is also in {seen[key]}"))
            seen.setdefault(key, shard.path)


def verify(
    root: str,
    *,
    source: str | None = None,
    storage_options: dict[str, Any] | None = None,
    workers: int | None = 1,
    engine: str = "auto",
    progress: bool = False,
) -> VerifyReport:
    """Re-read every shard under ``root`` and check it against the manifest (and, with ``source``, its rows)."""
    report = VerifyReport(root=root)
    try:
        m = ConvertedRoot(root, storage_options).manifest
    except mf.ManifestError as exc:
        report.problems.append(Problem("manifest", None, str(exc)))
        return report
    stems = {f.path: f.key_stem for f in m.source_files}
    src = source.rstrip("/") if source else None
    shape = strategy_of(m.schema)
    report.problems.extend(schema_problems(m))
    report.problems.extend(shape.check_root(root, m, src, storage_options))
    sample_check = shape.sample_check(root, m, src, storage_options)
    checks = [
        _ShardVerifier(
            root=root.rstrip("/"),
            shard=s,
            stems=stems,
            source=src if shape.compares_rows else None,
            storage_options=storage_options,
            columns=tuple(c["name"] for c in m.columns),
            tabled=m.member_tables,
            sample_check=sample_check,
        )
        for s in m.shards
    ]
    runner = make_executor(engine, workers)
    outcomes: dict[str, _ShardVerifier] = {}
    bar = Progress("verify", len(checks), "shards", progress)
    try:
        for check, outcome in runner.map_unordered(_check_shard, checks):
            outcomes[check.shard.path] = outcome
            bar.update(1, rows=len(outcome.keys), nbytes=check.shard.num_bytes)
    finally:
        bar.close()
        runner.close()
    _tally(report, m.shards, outcomes)
    return report
