"""Which backend and schema DATA needs, decided from what it holds before a row is read.

A converted root names its schema in ``manifest.json``; a parquet directory's schema follows
from its columns; tar shards without a manifest (a brace pattern, a ``.tar``, a directory of
them) are foreign shards read as T2I data by default. A ``--backend`` or ``--schema`` that
contradicts the data is a usage error that names the right one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..format import detect as d
from ..kinds import UnknownKindError, detect_kind, get_kind
from .errors import UsageProblem
from .options import trainable
from .paths import check_bucket, missing_path, parquet_columns, unfinished_conversion


@dataclass
class Resolved:
    """One DATA argument: the entry to hand the dataset, its backend and schema, whether foreign."""

    entry: str
    backend: str
    schema: str
    foreign: bool = False


def _parquet_schema(found: d.PathKind, so: dict[str, Any] | None) -> str | None:
    kind = detect_kind(parquet_columns(found, so))
    return kind.name if kind else None


def _foreign(entry: str) -> Resolved:
    from ..data.sources.foreign import foreign_kind

    return Resolved(entry, "webdataset", foreign_kind().name, foreign=True)


def _check_streamable(r: Resolved) -> None:
    """The kind of ``r`` must have a parquet-slice training dataset: the datasets ``stream`` builds."""
    streamable = [k.name for k in all_trainable()]
    try:
        kind = get_kind(r.schema)
    except UnknownKindError:
        kind = None
    if kind is not None and trainable(kind):
        return
    reader = kind.dataset.rsplit(":", 1)[-1] if kind is not None and kind.dataset else None
    advice = f"read {r.schema} data with {reader} (see the README)" if reader else "give data of a kind stream reads"
    raise UsageProblem(f"{r.entry} holds {r.schema} data; stream reads {' and '.join(streamable)}", advice)


def _jsonl_refused(url: str) -> UsageProblem:
    """``stream`` builds parquet-slice datasets only: a JSONL + media source is read in Python instead."""
    from ..kinds import SourceShape, all_kinds

    readers = [k.dataset.rsplit(":", 1)[-1] for k in all_kinds() if k.source is SourceShape.JSONL_MEDIA and k.dataset]
    advice = f"read it in Python with {readers[0]} (see the README)" if readers else "give a parquet directory"
    return UsageProblem(f"{url} is a JSONL file (JSONL + media data), which stream does not read", advice)


def all_trainable() -> list[Any]:
    """The registered kinds ``stream`` can build a dataset for, in registry order."""
    from ..kinds import all_kinds

    return [k for k in all_kinds() if trainable(k)]


def _resolve_one(url: str, backend: str, so: dict[str, Any] | None) -> Resolved:
    if url.endswith(".tar") or d.names_pattern(url, so):
        return _foreign(url)
    check_bucket(url, so)
    found = d.detect(url, so)
    if found.kind == d.MISSING:
        raise missing_path(url, "DATA")
    if found.kind == d.PARTIAL:
        raise unfinished_conversion(found)
    if found.kind == d.CONVERTED:
        if backend == "parquet":
            raise UsageProblem(
                f"{url} holds converted WebDataset shards (manifest.json), not parquet files",
                "use --backend webdataset (or leave --backend out)",
            )
        from ..format.manifest import Manifest

        return Resolved(url, "webdataset", Manifest.read(url, so).schema)
    if found.kind == d.PARQUET_DIR:
        if backend == "webdataset":
            raise UsageProblem(
                f"{url} holds parquet files, not converted shards (no manifest.json)",
                f"use --backend parquet (or leave --backend out), or convert it first: editstream convert {url} DST",
            )
        schema = _parquet_schema(found, so)
        if schema is None:
            names = " or ".join(k.name for k in all_trainable())
            raise UsageProblem(f"the columns of {url} fit no schema stream reads", f"give {names} data")
        return Resolved(url, "parquet", schema)
    if found.kind == d.SHARD_DIR:
        return _foreign(d.shards_in(url))
    if found.kind == d.PARQUET_FILE:
        parent = url.rstrip("/").rsplit("/", 1)[0] if "/" in url.rstrip("/") else "."
        raise UsageProblem(f"{url} is one parquet file; stream reads directories", f"give its directory: {parent}")
    if found.kind == d.JSONL_FILE:
        raise _jsonl_refused(url)
    raise UsageProblem(
        f"{url} holds neither parquet files, a converted root, nor tar shards",
        "give a parquet directory, a converted root, or a shard pattern such as 'shards-{000..009}.tar'",
    )


def resolve(data: tuple[str, ...], backend: str, schema: str | None, so: dict[str, Any] | None) -> list[Resolved]:
    """Resolve every DATA argument; they must agree on backend and schema, and ``schema`` must fit."""
    found = [_resolve_one(url, backend, so) for url in data]
    for r in found:
        if not r.foreign:
            _check_streamable(r)  # first: a kind stream cannot read is never offered as a --schema to pass
    if schema is not None:
        for r in found:
            if r.foreign:
                r.schema = schema
            elif r.schema != schema:
                source = "manifest.json" if r.backend == "webdataset" else "its columns"
                raise UsageProblem(
                    f"{r.entry} holds {r.schema} data ({source}), not {schema}",
                    f"pass --schema {r.schema} or leave --schema out",
                )
    for r in found:
        _check_streamable(r)
    kinds = {(r.backend, r.schema, r.foreign) for r in found}
    if len(kinds) > 1:
        shown = ", ".join(f"{r.entry}: {r.schema} on {r.backend}" for r in found)
        raise UsageProblem(f"DATA arguments of different kinds ({shown})", "stream one kind at a time")
    return found
