"""What a conversion leaves in DST besides shards: atomic outputs, done records, clean-up; a re-run
keeps a shard only when its done record matches and the bytes still hash to the recorded digest."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Mapping
from concurrent.futures import Future, wait
from dataclasses import dataclass, field, replace
from typing import IO, Any

from ..format import manifest as mf
from ..format.detect import PROGRESS_DIR_NAME as PROGRESS_DIR
from ..format.digest import hexdigest, new_hasher, recorded
from ..format.idx import IdxError, decode_idx
from ..format.member_table import is_member_table
from ..format.sft import LINES_COPY
from ..format.tarblock import END_OF_ARCHIVE
from ..io import service, storage
from ..io.ranged import open_read
from .report import BadRow, RowNote
from .task import ShardTask

log = logging.getLogger(__name__)

TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{32}\.tmp$")
"""A temp file ``storage.atomic_write`` writes before it renames it to ``name``."""


@dataclass(frozen=True, kw_only=True)
class ShardResult:
    """What one shard task produced: the manifest's entry for the shard, its bad rows and its notes."""

    shard: mf.ShardInfo
    bad_rows: list[BadRow] = field(default_factory=list)
    notes: list[RowNote] = field(default_factory=list)
    num_rows: int = 0
    skipped: bool = False
    """Whether an earlier run's shard was kept instead of writing it again."""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The result as a done record holds it (``image_notes`` only when there are notes)."""
        d: dict[str, Any] = {
            "shard": self.shard.to_json(),
            "bad_rows": [b.to_json() for b in self.bad_rows],
            "num_rows": self.num_rows,
            "skipped": self.skipped,
            "seconds": self.seconds,
        }
        if self.notes:
            d["image_notes"] = [n.to_json() for n in self.notes]
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ShardResult:
        """The result ``to_json`` wrote (a ``TypeError``, ``KeyError`` or ``ValueError`` when it is not one)."""
        return cls(
            shard=mf.ShardInfo.from_json(d["shard"]),
            bad_rows=[BadRow.from_json(b) for b in d.get("bad_rows", [])],
            notes=[RowNote.from_json(n) for n in d.get("image_notes", [])],
            num_rows=d.get("num_rows", 0),
            skipped=d.get("skipped", False),
            seconds=d.get("seconds", 0.0),
        )


def idx_digest(data: bytes, algorithm: str) -> dict[str, Any]:
    """What a done record keeps of a shard's idx: its size and its digest, named by algorithm."""
    return {"num_bytes": len(data), algorithm: hexdigest(algorithm, data)}


def _idx_is_intact(dst_root: str, shard: mf.ShardInfo, storage_options: dict[str, Any] | None, digest: Any) -> bool:
    """The idx exists, matches ``digest`` (:func:`idx_digest`) when one was recorded, and fits its shard as a
    member table (an earlier version's plain offsets mean the shard is written again, in today's format)."""
    try:
        data = storage.read_bytes(storage.join(dst_root, shard.idx_path), storage_options)
    except FileNotFoundError:
        return False
    found = recorded(digest)
    if digest is not None and (found is None or idx_digest(data, found[0]) != digest):
        return False
    if not is_member_table(data):
        return False
    try:
        offsets, end = decode_idx(data)
        return len(offsets) == shard.num_samples and end == shard.num_bytes - len(END_OF_ARCHIVE)
    except IdxError:
        return False


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalSyncer:
    """fsyncs finished local shards on the I/O pool, then the directory (a no-op for object stores)."""

    def __init__(self, dst: str) -> None:
        self.dst = dst if storage.is_local(dst) and "://" not in dst else None
        self._futures: list[Future[None]] = []

    def add(self, relpaths: list[str]) -> None:
        if self.dst is not None:
            self._futures.extend(service.pool().submit(_fsync_path, os.path.join(self.dst, p)) for p in relpaths)

    def finish(self) -> None:
        """Wait for every fsync (re-raising the first error) and sync the directory."""
        if self.dst is None:
            return
        try:
            for future in self._futures:
                future.result()
            _fsync_path(self.dst)
        finally:
            self.close()

    def close(self) -> None:
        """Cancel the fsyncs not started and wait for the running ones."""
        for future in self._futures:
            future.cancel()
        wait(self._futures)
        self._futures = []


def progress_url(dst_root: str, shard_path: str) -> str:
    return storage.join(dst_root, PROGRESS_DIR, shard_path + ".json")


