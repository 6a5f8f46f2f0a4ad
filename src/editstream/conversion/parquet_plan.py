"""The parquet source shape: the source listed, its footers read and its rows cut into shard tasks, and
``verify``'s check that the shards together cover every source row exactly once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..data.identity import Identity, identities
from ..data.layouts import ParquetDirectory, kind_of_columns
from ..format import manifest as mf
from ..format.columns import ColumnTypeError, column_type_problems
from ..format.keys import key_stems
from ..io import service, storage
from ..io.parquet import open_parquet, row_group_sizes
from ..io.parquet_info import ParquetInfo
from ..kinds import DatasetKind, get_kind
from .problems import Problem
from .task import ParquetPart, Plan, ShardCutter, ShardTask, TaskMaker

if TYPE_CHECKING:
    from .config import ConvertConfig

DEFAULT_SHARD_SIZE = 256 * 1024 * 1024
"""Target shard size of the ``size`` layout when neither a size nor a sample count is given."""

_ROW_OVERHEAD_ESTIMATE = 2048  # tar headers and JSON per row, for the size layout's plan


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
class _Source:
    """The listed source files, their footers where read, parquet_info's row-group counts and identities (by name)."""

    urls: list[str]
    names: list[str]
    footers: dict[int, _Footer]
    counts: dict[int, int]
    identities: dict[str, Identity]


def _read_source(cfg: ConvertConfig) -> _Source:
    """List the source and read the footers the plan needs (the first, and those parquet_info lacks)."""
    so = cfg.storage_options
    urls = ParquetDirectory(cfg.src, so).files()
    if not urls:
        raise FileNotFoundError(f"no *.parquet files in {cfg.src}")
    names = [u.rsplit("/", 1)[-1] for u in urls]
    taken = dict(zip(names, identities(urls, so).values()))
    info = ParquetInfo.load(cfg.parquet_info, so)
    counts = {i: n for i, url in enumerate(urls) if (n := info.num_row_groups(url)) is not None}
    need = [i for i in range(len(urls)) if cfg.layout == "size" or i not in counts]
    if 0 not in need:
        need.insert(0, 0)
    footers = dict(zip(need, service.pool().map(lambda i: _read_footer(urls[i], so), need)))
    return _Source(urls, names, footers, counts, taken)


