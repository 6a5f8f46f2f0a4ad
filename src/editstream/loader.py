"""Build the training DataLoader around ``PackedDataset``: checkpointable, rank-aware.

``build_dataloader`` is the counterpart of the reference's dataloader builder: it makes the
packed dataset from a grouped-dataset config, calls ``set_epoch``, and wraps it in
torchdata's ``StatefulDataLoader`` (``pip install 'editstream[train]'``) so that
``loader.state_dict()`` taken mid-epoch restores, in a new process, to exactly the next batch.
Without torchdata (or with ``stateful=False``) it returns a plain ``torch`` DataLoader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .packing import PackedDataset, collate_fn, make_bagel_multimodal_dataset
from .sources.base import resolve_rank_and_world


def wrap_dataloader(dataset: PackedDataset, *, num_workers: int = 2, stateful: bool = True,
                    prefetch_factor: int | None = 2, pin_memory: bool = False,
                    multiprocessing_context: str | None = None, snapshot_every_n_steps: int = 1) -> Any:
    """A DataLoader over ``dataset`` with one packed sequence per step (``batch_size=1``).

    ``snapshot_every_n_steps`` is how often workers send their state with a batch; a state
    taken between snapshots is still exact (torchdata replays the few batches since the
    last snapshot on restore), larger values just trade restore time for less traffic.
    """
    if num_workers != dataset.num_workers and not (num_workers == 0 and dataset.num_workers <= 1):
        raise ValueError(f"the DataLoader has {num_workers} workers but the PackedDataset was built for "
                         f"{dataset.num_workers}; pass the same number to both (it seeds each worker)")
    kwargs: dict[str, Any] = dict(batch_size=1, num_workers=num_workers, collate_fn=collate_fn,
                                  pin_memory=pin_memory)
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


def build_dataloader(*, tokenizer: Any, special_tokens: Mapping[str, int], grouped_datasets: Mapping[str, Any],
                     dataset_info: Mapping[str, Any], num_workers: int = 2, data_seed: int = 42,
                     local_rank: int | None = None, world_size: int | None = None, stateful: bool = True,
                     data_status: Mapping[str, Any] | None = None, prefetch_factor: int | None = 2,
                     pin_memory: bool = False, multiprocessing_context: str | None = None,
                     snapshot_every_n_steps: int = 1, **packer_kwargs: Any) -> Any:
    """Packed dataset + DataLoader from a grouped-dataset config, ready to iterate.

    Rank and world size default to the initialised ``torch.distributed`` group (or torchrun's
    ``RANK`` / ``WORLD_SIZE``). ``packer_kwargs`` go to
    :func:`~editstream.packing.make_bagel_multimodal_dataset` (token budget, dropout ...).
    Resuming with ``loader.load_state_dict(state)`` needs the same world size and workers.
    """
    rank, world = resolve_rank_and_world(local_rank, world_size)
    packer = make_bagel_multimodal_dataset(tokenizer=tokenizer, special_tokens=special_tokens,
                                           grouped_datasets=grouped_datasets, local_rank=rank, world_size=world,
                                           num_workers=num_workers, data_status=data_status, data_seed=data_seed,
                                           dataset_info=dataset_info, **packer_kwargs)
    packer.set_epoch(data_seed)
    return wrap_dataloader(packer, num_workers=num_workers, stateful=stateful, prefetch_factor=prefetch_factor,
                           pin_memory=pin_memory, multiprocessing_context=multiprocessing_context,
                           snapshot_every_n_steps=snapshot_every_n_steps)
