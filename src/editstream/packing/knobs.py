"""What the packer reads from a dataset config, as types of their own, so the packer does not
import the config module that builds it (``BagelDatasetConfig.build`` returns a ``PackedDataset``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class PackingKnobs:
    """What packing one sample needs: the cfg dropout probabilities and the image token layout."""

    text_cond_dropout_prob: float = 0.1
    vit_cond_dropout_prob: float = 0.4
    vae_cond_dropout_prob: float = 0.1
    vae_image_downsample: int = 16
    max_latent_size: int = 32
    vit_patch_size: int = 14
    max_num_patch_per_side: int = 70

    @classmethod
    def of(cls, config: Any) -> PackingKnobs:
        """The knobs of a dataset config (any object with these attributes, ``BagelDatasetConfig`` say)."""
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)})


class GroupedDatasetConfig(Protocol):
    """The dataset config a ``PackedDataset`` is built from (``BagelDatasetConfig`` is one)."""

    @property
    def grouped_datasets(self) -> Mapping[str, Any] | None: ...

    @property
    def dataset_info(self) -> Mapping[str, Any] | None: ...

    @property
    def dataset_info_path(self) -> str | None: ...

    @property
    def vit_patch_size(self) -> int: ...

    def resolved(self) -> GroupedDatasetConfig:
        """A copy with ``grouped_datasets`` and ``dataset_info`` read from their files."""
        ...
