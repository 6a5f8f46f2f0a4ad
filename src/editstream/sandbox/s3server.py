"""A local S3-protocol server (``python -m moto.server``, the ``moto[server]`` extra) on a free loopback port:
real HTTP S3 for the demo, benchmarks and tests, no patched client."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return resp.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except OSError:
        return False


@dataclass(kw_only=True, eq=False)
class LocalS3Server:
    """``with LocalS3Server() as s3: s3.endpoint`` -- a moto_server for the block's duration (``storage_options``:
    ready fsspec options); start-up retries on another port if the chosen one was taken meanwhile."""

    key: str = "testing-key"
    secret: str = "testing-secret"
    log: Path | None = None
    start_timeout: float = 60.0
    attempts: int = 3
    endpoint: str = field(default="", init=False)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log_file: IO[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def pid(self) -> int | None:
        """Process id of the running server (None when stopped)."""
        return None if self._proc is None else self._proc.pid

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"endpoint_url": self.endpoint, "key": self.key, "secret": self.secret}

    def start(self) -> str:
        """Start the server and wait until it answers; returns its endpoint URL."""
        problem = "it did not answer"
        for _ in range(self.attempts):
            port = free_port()
            self.endpoint = f"http://127.0.0.1:{port}"
            out: Any = subprocess.DEVNULL
            if self.log is not None:
                self._log_file = open(self.log, "ab")  # noqa: SIM115 - kept open while the server runs
                out = self._log_file
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline and self._proc.poll() is None:
                if _answers(f"{self.endpoint}/moto-api/"):
                    return self.endpoint
                time.sleep(0.1)
            problem = f"exit code {self._proc.poll()}" if self._proc.poll() is not None else "it did not answer"
            self.stop()
        where = f"; log: {self.log}" if self.log is not None else ""
        raise RuntimeError(f"could not start moto_server ({problem}){where}")

    def upload(self, local_dir: str | Path, url: str) -> str:
        """Copy a local directory to ``s3://bucket/prefix`` (the bucket is created if missing)."""
        import fsspec

        fs = fsspec.filesystem("s3", skip_instance_cache=True, **self.storage_options)
        bucket = url.removeprefix("s3://").split("/", 1)[0]
        if not fs.exists(bucket):
            fs.mkdir(bucket)
        fs.put(str(local_dir).rstrip("/") + "/", url.removeprefix("s3://").rstrip("/") + "/", recursive=True)
        return url

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> LocalS3Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
