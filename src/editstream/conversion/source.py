"""Which kind a conversion's source is, before any I/O: a ``.jsonl`` file is one of a JSONL + media kind.

``convert`` and ``dry_run`` both resolve their arguments here, so they cannot disagree about
what a source is or where it lives.
"""

from __future__ import annotations

import os

from ..io import storage
from ..kinds import DatasetKind, SourceShape, all_kinds, get_kind


def absolute(url: str) -> str:
    """A local path made absolute (so worker processes read the same files); URLs as they are."""
    return os.path.abspath(url) if storage.is_local(url) and "://" not in url else url


def _lines_kind() -> DatasetKind:
    """The kind a ``.jsonl`` source is taken to be when none is named: the first JSONL + media kind registered."""
    for kind in all_kinds():
        if kind.source is SourceShape.JSONL_MEDIA:
            return kind
    raise ValueError("no JSONL + media dataset kind is registered to convert a .jsonl source")


def resolve_source(src: str, schema: str | None, layout: str) -> tuple[str | None, str]:
    """``(schema, layout)`` for converting ``src``: a JSONL + media kind (named, or taken from a
    ``.jsonl`` source when no kind is named) writes shards of consecutive lines (layout ``size``);
    a ``.jsonl`` source with a parquet kind named is an error naming the kind it needs."""
    if schema is None:
        return (_lines_kind().name, "size") if src.endswith(".jsonl") else (None, layout)
    kind = get_kind(schema)
    if kind.source is SourceShape.JSONL_MEDIA:
        return kind.name, "size"
    if src.endswith(".jsonl"):
        raise ValueError(
            f"{src} is a JSONL file (a {_lines_kind().name} source); schema {schema!r} needs a parquet directory"
        )
    return schema, layout
