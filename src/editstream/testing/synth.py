"""Synthetic parquet datasets in the known source schemas, for tests, demos and benchmarks.

Everything is derived from the seed and the row's position, so the same arguments give
byte-identical parquet files whether rows are generated in this process or in a pool.
Bad rows can be planted on purpose (``corrupt_fraction``) and are listed in the summary.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
from collections import Counter
from collections.abc import Generator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..io import storage
from ..io.progress import Progress
from .synth_content import IMAGE_FORMATS, SOURCES, TAGS, caption, garbage, instruction, make_image, pick

SCHEMAS = ("unified_edit", "t2i_pretrain")


# Bad-row kinds per schema, cycled over the chosen rows in position order.
CORRUPT_KINDS = {
    "unified_edit": ("garbage_image", "single_image", "short_instructions"),
    "t2i_pretrain": ("garbage_image", "bad_captions_json"),
}

_SCHEMA_CODE = {"unified_edit": 1, "t2i_pretrain": 2}

# Rows per task handed to a worker process (also the progress-bar granularity).
_CHUNK_ROWS = 32
# Above this many rows in total we show a progress bar and generate in worker processes.
_BIG_DATASET_ROWS = 1000

# Parquet writer options are fixed so output bytes do not depend on library defaults.
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "snappy",
    "use_dictionary": False,
    "write_statistics": True,
    "version": "2.6",
    "data_page_version": "1.0",
}


UNIFIED_EDIT_SCHEMA = pa.schema(
    [
        ("row_id", pa.string()),
        ("image_list", pa.list_(pa.binary())),
        ("instruction_list", pa.list_(pa.list_(pa.string()))),
        ("source", pa.string()),
        ("score", pa.float64()),
        ("tags", pa.list_(pa.string())),
        ("meta_blob", pa.binary()),
    ]
)

T2I_SCHEMA = pa.schema(
    [
        ("row_id", pa.string()),
        ("image", pa.binary()),
        ("captions", pa.string()),
    ]
)


@dataclass(frozen=True, kw_only=True)
class SynthConfig:
    """What to generate; validated on construction so bad arguments fail before any write."""

    schema: str = "unified_edit"
    num_files: int = 2
    row_groups_per_file: int = 2
    rows_per_group: int = 8
    seed: int = 0
    corrupt_fraction: float = 0.0
    min_side: int = 48
    max_side: int = 320

    def __post_init__(self) -> None:
        if self.schema not in SCHEMAS:
            raise ValueError(f"unknown synthetic schema {self.schema!r}; expected one of {SCHEMAS}")
        for name in ("num_files", "row_groups_per_file", "rows_per_group"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.corrupt_fraction <= 1.0:
            raise ValueError(f"corrupt_fraction must be in [0, 1], got {self.corrupt_fraction}")
        if self.min_side < 8 or self.max_side < self.min_side:
            raise ValueError(f"need 8 <= min_side <= max_side, got min_side={self.min_side}, max_side={self.max_side}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")

    @property
    def total_rows(self) -> int:
        return self.num_files * self.row_groups_per_file * self.rows_per_group

    def position(self, index: int) -> tuple[int, int, int]:
        """``(file, row_group, row)`` of the row with flat index ``index``."""
        per_file = self.row_groups_per_file * self.rows_per_group
        f, rest = divmod(index, per_file)
        rg, row = divmod(rest, self.rows_per_group)
        return f, rg, row


def file_name(index: int) -> str:
    """Name of the ``index``-th parquet file; zero-padded so names sort in index order."""
    return f"part-{index:05d}.parquet"


# ---------------------------------------------------------------------------------------
# Rows


def _row_rng(cfg: SynthConfig, f: int, rg: int, row: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([cfg.seed, _SCHEMA_CODE[cfg.schema], f, rg, row]))


def _unified_edit_row(cfg: SynthConfig, index: int, corrupt: str | None) -> tuple[dict[str, Any], Counter]:
    f, rg, row = cfg.position(index)
    rng = _row_rng(cfg, f, rg, row)
    n = 1 if corrupt == "single_image" else int(rng.integers(2, 6))
    formats: Counter = Counter()
    images = []
    for j in range(n):
        fmt = IMAGE_FORMATS[(index + j) % len(IMAGE_FORMATS)]
        images.append(make_image(rng, cfg.min_side, cfg.max_side, fmt))
        formats[fmt] += 1
    instructions = [instruction(rng) for _ in range(n - 1)]
    if corrupt == "garbage_image":
        j = int(rng.integers(0, n))
        formats[IMAGE_FORMATS[(index + j) % len(IMAGE_FORMATS)]] -= 1
        images[j] = garbage(rng)
    elif corrupt == "short_instructions":
        instructions = instructions[:-1] if n >= 3 else []
    meta = rng.integers(0, 256, size=int(rng.integers(4, 64)), dtype=np.uint8).tobytes()
    record = {
        "row_id": f"f{f}-rg{rg}-r{row}",
        "image_list": images,
        "instruction_list": instructions,
        "source": pick(rng, SOURCES),
        "score": float(rng.random()),
        "tags": [str(pick(rng, TAGS)) for _ in range(int(rng.integers(0, 4)))],
        "meta_blob": None if rng.random() < 0.3 else meta,
    }
    return record, formats


def _t2i_row(cfg: SynthConfig, index: int, corrupt: str | None) -> tuple[dict[str, Any], Counter]:
    f, rg, row = cfg.position(index)
    rng = _row_rng(cfg, f, rg, row)
    fmt = IMAGE_FORMATS[index % len(IMAGE_FORMATS)]
    formats: Counter = Counter()
    image = make_image(rng, cfg.min_side, cfg.max_side, fmt)
    if corrupt == "garbage_image":
        image = garbage(rng)
    else:
        formats[fmt] += 1
    if rng.random() < 0.1:
        captions: dict[str, str] = {}
    else:
        captions = {f"caption_{i}": caption(rng) for i in range(int(rng.integers(1, 4)))}
    text = json.dumps(captions, sort_keys=True)
    if corrupt == "bad_captions_json":
        text = text[: max(1, len(text) // 2)] + "{{not json"
    return {"row_id": f"f{f}-rg{rg}-r{row}", "image": image, "captions": text}, formats


def _build_rows(
    cfg: SynthConfig, start: int, stop: int, corrupt: dict[int, str]
) -> tuple[list[dict[str, Any]], Counter]:
    """Rows with flat indexes ``[start, stop)`` and the count of image formats they contain."""
    make = _unified_edit_row if cfg.schema == "unified_edit" else _t2i_row
    rows: list[dict[str, Any]] = []
    formats: Counter = Counter()
    for index in range(start, stop):
        record, counts = make(cfg, index, corrupt.get(index))
        rows.append(record)
        formats.update(counts)
    return rows, formats


def _build_rows_task(args: tuple[dict[str, Any], int, int, dict[int, str]]) -> tuple[list[dict[str, Any]], Counter]:
    cfg_dict, start, stop, corrupt = args
    return _build_rows(SynthConfig(**cfg_dict), start, stop, corrupt)


def plan_corrupt_rows(cfg: SynthConfig) -> dict[int, str]:
    """Flat row index -> bad-row kind, chosen from the seed alone."""
    total = cfg.total_rows
    count = int(round(cfg.corrupt_fraction * total))
    if count == 0:
        return {}
    chosen = sorted(random.Random(cfg.seed).sample(range(total), count))
    kinds = CORRUPT_KINDS[cfg.schema]
    return {index: kinds[i % len(kinds)] for i, index in enumerate(chosen)}


def _chunks(cfg: SynthConfig) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges that never cross a row group."""
    out = []
    for group_start in range(0, cfg.total_rows, cfg.rows_per_group):
        group_stop = group_start + cfg.rows_per_group
        for s in range(group_start, group_stop, _CHUNK_ROWS):
            out.append((s, min(s + _CHUNK_ROWS, group_stop)))
    return out


