"""Which kind a conversion's source is, told by what editstream recognises at it (``convert`` and ``dry_run``
both ask here, before the plan reads the source)."""

from __future__ import annotations

from ..data.layouts import JsonlFile, Layout, LayoutError, recognise
from ..format.detect import MISSING
from ..io.storage import StorageOptions
from ..io.storage import absolute as absolute
from ..kinds import get_kind
from .shapes import strategy_of


def _recognised(src: str, so: StorageOptions | None) -> Layout | None:
    """The layout at ``src``; ``None`` when there is none (the plan then says what is wrong with it), and a
    ``FileNotFoundError`` when nothing is there."""
    try:
        return recognise(src, so)
    except LayoutError as exc:
        if exc.found is not None and exc.found.kind == MISSING:
            raise FileNotFoundError(f"source not found: {src} (no such file or directory)") from None
        return None


def resolve_source(
    src: str, schema: str | None, layout: str, so: StorageOptions | None = None
) -> tuple[str | None, str]:
    """``(schema, layout)`` for converting ``src`` (a JSONL + media kind by its canonical name, as the manifest
    records it); a JSONL file with a parquet kind named is an error."""
    found = _recognised(src, so)
    lines = isinstance(found, JsonlFile)
    if schema is None:
        if found is None or not lines:
            return None, layout
        schema = found.detect_kind().name
    fixed = strategy_of(schema).fixed_layout
    if fixed is not None:
        return get_kind(schema).name, fixed
    if found is not None and lines:
        raise ValueError(
            f"{src} is a JSONL file (a {found.detect_kind().name} source); schema {schema!r} needs a parquet directory"
        )
    return schema, layout
