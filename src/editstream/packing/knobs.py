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
    """What packing one sample needs: the cfg dropout probabilities and the image token layout.

    No defaults here: they belong to ``BagelDatasetConfig`` alone, and :meth:`of` copies them."""

    text_cond_dropout_prob: float
    vit_cond_dropout_prob: float
    vae_cond_dropout_prob: float
    vae_image_downsample: int
    max_latent_size: int
    vit_patch_size: int
    max_num_patch_per_side: int

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
