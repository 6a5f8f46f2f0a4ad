"""The fault-injecting proxy against a real moto_server: clean pass-through is byte-exact (whole,
ranged, streamed, uploads), and each fault kind really reaches requests, urllib, boto3 and s3fs."""

from __future__ import annotations

import os
import socket
import urllib.error
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import boto3
import pytest
import requests
import s3fs
from aiohttp import ClientPayloadError
from botocore.config import Config
from botocore.exceptions import ClientError
from fsspec.exceptions import FSTimeoutError

from editstream.sandbox.s3server import LocalS3Server
from faultproxy import FAULT_KINDS, FaultPlan, FaultProxy

KEY = "testing"
SECRET = "testing"
REGION = "us-east-1"
BIG = 4 * 1024 * 1024 + 123  # a few MB, not a multiple of any buffer size


@pytest.fixture(scope="module")
def fp_moto_endpoint() -> Iterator[str]:
    """A moto_server of this module's own on a free loopback port (separate from shared fixtures)."""
    with LocalS3Server() as server:
        yield server.endpoint


def _client(endpoint: str):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        region_name=REGION,
        config=Config(retries={"max_attempts": 0}, read_timeout=10, connect_timeout=5),
    )


def _s3fs(endpoint: str, *, retries: int = 1, read_timeout: float = 10) -> s3fs.S3FileSystem:
    fs = s3fs.S3FileSystem(
        key=KEY,
        secret=SECRET,
        endpoint_url=endpoint,
        client_kwargs={"region_name": REGION},
        config_kwargs={"retries": {"max_attempts": 0}, "read_timeout": read_timeout, "connect_timeout": 5},
        skip_instance_cache=True,
        use_listings_cache=False,
    )
    fs.retries = retries  # s3fs's own retry loop, on top of botocore's
    return fs


@pytest.fixture
def objects(fp_moto_endpoint: str) -> dict:
    """A fresh bucket holding a small, a medium and a big object, written straight to moto."""
    bucket = f"fp-{uuid.uuid4().hex[:12]}"
    direct = _client(fp_moto_endpoint)
    direct.create_bucket(Bucket=bucket)
    data = {
        "small.bin": os.urandom(100),
        "medium.bin": os.urandom(64 * 1024 + 7),
        "big.bin": os.urandom(BIG),
    }
    for key, body in data.items():
        direct.put_object(Bucket=bucket, Key=key, Body=body)
    return {"bucket": bucket, "data": data, "direct": direct}


def _presigned(proxy: FaultProxy, bucket: str, key: str) -> str:
    return _client(proxy.url).generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key})


