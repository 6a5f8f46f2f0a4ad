"""Storage access through fsspec (local paths and any fsspec URL): listings, reads, atomic writes.
S3 credentials and endpoint come from ``storage_options`` or the standard AWS environment variables."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from .retry import RetryPolicy

if TYPE_CHECKING:  # fsspec (and asyncio under it) loads on the first URL that needs a filesystem
    import fsspec

_RETRY = RetryPolicy()
"""The retries of simple storage calls (listing, size, whole reads and writes)."""

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
    """S3 options editstream relies on, unless the caller set them: the endpoint from ``AWS_ENDPOINT_URL``,
    botocore's retries off (their jitter draws from the global ``random`` and would shift ``parse_row``'s
    draws), and timeouts, so a silent endpoint fails an attempt."""
    opts = dict(storage_options or {})
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and "endpoint_url" not in opts and "endpoint_url" not in opts.get("client_kwargs", {}):
        opts["endpoint_url"] = endpoint
    config = dict(opts.get("config_kwargs") or {})
    config.setdefault("retries", {"max_attempts": 0})
    config.setdefault("connect_timeout", S3_CONNECT_TIMEOUT)
    config.setdefault("read_timeout", S3_READ_TIMEOUT)
    opts["config_kwargs"] = config
    return opts


S3_CONNECT_TIMEOUT = 5
"""Seconds to establish a connection to an S3 endpoint (one attempt)."""
S3_READ_TIMEOUT = 15
"""Seconds a read may wait for the next bytes from an S3 endpoint (one attempt)."""


def url_to_fs(url: str, storage_options: StorageOptions | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """Resolve ``url`` to ``(filesystem, path-within-filesystem)``; S3 ones get editstream's defaults and
    s3fs's own retry loop off, so a silent endpoint costs one timeout per editstream retry."""
    import fsspec

    opts = dict(storage_options or {})
    s3 = protocol_of(url) in ("s3", "s3a")
    if s3:
        opts = _s3_defaults(opts)
    fs, path = fsspec.core.url_to_fs(url, **opts)
    if s3 and getattr(fs, "retries", 1) != 1:
        fs.retries = 1
    return fs, path


def local_path(url: str) -> str:
    """The filesystem path of a local ``url`` (a plain path, or ``file://``), without building a filesystem."""
    if "://" not in url:
        return url
    return str(url_to_fs(url)[1])


def absolute(url: str) -> str:
    """A local path made absolute (so worker processes read the same files); URLs as they are."""
    return url if "://" in url else os.path.abspath(url)


def canonical(url: str) -> str:
    """One spelling per place, to tell two names of the same source apart from two sources: a local path
    absolute with its links resolved (``file://`` read as the path), a URL without its trailing slashes."""
    if is_local(url):
        return os.path.realpath(os.path.expanduser(local_path(url)))
    protocol, rest = url.split("://", 1)
    return f"{'s3' if protocol == 's3a' else protocol}://{rest.rstrip('/')}"


def join(base: str, *parts: str) -> str:
    """Join URL or path components with ``/`` (``os.path.join`` would break URLs on Windows)."""
    out = base.rstrip("/")
    for part in parts:
        part = part.strip("/")
        if part:
            out = f"{out}/{part}"
    return out


class BrokenLinkError(FileNotFoundError):
    """A listed entry is a symbolic link that resolves to nothing (raised, not skipped: a half-downloaded
    Hugging Face cache would otherwise lose its rows without a word)."""


def _local_entry_type(entry: os.DirEntry[str]) -> str:
    """``"file"``, ``"directory"`` or ``"other"`` for a local entry, symlinks followed (unlike fsspec)."""
    try:
        if entry.is_file():
            return "file"
        if entry.is_dir():
            return "directory"
    except OSError as exc:  # ELOOP: a symlink loop
        raise BrokenLinkError(f"{entry.path} is a symbolic link loop ({exc.strerror})") from None
    if entry.is_symlink():
        target = os.readlink(entry.path)
        raise BrokenLinkError(f"{entry.path} is a symbolic link to {target}, which does not exist")
    return "other"


def _local_dir_error(path: str, dir_url: str) -> FileNotFoundError:
    """Why a local ``path`` is not a directory to list: a link loop, a dangling link, or not there."""
    if os.path.islink(path):
        try:
            os.stat(path)
        except OSError as exc:
            return BrokenLinkError(f"directory {dir_url} is a symbolic link that does not resolve ({exc.strerror})")
    return FileNotFoundError(f"directory not found: {dir_url}")


def list_files(
    dir_url: str, suffix: str, storage_options: StorageOptions | None = None, *, ordered: bool = True
) -> list[str]:
    """Sorted URLs of the files directly in ``dir_url`` whose name ends with ``suffix`` (in listing order
    with ``ordered=False``); local links count as what they point at, a broken one is a :class:`BrokenLinkError`."""
    if is_local(dir_url):
        path = local_path(dir_url)
        if not os.path.isdir(path):
            raise _local_dir_error(path, dir_url)
        with os.scandir(path) as entries:
            names = [e.name for e in entries if e.name.endswith(suffix) and _local_entry_type(e) == "file"]
    else:
        fs, path = url_to_fs(dir_url, storage_options)
        if not _RETRY.call(lambda: fs.isdir(path), f"list {dir_url}"):
            raise FileNotFoundError(f"directory not found: {dir_url}")
        listed = _RETRY.call(lambda: fs.ls(path, detail=True), f"list {dir_url}")
        files = (e["name"].rstrip("/").rsplit("/", 1)[-1] for e in listed if e.get("type") == "file")
        names = [name for name in files if name.endswith(suffix)]
    return [join(dir_url, name) for name in (sorted(names) if ordered else names)]


