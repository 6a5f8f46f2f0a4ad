"""Convert a parquet dataset into WebDataset tar shards: planned, parallel, resumable, verifiable.

The plan is a list of ``ShardTask`` values, each a pure description of one shard (its source
rows and output name). ``convert_shard`` turns one task into one shard, its ``.tar.idx`` and
a done record, so the same function runs in-process, on a process pool or on a cluster. A
re-run skips shards whose done record matches and whose bytes still hash to the recorded
sha256, so a crashed conversion resumes and ends byte-identical to an uninterrupted one.
``manifest.json`` is written last.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from . import __version__, manifest as mf, storage
from .converters import canonical_name, check_columns, detect_schema, get_schema
from .executors import ENGINES, Executor, import_ray, make_executor
from .parquet_rows import batch_rows, open_parquet
from .rowcodec import encode_members, make_key, safe_component
from .tarfmt import TarWriter

log = logging.getLogger(__name__)

PROGRESS_DIR = "_editstream_progress"
DEFAULT_SHARD_SIZE = 256 * 1024 * 1024
_BATCH_ROWS = 256
_ROW_OVERHEAD_ESTIMATE = 2048  # tar headers and JSON per row, for the size layout's plan
_TMP_NAME = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{32}\.tmp$")
DROP_NOTE = ("bad rows were dropped (--drop-bad-rows): row positions no longer match the parquet "
             "source, so the WebDataset backend does not reproduce the parquet backend's samples")


# ---------------------------------------------------------------------------------------
# Configuration and plan

@dataclass(frozen=True, kw_only=True)
class ConvertConfig:
    """What to convert and how; validated on construction so bad options fail before any I/O."""

    src: str
    dst: str
    schema: str | None = None
    parquet_info: str | Mapping[str, Any] | None = None
    workers: int | None = None
    engine: str = "auto"
    ray_address: str | None = None
    layout: str = "rowgroup"
    shard_size: int | None = None
    samples_per_shard: int | None = None
    overwrite: bool = False
    drop_bad_rows: bool = False
    storage_options: dict[str, Any] | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {self.engine!r}")
        if self.ray_address is not None and self.engine != "ray":
            raise ValueError(f"ray_address applies to engine='ray' only, not engine={self.engine!r}")
        if self.layout not in mf.LAYOUTS:
            raise ValueError(f"layout must be one of {mf.LAYOUTS}, got {self.layout!r}")
        if self.layout == "rowgroup" and (self.shard_size is not None or self.samples_per_shard is not None):
            raise ValueError("shard_size / samples_per_shard apply to layout='size' only")
        if self.shard_size is not None and self.shard_size <= 0:
            raise ValueError(f"shard_size must be > 0, got {self.shard_size}")
        if self.samples_per_shard is not None and self.samples_per_shard <= 0:
            raise ValueError(f"samples_per_shard must be > 0, got {self.samples_per_shard}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if self.schema is not None:
            canonical_name(self.schema)
        if self.src.rstrip("/") == self.dst.rstrip("/"):
            raise ValueError("src and dst must differ")


@dataclass(frozen=True, kw_only=True)
class ShardTask:
    """Everything needed to build one shard, as plain picklable values."""

    src_root: str
    dst_root: str
    shard_path: str
    slices: tuple[mf.RowSlice, ...]
    stems: tuple[tuple[str, str], ...]
    """``(source file, key stem)`` for the files in ``slices``."""
    schema: str
    columns: tuple[tuple[str, str], ...]
    drop_bad_rows: bool
    storage_options: dict[str, Any] | None = None
    source_file: str | None = None
    row_group: int | None = None
    expected_rows: tuple[int, ...] | None = None
    """Row counts of the slices when known from the plan (checked against the file)."""

    def describe(self) -> str:
        return f"shard {self.shard_path} (from {self.src_root})"

    def fingerprint(self) -> str:
        """A hash of what determines the shard's bytes; a done record must match it to be reused."""
        d = {
            "format_version": mf.FORMAT_VERSION,
            "source": self.src_root,
            "shard": self.shard_path,
            # A rowgroup shard always holds its whole row group, whether or not the plan knew its size.
            "slices": [(s.file, s.row_group, s.start, None if self.row_group is not None else s.stop)
                       for s in self.slices],
            "stems": self.stems,
            "schema": self.schema,
            "columns": self.columns,
            "drop": self.drop_bad_rows,
        }
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


