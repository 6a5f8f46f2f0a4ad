"""Packing-level configuration: the grouped-dataset dict plus the knobs ``pack_sequence`` reads.

``BagelDatasetConfig`` keeps the attribute names of the reference ``DataConfig`` (also exported
under that name) so existing BAGEL / NeMo Automodel configs load unchanged.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass
class BagelDatasetConfig:
    """Grouped datasets and the sequence-layout knobs of BAGEL packing, validated on creation.

    ``grouped_datasets`` maps a group name (a key of the dataset registry) to its arguments
    (``dataset_names``, ``weight``, ``is_mandatory``, transform args, ...). It may be passed
    positionally like the reference ``DataConfig``; every other field is keyword-only.
    ``data_seed`` is carried for the training script (it calls ``set_epoch(data_seed)``).
    """

    grouped_datasets: Mapping[str, Mapping[str, Any]]
    _: KW_ONLY
    text_cond_dropout_prob: float = 0.1
    vit_cond_dropout_prob: float = 0.4
    vae_cond_dropout_prob: float = 0.1
    vae_image_downsample: int = 16
    max_latent_size: int = 32
    vit_patch_size: int = 14
    max_num_patch_per_side: int = 70
    data_seed: int = 42

    def __post_init__(self) -> None:
        if not isinstance(self.grouped_datasets, Mapping):
            raise ValueError(
                f"grouped_datasets must be a mapping of group name -> arguments, "
                f"got {type(self.grouped_datasets).__name__}"
            )
        if not self.grouped_datasets:
            raise ValueError("grouped_datasets is empty: configure at least one dataset group")
        for group, args in self.grouped_datasets.items():
            if not isinstance(args, Mapping):
                raise ValueError(
                    f"grouped_datasets[{group!r}] must be a mapping of arguments, got {type(args).__name__}"
                )
        for name in ("text_cond_dropout_prob", "vit_cond_dropout_prob", "vae_cond_dropout_prob"):
            value = getattr(self, name)
            if not _is_real(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
        for name in ("vae_image_downsample", "max_latent_size", "vit_patch_size", "max_num_patch_per_side"):
            value = getattr(self, name)
            if not _is_int(value) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not _is_int(self.data_seed):
            raise ValueError(f"data_seed must be an integer, got {self.data_seed!r}")


DataConfig = BagelDatasetConfig
