"""The first adapted rows of a source, read in place (nothing written): what ``preview --from`` shows.

A grouped mapping runs the plan pass first; a row the adapter would drop is yielded as its ``BadValue``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from pathlib import Path
from typing import Any

from ..io import storage
from .chains import ChainBuilder
from .mapping import AdapterMapping, resolve_mapping
from .plan import SourceFile, check_columns, gather, open_sources, passes, plan_groups, source_rows
from .sources import close_mounts
from .values import BadValue, MediaDir
from .where import Filter

Peeked = tuple[str, dict[str, Any] | BadValue]
"""A title saying where the chain comes from, and its output row (or why the adapter drops it)."""


def _rows(
    files: list[SourceFile], columns: list[str], where: Filter | None, so: storage.StorageOptions | None
) -> Generator[tuple[str, list[dict[str, Any]]]]:
    for i, rg, r, row in source_rows(files, columns, so):
        if passes(where, row):
            yield f"{files[i].name} rg {rg} row {r}", [row]


def _grouped(
    files: list[SourceFile],
    mapping: AdapterMapping,
    where: Filter | None,
    columns: list[str],
    n: int,
    so: storage.StorageOptions | None,
) -> Generator[tuple[str, list[dict[str, Any]]]]:
    plan = plan_groups(files, mapping, where, n, "peek", so)
    chains = plan.tasks[0].chains if plan.tasks else ()
    with contextlib.ExitStack() as stack:
        found = gather(files, chains, columns, so, stack, {})
    for chain in chains:
        rows = [found[location] for location in chain]
        key = ", ".join(f"{c}={rows[0][c]}" for c in mapping.group_by)
        yield f"{key} ({len(rows)} rows)", rows


def peek(
    src: str,
    mapping: str | Path | AdapterMapping,
    n: int,
    *,
    where: str | None = None,
    media_dir: str | None = None,
    split: str | None = None,
    storage_options: storage.StorageOptions | None = None,
    index_dir: str | None = None,
) -> Generator[Peeked]:
    """The first ``n`` chains ``mapping`` makes of ``src`` (options as for ``adapt``; ``index_dir`` keeps indexes)."""
    mapping = resolve_mapping(mapping)
    where_filter = mapping.filter(where)
    files, mounts = open_sources(src, mapping, split, storage_options, index_dir)
    check_columns(files, mapping, where_filter)
    columns = mapping.read_columns(where_filter)
    media = MediaDir(media_dir, storage_options, mounts=[m[:2] for m in mounts], index_dir=index_dir)
    builder = ChainBuilder(mapping, media)
    chains: Generator[tuple[str, list[dict[str, Any]]]]
    if mapping.group_by:
        chains = _grouped(files, mapping, where_filter, columns, n, storage_options)
    else:
        chains = _rows(files, columns, where_filter, storage_options)
    try:
        for count, (title, rows) in enumerate(chains):
            if count >= n:
                return
            try:
                yield title, builder.build(rows)
            except BadValue as exc:
                yield title, exc
    finally:
        chains.close()  # the open source file, when stopped after n chains
        close_mounts(mounts)