@dataclass(kw_only=True)
class ShardResult:
    """What one shard task produced (also its done record)."""

    shard: dict[str, Any]
    """A ``ShardInfo`` as a dict."""
    bad_rows: list[dict[str, Any]] = field(default_factory=list)
    num_rows: int = 0
    skipped: bool = False
    seconds: float = 0.0


def _load_parquet_info(info: str | Mapping[str, Any] | None,
                       storage_options: dict[str, Any] | None) -> dict[str, Any]:
    if info is None:
        return {}
    if isinstance(info, Mapping):
        return dict(info)
    try:
        data = json.loads(storage.read_bytes(info, storage_options))
    except FileNotFoundError:
        raise FileNotFoundError(f"parquet info file not found: {info}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"parquet info file {info} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"parquet info file {info} must hold a JSON object")
    return data


def _info_for(info: dict[str, Any], url: str) -> dict[str, Any] | None:
    """The parquet_info entry of ``url``: by exact URL, else by file name."""
    if url in info:
        return info[url]
    name = url.rsplit("/", 1)[-1]
    for k, v in info.items():
        if k.rsplit("/", 1)[-1] == name:
            return v
    return None


def _key_stems(names: list[str]) -> list[str]:
    """A unique, dot-free key stem per source file name (deterministic in list order)."""
    used: set[str] = set()
    out = []
    for i, name in enumerate(names):
        base = name[:-len(".parquet")] if name.endswith(".parquet") else name
        stem = safe_component(base)
        if stem.startswith("_"):
            stem = "f" + stem
        candidate, n = stem, 0
        while candidate in used:
            n += 1
            candidate = f"{stem}-{i}" if n == 1 else f"{stem}-{i}-{n}"
        used.add(candidate)
        out.append(candidate)
    return out


@dataclass(frozen=True)
class _Footer:
    num_rows: list[int]
    byte_sizes: list[int]
    columns: tuple[tuple[str, str], ...]


def _read_footer(url: str, storage_options: dict[str, Any] | None) -> _Footer:
    with open_parquet(url, storage_options) as pf:
        meta = pf.metadata
        groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
        columns = tuple((f.name, str(f.type)) for f in pf.schema_arrow)
        return _Footer([g.num_rows for g in groups], [g.total_byte_size for g in groups], columns)


@dataclass
class Plan:
    """The shard tasks of one conversion plus what the manifest needs about the source."""

    tasks: list[ShardTask]
    schema: str
    columns: tuple[tuple[str, str], ...]
    files: list[str]
    """Source file names relative to the source root, sorted."""
    row_groups: dict[str, list[int] | None]
    """Rows per row group of each file, ``None`` where only the count of row groups is known."""
    num_row_groups: dict[str, int]
    stems: dict[str, str]
    source_bytes: int

    def fingerprint(self) -> str:
        return hashlib.sha256("\n".join(t.fingerprint() for t in self.tasks).encode()).hexdigest()


