"""Shared fixtures: a real S3-protocol server (moto_server) on a free loopback port.

``s3_endpoint`` (session) starts ``python -m moto.server`` once and yields its URL.
``s3_bucket`` (function) resets the server, creates a fresh bucket, sets fake AWS
credentials in the environment, clears s3fs's instance cache, and yields an object with
``.name``, ``.url`` (``s3://name``) and ``.storage_options``. The S3 client is never patched:
every request goes over HTTP to the server. Every test that uses them gets the ``s3`` marker,
so ``pytest -m "not s3"`` leaves them out.
"""

from __future__ import annotations

import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from editstream.sandbox.s3server import LocalS3Server

FAKE_KEY = "testing-key"
FAKE_SECRET = "testing-secret"
FAKE_REGION = "us-east-1"


# test_faultproxy runs a moto_server of its own (fp_moto_endpoint).
S3_SERVER_FIXTURES = {"s3_endpoint", "s3_bucket", "fp_moto_endpoint"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``s3`` every test that needs the session's S3 server, before ``-m`` selects."""
    for item in items:
        if S3_SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.s3)


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """URL of a moto S3 server started for this test session on 127.0.0.1."""
    with LocalS3Server(log=tmp_path_factory.mktemp("moto") / "moto_server.log") as server:
        yield server.endpoint


@dataclass
class S3Bucket:
    """A fresh bucket on the test S3 server."""

    name: str
    endpoint: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"s3://{self.name}"


def _clear_s3fs_cache() -> None:
    try:
        import s3fs
    except ImportError:  # pragma: no cover
        return
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3_bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Reset the server, create a bucket, and yield it with ready-to-use storage options."""
    req = urllib.request.Request(f"{s3_endpoint}/moto-api/reset", method="POST", data=b"")
    with urllib.request.urlopen(req, timeout=10):
        pass
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", FAKE_REGION)
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    _clear_s3fs_cache()
    name = f"test-{uuid.uuid4().hex[:12]}"
    bucket = S3Bucket(
        name=name,
        endpoint=s3_endpoint,
        storage_options={"endpoint_url": s3_endpoint, "key": FAKE_KEY, "secret": FAKE_SECRET},
    )
    import s3fs

    fs = s3fs.S3FileSystem(**bucket.storage_options)
    fs.mkdir(name)
    _clear_s3fs_cache()
    yield bucket
    _clear_s3fs_cache()
