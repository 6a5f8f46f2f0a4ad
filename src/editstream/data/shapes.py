"""How each source shape is read: the data layer's one dispatch on a kind's :class:`SourceShape` (parquet
slices or JSONL lines): its row source per layout, its whole-entry count and its dataset arguments."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..format.manifest import Manifest
from ..format.sft import SftInfo
from ..io.storage import StorageOptions
from ..kinds import DatasetKind, SourceShape
from .backends import PARQUET, WEBDATASET, Backend
from .rows import ListingRowSource
from .sources.foreign import ForeignTarSource
from .sources.jsonl import JsonlLineSource
from .sources.parquet import ParquetSource
from .sources.sft_shards import ShardLineSource
from .sources.webdataset import TarSource

if TYPE_CHECKING:
    from .layouts import SourceRequest


class ShapeMismatch(ValueError):
    """A kind whose shape does not read this layout (JSONL lines from a parquet directory, say)."""


Builder = Callable[[Sequence[Any], "SourceRequest", StorageOptions | None], ListingRowSource]
"""``(entries, request, storage options)`` -> the row source reading the entries."""


class DataShape:
    """How one shape is read: a source builder per layout it reads (by the layout's ``title``)."""

    builders: dict[str, Builder] = {}

    def source(self, title: str, entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None) -> Any:
        """The row source reading ``entries`` of the layout ``title``; a :class:`ShapeMismatch` if the kind cannot."""
        builder = self.builders.get(title)
        if builder is None:
            kind = "this" if request.kind is None else request.kind.name
            raise ShapeMismatch(
                f"dataset {request.dataset_name!r}: {entries[0]} is {title}; {kind} data is read from "
                f"{' or '.join(self.builders)}"
            )
        return builder(entries, request, so)

    def reads(self, title: str) -> bool:
        """Whether this shape reads the layout ``title`` (a JSONL file, a parquet directory, ...)."""
        return title in self.builders

    def converted_count(self, manifest: Manifest) -> int:
        """The ``num_used_data`` entry that reads a converted root of this shape once."""
        raise NotImplementedError

    def dataset_arguments(self, backend: Backend, entry: Any, count: int, media_dir: str | None) -> dict[str, Any]:
        """The training dataset's arguments that read ``entry`` whole on ``backend``."""
        return {"data_dir_list": [entry], "num_used_data": [count], "backend": backend}


def _options(backend: Backend, request: SourceRequest) -> dict[str, Any]:
    """The arguments every parquet-slice source takes, and the backend's own options (unknown ones refused)."""
    unknown = sorted(set(request.options) - set(backend.options))
    if unknown:
        raise TypeError(
            f"dataset {request.dataset_name!r}: unknown keyword argument(s) {unknown} for backend "
            f"{str(backend)!r} (it takes {list(backend.options)})"
        )
    options = dict(request.options)
    if request.sorted_files:
        options["file_order"] = "sorted"
    return dict(
        dataset_name=request.dataset_name,
        granularity=request.granularity,
        drops=request.drops,
        column_types=request.column_types,
        **options,
    )


def _parquet(entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None) -> ListingRowSource:
    return ParquetSource(parquet_info=request.parquet_info, storage_options=so, **_options(PARQUET, request))


def _converted(entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None) -> ListingRowSource:
    if "columns" in request.options:
        raise TypeError(
            f"dataset {request.dataset_name!r}: columns applies to foreign shards (patterns), not converted roots"
        )
    return TarSource(storage_options=so, **_options(WEBDATASET, request))


def _foreign(entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None) -> ListingRowSource:
    schema = None if request.kind is None else request.kind.name
    options = _options(WEBDATASET, request)
    options.pop("file_order", None)  # shards a pattern names are always taken sorted: no directory order to keep
    for name in ("verify_reads", "member_bytes"):  # foreign shards are always streamed: checked, and bytes
        options.pop(name, None)
    return ForeignTarSource(storage_options=so, schema=schema, **options)


def _jsonl(entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None) -> ListingRowSource:
    if request.media_dir is None:
        raise ShapeMismatch(f"{entries[0]} is a JSONL file; its image and video names need a media directory")
    return JsonlLineSource(
        dataset_name=request.dataset_name,
        storage_options=so,
        allow_outside_media_dir=request.allow_outside_media_dir,
        media_dirs=[request.media_dir] * len(entries),
    )


def _line_roots(entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None) -> ListingRowSource:
    return ShardLineSource(
        dataset_name=request.dataset_name,
        storage_options=so,
        allow_outside_media_dir=request.allow_outside_media_dir,
        **request.options,
    )


class ParquetSlices(DataShape):
    """Rows of parquet row groups (or whole files), on parquet, converted shards or foreign shards."""

    builders = {"a parquet directory": _parquet, "a converted root": _converted, "foreign tar shards": _foreign}

    def converted_count(self, manifest: Manifest) -> int:
        return len(manifest.source_files)  # the source files it holds rows of


class JsonlLines(DataShape):
    """One sample per JSONL line: a JSONL and its media directory, or a root converted from them."""

    builders = {"a JSONL file": _jsonl, "a converted root": _line_roots}

    def converted_count(self, manifest: Manifest) -> int:
        return SftInfo.from_manifest(manifest, manifest.source_root).num_lines

    def dataset_arguments(self, backend: Backend, entry: Any, count: int, media_dir: str | None) -> dict[str, Any]:
        if backend.reads_shards:
            return {"jsonl_path_list": None, "data_dir_list": [entry], "num_used_data": [count], "backend": backend}
        return {"jsonl_path_list": [entry], "data_dir_list": [media_dir], "num_used_data": [count], "backend": backend}


_BY_SHAPE: dict[SourceShape, DataShape] = {SourceShape.PARQUET: ParquetSlices(), SourceShape.JSONL_MEDIA: JsonlLines()}


def data_shape(kind: DatasetKind | None) -> DataShape:
    """How data of ``kind`` is read (parquet slices for a dataset class of no registered kind)."""
    return _BY_SHAPE[SourceShape.PARQUET if kind is None else kind.source]
