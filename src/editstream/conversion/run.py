"""Convert a parquet dataset (or a JSONL + media source) into WebDataset tar shards. The manifest is written
last and a re-run keeps shards whose done record and bytes still match, so a resumed run ends byte-identical."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from .. import __version__
from ..data.identity import difference
from ..data.sources.shard_layouts import LISTING_ORDER
from ..format import manifest as mf
from ..format.digest import DEFAULT_DIGEST
from ..io import storage
from .config import ConvertConfig
from .dst import check_dst, tidy_dst
from .executors import Executor, import_ray, make_executor, warm_up
from .lifetime import sigterm_as_interrupt
from .lock import ConversionLock
from .progress import ShardProgress
from .records import (
    LocalSyncer,
    ShardResult,
    remove_previous,
    remove_progress,
    shard_is_intact,
    write_records_for,
)
from .report import DROP_NOTE, REPORT_KEYS, report_entries
from .shapes import plan_conversion, strategy_of
from .shard import convert_shard
from .source import absolute, resolve_source
from .task import Plan, ShardTask

SOURCE_IDENTITIES = "source_identities"
"""The manifest's ``extra`` record of each source file's identity when it was converted (``data.identity``)."""
CONFIG_FIELDS = frozenset(field.name for field in dataclasses.fields(ConvertConfig))
"""The keywords of :func:`convert` that make its :class:`ConvertConfig`."""

log = logging.getLogger(__name__)


def convert(
    src: str,
    dst: str,
    *,
    schema: str | None = None,
    parquet_info: str | Mapping[str, Any] | None = None,
    workers: int | None = None,
    layout: str = "rowgroup",
    shard_size: int | None = None,
    samples_per_shard: int | None = None,
    overwrite: bool = False,
    drop_bad_rows: bool = False,
    storage_options: dict[str, Any] | None = None,
    progress: bool = True,
    engine: str = "auto",
    ray_address: str | None = None,
    executor: Executor | None = None,
    media_dir: str | None = None,
    break_lock: bool = False,
    digest: str = DEFAULT_DIGEST,
    allow_outside_media_dir: bool = False,
) -> dict[str, Any]:
    """Convert the parquet dataset at ``src`` into WebDataset shards under ``dst``; returns a summary.

    A ``.jsonl`` ``src`` (or a JSONL + media ``schema``) has its media under ``media_dir`` (recorded: it
    orders the epoch); media outside it are refused unless ``allow_outside_media_dir``. Every ``engine``
    (or ``executor``) writes the same bytes; ``break_lock`` takes over a lock of a run known to be gone."""
    schema, layout = resolve_source(src, schema, layout, storage_options)
    given = {name: value for name, value in locals().items() if name in CONFIG_FIELDS}
    cfg = ConvertConfig(**{**given, "src": absolute(src), "dst": absolute(dst)})
    if executor is None and cfg.engine == "ray":
        import_ray()  # a missing optional extra fails before any reads or writes
    if executor is None:
        warm_up(cfg.engine, cfg.workers)  # the fork server imports while the source is planned
    t0 = time.perf_counter()
    plan = plan_conversion(cfg)
    if cfg.drop_bad_rows:
        log.warning("%s", DROP_NOTE)
    with ConversionLock(cfg.dst, cfg.storage_options, break_lock=break_lock):  # DST is written holding it
        finished = _prepare_dst(cfg, plan)
        if finished is not None:
            return _summary(cfg, finished, plan, None, time.perf_counter() - t0)
        ordered = _run_tasks(cfg, plan, executor)
        manifest = _build_manifest(cfg, plan, ordered)
        _write_report(cfg, plan, manifest, ordered)
        manifest.write(cfg.dst, cfg.storage_options)
        remove_progress(cfg.dst, cfg.storage_options)
        return _summary(cfg, manifest, plan, ordered, time.perf_counter() - t0)


def _prepare_dst(cfg: ConvertConfig, plan: Plan) -> mf.Manifest | None:
    """Make DST ready for the plan; the existing manifest when DST already holds this conversion intact.
    A finished DST with damaged shards goes back to done records, so only those are redone."""
    so = cfg.storage_options
    check_dst(cfg)  # files editstream did not write: refused (left alone with overwrite)
    if cfg.overwrite:
        remove_previous(cfg.dst, so)
    elif storage.exists(storage.join(cfg.dst, mf.MANIFEST_NAME), so):
        existing = mf.Manifest.read(cfg.dst, so)
        kept = _tasks_still_done(cfg, existing, plan)
        if len(kept) == len(plan.tasks) and all(shard_is_intact(cfg.dst, s, so) for s in existing.shards):
            return existing
        storage.remove(storage.join(cfg.dst, mf.MANIFEST_NAME), so)
        write_records_for(existing, kept, cfg.dst, so)
    storage.makedirs(cfg.dst, so)
    tidy_dst(cfg, plan)  # leftovers of earlier runs removed, the shard count noted for a partial DST
    return None


def _tasks_still_done(cfg: ConvertConfig, existing: mf.Manifest, plan: Plan) -> list[ShardTask]:
    """The tasks a finished DST already holds: all for this very conversion, those reading no changed
    source file when only source files changed; other input or options are refused."""
    recorded = existing.extra.get("plan_fingerprint")
    old = existing.extra.get(SOURCE_IDENTITIES)
    if recorded == plan.fingerprint() or (old is None and recorded == plan.fingerprint({})):
        return list(plan.tasks)  # this conversion (made before source identities were recorded, or not)
    old = old if isinstance(old, dict) else {}
    changed = sorted(f for f, identity in plan.sources.items() if old and old.get(f) != identity)
    if not changed or recorded != plan.fingerprint(old):
        what = f" (source files changed since: {', '.join(changed)})" if changed else ""
        raise FileExistsError(
            f"{cfg.dst} already holds a finished conversion of other input or options{what}; "
            f"pass overwrite=True (--overwrite) to replace it"
        )
    for name in changed:
        how = difference(old[name], plan.sources[name])
        log.warning("%s changed since %s was converted (%s): converting its shards again", name, cfg.dst, how)
    return [t for t in plan.tasks if not any(f in changed for f, _ in t.sources)]


def _run_tasks(cfg: ConvertConfig, plan: Plan, executor: Executor | None) -> list[ShardResult]:
    """Convert every shard of the plan on the executor; results in plan order, outputs synced."""
    for name, data in plan.side_files.items():  # e.g. the JSONL copy the loader lists lines from
        storage.write_bytes(storage.join(cfg.dst, name), data, cfg.storage_options)
    runner = executor or make_executor(cfg.engine, cfg.workers, ray_address=cfg.ray_address)
    bar = ShardProgress(len(plan.tasks), cfg.progress, cfg.dst)
    results: dict[str, ShardResult] = {}
    syncer = LocalSyncer(cfg.dst)
    try:
        with sigterm_as_interrupt():
            for task, result in runner.map_unordered(convert_shard, plan.tasks):
                results[task.shard_path] = result
                syncer.add([result.shard.path, result.shard.idx_path])
                bar.update(result)
            syncer.finish()
    except BaseException as exc:
        abort = getattr(runner, "abort", None)
        if abort is not None:
            abort()  # stop the workers now; every finished shard keeps its done record
        if isinstance(exc, KeyboardInterrupt):
            log.warning(
                "conversion interrupted after %d of %d shards; re-run the same conversion to resume "
                "(finished shards are kept)",
                len(results),
                len(plan.tasks),
            )
        raise
    finally:
        syncer.close()
        bar.close()
        if executor is None:
            runner.close()
    return [results[t.shard_path] for t in plan.tasks]


def _write_report(cfg: ConvertConfig, plan: Plan, manifest: mf.Manifest, ordered: list[ShardResult]) -> None:
    report = {
        "format_version": mf.FORMAT_VERSION,
        "schema": plan.schema,
        "drop_bad_rows": cfg.drop_bad_rows,
        "num_bad_rows": manifest.num_bad_rows,
        "note": DROP_NOTE if cfg.drop_bad_rows else strategy_of(plan.schema).keep_note,
        "bad_rows": [b.to_json() for r in ordered for b in r.bad_rows],
        **report_entries([n for r in ordered for n in r.notes]),
    }
    storage.write_bytes(
        storage.join(cfg.dst, mf.REPORT_NAME), (json.dumps(report, indent=1) + "\n").encode(), cfg.storage_options
    )


def _reported_notes(cfg: ConvertConfig) -> int:
    """How many image notes a finished DST's report.json lists (0 when unreadable: the manifest vouches, not it)."""
    try:
        report = json.loads(storage.read_bytes(storage.join(cfg.dst, mf.REPORT_NAME), cfg.storage_options))
        return int(report.get(REPORT_KEYS[0], 0))
    except (FileNotFoundError, ValueError, TypeError, AttributeError):
        return 0


