"""``verify`` for parquet sources: the shards together cover every row of the source files exactly once."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..data.layouts import ParquetDirectory
from ..format import manifest as mf
from ..io import storage
from ..io.parquet import row_group_sizes
from .problems import Problem


def check_parquet_root(root: str, m: mf.Manifest, source: str | None, so: dict[str, Any] | None) -> list[Problem]:
    """With a ``source``: every row of every source file is in exactly one shard slice, and the
    manifest's row counts match the files."""
    if source is None:
        return []
    problems: list[Problem] = []
    try:
        urls = ParquetDirectory(source, so).files()
    except FileNotFoundError as exc:
        return [Problem("source", None, str(exc))]
    names = [u.rsplit("/", 1)[-1] for u in urls]
    listed = [f.path for f in m.source_files]
    if sorted(names) != sorted(listed):
        problems.append(Problem("source", None, f"source has files {names}, manifest lists {listed}"))
    covered: Counter[tuple[str, int]] = Counter()
    for shard in m.shards:
        for s in shard.rows:
            covered[(s.file, s.row_group)] += s.num_rows
    for f in m.source_files:
        if f.path not in names:
            continue
        try:
            sizes = row_group_sizes(storage.join(source, f.path), so)
        except OSError as exc:
            problems.append(Problem("source", None, f"cannot read footer of {f.path}: {exc}"))
            continue
        if sizes[: len(f.row_groups)] != f.row_groups:
            problems.append(
                Problem("source", None, f"{f.path} has row groups of {sizes} rows, manifest says {f.row_groups}")
            )
        for rg, n in enumerate(f.row_groups):
            if covered[(f.path, rg)] != n:
                detail = f"{f.path} row group {rg}: {n} rows, shards cover {covered[(f.path, rg)]}"
                problems.append(Problem("source_coverage", None, detail))
    return problems
