"""Metadata + media sources: the JSON / JSONL files a mapping's ``metadata`` globs name, and its ``media``.

Media (folders, archives, split archives) serve names under their folder's path in the dataset; metadata
is found on disk or inside them. A JSONL file keeps the byte offset of every ``LINES_PER_MARK``-th line
(in ``index_dir``) so a read of some rows parses only those; a JSON list is parsed whole, once per process.
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import functools
import hashlib
import io
import itertools
import json
import logging
import posixpath
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import pyarrow as pa

from ...io import storage
from ..archive_names import archive_stem, is_split_part, part_order
from ..identity import file_identity
from ..media import ArchiveMedia, MediaSource, open_media
from .chains import BadValue
from .mapping import AdapterMapping

log = logging.getLogger(__name__)

SCHEMA_ROWS = 1000
"""Rows a JSON source's column types are inferred from (its ``keep`` columns take these types)."""
LINES_PER_MARK = 100
"""JSONL lines between two kept byte offsets: a unit's read seeks to the mark before its rows."""
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
    held_in: tuple[str, ...] = ()
    """The files on disk that hold it: ``(url,)``, or an archive member's archive parts."""

    def data(self, so: storage.StorageOptions | None) -> bytes:
        """The file's bytes."""
        return self.load() if self.load is not None else storage.read_bytes(self.url, so)


def _all_files(root: str, so: storage.StorageOptions | None) -> list[str]:
    """Every file and folder under ``root`` (links followed, hidden ones such as ``.cache/huggingface`` left
    out), relative to it, sorted."""
    fs, path = storage.url_to_fs(root, so)
    prefix = path.rstrip("/") + "/"
    try:
        found = fs.find(path, withdirs=True) if storage.is_local(root) else fs.find(path)
    except FileNotFoundError:
        return []
    names = {str(p)[len(prefix) :] for p in found if str(p).startswith(prefix)}
    names |= {n.rsplit("/", k)[0] for n in names for k in range(1, n.count("/") + 1)}  # S3 lists no folders
    return sorted(n for n in names if not any(part.startswith(".") for part in n.split("/")))


def _matches(names: Iterable[str], patterns: Sequence[str]) -> list[str]:
    return [n for n in names if any(fnmatch.fnmatchcase(n, p.strip("/")) for p in patterns)]


def open_mounts(
    root: str, patterns: Sequence[str], so: storage.StorageOptions | None, index_dir: str | None
) -> list[tuple[str, MediaSource, str]]:
    """``(prefix, source, what)`` of every ``media`` match: an archive (split parts together) serves names
    under its folder, a folder under its own path."""
    names = _matches(_all_files(root, so), patterns)
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(archive_stem(name) if is_split_part(name) else name, []).append(name)
    mounts: list[tuple[str, MediaSource, str]] = []
    for stem, parts in sorted(groups.items()):
        urls = [storage.join(root, p) for p in part_order(parts)]
        source = open_media(urls if len(urls) > 1 or is_split_part(parts[0]) else urls[0], so, index_dir=index_dir)
        folder = posixpath.dirname(stem) if isinstance(source, ArchiveMedia) else stem
        mounts.append((f"{folder}/" if folder else "", source, stem))
    return mounts


def close_mounts(mounts: Sequence[tuple[str, MediaSource, str]]) -> None:
    """Close the archives :func:`open_mounts` opened (a folder holds nothing open)."""
    for _, source, _ in mounts:
        if isinstance(source, ArchiveMedia):
            source.close()


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
            name, url, _form(name), _base(name, mapping.paths_from), storage.size(url, so), mapping.images, None, (url,)
        )
    for prefix, source, what in mounts:
        if not isinstance(source, ArchiveMedia):
            continue
        for member in _matches((prefix + m for m in source.members if not m.endswith(".parquet")), mapping.metadata):
            inner = member[len(prefix) :]
            load = functools.partial(source.read, inner)
            url, base = f"{storage.join(root, what)}#{inner}", _base(member, mapping.paths_from)
            found[member] = MetadataFile(
                member, url, _form(member), base, source.members[inner][1], mapping.images, load, tuple(source.urls)
            )
    return [found[name] for name in sorted(found)]


