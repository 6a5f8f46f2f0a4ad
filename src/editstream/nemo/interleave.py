"""Twin of NeMo's ``multimodal.interleave``: the interleaved-sequence builders and the edit dataset, with NeMo's
signatures and defaults (``local_rank=0, world_size=1``, ``parquet_info`` required); editstream's options
(``backend=``, ``storage_options=``, ...) are keyword-only extras."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..data.units import Unit
from ..kinds.unified_edit import dataset as edit
from ..loader.datasets import interleave, standard
from ..loader.distributed import DataStatus

__all__ = ["InterleavedBaseIterableDataset", "ParquetStandardIterableDataset", "UnifiedEditIterableDataset"]


class InterleavedBaseIterableDataset(interleave.InterleavedBaseIterableDataset):
    """editstream's sequence-builder base with NeMo's signature (``local_rank=0, world_size=1``)."""

    def __init__(self, dataset_name: str, local_rank: int = 0, world_size: int = 1, num_workers: int = 8) -> None:
        super().__init__(dataset_name, local_rank, world_size, num_workers)


class ParquetStandardIterableDataset(standard.ParquetStandardIterableDataset):
    """editstream's row dataset with NeMo's positional signature and defaults; ``options`` are editstream's
    keyword-only extras (``backend``, ``storage_options``, ``image_dtype``, ``fast_decode``, backend options)."""

    def __init__(
        self,
        dataset_name: str,
        transform: Any,
        tokenizer: Any,
        vit_transform: Any,
        data_dir_list: Sequence[str],
        num_used_data: Sequence[int],
        parquet_info: Mapping[str, Any] | None,
        local_rank: int = 0,
        world_size: int = 1,
        num_workers: int = 8,
        data_status: DataStatus | None = None,
        **options: Any,
    ) -> None:
        given = (dataset_name, transform, tokenizer, vit_transform, data_dir_list, num_used_data, parquet_info)
        super().__init__(*given, local_rank, world_size, num_workers, data_status, **options)

    def get_data_paths(  # type: ignore[override]  # NeMo's signature, not the base's
        self, data_dir_list: Sequence[str], num_used_data: Sequence[int], parquet_info: Mapping[str, Any] | None
    ) -> list[Unit]:
        """The units of these directories (NeMo's signature: ``parquet_info`` given, ``None`` for none)."""
        return super().get_data_paths(data_dir_list, num_used_data, parquet_info)


class UnifiedEditIterableDataset(edit.UnifiedEditIterableDataset):
    """editstream's edit dataset with NeMo's positional signature and defaults (``options`` as above)."""

    def __init__(
        self,
        dataset_name: str,
        transform: Any,
        tokenizer: Any,
        vit_transform: Any,
        data_dir_list: Sequence[str],
        num_used_data: Sequence[int],
        parquet_info: Mapping[str, Any] | None,
        local_rank: int = 0,
        world_size: int = 1,
        num_workers: int = 8,
        data_status: DataStatus | None = None,
        **options: Any,
    ) -> None:
        given = (dataset_name, transform, tokenizer, vit_transform, data_dir_list, num_used_data, parquet_info)
        super().__init__(*given, local_rank, world_size, num_workers, data_status, **options)
