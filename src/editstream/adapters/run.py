"""``adapt``: a source dataset in its own schema -> BAGEL-format parquet with ``parquet_info.json``;
``run_adapter`` (what ``convert SRC DST --from NAME`` runs) then converts it to shards.

Bad rows are dropped and recorded with file, row group and row; output files are picklable tasks on the
converter's executors, and the output is byte-identical however (and however often interrupted) they ran.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..conversion import convert
from ..conversion.config import check_apart
from ..conversion.executors import Executor, ProcessPoolExecutor, TaskError, make_executor
from ..data.adapted.chains import BadValue, ChainBuilder, MediaDir, output_schema
from ..data.adapted.mapping import AdapterMapping, MappingError, resolve_mapping
from ..data.adapted.plan import (
    DEFAULT_CHAINS_PER_FILE,
    DEFAULT_ROWS_PER_GROUP,
    Mounts,
    OutputTask,
    Plan,
    SourceFile,
    check_columns,
    gather,
    open_sources,
    passes,
    plan_groups,
    plan_rows,
    source_rows,
    unpack,
)
from ..data.adapted.where import Filter
from ..data.backends import TARGETS, get_backend
from ..data.identity import Identity, check_unchanged, difference, file_identity, fingerprint
from ..format.safe_yaml import brief
from ..io import storage
from ..io.progress import Progress
from ..io.words import counted
from .dst_guard import claim_dst, keep_note, refuse_held_dst
from .output import (
    PARQUET_INFO,
    ParquetOut,
    intact_record,
    tidy_dst,
    write_parquet_info,
    write_record,
    write_report,
)

log = logging.getLogger(__name__)


PRELOAD = ("editstream.adapters.run",)
"""What a local pool's fork server imports once for its workers."""


@dataclass(frozen=True)
class OutputWork:
    """One output file to write: ``run(*args)`` returns its done record."""

    name: str
    run: Callable[..., dict[str, Any]]
    args: tuple[Any, ...]

    def describe(self) -> str:
        return f"adapter output file {self.name}"


def run_work(work: OutputWork) -> dict[str, Any]:
    """Run one task (in whichever process the executor chose)."""
    return work.run(*work.args)


def _executor(engine: str, workers: int | None, ray_address: str | None) -> Executor:
    """The converter's executor for ``engine`` / ``workers``; a local pool's workers preload the adapter."""
    if engine == "ray":
        return make_executor(engine, workers, ray_address=ray_address)
    n = workers or 1
    if engine == "process" or (engine in ("auto", "local") and n > 1):
        return ProcessPoolExecutor(n, preload=PRELOAD)
    return make_executor(engine, n, ray_address=ray_address)


