"""Storage access through fsspec: URL resolution, sorted listings, reads, atomic writes.

Local paths and any fsspec URL (``s3://``, ``gs://``, ``memory://`` ...) are accepted
wherever a path is. S3 credentials and endpoint come from ``storage_options`` or from the
standard AWS environment variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``), which s3fs/botocore read themselves.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import IO, Any

import fsspec

StorageOptions = dict[str, Any]


def protocol_of(url: str) -> str:
    """The fsspec protocol of ``url`` (``"file"`` for plain paths)."""
    if "://" in url:
        return url.split("://", 1)[0]
    return "file"


def is_local(url: str) -> bool:
    """True for plain paths and ``file://`` URLs."""
    return protocol_of(url) in ("file", "local")


def _s3_defaults(storage_options: StorageOptions | None) -> StorageOptions:
    """S3 options editstream relies on, unless the caller set them.

    - The endpoint comes from ``AWS_ENDPOINT_URL`` (recent botocore reads it itself, older
      ones do not, so it is passed explicitly).
    - botocore's own retries are off: their backoff jitter draws from Python's global
      ``random``, on s3fs's I/O thread, which would shift the per-sample draws of
      ``parse_row`` whenever a request is retried. s3fs's retries (no randomness) and
      editstream's :class:`RetryPolicy` (a private RNG) handle faults instead.
    """
    opts = dict(storage_options or {})
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and "endpoint_url" not in opts and "endpoint_url" not in opts.get("client_kwargs", {}):
        opts["endpoint_url"] = endpoint
    config = dict(opts.get("config_kwargs") or {})
    config.setdefault("retries", {"max_attempts": 0})
    opts["config_kwargs"] = config
    return opts


def url_to_fs(url: str, storage_options: StorageOptions | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """Resolve ``url`` to ``(filesystem, path-within-filesystem)``."""
    opts = dict(storage_options or {})
    if protocol_of(url) in ("s3", "s3a"):
        opts = _s3_defaults(opts)
    return fsspec.core.url_to_fs(url, **opts)


def join(base: str, *parts: str) -> str:
    """Join URL or path components with ``/`` (``os.path.join`` would break URLs on Windows)."""
    out = base.rstrip("/")
    for part in parts:
        part = part.strip("/")
        if part:
            out = f"{out}/{part}"
    return out


def list_files(dir_url: str, suffix: str, storage_options: StorageOptions | None = None) -> list[str]:
    """Sorted URLs of the files directly in ``dir_url`` whose name ends with ``suffix``.

    Raises ``FileNotFoundError`` naming the directory when it does not exist.
    """
    fs, path = url_to_fs(dir_url, storage_options)
    if not fs.isdir(path):
        raise FileNotFoundError(f"directory not found: {dir_url}")
    names = []
    for entry in fs.ls(path, detail=True):
        if entry.get("type") != "file":
            continue
        name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
        if name.endswith(suffix):
            names.append(name)
    return [join(dir_url, name) for name in sorted(names)]


def list_names(dir_url: str, storage_options: StorageOptions | None = None) -> list[str]:
    """Names of every entry directly in ``dir_url`` (files and sub-directories), in listing order.

    Local directories give ``os.listdir`` order (what the reference's frame-folder reader sees);
    object stores give their own order (lexicographic keys on S3). Raises ``FileNotFoundError``
    or ``NotADirectoryError`` like ``os.listdir`` for a path that is not a directory.
    """
    fs, path = url_to_fs(dir_url, storage_options)
    if is_local(dir_url):
        return os.listdir(path)
    if not fs.isdir(path):
        raise FileNotFoundError(f"directory not found: {dir_url}")
    prefix = path.rstrip("/")
    names = []
    for entry in fs.ls(prefix, detail=False):
        name = str(entry).rstrip("/").rsplit("/", 1)[-1]
        if str(entry).rstrip("/") != prefix:
            names.append(name)
    return names


def exists(url: str, storage_options: StorageOptions | None = None) -> bool:
    """Whether ``url`` exists."""
    fs, path = url_to_fs(url, storage_options)
    return fs.exists(path)


def size(url: str, storage_options: StorageOptions | None = None) -> int:
    """Size of the file at ``url`` in bytes."""
    fs, path = url_to_fs(url, storage_options)
    return int(fs.size(path))


def read_bytes(
    url: str, storage_options: StorageOptions | None = None, start: int | None = None, end: int | None = None
) -> bytes:
    """Read a whole file, or the byte range ``[start, end)`` with one ranged request."""
    fs, path = url_to_fs(url, storage_options)
    if start is None and end is None:
        return fs.cat_file(path)
    return fs.cat_file(path, start=start, end=end)


def open_read(url: str, storage_options: StorageOptions | None = None, **kwargs: Any) -> IO[bytes]:
    """Open ``url`` for reading (``kwargs`` go to the filesystem's ``open``)."""
    fs, path = url_to_fs(url, storage_options)
    return fs.open(path, "rb", **kwargs)


def makedirs(url: str, storage_options: StorageOptions | None = None) -> None:
    """Create a local directory (object stores have no directories to create)."""
    fs, path = url_to_fs(url, storage_options)
    if is_local(url):
        fs.makedirs(path, exist_ok=True)


def remove(url: str, storage_options: StorageOptions | None = None) -> None:
    """Delete ``url`` if it exists."""
    fs, path = url_to_fs(url, storage_options)
    if fs.exists(path):
        fs.rm(path)


@contextlib.contextmanager
def atomic_write(url: str, storage_options: StorageOptions | None = None, *, fsync: bool = True) -> Iterator[IO[bytes]]:
    """Open ``url`` for writing so that it appears under its name only after a clean exit.

    Local files are written to a hidden temp name in the same directory and renamed (after an
    fsync, unless ``fsync=False`` for a caller that syncs many files in one pass later).
    Object stores (S3) complete their multipart upload only on a clean close; on error the
    upload is discarded, so no partial object ever appears.
    """
    fs, path = url_to_fs(url, storage_options)
    if is_local(url):
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        f = open(tmp, "wb")  # noqa: SIM115 - handed to the caller, closed below on every path
        try:
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())
            f.close()
            os.replace(tmp, path)
        except BaseException:
            f.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return
    f = fs.open(path, "wb")
    try:
        yield f
    except BaseException:
        discard = getattr(f, "discard", None)
        if discard is not None:
            discard()
        else:  # pragma: no cover - filesystems without a discard hook
            f.close()
            with contextlib.suppress(Exception):
                fs.rm(path)
        raise
    f.close()


def write_bytes(url: str, data: bytes, storage_options: StorageOptions | None = None) -> None:
    """Write ``data`` to ``url`` atomically (see :func:`atomic_write`)."""
    with atomic_write(url, storage_options) as f:
        f.write(data)
