"""Dataset bases that read rows from a backend chosen by a flag and hand them to ``parse_row``.

``ParquetStandardIterableDataset`` keeps the reference's name and constructor; its
``backend`` keyword picks where rows come from (:data:`~editstream.loader.backends.BACKENDS`:
``"parquet"``, alias ``"source"``, or ``"webdataset"``), so any subclass that defines
``parse_row`` runs on either backend with no second class.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ...data.drops import DropLog
from ...data.rows import ListingRowSource
from ...data.sources.foreign import ForeignTarSource, expand_shards, is_foreign_entry
from ...data.sources.parquet import ParquetSource
from ...data.sources.webdataset import TarSource
from ...data.units import Unit
from ...format.columns import ColumnTypeError
from ...format.manifest import Manifest
from ...io.storage import StorageOptions, list_files
from ...kinds import UnknownKindError, get_kind
from ..backends import check_backend
from ..distributed import DataStatus
from ..iteration import SourceIterableDataset
from ..pixels import check_fast_decode, check_image_dtype, load_image, share_one_storage

SOURCE_OPTIONS = {
    "parquet": ("retry",),
    "webdataset": ("retry", "block_size", "max_member_size", "prefetch", "columns", "readahead_bytes"),
}
"""Keyword arguments each backend's source takes beyond the common ones."""


def make_source(
    backend: str,
    *,
    dataset_name: str,
    granularity: str,
    parquet_info: Mapping[str, Any] | None,
    storage_options: StorageOptions | None,
    drops: DropLog,
    column_types: Mapping[str, str] | None = None,
    data_dir_list: Sequence[Any] = (),
    schema: str | None = None,
    **options: Any,
) -> ListingRowSource:
    """Build the row source for ``backend``; an unknown backend or option is a clear error.

    On the webdataset backend, entries that name shards (brace patterns, globs, ``.tar`` URLs,
    lists of them) are foreign shards without a manifest (``sources.foreign``); ``columns`` maps
    their members to the dataset's columns, by default from the ``schema`` kind's columns."""
    backend = check_backend(backend, f"dataset {dataset_name!r}")
    unknown = sorted(set(options) - set(SOURCE_OPTIONS[backend]))
    if unknown:
        raise TypeError(
            f"dataset {dataset_name!r}: unknown keyword argument(s) {unknown} for backend "
            f"{backend!r} (it takes {list(SOURCE_OPTIONS[backend])})"
        )
    common: dict[str, Any] = dict(
        dataset_name=dataset_name,
        granularity=granularity,
        storage_options=storage_options,
        drops=drops,
        column_types=column_types,
    )
    if backend == "parquet":
        return ParquetSource(parquet_info=parquet_info, **common, **options)
    foreign = [is_foreign_entry(e, storage_options) for e in data_dir_list]
    if any(foreign):
        if not all(foreign):
            raise ValueError(
                f"dataset {dataset_name!r}: data_dir_list mixes shard patterns with converted roots; "
                f"give one kind per dataset"
            )
        return ForeignTarSource(schema=schema, **common, **options)
    if "columns" in options:
        raise TypeError(f"dataset {dataset_name!r}: columns applies to foreign shards (patterns), not converted roots")
    return TarSource(**common, **options)


def count_source_files(data_dir: Any, backend: str, storage_options: StorageOptions | None = None) -> int:
    """Parquet files a data directory holds (for a converted root: its source files; for a shard
    pattern: its shards), the ``num_used_data`` entry that uses every file once."""
    if check_backend(backend, "count_source_files") == "webdataset":
        if is_foreign_entry(data_dir, storage_options):
            return len(expand_shards(data_dir, storage_options))
        return len(Manifest.read(data_dir, storage_options).source_files)
    return len(list_files(data_dir, ".parquet", storage_options))


