"""All storage access goes through here: fsspec URLs, sorted listings, reads, atomic writes.

Local paths and any fsspec URL (``s3://``, ``gs://``, ``memory://`` ...) are accepted
wherever a path is. S3 credentials and endpoint come from ``storage_options`` or from the
standard AWS environment variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``), which s3fs/botocore read themselves.
"""

from __future__ import annotations

import contextlib
import errno
import os
from concurrent.futures import Executor, Future
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import fsspec

StorageOptions = dict[str, Any]


def protocol_of(url: str) -> str:
    """The fsspec protocol of ``url`` (``"file"`` for plain paths)."""
    if "://" in url:
        return url.split("://", 1)[0]
    return "file"


def is_local(url: str) -> bool:
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


def relpath(url: str, root: str) -> str:
    """``url`` relative to ``root`` (both given in the same spelling)."""
    root = root.rstrip("/") + "/"
    if not url.startswith(root):
        raise ValueError(f"{url!r} is not under {root!r}")
    return url[len(root):]


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


def exists(url: str, storage_options: StorageOptions | None = None) -> bool:
    fs, path = url_to_fs(url, storage_options)
    return fs.exists(path)


def size(url: str, storage_options: StorageOptions | None = None) -> int:
    fs, path = url_to_fs(url, storage_options)
    return int(fs.size(path))


def read_bytes(url: str, storage_options: StorageOptions | None = None, start: int | None = None,
               end: int | None = None) -> bytes:
    """Read a whole file, or the byte range ``[start, end)`` with one ranged request."""
    fs, path = url_to_fs(url, storage_options)
    if start is None and end is None:
        return fs.cat_file(path)
    return fs.cat_file(path, start=start, end=end)


def open_read(url: str, storage_options: StorageOptions | None = None, **kwargs: Any) -> IO[bytes]:
    fs, path = url_to_fs(url, storage_options)
    return fs.open(path, "rb", **kwargs)


def makedirs(url: str, storage_options: StorageOptions | None = None) -> None:
    fs, path = url_to_fs(url, storage_options)
    if is_local(url):
        fs.makedirs(path, exist_ok=True)


def remove(url: str, storage_options: StorageOptions | None = None) -> None:
    fs, path = url_to_fs(url, storage_options)
    if fs.exists(path):
        fs.rm(path)


@contextlib.contextmanager
def atomic_write(url: str, storage_options: StorageOptions | None = None, *,
                 fsync: bool = True) -> Iterator[IO[bytes]]:
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
        f = open(tmp, "wb")
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
    with atomic_write(url, storage_options) as f:
        f.write(data)


# ---------------------------------------------------------------------------------------
# Retry policy: one object decides what is transient and how long to wait.

def _default_transient(exc: BaseException) -> bool:
    """Errors worth retrying: connection drops, timeouts, 5xx / throttling from object stores."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
        return False
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    name = type(exc).__name__
    text = str(exc)
    transient_names = ("ClientPayloadError", "ServerDisconnectedError", "ClientOSError", "ReadTimeoutError",
                       "EndpointConnectionError", "ConnectTimeoutError", "IncompleteRead",
                       "ResponseStreamingError", "ProtocolError", "ClientConnectorError",
                       "ServerTimeoutError", "IncompleteReadError", "ConnectionClosedError")
    if name in transient_names:
        return True
    if isinstance(exc, OSError) and exc.errno in (errno.EREMOTEIO, errno.EAGAIN, errno.EBUSY, errno.ECONNRESET,
                                                  errno.ECONNABORTED, errno.ETIMEDOUT, errno.EPIPE):
        return True  # s3fs maps S3 5xx / throttling answers to EREMOTEIO / EAGAIN / EBUSY
    lowered = text.lower()
    for marker in ("500", "502", "503", "504", "slowdown", "internalerror", "internal error", "serviceunavailable",
                   "service unavailable", "please try again", "reduce your request rate", "connection reset",
                   "connection aborted", "timed out", "timeout", "response payload is not completed"):
        if marker in lowered:
            return True
    return isinstance(exc, OSError) and exc.errno is None and bool(text)


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How transient storage errors are retried: attempts, exponential backoff with jitter.

    ``is_transient`` decides which exceptions are retried; anything else propagates at once.
    """

    max_attempts: int = 6
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    is_transient: Callable[[BaseException], bool] = field(default=_default_transient)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")
        if self.initial_backoff < 0 or self.max_backoff < 0:
            raise ValueError("RetryPolicy backoffs must be >= 0")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        base = min(self.max_backoff, self.initial_backoff * (2 ** (attempt - 1)))
        return base * (0.5 + random.Random(attempt).random() / 2)

    def call(self, fn: Callable[[], Any], describe: str = "") -> Any:
        """Run ``fn`` until it succeeds, retrying transient errors; re-raise the last one."""
        attempt = 0
        while True:
            try:
                return fn()
            except BaseException as exc:  # noqa: BLE001 - filtered by is_transient
                attempt += 1
                if attempt >= self.max_attempts or not self.is_transient(exc):
                    raise
                time.sleep(self.delay(attempt))


