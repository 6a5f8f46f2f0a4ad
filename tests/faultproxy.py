"""A small HTTP reverse proxy for tests that injects storage faults between an S3 client and a local
S3-protocol server (moto_server), so readers can be shown to lose and repeat nothing under faults.

Usage::

    with FaultProxy("http://127.0.0.1:5000", faults=FaultPlan(every=3)) as proxy:
        fs = s3fs.S3FileSystem(endpoint_url=proxy.url, key="k", secret="s")
        data = fs.cat("bucket/shard-000000.tar")      # some GETs fail, s3fs retries them
        assert proxy.total_faults > 0

Only path-style addressing (``http://host:port/bucket/key``) is understood, which is what S3
clients use for an IP endpoint. Every response carries ``Connection: close`` so each request
travels on a fresh connection and a fault never poisons a pooled one.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import socket
import struct
import sys
import termios
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["BODY_FAULT_KINDS", "ERROR_FAULT_KINDS", "FAULT_KINDS", "FaultEvent", "FaultPlan", "FaultProxy"]

#: Faults that cut a successful response short after the headers and part of the body.
BODY_FAULT_KINDS: tuple[str, ...] = ("reset_mid_body", "stall")
#: Faults answered by the proxy itself, without forwarding: (status, S3 error code, message).
ERROR_FAULT_KINDS: dict[str, tuple[int, str, str]] = {
    "http_503": (503, "SlowDown", "Please reduce your request rate."),
    "http_500": (500, "InternalError", "We encountered an internal error. Please try again."),
}
FAULT_KINDS: tuple[str, ...] = ("reset_mid_body", "http_503", "http_500", "stall")

# Headers that describe one hop, not the message; never copied across the proxy.
_HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
    }
)
# moto_server answers with two Server headers (werkzeug's and its own); strict HTTP parsers
# (aiohttp's pure-Python one, used under `python -X dev`) reject that, so only the first is relayed.
_SINGLETON_HEADERS = frozenset({"server", "date", "content-type", "content-length", "etag"})
_COPY_CHUNK = 64 * 1024
_DRAIN_LIMIT_SECONDS = 2.0
_TIOCOUTQ: int | None = getattr(termios, "TIOCOUTQ", None)


@dataclass(frozen=True, kw_only=True)
class FaultPlan:
    """A deterministic fault schedule: every ``every``-th eligible request gets the next kind of
    ``kinds`` in round robin. ``every`` of None or 0 means no faults (a plain pass-through proxy).

    A request is eligible when its method is in ``only_methods`` and (with ``objects_only``) its
    path names an object (``/bucket/key``), so listings and bucket calls stay clean. Error kinds are
    answered before forwarding. A body kind needs a 2xx upstream answer with a Content-Length of at
    least ``min_body`` bytes; when the due request does not qualify, the fault stays due and the
    next eligible request that qualifies carries it. ``max_faults`` caps the total injected.
    """

    every: int | None = None
    kinds: tuple[str, ...] = FAULT_KINDS
    only_methods: tuple[str, ...] = ("GET",)
    objects_only: bool = True
    min_body: int = 1024
    max_faults: int | None = None
    stall_seconds: float = 5.0
    partial_fraction: float = 0.5
    silent: bool = False
    """With ``silent``, a ``stall`` fault sends nothing at all (not even the status line) for
    ``stall_seconds``: an endpoint that accepts the request and never answers."""

    def __post_init__(self) -> None:
        if self.every is not None and (not isinstance(self.every, int) or self.every < 0):
            raise ValueError(f"FaultPlan.every must be None or an int >= 0, got {self.every!r}")
        kinds = tuple(self.kinds)
        if not kinds:
            raise ValueError("FaultPlan.kinds must name at least one fault kind")
        unknown = [k for k in kinds if k not in FAULT_KINDS]
        if unknown:
            raise ValueError(f"FaultPlan.kinds has unknown kinds {unknown}; known: {list(FAULT_KINDS)}")
        object.__setattr__(self, "kinds", kinds)
        methods = tuple(m.upper() for m in self.only_methods)
        if not methods:
            raise ValueError("FaultPlan.only_methods must name at least one HTTP method")
        object.__setattr__(self, "only_methods", methods)
        if self.min_body < 0:
            raise ValueError(f"FaultPlan.min_body must be >= 0, got {self.min_body}")
        if self.max_faults is not None and self.max_faults < 0:
            raise ValueError(f"FaultPlan.max_faults must be None or >= 0, got {self.max_faults}")
        if not self.stall_seconds > 0:
            raise ValueError(f"FaultPlan.stall_seconds must be > 0, got {self.stall_seconds}")
        if not 0.0 < self.partial_fraction < 1.0:
            raise ValueError(f"FaultPlan.partial_fraction must be in (0, 1), got {self.partial_fraction}")

    @property
    def active(self) -> bool:
        """True when this plan injects anything at all."""
        return bool(self.every) and self.max_faults != 0

    def partial_length(self, body_length: int) -> int:
        """Bytes of a ``body_length``-byte body sent before a body fault: at least one, never all."""
        return min(max(1, int(body_length * self.partial_fraction)), body_length - 1)


@dataclass(frozen=True)
class FaultEvent:
    """One injected fault: its kind, the request it hit, and how many body bytes got through."""

    kind: str
    method: str
    path: str
    request_number: int
    body_bytes_sent: int


class _Schedule:
    """The mutable state of one plan: eligible-request count, round-robin position, due fault."""

    def __init__(self, plan: FaultPlan) -> None:
        self.plan = plan
        self.eligible = 0
        self.cycle = 0
        self.due: str | None = None
        self.injected = 0

    def budget_left(self) -> bool:
        return self.plan.max_faults is None or self.injected < self.plan.max_faults


class FaultProxy:
    """A threaded reverse proxy on 127.0.0.1 that forwards every request to ``upstream`` and
    injects the faults of a :class:`FaultPlan`; use as a context manager or call ``stop()``."""

    def __init__(
        self, upstream: str, *, faults: FaultPlan | None = None, upstream_timeout: float = 30.0, latency: float = 0.0
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(f"FaultProxy upstream must look like http://host:port, got {upstream!r}")
        if not upstream_timeout > 0:
            raise ValueError(f"FaultProxy upstream_timeout must be > 0, got {upstream_timeout}")
        if not latency >= 0:
            raise ValueError(f"FaultProxy latency must be >= 0 seconds, got {latency}")
        self.latency = latency
        """Seconds added before every request is forwarded (an object store's first-byte latency)."""
        self.upstream = upstream
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        self.upstream_netloc = parts.netloc
        self.upstream_timeout = upstream_timeout
        self._lock = threading.Lock()
        self._schedule = _Schedule(faults or FaultPlan())
        self._requests = 0
        self._faults = dict.fromkeys(FAULT_KINDS, 0)
        self._events: list[FaultEvent] = []
        self._stopping = threading.Event()
        self._server = _ProxyServer(("127.0.0.1", 0), _ProxyHandler, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="faultproxy", daemon=True
        )
        self._thread.start()
        self._stopped = False

    # ----------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        """The proxy's endpoint, ``http://127.0.0.1:PORT``; give it to the client as endpoint_url."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        """Stop serving, wake any stalled response and release the port; safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- plan and counters
    @property
    def plan(self) -> FaultPlan:
        """The plan in force."""
        with self._lock:
            return self._schedule.plan

    def set_plan(self, faults: FaultPlan) -> None:
        """Replace the plan and restart its schedule and ``max_faults`` budget (the counters of seen
        requests and injected faults keep accumulating)."""
        with self._lock:
            self._schedule = _Schedule(faults)

    @property
    def requests_seen(self) -> int:
        """How many requests reached the proxy so far."""
        with self._lock:
            return self._requests

    @property
    def faults_injected(self) -> dict[str, int]:
        """Faults injected so far per kind (every known kind present, zero if never injected)."""
        with self._lock:
            return dict(self._faults)

    @property
    def total_faults(self) -> int:
        """Faults injected so far, all kinds together."""
        with self._lock:
            return sum(self._faults.values())

    @property
    def events(self) -> list[FaultEvent]:
        """A copy of the injected faults, in injection order."""
        with self._lock:
            return list(self._events)

    # ----------------------------------------------------------------- decisions (handler side)
    def _on_request(self, method: str, path: str) -> tuple[int, str | None]:
        """Count a request and return its number and the fault kind due for it, if any."""
        with self._lock:
            self._requests += 1
            number = self._requests
            sched = self._schedule
            plan = sched.plan
            if not plan.active or not sched.budget_left():
                return number, None
            if method not in plan.only_methods or (plan.objects_only and not _names_object(path)):
                return number, None
            sched.eligible += 1
            if sched.due is None and plan.every and sched.eligible % plan.every == 0:
                sched.due = plan.kinds[sched.cycle % len(plan.kinds)]
                sched.cycle += 1
            return number, sched.due

    def _claim(self, kind: str) -> bool:
        """Take the due fault ``kind`` for this request; False if another request took it first."""
        with self._lock:
            sched = self._schedule
            if sched.due != kind:
                return False
            sched.due = None
            if not sched.budget_left():
                return False
            sched.injected += 1
            self._faults[kind] += 1
            return True

    def _record(self, kind: str, method: str, path: str, number: int, sent: int) -> None:
        with self._lock:
            self._events.append(FaultEvent(kind, method, path, number, sent))


def _names_object(path: str) -> bool:
    """True for a path-style object URL ``/bucket/key...`` (not a bucket or service call)."""
    bucket, _, key = path.split("?", 1)[0].lstrip("/").partition("/")
    return bool(bucket) and bool(key)


class _ProxyServer(ThreadingHTTPServer):
    """The listening socket; one daemon thread per connection, quiet about clients that go away."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type, proxy: FaultProxy) -> None:
        self.proxy = proxy
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up, or a socket we reset on purpose, is normal traffic here.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _ProxyHandler(BaseHTTPRequestHandler):
    """Relays one request upstream and its answer back, applying the fault due for it."""

    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _relay(self) -> None:
        proxy = self.server.proxy
        self.close_connection = True
        method = self.command
        body = self._read_request_body()
        number, due = proxy._on_request(method, self.path)
        if proxy.latency:
            proxy._stopping.wait(proxy.latency)

        if due in ERROR_FAULT_KINDS and proxy._claim(due):
            proxy._record(due, method, self.path, number, 0)  # before the client can see it
            self._send_s3_error(due, number)
            return
        if due == "stall" and proxy.plan.silent and proxy._claim(due):
            proxy._record(due, method, self.path, number, 0)
            proxy._stopping.wait(proxy.plan.stall_seconds)
            return

        conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=proxy.upstream_timeout)
        try:
            try:
                conn.putrequest(method, self.path, skip_host=True, skip_accept_encoding=True)
                conn.putheader("Host", proxy.upstream_netloc)
                for name, value in self.headers.items():
                    lname = name.lower()
                    if lname in _HOP_HEADERS or lname in ("host", "content-length"):
                        continue
                    conn.putheader(name, value)
                if body is not None:
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                self._send_plain(502, f"faultproxy: upstream {proxy.upstream} failed: {exc!r}")
                return
            self._answer(resp, number, due)
        finally:
            conn.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = _relay

    # ----------------------------------------------------------------- request side
    def _read_request_body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            pieces: list[bytes] = []
            while True:
                size_line = self.rfile.readline(1024)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(pieces)
                pieces.append(self.rfile.read(size))
                self.rfile.readline(1024)
        length = self.headers.get("Content-Length")
        if length is None:
            return None
        return self.rfile.read(int(length))

    # ----------------------------------------------------------------- response side
    def _answer(self, resp: http.client.HTTPResponse, number: int, due: str | None) -> None:
        proxy = self.server.proxy
        plan = proxy.plan
        length_header = resp.getheader("Content-Length")
        length = int(length_header) if length_header is not None and not resp.chunked else None
        has_body = self.command != "HEAD" and resp.status not in (204, 304)
        fault = None
        if (
            due in BODY_FAULT_KINDS
            and has_body
            and 200 <= resp.status < 300
            and length is not None
            and length >= max(plan.min_body, 2)
            and proxy._claim(due)
        ):
            fault = due

        self.send_response_only(resp.status, resp.reason)
        sent_singletons: set[str] = set()
        for name, value in resp.getheaders():
            lname = name.lower()
            if lname in _HOP_HEADERS or lname in sent_singletons:
                continue
            if lname in _SINGLETON_HEADERS:
                sent_singletons.add(lname)
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        if not has_body:
            return
        if fault is None:
            self._copy(resp, None)
            return

        assert length is not None
        sent = self._copy(resp, plan.partial_length(length))
        proxy._record(fault, self.command, self.path, number, sent)
        if fault == "reset_mid_body":
            self._reset_connection()
        else:
            proxy._stopping.wait(plan.stall_seconds)

    def _copy(self, resp: http.client.HTTPResponse, limit: int | None) -> int:
        """Stream up to ``limit`` body bytes (all when None) to the client; return bytes written."""
        sent = 0
        while limit is None or sent < limit:
            want = _COPY_CHUNK if limit is None else min(_COPY_CHUNK, limit - sent)
            chunk = resp.read(want)
            if not chunk:
                break
            try:
                self.wfile.write(chunk)
            except OSError:
                break
            sent += len(chunk)
        return sent

    def _reset_connection(self) -> None:
        """Abort the client connection with a TCP RST instead of an orderly close, after the
        partial body has left the send queue (an RST discards unsent data, so the client would
        otherwise see fewer bytes than counted)."""
        _wait_send_queue_empty(self.connection, self.server.proxy._stopping, _DRAIN_LIMIT_SECONDS)
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # The reader made by makefile() holds a reference that would delay the real close.
        with contextlib.suppress(OSError):
            self.rfile.close()
        self.connection.close()

    def _send_s3_error(self, kind: str, number: int) -> None:
        status, code, message = ERROR_FAULT_KINDS[kind]
        resource = self.path.split("?", 1)[0]
        payload = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            f"<Resource>{_xml_escape(resource)}</Resource>"
            f"<RequestId>faultproxy-{number}</RequestId></Error>"
        ).encode()
        self._send_bytes(status, "application/xml", payload)

    def _send_plain(self, status: int, text: str) -> None:
        self._send_bytes(status, "text/plain; charset=utf-8", text.encode())

    def _send_bytes(self, status: int, content_type: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            with contextlib.suppress(OSError):
                self.wfile.write(payload)


def _wait_send_queue_empty(sock: socket.socket, stopping: threading.Event, limit: float) -> None:
    """Wait (at most ``limit`` seconds) until the peer acknowledged everything sent on ``sock``;
    returns at once where the kernel cannot report its send queue."""
    if _TIOCOUTQ is None:
        return
    waited = 0.0
    while waited < limit:
        try:
            unsent = struct.unpack("i", fcntl.ioctl(sock.fileno(), _TIOCOUTQ, b"\0\0\0\0"))[0]
        except OSError:
            return
        if unsent == 0 or stopping.wait(0.002):
            return
        waited += 0.002


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