def run_outputs(
    works: Sequence[OutputWork],
    bar: Progress,
    *,
    executor: Executor | None = None,
    engine: str = "auto",
    workers: int | None = 1,
    ray_address: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Every task's record by output name, in the order of ``works``, run on ``executor`` (else on one made
    from ``engine`` / ``workers`` and closed after)."""
    if not works:
        return {}
    runner = executor if executor is not None else _executor(engine, workers, ray_address)
    done: dict[str, dict[str, Any]] = {}
    try:
        for work, record in runner.map_unordered(run_work, works):
            done[work.name] = record
            bar.update(1, rows=record["num_rows"], nbytes=record["size"])
    except TaskError as exc:  # the task's own error (it names the source file), as one process raises it
        raise (exc.__cause__ if isinstance(exc.__cause__, Exception) else exc) from None
    finally:
        if executor is None:
            runner.close()
    return {work.name: done[work.name] for work in works}


@dataclass(frozen=True)
class _Job:
    """Everything one output task needs besides the task itself."""

    dst: str
    mapping: AdapterMapping
    where: Filter | None
    schema: pa.Schema
    builder: ChainBuilder
    columns: list[str]
    rows_per_group: int
    storage_options: storage.StorageOptions | None


def _schema(files: Sequence[SourceFile], mapping: AdapterMapping) -> pa.Schema:
    schema = output_schema(mapping, files[0].schema)
    for f in files[1:]:
        other = output_schema(mapping, f.schema)
        if not other.equals(schema):
            raise MappingError(
                f"{mapping.origin}: source file {f.url} has other column types than {files[0].url} "
                f"for the columns the mapping keeps ({other} vs {schema})"
            )
    return schema


def _drop(f: SourceFile, rg: int, row: int, exc: BadValue, rows: int = 1, group: Any = None) -> dict[str, Any]:
    record = {"file": f.name, "row_group": rg, "row": row, **({"column": exc.column} if exc.column is not None else {})}
    record |= {"code": exc.code, "reason": exc.reason, "rows": rows}
    return record if group is None else record | {"group": group}


def _adapt_file(job: _Job, f: SourceFile, out: ParquetOut) -> tuple[int, list[dict[str, Any]]]:
    """One source file into ``out``, a row group per ``rows_per_group`` rows the filter keeps; ``(filtered, drops)``."""
    filtered, drops, planned = 0, [], 0
    for _, rg, r, row in source_rows([f], job.columns, job.storage_options):
        if not passes(job.where, row):
            filtered += 1
            continue
        try:
            out.add(job.builder.build([row]))
        except BadValue as exc:
            drops.append(_drop(f, rg, r, exc))
        planned += 1
        if planned % job.rows_per_group == 0:
            out.end_group()
    if planned % job.rows_per_group:
        out.end_group()
    return filtered, drops


def _adapt_chains(job: _Job, files: Sequence[SourceFile], task: OutputTask, out: ParquetOut) -> list[dict[str, Any]]:
    """A planned output file: its chains gathered one output row group at a time (bounded memory)."""
    drops = []
    opened: dict[int, pq.ParquetFile] = {}
    with contextlib.ExitStack() as stack:
        for start in range(0, len(task.chains), job.rows_per_group):
            batch = task.chains[start : start + job.rows_per_group]
            rows = gather(files, batch, job.columns, job.storage_options, stack, opened)
            for chain in batch:
                chain_rows = [rows[location] for location in chain]
                try:
                    out.add(job.builder.build(chain_rows))
                except BadValue as exc:
                    file, rg, row = unpack(chain[exc.row])
                    group = [chain_rows[0][c] for c in job.mapping.group_by]
                    drops.append(_drop(files[file], rg, row, exc, rows=len(chain), group=group))
            out.end_group()
    return drops


def _task_fingerprint(job: _Job, plan: Plan, task: OutputTask, media_dir: str | None) -> str:
    """What an output file depends on: the mapping, the filter, the layout, and its source rows."""
    if task.source is not None:
        f = plan.files[task.source]
        sources: Any = [f.name, f.size, list(f.row_groups)]
    else:
        sources = [[(f.name, f.size) for f in plan.files], fingerprint([list(c) for c in task.chains])]
    return fingerprint(
        {
            "mapping": job.mapping.fingerprint_data(),
            "where": job.where.text if job.where else None,
            "media_dir": media_dir,
            "rows_per_group": job.rows_per_group,
            "row_groups": "planned",  # one per rows_per_group planned chains, however many survive
            "sources": sources,
        }
    )


def _held_in(f: SourceFile) -> tuple[str, ...]:
    """The files on disk a source file's rows come from: itself, or the archive parts holding a metadata member."""
    return f.meta.held_in if f.meta is not None else (f.url,)


def _task_files(plan: Plan, task: OutputTask) -> list[str]:
    """The files on disk (source files, archive parts) an output task reads its rows from."""
    if task.source is not None:
        used = [plan.files[task.source]]
    else:
        used = [plan.files[i] for i in sorted({unpack(loc)[0] for chain in task.chains for loc in chain})]
    return list(dict.fromkeys(url for f in used for url in _held_in(f)))


