"""Check a converted dataset against its manifest (and optionally against the parquet source).

Each shard is read once: the bytes are hashed while the tar is walked, so size, sha256,
sample count, idx offsets, key order and contiguity, and the decodability of every sample
are all checked in one pass. With a source, every source row is compared with its sample.
Problems are collected (never raised) so one run reports everything that is wrong.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from ..format import manifest as mf
from ..format.idx import read_idx
from ..format.keys import make_key
from ..format.rowcodec import RowCodecError, decode_sample
from ..format.tarblock import BLOCK, TarFormatError
from ..format.tarreader import iter_samples
from ..io import storage
from ..io.parquet import read_row_group_rows, row_group_sizes
from .executors import make_executor

_MAX_PROBLEMS_PER_SHARD = 20


@dataclass(frozen=True)
class Problem:
    """One mismatch: what kind, which shard (if any), and a precise description."""

    kind: str
    shard: str | None
    detail: str

    def __str__(self) -> str:
        where = f"{self.shard}: " if self.shard else ""
        return f"[{self.kind}] {where}{self.detail}"


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
        return {"root": self.root, "ok": self.ok, "shards_checked": self.shards_checked,
                "samples_checked": self.samples_checked, "rows_compared": self.rows_compared,
                "problems": [asdict(p) for p in self.problems]}

    def format(self) -> str:
        head = (f"{self.root}: {'OK' if self.ok else 'FAILED'} - {self.shards_checked} shards, "
                f"{self.samples_checked} samples, {self.rows_compared} source rows compared, "
                f"{len(self.problems)} problems")
        return "\n".join([head] + [f"  {p}" for p in self.problems])


class _HashingReader:
    """A forward-only reader that hashes and counts what passes through it."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self.hash = hashlib.sha256()
        self.pos = 0

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self.hash.update(data)
        self.pos += len(data)
        return data

    def drain(self) -> None:
        while self.read(8 * 1024 * 1024):
            pass


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
    for column in original:
        if not rows_equal(row[column], original[column]):
            return f"column {column!r} differs"
    return "rows differ"


@dataclass(frozen=True, kw_only=True)
class _ShardCheck:
    root: str
    shard: dict[str, Any]
    stems: dict[str, str]
    source: str | None
    storage_options: dict[str, Any] | None

    def describe(self) -> str:
        return f"verify {self.shard['path']}"


@dataclass
class _ShardOutcome:
    problems: list[Problem]
    keys: list[str]
    samples: int
    rows_compared: int


def _expected_keys(check: _ShardCheck) -> list[tuple[mf.RowSlice, int, str]]:
    shard = mf.ShardInfo(**{**check.shard, "rows": [mf.RowSlice(**s) for s in check.shard["rows"]]})
    return [(s, row, make_key(check.stems[s.file], s.row_group, row)) for s, row in shard.kept_rows()]


def _check_shard(check: _ShardCheck) -> _ShardOutcome:
    shard = check.shard
    name = shard["path"]
    so = check.storage_options
    problems: list[Problem] = []

    def problem(kind: str, detail: str) -> None:
        if len(problems) < _MAX_PROBLEMS_PER_SHARD:
            problems.append(Problem(kind, name, detail))

    url = storage.join(check.root, name)
    if not storage.exists(url, so):
        return _ShardOutcome([Problem("missing_shard", name, f"{url} does not exist")], [], 0, 0)

    idx: tuple[list[int], int] | None = None
    idx_url = storage.join(check.root, shard["idx_path"])
    try:
        idx = read_idx(idx_url, so)
    except FileNotFoundError:
        problem("missing_idx", f"{idx_url} does not exist")
    except mf.ManifestError as exc:
        problem("idx", str(exc))

    expected = _expected_keys(check)
    originals: dict[tuple[str, int], list[dict[str, Any]]] = {}
    keys: list[str] = []
    offsets: list[int] = []
    compared = 0
    end_offset: int | None = None
    with storage.open_read(url, so, block_size=8 * 1024 * 1024) as f:
        reader = _HashingReader(f)
        try:
            for i, (key, offset, members) in enumerate(iter_samples(reader, source=url)):
                keys.append(key)
                offsets.append(offset)
                if i < len(expected) and key != expected[i][2]:
                    problem("key", f"sample {i} has key {key!r}, expected {expected[i][2]!r}")
                try:
                    row = decode_sample(key, members)
                except RowCodecError as exc:
                    problem("decode", str(exc))
                    continue
                if check.source is not None and i < len(expected):
                    rs, row_index, _ = expected[i]
                    unit = (rs.file, rs.row_group)
                    if unit not in originals:
                        try:
                            originals[unit] = read_row_group_rows(storage.join(check.source, rs.file), rs.row_group,
                                                                  so)
                        except (OSError, IndexError) as exc:
                            problem("source", f"cannot read {rs.file} row group {rs.row_group}: {exc}")
                            originals[unit] = []
                    rows = originals[unit]
                    if row_index < len(rows):
                        compared += 1
                        if not rows_equal(row, rows[row_index]):
                            problem("row_mismatch", f"sample {key!r} != source {rs.file} row group {rs.row_group} "
                                                    f"row {row_index}: {_first_difference(row, rows[row_index])}")
                    else:
                        problem("source", f"source {rs.file} row group {rs.row_group} has no row {row_index}")
            end_offset = reader.pos - BLOCK
        except TarFormatError as exc:
            problem("tar_format", f"{type(exc).__name__}: {exc}")
        reader.drain()
    size = reader.pos
    sha = reader.hash.hexdigest()
    if size != shard["num_bytes"]:
        problem("size", f"{size} bytes, manifest says {shard['num_bytes']}")
    if sha != shard["sha256"]:
        problem("sha256", f"sha256 {sha}, manifest says {shard['sha256']}")
    if len(keys) != shard["num_samples"]:
        problem("sample_count", f"{len(keys)} samples, manifest says {shard['num_samples']}")
    if idx is not None:
        idx_offsets, idx_end = idx
        if len(idx_offsets) != shard["num_samples"]:
            problem("idx", f"idx has {len(idx_offsets)} offsets, manifest says {shard['num_samples']} samples")
        if idx_offsets[:len(offsets)] != offsets[:len(idx_offsets)]:
            first = next(i for i, (a, b) in enumerate(zip(idx_offsets, offsets)) if a != b)
            problem("idx", f"idx offset of sample {first} is {idx_offsets[first]}, the tar has it at {offsets[first]}")
        if end_offset is not None and idx_end != end_offset:
            problem("idx", f"idx end offset {idx_end}, the tar's samples end at {end_offset}")
    return _ShardOutcome(problems, keys, len(keys), compared)


