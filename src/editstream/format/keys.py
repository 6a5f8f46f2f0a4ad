"""Sample keys: the one place that formats and parses ``{stem}-rg{row_group:05d}-r{row:07d}`` (a key
names its source row, and holds no dot, so webdataset splits member names right)."""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

_SAFE = re.compile(r"[^a-z0-9_-]")
_KEY = re.compile(r"^(?P<stem>.+)-rg(?P<rg>\d{5,})-r(?P<row>\d{7,})$")


class KeyPosition(NamedTuple):
    """What a sample key says about its source row."""

    stem: str
    row_group: int
    row: int


def safe_component(text: str) -> str:
    """A lower-case name part with only ``[a-z0-9_-]`` (no dots, so webdataset keys split right)."""
    out = _SAFE.sub("_", text.lower())
    return out or "_"


def make_key(stem: str, row_group: int, row: int) -> str:
    """The sample key of row ``row`` of row group ``row_group`` of the file with safe stem ``stem``."""
    return f"{stem}-rg{row_group:05d}-r{row:07d}"


def parse_key(key: str) -> KeyPosition | None:
    """``(stem, row_group, row)`` of a key made by :func:`make_key`, or ``None`` for other keys."""
    match = _KEY.match(key)
    return None if match is None else KeyPosition(match["stem"], int(match["rg"]), int(match["row"]))


MAX_STEM = 100
"""Longest key stem: shard names (``{stem}-rg00000.tar``) and member names stay far below NAME_MAX."""


def key_stems(names: list[str]) -> list[str]:
    """A unique, dot-free key stem of at most ``MAX_STEM`` characters per source file name, in list order."""
    used: set[str] = set()
    out = []
    for i, name in enumerate(names):
        base = name[: -len(".parquet")] if name.endswith(".parquet") else name
        stem = safe_component(base)
        if len(stem) > MAX_STEM:  # its start and a digest of the whole name: still unique
            stem = f"{stem[: MAX_STEM - 17]}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:16]}"
        if stem.startswith("_"):
            stem = "f" + stem
        candidate, n = stem, 0
        while candidate in used:
            n += 1
            candidate = f"{stem}-{i}" if n == 1 else f"{stem}-{i}-{n}"
        used.add(candidate)
        out.append(candidate)
    return out