def _run_task(job: _Job, plan: Plan, task: OutputTask, task_fp: str, sources: dict[str, Identity]) -> dict[str, Any]:
    out = ParquetOut(storage.join(job.dst, task.name), job.schema, job.storage_options)
    try:
        with job.builder.media.recording() as media:
            if task.source is not None:
                filtered, drops = _adapt_file(job, plan.files[task.source], out)
                rows_in = plan.files[task.source].num_rows
            else:
                filtered, drops, rows_in = 0, _adapt_chains(job, plan.files, task, out), sum(map(len, task.chains))
        for url, identity in sources.items():  # a source rewritten while it was read: this output is not made
            check_unchanged(url, identity, job.storage_options)
        stats = out.finish()
    except BaseException:
        out.abort()
        raise
    if stats["num_row_groups"] == 0:  # nothing planned: no file, and none left from an earlier plan
        storage.remove(out.url, job.storage_options)
    rows_used = rows_in - filtered - sum(d["rows"] for d in drops)
    record = {"fingerprint": task_fp, **stats, "rows_in": rows_in, "rows_used": rows_used, "filtered": filtered}
    record["drops"] = drops
    record["sources"] = sources
    record["media"] = dict(sorted(media.items()))
    write_record(job.dst, task.name, record, job.storage_options)
    return record


class _Identities:
    """The identity of files now (``None``: absent), each looked up once however many records name it."""

    def __init__(self, so: storage.StorageOptions | None) -> None:
        self.so = so
        self.known: dict[str, Identity | None] = {}

    def __call__(self, url: str) -> Identity | None:
        if url not in self.known:
            try:
                self.known[url] = file_identity(url, self.so)
            except (FileNotFoundError, NotADirectoryError):
                self.known[url] = None
        return self.known[url]


def _changed(record: dict[str, Any], sources: dict[str, Identity], now: _Identities) -> str | None:
    """What changed since ``record`` was made from its source files and media (``None``: nothing): the
    record vouches for its output only while every file it read is as it was."""
    held_sources, held_media = record.get("sources"), record.get("media")
    if not isinstance(held_sources, dict) or not isinstance(held_media, dict):
        return "its done record does not name the files it read (an older editstream made it)"
    if set(held_sources) != set(sources):
        return "it reads other source files now"
    for url, identity in [*held_sources.items(), *held_media.items()]:
        current = sources.get(url) if url in sources else now(url)
        if current != identity:
            how = "absent then" if identity is None else "gone" if current is None else difference(identity, current)
            return f"{url} changed ({how})"
    return None


def _pending(job: _Job, plan: Plan, media_dir: str | None) -> tuple[dict[str, dict[str, Any]], list[OutputWork]]:
    """The records of output files a run before finished whose source files and media are unchanged (kept),
    and the tasks of the others (a changed file is named in a warning, as the shard conversion does)."""
    records: dict[str, dict[str, Any]] = {}
    works = []
    files_only = Plan(plan.files, [])  # what a task needs of the plan: small to hand to another process
    now = _Identities(job.storage_options)
    for task in plan.tasks:
        task_fp = _task_fingerprint(job, plan, task, media_dir)
        sources: dict[str, Identity] = {}
        for url in _task_files(plan, task):
            found = now(url)
            if found is None:
                raise FileNotFoundError(f"{url}: a source file of {task.name} is gone since it was listed")
            sources[url] = found
        kept = intact_record(job.dst, task.name, task_fp, job.storage_options)
        why = _changed(kept, sources, now) if kept is not None else None
        if kept is not None and why is None:
            records[task.name] = kept
            continue
        if why is not None:
            log.warning("%s since %s was adapted: adapting %s again", why, storage.join(job.dst, task.name), task.name)
        works.append(OutputWork(task.name, _run_task, (job, files_only, task, task_fp, sources)))
    return records, works


class NoChainsError(ValueError):
    """An adaptation that made no chain: the source has no rows, or every row was dropped or filtered out."""


MEDIA_INDEX = "_editstream_media"
"""Sub-directory of DST keeping the index of each media archive read (so a resumed run does not rescan)."""


def _plan(
    src: str, mapping: AdapterMapping, where: Filter | None, split: str | None, chains_per_file: int, so: Any, dst: str
) -> tuple[Plan, Mounts]:
    files, mounts = open_sources(src, mapping, split, so, storage.join(dst, MEDIA_INDEX))
    check_columns(files, mapping, where)
    if not any(f.num_rows for f in files):
        raise NoChainsError(f"{src}: its {len(files)} source file(s) hold 0 rows; nothing to adapt")
    if not mapping.group_by:
        return plan_rows(files), mounts
    return plan_groups(files, mapping, where, chains_per_file, split or "part", so), mounts