class ParquetStandardIterableDataset(SourceIterableDataset):
    """Iterate rows per unit over parquet (or converted shards); subclasses define ``parse_row``.

    Arguments follow the reference. ``parquet_info`` (``{path: {"num_row_groups": n}}``) is
    optional: files it lacks have their row-group count read from the footer. ``data_dir_list``
    entries may be local paths or fsspec URLs (``s3://...``). For ``backend="webdataset"`` they
    are converted dataset roots holding a ``manifest.json``, or foreign shards: brace patterns,
    globs, ``.tar`` URLs or lists of them (``columns=`` maps their members to the columns).

    Two opt-ins (editstream extensions, see :mod:`editstream.loader.pixels`): ``image_dtype="uint8"``
    yields resized uint8 pixels (normalized later, to the same bits, by the packer or
    ``editstream.normalize_batch``) and ``fast_decode=True`` decodes large JPEGs at a reduced
    DCT scale (same shapes and token counts, close but not identical pixels).
    """

    source: ListingRowSource
    unit_granularity = "row_group"
    default_backend = "parquet"
    image_dtype = "float32"
    fast_decode = False
    column_types: Mapping[str, str] | None = None
    """The columns ``parse_row`` reads and their types (``{"image": "binary", ...}``), checked when
    a source is opened: by default its kind's (``editstream.kinds``); a subclass may state its own."""

    def __init__(
        self,
        dataset_name: str,
        transform: Any,
        tokenizer: Any,
        vit_transform: Any,
        data_dir_list: Sequence[str],
        num_used_data: Sequence[int],
        parquet_info: Mapping[str, Any] | None = None,
        local_rank: int | None = None,
        world_size: int | None = None,
        num_workers: int = 8,
        data_status: DataStatus | None = None,
        *,
        backend: str | None = None,
        storage_options: StorageOptions | None = None,
        image_dtype: str = "float32",
        fast_decode: bool = False,
        **backend_options: Any,
    ) -> None:
        super().__init__(dataset_name, local_rank, world_size, num_workers)
        self.image_dtype = check_image_dtype(image_dtype, f"dataset {dataset_name!r}")
        self.fast_decode = check_fast_decode(fast_decode, f"dataset {dataset_name!r}")
        self.transform = transform
        self.vit_transform = vit_transform
        self.tokenizer = tokenizer
        self.backend = check_backend(backend or self.default_backend, f"dataset {dataset_name!r}")
        self.storage_options = storage_options
        self.set_data_status(data_status)
        self.data_dir_list = [data_dir_list] if isinstance(data_dir_list, str) else list(data_dir_list)
        self.source = make_source(
            self.backend,
            dataset_name=dataset_name,
            granularity=self.unit_granularity,
            parquet_info=parquet_info,
            storage_options=storage_options,
            drops=self.drops,
            column_types=self.columns(),
            data_dir_list=self.data_dir_list,
            schema=None if self.kind is None else self.kind.name,
            **backend_options,
        )
        self.num_used_data = [num_used_data] if isinstance(num_used_data, int) else list(num_used_data)
        self.parquet_info = parquet_info

    def list_data_paths(self) -> list[Unit]:
        """The units of ``data_dir_list`` (listing, footers or manifests are read here, on first use)."""
        return self.get_data_paths(self.data_dir_list, self.num_used_data, self.parquet_info)

    def get_data_paths(
        self, data_dir_list: Sequence[str], num_used_data: Sequence[int], parquet_info: Mapping[str, Any] | None = None
    ) -> list[Unit]:
        """The units of these directories, as the chosen backend lists them."""
        if isinstance(data_dir_list, str):
            data_dir_list = [data_dir_list]
        if isinstance(num_used_data, int):
            num_used_data = [num_used_data]
        try:
            return self.source.list_units(list(data_dir_list), list(num_used_data))
        except ColumnTypeError:
            if self.backend == "webdataset":
                self._refuse_other_schema(data_dir_list)
            raise

    def columns(self) -> Mapping[str, str]:
        """The columns this dataset reads and their types: the class's own, else its kind's."""
        if self.column_types is not None:
            return self.column_types
        return {} if self.kind is None else self.kind.columns

    def _refuse_other_schema(self, roots: Sequence[Any]) -> None:
        """A converted root of another kind: say which, and which dataset reads it, before any row."""
        own = self.kind
        if own is None:
            return
        for root in roots:
            if not isinstance(root, str):
                continue
            schema = Manifest.read(root, self.storage_options).schema
            try:
                other = get_kind(schema)
            except UnknownKindError:
                continue
            if other.name != own.name and other.dataset is not None:  # generic data: the column message says more
                reader = other.dataset.rpartition(":")[2]
                raise ColumnTypeError(
                    f"dataset {self.dataset_name!r}: {root} holds {schema} data (manifest.json), not "
                    f"{own.name}; read it with {reader} (group {other.name})"
                ) from None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The samples (see :class:`~editstream.loader.iteration.SourceIterableDataset`); with
        ``image_dtype="uint8"`` each sample's images share one storage (cheaper to hand over)."""
        samples = super().__iter__()
        return samples if self.image_dtype != "uint8" else _sharing_storage(samples)

    def load_image(self, data: Any) -> Any:
        """Decode one image of a row: exactly as the reference, or reduced with ``fast_decode``
        (for the larger of ``transform`` / ``vit_transform``'s targets)."""
        return load_image(data, (self.transform, self.vit_transform), self.fast_decode)

    @property
    def drop_counts(self) -> dict[str, int]:
        """Drops per reason in this process (bad rows, unreadable units ...)."""
        return self.drops.as_dict()


def _sharing_storage(samples: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    try:
        for sample in samples:
            yield share_one_storage(sample)
    finally:
        close = getattr(samples, "close", None)
        if close is not None:
            close()


class WebDatasetStandardIterableDataset(ParquetStandardIterableDataset):
    """The same dataset reading converted WebDataset shards by default (``backend="webdataset"``)."""

    default_backend = "webdataset"
