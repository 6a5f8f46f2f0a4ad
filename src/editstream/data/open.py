"""``open_data``: any path editstream reads, as one typed handle (layout, kind, backend, rows); every
command, the raw-row reader and the training datasets open data here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..io.storage import StorageOptions
from ..kinds import DatasetKind, get_kind
from .backends import Backend, get_backend
from .drops import DropLog
from .layouts import BackendMismatch, Layout, SourceRequest, layout_for_backend, one_layout_type, recognise
from .rows import ListingRowSource
from .units import Unit


def unit_granularity(kind: DatasetKind | None) -> str:
    """What a unit of ``kind`` is: a row group (default) or a whole file, as its dataset class reads."""
    if kind is None or kind.dataset is None:
        return "row_group"
    return str(getattr(kind.dataset_class(), "unit_granularity", "row_group"))


@dataclass(frozen=True)
class DataHandle:
    """One opened dataset: where it is, what it holds, and how to read it."""

    layout: Layout
    kind: DatasetKind
    media_dir: str | None = None
    allow_outside_media_dir: bool = False

    @property
    def url(self) -> Any:
        """The entry as the row source is given it (a directory, a root, a shard pattern or list)."""
        return self.layout.url

    @property
    def backend(self) -> Backend:
        return self.layout.backend

    @property
    def storage_options(self) -> StorageOptions | None:
        return self.layout.storage_options

    def request(self, dataset_name: str = "data", drops: DropLog | None = None, **options: Any) -> SourceRequest:
        """What a row source of this data is built with; a directory's files listed sorted, as the loader does."""
        return SourceRequest(
            dataset_name=dataset_name,
            kind=self.kind,
            drops=drops if drops is not None else DropLog(dataset_name),
            granularity=unit_granularity(self.kind),
            column_types=self.kind.columns,
            media_dir=self.media_dir,
            allow_outside_media_dir=self.allow_outside_media_dir,
            options=options,
            sorted_files=True,
        )

    def source(self, dataset_name: str = "data", drops: DropLog | None = None, **options: Any) -> ListingRowSource:
        """The row source the loader reads this data with."""
        return self.layout.source([self.url], self.request(dataset_name, drops, **options))

    def units(self, source: ListingRowSource) -> list[Unit]:
        """Every unit of the data, in listing order (what ``source`` then reads)."""
        return source.list_units([self.url], [self.layout.count()])

    def dataset_arguments(self) -> dict[str, Any]:
        """The keyword arguments of the kind's training dataset that read this data whole."""
        return self.layout.dataset_arguments(self.kind, self.media_dir)


def open_data(
    path: Any,
    *,
    kind: str | DatasetKind | None = None,
    backend: str | None = None,
    storage_options: StorageOptions | None = None,
    media_dir: str | None = None,
    allow_outside_media_dir: bool = False,
) -> DataHandle:
    """The data at ``path`` (anything :func:`~editstream.data.layouts.recognise` knows), opened; a given ``backend``
    or ``kind`` must fit it (a :class:`LayoutError` names the right one)."""
    layout = recognise(path, storage_options)
    wanted = None if backend is None else get_backend(backend, "open_data")
    if wanted is not None and wanted is not layout.backend:
        raise BackendMismatch(path, layout, wanted)
    if kind is None:
        chosen = layout.detect_kind()
    else:
        chosen = layout.check_kind(kind if isinstance(kind, DatasetKind) else get_kind(kind))
    return DataHandle(layout, chosen, media_dir, allow_outside_media_dir)


def dataset_source(
    entries: Sequence[Any], backend: Backend, request: SourceRequest, storage_options: StorageOptions | None = None
) -> ListingRowSource:
    """The row source a training dataset reads its ``data_dir_list`` with (layouts told from names alone)."""
    layouts = [layout_for_backend(entry, backend, storage_options) for entry in entries] or [
        layout_for_backend("", backend, storage_options)
    ]
    one_layout_type(layouts, f"dataset {request.dataset_name!r}")
    return layouts[0].source([layout.url for layout in layouts], request)


def entry_count(entry: Any, backend: str, storage_options: StorageOptions | None = None) -> int:
    """The ``num_used_data`` entry that reads every file (or shard) of a data directory once."""
    return layout_for_backend(entry, get_backend(backend, "entry_count"), storage_options).count()
