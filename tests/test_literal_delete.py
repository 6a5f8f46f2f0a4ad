"""Deletes are literal on every protocol: a destination named with glob characters (``q?x``)
loses only its own files, never those of a sibling the name would match as a pattern (``qXx``).

fsspec's ``rm`` expands ``*``, ``?`` and ``[`` as a glob, locally and on S3 alike; these tests
run against real files and the suite's real S3 server (moto over HTTP).
"""

from __future__ import annotations

from typing import Any

import pytest

from editstream.conversion.records import PROGRESS_DIR, remove_progress
from editstream.io import storage


def _roots(kind: str, tmp_path: Any, request: pytest.FixtureRequest) -> tuple[str, dict[str, Any] | None]:
    """A root URL to write under and its storage options: a local directory or a fresh S3 bucket."""
    if kind == "local":
        return str(tmp_path), None
    bucket = request.getfixturevalue("s3_bucket")
    return bucket.url, bucket.storage_options


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Any) -> tuple[str, dict[str, Any] | None]:
    return _roots(request.param, tmp_path, request)


def test_remove_deletes_only_the_named_file(root: tuple[str, dict[str, Any] | None]) -> None:
    base, so = root
    named, sibling = storage.join(base, "q?x/a"), storage.join(base, "qXx/a")
    storage.write_bytes(named, b"mine", so)
    storage.write_bytes(sibling, b"not mine", so)

    storage.remove(named, so)

    assert not storage.exists(named, so)
    assert storage.read_bytes(sibling, so) == b"not mine"


def test_remove_of_a_missing_pattern_name_touches_nothing(root: tuple[str, dict[str, Any] | None]) -> None:
    base, so = root
    sibling = storage.join(base, "qXx/a")
    storage.write_bytes(sibling, b"not mine", so)

    storage.remove(storage.join(base, "q?x/a"), so)  # matches qXx/a as a glob; as a name it does not exist

    assert storage.read_bytes(sibling, so) == b"not mine"


@pytest.mark.parametrize("name", ["q?x", "q*x", "q[X]x"])
def test_remove_progress_deletes_only_its_own_records(root: tuple[str, dict[str, Any] | None], name: str) -> None:
    base, so = root
    dst, other = storage.join(base, name), storage.join(base, "qXx")
    for d in (dst, other):
        storage.write_bytes(storage.join(d, PROGRESS_DIR, "shard-000000.tar.json"), b"{}", so)
        storage.write_bytes(storage.join(d, PROGRESS_DIR, "sub", "shard-000001.tar.json"), b"{}", so)

    remove_progress(dst, so)

    assert not storage.exists(storage.join(dst, PROGRESS_DIR, "shard-000000.tar.json"), so)
    assert not storage.exists(storage.join(dst, PROGRESS_DIR, "sub", "shard-000001.tar.json"), so)
    assert storage.read_bytes(storage.join(other, PROGRESS_DIR, "shard-000000.tar.json"), so) == b"{}"
    assert storage.read_bytes(storage.join(other, PROGRESS_DIR, "sub", "shard-000001.tar.json"), so) == b"{}"


def test_remove_tree_on_memory_filesystem_is_literal() -> None:
    """A filesystem with directories that is not local (fsspec's memory one) loses only the named tree."""
    base = "memory://literal-delete"
    for d in ("q?x", "qXx"):
        storage.write_bytes(storage.join(base, d, "t", "a.json"), b"{}")

    storage.remove_tree(storage.join(base, "q?x", "t"))

    assert not storage.exists(storage.join(base, "q?x", "t", "a.json"))
    assert not storage.exists(storage.join(base, "q?x", "t"))
    assert storage.read_bytes(storage.join(base, "qXx", "t", "a.json")) == b"{}"
    storage.remove_tree(base)
    assert not storage.exists(base)
