"""Failures as a user reads them, in one or two lines: ``DataProblem`` (exit 1) or ``UsageProblem`` (exit 2);
:func:`explain` looks through chained causes for what a user can act on (credentials, a bucket, an endpoint),
and the checks of the paths a command is given, before any work, give each wrong kind of path its fix."""

from __future__ import annotations

import errno
import os
import shlex
from typing import TYPE_CHECKING, Any

import click

from ..io import storage

if TYPE_CHECKING:  # imported where used, so loading the CLI stays light
    from ..data.layouts import ConvertedRoot, JsonlFile, Layout, LayoutError, ParquetDirectory
    from ..format import detect as d

CREDENTIALS_ADVICE = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), pass -o key=... -o secret=..., "
    "or -o anon=true for a public bucket"
)


class Problem(click.ClickException):
    """An ``Error:`` line and an optional line of advice."""

    def __init__(self, message: str, advice: str | None = None) -> None:
        super().__init__(message)
        self.advice = advice

    def format_message(self) -> str:
        return self.message if not self.advice else f"{self.message}\n  {self.advice}"

    def show(self, file: object = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


class DataProblem(Problem):
    """Exit 1: the data or storage is missing, unreadable or wrong."""

    exit_code = 1


class UsageProblem(Problem):
    """Exit 2: the command line has to change (an option, a path of the wrong kind, a wrong backend)."""

    exit_code = 2


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes and contexts, outermost first, each once."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo.extend([e.__cause__, e.__context__])
    return seen


def _aws_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


_PERMISSION = (
    "permission denied: {path} ({reason})",
    "check this user's permissions on that path and whether its file system is read-only, or give another path",
)
_LOCAL_PATH_ERRORS = {
    errno.EACCES: _PERMISSION,
    errno.EPERM: _PERMISSION,
    errno.EEXIST: ("{path} is a file, not a directory", "give a new or empty directory"),
    errno.ENOTDIR: ("{path}: a part of this path is a file, not a directory", "give a path under directories"),
    errno.EROFS: ("cannot write {path}: its file system is read-only", "give a path on a writable file system"),
    errno.ENOSPC: ("no space left to write {path}", "free space on that file system, or give another path"),
}
"""Local-path errors a user fixes by giving another path: the message (``{path}`` is the path) and the fix."""


def _local_path_error(e: BaseException) -> Problem | None:
    """An operating-system error about a local path (denied, a DST that is a file, a read-only mount), in one line;
    S3's access denials, as s3fs raises them, have no errno and file name."""
    if not isinstance(e, OSError) or e.errno not in _LOCAL_PATH_ERRORS or e.filename is None:
        return None
    path = os.fsdecode(e.filename)
    if "://" in path or (e.errno == errno.EEXIST and not os.path.isfile(path)):
        return None
    message, fix = _LOCAL_PATH_ERRORS[e.errno]
    return DataProblem(message.format(path=path, reason=e.strerror or "not permitted"), fix)


def _storage_problem(chain: list[BaseException]) -> Problem | None:
    """An S3/storage cause a user can fix, from anywhere in the chain."""
    for e in chain:
        local = _local_path_error(e)
        if local is not None:
            return local
        name = type(e).__name__
        text = str(e)
        if name in ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"):
            return DataProblem("no usable AWS credentials for S3", CREDENTIALS_ADVICE)
        if name in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError"):
            return DataProblem(
                f"cannot reach the S3 endpoint ({text})",
                "check --endpoint-url / AWS_ENDPOINT_URL and that the server is up",
            )
        code = _aws_code(e)
        if code == "NoSuchBucket" or "specified bucket does not exist" in text:
            bucket = getattr(e, "response", {}).get("Error", {}).get("BucketName") if code else None
            named = f" {bucket!r}" if bucket else ""
            return DataProblem(f"the S3 bucket{named} does not exist", "check the bucket name in the URL, or create it")
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"):
            return DataProblem(f"S3 rejected the credentials ({code})", CREDENTIALS_ADVICE)
        if code in ("AccessDenied", "403") or isinstance(e, PermissionError):
            return DataProblem(f"access denied: {text}", "check the credentials' permissions on this bucket and prefix")
    return None


def _worker_message(text: str) -> str:
    """The original message of an error a DataLoader worker raised (torch wraps it in the worker's
    traceback): its last line, without the exception's type name."""
    if "in DataLoader worker process" not in text or "Original Traceback" not in text:
        return text
    last = [line for line in text.splitlines() if line.strip()][-1]
    name, sep, message = last.partition(": ")
    return message if sep and name.replace(".", "").isidentifier() else last


def explain(exc: BaseException) -> Problem:
    """A :class:`Problem` for any exception: a storage cause first, else the exception's own message."""
    if isinstance(exc, Problem):
        return exc
    storage = _storage_problem(_chain(exc))
    if storage is not None:
        return storage
    from ..format.columns import ColumnTypeError
    from ..format.manifest import ManifestError

    text = _worker_message(str(exc)) or type(exc).__name__
    if isinstance(exc, (ColumnTypeError, ManifestError, FileNotFoundError, FileExistsError)):
        return DataProblem(text.strip("'\""))
    if isinstance(exc, (ValueError, RuntimeError, OSError)):
        return DataProblem(text, "run with --debug for the traceback")
    return DataProblem(f"{type(exc).__name__}: {text}", "run with --debug for the traceback")


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


def parquet_source(
    url: str, storage_options: dict[str, Any] | None, dst: str | None = None
) -> ParquetDirectory | JsonlFile:
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

    advice = hub_layout_advice(url, dst, storage_options) if dst is not None else None
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