def _row(item: Any, columns: Sequence[str], paths: Sequence[str], base: str) -> dict[str, Any]:
    """The ``columns`` of one JSON object (absent: ``None``), its image ``paths`` made dataset paths."""
    if not isinstance(item, dict):
        return dict.fromkeys(
            columns, BadValue(f"a metadata entry is a {type(item).__name__}, not an object", "bad_json")
        )
    row = {c: item.get(c) for c in columns}
    for c in paths:
        value = row.get(c)
        if base and isinstance(value, str):
            row[c] = posixpath.join(base, value)
        elif base and isinstance(value, list):
            row[c] = [posixpath.join(base, v) if isinstance(v, str) else v for v in value]
    return row


_TOO_DEEP = f"nested deeper than Python's parser goes (recursion limit {sys.getrecursionlimit()})"


@functools.lru_cache(maxsize=1)
def _parsed(f: MetadataFile, so_key: str) -> list[Any] | BadValue:
    """A JSON file's entries (the last one read is kept, so counting and reading parse it once)."""
    try:
        entries = json.loads(f.data(json.loads(so_key)))
    except ValueError as exc:  # not JSON, or not UTF-8 (a UnicodeDecodeError)
        return BadValue(f"{f.name} is not valid JSON: {exc}", "bad_json")
    except RecursionError:
        return BadValue(f"{f.name} is not readable JSON: {_TOO_DEEP}", "bad_json")
    if not isinstance(entries, list):
        return BadValue(f"{f.name} holds a JSON {type(entries).__name__}, not a list of objects", "bad_json")
    return entries


@functools.lru_cache(maxsize=1)
def _member(f: MetadataFile) -> bytes:
    """A metadata file inside an archive, loaded (the last one read is kept: its units' reads share it)."""
    return f.data(None)


def _stream(f: MetadataFile, so: storage.StorageOptions | None) -> IO[bytes]:
    """``f`` opened for reading (a seekable file on disk, or an archive member's bytes)."""
    if f.load is not None:
        return io.BytesIO(_member(f))
    fs, path = storage.url_to_fs(f.url, so)
    return fs.open(path, "rb")


def _entry(f: MetadataFile, k: int, line: bytes) -> Any:
    """JSONL line ``k`` of ``f`` parsed, or a ``BadValue`` naming it."""
    try:
        return json.loads(line)
    except ValueError as exc:
        return BadValue(f"{f.name} line {k + 1} is not valid JSON: {exc}", "bad_json")
    except RecursionError:
        return BadValue(f"{f.name} line {k + 1} is not readable JSON: {_TOO_DEEP}", "bad_json")


def entries(f: MetadataFile, so: storage.StorageOptions | None) -> Iterator[Any]:
    """The entries of ``f`` in order; a JSONL line that does not parse, or a JSON file, as a ``BadValue``."""
    if f.form == "json":
        parsed = _parsed(f, json.dumps(so, sort_keys=True, default=str))
        yield from [parsed] if isinstance(parsed, BadValue) else parsed
        return
    with _stream(f, so) as stream:
        for k, line in enumerate(stream):
            yield _entry(f, k, line)


def _as_row(item: Any, f: MetadataFile, columns: Sequence[str]) -> dict[str, Any]:
    return dict.fromkeys(columns, item) if isinstance(item, BadValue) else _row(item, columns, f.paths, f.base)


def metadata_rows(
    f: MetadataFile, columns: Sequence[str], so: storage.StorageOptions | None
) -> Iterator[dict[str, Any]]:
    """The rows of ``f``: its entries' ``columns``, its image paths made dataset paths."""
    return (_as_row(item, f, columns) for item in entries(f, so))


