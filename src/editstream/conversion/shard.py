"""One shard task -> one tar shard, its ``.tar.idx`` and its done record (in any executor: picklable); the
task's source shape reads its rows straight into the tar writer, each checked by its kind."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

from ..format import manifest as mf
from ..format.idx import idx_path_for
from ..format.keys import make_key
from ..format.rowcodec import encode_members
from ..format.tarwriter import TarWriter
from ..io import storage
from ..io.retry import RetryPolicy
from ..kinds import get_kind
from .records import ShardResult, reuse, write_record
from .report import BadRow, RowNote, notes_of
from .shapes import strategy_of
from .task import ShardTask


@dataclass
class _ShardWork:
    """What writing one shard collects besides the tar bytes."""

    bad_rows: list[BadRow] = field(default_factory=list)
    notes: list[RowNote] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    counts: dict[tuple[str, int, int], int] = field(default_factory=dict)
    position: int = 0


def _write_rows(task: ShardTask, writer: TarWriter) -> _ShardWork:
    """Every row of the task as a sample; a bad one listed (and left out with ``drop_bad_rows``)."""
    shape = strategy_of(task.schema)
    kind = get_kind(task.schema)
    stems = dict(task.stems)
    column_names = [c for c, _ in task.columns]
    work = _ShardWork()
    for s, row_index, row in shape.rows(task):
        slice_id = (s.file, s.row_group, s.start)
        work.counts[slice_id] = work.counts.get(slice_id, 0) + 1
        key = make_key(stems[s.file], s.row_group, row_index)
        bad = shape.bad_row(task, kind, s, row_index, key, row)
        work.position += 1
        if bad is not None:
            work.bad_rows.append(bad)
            if task.drop_bad_rows:
                work.dropped.append(work.position - 1)
                continue
        for note in notes_of(kind, row):
            place = shape.place(s, row_index)
            work.notes.append(RowNote(file=s.file, key=key, shard=task.shard_path, note=note, **place))
        writer.write_sample(key, encode_members(row, key, column_names))
    return work


TASK_RETRY = RetryPolicy(max_attempts=3, initial_backoff=1.0, max_backoff=10.0, deadline=math.inf)
"""A shard whose write fails on a transient storage error is written again from the start (the
write is atomic, so a failed attempt leaves nothing); reads have their own retries inside."""


def convert_shard(task: ShardTask) -> ShardResult:
    """Build one shard, its idx and its done record (or reuse an intact one from an earlier run)."""
    return TASK_RETRY.call(lambda: _convert_shard_once(task), task.describe())


def _convert_shard_once(task: ShardTask) -> ShardResult:
    reused = reuse(task)
    if reused is not None:
        return reused
    t0 = time.perf_counter()
    shard_url = storage.join(task.dst_root, task.shard_path)
    # Atomic, without a per-file fsync: every output is synced once before the manifest is written,
    # and a re-run re-hashes every shard it reuses, so a file torn by a power cut is redone.
    with (
        storage.atomic_write(shard_url, task.storage_options, fsync=False) as f,
        TarWriter(f, buffer_size=2 * 1024 * 1024, background=True, digest=task.digest) as writer,
    ):
        work = _write_rows(task, writer)
    counts = work.counts
    actual_slices = [replace(s, stop=s.start + counts.get((s.file, s.row_group, s.start), 0)) for s in task.slices]
    idx_path = idx_path_for(task.shard_path)
    idx = writer.table().encode()  # shard format 2: the idx is the member table
    # No fsync either: the done record holds the idx's size and digest, so a torn idx is redone.
    storage.write_bytes(storage.join(task.dst_root, idx_path), idx, task.storage_options, fsync=False)
    info = mf.ShardInfo(
        path=task.shard_path,
        idx_path=idx_path,
        num_samples=len(writer.offsets),
        num_bytes=writer.num_bytes,
        rows=actual_slices,
        source_file=task.part.source_file,
        row_group=task.part.row_group,
        dropped=work.dropped,
        **{task.digest: writer.digest},
    )
    result = ShardResult(
        shard=info,
        bad_rows=work.bad_rows,
        notes=work.notes,
        num_rows=work.position,
        seconds=time.perf_counter() - t0,
    )
    write_record(task, result, idx)
    return result