def _build_manifest(cfg: ConvertConfig, plan: Plan, results: list[ShardResult]) -> mf.Manifest:
    shards = [r.shard for r in results]
    row_groups = {name: list(plan.row_groups[name] or [0] * plan.num_row_groups[name]) for name in plan.files}
    for s in (s for shard in shards for s in shard.rows if plan.row_groups[s.file] is None):
        row_groups[s.file][s.row_group] = max(row_groups[s.file][s.row_group], s.stop)
    extra: dict[str, Any] = {"plan_fingerprint": plan.fingerprint()}
    extra.update(strategy_of(plan.schema).manifest_extra(plan, results))
    if plan.sources:
        extra[SOURCE_IDENTITIES] = plan.sources
    if plan.listing_order is not None:
        extra[LISTING_ORDER] = plan.listing_order
    return mf.Manifest(
        schema=plan.schema,
        columns=[{"name": n, "type": t} for n, t in plan.columns],
        layout=cfg.layout,
        source_root=plan.source_root or cfg.src.rstrip("/"),
        source_files=[
            mf.SourceFile(path=name, row_groups=row_groups[name], key_stem=plan.stems[name]) for name in plan.files
        ],
        shards=shards,
        drop_bad_rows=cfg.drop_bad_rows,
        num_bad_rows=sum(len(r.bad_rows) for r in results),
        digest=cfg.digest,
        created_by=f"editstream {__version__}",
        extra=extra,
    )


