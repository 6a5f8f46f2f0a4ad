"""What a path holds, as editstream reads it: :func:`recognise` answers a typed :class:`Layout` (its
backend, kind, row source and whole-entry count) or a :class:`LayoutError` saying what to give instead."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..format import detect as d
from ..format.manifest import Manifest
from ..io import storage
from ..io.lines import read_jsonl_lines
from ..io.parquet import open_parquet
from ..io.storage import StorageOptions
from ..kinds import DatasetKind, UnknownKindError, all_kinds, detect_kind, get_kind
from .backends import PARQUET, WEBDATASET, Backend
from .drops import DropLog
from .rows import ListingRowSource
from .shapes import data_shape
from .sources.foreign import expand_shards, foreign_kind, is_foreign_entry


class LayoutError(ValueError):
    """A path that holds nothing readable the way it was asked: what it holds and how to fix the call;
    ``usage`` says the call must change (as opposed to the data being missing or unreadable)."""

    def __init__(
        self, message: str, fix: str | None = None, *, usage: bool = True, found: d.PathKind | None = None
    ) -> None:
        super().__init__(message if fix is None else f"{message}; {fix}")
        self.message = message
        self.fix = fix
        self.usage = usage
        self.found = found
        """What the path was found to hold, when the refusal is about the path itself."""


class KindMismatch(LayoutError):
    """The kind asked for is not what the data holds (``held``, as ``evidence`` shows: the manifest, the columns)."""

    def __init__(self, url: Any, found: str, wanted: str, evidence: str) -> None:
        super().__init__(f"{url} holds {found} data ({evidence}), not {wanted}", f"name {found} or leave the kind out")
        self.held = found
        self.wanted = wanted
        self.evidence = evidence


class BackendMismatch(LayoutError):
    """The backend asked for does not read this layout; ``right`` is the one that does."""

    def __init__(self, url: Any, layout: Layout, wanted: Backend) -> None:
        super().__init__(f"{url} holds {layout.holds}, not {wanted.reads}", f"use backend {layout.backend}")
        self.right = layout.backend
        self.wanted = wanted


@dataclass(frozen=True)
class SourceRequest:
    """What a row source is built with, besides its layout: who reads it and how."""

    dataset_name: str
    kind: DatasetKind | None
    """The kind of the dataset reading (``None``: a dataset class of no registered kind)."""
    drops: DropLog
    granularity: str = "row_group"
    parquet_info: Mapping[str, Any] | None = None
    column_types: Mapping[str, str] | None = None
    media_dir: str | None = None
    allow_outside_media_dir: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    sorted_files: bool = False
    """Take a directory's files sorted whatever the dataset's ``file_order`` (the raw reader's listing)."""


@dataclass(frozen=True)
class Layout:
    """One recognised entry: where it is, and how its backend lists and reads it."""

    url: Any
    storage_options: StorageOptions | None = None
    title: ClassVar[str] = "data"
    holds: ClassVar[str] = "data"
    """What the entry holds, in a message: ``{url} holds {holds}``."""
    backend: ClassVar[Backend] = PARQUET

    def detect_kind(self) -> DatasetKind:
        """The kind the data is, read from the data itself."""
        raise NotImplementedError

    def check_kind(self, kind: DatasetKind) -> DatasetKind:
        """``kind``, when the data can be read as it; a :class:`KindMismatch` when the data says otherwise."""
        return kind

    def count(self) -> int:
        """The ``num_used_data`` entry that reads every file (shard, line) of the entry once."""
        raise NotImplementedError

    def source(self, entries: Sequence[Any], request: SourceRequest) -> ListingRowSource:
        """The row source reading ``entries`` (all of this layout) for ``request``, built by the kind's shape."""
        source: ListingRowSource = data_shape(request.kind).source(self.title, entries, request, self.storage_options)
        return source

    def dataset_arguments(self, kind: DatasetKind, media_dir: str | None = None) -> dict[str, Any]:
        """The keyword arguments of ``kind``'s training dataset that read this entry whole."""
        return data_shape(kind).dataset_arguments(self.backend, self.url, self.count(), media_dir)


class LayoutEntry:
    """A ``data_dir_list`` entry that gives its own layout (a dataset read in place through an adapter)."""

    def layout(self, storage_options: StorageOptions | None) -> Layout:
        """The layout reading this entry (cheap: listing happens when its units are)."""
        raise NotImplementedError


def kind_of_columns(url: Any, columns: Sequence[str]) -> DatasetKind:
    """The registered kind a table with ``columns`` is; a :class:`LayoutError` listing the kinds when none fits."""
    found = detect_kind(columns)
    if found is None:
        known = "; ".join(f"{k.name}: {sorted(k.columns)}" for k in all_kinds() if k.detectable and k.columns)
        raise LayoutError(
            f"the columns of {url} ({sorted(columns)}) fit no registered dataset kind ({known})",
            "name the kind (--schema / kind=)",
        )
    return found


@dataclass(frozen=True)
class ParquetDirectory(Layout):
    """A directory (or S3 prefix) of ``*.parquet`` files: BAGEL parquet, or any table of a kind's columns."""

    title: ClassVar[str] = "a parquet directory"
    holds: ClassVar[str] = "parquet files"

    def files(self) -> list[str]:
        """Its parquet files, sorted (links followed)."""
        return storage.list_files(self.url, ".parquet", self.storage_options)

    def columns(self) -> list[str]:
        """The column names of its first file."""
        files = self.files()
        if not files:
            raise LayoutError(f"no *.parquet files in {self.url}", "give the directory that holds the parquet files")
        with open_parquet(files[0], self.storage_options) as pf:
            return [f.name for f in pf.schema_arrow]

    def detect_kind(self) -> DatasetKind:
        return kind_of_columns(self.url, self.columns())

    def check_kind(self, kind: DatasetKind) -> DatasetKind:
        columns = self.columns()
        if any(column not in columns for column in kind.columns):
            found = detect_kind(columns)
            if found is not None:
                raise KindMismatch(self.url, found.name, kind.name, "its columns")
        return kind

    def count(self) -> int:
        return len(self.files())


@dataclass(frozen=True)
class ConvertedRoot(Layout):
    """A root written by ``editstream convert``: shards, ``.tar.idx`` files and ``manifest.json``."""

    title: ClassVar[str] = "a converted root"
    holds: ClassVar[str] = "converted WebDataset shards (manifest.json)"
    backend: ClassVar[Backend] = WEBDATASET

    @functools.cached_property
    def manifest(self) -> Manifest:
        """The root's manifest, read once."""
        return Manifest.read(self.url, self.storage_options)

    def detect_kind(self) -> DatasetKind:
        try:
            return get_kind(self.manifest.schema)
        except UnknownKindError:
            raise LayoutError(
                f"{self.url} holds {self.manifest.schema!r} data (manifest.json), "
                "a kind no installed package registers",
                "install the package of that kind",
                usage=False,
            ) from None

    def check_kind(self, kind: DatasetKind) -> DatasetKind:
        if self.manifest.schema != kind.name:
            raise KindMismatch(self.url, self.manifest.schema, kind.name, "manifest.json")
        return kind

    def count(self) -> int:
        return data_shape(self.detect_kind()).converted_count(self.manifest)


@dataclass(frozen=True)
class ForeignShards(Layout):
    """WebDataset tars editstream did not write: a brace pattern, a glob, a ``.tar``, a list, a directory of tars."""

    title: ClassVar[str] = "foreign tar shards"
    holds: ClassVar[str] = "tar shards without a manifest"
    backend: ClassVar[Backend] = WEBDATASET

    def detect_kind(self) -> DatasetKind:
        return foreign_kind()

    def count(self) -> int:
        return len(expand_shards(self.url, self.storage_options))


@dataclass(frozen=True)
class JsonlFile(Layout):
    """A JSONL file of a JSONL + media kind (LLaVA-style lines); its media directory is given apart."""

    title: ClassVar[str] = "a JSONL file"
    holds: ClassVar[str] = "a JSONL file (JSONL + media data)"

    def detect_kind(self) -> DatasetKind:
        for kind in all_kinds():
            if data_shape(kind).reads(self.title):
                return kind
        raise LayoutError(f"{self.url} is a JSONL file, and no registered dataset kind reads JSONL + media")

    def check_kind(self, kind: DatasetKind) -> DatasetKind:
        if not data_shape(kind).reads(self.title):
            raise KindMismatch(self.url, self.detect_kind().name, kind.name, "a JSONL file")
        return kind

    def count(self) -> int:
        return len(read_jsonl_lines(self.url, self.storage_options))


Recogniser = Callable[[d.PathKind, StorageOptions | None], Layout | None]
"""``(what detect found, storage options)`` -> the layout, or ``None`` when it is not this one."""


_BUILTIN: dict[str, type[Layout]] = {
    d.CONVERTED: ConvertedRoot,
    d.PARQUET_DIR: ParquetDirectory,
    d.SHARD_PATTERN: ForeignShards,
    d.TAR_FILE: ForeignShards,
    d.SHARD_DIR: ForeignShards,
    d.JSONL_FILE: JsonlFile,
}


def _recognise_builtin(found: d.PathKind, so: StorageOptions | None) -> Layout | None:
    layout = _BUILTIN.get(found.kind)
    return None if layout is None else layout(d.shards_in(found.url) if found.kind == d.SHARD_DIR else found.url, so)


_RECOGNISERS: list[Recogniser] = []


def register_layout(recogniser: Recogniser) -> Recogniser:
    """Add a layout: ``recogniser`` is asked before the built-in ones (returns it, to be used as a decorator)."""
    _RECOGNISERS.insert(0, recogniser)
    return recogniser


def unregister_layout(recogniser: Recogniser) -> None:
    """Remove a layout added with :func:`register_layout`."""
    _RECOGNISERS.remove(recogniser)


def _refusal(found: d.PathKind) -> LayoutError:
    """Why a path that is no layout is refused, with the fix."""
    url = found.url
    if found.kind == d.MISSING:
        return LayoutError(f"{url} does not exist", "check the path", usage=False, found=found)
    if found.kind == d.PARTIAL:
        done = found.partial.describe() if found.partial else "no shard done"
        return LayoutError(
            f"{url} is an unfinished conversion ({done}, no manifest.json yet)",
            "re-run the conversion to finish it",
            usage=False,
            found=found,
        )
    if found.kind == d.PARQUET_FILE:
        parent = url.rstrip("/").rsplit("/", 1)[0] if "/" in url.rstrip("/") else "."
        return LayoutError(
            f"{url} is one parquet file; data is read by directory", f"give its directory: {parent}", found=found
        )
    return LayoutError(
        f"{url} holds neither parquet files, a converted root, tar shards nor a JSONL file "
        f"({found.kind.replace('_', ' ')})",
        "give a parquet directory, a converted root, or a shard pattern such as 'shards-{000..009}.tar'",
        found=found,
    )


def recognise(url: Any, storage_options: StorageOptions | None = None) -> Layout:
    """The layout at ``url`` (a path, URL, pattern or list of shards); a :class:`LayoutError` when there is none."""
    if isinstance(url, LayoutEntry):
        return url.layout(storage_options)
    if isinstance(url, (list, tuple)) or is_foreign_entry(url, storage_options):
        return ForeignShards(url, storage_options)
    found = d.detect(url, storage_options)
    for recogniser in (*_RECOGNISERS, _recognise_builtin):
        layout = recogniser(found, storage_options)
        if layout is not None:
            return layout
    raise _refusal(found)


def layout_for_backend(entry: Any, backend: Backend, storage_options: StorageOptions | None = None) -> Layout:
    """The layout a ``data_dir_list`` entry has on ``backend``, told from its name alone so a dataset's
    constructor stays cheap (a registered layout is asked first on the parquet backend)."""
    if isinstance(entry, LayoutEntry):
        layout = entry.layout(storage_options)
        if layout.backend != backend:
            raise BackendMismatch(entry, layout, backend)
        return layout
    if backend.reads_shards:
        return (ForeignShards if is_foreign_entry(entry, storage_options) else ConvertedRoot)(entry, storage_options)
    if _RECOGNISERS and isinstance(entry, str):
        found = d.detect(entry, storage_options)
        for recogniser in _RECOGNISERS:
            recognised = recogniser(found, storage_options)
            if recognised is not None:
                return recognised
    return ParquetDirectory(entry, storage_options)


def one_layout_type(entries: Sequence[Layout], owner: str) -> type[Layout]:
    """The one layout type of a dataset's entries; mixing (shard patterns with converted roots) is an error."""
    types = {type(e) for e in entries}
    if len(types) > 1:
        shown = ", ".join(f"{e.url} ({e.title})" for e in entries)
        raise ValueError(f"{owner}: data_dir_list mixes {shown}; give one kind per dataset")
    return entries[0].__class__
