"""The adapter's output directory: atomic parquet files, per-file done records, ``parquet_info.json``.

A re-run keeps every file whose done record matches its task and whose bytes still hash to it, so an
interrupted adaptation ends byte-identical to an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..conversion.source import absolute
from ..data.adapted.chains import to_table
from ..io import storage

DONE_DIR = "_editstream_adapt"
"""Sub-directory of DST holding one done record per output file."""
PARQUET_INFO = "parquet_info.json"
REPORT = "adapt_report.json"
ADAPTATION = "_editstream_adaptation.json"
"""What DST holds the adaptation of: its source and mapping (a run of another one is refused)."""


def _record_url(dst: str, name: str) -> str:
    return storage.join(dst, DONE_DIR, f"{name}.json")


class _Hashing:
    """A write-only file that hashes and counts what passes through it to ``inner``."""

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner
        self.sha = hashlib.sha256()
        self.size = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        self.inner.write(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.closed = True


PAGE_ROWS = 8
"""Most rows in one parquet data page (pages also end at arrow's 1 MB). A reader must hold a page whole,
and arrow's default (1024 rows) makes a column of large images one page per row group."""


class ParquetOut:
    """One output parquet file written row group by row group, so memory holds one row group.

    The caller cuts a row group after every so many planned chains, however many survived, so the units are
    known from the plan alone (as training in place lists them); the file appears only when finished.
    """

    def __init__(self, url: str, schema: pa.Schema, so: storage.StorageOptions | None) -> None:
        self.url = url
        self.schema = schema
        self.so = so
        self.pending: list[dict[str, Any]] = []
        self.chunks: list[pa.Table] = []  # the row group so far, PAGE_ROWS rows a chunk: arrow's copy only
        self.num_rows = 0
        self.num_row_groups = 0
        self._stack = contextlib.ExitStack()
        self._file: _Hashing | None = None
        self._writer: pq.ParquetWriter | None = None

    def add(self, row: dict[str, Any]) -> None:
        """Append one output row to the row group being gathered."""
        self.pending.append(row)
        if len(self.pending) >= PAGE_ROWS:
            self._chunk()

    def _chunk(self) -> None:
        """The pending rows into arrow (a chunk of the row group), their Python bytes freed."""
        if self.pending:
            self.chunks.append(to_table(self.pending, self.schema))
            self.pending = []

    def end_group(self) -> None:
        """Write the rows added since the last cut as one row group (possibly empty)."""
        self._chunk()
        if self._writer is None:
            self._file = _Hashing(self._stack.enter_context(storage.atomic_write(self.url, self.so)))
            self._writer = pq.ParquetWriter(self._file, self.schema, compression="snappy", write_batch_size=PAGE_ROWS)
        table = pa.concat_tables(self.chunks) if self.chunks else to_table([], self.schema)
        self.chunks = []
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self.num_rows += table.num_rows
        self.num_row_groups += 1

    def finish(self) -> dict[str, Any]:
        """Commit the file; its size, sha256, rows and row groups."""
        size, digest = 0, None
        if self._writer is not None and self._file is not None:
            self._writer.close()
            size, digest = self._file.size, self._file.sha.hexdigest()
        self._stack.close()
        return {"size": size, "sha256": digest, "num_rows": self.num_rows, "num_row_groups": self.num_row_groups}

    def abort(self) -> None:
        """Discard a file that was not finished (its temp file or upload is removed)."""
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        with contextlib.suppress(RuntimeError):
            self._stack.__exit__(RuntimeError, RuntimeError("adaptation aborted"), None)


def write_record(dst: str, name: str, record: Mapping[str, Any], so: storage.StorageOptions | None) -> None:
    """Write the done record of output file ``name``."""
    storage.write_bytes(_record_url(dst, name), json.dumps(record, indent=1, sort_keys=True).encode(), so)


def intact_record(
    dst: str, name: str, task_fingerprint: str, so: storage.StorageOptions | None
) -> dict[str, Any] | None:
    """The done record of ``name`` when it matches ``task_fingerprint`` and the file still hashes to it."""
    try:
        record = json.loads(storage.read_bytes(_record_url(dst, name), so))
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("fingerprint") != task_fingerprint:
        return None
    if record.get("num_row_groups") == 0:
        return record
    try:
        data = storage.read_bytes(storage.join(dst, name), so)
    except FileNotFoundError:
        return None
    if len(data) != record.get("size") or hashlib.sha256(data).hexdigest() != record.get("sha256"):
        return None
    return record


def tidy_dst(dst: str, planned: Iterable[str], so: storage.StorageOptions | None) -> None:
    """Remove parquet files and records an earlier, different plan left in DST; refuse a parquet
    file with no done record (not ours) rather than mix someone's data into the output."""
    if not storage.exists(dst, so):
        return
    keep = set(planned)
    records_dir = storage.join(dst, DONE_DIR)
    records = set()
    if storage.exists(records_dir, so):
        records = {u.rsplit("/", 1)[-1][: -len(".json")] for u in storage.list_files(records_dir, ".json", so)}
    stale = {url.rsplit("/", 1)[-1]: url for url in storage.list_files(dst, ".parquet", so)}
    foreign = sorted(set(stale) - keep - records)
    if foreign:  # refused before anything is removed
        raise FileExistsError(
            f"DST {dst} holds {foreign[0]}, which no adaptation wrote; adapt into a new or empty directory"
        )
    for name in sorted(set(stale) - keep):
        storage.remove(stale[name], so)
    for name in records - keep:
        storage.remove(_record_url(dst, name), so)


def write_parquet_info(dst: str, records: Mapping[str, Mapping[str, Any]], so: storage.StorageOptions | None) -> str:
    """``parquet_info.json``: ``{DST/name: {num_row_groups, num_rows}}`` for every output file written."""
    root = absolute(dst).rstrip("/")  # the keys are the paths a loader joins
    info = {
        storage.join(root, name): {"num_row_groups": r["num_row_groups"], "num_rows": r["num_rows"]}
        for name, r in sorted(records.items())
        if r["num_row_groups"] > 0
    }
    url = storage.join(dst, PARQUET_INFO)
    storage.write_bytes(url, json.dumps(info, indent=1).encode(), so)
    return url


def write_report(dst: str, report: Mapping[str, Any], so: storage.StorageOptions | None) -> str:
    """``adapt_report.json``: counts and every dropped row with its file, row group, row and reason."""
    url = storage.join(dst, REPORT)
    storage.write_bytes(url, json.dumps(report, indent=1, default=str).encode(), so)
    return url


def read_adaptation(dst: str, so: storage.StorageOptions | None) -> dict[str, Any] | None:
    """The note of the adaptation DST holds (``None``: none, or one made before notes were written)."""
    try:
        note = json.loads(storage.read_bytes(storage.join(dst, ADAPTATION), so))
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None
    return note if isinstance(note, dict) else None


def write_adaptation(dst: str, note: Mapping[str, Any], so: storage.StorageOptions | None) -> None:
    """Note which adaptation DST holds."""
    storage.write_bytes(storage.join(dst, ADAPTATION), json.dumps(note, indent=1, sort_keys=True).encode(), so)


def remove_adaptation(dst: str, so: storage.StorageOptions | None) -> None:
    """For ``overwrite``: remove the adaptation DST holds (the files its done records name, the records, its
    parquet_info, report and note); files no adaptation wrote stay."""
    records_dir = storage.join(dst, DONE_DIR)
    names = []
    if storage.exists(records_dir, so):
        names = [u.rsplit("/", 1)[-1][: -len(".json")] for u in storage.list_files(records_dir, ".json", so)]
    for name in [PARQUET_INFO, REPORT, *names]:
        storage.remove(storage.join(dst, name), so)
    storage.remove_tree(records_dir, so)
    storage.remove(storage.join(dst, ADAPTATION), so)
