"""The NeMo dataloader entry points: ``BagelDataloaderConfig(...).build(...)`` and the one-call factory.

``BagelDataloaderConfig`` is the ``dataloader:`` section of a NeMo BAGEL recipe: it builds the
``PackedDataset`` from a :class:`~editstream.packing.config.BagelDatasetConfig`, seeds the
process for its rank, and wraps the dataset in torchdata's checkpointable
``StatefulDataLoader`` (``pip install 'editstream[train]'``; editstream's subclass, which adds
what elastic epochs need), so ``loader.state_dict()`` taken mid-epoch restores, in a new process,
to exactly the next batch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .collate import bagel_packed_collate_fn
from .config import BagelDatasetConfig
from .dataset import PackedDataset
from .stateful import stateful_loader_class


@dataclass(frozen=True)
class BagelDataloaderBuild:
    """What :meth:`BagelDataloaderConfig.build` returns: the loader and the dataset it reads."""

    dataloader: Any
    dataset: PackedDataset


def seed_rank(global_seed: int, world_size: int, rank: int) -> int:
    """Seed ``random``, ``numpy``, ``torch`` (and CUDA) with ``global_seed * world_size + rank``; returns it."""
    rank_seed = global_seed * world_size + rank
    random.seed(rank_seed)
    np.random.seed(rank_seed)
    torch.manual_seed(rank_seed)
    if torch.cuda.is_available():  # pragma: no cover - no GPU here
        torch.cuda.manual_seed_all(rank_seed)
    return rank_seed


@dataclass
class BagelDataloaderConfig:
    """The ``dataloader:`` section of a BAGEL recipe: workers, pinning and prefetch around one dataset config."""

    dataset_config: BagelDatasetConfig
    num_workers: int = 1
    pin_memory: bool = True
    prefetch_factor: int = 2

    def collate_function(self) -> Callable[[Any], Any]:
        """The collate function of the loader; a subclass (``editstream.nemo``'s) may look it up elsewhere."""
        return bagel_packed_collate_fn

    def build(
        self,
        *,
        tokenizer: Any,
        special_tokens: Mapping[str, Any],
        rank: int,
        world_size: int,
        batch_size: int,
        global_seed: int,
        data_status: Any = None,
        registry: Mapping[str, Callable[..., Any]] | None = None,
    ) -> BagelDataloaderBuild:
        """Build the dataset for this rank, seed the process, and wrap the dataset in a StatefulDataLoader.

        ``batch_size`` must be 1: every step is one packed sequence. ``data_status`` and
        ``registry`` are editstream extensions, passed to the dataset config's ``build`` only when
        set, so a dataset config written against NeMo's signature builds here too.
        """
        if batch_size != 1:
            raise ValueError(f"BAGEL packed dataloaders require local_batch_size=1, got {batch_size}")
        loader_class = stateful_loader_class()
        extensions: dict[str, Any] = {}
        if data_status is not None:
            extensions["data_status"] = data_status
        if registry is not None:
            extensions["registry"] = registry
        dataset = self.dataset_config.build(
            tokenizer=tokenizer,
            special_tokens=special_tokens,
            rank=rank,
            world_size=world_size,
            num_workers=self.num_workers,
            global_seed=global_seed,
            **extensions,
        )
        seed_rank(global_seed, world_size, rank)
        dataloader = loader_class(
            dataset=dataset,
            batch_size=batch_size,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            collate_fn=self.collate_function(),
            drop_last=True,
            prefetch_factor=self.prefetch_factor if self.num_workers > 0 else None,
        )
        return BagelDataloaderBuild(dataloader=dataloader, dataset=dataset)


def make_bagel_multimodal_dataset(
    *,
    tokenizer: Any,
    special_tokens: Mapping[str, Any],
    grouped_datasets: Mapping[str, Mapping[str, Any]],
    local_rank: int = 0,
    world_size: int = 1,
    num_workers: int = 4,
    expected_num_tokens: int = 32768,
    max_num_tokens_per_sample: int = 16384,
    max_num_tokens: int = 36864,
    prefer_buffer_before: int = 16384,
    max_buffer_size: int = 50,
    interpolate_pos: bool = False,
    use_flex: bool = False,
    data_status: Mapping[str, Any] | None = None,
    data_seed: int = 42,
    text_cond_dropout_prob: float = 0.1,
    vit_cond_dropout_prob: float = 0.4,
    vae_cond_dropout_prob: float = 0.1,
    vae_image_downsample: int = 16,
    max_latent_size: int = 32,
    vit_patch_size: int = 14,
    max_num_patch_per_side: int = 70,
    dataset_info: Mapping[str, Any] | None = None,
    registry: Mapping[str, Callable[..., Any]] | None = None,
    image_dtype: str = "float32",
) -> PackedDataset:
    """The ``PackedDataset`` of a BAGEL run in one call (``set_epoch(data_seed)`` already applied).

    The same as ``BagelDatasetConfig(...).build(..., global_seed=data_seed)``: the caller's
    dicts are never mutated.
    """
    config = BagelDatasetConfig(
        grouped_datasets=grouped_datasets,
        dataset_info=dataset_info,
        expected_num_tokens=expected_num_tokens,
        max_num_tokens_per_sample=max_num_tokens_per_sample,
        max_num_tokens=max_num_tokens,
        prefer_buffer_before=prefer_buffer_before,
        max_buffer_size=max_buffer_size,
        interpolate_pos=interpolate_pos,
        use_flex=use_flex,
        data_seed=data_seed,
        text_cond_dropout_prob=text_cond_dropout_prob,
        vit_cond_dropout_prob=vit_cond_dropout_prob,
        vae_cond_dropout_prob=vae_cond_dropout_prob,
        vae_image_downsample=vae_image_downsample,
        max_latent_size=max_latent_size,
        vit_patch_size=vit_patch_size,
        max_num_patch_per_side=max_num_patch_per_side,
        image_dtype=image_dtype,
    )
    return config.build(
        tokenizer=tokenizer,
        special_tokens=special_tokens,
        rank=local_rank,
        world_size=world_size,
        num_workers=num_workers,
        global_seed=data_seed,
        data_status=data_status,
        registry=registry,
    )