def _summary(mapping: AdapterMapping, plan: Plan, records: dict[str, dict[str, Any]], resumed: int) -> dict[str, Any]:
    drops = list(plan.drops or []) + [d for r in records.values() for d in r["drops"]]
    by_reason = Counter(d["code"] for d in drops)
    grouped = bool(mapping.group_by)
    return {
        "adapter": mapping.name,
        "kind": mapping.kind,
        "rows_in": plan.plan_rows if grouped else sum(f.num_rows for f in plan.files),
        "chains_out": sum(r["num_rows"] for r in records.values()),
        "rows_used": sum(r["rows_used"] for r in records.values()),
        "files_out": sum(1 for r in records.values() if r["num_row_groups"]),
        "bytes_out": sum(r["size"] for r in records.values()),
        "filtered_rows": plan.filtered + sum(r["filtered"] for r in records.values()),
        "dropped": len(drops),
        "dropped_rows": sum(d.get("rows", 1) for d in drops),
        "dropped_by_code": dict(sorted(by_reason.items())),
        "resumed_files": resumed,
        "drops": drops,
    }


def _nothing_made(summary: dict[str, Any], where: Filter | None) -> str:
    """Why an adaptation made no chain, with the counts of each drop code and a reason of each."""
    first: dict[str, str] = {}
    for d in summary["drops"]:
        first.setdefault(d["code"], d["reason"])
    codes = "; ".join(f"{code}: {n}, e.g. {brief(first[code])}" for code, n in summary["dropped_by_code"].items())
    rows, filtered = summary["rows_in"], summary["filtered_rows"]
    what = f"all {counted(rows, 'row')} dropped ({codes})"
    if filtered:
        by = brief(where.text if where else None)
        what = f"of {counted(rows, 'row')}, {filtered} filtered out by {by}, the rest dropped"
        what += f" ({codes})" if codes else ""
    return f"no chains made: {what}, see {summary['report']}"