def _generate(
    cfg: SynthConfig, corrupt: dict[int, str], workers: int
) -> Generator[tuple[int, int, list[dict[str, Any]], Counter], None, None]:
    """Yield ``(start, stop, rows, formats)`` per chunk, in order, from a pool when ``workers > 1``."""
    chunks = _chunks(cfg)
    if workers <= 1:
        for start, stop in chunks:
            rows, formats = _build_rows(cfg, start, stop, corrupt)
            yield start, stop, rows, formats
        return
    cfg_dict = asdict(cfg)
    tasks = [(cfg_dict, s, e, {i: k for i, k in corrupt.items() if s <= i < e}) for s, e in chunks]
    # spawn: the caller may hold threads or torch state that fork would copy unsafely.
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        for (start, stop), (rows, formats) in zip(chunks, pool.map(_build_rows_task, tasks)):
            yield start, stop, rows, formats
    finally:
        # On an error or Ctrl-C do not wait for the queued chunks to be generated.
        pool.shutdown(wait=True, cancel_futures=True)


def _write_files(
    cfg: SynthConfig,
    files: list[str],
    chunks: Generator[tuple[int, int, list[dict[str, Any]], Counter], None, None],
    storage_options: dict[str, Any] | None,
    *,
    show: bool,
) -> tuple[Counter, int]:
    """Write the generated rows into ``files`` (row groups of ``rows_per_group``); returns the
    image-format counts and the bytes written."""
    arrow_schema = UNIFIED_EDIT_SCHEMA if cfg.schema == "unified_edit" else T2I_SCHEMA
    formats: Counter = Counter()
    total_bytes = 0
    progress = Progress("synth", cfg.total_rows, "rows", show)
    try:
        for url in files:
            with storage.atomic_write(url, storage_options) as fh:
                writer = pq.ParquetWriter(fh, arrow_schema, **_PARQUET_OPTIONS)
                try:
                    for _ in range(cfg.row_groups_per_file):
                        group: list[dict[str, Any]] = []
                        while len(group) < cfg.rows_per_group:
                            _, _, rows, counts = next(chunks)
                            group.extend(rows)
                            formats.update(counts)
                            progress.update(len(rows), rows=len(rows))
                        writer.write_table(
                            pa.Table.from_pylist(group, schema=arrow_schema), row_group_size=cfg.rows_per_group
                        )
                finally:
                    writer.close()
            total_bytes += storage.size(url, storage_options)
    finally:
        chunks.close()
        progress.close()
    return formats, total_bytes