def _summary(
    cfg: ConvertConfig, manifest: mf.Manifest, plan: Plan, results: list[ShardResult] | None, seconds: float
) -> dict[str, Any]:
    """What ``convert`` returns (and the CLI prints); ``results`` is ``None`` when nothing was converted."""
    if results is None:
        converted, skipped, num_image_notes = 0, len(manifest.shards), _reported_notes(cfg)
    else:
        converted = sum(1 for r in results if not r.skipped)
        skipped, num_image_notes = len(results) - converted, sum(len(r.notes) for r in results)
    rows = manifest.num_source_rows
    notes = {REPORT_KEYS[0]: num_image_notes} if num_image_notes else {}
    return {
        "src": cfg.src,
        "dst": cfg.dst,
        "schema": manifest.schema,
        "layout": manifest.layout,
        "num_shards": len(manifest.shards),
        "converted_shards": converted,
        "skipped_shards": skipped,
        "already_done": results is None,
        "num_rows": rows,
        "num_samples": manifest.num_samples,
        "num_bad_rows": manifest.num_bad_rows,
        "drop_bad_rows": manifest.drop_bad_rows,
        **notes,
        "source_bytes": plan.source_bytes,
        "output_bytes": manifest.num_bytes,
        "seconds": round(seconds, 3),
        "rows_per_s": round(rows / seconds, 1) if seconds > 0 else None,
        "mb_per_s": round(manifest.num_bytes / seconds / 1e6, 1) if seconds > 0 else None,
        "manifest": storage.join(cfg.dst, mf.MANIFEST_NAME),
        "report": storage.join(cfg.dst, mf.REPORT_NAME),
    }
