"""Which kind a conversion's source is, before any I/O (``convert`` and ``dry_run`` both ask here)."""

from __future__ import annotations

from ..data.layouts import JsonlFile
from ..io.storage import absolute as absolute
from ..kinds import get_kind
from .shapes import strategy_of


def resolve_source(src: str, schema: str | None, layout: str) -> tuple[str | None, str]:
    """``(schema, layout)`` for converting ``src`` (a JSONL + media kind by its canonical name, as the manifest
    records it); a ``.jsonl`` source with a parquet kind named is an error."""
    if schema is None:
        if not src.endswith(".jsonl"):
            return None, layout
        schema = JsonlFile(src).detect_kind().name
    fixed = strategy_of(schema).fixed_layout
    if fixed is not None:
        return get_kind(schema).name, fixed
    if src.endswith(".jsonl"):
        raise ValueError(
            f"{src} is a JSONL file (a {JsonlFile(src).detect_kind().name} source); schema {schema!r} needs a "
            "parquet directory"
        )
    return schema, layout