def write_synthetic_dataset(
    out: str,
    *,
    schema: str = "unified_edit",
    num_files: int = 2,
    row_groups_per_file: int = 2,
    rows_per_group: int = 8,
    seed: int = 0,
    corrupt_fraction: float = 0.0,
    min_side: int = 48,
    max_side: int = 320,
    storage_options: dict[str, Any] | None = None,
    workers: int | None = None,
    progress: bool | None = None,
) -> dict:
    """Write ``num_files`` parquet files of photo-like images plus ``parquet_info.json`` to ``out``.

    ``out`` is a local directory or any fsspec URL. Returns a JSON-able summary (files, counts,
    bytes, image formats, and where the planted bad rows are). ``workers`` processes generate
    rows (default: one per CPU above 1000 rows, else none); the bytes do not depend on it. The
    pool uses the spawn start method, so a calling script needs an ``if __name__ == "__main__"`` guard.
    ``progress`` shows rows written (default: only for datasets of more than a few thousand rows).
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    cfg = SynthConfig(
        schema=schema,
        num_files=num_files,
        row_groups_per_file=row_groups_per_file,
        rows_per_group=rows_per_group,
        seed=seed,
        corrupt_fraction=corrupt_fraction,
        min_side=min_side,
        max_side=max_side,
    )
    corrupt = plan_corrupt_rows(cfg)
    big = cfg.total_rows > _BIG_DATASET_ROWS
    if workers is None:
        workers = min(os.cpu_count() or 1, 8) if big else 1

    storage.makedirs(out, storage_options)
    files = [storage.join(out, file_name(i)) for i in range(cfg.num_files)]
    formats, total_bytes = _write_files(
        cfg, files, _generate(cfg, corrupt, workers), storage_options, show=big if progress is None else progress
    )

    info = {
        url: {"num_row_groups": cfg.row_groups_per_file, "num_rows": cfg.row_groups_per_file * cfg.rows_per_group}
        for url in files
    }
    storage.write_bytes(
        storage.join(out, "parquet_info.json"),
        (json.dumps(info, indent=2, sort_keys=True) + "\n").encode("utf-8"),
        storage_options,
    )

    corrupt_rows = []
    for index, kind in sorted(corrupt.items()):
        f, rg, row = cfg.position(index)
        corrupt_rows.append({"file": files[f], "row_group": rg, "row": row, "kind": kind})
    return {
        "out": out,
        "schema": cfg.schema,
        "files": files,
        "num_files": cfg.num_files,
        "num_row_groups": cfg.num_files * cfg.row_groups_per_file,
        "num_rows": cfg.total_rows,
        "total_bytes": total_bytes,
        "formats": {fmt: formats[fmt] for fmt in IMAGE_FORMATS if formats[fmt] > 0},
        "corrupt_rows": corrupt_rows,
        "seed": cfg.seed,
    }
