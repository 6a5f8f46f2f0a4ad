"""Twin of NeMo's ``multimodal.packing``: ``PackedDataset`` (NeMo's signature: rank, world size and workers
given) and its dataset config, which finds the packer through this module's name at build time, so patching
``editstream.nemo.packing.PackedDataset`` works as with NeMo."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..packing import config
from ..packing import dataset as packed
from ..packing.groups import GroupRegistryMapping
from ..packing.spec import DEFAULTS, GroupedDatasetConfig

__all__ = ["BagelDatasetConfig", "DataConfig", "PackedDataset"]


class PackedDataset(packed.PackedDataset):
    """editstream's packer with NeMo's signature: ``local_rank``, ``world_size`` and ``num_workers`` are required
    as in NeMo (editstream's own ``PackedDataset`` reads missing ones from the process group); editstream's
    options are keyword-only."""

    def __init__(
        self,
        data_config: GroupedDatasetConfig,
        tokenizer: Any,
        special_tokens: Mapping[str, int],
        local_rank: int,
        world_size: int,
        num_workers: int,
        expected_num_tokens: int = DEFAULTS.expected_num_tokens,
        max_num_tokens_per_sample: int = DEFAULTS.max_num_tokens_per_sample,
        max_num_tokens: int = DEFAULTS.max_num_tokens,
        prefer_buffer_before: int = DEFAULTS.prefer_buffer_before,
        max_buffer_size: int = DEFAULTS.max_buffer_size,
        interpolate_pos: bool = DEFAULTS.interpolate_pos,
        use_flex: bool = DEFAULTS.use_flex,
        data_status: Mapping[str, Any] | None = None,
        dataset_info: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
        global_seed: int | None = None,
        *,
        registry: GroupRegistryMapping | None = None,
        image_dtype: str = DEFAULTS.image_dtype,
        elastic: bool = DEFAULTS.elastic,
        elastic_streams: int | None = DEFAULTS.elastic_streams,
    ) -> None:
        knobs = (expected_num_tokens, max_num_tokens_per_sample, max_num_tokens, prefer_buffer_before)
        super().__init__(
            data_config,
            tokenizer,
            special_tokens,
            local_rank,
            world_size,
            num_workers,
            *knobs,
            max_buffer_size,
            interpolate_pos,
            use_flex,
            data_status,
            dataset_info,
            global_seed,
            registry=registry,
            image_dtype=image_dtype,
            elastic=elastic,
            elastic_streams=elastic_streams,
        )

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Resume from a state (NeMo's keyword name ``state_dict``); see editstream's ``PackedDataset``."""
        super().load_state_dict(state_dict)


@dataclass
class BagelDatasetConfig(config.BagelDatasetConfig):
    """editstream's dataset config: NeMo's fields in NeMo's order, editstream's (``image_dtype``, ``elastic``,
    ``elastic_streams``) keyword-only; builds this module's ``PackedDataset``."""

    image_dtype: str = field(default=DEFAULTS.image_dtype, kw_only=True)
    elastic: bool = field(default=DEFAULTS.elastic, kw_only=True)
    elastic_streams: int | None = field(default=DEFAULTS.elastic_streams, kw_only=True)

    def packed_dataset_class(self) -> Callable[..., PackedDataset]:
        """This module's ``PackedDataset``, looked up at build time (so a patch of it is seen)."""
        return PackedDataset


DataConfig = BagelDatasetConfig
"""NeMo's second name for the dataset config (``packing.DataConfig``)."""
