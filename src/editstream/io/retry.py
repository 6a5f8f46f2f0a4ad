"""Retries of transient storage errors: one policy object decides what is transient and how long to wait."""

from __future__ import annotations

import errno
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


_NEVER_RETRIED = (KeyboardInterrupt, SystemExit, MemoryError, FileNotFoundError, PermissionError, IsADirectoryError)
_TRANSIENT_NAMES = frozenset([
    "ClientPayloadError", "ServerDisconnectedError", "ClientOSError", "ReadTimeoutError", "EndpointConnectionError",
    "ConnectTimeoutError", "IncompleteRead", "ResponseStreamingError", "ProtocolError", "ClientConnectorError",
    "ServerTimeoutError", "IncompleteReadError", "ConnectionClosedError",
])  # fmt: skip
"""Exception class names of aiohttp / botocore / urllib3 that mean the connection failed mid-way."""
_TRANSIENT_ERRNOS = frozenset(
    (errno.EREMOTEIO, errno.EAGAIN, errno.EBUSY, errno.ECONNRESET, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EPIPE)
)
"""OS errors worth retrying; s3fs maps S3 5xx / throttling answers to EREMOTEIO / EAGAIN / EBUSY."""
_TRANSIENT_MARKERS = (
    "slowdown", "internalerror", "internal error", "serviceunavailable",
    "service unavailable", "please try again", "reduce your request rate", "connection reset",
    "connection aborted", "timed out", "timeout", "response payload is not completed",
)  # fmt: skip
"""Words in an error's message that object stores use for a retryable answer."""
_TRANSIENT_STATUS = re.compile(r"(?:^|\(|status[ :=]*|code[ :=]*|http(?:/[\d.]+)?[ :]*)50[0234](?!\d)")
"""A 500 / 502 / 503 / 504 as a status (``(503)``, ``status 500``, ``HTTP/1.1 502``, a message opening with it),
not digits inside other numbers: a file's modification time in nanoseconds may hold ``...01500...``."""


def _default_transient(exc: BaseException) -> bool:
    """Errors worth retrying: connection drops, timeouts, 5xx / throttling (retries never nest)."""
    if isinstance(exc, (*_NEVER_RETRIED, NotADirectoryError, RetriesExhausted)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)) or type(exc).__name__ in _TRANSIENT_NAMES:
        return True
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return True
    lowered = str(exc).lower()
    return any(marker in lowered for marker in _TRANSIENT_MARKERS) or bool(_TRANSIENT_STATUS.search(lowered))


class RetriesExhausted(OSError):
    """A storage call that kept failing with transient errors until the attempts or the deadline ran out."""


_JITTER = random.Random()  # private, seeded from the OS: retries never touch the global ``random``


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How transient storage errors are retried: attempts, exponential backoff with jitter (from a private
    generator, so the global ``random`` of the per-sample draws never moves), and a deadline per call."""

    max_attempts: int = 6
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    deadline: float = 120.0
    is_transient: Callable[[BaseException], bool] = field(default=_default_transient)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")
        if self.initial_backoff < 0 or self.max_backoff < 0:
            raise ValueError("RetryPolicy backoffs must be >= 0")
        if not self.deadline > 0:
            raise ValueError(f"RetryPolicy.deadline must be > 0 seconds, got {self.deadline}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based): exponential, with jitter in [0.5, 1)."""
        base = min(self.max_backoff, self.initial_backoff * (2 ** (attempt - 1)))
        return base * (0.5 + _JITTER.random() / 2)

    def call(self, fn: Callable[[], T], what: str = "storage call") -> T:
        """Run ``fn``, retrying transient errors; :class:`RetriesExhausted` names ``what`` past the limits."""
        started = self.clock()
        attempt = 0
        while True:
            try:
                return fn()
            except BaseException as exc:
                if not self.is_transient(exc):
                    raise
                attempt += 1
                wait = self.delay(attempt)
                elapsed = self.clock() - started
                if attempt >= self.max_attempts or elapsed + wait >= self.deadline:
                    raise RetriesExhausted(
                        f"{what}: gave up after {attempt} attempts in {elapsed:.1f} s: {type(exc).__name__}: {exc}"
                    ) from exc
                self.sleep(wait)