def _check_source_coverage(m: mf.Manifest, source: str, so: dict[str, Any] | None) -> list[Problem]:
    """Every row of every source file is inside exactly one shard slice, and the manifest's row
    counts match the files."""
    problems: list[Problem] = []
    try:
        urls = storage.list_files(source, ".parquet", so)
    except FileNotFoundError as exc:
        return [Problem("source", None, str(exc))]
    names = [u.rsplit("/", 1)[-1] for u in urls]
    listed = [f.path for f in m.source_files]
    if sorted(names) != sorted(listed):
        problems.append(Problem("source", None, f"source has files {names}, manifest lists {listed}"))
    covered: Counter = Counter()
    for shard in m.shards:
        for s in shard.rows:
            covered[(s.file, s.row_group)] += s.num_rows
    for f in m.source_files:
        if f.path not in names:
            continue
        try:
            sizes = row_group_sizes(storage.join(source, f.path), so)
        except OSError as exc:
            problems.append(Problem("source", None, f"cannot read footer of {f.path}: {exc}"))
            continue
        if sizes[:len(f.row_groups)] != f.row_groups:
            problems.append(Problem("source", None, f"{f.path} has row groups of {sizes} rows, manifest says "
                                                    f"{f.row_groups}"))
        for rg, n in enumerate(f.row_groups):
            if covered[(f.path, rg)] != n:
                problems.append(Problem("source_coverage", None, f"{f.path} row group {rg}: {n} rows, "
                                                                 f"shards cover {covered[(f.path, rg)]}"))
    return problems


def verify(root: str, *, source: str | None = None, storage_options: dict[str, Any] | None = None,
           workers: int | None = 1, engine: str = "auto") -> VerifyReport:
    """Re-read every shard under ``root`` and check it against the manifest; with ``source``,
    also check that every source row is in the shards and equal to the original."""
    report = VerifyReport(root=root)
    try:
        m = mf.Manifest.read(root, storage_options)
    except mf.ManifestError as exc:
        report.problems.append(Problem("manifest", None, str(exc)))
        return report
    stems = {f.path: f.key_stem for f in m.source_files}
    src = source.rstrip("/") if source else None
    checks = [_ShardCheck(root=root.rstrip("/"), shard=asdict(s), stems=stems, source=src,
                          storage_options=storage_options) for s in m.shards]
    if src is not None:
        report.problems.extend(_check_source_coverage(m, src, storage_options))
    runner = make_executor(engine, workers)
    outcomes: dict[str, _ShardOutcome] = {}
    try:
        for check, outcome in runner.map_unordered(_check_shard, checks):
            outcomes[check.shard["path"]] = outcome
    finally:
        runner.close()
    seen: dict[str, str] = {}
    for shard in m.shards:
        outcome = outcomes[shard.path]
        report.shards_checked += 1
        report.samples_checked += outcome.samples
        report.rows_compared += outcome.rows_compared
        report.problems.extend(outcome.problems)
        for key in outcome.keys:
            if key in seen and seen[key] != shard.path:
                report.problems.append(Problem("duplicate_key", shard.path, f"key {key!r} is also in {seen[key]}"))
            seen.setdefault(key, shard.path)
    return report
