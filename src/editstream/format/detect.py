"""What a path holds, told from its name and one listing: the first question every command asks.
A path that exists is always literal: only a name that exists nowhere and looks like a pattern is one."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..io import storage
from ..io.storage import StorageOptions
from ..io.words import counted
from .manifest import MANIFEST_NAME

PROGRESS_DIR_NAME = "_editstream_progress"
"""The converter's done-record directory (``conversion.records.PROGRESS_DIR``)."""
PLAN_NOTE = "_plan"
"""The note a conversion leaves in its progress directory: how many shards it plans, from which source."""

MISSING = "missing"
PARQUET_FILE = "parquet_file"
TAR_FILE = "tar_file"
JSONL_FILE = "jsonl_file"
OTHER_FILE = "other_file"
CONVERTED = "converted"
PARTIAL = "partial"
PARQUET_DIR = "parquet_dir"
SHARD_DIR = "shard_dir"
SHARD_PATTERN = "shard_pattern"
JSONL_DIR = "jsonl_dir"
EMPTY_DIR = "empty_dir"
OTHER_DIR = "other_dir"

_PATTERN = re.compile(r"\{[^{}]*[,.][^{}]*\}|[*?\[]")


def is_pattern(url: str) -> bool:
    """Whether ``url``'s last part looks like a brace pattern (``shards-{000..009}.tar``) or a glob."""
    return bool(_PATTERN.search(url.rsplit("/", 1)[-1]))


def names_pattern(url: str, storage_options: StorageOptions | None = None) -> bool:
    """Whether ``url`` is a pattern to expand: it looks like one and nothing of that exact name exists."""
    if not is_pattern(url):
        return False
    try:
        return not storage.exists(url, storage_options)
    except FileNotFoundError:
        return True


def shards_in(dir_url: str) -> str:
    """The pattern of the tar shards directly in the directory ``dir_url``, its name made literal (globs as
    ``glob.escape`` does, braces backslashed): ``loc?al[1]`` matches that directory's shards, not ``locXal1``'s."""
    literal = "".join(f"[{c}]" if c in "*?[" else "\\" + c if c in "{}" else c for c in dir_url.rstrip("/"))
    return literal + "/*.tar"


@dataclass
class Partial:
    """What an unfinished conversion left: done shards, planned shards (when noted), its source."""

    done: int
    total: int | None = None
    src: str | None = None

    def describe(self) -> str:
        """``7/32 shards done`` (or ``7 shards done`` when the plan was not noted)."""
        if self.total is None:
            return f"{counted(self.done, 'shard')} done"
        return f"{self.done}/{counted(self.total, 'shard')} done"


@dataclass
class PathKind:
    """The answer of :func:`detect`: the kind, the names seen in a directory, and partial progress."""

    url: str
    kind: str
    names: list[str] = field(default_factory=list)
    partial: Partial | None = None


def _by_suffix(names: list[str], kinds: tuple[str, str, str], default: str) -> str:
    """The first of ``kinds`` (of a ``.parquet``, ``.tar``, ``.jsonl`` name) some name ends with, else ``default``."""
    found = (
        kind for suffix, kind in zip((".parquet", ".tar", ".jsonl"), kinds) if any(n.endswith(suffix) for n in names)
    )
    return next(found, default)


def _listing(url: str, storage_options: StorageOptions | None) -> list[str] | None:
    """Names directly in ``url`` when it is a directory (or S3 prefix), ``None`` when it is a file."""
    fs, path = storage.url_to_fs(url, storage_options)
    if not fs.isdir(path):
        if fs.exists(path):
            return None
        raise FileNotFoundError(url)
    return sorted(storage.list_names(url, storage_options))


def read_partial(url: str, storage_options: StorageOptions | None = None) -> Partial:
    """Done records and the plan note of an unfinished conversion at ``url``."""
    progress = storage.join(url, PROGRESS_DIR_NAME)
    fs, path = storage.url_to_fs(progress, storage_options)
    try:
        names = [str(e).rstrip("/").rsplit("/", 1)[-1] for e in fs.find(path)]
    except FileNotFoundError:
        names = []
    partial = Partial(done=sum(1 for n in names if n.endswith(".tar.json")))
    try:
        note = json.loads(storage.read_bytes(storage.join(progress, PLAN_NOTE), storage_options))
        partial.total = int(note["num_shards"])
        partial.src = str(note.get("src") or "") or None
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        pass
    return partial


def detect(url: str, storage_options: StorageOptions | None = None) -> PathKind:
    """What ``url`` holds: missing, a file, a (partial) conversion, a directory of what, or a pattern."""
    try:
        names = _listing(url, storage_options)
    except FileNotFoundError:
        return PathKind(url, SHARD_PATTERN if is_pattern(url) else MISSING)
    if names is None:
        name = url.rstrip("/").rsplit("/", 1)[-1].lower()
        return PathKind(url, _by_suffix([name], (PARQUET_FILE, TAR_FILE, JSONL_FILE), OTHER_FILE))
    found = PathKind(url, OTHER_DIR, names)
    if MANIFEST_NAME in names:
        found.kind = CONVERTED
    elif PROGRESS_DIR_NAME in names:
        found.kind = PARTIAL
        found.partial = read_partial(url, storage_options)
    else:
        found.kind = _by_suffix(names, (PARQUET_DIR, SHARD_DIR, JSONL_DIR), OTHER_DIR if names else EMPTY_DIR)
    return found