def plan_conversion(cfg: ConvertConfig) -> Plan:
    """List the source, read what metadata is needed, and cut it into shard tasks."""
    so = cfg.storage_options
    urls = storage.list_files(cfg.src, ".parquet", so)
    if not urls:
        raise FileNotFoundError(f"no *.parquet files in {cfg.src}")
    names = [u.rsplit("/", 1)[-1] for u in urls]
    info = _load_parquet_info(cfg.parquet_info, so)

    # Footers: all of them for the size layout or when parquet_info does not cover a file;
    # otherwise just the first (for the column types).
    need: list[int] = []
    counts: dict[str, int] = {}
    for i, (url, name) in enumerate(zip(urls, names)):
        entry = _info_for(info, url)
        if cfg.layout == "size" or entry is None or "num_row_groups" not in entry:
            need.append(i)
        else:
            counts[name] = int(entry["num_row_groups"])
    if 0 not in need:
        need.insert(0, 0)
    with ThreadPoolExecutor(max_workers=min(16, len(need))) as pool:
        footers = dict(zip(need, pool.map(lambda i: _read_footer(urls[i], so), need)))

    columns = footers[0].columns
    for i, footer in footers.items():
        if footer.columns != columns:
            raise ValueError(f"{urls[i]} has columns {list(footer.columns)}, but {urls[0]} has {list(columns)}; "
                             f"all files of a dataset must share one schema")
    column_names = [c for c, _ in columns]
    schema = canonical_name(cfg.schema) if cfg.schema else detect_schema(column_names)
    if schema is None:
        raise ValueError(f"cannot detect the schema of {cfg.src} from its columns {column_names}; pass "
                         f"schema='unified_edit', 't2i_pretrain' or 'generic'")
    check_columns(schema, column_names)

    row_groups: dict[str, list[int] | None] = {}
    num_rgs: dict[str, int] = {}
    for i, name in enumerate(names):
        footer = footers.get(i)
        limit = counts.get(name)
        if footer is not None:
            entry = _info_for(info, urls[i])
            if entry is not None and "num_row_groups" in entry:
                limit = int(entry["num_row_groups"])
            sizes = footer.num_rows if limit is None else footer.num_rows[:limit]
            if limit is not None and limit > len(footer.num_rows):
                raise ValueError(f"parquet_info says {urls[i]} has {limit} row groups; its footer has "
                                 f"{len(footer.num_rows)}")
            row_groups[name] = list(sizes)
            num_rgs[name] = len(sizes)
        else:
            row_groups[name] = None
            num_rgs[name] = counts[name]
    stems = dict(zip(names, _key_stems(names)))
    common = dict(src_root=cfg.src.rstrip("/"), dst_root=cfg.dst.rstrip("/"), schema=schema, columns=columns,
                  drop_bad_rows=cfg.drop_bad_rows, storage_options=so)

    tasks: list[ShardTask] = []
    if cfg.layout == "rowgroup":
        for name in names:
            sizes = row_groups[name]
            for rg in range(num_rgs[name]):
                stop = sizes[rg] if sizes is not None else -1
                tasks.append(ShardTask(
                    shard_path=f"{stems[name]}-rg{rg:05d}.tar",
                    slices=(mf.RowSlice(file=name, row_group=rg, start=0, stop=max(stop, 0)),),
                    stems=((name, stems[name]),), source_file=name, row_group=rg,
                    expected_rows=(stop,) if sizes is not None else None, **common))
    else:
        tasks = _plan_size_layout(cfg, names, footers, stems, row_groups, common)

    source_bytes = 0
    for url in urls:
        try:
            source_bytes += storage.size(url, so)
        except OSError:
            pass
    return Plan(tasks=tasks, schema=schema, columns=columns, files=names, row_groups=row_groups,
                num_row_groups=num_rgs, stems=stems, source_bytes=source_bytes)