def list_names(dir_url: str, storage_options: StorageOptions | None = None) -> list[str]:
    """Names of every entry directly in ``dir_url``, in listing order (``os.listdir``'s locally)."""
    fs, path = url_to_fs(dir_url, storage_options)
    if is_local(dir_url):
        return os.listdir(path)
    if not _RETRY.call(lambda: fs.isdir(path), f"list {dir_url}"):
        raise FileNotFoundError(f"directory not found: {dir_url}")
    prefix = path.rstrip("/")
    listed = (str(e).rstrip("/") for e in _RETRY.call(lambda: fs.ls(prefix, detail=False), f"list {dir_url}"))
    return [entry.rsplit("/", 1)[-1] for entry in listed if entry != prefix]


def exists(url: str, storage_options: StorageOptions | None = None) -> bool:
    """Whether ``url`` exists."""
    fs, path = url_to_fs(url, storage_options)
    return bool(_RETRY.call(lambda: fs.exists(path), f"exists {url}"))


def size(url: str, storage_options: StorageOptions | None = None) -> int:
    """Size of the file at ``url`` in bytes."""
    fs, path = url_to_fs(url, storage_options)
    return int(_RETRY.call(lambda: fs.size(path), f"size of {url}"))


def cat(
    url: str, storage_options: StorageOptions | None = None, start: int | None = None, end: int | None = None
) -> bytes:
    """One attempt at reading a whole file, or the byte range ``[start, end)`` (a single request)."""
    if start is None and end is None and "://" not in url and os.path.isabs(url):
        with open(url, "rb") as f:  # a whole local file: no filesystem object needed
            return f.read()
    fs, path = url_to_fs(url, storage_options)
    return bytes(fs.cat_file(path, start=start, end=end))


def read_bytes(
    url: str,
    storage_options: StorageOptions | None = None,
    start: int | None = None,
    end: int | None = None,
    *,
    retry: RetryPolicy | None = None,
) -> bytes:
    """Read a whole file, or the byte range ``[start, end)``, retrying transient errors."""
    where = url if start is None and end is None else f"{url} bytes {start}-{end}"
    return (retry or _RETRY).call(lambda: cat(url, storage_options, start, end), where)


def makedirs(url: str, storage_options: StorageOptions | None = None) -> None:
    """Create a local directory (object stores have no directories to create)."""
    fs, path = url_to_fs(url, storage_options)
    if is_local(url):
        fs.makedirs(path, exist_ok=True)


def remove(url: str, storage_options: StorageOptions | None = None) -> None:
    """Delete the file ``url`` if it exists; the name is literal (see :func:`remove_tree`)."""
    fs, path = url_to_fs(url, storage_options)

    def rm() -> None:
        if fs.exists(path):
            fs.rm_file(path)

    _RETRY.call(rm, f"remove {url}")


def _has_magic(path: str) -> bool:
    """Whether fsspec's ``rm`` / ``expand_path`` would read ``path`` as a glob pattern."""
    return any(c in path for c in "*?[")


def remove_tree(url: str, storage_options: StorageOptions | None = None) -> None:
    """Delete the directory ``url`` and everything under it, if it exists, taking every name literally
    (fsspec's ``rm`` globs: ``rm("b/q?x", recursive=True)`` also deletes ``b/qXx``)."""
    fs, path = url_to_fs(url, storage_options)
    if is_local(url):
        _RETRY.call(lambda: _rmtree_local(path), f"remove {url}")
        return

    def rm() -> None:
        if not fs.exists(path):
            return
        found = fs.find(path, withdirs=True, detail=True)
        files = [p for p, info in found.items() if info.get("type") != "directory"]
        plain = [p for p in files if not _has_magic(p)]
        if plain:
            fs.rm(plain)
        for p in files:
            if _has_magic(p):
                fs.rm_file(p)
        if protocol_of(url) in _OBJECT_STORES:
            return  # no directories to remove (and rmdir of a bucket would delete the bucket)
        for d in sorted((p for p in found if p not in files), key=len, reverse=True) + [path]:
            with contextlib.suppress(OSError):
                fs.rmdir(d)

    _RETRY.call(rm, f"remove {url}")


_OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})


def _rmtree_local(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


@contextlib.contextmanager
def atomic_write(url: str, storage_options: StorageOptions | None = None, *, fsync: bool = True) -> Iterator[IO[bytes]]:
    """Open ``url`` for writing so that it appears under its name only after a clean exit: a local temp
    file renamed (after an fsync, unless ``fsync=False``), or an upload completed only on a clean close."""
    if is_local(url):
        path = local_path(url)
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        # the name cut to fit NAME_MAX (255 bytes) with the dot, 32 hex digits and ".tmp" around it
        name = os.path.basename(path).encode("utf-8")[:180].decode("utf-8", "ignore")
        tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
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
    fs, path = url_to_fs(url, storage_options)
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
                fs.rm_file(path)
        raise
    f.close()


def write_bytes(url: str, data: bytes, storage_options: StorageOptions | None = None, *, fsync: bool = True) -> None:
    """Write ``data`` to ``url`` atomically (see :func:`atomic_write`), retrying transient errors."""

    def write() -> None:
        with atomic_write(url, storage_options, fsync=fsync) as f:
            f.write(data)

    _RETRY.call(write, f"write {url}")
