"""The NeMo dataloader entry points: ``BagelDataloaderConfig(...).build(...)`` (the ``PackedDataset`` in a
StatefulDataLoader that resumes at exactly the next batch) and the one-call factory."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .checkpoint.points import seed_all
from .collate import bagel_packed_collate_fn
from .config import DEFAULT_DATA_SEED, BagelDatasetConfig
from .dataset import PackedDataset
from .spec import EXTENSIONS, PACKER_KEYWORDS, SEQUENCE_KNOBS
from .stateful import stateful_loader_class
from .surfaces import with_knobs


@dataclass(frozen=True)
class BagelDataloaderBuild:
    """What :meth:`BagelDataloaderConfig.build` returns: the loader and the dataset it reads."""

    dataloader: Any
    dataset: PackedDataset


def seed_rank(global_seed: int, world_size: int, rank: int) -> int:
    """Seed ``random``, ``numpy``, ``torch`` (and CUDA) with ``global_seed * world_size + rank``; returns it."""
    rank_seed = global_seed * world_size + rank
    seed_all(rank_seed)
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
        """Build the dataset for this rank, seed the process, wrap the dataset in a StatefulDataLoader (``batch_size``
        1: a step is one packed sequence); ``data_status`` and ``registry`` are passed on only when set, so a
        dataset config written against NeMo's signature builds here too."""
        if batch_size != 1:
            raise ValueError(f"BAGEL packed dataloaders require local_batch_size=1, got {batch_size}")
        loader_class = stateful_loader_class()
        given = {"data_status": data_status, "registry": registry}
        extensions = {name: value for name, value in given.items() if value is not None}
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


@with_knobs({"num_workers": PACKER_KEYWORDS, "data_seed": SEQUENCE_KNOBS, "registry": EXTENSIONS})
def make_bagel_multimodal_dataset(
    *,
    tokenizer: Any,
    special_tokens: Mapping[str, Any],
    grouped_datasets: Mapping[str, Mapping[str, Any]],
    local_rank: int = 0,
    world_size: int = 1,
    num_workers: int = 4,
    data_status: Mapping[str, Any] | None = None,
    data_seed: int = DEFAULT_DATA_SEED,
    dataset_info: Mapping[str, Any] | None = None,
    registry: Mapping[str, Callable[..., Any]] | None = None,
    **knobs: Any,
) -> PackedDataset:
    """``BagelDatasetConfig(...).build(..., global_seed=data_seed)`` in one call (every field but the paths; the
    spec's knobs in NeMo's places)."""
    return BagelDatasetConfig(
        grouped_datasets=grouped_datasets, dataset_info=dataset_info, data_seed=data_seed, **knobs
    ).build(
        tokenizer=tokenizer,
        special_tokens=special_tokens,
        rank=local_rank,
        world_size=world_size,
        num_workers=num_workers,
        global_seed=data_seed,
        data_status=data_status,
        registry=registry,
    )
