"""How each source shape is read: the data layer's one dispatch on a kind's :class:`SourceShape`.

A kind's rows are either parquet slices (row groups or whole files, converted to one sample per
row) or JSONL lines with the media they name. A layout (``layouts``) asks the kind's shape for
the row source that reads it, the ``num_used_data`` count that reads it whole and the training
dataset's arguments; a shape that cannot read a layout says so. No other module tests a shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..format.manifest import Manifest
from ..format.sft import SftInfo
from ..io.storage import StorageOptions
from ..kinds import DatasetKind, SourceShape, UnknownKindError, get_kind
from .rows import ListingRowSource
from .sources.foreign import ForeignTarSource
from .sources.jsonl import JsonlLineSource
from .sources.parquet import ParquetSource
from .sources.sft_shards import ShardLineSource
from .sources.webdataset import TarSource

if TYPE_CHECKING:
    from .layouts import SourceRequest

SOURCE_OPTIONS = {
    "parquet": ("retry",),
    "webdataset": ("retry", "block_size", "max_member_size", "prefetch", "columns", "readahead_bytes"),
}
"""Keyword arguments each backend's source takes beyond the common ones (parquet-slice kinds)."""


def _named(request: SourceRequest) -> str:
    return "this" if request.kind is None else request.kind.name


class ShapeMismatch(ValueError):
    """A kind whose shape does not read this layout (JSONL lines from a parquet directory, say)."""


class ParquetSlices:
    """Rows of parquet row groups (or whole files), on parquet, converted shards or foreign shards."""

    name = "parquet"

    def _common(self, backend: str, request: SourceRequest) -> dict[str, Any]:
        unknown = sorted(set(request.options) - set(SOURCE_OPTIONS[backend]))
        if unknown:
            raise TypeError(
                f"dataset {request.dataset_name!r}: unknown keyword argument(s) {unknown} for backend "
                f"{backend!r} (it takes {list(SOURCE_OPTIONS[backend])})"
            )
        return dict(
            dataset_name=request.dataset_name,
            granularity=request.granularity,
            drops=request.drops,
            column_types=request.column_types,
            **request.options,
        )

    def parquet_source(
        self, entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None
    ) -> ListingRowSource:
        return ParquetSource(parquet_info=request.parquet_info, storage_options=so, **self._common("parquet", request))

    def converted_source(
        self, entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None
    ) -> ListingRowSource:
        if "columns" in request.options:
            raise TypeError(
                f"dataset {request.dataset_name!r}: columns applies to foreign shards (patterns), not converted roots"
            )
        return TarSource(storage_options=so, **self._common("webdataset", request))

    def foreign_source(
        self, entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None
    ) -> ListingRowSource:
        return ForeignTarSource(
            storage_options=so,
            schema=None if request.kind is None else request.kind.name,
            **self._common("webdataset", request),
        )

    def jsonl_source(
        self, entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None
    ) -> ListingRowSource:
        raise ShapeMismatch(
            f"dataset {request.dataset_name!r}: {entries[0]} is a JSONL file; {_named(request)} data is read "
            f"from parquet files or shards"
        )

    def converted_count(self, manifest: Manifest) -> int:
        """Source files a converted root holds rows of (the count that reads each once)."""
        return len(manifest.source_files)

    def dataset_arguments(self, backend: str, entry: Any, count: int, media_dir: str | None) -> dict[str, Any]:
        """The training dataset's arguments that read ``entry`` whole on ``backend``."""
        return {"data_dir_list": [entry], "num_used_data": [count], "backend": backend}


class JsonlLines:
    """One sample per JSONL line, with the media it names: from the JSONL and a media directory, or
    from a root converted from them."""

    name = "jsonl+media"

    def parquet_source(
        self, entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None
    ) -> ListingRowSource:
        raise ShapeMismatch(
            f"dataset {request.dataset_name!r}: {_named(request)} data is a JSONL file and its media directory, "
            f"not the parquet files of {entries[0]}"
        )

    def foreign_source(
        self, entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None
    ) -> ListingRowSource:
        raise ShapeMismatch(
            f"dataset {request.dataset_name!r}: {_named(request)} data is read from a JSONL file or a root converted "
            f"from one, not from foreign shards ({entries[0]})"
        )

    def jsonl_source(
        self, entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None
    ) -> ListingRowSource:
        if request.media_dir is None:
            raise ShapeMismatch(
                f"{entries[0]} is a JSONL file; its image and video names need a media directory (media_dir)"
            )
        return JsonlLineSource(
            dataset_name=request.dataset_name,
            storage_options=so,
            allow_outside_media_dir=request.allow_outside_media_dir,
            media_dirs=[request.media_dir] * len(entries),
        )

    def converted_source(
        self, entries: Sequence[Any], request: SourceRequest, so: StorageOptions | None
    ) -> ListingRowSource:
        return ShardLineSource(
            dataset_name=request.dataset_name,
            storage_options=so,
            allow_outside_media_dir=request.allow_outside_media_dir,
            **request.options,
        )

    def converted_count(self, manifest: Manifest) -> int:
        """Lines a converted root holds (the count that reads each once)."""
        return SftInfo.from_manifest(manifest, manifest.source_root).num_lines

    def dataset_arguments(self, backend: str, entry: Any, count: int, media_dir: str | None) -> dict[str, Any]:
        """The JSONL dataset's arguments that read ``entry`` whole: the JSONL and its media directory on
        the source backend; the converted root alone (it holds the lines) on the webdataset backend."""
        if backend == "webdataset":
            return {"jsonl_path_list": None, "data_dir_list": [entry], "num_used_data": [count], "backend": backend}
        return {"jsonl_path_list": [entry], "data_dir_list": [media_dir], "num_used_data": [count], "backend": backend}


DataShape = ParquetSlices | JsonlLines
_BY_SHAPE: dict[SourceShape, DataShape] = {SourceShape.PARQUET: ParquetSlices(), SourceShape.JSONL_MEDIA: JsonlLines()}


def data_shape(kind: DatasetKind | None) -> DataShape:
    """How data of ``kind`` is read (parquet slices for a dataset class of no registered kind)."""
    return _BY_SHAPE[SourceShape.PARQUET if kind is None else kind.source]


def shape_named(schema: str | None) -> DataShape:
    """The shape of the kind called ``schema`` (parquet slices when unnamed or not registered here)."""
    if schema is None:
        return _BY_SHAPE[SourceShape.PARQUET]
    try:
        return data_shape(get_kind(schema))
    except UnknownKindError:
        return _BY_SHAPE[SourceShape.PARQUET]
