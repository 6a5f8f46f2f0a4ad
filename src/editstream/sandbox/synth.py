"""Synthetic source datasets of any registered kind, for tests, demos and benchmarks.

A kind's ``synth`` function writes from :class:`SynthOptions`; a parquet kind gives a :class:`ParquetSynth` to
:func:`write_parquet_kind`, a JSONL + media kind a :class:`JsonlSynth` to :func:`write_jsonl_kind`. Rows follow
from the seed and position: the same bytes in this process or a pool.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
from collections import Counter
from collections.abc import Callable, Generator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..io import storage
from ..io.progress import Progress
from ..kinds import DatasetKind, UnknownKindError, all_kinds, get_kind
from .synth_content import IMAGE_FORMATS

__all__ = [
    "IMAGE_FORMATS",
    "JsonlSynth",
    "ParquetSynth",
    "SynthOptions",
    "SynthRow",
    "SynthWriter",
    "file_name",
    "synth_kinds",
    "write_jsonl_kind",
    "write_parquet_kind",
    "write_synthetic_dataset",
]

_CHUNK_ROWS = 32  # rows per task of a worker process (and per progress step)
_BIG_DATASET_ROWS = 1000  # above this: a progress bar and worker processes
_DEFAULT_SIDES = (48, 320)

# Parquet writer options are fixed so output bytes do not depend on library defaults.
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "snappy",
    "use_dictionary": False,
    "write_statistics": True,
    "version": "2.6",
    "data_page_version": "1.0",
}


@dataclass(frozen=True, kw_only=True)
class SynthOptions:
    """What every kind's synth function is given, validated before any write (``None`` sides: the kind's default)."""

    num_files: int = 2
    row_groups_per_file: int = 2
    rows_per_group: int = 8
    seed: int = 0
    corrupt_fraction: float = 0.0
    min_side: int | None = None
    max_side: int | None = None
    storage_options: dict[str, Any] | None = None
    workers: int | None = None
    progress: bool | None = None

    def __post_init__(self) -> None:
        for name in ("num_files", "row_groups_per_file", "rows_per_group"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.corrupt_fraction <= 1.0:
            raise ValueError(f"corrupt_fraction must be in [0, 1], got {self.corrupt_fraction}")
        low, high = self.sides(_DEFAULT_SIDES)
        if low < 8 or high < low:
            raise ValueError(f"need 8 <= min_side <= max_side, got min_side={low}, max_side={high}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")

    def sides(self, default: tuple[int, int]) -> tuple[int, int]:
        """``(min_side, max_side)``, each from ``default`` where not given."""
        low = default[0] if self.min_side is None else self.min_side
        return low, max(low, default[1]) if self.max_side is None else self.max_side

    @property
    def total_rows(self) -> int:
        """Rows (or samples) in the whole dataset."""
        return self.num_files * self.row_groups_per_file * self.rows_per_group

    def position(self, index: int) -> tuple[int, int, int]:
        """``(file, row_group, row)`` of the row with flat index ``index``."""
        per_file = self.row_groups_per_file * self.rows_per_group
        f, rest = divmod(index, per_file)
        rg, row = divmod(rest, self.rows_per_group)
        return f, rg, row


SynthWriter = Callable[[str, SynthOptions], dict[str, Any]]
"""The synth contract: write a source dataset of one kind into ``out``; return a JSON-able summary."""


@dataclass(frozen=True)
class SynthRow:
    """What a parquet kind's row maker gets: the row's place, its own seeded generator, its bad kind."""

    index: int
    row_id: str
    rng: np.random.Generator
    corrupt: str | None
    min_side: int
    max_side: int


RowMaker = Callable[[SynthRow], tuple[dict[str, Any], "Counter[str]"]]
"""One row and the count of image formats it holds (the summary's ``formats``)."""


@dataclass(frozen=True)
class ParquetSynth:
    """How a parquet kind's synthetic rows look: arrow schema, row maker (module-level: workers import it),
    bad-row kinds, and a code mixed into each row's seed so two kinds differ."""

    arrow_schema: pa.Schema
    make_row: RowMaker
    corrupt_kinds: tuple[str, ...]
    code: int


LineMaker = Callable[[SynthRow], tuple[dict[str, Any], dict[str, bytes]]]
"""One JSONL line (a JSON object) and the media files it names (name under the media directory -> bytes)."""


@dataclass(frozen=True)
class JsonlSynth:
    """How a JSONL + media kind's synthetic lines look: line maker, bad-line kinds, and a code mixed into each
    line's seed so two kinds differ."""

    make_line: LineMaker
    corrupt_kinds: tuple[str, ...]
    code: int


def file_name(index: int) -> str:
    """Name of the ``index``-th parquet file; zero-padded so names sort in index order."""
    return f"part-{index:05d}.parquet"


def _build_rows(
    spec: ParquetSynth, options: SynthOptions, start: int, stop: int, corrupt: dict[int, str]
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Rows with flat indexes ``[start, stop)`` and the count of image formats they contain."""
    rows: list[dict[str, Any]] = []
    formats: Counter[str] = Counter()
    low, high = options.sides(_DEFAULT_SIDES)
    for index in range(start, stop):
        f, rg, row = options.position(index)
        rng = np.random.default_rng(np.random.SeedSequence([options.seed, spec.code, f, rg, row]))
        record, counts = spec.make_row(SynthRow(index, f"f{f}-rg{rg}-r{row}", rng, corrupt.get(index), low, high))
        rows.append(record)
        formats.update(counts)
    return rows, formats


def plan_corrupt_rows(spec: ParquetSynth | JsonlSynth, options: SynthOptions) -> dict[int, str]:
    """Flat row index -> bad-row kind, chosen from the seed alone and cycled in position order."""
    total = options.total_rows
    count = int(round(options.corrupt_fraction * total))
    if count == 0 or not spec.corrupt_kinds:
        return {}
    chosen = sorted(random.Random(options.seed).sample(range(total), count))
    return {index: spec.corrupt_kinds[i % len(spec.corrupt_kinds)] for i, index in enumerate(chosen)}


def _chunks(options: SynthOptions) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges that never cross a row group."""
    per_group = options.rows_per_group
    return [
        (s, min(s + _CHUNK_ROWS, group + per_group))
        for group in range(0, options.total_rows, per_group)
        for s in range(group, group + per_group, _CHUNK_ROWS)
    ]


Chunks = Generator[tuple[list[dict[str, Any]], "Counter[str]"], None, None]


def _generate(spec: ParquetSynth, options: SynthOptions, corrupt: dict[int, str], workers: int) -> Chunks:
    """Yield ``(rows, formats)`` per chunk, in order, from a pool when ``workers > 1``."""
    chunks = _chunks(options)
    if workers <= 1:
        for start, stop in chunks:
            yield _build_rows(spec, options, start, stop, corrupt)
        return
    plain = replace(options, storage_options=None)  # workers only make rows; storage options may not pickle
    tasks = [(spec, plain, s, e, {i: k for i, k in corrupt.items() if s <= i < e}) for s, e in chunks]
    # spawn: the caller may hold threads or torch state that fork would copy unsafely.
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        yield from pool.map(_build_rows, *zip(*tasks))
    finally:
        # On an error or Ctrl-C do not wait for the queued chunks to be generated.
        pool.shutdown(wait=True, cancel_futures=True)


def _write_files(
    spec: ParquetSynth, options: SynthOptions, files: list[str], chunks: Chunks, *, show: bool
) -> tuple[Counter[str], int]:
    """Write the generated rows into ``files``; returns the image-format counts and the bytes written."""
    formats: Counter[str] = Counter()
    total_bytes = 0
    so = options.storage_options
    progress = Progress("synth", options.total_rows, "rows", show)
    try:
        for url in files:
            with storage.atomic_write(url, so) as fh:
                writer = pq.ParquetWriter(fh, spec.arrow_schema, **_PARQUET_OPTIONS)
                try:
                    for _ in range(options.row_groups_per_file):
                        group: list[dict[str, Any]] = []
                        while len(group) < options.rows_per_group:
                            rows, counts = next(chunks)
                            group.extend(rows)
                            formats.update(counts)
                            progress.update(len(rows), rows=len(rows))
                        table = pa.Table.from_pylist(group, schema=spec.arrow_schema)
                        writer.write_table(table, row_group_size=options.rows_per_group)
                finally:
                    writer.close()
            total_bytes += storage.size(url, so)
    finally:
        chunks.close()
        progress.close()
    return formats, total_bytes


def write_parquet_kind(out: str, options: SynthOptions, spec: ParquetSynth) -> dict[str, Any]:
    """Write ``options.num_files`` parquet files of ``spec``'s rows plus ``parquet_info.json`` to ``out``; returns
    files, counts, bytes, image formats and the planted bad rows."""
    corrupt = plan_corrupt_rows(spec, options)
    big = options.total_rows > _BIG_DATASET_ROWS
    workers = options.workers or (min(os.cpu_count() or 1, 8) if big else 1)
    so = options.storage_options
    storage.makedirs(out, so)
    files = [storage.join(out, file_name(i)) for i in range(options.num_files)]
    show = big if options.progress is None else options.progress
    formats, total_bytes = _write_files(spec, options, files, _generate(spec, options, corrupt, workers), show=show)
    per_file = options.row_groups_per_file * options.rows_per_group
    info = {url: {"num_row_groups": options.row_groups_per_file, "num_rows": per_file} for url in files}
    text = json.dumps(info, indent=2, sort_keys=True) + "\n"
    storage.write_bytes(storage.join(out, "parquet_info.json"), text.encode("utf-8"), so)
    corrupt_rows = []
    for index, bad in sorted(corrupt.items()):
        f, rg, row = options.position(index)
        corrupt_rows.append({"file": files[f], "row_group": rg, "row": row, "kind": bad})
    return {
        "files": files,
        "num_files": options.num_files,
        "num_row_groups": options.num_files * options.row_groups_per_file,
        "num_rows": options.total_rows,
        "total_bytes": total_bytes,
        "formats": {fmt: formats[fmt] for fmt in IMAGE_FORMATS if formats[fmt] > 0},
        "corrupt_rows": corrupt_rows,
        "seed": options.seed,
    }


def write_jsonl_kind(out: str, options: SynthOptions, spec: JsonlSynth) -> dict[str, Any]:
    """Write ``options.total_rows`` lines of ``spec`` to ``out/data.jsonl`` and the media they name under
    ``out/media``; returns both paths, the line count and the planted bad lines (1-based line -> kind)."""
    corrupt = plan_corrupt_rows(spec, options)
    low, high = options.sides(_DEFAULT_SIDES)
    so = options.storage_options
    media_dir = storage.join(out, "media")
    lines = []
    for index in range(options.total_rows):
        rng = np.random.default_rng(np.random.SeedSequence([options.seed, spec.code, index]))
        line, media = spec.make_line(SynthRow(index, f"line-{index:05d}", rng, corrupt.get(index), low, high))
        for name, blob in media.items():
            storage.write_bytes(storage.join(media_dir, name), blob, so)
        lines.append(json.dumps(line, ensure_ascii=False) + "\n")
    jsonl = storage.join(out, "data.jsonl")
    storage.write_bytes(jsonl, "".join(lines).encode("utf-8"), so)
    bad_lines = {index + 1: kind for index, kind in sorted(corrupt.items())}
    return {"jsonl": jsonl, "media_dir": media_dir, "num_lines": len(lines), "bad_lines": bad_lines}


def synth_kinds() -> list[DatasetKind]:
    """The registered kinds that can write synthetic data, in registry order."""
    return [kind for kind in all_kinds() if kind.synth is not None]


def synth_writer(name: str | None) -> tuple[DatasetKind, SynthWriter]:
    """The kind called ``name`` (default: the first kind with a synth function) and its writer."""
    names = [n for kind in synth_kinds() for n in kind.names]
    try:
        kind = get_kind(name) if name is not None else synth_kinds()[0]
    except UnknownKindError:
        raise ValueError(f"unknown synthetic schema {name!r}; expected one of {names}") from None
    if kind.synth is None:
        raise ValueError(f"dataset kind {kind.name!r} has no synthetic-data writer; expected one of {names}")
    writer: SynthWriter = kind.code("synth")
    return kind, writer


def write_synthetic_dataset(
    out: str,
    *,
    schema: str | None = None,
    num_files: int = 2,
    row_groups_per_file: int = 2,
    rows_per_group: int = 8,
    seed: int = 0,
    corrupt_fraction: float = 0.0,
    min_side: int | None = None,
    max_side: int | None = None,
    storage_options: dict[str, Any] | None = None,
    workers: int | None = None,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Write a synthetic source dataset of the kind ``schema`` (default: the first with a synth function) to
    ``out`` (a directory or fsspec URL); returns its summary. Workers are spawned: guard ``__main__``.
    """
    options = SynthOptions(**{k: v for k, v in locals().items() if k not in ("out", "schema")})
    kind, writer = synth_writer(schema)
    return {"out": out, "schema": kind.name, **writer(out, options)}
