"""Metadata + media sources: the JSON / JSONL files a mapping's ``metadata`` globs name, and its ``media``.

A published dataset often ships rows (JSON lists of objects, JSONL) apart from its images (folders,
``.tar`` / ``.tar.gz`` archives, archives split into parts, ``.zip``). Given the dataset root,
:func:`find_sources` opens every ``media`` match (``data.media.open_media``; split parts as one
archive; indexes kept in ``index_dir``), each serving names under its folder's path in the dataset
(an archive as if unpacked where it lies, a folder as itself), then lists the ``metadata`` matches
among the files on disk and the members of those archives. A JSONL file is read line by line
(row = line number - 1); a JSON list is parsed whole and held in memory while its rows are read.
Image paths are rewritten to dataset paths: relative to the root, or with ``paths_from`` to the
metadata file's folder joined with it.
"""

from __future__ import annotations

import fnmatch
import functools
import io
import json
import logging
import posixpath
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..data.media import ArchiveMedia, MediaSource, archive_stem, is_split_part, open_media
from ..io import storage
from .mapping import AdapterMapping
from .values import BadValue

log = logging.getLogger(__name__)

SCHEMA_ROWS = 1000
"""Rows a JSON source's column types are inferred from (its ``keep`` columns take these types)."""
CLOSE = (".json", ".jsonl", ".parquet", ".tar", ".gz", ".zip")


@dataclass(frozen=True)
class MetadataFile:
    """One JSON / JSONL metadata file: on disk (``url``) or an archive member (``load`` gives its bytes)."""

    name: str
    url: str
    form: str
    base: str
    size: int
    paths: tuple[str, ...] = ()
    load: Callable[[], bytes] | None = field(default=None, compare=False)

    def data(self, so: storage.StorageOptions | None) -> bytes:
        """The file's bytes."""
        return self.load() if self.load is not None else storage.read_bytes(self.url, so)


def _all_files(root: str, so: storage.StorageOptions | None) -> list[str]:
    """Every file (and local folder) under ``root``, links followed, as paths relative to it, sorted; hidden
    ones left out (a ``--local-dir`` download's ``.cache/huggingface`` holds a ``.metadata`` file per file)."""
    fs, path = storage.url_to_fs(root, so)
    prefix = path.rstrip("/") + "/"
    try:
        found = fs.find(path, withdirs=True) if storage.is_local(root) else fs.find(path)
    except FileNotFoundError:
        return []
    names = (str(p)[len(prefix) :] for p in found if str(p).startswith(prefix))
    return sorted(n for n in names if not any(part.startswith(".") for part in n.split("/")))


def _matches(names: Sequence[str], patterns: Sequence[str]) -> list[str]:
    return [n for n in names if any(fnmatch.fnmatchcase(n, p.strip("/")) for p in patterns)]


def open_mounts(
    root: str, patterns: Sequence[str], so: storage.StorageOptions | None, index_dir: str | None
) -> list[tuple[str, MediaSource, str]]:
    """``(prefix, source, what)`` of every ``media`` match under ``root``: an archive (its split parts
    together) serves names under its folder, a folder under its own path."""
    names = _matches(_all_files(root, so), patterns)
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(archive_stem(name) if is_split_part(name) else name, []).append(name)
    mounts: list[tuple[str, MediaSource, str]] = []
    for stem, parts in sorted(groups.items()):
        urls = [storage.join(root, p) for p in sorted(parts)]
        source = open_media(urls if len(urls) > 1 or is_split_part(parts[0]) else urls[0], so, index_dir=index_dir)
        folder = posixpath.dirname(stem) if isinstance(source, ArchiveMedia) else stem
        mounts.append((f"{folder}/" if folder else "", source, stem))
    return mounts


def _base(name: str, paths_from: str | None) -> str:
    """The folder a metadata file's image paths are relative to, as a dataset path ('' is the root)."""
    if paths_from is None:
        return ""
    base = posixpath.normpath(posixpath.join(posixpath.dirname(name), paths_from))
    return "" if base == "." else base


def _form(name: str) -> str:
    return next((form for form in ("jsonl", "parquet") if name.endswith(f".{form}")), "json")


def list_metadata(
    root: str,
    mapping: AdapterMapping,
    mounts: Sequence[tuple[str, MediaSource, str]],
    so: storage.StorageOptions | None,
) -> list[MetadataFile]:
    """The metadata files of ``mapping`` under ``root``: on disk, then inside the mounted archives, by name."""
    found = {}
    for name in _matches(_all_files(root, so), mapping.metadata):
        url = storage.join(root, name)
        found[name] = MetadataFile(
            name, url, _form(name), _base(name, mapping.paths_from), storage.size(url, so), mapping.images
        )
    for prefix, source, what in mounts:
        if not isinstance(source, ArchiveMedia):
            continue
        for member in _matches([prefix + m for m in source.names() if not m.endswith(".parquet")], mapping.metadata):
            inner = member[len(prefix) :]
            load = functools.partial(source.read, inner)
            url, base = f"{storage.join(root, what)}#{inner}", _base(member, mapping.paths_from)
            found[member] = MetadataFile(
                member, url, _form(member), base, source.members[inner][1], mapping.images, load
            )
    return [found[name] for name in sorted(found)]


def _bad(columns: Sequence[str], reason: str) -> dict[str, Any]:
    problem = BadValue(reason, "bad_json")
    return dict.fromkeys(columns, problem)