def rows_at(
    f: MetadataFile,
    marks: Sequence[int],
    wanted: Collection[int],
    columns: Sequence[str],
    so: storage.StorageOptions | None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row, values)`` of the rows ``wanted`` of ``f``, in order: a JSONL file with ``marks`` read from the mark
    before each wanted row, parsing only wanted lines."""
    keep = set(wanted)
    if f.form == "json" or not marks:
        for r, item in enumerate(entries(f, so)):
            if r in keep:
                yield r, _as_row(item, f, columns)
        return
    last = max(keep, default=-1)
    with _stream(f, so) as stream:
        for block in sorted({r // LINES_PER_MARK for r in keep}):
            stream.seek(marks[block])
            for r in range(block * LINES_PER_MARK, min(last + 1, (block + 1) * LINES_PER_MARK)):
                line = stream.readline()
                if not line:
                    break
                if r in keep:
                    yield r, _as_row(_entry(f, r, line), f, columns)


def kept_count_and_schema(
    f: MetadataFile, so: storage.StorageOptions | None, index_dir: str | None
) -> tuple[int, pa.Schema, tuple[int, ...]]:
    """The rows of ``f``, its columns' types and its line marks; for JSONL kept in ``index_dir`` by the identity
    of the files holding it, so the next process (a worker, a resumed run) need not read the file."""
    if index_dir is None or f.form != "jsonl":
        return _counted(f, so)
    held = [file_identity(u, so) for u in f.held_in]
    text = json.dumps({"name": f.name, "held": held, "every": LINES_PER_MARK}, sort_keys=True)
    url = storage.join(
        index_dir, f"{posixpath.basename(f.name)}.{hashlib.sha256(text.encode()).hexdigest()[:24]}.lines"
    )
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, pa.ArrowException):
        data = json.loads(storage.read_bytes(url, so))
        return (
            int(data["rows"]),
            pa.ipc.read_schema(pa.py_buffer(base64.b64decode(data["schema"]))),
            tuple(data["marks"]),
        )
    n, schema, marks = _counted(f, so)
    kept = {"rows": n, "marks": marks, "schema": base64.b64encode(schema.serialize().to_pybytes()).decode()}
    try:
        storage.makedirs(index_dir, so)
        storage.write_bytes(url, json.dumps(kept).encode(), so)
    except OSError as exc:
        log.info("cannot keep the line marks of %s at %s (%s)", f.name, url, exc)
    return n, schema, marks


def _counted(f: MetadataFile, so: storage.StorageOptions | None) -> tuple[int, pa.Schema, tuple[int, ...]]:
    """How many rows ``f`` holds, its columns' types (inferred from its first ``SCHEMA_ROWS`` objects) and, for
    JSONL, the byte offset of every ``LINES_PER_MARK``-th line (not parsed)."""
    first = [item for item in itertools.islice(entries(f, so), SCHEMA_ROWS) if isinstance(item, dict)]
    fields = []
    for column in dict.fromkeys(k for item in first for k in item):
        try:
            arrow_type = pa.array([item.get(column) for item in first]).type
        except (pa.ArrowException, TypeError):
            arrow_type = pa.string()
        fields.append(pa.field(column, pa.string() if pa.types.is_null(arrow_type) else arrow_type))
    if f.form == "json":
        return sum(1 for _ in entries(f, so)), pa.schema(fields), ()
    n, at, marks = 0, 0, []
    with _stream(f, so) as stream:
        for line in stream:
            if n % LINES_PER_MARK == 0:
                marks.append(at)
            n, at = n + 1, at + len(line)
    return n, pa.schema(fields), tuple(marks)


class SeveralSnapshotsError(ValueError):
    """A Hub cache folder holds several snapshots and no ``refs/main`` says which one is the dataset."""


def snapshot_roots(src: str, so: storage.StorageOptions | None) -> list[str]:
    """A Hub cache folder's ``snapshots/<rev>``: the revision ``refs/main`` names, else its only one; several
    and no ``refs/main`` are refused, listed (reading one of them silently could be the wrong revision)."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        rev = storage.read_bytes(storage.join(src, "refs", "main"), so).decode().strip()
        return [storage.join(src, "snapshots", rev)]
    try:
        revs = sorted(storage.list_names(storage.join(src, "snapshots"), so))
    except (FileNotFoundError, NotADirectoryError):
        return []
    if len(revs) > 1:
        first = storage.join(src, "snapshots", revs[0])
        raise SeveralSnapshotsError(
            f"{src} is a Hub cache folder with {len(revs)} snapshots ({', '.join(revs)}) and no refs/main naming "
            f"the one to read; pass the snapshot folder itself, e.g. {first}"
        )
    return [storage.join(src, "snapshots", rev) for rev in revs]


def find_root(src: str, mapping: AdapterMapping, so: storage.StorageOptions | None) -> str:
    """The dataset root holding ``mapping``'s metadata or media: ``src`` itself or a Hub cache folder's snapshot."""
    wanted = [*mapping.metadata, *mapping.media]
    candidates = [*snapshot_roots(src, so), src]  # a cache folder's own walk would see its snapshot's files
    for root in candidates:
        if _matches(_all_files(root, so), wanted):
            if root != src:
                log.warning("%s is a Hub cache folder; reading its snapshot %s", src, root)
            return root
    close = [f"{c}: {', '.join(found)}" for c in candidates if (found := close_files(c, so))]
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


def close_files(root: str, so: storage.StorageOptions | None) -> list[str]:
    """A few files under ``root`` that look like metadata or media (to name in a 'found nothing' error)."""
    return [n for n in _all_files(root, so) if n.endswith(CLOSE) or is_split_part(n)][:5]
