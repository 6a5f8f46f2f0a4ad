"""One shard task -> one tar shard, its ``.tar.idx`` and its done record.

``convert_shard`` is a top-level function of a picklable task, so the same code runs in this
process, in a worker process or as a Ray task. Rows stream from parquet as zero-copy views
straight into the tar writer (or, for a vlm_sft task, from JSONL lines with their media);
each row is checked by its schema and bad rows are listed.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow.parquet as pq

from ..format import manifest as mf
from ..format.idx import encode_idx, idx_path_for
from ..format.keys import make_key
from ..format.rowcodec import encode_members
from ..format.tarwriter import TarWriter
from ..io import storage
from ..io.parquet import iter_row_group_rows, open_parquet
from ..io.retry import RetryPolicy
from ..kinds import RowCheck, RowProblem, get_kind
from .plan import ShardTask
from .records import ShardResult, idx_digest, open_output, reuse, write_output, write_record
from .sft_rows import iter_jsonl_rows

_BATCH_ROWS = 256


def _open_checked(task: ShardTask, file: str, stack: contextlib.ExitStack) -> pq.ParquetFile:
    """Open one source file of the task; its columns must be the plan's."""
    url = storage.join(task.src_root, file)
    pf = stack.enter_context(open_parquet(url, task.storage_options))
    got = tuple((f.name, str(f.type)) for f in pf.schema_arrow)
    if got != task.columns:
        raise ValueError(f"{url} has columns {list(got)}, expected {list(task.columns)}")
    return pf


def _slice_stop(task: ShardTask, pf: pq.ParquetFile, s: mf.RowSlice) -> int:
    """Where slice ``s`` ends; the file must still hold the rows the plan expected."""
    url = storage.join(task.src_root, s.file)
    meta = pf.metadata
    if s.row_group >= meta.num_row_groups:
        raise IndexError(f"{url} has {meta.num_row_groups} row groups; row group {s.row_group} does not exist")
    total = meta.row_group(s.row_group).num_rows
    known = task.expected_rows is not None
    stop = s.stop if known else total
    if stop > total or (known and task.row_group is not None and stop != total):
        raise ValueError(
            f"{url} row group {s.row_group} has {total} rows, the plan expected rows "
            f"{s.start}:{s.stop}; the source changed since planning"
        )
    return stop


def iter_task_rows(task: ShardTask) -> Iterator[tuple[mf.RowSlice, int, dict[str, Any]]]:
    """``(slice, row index in its row group, row)`` for every row of the task, in order."""
    with contextlib.ExitStack() as files:
        open_file: tuple[str, pq.ParquetFile] | None = None
        for s in task.slices:
            if open_file is None or open_file[0] != s.file:
                files.close()
                open_file = (s.file, _open_checked(task, s.file, files))
            pf = open_file[1]
            stop = _slice_stop(task, pf, s)
            url = storage.join(task.src_root, s.file)
            for row_index, row in iter_row_group_rows(
                pf, url, s.row_group, s.start, stop, batch_size=_BATCH_ROWS, binary_views=True
            ):
                yield s, row_index, row


@dataclass
class _ShardWork:
    """What writing one shard collects besides the tar bytes."""

    bad_rows: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    counts: dict[tuple[str, int, int], int] = field(default_factory=dict)
    position: int = 0


def _row_problems(check_row: RowCheck, row: dict[str, Any], first_only: bool = False) -> list[RowProblem]:
    """The row's problems (the first alone with ``first_only``); a check that trips over the row marks it bad."""
    try:
        problems = check_row(row)
        if first_only:
            first = next(problems, None)
            return [first] if first is not None else []
        return list(problems)
    except Exception as exc:  # noqa: BLE001 - a check that trips over a row marks the row bad
        return [RowProblem(f"schema check failed: {type(exc).__name__}: {exc}")]


def _write_jsonl_rows(task: ShardTask, writer: TarWriter) -> _ShardWork:
    """A vlm_sft task: every line becomes a sample, kept verbatim; problems are listed, never dropped."""
    s = task.slices[0]
    stem = dict(task.stems)[s.file]
    column_names = [c for c, _ in task.columns]
    work = _ShardWork()
    for line_index, row in iter_jsonl_rows(task):
        key = make_key(stem, 0, line_index)
        work.counts[(s.file, 0, s.start)] = work.counts.get((s.file, 0, s.start), 0) + 1
        problems = _row_problems(get_kind(task.schema).row_problems, row)
        if problems:
            reason = "; ".join(p.text for p in problems)
            missing = [name for p in problems for name in p.missing]
            entry = {"file": s.file, "line": line_index + 1, "key": key, "reason": reason, "shard": task.shard_path}
            work.bad_rows.append({**entry, "dropped": False, **({"missing": missing} if missing else {})})
        work.position += 1
        writer.write_sample(key, encode_members(row, key, column_names))
    return work


def _write_rows(task: ShardTask, writer: TarWriter) -> _ShardWork:
    if task.jsonl is not None:
        return _write_jsonl_rows(task, writer)
    check_row = get_kind(task.schema).row_problems
    stems = dict(task.stems)
    column_names = [c for c, _ in task.columns]
    work = _ShardWork()
    for s, row_index, row in iter_task_rows(task):
        slice_id = (s.file, s.row_group, s.start)
        work.counts[slice_id] = work.counts.get(slice_id, 0) + 1
        key = make_key(stems[s.file], s.row_group, row_index)
        problems = _row_problems(check_row, row, first_only=True)
        if problems:
            reason = problems[0]
            work.bad_rows.append(
                {
                    "file": s.file,
                    "row_group": s.row_group,
                    "row": row_index,
                    "key": key,
                    "reason": reason.text,
                    "fails": reason.certainty.value,
                    "shard": task.shard_path,
                    "dropped": task.drop_bad_rows,
                }
            )
            if task.drop_bad_rows:
                work.dropped.append(work.position)
                work.position += 1
                continue
        work.position += 1
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
    with (
        open_output(shard_url, task.storage_options) as f,
        TarWriter(f, buffer_size=2 * 1024 * 1024, background=True, digest=task.digest) as writer,
    ):
        work = _write_rows(task, writer)
    actual_slices = [
        mf.RowSlice(
            file=s.file,
            row_group=s.row_group,
            start=s.start,
            stop=s.start + work.counts.get((s.file, s.row_group, s.start), 0),
        )
        for s in task.slices
    ]
    idx_path = idx_path_for(task.shard_path)
    idx = encode_idx(writer.offsets, writer.end_offset)
    # No fsync here: the done record holds the idx's size and digest, so a re-run after a power
    # cut that tore it sees the mismatch and redoes the shard; every output is synced in one
    # pass before the manifest is written.
    write_output(storage.join(task.dst_root, idx_path), idx, task.storage_options)
    info = mf.ShardInfo(
        path=task.shard_path,
        idx_path=idx_path,
        num_samples=len(writer.offsets),
        num_bytes=writer.num_bytes,
        rows=actual_slices,
        source_file=task.source_file,
        row_group=task.row_group,
        dropped=work.dropped,
        **{task.digest: writer.digest},
    )
    result = ShardResult(
        shard=asdict(info), bad_rows=work.bad_rows, num_rows=work.position, seconds=time.perf_counter() - t0
    )
    write_record(task, result, idx_digest(idx, task.digest))
    return result