def _row(item: Any, columns: Sequence[str], paths: Sequence[str], base: str) -> dict[str, Any]:
    """The ``columns`` of one JSON object (absent: ``None``), its image ``paths`` made dataset paths."""
    if not isinstance(item, dict):
        return _bad(columns, f"a metadata entry is a {type(item).__name__}, not an object")
    row = {c: item.get(c) for c in columns}
    for c in paths:
        value = row.get(c)
        if base and isinstance(value, str):
            row[c] = posixpath.join(base, value)
        elif base and isinstance(value, list):
            row[c] = [posixpath.join(base, v) if isinstance(v, str) else v for v in value]
    return row


@functools.lru_cache(maxsize=1)
def _parsed(f: MetadataFile, so_key: str) -> list[Any] | BadValue:
    """A JSON file's entries (the last one read is kept, so counting and reading parse it once)."""
    try:
        entries = json.loads(f.data(json.loads(so_key)))
    except ValueError as exc:
        return BadValue(f"{f.name} is not valid JSON: {exc}", "bad_json")
    if not isinstance(entries, list):
        return BadValue(f"{f.name} holds a JSON {type(entries).__name__}, not a list of objects", "bad_json")
    return entries


def _lines(f: MetadataFile, so: storage.StorageOptions | None) -> Iterator[bytes]:
    if f.load is not None:
        yield from io.BytesIO(f.load())
        return
    fs, path = storage.url_to_fs(f.url, so)
    with fs.open(path, "rb") as stream:
        yield from stream


def entries(f: MetadataFile, so: storage.StorageOptions | None) -> Iterator[Any]:
    """The entries of ``f`` in order; a JSONL line that does not parse, or a JSON file, as a ``BadValue``."""
    if f.form == "json":
        parsed = _parsed(f, json.dumps(so, sort_keys=True, default=str))
        yield from [parsed] if isinstance(parsed, BadValue) else parsed
        return
    for k, line in enumerate(_lines(f, so)):
        try:
            yield json.loads(line)
        except ValueError as exc:
            yield BadValue(f"{f.name} line {k + 1} is not valid JSON: {exc}", "bad_json")


def metadata_rows(
    f: MetadataFile, columns: Sequence[str], so: storage.StorageOptions | None
) -> Iterator[dict[str, Any]]:
    """The rows of ``f``: its entries' ``columns``, its image paths made dataset paths."""
    for item in entries(f, so):
        if isinstance(item, BadValue):
            yield dict.fromkeys(columns, item)
        else:
            yield _row(item, columns, f.paths, f.base)


def count_and_schema(f: MetadataFile, so: storage.StorageOptions | None) -> tuple[int, pa.Schema]:
    """How many rows ``f`` holds, and its columns' types inferred from the first ``SCHEMA_ROWS`` objects."""
    n, first = 0, list[dict[str, Any]]()
    for item in entries(f, so):
        n += 1
        if len(first) < SCHEMA_ROWS and isinstance(item, dict):
            first.append(item)
    fields = []
    for column in dict.fromkeys(k for item in first for k in item):
        try:
            arrow_type = pa.array([item.get(column) for item in first]).type
        except (pa.ArrowException, TypeError):
            arrow_type = pa.string()
        fields.append(pa.field(column, pa.string() if pa.types.is_null(arrow_type) else arrow_type))
    return n, pa.schema(fields)


def snapshot_roots(src: str, so: storage.StorageOptions | None) -> list[str]:
    """A Hub cache folder's ``snapshots/<rev>``: the revision ``refs/main`` names, else every one."""
    try:
        rev = storage.read_bytes(storage.join(src, "refs", "main"), so).decode().strip()
        return [storage.join(src, "snapshots", rev)]
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        pass
    try:
        revs = sorted(storage.list_names(storage.join(src, "snapshots"), so))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [storage.join(src, "snapshots", rev) for rev in revs]


def find_root(src: str, mapping: AdapterMapping, so: storage.StorageOptions | None) -> str:
    """The dataset root that holds ``mapping``'s metadata (or its media, which may hold the metadata):
    ``src`` itself (a repository root, a ``--local-dir`` download) or a Hub cache folder's snapshot."""
    wanted = [*mapping.metadata, *mapping.media]
    candidates = [*snapshot_roots(src, so), src]  # a cache folder's own walk would see its snapshot's files
    for root in candidates:
        if _matches(_all_files(root, so), wanted):
            if root != src:
                log.warning("%s is a Hub cache folder; reading its snapshot %s", src, root)
            return root
    close = [f"{c}: {', '.join(close_files(c, so))}" for c in candidates if close_files(c, so)]
    hint = f"; found {'; '.join(close)}" if close else ""
    raise FileNotFoundError(
        f"{src} holds none of the files adapter {mapping.name!r} reads (metadata {list(mapping.metadata)}, "
        f"media {list(mapping.media)}); looked in {', '.join(candidates)}{hint}"
    )


def describe(root: str, files: Sequence[MetadataFile], mounts: Sequence[tuple[str, MediaSource, str]]) -> str:
    """What was picked, for stderr: the metadata files and the media sources."""
    media = ", ".join(what for _, _, what in mounts) or "none"
    names = [f.name for f in files]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"reading {root}: metadata {shown or 'none'}; media {media}"


def close_files(root: str, so: storage.StorageOptions | None, limit: int = 5) -> list[str]:
    """A few files under ``root`` that look like metadata or media (to name in a 'found nothing' error)."""
    return [n for n in _all_files(root, so) if n.endswith(CLOSE) or is_split_part(n)][:limit]
