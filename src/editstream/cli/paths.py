"""The CLI's path gate: each command's paths checked before any work (a bucket that answers, a source that is
one, a converted root that is finished), every wrong kind of path refused with its fix."""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING, Any

from ..io import storage
from .errors import CREDENTIALS_ADVICE, DataProblem, UsageProblem

if TYPE_CHECKING:  # imported where used, so loading the CLI stays light
    from ..data.layouts import ConvertedRoot, JsonlFile, Layout, LayoutError, ParquetDirectory
    from ..format import detect as d


def parent_of(url: str) -> str:
    """The directory holding ``url`` (``.`` for a bare local name)."""
    head = url.rstrip("/").rsplit("/", 1)
    return head[0] if len(head) == 2 and head[0] else "."


def check_bucket(url: str, storage_options: dict[str, Any] | None) -> None:
    """For ``s3://`` URLs: the bucket exists and the credentials work (one request); else a one-line error."""
    if storage.protocol_of(url) not in ("s3", "s3a"):
        return
    bucket = url.split("://", 1)[1].split("/", 1)[0]
    fs, _ = storage.url_to_fs(url, storage_options)
    try:
        fs.info(bucket)
    except FileNotFoundError:
        raise DataProblem(
            f"the S3 bucket {bucket!r} does not exist ({url})", "check the bucket name, or create the bucket"
        ) from None
    except PermissionError:
        return  # some credentials may read a prefix but not the bucket itself: let the real request decide
    except Exception as exc:
        if type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
            raise DataProblem(f"no usable AWS credentials to read {url}", CREDENTIALS_ADVICE) from None
        raise


def missing_path(url: str, what: str) -> DataProblem:
    """The error for a path that does not exist (a relative local path says what it is relative to)."""
    where = f" (relative to {os.getcwd()})" if storage.is_local(url) and not os.path.isabs(url) else ""
    return DataProblem(f"{what} {url} does not exist{where}", "check the path")


def unfinished_conversion(found: d.PathKind) -> DataProblem:
    """The error for an unfinished conversion, with the command that finishes it."""
    from ..format import detect as d

    partial = found.partial or d.Partial(done=0)
    src = shlex.quote(partial.src) if partial.src else "SRC"
    return DataProblem(
        f"{found.url} is an unfinished conversion ({partial.describe()}, no manifest.json yet)",
        f"re-run `editstream convert {src} {shlex.quote(found.url)}` to finish it",
    )


def _recognised(url: str, storage_options: dict[str, Any] | None, what: str) -> Layout | d.PathKind:
    """The layout at ``url``, or what the path is when none (a missing path or unfinished conversion refused)."""
    from ..data.layouts import LayoutError, recognise
    from ..format import detect as d

    check_bucket(url, storage_options)
    try:
        return recognise(url, storage_options)
    except LayoutError as exc:
        found = exc.found if exc.found is not None else d.PathKind(url, d.OTHER_DIR)
        if found.kind == d.MISSING:
            raise missing_path(url, what) from None
        if found.kind == d.PARTIAL:
            raise unfinished_conversion(found) from None
        return found


def converted_root(url: str, storage_options: dict[str, Any] | None, command: str) -> ConvertedRoot:
    """``url`` must be a finished conversion (``manifest.json``); anything else is refused with its fix."""
    from ..data.layouts import ConvertedRoot, ForeignShards, ParquetDirectory
    from ..format import detect as d

    found = _recognised(url, storage_options, "the dataset root")
    if isinstance(found, ConvertedRoot):
        return found
    if isinstance(found, ForeignShards) and str(found.url).endswith(".tar"):
        raise UsageProblem(
            f"{url} is one shard, not a converted dataset root",
            f"give the directory that holds manifest.json: editstream {command} {parent_of(url)}",
        )
    if isinstance(found, ParquetDirectory) or (isinstance(found, d.PathKind) and found.kind == d.PARQUET_FILE):
        raise UsageProblem(
            f"{url} is parquet data, not a converted dataset root (no manifest.json)",
            f"convert it first: editstream convert {url} DST",
        )
    if isinstance(found, ForeignShards):
        raise UsageProblem(
            f"{url} holds tar shards without an editstream manifest.json (not written by editstream convert)",
            f"stream or preview them by pattern, e.g. editstream stream {shlex.quote(str(found.url))}",
        )
    raise UsageProblem(
        f"{url} is not a converted dataset root (no manifest.json)", "give the DST of editstream convert"
    )


def parquet_source(url: str, storage_options: dict[str, Any] | None, dst: str) -> ParquetDirectory | JsonlFile:
    """``url`` must be a directory of parquet files or a JSONL file (of a JSONL + media kind); for a Hub download
    without ``--from`` the error suggests the ``convert`` into ``dst`` with the adapter that fits."""
    from ..data.layouts import ConvertedRoot, ForeignShards, JsonlFile, ParquetDirectory
    from ..format import detect as d

    found = _recognised(url, storage_options, "SRC")
    if isinstance(found, (ParquetDirectory, JsonlFile)):
        return found
    if isinstance(found, d.PathKind) and found.kind == d.PARQUET_FILE:
        raise UsageProblem(
            f"SRC {url} is a file; convert takes the directory that holds the *.parquet files",
            f"give its directory: editstream convert {parent_of(url)} DST",
        )
    if isinstance(found, (ConvertedRoot, ForeignShards)):
        raise UsageProblem(f"SRC {url} holds tar shards, not parquet files", "give the parquet directory as SRC")
    from ..adapters.suggest import hub_layout_advice

    advice = hub_layout_advice(url, dst, storage_options)
    if advice is not None:  # a public dataset's download given without --from: a usage slip
        raise UsageProblem(f"no *.parquet files in {url} itself", advice)
    raise DataProblem(f"no *.parquet files in {url}", "give the directory that holds the parquet files")


def parquet_columns(found: ParquetDirectory) -> list[str]:
    """The column names of the first parquet file of a parquet directory."""
    from ..data.layouts import LayoutError

    try:
        return found.columns()
    except LayoutError as exc:
        raise DataProblem(exc.message, exc.fix) from None


def open_problem(url: str, exc: LayoutError) -> DataProblem | UsageProblem:
    """A data-layer refusal in CLI words: the option to change, or the command that fixes the data."""
    from ..data.layouts import BackendMismatch, KindMismatch
    from ..format import detect as d

    if isinstance(exc, BackendMismatch):
        return UsageProblem(exc.message, f"use --backend {exc.right} (or leave --backend out)")
    if isinstance(exc, KindMismatch):
        return UsageProblem(exc.message, f"pass --schema {exc.held} or leave --schema out")
    if exc.found is not None and exc.found.kind == d.MISSING:
        return missing_path(url, "DATA")
    if exc.found is not None and exc.found.kind == d.PARTIAL:
        return unfinished_conversion(exc.found)
    return (UsageProblem if exc.usage else DataProblem)(exc.message, exc.fix)