NO_RETRY = RetryPolicy(max_attempts=1)


def read_range(url: str, start: int, end: int, *, storage_options: StorageOptions | None = None,
               retry: RetryPolicy | None = None) -> bytes:
    """Bytes ``[start, end)`` of ``url`` with one ranged request, retried under ``retry``."""
    policy = retry or RetryPolicy()
    return policy.call(lambda: read_bytes(url, storage_options, start=start, end=end),
                       describe=f"{url} bytes {start}-{end}")


class RangedReader:
    """Sequential reads of ``[start, end)`` of one URL, fetched as ranged reads of ``block_size``.

    Each block is one ranged request retried under ``retry`` from its own start offset, so a
    connection dropped mid-body costs a re-read of that block and nothing is lost or repeated.
    With an ``executor`` the next block is fetched in the background while the current one
    is consumed (hides object-store latency); ``first_block`` may hand in a block that was
    prefetched before the reader was created. Memory stays at about two blocks.
    """

    def __init__(self, url: str, *, storage_options: StorageOptions | None = None, start: int = 0,
                 end: int | None = None, block_size: int = 8 << 20, retry: RetryPolicy | None = None,
                 executor: Executor | None = None, first_block: Future | None = None) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be > 0, got {block_size}")
        self.url = url
        self.storage_options = storage_options
        self.end = end
        self.block_size = block_size
        self.retry = retry or RetryPolicy()
        self.executor = executor
        self._pos = start  # offset of the first byte not yet returned by read()
        self._fetch_pos = start  # offset of the next block to request
        self._buf = memoryview(b"")
        self._eof = False
        self._pending: Future | None = first_block
        if first_block is not None:
            self._fetch_pos = start + block_size if end is None else min(end, start + block_size)
        self.requests = 0

    def _fetch(self, a: int, b: int) -> bytes:
        self.requests += 1
        return read_range(self.url, a, b, storage_options=self.storage_options, retry=self.retry)

    def _submit_next(self) -> Future | None:
        a = self._fetch_pos
        if self.end is not None and a >= self.end:
            return None
        b = a + self.block_size if self.end is None else min(self.end, a + self.block_size)
        self._fetch_pos = b
        if self.executor is not None:
            return self.executor.submit(self._fetch, a, b)
        done: Future = Future()
        try:
            done.set_result(self._fetch(a, b))
        except BaseException as exc:  # noqa: BLE001 - re-raised by result()
            done.set_exception(exc)
        return done

    def _next_block(self) -> bytes:
        pending = self._pending if self._pending is not None else self._submit_next()
        self._pending = None
        if pending is None:
            return b""
        expected = None
        block = pending.result()
        if self.end is not None:
            expected = min(self.block_size, self.end - (self._pos + len(self._buf)))
        if len(block) < (expected if expected is not None else self.block_size):
            self._eof = True  # a short block is the end of the object (or a truncated object)
        elif self.executor is not None:
            self._pending = self._submit_next()
        return block

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all remaining when ``n < 0``); fewer only at the end."""
        if 0 <= n <= len(self._buf):  # served from the current block: one copy
            out_view = self._buf[:n]
            self._buf = self._buf[n:]
            self._pos += n
            return bytes(out_view)
        out = bytearray()
        while n < 0 or len(out) < n:
            if not self._buf:
                if self._eof:
                    break
                block = self._next_block()
                if not block:
                    self._eof = True
                    break
                self._buf = memoryview(block)
            take = len(self._buf) if n < 0 else min(n - len(out), len(self._buf))
            out += self._buf[:take]
            self._buf = self._buf[take:]
            self._pos += take
        return bytes(out)

    def tell(self) -> int:
        return self._pos

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._buf = memoryview(b"")

    def __enter__(self) -> RangedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
