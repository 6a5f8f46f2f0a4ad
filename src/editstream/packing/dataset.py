"""PackedDataset: the reference's greedy token-budget packer (same RNG order, same batches), plus exact resume."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from ..data.drops import DropLog
from ..loader.pixels import check_image_dtype
from ..loader.units import resolve_rank_and_world
from .accumulator import SamplePacker, SequenceStatus, SpecialTokens
from .groups import GroupContext, GroupDataset, GroupRegistryMapping, build_group_datasets
from .runs import packing_run
from .sequence import flattened_position_ids
from .spec import EXTENSIONS, PACKER_KEYWORDS, SEQUENCE_KNOBS, GroupedDatasetConfig, PackingSpec, is_int
from .surfaces import with_knobs

logger = logging.getLogger(__name__)

SPECIAL_TOKEN_KEYS = ("bos_token_id", "eos_token_id", "start_of_image", "end_of_image")


def _check_layout(local_rank: int, world_size: int, num_workers: Any, special_tokens: Any, dataset_info: Any) -> None:
    """Validate what the spec does not hold; errors name the argument and its value."""
    if not is_int(world_size) or world_size <= 0:
        raise ValueError(f"world_size must be a positive integer, got {world_size!r}")
    if not is_int(num_workers) or num_workers < 0:
        raise ValueError(f"num_workers must be a non-negative integer, got {num_workers!r}")
    if not is_int(local_rank) or not 0 <= local_rank < world_size:
        raise ValueError(f"local_rank must be in [0, world_size={world_size}), got {local_rank!r}")
    if not isinstance(special_tokens, Mapping):
        raise ValueError(f"special_tokens must be a mapping, got {type(special_tokens).__name__}")
    missing = [key for key in SPECIAL_TOKEN_KEYS if key not in special_tokens]
    if missing:
        raise ValueError(f"special_tokens lacks {missing}; it needs {list(SPECIAL_TOKEN_KEYS)}")
    if dataset_info is None:
        raise ValueError(
            "PackedDataset requires explicit dataset_info paths. Set 'dataset.dataset_info_path' or "
            "'dataset.dataset_info' in the training config ({group: {dataset_name: {'data_dir': ...}}})"
        )


class PackedDataset(torch.utils.data.IterableDataset[dict[str, Any]]):
    """Packs samples of grouped datasets into batches (one packed sequence each, ``batch_size=1``) of about
    ``expected_num_tokens``, the global RNGs reseeded per rank and worker as in BAGEL; NeMo's keywords and
    ``data_config``'s knobs become one :class:`PackingSpec`."""

    @with_knobs({"num_workers": PACKER_KEYWORDS, "registry": EXTENSIONS})
    def __init__(
        self,
        data_config: GroupedDatasetConfig,
        tokenizer: Any,
        special_tokens: Mapping[str, int],
        local_rank: int | None = None,
        world_size: int | None = None,
        num_workers: int = 8,
        data_status: Mapping[str, Any] | None = None,
        dataset_info: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
        global_seed: int | None = None,
        *,
        registry: GroupRegistryMapping | None = None,
        **knobs: Any,
    ) -> None:
        super().__init__()
        self.image_dtype = check_image_dtype(knobs["image_dtype"], "PackedDataset")
        local_rank, world_size = resolve_rank_and_world(local_rank, world_size)
        if data_config.grouped_datasets is None or (dataset_info is None and data_config.dataset_info_path):
            data_config = data_config.resolved()  # the config names files: read them (an editstream convenience)
        if dataset_info is None:
            dataset_info = data_config.dataset_info
        self.spec = spec = PackingSpec(**{name: getattr(data_config, name) for name in SEQUENCE_KNOBS}, **knobs)
        _check_layout(local_rank, world_size, num_workers, special_tokens, dataset_info)
        assert dataset_info is not None and data_config.grouped_datasets is not None
        self.expected_num_tokens = spec.expected_num_tokens  # NeMo's attributes, read from the spec
        self.max_num_tokens_per_sample = spec.max_num_tokens_per_sample
        self.max_num_tokens = spec.max_num_tokens
        self.prefer_buffer_before = spec.prefer_buffer_before
        self.max_buffer_size = spec.max_buffer_size
        self.interpolate_pos = spec.interpolate_pos
        self.use_flex = spec.use_flex
        self.tokenizer = tokenizer
        self.data_config = data_config
        self.local_rank, self.world_size, self.num_workers = local_rank, world_size, num_workers
        self.group_context = GroupContext(
            tokenizer, dataset_info, local_rank, world_size, num_workers, registry, self.image_dtype
        )
        for key, value in special_tokens.items():
            setattr(self, key, value)  # as the reference sets them
        self.get_flattened_position_ids = flattened_position_ids(self.spec.interpolate_pos)
        tokens = SpecialTokens(**{k: special_tokens[k] for k in SPECIAL_TOKEN_KEYS})
        self.packer = SamplePacker(self.spec, tokens, self.get_flattened_position_ids)
        self._global_seed: int | None = global_seed  # wins over the last ``set_epoch`` seed when set
        self._data_seed: int | None = None
        self.group_names = list(data_config.grouped_datasets)
        self.grouped_datasets, self.is_mandatory, self.grouped_weights = self.build_datasets(
            data_config.grouped_datasets, data_status
        )
        if not sum(self.grouped_weights) > 0:
            weights = dict(zip(self.group_names, self.grouped_weights))
            raise ValueError(f"the group weights must sum to more than 0, got {weights}")
        self.drops = DropLog(dataset_name="PackedDataset")
        self.elastic = self.spec.elastic
        self.run = packing_run(self)

    def build_datasets(
        self, datasets_metainfo: Mapping[str, Mapping[str, Any]], data_status: Mapping[str, Any] | None
    ) -> tuple[list[GroupDataset], list[bool], list[float]]:
        """Instantiate one registry dataset per group; return (datasets, is_mandatory, weights)."""
        return build_group_datasets(datasets_metainfo, data_status, self.group_context)

    # ------------------------------------------------------------------ seeds and epochs
    def set_epoch(self, seed: int) -> None:
        """Remember ``seed`` for the worker reseed and pass it to the run (reference datasets take rank slices)."""
        self._data_seed = int(seed)
        self.run.set_epoch(seed)

    def seeds(self) -> tuple[int | None, int | None]:
        """``(global_seed, data_seed)`` as a state saves them."""
        return self._global_seed, self._data_seed

    def restore_seeds(self, global_seed: int | None, data_seed: int | None) -> None:
        """The seeds of a loaded state (``set_epoch`` again when its data seed differs)."""
        self._global_seed = global_seed
        if data_seed is not None and data_seed != self._data_seed:
            self.set_epoch(data_seed)

    def worker_seed(self, worker_id: int) -> int:
        """Seed of the global RNGs for ``worker_id`` of this rank: distinct per (seed, rank, worker)."""
        seed = self.seed_base() * max(1, self.world_size) + int(self.local_rank)
        seed = seed * max(1, self.num_workers) + int(worker_id)
        return seed & 0xFFFFFFFF

    def seed_base(self) -> int:
        """The seed worker RNGs and elastic epochs start from: the global seed, else ``set_epoch``'s."""
        return int(self._global_seed or self._data_seed or 0)

    @property
    def epoch(self) -> int:
        """The elastic epoch the run is in (or starts next); the reference stream keeps it as set."""
        return self.run.epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        self.run.epoch = value

    def start_epoch(self, epoch: int) -> None:
        """Elastic mode: make the next iteration run epoch ``epoch`` from its start."""
        self.run.start_epoch(epoch)

    # ------------------------------------------------------------------ one sequence
    def set_sequence_status(self) -> SequenceStatus:
        """A fresh, empty packed-sequence accumulator."""
        return SequenceStatus()

    def pack_sequence(self, sample: Mapping[str, Any], sequence_status: SequenceStatus) -> SequenceStatus:
        """Append one sample to the accumulator and return it (see :class:`SamplePacker`)."""
        return self.packer.pack(sample, sequence_status)

    def to_tensor(self, sequence_status: SequenceStatus) -> dict[str, Any]:
        """Turn an accumulator into the batch dict the model consumes."""
        return self.packer.to_tensor(sequence_status)

    @property
    def vit_patch_size(self) -> int:
        """The ViT patch size of the config (samples are checked against it)."""
        return int(self.spec.vit_patch_size)

    @property
    def drop_counts(self) -> dict[str, int]:
        """Samples skipped by this process so far, per reason (``oversize``, ``malformed``)."""
        return self.drops.as_dict()

    # ------------------------------------------------------------------ iteration and checkpointing
    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Start (or, after ``load_state_dict``, resume) the stream of packed batches."""
        return self.run.batches()

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue after the last yielded batch, valid between batches: a few kilobytes
        of references and RNG chains (:mod:`~editstream.packing.checkpoint`), the groups' states, seeds, layout."""
        return self.run.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Prepare this (fresh) dataset to resume from ``state``; call before ``iter()`` (seeds and datasets
        are restored now, the buffer and RNG states when iteration starts, in place of the reseed)."""
        self.run.load_state_dict(state)