class HashingReader:
    """A forward-only reader that hashes and counts what passes through it."""

    def __init__(self, f: IO[bytes], algorithm: str) -> None:
        self._f = f
        self.hash = new_hasher(algorithm)
        self.pos = 0

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self.hash.update(data)
        self.pos += len(data)
        return data

    def drain(self) -> None:
        while self.read(8 * 1024 * 1024):
            pass


def shard_is_intact(
    dst_root: str, shard: mf.ShardInfo, storage_options: dict[str, Any] | None, idx: Any = None
) -> bool:
    """True when the shard has the recorded size and digest and its idx is intact (and matches ``idx``)."""
    url = storage.join(dst_root, shard.path)
    digest = shard.digest
    try:
        if storage.size(url, storage_options) != shard.num_bytes or not _idx_is_intact(
            dst_root, shard, storage_options, idx
        ):
            return False
        with open_read(url, storage_options) as f:
            reader = HashingReader(f, digest[0])
            reader.drain()
        return reader.hash.hexdigest() == digest[1]
    except FileNotFoundError:
        return False


def write_record(task: ShardTask, result: ShardResult, idx: bytes | None = None) -> None:
    """Write the done record of ``task`` last for the shard, so its presence vouches for the files before it
    (keys sorted, so equal records are equal files)."""
    record: dict[str, Any] = {"fingerprint": task.fingerprint(), "result": result.to_json()}
    if idx is not None:
        record["idx"] = idx_digest(idx, task.digest)
    url = progress_url(task.dst_root, task.shard_path)
    storage.write_bytes(url, json.dumps(record, sort_keys=True).encode(), task.storage_options, fsync=False)


def reuse(task: ShardTask) -> ShardResult | None:
    """The recorded result of ``task`` when its done record matches and the shard is intact (a torn,
    foreign or other version's record is no record)."""
    try:
        record = json.loads(storage.read_bytes(progress_url(task.dst_root, task.shard_path), task.storage_options))
        if record["fingerprint"] != task.fingerprint():
            return None
        result = ShardResult.from_json(record["result"])
    except (FileNotFoundError, ValueError, TypeError, KeyError, AttributeError):
        return None
    if not shard_is_intact(task.dst_root, result.shard, task.storage_options, record.get("idx")):
        return None
    return replace(result, skipped=True)


def remove_progress(dst: str, so: dict[str, Any] | None) -> None:
    """Delete the done records (literally: a DST named with glob characters loses only its own)."""
    with contextlib.suppress(FileNotFoundError):
        storage.remove_tree(storage.join(dst, PROGRESS_DIR), so)


def remove_previous(dst: str, so: dict[str, Any] | None) -> None:
    """For ``overwrite``: drop the old manifest first (so no stale one survives a crash), then its files."""
    try:
        old = mf.Manifest.read(dst, so)
    except mf.ManifestError as exc:
        if storage.exists(storage.join(dst, mf.MANIFEST_NAME), so):
            log.warning(
                "overwrite: the old manifest cannot be trusted (%s); removing it but none of the files it names", exc
            )
        old = None
    names = [mf.MANIFEST_NAME, mf.REPORT_NAME, LINES_COPY]
    for shard in old.shards if old is not None else []:
        names += [shard.path, shard.idx_path]
    for name in names:
        storage.remove(storage.join(dst, name), so)
    remove_progress(dst, so)


def write_records_for(existing: mf.Manifest, tasks: list[ShardTask], dst: str, so: dict[str, Any] | None) -> None:
    """Turn a finished manifest (and report.json) back into done records, so a repair redoes one shard."""
    report_bad: dict[str, list[BadRow]] = {}
    report_notes: dict[str, list[RowNote]] = {}
    try:
        report = json.loads(storage.read_bytes(storage.join(dst, mf.REPORT_NAME), so))
        for b in report.get("bad_rows", []):
            report_bad.setdefault(b["shard"], []).append(BadRow.from_json(b))
        for n in report.get("image_notes", []):
            report_notes.setdefault(n["shard"], []).append(RowNote.from_json(n))
    except (FileNotFoundError, ValueError, TypeError, KeyError, AttributeError):
        return
    by_path = {s.path: s for s in existing.shards}
    for task in tasks:
        shard = by_path.get(task.shard_path)
        if shard is not None:
            bad, notes = report_bad.get(task.shard_path, []), report_notes.get(task.shard_path, [])
            rows = sum(s.num_rows for s in shard.rows)
            write_record(task, ShardResult(shard=shard, bad_rows=bad, notes=notes, num_rows=rows))
