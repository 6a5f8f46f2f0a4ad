"""What a conversion is asked to do: ``ConvertConfig``, validated before any I/O, and the rule
that keeps the places a command reads and writes apart (:func:`check_apart`)."""

from __future__ import annotations

import itertools
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..format.digest import DEFAULT_DIGEST, check_algorithm
from ..format.manifest import LAYOUTS
from ..io import storage
from ..kinds import get_kind
from .executors import check_engine
from .shapes import strategy_of


@dataclass(frozen=True, kw_only=True)
class ConvertConfig:
    """What to convert and how; validated on construction so bad options fail before any I/O."""

    src: str
    dst: str
    schema: str | None = None
    parquet_info: str | Mapping[str, Any] | None = None
    workers: int | None = None
    engine: str = "auto"
    ray_address: str | None = None
    layout: str = "rowgroup"
    shard_size: int | None = None
    samples_per_shard: int | None = None
    overwrite: bool = False
    drop_bad_rows: bool = False
    storage_options: dict[str, Any] | None = None
    progress: bool = True
    media_dir: str | None = None
    """JSONL + media kinds only: the media directory the JSONL's names are relative to, as the user gives it."""
    digest: str = DEFAULT_DIGEST
    """Digest of every shard and idx, recorded in the manifest: ``xxh3_128`` (fast) or ``sha256``."""
    allow_outside_media_dir: bool = False
    """JSONL + media kinds only: read media names outside ``media_dir`` (absolute, ``..``) instead of
    refusing them. Off by default: a JSONL must not copy arbitrary files into shards."""

    def __post_init__(self) -> None:
        if self.schema is not None:
            get_kind(self.schema)
        strategy_of(self.schema).check_options(self)
        check_algorithm(self.digest)
        check_engine(self.engine, self.workers, self.ray_address)
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.layout == "rowgroup" and (self.shard_size is not None or self.samples_per_shard is not None):
            raise ValueError("shard_size / samples_per_shard apply to layout='size' only")
        for name in ("shard_size", "samples_per_shard"):
            if (value := getattr(self, name)) is not None and value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        check_apart({"src": self.src, "dst": self.dst})


class PlacesOverlapError(ValueError):
    """Two places a command reads and writes are one place, or one is inside the other."""


def _parts(url: str) -> tuple[str, ...]:
    """``url`` as comparable components: a local path resolved, a URL as scheme (``s3a`` is ``s3``) and parts."""
    if storage.is_local(url):
        scheme, path, sep = "file", os.path.realpath(storage.local_path(url)), os.sep
    else:
        scheme, _, rest = url.partition("://")
        scheme, path, sep = "s3" if scheme.lower() == "s3a" else scheme.lower(), posixpath.normpath("/" + rest), "/"
    return (scheme, *(p for p in path.split(sep) if p))


def overlap(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one place or one holds the other (by whole components: not ``src2``)."""
    pa, pb = _parts(a), _parts(b)
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def check_apart(places: Mapping[str, str]) -> None:
    """A :class:`PlacesOverlapError` naming the first two of ``places`` (role -> path or URL) that overlap."""
    for (role_a, a), (role_b, b) in itertools.combinations(places.items(), 2):
        if overlap(a, b):
            inner, outer = sorted([(len(_parts(a)), role_a, a), (len(_parts(b)), role_b, b)], reverse=True)
            what = f"{inner[1]} ({inner[2]}) is inside {outer[1]} ({outer[2]})"
            what = f"{role_a} and {role_b} are the same place ({a})" if inner[0] == outer[0] else what
            raise PlacesOverlapError(f"{what}: writing one would change the other")


_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3}
_SIZE_UNITS |= {"kib": 1024, "mib": 1024**2, "gib": 1024**3}


def parse_size(text: str) -> int:
    """Bytes from ``"512MB"``, ``"1GiB"``, ``"100000"`` ..."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"cannot read size {text!r}; use e.g. 512MB, 1GiB or a number of bytes")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])
