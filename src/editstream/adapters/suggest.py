"""Which built-in adapters fit a parquet source's columns: what a usage error suggests when ``--from`` was
forgotten on a public dataset (or its Hub download), instead of converting its rows as they are."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from ..data.adapted.mapping import builtin_names, builtin_path, load_mapping
from ..data.adapted.plan import find_parquet_root
from ..io import storage
from ..io.parquet import open_parquet


def adapters_for_columns(columns: Sequence[str]) -> list[str]:
    """The built-in parquet adapters (no JSON metadata) whose every source column is in ``columns``, those
    reading the most of them first (the most specific), then by name."""
    have = set(columns)
    fits: list[tuple[int, str]] = []
    for name in builtin_names():
        mapping = load_mapping(builtin_path(name))
        if mapping.metadata:
            continue
        needed = mapping.read_columns(mapping.filter())
        if needed and set(needed) <= have:
            fits.append((-len(needed), name))
    return [name for _, name in sorted(fits)]


def from_advice(columns: Sequence[str], src: str, dst: str) -> str | None:
    """The ``convert --from`` command to suggest for a source with ``columns`` (None: no built-in adapter fits)."""
    names = adapters_for_columns(columns)
    if not names:
        return None
    also = f" (also fits: {', '.join(names[1:])})" if len(names) > 1 else ""
    command = f"editstream convert {shlex.quote(src)} {shlex.quote(dst)} --from {names[0]}"
    return f"these are the columns the built-in adapter {names[0]} reads{also}: {command}"


def hub_layout_advice(src: str, dst: str, storage_options: storage.StorageOptions | None) -> str | None:
    """For a SRC with no parquet files of its own but a Hub layout (``data/``, a cache's ``snapshots/<rev>/data``):
    the ``--from`` command whose adapter fits its columns, else how to adapt it; None when SRC is no such layout."""
    try:
        root = find_parquet_root(src, None, storage_options, say=False)
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None
    if root == src:
        return None
    first = storage.list_files(root, ".parquet", storage_options)[0]
    with open_parquet(first, storage_options) as pf:
        columns = list(pf.schema_arrow.names)
    fits = from_advice(columns, src, dst)
    if fits is not None:
        return f"{src} is a Hub dataset (its parquet files are in {root}); {fits}"
    return (
        f"{src} is a Hub dataset (its parquet files are in {root}, columns {columns}); adapt it with "
        f"--mapping FILE (see 'Bring your dataset' in the README), or give {root} as SRC if its rows are BAGEL's"
    )