def _plan_size_layout(cfg: ConvertConfig, names: list[str], footers: dict[int, _Footer], stems: dict[str, str],
                      row_groups: dict[str, list[int] | None], common: dict[str, Any]) -> list[ShardTask]:
    """Cut the rows, in source order, into shards of about ``shard_size`` bytes / ``samples_per_shard`` rows.

    Sizes are estimated from the footers' uncompressed row-group sizes, so the plan needs no
    data reads and is the same on every run.
    """
    target_bytes = cfg.shard_size if cfg.shard_size is not None else (
        DEFAULT_SHARD_SIZE if cfg.samples_per_shard is None else None)
    target_rows = cfg.samples_per_shard
    tasks: list[ShardTask] = []
    current: list[mf.RowSlice] = []
    cur_rows = 0
    cur_bytes = 0.0

    def flush() -> None:
        nonlocal current, cur_rows, cur_bytes
        if not current:
            return
        files_in = sorted({s.file for s in current}, key=names.index)
        tasks.append(ShardTask(shard_path=f"shard-{len(tasks):06d}.tar", slices=tuple(current),
                               stems=tuple((f, stems[f]) for f in files_in),
                               expected_rows=tuple(s.num_rows for s in current), **common))
        current, cur_rows, cur_bytes = [], 0, 0.0

    for i, name in enumerate(names):
        sizes = row_groups[name] or []
        footer = footers[i]
        for rg, n in enumerate(sizes):
            per_row = footer.byte_sizes[rg] / n + _ROW_OVERHEAD_ESTIMATE if n else 0.0
            start = 0
            while start < n:
                room = n - start
                if target_rows is not None:
                    room = min(room, target_rows - cur_rows)
                if target_bytes is not None and per_row > 0:
                    fit = int((target_bytes - cur_bytes) // per_row)
                    room = min(room, fit)
                if room <= 0:
                    if cur_rows == 0:
                        room = 1  # a single row above the target still gets a shard
                    else:
                        flush()
                        continue
                current.append(mf.RowSlice(file=name, row_group=rg, start=start, stop=start + room))
                cur_rows += room
                cur_bytes += room * per_row
                start += room
                if target_rows is not None and cur_rows >= target_rows:
                    flush()
    flush()
    return tasks


# ---------------------------------------------------------------------------------------
# Output files

def _open_output(url: str, storage_options: dict[str, Any] | None) -> contextlib.AbstractContextManager[IO[bytes]]:
    """Write ``url`` so it appears under its name only when complete (``storage.atomic_write``).

    Local files skip the per-file fsync: the whole output is synced once before the manifest
    is written, and a re-run re-hashes every shard it reuses, so a torn file after a power cut
    is redone. On S3 a multipart upload completes only on close.
    """
    return storage.atomic_write(url, storage_options, fsync=False)


def _write_output(url: str, data: bytes, storage_options: dict[str, Any] | None) -> None:
    with _open_output(url, storage_options) as f:
        f.write(data)


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _LocalSyncer:
    """fsyncs finished local shards on a few threads while the conversion goes on, then the
    directory, so the manifest is written only over durable files. A no-op for object stores."""

    def __init__(self, dst: str) -> None:
        self.dst = dst if storage.is_local(dst) and "://" not in dst else None
        self._pool = ThreadPoolExecutor(max_workers=4) if self.dst else None
        self._futures: list[Any] = []

    def add(self, relpaths: list[str]) -> None:
        if self._pool is not None and self.dst is not None:
            self._futures.extend(self._pool.submit(_fsync_path, os.path.join(self.dst, p)) for p in relpaths)

    def finish(self) -> None:
        """Wait for every fsync (re-raising the first error) and sync the directory."""
        if self._pool is None or self.dst is None:
            return
        try:
            for future in self._futures:
                future.result()
            _fsync_path(self.dst)
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


# ---------------------------------------------------------------------------------------
# One shard

def _progress_url(dst_root: str, shard_path: str) -> str:
    return storage.join(dst_root, PROGRESS_DIR, shard_path + ".json")


def _sha256_of(url: str, storage_options: dict[str, Any] | None) -> str:
    h = hashlib.sha256()
    with storage.open_read(url, storage_options) as f:
        while True:
            chunk = f.read(8 * 1024 * 1024)
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()


def shard_is_intact(dst_root: str, shard: Mapping[str, Any], storage_options: dict[str, Any] | None) -> bool:
    """True when the shard and its idx exist and the shard has the recorded size and sha256."""
    url = storage.join(dst_root, shard["path"])
    try:
        if storage.size(url, storage_options) != shard["num_bytes"]:
            return False
        if not storage.exists(storage.join(dst_root, shard["idx_path"]), storage_options):
            return False
        return _sha256_of(url, storage_options) == shard["sha256"]
    except FileNotFoundError:
        return False


def _reuse(task: ShardTask) -> ShardResult | None:
    """The recorded result of ``task`` when its done record matches and the shard is intact."""
    url = _progress_url(task.dst_root, task.shard_path)
    try:
        record = json.loads(storage.read_bytes(url, task.storage_options))
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("fingerprint") != task.fingerprint():
        return None
    result = ShardResult(**record["result"])
    if not shard_is_intact(task.dst_root, result.shard, task.storage_options):
        return None
    result.skipped = True
    return result


def _iter_rows(task: ShardTask) -> Iterator[tuple[mf.RowSlice, int, dict[str, Any]]]:
    """``(slice, row index in its row group, row)`` for every row of the task, in order."""
    expected = dict(task.columns)
    open_file: tuple[str, Any, Any] | None = None
    try:
        for s in task.slices:
            url = storage.join(task.src_root, s.file)
            if open_file is None or open_file[0] != s.file:
                if open_file is not None:
                    open_file[1].__exit__(None, None, None)
                cm = open_parquet(url, task.storage_options)
                pf = cm.__enter__()
                open_file = (s.file, cm, pf)
                got = tuple((f.name, str(f.type)) for f in pf.schema_arrow)
                if got != task.columns:
                    raise ValueError(f"{url} has columns {list(got)}, expected {list(expected.items())}")
            pf = open_file[2]
            meta = pf.metadata
            if s.row_group >= meta.num_row_groups:
                raise IndexError(f"{url} has {meta.num_row_groups} row groups; row group {s.row_group} "
                                 f"does not exist")
            total = meta.row_group(s.row_group).num_rows
            known = task.expected_rows is not None
            stop = s.stop if known else total
            if stop > total or (known and task.row_group is not None and stop != total):
                raise ValueError(f"{url} row group {s.row_group} has {total} rows, the plan expected "
                                 f"rows {s.start}:{s.stop}; the source changed since planning")
            row = 0  # index (in the row group) of the first row of the current batch
            for batch in pf.iter_batches(batch_size=_BATCH_ROWS, row_groups=[s.row_group], use_threads=False):
                n = batch.num_rows
                lo, hi = max(0, s.start - row), min(n, stop - row)
                if hi > lo:
                    part = batch if (lo == 0 and hi == n) else batch.slice(lo, hi - lo)
                    for i, values in enumerate(batch_rows(part, binary_views=True)):
                        yield s, row + lo + i, values
                row += n
                if row >= stop:
                    break
    finally:
        if open_file is not None:
            open_file[1].__exit__(None, None, None)


def convert_shard(task: ShardTask) -> ShardResult:
    """Build one shard, its idx and its done record (or reuse an intact one from an earlier run)."""
    reused = _reuse(task)
    if reused is not None:
        return reused
    t0 = time.perf_counter()
    check_row = get_schema(task.schema).check_row
    stems = dict(task.stems)
    column_names = [c for c, _ in task.columns]
    bad_rows: list[dict[str, Any]] = []
    dropped: list[int] = []
    actual_slices: list[mf.RowSlice] = []
    counts: dict[tuple[str, int, int], int] = {}
    shard_url = storage.join(task.dst_root, task.shard_path)
    position = 0
    with _open_output(shard_url, task.storage_options) as f, \
            TarWriter(f, buffer_size=2 * 1024 * 1024, background=True) as writer:
        for s, row_index, row in _iter_rows(task):
            slice_id = (s.file, s.row_group, s.start)
            counts[slice_id] = counts.get(slice_id, 0) + 1
            key = make_key(stems[s.file], s.row_group, row_index)
            try:
                reason = check_row(row)
            except Exception as exc:  # noqa: BLE001 - a check that trips over a row marks the row bad
                reason = f"schema check failed: {type(exc).__name__}: {exc}"
            if reason is not None:
                bad_rows.append({"file": s.file, "row_group": s.row_group, "row": row_index, "key": key,
                                 "reason": reason, "shard": task.shard_path, "dropped": task.drop_bad_rows})
                if task.drop_bad_rows:
                    dropped.append(position)
                    position += 1
                    continue
            position += 1
            writer.write_sample(key, encode_members(row, key, column_names))
    for s in task.slices:
        n = counts.get((s.file, s.row_group, s.start), 0)
        actual_slices.append(mf.RowSlice(file=s.file, row_group=s.row_group, start=s.start, stop=s.start + n))
    idx_path = mf.idx_path_for(task.shard_path)
    _write_output(storage.join(task.dst_root, idx_path), mf.encode_idx(writer.offsets, writer.end_offset),
                  task.storage_options)
    info = mf.ShardInfo(path=task.shard_path, idx_path=idx_path, num_samples=len(writer.offsets),
                        num_bytes=writer.num_bytes, sha256=writer.sha256, rows=actual_slices,
                        source_file=task.source_file, row_group=task.row_group, dropped=dropped)
    result = ShardResult(shard=asdict(info), bad_rows=bad_rows, num_rows=position,
                         seconds=time.perf_counter() - t0)
    record = {"fingerprint": task.fingerprint(), "result": asdict(result)}
    _write_output(_progress_url(task.dst_root, task.shard_path), json.dumps(record, sort_keys=True).encode(),
                  task.storage_options)
    return result


# ---------------------------------------------------------------------------------------
# The whole conversion

def _clean_stale_temp_files(dst: str, names: set[str]) -> None:
    """Remove temp files of our own outputs left behind by a killed run (local destinations)."""
    if not storage.is_local(dst) or not os.path.isdir(dst):
        return
    for directory in (dst, os.path.join(dst, PROGRESS_DIR)):
        if not os.path.isdir(directory):
            continue
        for entry in os.listdir(directory):
            m = _TMP_NAME.match(entry)
            if m and (m.group("name") in names or directory.endswith(PROGRESS_DIR)):
                try:
                    os.unlink(os.path.join(directory, entry))
                except FileNotFoundError:
                    pass


def _remove_progress(dst: str, so: dict[str, Any] | None) -> None:
    fs, path = storage.url_to_fs(storage.join(dst, PROGRESS_DIR), so)
    try:
        if fs.exists(path):
            fs.rm(path, recursive=True)
    except FileNotFoundError:
        pass


def _remove_previous(dst: str, so: dict[str, Any] | None) -> None:
    """For ``overwrite``: drop the old manifest first (so no stale one survives a crash), then its files."""
    try:
        old = mf.Manifest.read(dst, so)
    except mf.ManifestError:
        old = None
    storage.remove(storage.join(dst, mf.MANIFEST_NAME), so)
    storage.remove(storage.join(dst, mf.REPORT_NAME), so)
    if old is not None:
        for shard in old.shards:
            storage.remove(storage.join(dst, shard.path), so)
            storage.remove(storage.join(dst, shard.idx_path), so)
    _remove_progress(dst, so)


class _Progress:
    """A tqdm bar over shards with rows/s and MB/s, or nothing when progress is off."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.t0 = time.perf_counter()
        self.rows = 0
        self.bytes = 0
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="shard", desc="convert", file=sys.stderr, dynamic_ncols=True)

    def update(self, result: ShardResult) -> None:
        self.rows += result.num_rows
        self.bytes += result.shard["num_bytes"]
        if self.bar is not None:
            dt = max(time.perf_counter() - self.t0, 1e-9)
            self.bar.set_postfix_str(f"{self.rows / dt:,.0f} rows/s, {self.bytes / dt / 1e6:,.1f} MB/s", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def convert(src: str, dst: str, *, schema: str | None = None, parquet_info: str | Mapping[str, Any] | None = None,
            workers: int | None = None, layout: str = "rowgroup", shard_size: int | None = None,
            samples_per_shard: int | None = None, overwrite: bool = False, drop_bad_rows: bool = False,
            storage_options: dict[str, Any] | None = None, progress: bool = True, engine: str = "auto",
            ray_address: str | None = None, executor: Executor | None = None) -> dict[str, Any]:
    """Convert the parquet dataset at ``src`` into WebDataset shards under ``dst``; returns a summary.

    Re-running after a crash resumes (finished shards are checked by size and sha256 and kept).
    ``engine``: ``"auto"``/``"local"`` (this machine) or ``"ray"`` (Ray tasks; ``ray_address``
    as for ``ray.init``, ``"auto"`` for a running cluster); every engine writes the same bytes.
    ``executor`` overrides ``engine``/``workers`` with any object that has ``map_unordered``.
    """
    if storage.is_local(src) and "://" not in src:
        src = os.path.abspath(src)
    if storage.is_local(dst) and "://" not in dst:
        dst = os.path.abspath(dst)
    cfg = ConvertConfig(src=src, dst=dst, schema=schema, parquet_info=parquet_info, workers=workers,
                        engine=engine, ray_address=ray_address, layout=layout, shard_size=shard_size,
                        samples_per_shard=samples_per_shard, overwrite=overwrite, drop_bad_rows=drop_bad_rows,
                        storage_options=storage_options, progress=progress)
    if executor is None and cfg.engine == "ray":
        import_ray()  # a missing optional extra fails before any reads or writes
    t0 = time.perf_counter()
    so = cfg.storage_options
    plan = plan_conversion(cfg)
    fingerprint = plan.fingerprint()
    if cfg.drop_bad_rows:
        log.warning("%s", DROP_NOTE)

    if cfg.overwrite:
        _remove_previous(cfg.dst, so)
    elif storage.exists(storage.join(cfg.dst, mf.MANIFEST_NAME), so):
        existing = mf.Manifest.read(cfg.dst, so)
        if existing.extra.get("plan_fingerprint") != fingerprint:
            raise FileExistsError(f"{cfg.dst} already holds a finished conversion of other input or options; "
                                  f"pass overwrite=True (--overwrite) to replace it")
        bad = [s.path for s in existing.shards if not shard_is_intact(cfg.dst, asdict(s), so)]
        if not bad:
            return _summary(cfg, existing, plan, converted=0, skipped=len(existing.shards),
                            seconds=time.perf_counter() - t0, already_done=True)
        storage.remove(storage.join(cfg.dst, mf.MANIFEST_NAME), so)
        _write_records_for(existing, plan, cfg)

    storage.makedirs(cfg.dst, so)
    outputs = {t.shard_path for t in plan.tasks} | {mf.idx_path_for(t.shard_path) for t in plan.tasks}
    outputs |= {mf.MANIFEST_NAME, mf.REPORT_NAME}
    _clean_stale_temp_files(cfg.dst, outputs)

    own_executor = executor is None
    runner = executor or make_executor(cfg.engine, cfg.workers, ray_address=cfg.ray_address)
    bar = _Progress(len(plan.tasks), cfg.progress)
    results: dict[str, ShardResult] = {}
    syncer = _LocalSyncer(cfg.dst)
    try:
        for task, result in runner.map_unordered(convert_shard, plan.tasks):
            results[task.shard_path] = result
            syncer.add([result.shard["path"], result.shard["idx_path"]])
            bar.update(result)
        syncer.finish()
    finally:
        syncer.close()
        bar.close()
        if own_executor:
            runner.close()

    ordered = [results[t.shard_path] for t in plan.tasks]
    manifest = _build_manifest(cfg, plan, ordered, fingerprint)
    report = {
        "format_version": mf.FORMAT_VERSION,
        "schema": plan.schema,
        "drop_bad_rows": cfg.drop_bad_rows,
        "num_bad_rows": manifest.num_bad_rows,
        "note": DROP_NOTE if cfg.drop_bad_rows else
        "bad rows are kept verbatim so row positions match the parquet backend; the training-time parser "
        "drops them",
        "bad_rows": [_in_report_order(b) for r in ordered for b in r.bad_rows],
    }
    storage.write_bytes(storage.join(cfg.dst, mf.REPORT_NAME),
                        (json.dumps(report, indent=1) + "\n").encode(), so)
    manifest.write(cfg.dst, so)
    _remove_progress(cfg.dst, so)
    converted = sum(1 for r in ordered if not r.skipped)
    return _summary(cfg, manifest, plan, converted=converted, skipped=len(ordered) - converted,
                    seconds=time.perf_counter() - t0, already_done=False)


_BAD_ROW_FIELDS = ("file", "row_group", "row", "key", "reason", "shard", "dropped")


def _in_report_order(bad_row: Mapping[str, Any]) -> dict[str, Any]:
    """One bad-row entry with its keys in a fixed order: done records store them sorted, so a
    resumed run would otherwise write a report.json that differs from an uninterrupted run's."""
    known = {k: bad_row[k] for k in _BAD_ROW_FIELDS if k in bad_row}
    return {**known, **{k: bad_row[k] for k in sorted(bad_row) if k not in known}}


def _write_records_for(existing: mf.Manifest, plan: Plan, cfg: ConvertConfig) -> None:
    """Turn a finished manifest back into done records, so repairing one shard redoes only that shard."""
    report_bad: dict[str, list[dict[str, Any]]] = {}
    try:
        report = json.loads(storage.read_bytes(storage.join(cfg.dst, mf.REPORT_NAME), cfg.storage_options))
        for b in report.get("bad_rows", []):
            report_bad.setdefault(b["shard"], []).append(b)
    except (FileNotFoundError, ValueError):
        return
    by_path = {s.path: s for s in existing.shards}
    for task in plan.tasks:
        shard = by_path.get(task.shard_path)
        if shard is None:
            continue
        result = ShardResult(shard=asdict(shard), bad_rows=report_bad.get(task.shard_path, []),
                             num_rows=sum(s.num_rows for s in shard.rows))
        record = {"fingerprint": task.fingerprint(), "result": asdict(result)}
        storage.write_bytes(_progress_url(cfg.dst, task.shard_path), json.dumps(record, sort_keys=True).encode(),
                            cfg.storage_options)


def _build_manifest(cfg: ConvertConfig, plan: Plan, results: list[ShardResult], fingerprint: str) -> mf.Manifest:
    shards = [mf.ShardInfo(**{**r.shard, "rows": [mf.RowSlice(**s) for s in r.shard["rows"]]}) for r in results]
    row_groups: dict[str, list[int]] = {}
    for name in plan.files:
        known = plan.row_groups[name]
        if known is not None:
            row_groups[name] = list(known)
            continue
        sizes = [0] * plan.num_row_groups[name]
        for shard in shards:
            for s in shard.rows:
                if s.file == name:
                    sizes[s.row_group] = max(sizes[s.row_group], s.stop)
        row_groups[name] = sizes
    return mf.Manifest(
        schema=plan.schema,
        columns=[{"name": n, "type": t} for n, t in plan.columns],
        layout=cfg.layout,
        source_root=cfg.src.rstrip("/"),
        source_files=[mf.SourceFile(path=name, row_groups=row_groups[name], key_stem=plan.stems[name])
                      for name in plan.files],
        shards=shards,
        drop_bad_rows=cfg.drop_bad_rows,
        num_bad_rows=sum(len(r.bad_rows) for r in results),
        created_by=f"editstream {__version__}",
        extra={"plan_fingerprint": fingerprint},
    )


def _summary(cfg: ConvertConfig, manifest: mf.Manifest, plan: Plan, *, converted: int, skipped: int,
             seconds: float, already_done: bool) -> dict[str, Any]:
    rows = manifest.num_source_rows
    return {
        "src": cfg.src,
        "dst": cfg.dst,
        "schema": manifest.schema,
        "layout": manifest.layout,
        "num_shards": len(manifest.shards),
        "converted_shards": converted,
        "skipped_shards": skipped,
        "already_done": already_done,
        "num_rows": rows,
        "num_samples": manifest.num_samples,
        "num_bad_rows": manifest.num_bad_rows,
        "drop_bad_rows": manifest.drop_bad_rows,
        "source_bytes": plan.source_bytes,
        "output_bytes": manifest.num_bytes,
        "seconds": round(seconds, 3),
        "rows_per_s": round(rows / seconds, 1) if seconds > 0 else None,
        "mb_per_s": round(manifest.num_bytes / seconds / 1e6, 1) if seconds > 0 else None,
        "manifest": storage.join(cfg.dst, mf.MANIFEST_NAME),
        "report": storage.join(cfg.dst, mf.REPORT_NAME),
    }


_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000 ** 2, "mb": 1000 ** 2, "g": 1000 ** 3, "gb": 1000 ** 3,
               "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3}


def parse_size(text: str) -> int:
    """Bytes from ``"512MB"``, ``"1GiB"``, ``"100000"`` ..."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"cannot read size {text!r}; use e.g. 512MB, 1GiB or a number of bytes")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])