def _raw_get(url: str) -> tuple[bytes, dict[str, str], bytes, BaseException | None]:
    """GET over a bare socket; return status line, headers, every body byte received, and the
    socket error that ended the read (None on an orderly close)."""
    parts = urllib.request.urlparse(url)
    target = parts.path + ("?" + parts.query if parts.query else "")
    received = bytearray()
    error: BaseException | None = None
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode())
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError as exc:
                error = exc
                break
            if not chunk:
                break
            received += chunk
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    status, *lines = head.split(b"\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body, error


# --------------------------------------------------------------------------- plan


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"every": -1}, r"FaultPlan.every must be None or an int >= 0, got -1"),
        ({"kinds": ()}, r"FaultPlan.kinds must name at least one fault kind"),
        ({"kinds": ("nope",)}, r"FaultPlan.kinds has unknown kinds \['nope'\]"),
        ({"only_methods": ()}, r"FaultPlan.only_methods must name at least one HTTP method"),
        ({"min_body": -1}, r"FaultPlan.min_body must be >= 0, got -1"),
        ({"max_faults": -1}, r"FaultPlan.max_faults must be None or >= 0, got -1"),
        ({"stall_seconds": 0}, r"FaultPlan.stall_seconds must be > 0, got 0"),
        ({"partial_fraction": 1.0}, r"FaultPlan.partial_fraction must be in \(0, 1\), got 1.0"),
        ({"partial_fraction": 0.0}, r"FaultPlan.partial_fraction must be in \(0, 1\), got 0.0"),
    ],
)
def test_plan_validation_names_the_field(bad: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FaultPlan(**bad)


def test_plan_is_keyword_only_and_partial_length() -> None:
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        FaultPlan(5)  # keyword-only
    with pytest.raises(ValueError, match="upstream"):
        FaultProxy("https://example.com:443/base")
    assert not FaultPlan().active and not FaultPlan(every=0).active and not FaultPlan(every=3, max_faults=0).active
    assert FaultPlan(every=3).active
    assert FaultPlan(only_methods=("get", "head")).only_methods == ("GET", "HEAD")
    plan = FaultPlan(every=1)
    assert plan.partial_length(2) == 1
    assert plan.partial_length(1000) == 500
    assert FaultPlan(every=1, partial_fraction=0.001).partial_length(10) == 1  # at least one byte
    assert FaultPlan(every=1, partial_fraction=0.999).partial_length(10) == 9


# --------------------------------------------------------------------------- clean pass-through


@pytest.mark.parametrize("every", [None, 0])
def test_passthrough_is_byte_exact(objects: dict, every: int | None) -> None:
    bucket, data = objects["bucket"], objects["data"]
    big = data["big.bin"]
    with FaultProxy(objects["direct"].meta.endpoint_url, faults=FaultPlan(every=every)) as proxy:
        assert proxy.url.startswith("http://127.0.0.1:")
        url = _presigned(proxy, bucket, "big.bin")

        # a large object streamed in chunks
        with requests.get(url, stream=True, timeout=10) as resp:
            assert resp.status_code == 200
            assert resp.headers["Connection"] == "close"
            assert int(resp.headers["Content-Length"]) == BIG
            streamed = b"".join(resp.iter_content(100_000))
        assert streamed == big

        # ranged reads: head, middle across buffer boundaries, tail, suffix, open-ended
        for rng, want in (
            ("bytes=0-0", big[:1]),
            ("bytes=0-1023", big[:1024]),
            ("bytes=65530-200000", big[65530:200001]),
            (f"bytes={BIG - 10}-{BIG - 1}", big[-10:]),
            ("bytes=-777", big[-777:]),
            (f"bytes={BIG - 5000}-", big[-5000:]),
        ):
            resp = requests.get(url, headers={"Range": rng}, timeout=10)
            assert resp.status_code == 206, rng
            assert resp.content == want, rng

        # urllib, HEAD and listing through boto3, all via the proxy
        with urllib.request.urlopen(_presigned(proxy, bucket, "medium.bin"), timeout=10) as resp:
            assert resp.read() == data["medium.bin"]
        via_proxy = _client(proxy.url)
        assert via_proxy.head_object(Bucket=bucket, Key="big.bin")["ContentLength"] == BIG
        listed = via_proxy.list_objects_v2(Bucket=bucket)["Contents"]
        assert sorted(o["Key"] for o in listed) == sorted(data)
        got = via_proxy.get_object(Bucket=bucket, Key="big.bin", Range="bytes=1000-2999")["Body"].read()
        assert got == big[1000:3000]

        # s3fs: whole objects, byte ranges and a buffered file read in small blocks
        fs = _s3fs(proxy.url)
        assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(bucket)) == sorted(data)
        for key, body in data.items():
            assert fs.cat_file(f"{bucket}/{key}") == body
        assert fs.cat_file(f"{bucket}/big.bin", start=12345, end=2_000_000) == big[12345:2_000_000]
        with fs.open(f"{bucket}/big.bin", "rb", block_size=256 * 1024) as f:
            f.seek(BIG // 3)
            assert f.read(300_000) == big[BIG // 3 : BIG // 3 + 300_000]
            f.seek(0)
            assert f.read() == big

        assert proxy.total_faults == 0
        assert proxy.faults_injected == dict.fromkeys(FAULT_KINDS, 0)
        assert proxy.events == []
        assert proxy.requests_seen >= 15


def test_uploads_are_forwarded(objects: dict) -> None:
    bucket, direct = objects["bucket"], objects["direct"]
    single = os.urandom(3 * 1024 * 1024)
    multi = os.urandom(11 * 1024 * 1024)  # above s3fs's 5 MiB part size: multipart POST/PUT/POST
    with FaultProxy(direct.meta.endpoint_url) as proxy:
        _client(proxy.url).put_object(Bucket=bucket, Key="up/single.bin", Body=single)
        fs = _s3fs(proxy.url)
        fs.pipe_file(f"{bucket}/up/multi.bin", multi, chunksize=5 * 1024 * 1024)
        seen = proxy.requests_seen
    assert direct.get_object(Bucket=bucket, Key="up/single.bin")["Body"].read() == single
    assert direct.get_object(Bucket=bucket, Key="up/multi.bin")["Body"].read() == multi
    assert seen >= 4  # single put + create/upload parts/complete


# --------------------------------------------------------------------------- each fault kind


def test_reset_mid_body_sends_true_length_then_part_then_rst(objects: dict) -> None:
    bucket, big = objects["bucket"], objects["data"]["big.bin"]
    plan = FaultPlan(every=1, kinds=("reset_mid_body",))
    with FaultProxy(objects["direct"].meta.endpoint_url, faults=plan) as proxy:
        status, headers, body, error = _raw_get(_presigned(proxy, bucket, "big.bin"))
        assert status.startswith(b"HTTP/1.1 200")
        assert int(headers["content-length"]) == BIG
        assert isinstance(error, ConnectionResetError)
        assert 0 < len(body) < BIG
        assert body == big[: len(body)]
        [event] = proxy.events
        assert event.kind == "reset_mid_body" and event.method == "GET"
        assert event.path.startswith(f"/{bucket}/big.bin")
        assert event.body_bytes_sent == plan.partial_length(BIG) == len(body)

        # the same fault as urllib and requests see it
        with (
            pytest.raises(ConnectionResetError, match="Connection reset by peer"),
            urllib.request.urlopen(_presigned(proxy, bucket, "big.bin"), timeout=10) as resp,
        ):
            resp.read()
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            requests.get(_presigned(proxy, bucket, "medium.bin"), timeout=10)
        assert proxy.faults_injected["reset_mid_body"] == 3


def test_http_errors_are_s3_xml_and_not_forwarded(objects: dict) -> None:
    bucket, direct = objects["bucket"], objects["direct"]
    plan = FaultPlan(every=1, kinds=("http_503", "http_500"), only_methods=("GET", "PUT"))
    with FaultProxy(direct.meta.endpoint_url, faults=plan) as proxy:
        url = _presigned(proxy, bucket, "small.bin")
        codes = []
        for expected_status in (503, 500):
            resp = requests.get(url, timeout=10)
            assert resp.status_code == expected_status
            assert resp.headers["Content-Type"] == "application/xml"
            root = ET.fromstring(resp.content)
            assert root.tag == "Error"
            assert root.findtext("Resource") == f"/{bucket}/small.bin"
            codes.append(root.findtext("Code"))
        assert codes == ["SlowDown", "InternalError"]

        via_proxy = _client(proxy.url)
        with pytest.raises(ClientError) as info:
            via_proxy.get_object(Bucket=bucket, Key="small.bin")
        assert info.value.response["Error"]["Code"] == "SlowDown"
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        # a refused PUT never reaches the server
        with pytest.raises(ClientError) as info:
            via_proxy.put_object(Bucket=bucket, Key="never.bin", Body=b"x" * 2000)
        assert info.value.response["Error"]["Code"] == "InternalError"
        assert proxy.faults_injected == {"reset_mid_body": 0, "http_503": 2, "http_500": 2, "stall": 0}
    listed = direct.list_objects_v2(Bucket=bucket)["Contents"]
    assert "never.bin" not in {o["Key"] for o in listed}


def test_stall_sends_part_then_goes_quiet(objects: dict) -> None:
    bucket, medium = objects["bucket"], objects["data"]["medium.bin"]
    plan = FaultPlan(every=1, kinds=("stall",), stall_seconds=60)  # stop() cuts the stall short
    with FaultProxy(objects["direct"].meta.endpoint_url, faults=plan) as proxy:
        with requests.get(_presigned(proxy, bucket, "medium.bin"), stream=True, timeout=(5, 1.0)) as resp:
            assert resp.status_code == 200
            assert int(resp.headers["Content-Length"]) == len(medium)
            got = bytearray()
            with pytest.raises(requests.exceptions.ConnectionError, match="timed out"):
                for chunk in resp.iter_content(1024):
                    got += chunk
        # the client hands out whole 1024-byte chunks, so the sent bytes' last partial chunk is lost
        assert 0 < len(got) <= plan.partial_length(len(medium))
        assert bytes(got) == medium[: len(got)]
        assert proxy.events[0].kind == "stall"
        assert proxy.events[0].body_bytes_sent == plan.partial_length(len(medium))


# --------------------------------------------------------------------------- schedule


def test_schedule_counts_only_eligible_requests_round_robin(objects: dict) -> None:
    bucket = objects["bucket"]
    plan = FaultPlan(every=3, kinds=("http_503", "http_500"), max_faults=3)
    with FaultProxy(objects["direct"].meta.endpoint_url, faults=plan) as proxy:
        via_proxy = _client(proxy.url)
        url = _presigned(proxy, bucket, "small.bin")
        statuses = []
        for _i in range(12):
            # listings (GET on the bucket) and HEADs in between do not count
            via_proxy.list_objects_v2(Bucket=bucket)
            via_proxy.head_object(Bucket=bucket, Key="small.bin")
            statuses.append(requests.get(url, timeout=10).status_code)
        assert statuses == [200, 200, 503, 200, 200, 500, 200, 200, 503, 200, 200, 200]
        assert proxy.total_faults == 3
        assert proxy.requests_seen == 36
        assert {(e.method, e.path) for e in proxy.events} == {("GET", url.split(proxy.url, 1)[1])}
        assert [e.request_number for e in proxy.events] == [9, 18, 27]

        # a new plan restarts the schedule and the max_faults budget; counters keep adding up
        proxy.set_plan(FaultPlan(every=2, kinds=("http_500",), max_faults=2))
        assert [requests.get(url, timeout=10).status_code for _ in range(6)] == [200, 500, 200, 500, 200, 200]
        assert proxy.faults_injected == {"reset_mid_body": 0, "http_503": 2, "http_500": 3, "stall": 0}
        assert [e.kind for e in proxy.events] == ["http_503", "http_500", "http_503", "http_500", "http_500"]


def test_body_fault_waits_for_a_body_big_enough(objects: dict) -> None:
    bucket, data = objects["bucket"], objects["data"]
    plan = FaultPlan(every=1, kinds=("reset_mid_body",), min_body=1024)
    with FaultProxy(objects["direct"].meta.endpoint_url, faults=plan) as proxy:
        # a small object and a tiny range answer stay clean while the fault stays due
        assert requests.get(_presigned(proxy, bucket, "small.bin"), timeout=10).content == data["small.bin"]
        url = _presigned(proxy, bucket, "medium.bin")
        assert requests.get(url, headers={"Range": "bytes=0-99"}, timeout=10).content == data["medium.bin"][:100]
        assert proxy.total_faults == 0
        status, _, body, error = _raw_get(url)
        assert isinstance(error, ConnectionResetError)
        assert body == data["medium.bin"][: plan.partial_length(len(data["medium.bin"]))]
        assert [e.path.split("?")[0] for e in proxy.events] == [f"/{bucket}/medium.bin"]


# --------------------------------------------------------------------------- s3fs / aiobotocore


@pytest.mark.parametrize(
    ("kind", "error", "match"),
    [
        ("reset_mid_body", ClientPayloadError, "Response payload is not completed"),
        ("http_503", OSError, "Please reduce your request rate"),
        ("http_500", OSError, "We encountered an internal error"),
        ("stall", FSTimeoutError, None),  # raised without a message
    ],
)
def test_s3fs_sees_each_fault_kind(objects: dict, kind: str, error: type, match: str | None) -> None:
    bucket, medium = objects["bucket"], objects["data"]["medium.bin"]
    plan = FaultPlan(every=1, kinds=(kind,), stall_seconds=60)
    with FaultProxy(objects["direct"].meta.endpoint_url, faults=plan) as proxy:
        fs = _s3fs(proxy.url, retries=1, read_timeout=1.0)
        with pytest.raises(error, match=match) as info:
            fs.cat_file(f"{bucket}/medium.bin")
        assert type(info.value) is error  # not a subclass (FSTimeoutError is an OSError too)
        assert proxy.faults_injected[kind] == 1
        assert proxy.total_faults == 1
        # with the plan cleared, the same filesystem reads the object whole again
        proxy.set_plan(FaultPlan())
        assert fs.cat_file(f"{bucket}/medium.bin") == medium


def test_s3fs_retries_through_faults_without_losing_bytes(objects: dict) -> None:
    bucket, big = objects["bucket"], objects["data"]["big.bin"]
    plan = FaultPlan(every=2, kinds=("reset_mid_body", "http_503"))
    with FaultProxy(objects["direct"].meta.endpoint_url, faults=plan) as proxy:
        fs = _s3fs(proxy.url, retries=5)
        with fs.open(f"{bucket}/big.bin", "rb", block_size=512 * 1024, cache_type="none") as f:
            pieces = []
            while piece := f.read(300_000):
                pieces.append(piece)
        assert b"".join(pieces) == big
        counts = proxy.faults_injected
        assert counts["reset_mid_body"] >= 2 and counts["http_503"] >= 2
