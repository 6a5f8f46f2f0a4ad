"""Failures as a user reads them, in one or two lines: ``DataProblem`` (exit 1) or ``UsageProblem`` (exit 2);
:func:`explain` looks through chained causes for what a user can act on (credentials, a bucket, an endpoint)."""

from __future__ import annotations

import errno
import os

import click

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
