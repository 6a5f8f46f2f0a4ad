"""Dataset bases that read rows from the backend their ``backend`` keyword names and hand them to
``parse_row``, so a subclass runs on either backend with no second class."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...data.backends import PARQUET, WEBDATASET, Backend, get_backend
from ...data.layouts import SourceRequest
from ...data.open import dataset_source
from ...data.rows import ListingRowSource
from ...data.units import Unit, refuse_repeated_sources
from ...format.columns import ColumnTypeError
from ...format.manifest import Manifest
from ...io.storage import StorageOptions
from ...kinds import UnknownKindError, get_kind
from ..distributed import DataStatus
from ..iteration import SourceIterableDataset
from ..pixels import check_fast_decode, check_image_dtype, load_image


class ParquetStandardIterableDataset(SourceIterableDataset):
    """Iterate rows per unit over parquet (or converted shards); subclasses define ``parse_row``. Arguments
    follow the reference (``vit_transform`` may be ``None``, ``data_dir_list`` entries may be URLs)."""

    source: ListingRowSource
    unit_granularity = "row_group"
    default_backend: Backend = PARQUET
    fast_decode = False
    column_types: Mapping[str, str] | None = None
    """The columns ``parse_row`` reads and their types, checked when a source is opened (default: its kind's)."""

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
        self.backend = get_backend(backend or self.default_backend, f"dataset {dataset_name!r}")
        self.storage_options = storage_options
        self.set_data_status(data_status)
        self.data_dir_list = [data_dir_list] if isinstance(data_dir_list, str) else list(data_dir_list)
        refuse_repeated_sources(dataset_name, self.data_dir_list)  # now, not when the units are first listed
        request = SourceRequest(
            dataset_name=dataset_name,
            kind=self.kind,
            drops=self.drops,
            granularity=self.unit_granularity,
            parquet_info=parquet_info,
            column_types=self.columns(),
            options=backend_options,
        )
        self.source = dataset_source(self.data_dir_list, self.backend, request, storage_options)
        self.num_used_data = [num_used_data] if isinstance(num_used_data, int) else list(num_used_data)
        self.parquet_info = parquet_info

    def list_data_paths(self) -> list[Unit]:
        """The units of ``data_dir_list`` (listing, footers or manifests are read here, on first use)."""
        return self.get_data_paths(self.data_dir_list, self.num_used_data, self.parquet_info)

    def get_data_paths(
        self, data_dir_list: Sequence[str], num_used_data: Sequence[int], parquet_info: Mapping[str, Any] | None = None
    ) -> list[Unit]:
        """The units of these directories, as the chosen backend lists them."""
        dirs = [data_dir_list] if isinstance(data_dir_list, str) else list(data_dir_list)
        counts = [num_used_data] if isinstance(num_used_data, int) else list(num_used_data)
        try:
            return self.source.list_units(dirs, counts)
        except ColumnTypeError:
            if self.backend.reads_shards:
                self._refuse_other_schema(dirs)
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

    def load_image(self, data: Any) -> Any:
        """Decode one image of a row: exactly as the reference, or reduced with ``fast_decode``."""
        return load_image(data, (self.transform, self.vit_transform), self.fast_decode)


class WebDatasetStandardIterableDataset(ParquetStandardIterableDataset):
    """The same dataset reading converted WebDataset shards by default (``backend="webdataset"``)."""

    default_backend: Backend = WEBDATASET
