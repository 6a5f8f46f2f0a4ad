"""The training DataLoader around ``PackedDataset``: the factory, the collate function, the loader.

``build_dataloader`` is the counterpart of the reference's dataloader builder: it makes the
packed dataset from a grouped-dataset config, calls ``set_epoch``, and wraps it in
torchdata's ``StatefulDataLoader`` (``pip install 'editstream[train]'``) so that
``loader.state_dict()`` taken mid-epoch restores, in a new process, to exactly the next batch.
Without torchdata (or with ``stateful=False``) it returns a plain ``torch`` DataLoader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from ..loader.units import resolve_rank_and_world
from .config import BagelDatasetConfig
from .dataset import PackedDataset


def collate_fn(batch: Any) -> dict[str, Any]:
    """DataLoader collate for ``batch_size=1``: unwrap the single packed batch unchanged.

    The packer already builds whole batches, so there is nothing to stack; with
    ``batch_size=None`` the DataLoader passes the dict itself, which is returned as is.
    """
    if isinstance(batch, Mapping):
        return dict(batch)
    if isinstance(batch, (list, tuple)) and len(batch) == 1 and isinstance(batch[0], Mapping):
        return dict(batch[0])
    size = len(batch) if isinstance(batch, (list, tuple)) else type(batch).__name__
    raise ValueError(f"collate_fn expects one packed batch (DataLoader batch_size=1), got {size}")


def make_bagel_multimodal_dataset(
    *,
    tokenizer: Any,
    special_tokens: Mapping[str, int],
    grouped_datasets: Mapping[str, Mapping[str, Any]],
    local_rank: int | None = None,
    world_size: int | None = None,
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
) -> PackedDataset:
    """Build the config and the ``PackedDataset`` for a BAGEL training run in one call.

    Like the reference, it does not call ``set_epoch``: the training script calls
    ``dataset.set_epoch(data_seed)`` before iterating (``data_seed`` is kept on the config).
    """
    data_config = BagelDatasetConfig(
        grouped_datasets,
        text_cond_dropout_prob=text_cond_dropout_prob,
        vit_cond_dropout_prob=vit_cond_dropout_prob,
        vae_cond_dropout_prob=vae_cond_dropout_prob,
        vae_image_downsample=vae_image_downsample,
        max_latent_size=max_latent_size,
        vit_patch_size=vit_patch_size,
        max_num_patch_per_side=max_num_patch_per_side,
        data_seed=data_seed,
    )
    return PackedDataset(
        data_config,
        tokenizer,
        special_tokens,
        local_rank,
        world_size,
        num_workers,
        expected_num_tokens=expected_num_tokens,
        max_num_tokens_per_sample=max_num_tokens_per_sample,
        max_num_tokens=max_num_tokens,
        prefer_buffer_before=prefer_buffer_before,
        max_buffer_size=max_buffer_size,
        interpolate_pos=interpolate_pos,
        use_flex=use_flex,
        data_status=data_status,
        dataset_info=dataset_info,
        registry=registry,
    )


def wrap_dataloader(
    dataset: PackedDataset,
    *,
    num_workers: int = 2,
    stateful: bool = True,
    prefetch_factor: int | None = 2,
    pin_memory: bool = False,
    multiprocessing_context: str | None = None,
    snapshot_every_n_steps: int = 1,
) -> Any:
    """A DataLoader over ``dataset`` with one packed sequence per step (``batch_size=1``).

    ``snapshot_every_n_steps`` is how often workers send their state with a batch; a state
    taken between snapshots is still exact (torchdata replays the few batches since the
    last snapshot on restore), larger values just trade restore time for less traffic.
    """
    if num_workers != dataset.num_workers and not (num_workers == 0 and dataset.num_workers <= 1):
        raise ValueError(
            f"the DataLoader has {num_workers} workers but the PackedDataset was built for "
            f"{dataset.num_workers}; pass the same number to both (it seeds each worker)"
        )
    kwargs: dict[str, Any] = dict(batch_size=1, num_workers=num_workers, collate_fn=collate_fn, pin_memory=pin_memory)
    if num_workers > 0:
        kwargs["prefetch_factor"] = prefetch_factor
        if multiprocessing_context is not None:
            kwargs["multiprocessing_context"] = multiprocessing_context
    if stateful:
        try:
            from torchdata.stateful_dataloader import StatefulDataLoader
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("stateful=True needs torchdata: pip install 'editstream[train]'") from exc
        return StatefulDataLoader(dataset, snapshot_every_n_steps=snapshot_every_n_steps, **kwargs)
    return torch.utils.data.DataLoader(dataset, **kwargs)


def build_dataloader(
    *,
    tokenizer: Any,
    special_tokens: Mapping[str, int],
    grouped_datasets: Mapping[str, Any],
    dataset_info: Mapping[str, Any],
    num_workers: int = 2,
    data_seed: int = 42,
    local_rank: int | None = None,
    world_size: int | None = None,
    stateful: bool = True,
    data_status: Mapping[str, Any] | None = None,
    prefetch_factor: int | None = 2,
    pin_memory: bool = False,
    multiprocessing_context: str | None = None,
    snapshot_every_n_steps: int = 1,
    **packer_kwargs: Any,
) -> Any:
    """Packed dataset + DataLoader from a grouped-dataset config, ready to iterate.

    Rank and world size default to the initialised ``torch.distributed`` group (or torchrun's
    ``RANK`` / ``WORLD_SIZE``). ``packer_kwargs`` go to
    :func:`~editstream.packing.make_bagel_multimodal_dataset` (token budget, dropout ...).
    Resuming with ``loader.load_state_dict(state)`` needs the same world size and workers.
    """
    rank, world = resolve_rank_and_world(local_rank, world_size)
    packer = make_bagel_multimodal_dataset(
        tokenizer=tokenizer,
        special_tokens=special_tokens,
        grouped_datasets=grouped_datasets,
        local_rank=rank,
        world_size=world,
        num_workers=num_workers,
        data_status=data_status,
        data_seed=data_seed,
        dataset_info=dataset_info,
        **packer_kwargs,
    )
    packer.set_epoch(data_seed)
    return wrap_dataloader(
        packer,
        num_workers=num_workers,
        stateful=stateful,
        prefetch_factor=prefetch_factor,
        pin_memory=pin_memory,
        multiprocessing_context=multiprocessing_context,
        snapshot_every_n_steps=snapshot_every_n_steps,
    )