def adapt(
    src: str,
    dst: str,
    mapping: str | Path | AdapterMapping,
    *,
    media_dir: str | None = None,
    where: str | None = None,
    split: str | None = None,
    rows_per_group: int = DEFAULT_ROWS_PER_GROUP,
    chains_per_file: int = DEFAULT_CHAINS_PER_FILE,
    storage_options: storage.StorageOptions | None = None,
    progress: bool = True,
    workers: int | None = 1,
    engine: str = "auto",
    ray_address: str | None = None,
    executor: Executor | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Adapt the dataset at ``src`` with ``mapping`` (a built-in name, a file or a mapping) into ``dst``, with
    ``parquet_info.json`` and ``adapt_report.json``; returns the report's summary.

    ``where`` replaces the mapping's filter (``""``: none); ``split`` reads only ``{split}-*.parquet``. A re-run
    resumes. Output files run on ``executor`` (else ``engine`` / ``workers``) with the same bytes however they ran.
    A DST holding another adaptation (another source or mapping) or shards is refused before anything is
    written (:class:`AnotherConversionError`), unless ``overwrite`` (it is replaced).
    A :class:`NoChainsError` (after the report is written) when no chain was made.
    """
    if rows_per_group < 1 or chains_per_file < 1:
        raise ValueError(f"rows_per_group and chains_per_file must be >= 1, got {rows_per_group}, {chains_per_file}")
    t0 = time.perf_counter()
    check_apart({"SRC": src, "DST": dst})
    mapping = resolve_mapping(mapping)
    note = claim_dst(dst, src, mapping, overwrite, storage_options)
    where_filter = mapping.filter(where)
    plan, mounts = _plan(src, mapping, where_filter, split, chains_per_file, storage_options, dst)
    columns = mapping.read_columns(where_filter)
    index = storage.join(dst, MEDIA_INDEX)
    media = MediaDir(media_dir, storage_options, mounts=[m[:2] for m in mounts], index_dir=index)
    schema = _schema(plan.files, mapping)
    builder = ChainBuilder(mapping, media, schema)
    job = _Job(dst, mapping, where_filter, schema, builder, columns, rows_per_group, storage_options)
    tidy_dst(dst, [t.name for t in plan.tasks], storage_options)
    storage.makedirs(dst, storage_options)
    keep_note(dst, note, storage_options)
    records, works = _pending(job, plan, media_dir)
    resumed = len(records)
    with Progress(f"adapt {mapping.name}", len(plan.tasks), "files", enabled=progress) as bar:
        bar.update(resumed, rows=sum(r["num_rows"] for r in records.values()))
        made = run_outputs(works, bar, executor=executor, engine=engine, workers=workers, ray_address=ray_address)
    records = {task.name: records.get(task.name) or made[task.name] for task in plan.tasks}
    summary = _summary(mapping, plan, records, resumed)
    summary["parquet_info"] = write_parquet_info(dst, records, storage_options)
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    summary["report"] = write_report(dst, summary, storage_options)
    if summary["chains_out"] == 0:
        raise NoChainsError(_nothing_made(summary, where_filter))
    log.info("adapt %s: %d rows in -> %d chains out", mapping.name, summary["rows_in"], summary["chains_out"])
    return summary


PARALLEL = ("workers", "engine", "ray_address", "executor")
"""Options both steps take: the adaptation's output files and the shards run on the same executor."""


def staging_dir(dst: str) -> str:
    """Where ``--to webdataset`` puts the BAGEL parquet it converts: beside DST, ``DST-parquet``."""
    return f"{dst.rstrip('/')}-parquet"


def run_adapter(
    src: str,
    dst: str,
    adapter: str | Path | AdapterMapping,
    *,
    to: str = TARGETS[0],
    where: str | None = None,
    media_dir: str | None = None,
    split: str | None = None,
    staging: str | None = None,
    rows_per_group: int = DEFAULT_ROWS_PER_GROUP,
    chains_per_file: int = DEFAULT_CHAINS_PER_FILE,
    storage_options: storage.StorageOptions | None = None,
    progress: bool = True,
    overwrite: bool = False,
    **convert_options: Any,
) -> dict[str, Any]:
    """Adapt ``src`` with ``adapter`` into ``dst``: BAGEL parquet there (``to="parquet"``), or staged in
    ``staging`` and converted to shards there (``convert_options`` pass to ``editstream.convert``; the
    parallel ones run the adaptation too). Returns ``{"adapt": summary, "convert": summary or None}``.

    A DST (or staging) holding another conversion is refused before anything is written, unless ``overwrite``."""
    if to not in TARGETS:
        raise ValueError(f"to must be one of {list(TARGETS)}, got {to!r}")
    shards = get_backend(to, "run_adapter").reads_shards
    parallel = {k: convert_options[k] for k in PARALLEL if k in convert_options}
    shard_only = sorted(k for k in convert_options if k not in PARALLEL)
    if not shards and (staging is not None or shard_only):
        raise ValueError(f"staging and converter options apply to to='webdataset' only, not {shard_only}")
    mapping = resolve_mapping(adapter)
    parquet_dst = (staging or staging_dir(dst)) if shards else dst
    check_apart({"SRC": src, "staging": parquet_dst, "DST": dst} if shards else {"SRC": src, "DST": dst})
    if shards and not overwrite:
        refuse_held_dst(src, dst, parquet_dst, mapping, storage_options)
    summary = adapt(
        src, parquet_dst, mapping, media_dir=media_dir, where=where, split=split, rows_per_group=rows_per_group,
        chains_per_file=chains_per_file, storage_options=storage_options, progress=progress, overwrite=overwrite,
        **parallel,
    )  # fmt: skip
    if not shards:
        return {"adapt": summary, "convert": None}
    converted = convert(
        parquet_dst,
        dst,
        schema=mapping.kind,
        parquet_info=storage.join(parquet_dst, PARQUET_INFO),
        storage_options=storage_options,
        progress=progress,
        overwrite=overwrite,
        **convert_options,
    )
    return {"adapt": summary, "convert": converted}