def _schema_of(cfg: ConvertConfig, src: _Source) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The schema name and the columns every file shares; an error names a file that differs."""
    columns = src.footers[0].columns
    for i, footer in src.footers.items():
        if footer.columns != columns:
            raise ValueError(
                f"{src.urls[i]} has columns {list(footer.columns)}, but {src.urls[0]} has "
                f"{list(columns)}; all files of a dataset must share one schema"
            )
    column_names = [c for c, _ in columns]
    kind = get_kind(cfg.schema) if cfg.schema else kind_of_columns(cfg.src, column_names)
    check_columns(kind, column_names, dict(columns), where=src.urls[0])
    return kind.name, columns


def _row_groups(src: _Source) -> dict[str, list[int] | None]:
    """Rows per row group of each file (cut to parquet_info's count), ``None`` when no footer was read."""
    out: dict[str, list[int] | None] = dict.fromkeys(src.names)
    for i, footer in src.footers.items():
        limit = src.counts.get(i, len(footer.num_rows))
        if limit > len(footer.num_rows):
            raise ValueError(
                f"parquet_info says {src.urls[i]} has {limit} row groups; its footer has {len(footer.num_rows)}"
            )
        out[src.names[i]] = footer.num_rows[:limit]
    return out


def plan_parquet_conversion(cfg: ConvertConfig) -> Plan:
    """List the parquet source, read what metadata is needed, and cut its rows into shard tasks."""
    src = _read_source(cfg)
    schema, columns = _schema_of(cfg, src)
    row_groups = _row_groups(src)
    num_rgs = {
        name: len(sizes) if sizes is not None else src.counts[i] for i, (name, sizes) in enumerate(row_groups.items())
    }
    stems = dict(zip(src.names, key_stems(src.names)))
    make = TaskMaker(cfg, cfg.src.rstrip("/"), schema, columns, stems, src.identities)
    if cfg.layout == "rowgroup":
        tasks = _plan_rowgroup_layout(row_groups, num_rgs, make)
    else:
        tasks = _plan_size_layout(cfg, src, row_groups, make)
    listed = [u.rsplit("/", 1)[-1] for u in storage.list_files(cfg.src, ".parquet", cfg.storage_options, ordered=False)]
    return Plan(
        tasks=tasks,
        schema=schema,
        columns=columns,
        files=src.names,
        row_groups=row_groups,
        num_row_groups=num_rgs,
        stems=stems,
        source_bytes=sum(identity["size"] for identity in src.identities.values()),
        sources=src.identities,
        listing_order=listed if listed != src.names else None,
    )


def _plan_rowgroup_layout(
    row_groups: dict[str, list[int] | None], num_rgs: dict[str, int], make: TaskMaker
) -> list[ShardTask]:
    """One shard per source row group (in file order), named after the file's key stem and the row group."""
    tasks = []
    for name, sizes in row_groups.items():
        for rg in range(num_rgs[name]):
            stop = sizes[rg] if sizes is not None else -1
            part = ParquetPart(source_file=name, row_group=rg, expected_rows=None if sizes is None else (stop,))
            rows = (mf.RowSlice(file=name, row_group=rg, start=0, stop=max(stop, 0)),)
            tasks.append(make(f"{make.stems[name]}-rg{rg:05d}.tar", rows, part))
    return tasks


def _plan_size_layout(
    cfg: ConvertConfig, src: _Source, sizes: dict[str, list[int] | None], make: TaskMaker
) -> list[ShardTask]:
    """Cut the rows, in source order, into shards of about ``shard_size`` bytes / ``samples_per_shard``
    rows; sizes are estimated from the footers, so the plan reads no data and is the same on every run."""
    target_bytes = cfg.shard_size
    if target_bytes is None and cfg.samples_per_shard is None:
        target_bytes = DEFAULT_SHARD_SIZE
    cutter = ShardCutter(target_bytes, cfg.samples_per_shard)
    for i, name in enumerate(src.names):
        footer = src.footers[i]
        for rg, n in enumerate(sizes[name] or []):
            cutter.add(name, rg, 0, n, footer.byte_sizes[rg] / n + _ROW_OVERHEAD_ESTIMATE if n else 0.0)
    cutter.flush()
    parts = [ParquetPart(expected_rows=tuple(s.num_rows for s in rows)) for rows in cutter.shards]
    return [make(f"shard-{i:06d}.tar", rows, part) for i, (rows, part) in enumerate(zip(cutter.shards, parts))]


def check_parquet_options(cfg: ConvertConfig) -> None:
    """A parquet conversion takes no JSONL + media options."""
    if cfg.media_dir is not None:
        raise ValueError("media_dir applies to sources of a JSONL + media kind only")
    if cfg.allow_outside_media_dir:
        raise ValueError("allow_outside_media_dir applies to sources of a JSONL + media kind only")


def check_columns(
    kind: DatasetKind, columns: Iterable[str], types: Mapping[str, str] | None = None, where: str = ""
) -> None:
    """``ValueError`` naming the columns of ``kind`` missing from ``columns``; ``ColumnTypeError`` when
    ``types`` (column -> arrow type) shows a column of another type than the kind's parser reads."""
    columns = list(columns)
    missing = [c for c in kind.columns if c not in set(columns)]
    if missing:
        raise ValueError(
            f"schema {kind.name!r} needs columns {list(kind.columns)}; missing {missing} (found {sorted(columns)})"
        )
    if types is not None:
        problems = column_type_problems(types, kind.columns)
        if problems:
            raise ColumnTypeError(f"{where or 'source'}: {'; '.join(problems)} (schema {kind.name!r})")


def check_parquet_root(root: str, m: mf.Manifest, source: str | None, so: dict[str, Any] | None) -> list[Problem]:
    """With a ``source``: every source row is in exactly one shard slice and the row counts match the files."""
    if source is None:
        return []
    try:
        urls = ParquetDirectory(source, so).files()
    except FileNotFoundError as exc:
        return [Problem("source", None, str(exc))]
    names = [u.rsplit("/", 1)[-1] for u in urls]
    listed = [f.path for f in m.source_files]
    found: list[tuple[str, str]] = []  # (problem kind, detail)
    if sorted(names) != sorted(listed):
        found.append(("source", f"source has files {names}, manifest lists {listed}"))
    covered: Counter[tuple[str, int]] = Counter()
    for s in (s for shard in m.shards for s in shard.rows):
        covered[(s.file, s.row_group)] += s.num_rows
    for f in m.source_files:
        if f.path not in names:
            continue
        try:
            sizes = row_group_sizes(storage.join(source, f.path), so)
        except OSError as exc:
            found.append(("source", f"cannot read footer of {f.path}: {exc}"))
            continue
        if sizes[: len(f.row_groups)] != f.row_groups:
            found.append(("source", f"{f.path} has row groups of {sizes} rows, manifest says {f.row_groups}"))
        for rg, n in enumerate(f.row_groups):
            if (cover := covered[(f.path, rg)]) != n:
                found.append(("source_coverage", f"{f.path} row group {rg}: {n} rows, shards cover {cover}"))
    return [Problem(kind, None, detail) for kind, detail in found]
