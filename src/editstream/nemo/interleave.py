"""Twin of NeMo's ``multimodal.interleave``: the interleaved-sequence builders and the edit dataset, with NeMo's
signatures and defaults (``local_rank=0, world_size=1``, ``parquet_info`` required); editstream's options
(``backend=``, ``storage_options=``, ...) are keyword-only extras."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..data.units import Unit
from ..kinds.unified_edit import dataset as edit
from ..loader.datasets import interleave, standard
from ..packing.surfaces import REQUIRED, with_defaults

NEMO_ROW_DEFAULTS: dict[str, Any] = {"parquet_info": REQUIRED, "local_rank": 0, "world_size": 1}
"""Where NeMo's row datasets' defaults differ from editstream's (which reads the rank and world size itself)."""

__all__ = ["InterleavedBaseIterableDataset", "ParquetStandardIterableDataset", "UnifiedEditIterableDataset"]


class InterleavedBaseIterableDataset(interleave.InterleavedBaseIterableDataset):
    """editstream's sequence-builder base with NeMo's signature (``local_rank=0, world_size=1``)."""

    __init__ = with_defaults(interleave.InterleavedBaseIterableDataset.__init__, local_rank=0, world_size=1)


class ParquetStandardIterableDataset(standard.ParquetStandardIterableDataset):
    """editstream's row dataset with NeMo's positional signature and defaults (:data:`NEMO_ROW_DEFAULTS`);
    editstream's options (``backend``, ``storage_options``, ``image_dtype``, ...) stay keyword-only extras."""

    __init__ = with_defaults(standard.ParquetStandardIterableDataset.__init__, **NEMO_ROW_DEFAULTS)

    def get_data_paths(  # type: ignore[override]  # NeMo's signature, not the base's
        self, data_dir_list: Sequence[str], num_used_data: Sequence[int], parquet_info: Mapping[str, Any] | None
    ) -> list[Unit]:
        """The units of these directories (NeMo's signature: ``parquet_info`` given, ``None`` for none)."""
        return super().get_data_paths(data_dir_list, num_used_data, parquet_info)


class UnifiedEditIterableDataset(edit.UnifiedEditIterableDataset):
    """editstream's edit dataset with NeMo's positional signature and defaults (the options as above)."""

    __init__ = with_defaults(edit.UnifiedEditIterableDataset.__init__, **NEMO_ROW_DEFAULTS)
