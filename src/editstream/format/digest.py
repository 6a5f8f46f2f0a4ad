"""Integrity digests of shards and idx files: ``xxh3_128`` (default, memory speed) or ``sha256``
(cryptographic; what format-version-1 manifests hold)."""

from __future__ import annotations

import hashlib
from typing import Protocol

import xxhash

ALGORITHMS = ("xxh3_128", "sha256")
DEFAULT_DIGEST = "xxh3_128"
HEX_LENGTH = {"xxh3_128": 32, "sha256": 64}


class Hasher(Protocol):
    """What the writer, the verifier and the resume check need from a hash object."""

    def update(self, data: bytes, /) -> None: ...

    def hexdigest(self) -> str: ...


def check_algorithm(algorithm: str) -> str:
    """``algorithm`` when editstream knows it, else a ``ValueError`` naming the known ones."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown digest {algorithm!r}; choose one of {list(ALGORITHMS)}")
    return algorithm


def new_hasher(algorithm: str) -> Hasher:
    """A fresh hash object of ``algorithm``."""
    if check_algorithm(algorithm) == "sha256":
        return hashlib.sha256()
    return xxhash.xxh3_128()


def hexdigest(algorithm: str, data: bytes) -> str:
    """The digest of ``data`` in hex."""
    h = new_hasher(algorithm)
    h.update(data)
    return h.hexdigest()


def recorded(record: object) -> tuple[str, str] | None:
    """``(algorithm, hex)`` of the one digest a record (a dict of a shard or an idx) holds, if any."""
    if not isinstance(record, dict):
        return None
    for algorithm in ALGORITHMS:
        value = record.get(algorithm)
        if isinstance(value, str):
            return algorithm, value
    return None
