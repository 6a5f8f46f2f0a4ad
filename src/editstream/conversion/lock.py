"""One conversion at a time per DST: ``DST/_editstream.lock``, created exclusively, names its owner and
beats; it is taken over when the owner's pid is gone, its heartbeat is stale, or with ``break_lock``."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from ..io import storage
from .lifetime import pid_alive

log = logging.getLogger(__name__)

LOCK_NAME = "_editstream.lock"
HEARTBEAT_SECONDS = 10.0
STALE_AFTER_SECONDS = 120.0


class DestinationLocked(RuntimeError):
    """Another conversion holds the destination's lock."""


class ConversionLock:
    """``with ConversionLock(dst, storage_options):`` holds DST for one conversion."""

    def __init__(
        self,
        dst: str,
        storage_options: dict[str, Any] | None = None,
        *,
        break_lock: bool = False,
        heartbeat: float = HEARTBEAT_SECONDS,
        stale_after: float = STALE_AFTER_SECONDS,
    ) -> None:
        self.dst = dst
        self.url = storage.join(dst, LOCK_NAME)
        self.storage_options = storage_options
        self.break_lock = break_lock
        self.heartbeat = heartbeat
        self.stale_after = stale_after
        self.token = uuid.uuid4().hex
        self.started = time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _body(self) -> bytes:
        owner = {"host": socket.gethostname(), "pid": os.getpid(), "token": self.token, "started": self.started}
        return json.dumps({**owner, "heartbeat": time.time()}).encode()

    def _create(self) -> bool:
        """Create the lock if nobody holds it; False when it exists."""
        if storage.is_local(self.url):
            _, path = storage.url_to_fs(self.url, self.storage_options)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as f:
                f.write(self._body())
            return True
        fs, path = storage.url_to_fs(self.url, self.storage_options)
        try:
            fs.pipe_file(path, self._body(), IfNoneMatch="*")
        except FileExistsError:
            return False
        return True

    def _holder(self) -> dict[str, Any] | None:
        try:
            holder = json.loads(storage.read_bytes(self.url, self.storage_options))
        except FileNotFoundError:
            return None
        except ValueError:
            return {}
        return holder if isinstance(holder, dict) else {}

    def _gone(self, holder: dict[str, Any]) -> str | None:
        """Why the holder is gone (so its lock may be taken over), or ``None`` when it may be alive."""
        if self.break_lock:
            return "break_lock was given"
        age = time.time() - float(holder.get("heartbeat", 0) or 0)
        if age > self.stale_after:
            return f"its last heartbeat is {age:.0f} s old"
        pid = holder.get("pid")
        if holder.get("host") == socket.gethostname() and isinstance(pid, int) and not pid_alive(pid):
            return f"its process {pid} no longer exists"
        return None

    def acquire(self) -> None:
        """Take the lock, taking over one whose owner is gone; :class:`DestinationLocked` otherwise."""
        for _ in range(3):
            if self._create():
                self._thread = threading.Thread(target=self._beat, name="editstream-lock-heartbeat", daemon=True)
                self._thread.start()
                return
            holder = self._holder()
            if holder is None:
                continue  # released meanwhile: try again
            reason = self._gone(holder)
            if reason is None:
                raise DestinationLocked(self._locked_message(holder))
            log.warning("taking over the lock of %s from %s: %s", self.dst, _describe(holder), reason)
            storage.remove(self.url, self.storage_options)
        raise DestinationLocked(f"{self.dst}: could not take the lock {self.url}; another conversion keeps taking it")

    def _locked_message(self, holder: dict[str, Any]) -> str:
        age = time.time() - float(holder.get("heartbeat", 0) or 0)
        return (
            f"{self.dst} is being converted by another run ({_describe(holder)}, last heartbeat {age:.0f} s ago); "
            f"wait for it to finish. If no conversion is running (a crash on another machine), re-run after "
            f"{self.stale_after:.0f} s without heartbeat, or pass break_lock=True (--break-lock), or remove "
            f"{self.url}"
        )

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            holder = self._holder()
            if holder is None or holder.get("token") != self.token:
                log.warning("the lock of %s was taken by %s", self.dst, _describe(holder or {}))
                return
            with contextlib.suppress(OSError):
                storage.write_bytes(self.url, self._body(), self.storage_options, fsync=False)

    def release(self) -> None:
        """Stop the heartbeat and remove the lock if it is still ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        holder = self._holder()
        if holder is not None and holder.get("token") == self.token:
            storage.remove(self.url, self.storage_options)

    def __enter__(self) -> ConversionLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _describe(holder: dict[str, Any]) -> str:
    started = holder.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    return f"host {holder.get('host', '?')}, pid {holder.get('pid', '?')}, started {when}"
