"""PackedDataset: greedy token-budget packing of samples drawn from weighted dataset groups.

Behaviour follows BAGEL's packer as adopted by NeMo Automodel (same RNG consumption order, so
the same seed gives the same batches), with resumable state added: ``state_dict()`` taken
between two yielded batches lets a fresh ``PackedDataset`` continue with exactly the batches
an uninterrupted run would yield next, in the main process or inside DataLoader workers.

``image_dtype="uint8"`` (opt-in) hands batches over with uint8 pixels and an
``image_normalization`` entry instead of float32 images; ``editstream.normalize_batch`` (or
``SimpleCustomBatch.to(device)``) then gives the float32 batch bit for bit.
"""

from __future__ import annotations

import logging
import numbers
import random
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch

from ..data.drops import DropLog
from ..loader.datasets.registry import DATASET_REGISTRY
from ..loader.distributed import current_worker_id
from ..loader.draws import apply_point, capture_point
from ..loader.iteration import SourceIterableDataset
from ..loader.pixels import check_image_dtype
from ..loader.units import resolve_rank_and_world
from . import state as st
from .accumulator import SamplePacker, SequenceStatus, SpecialTokens, to_tensor
from .buffer import buffer_state, restore_buffer
from .elastic import ELASTIC_FORMAT, MERGED_FORMAT, ElasticRuntime, load_elastic, worker_state
from .groups import GroupContext, GroupDataset, GroupRegistryMapping, build_group_datasets
from .knobs import GroupedDatasetConfig, PackingKnobs
from .loop import GroupDraws, reference_batches
from .sequence import get_flattened_position_ids_extrapolate, get_flattened_position_ids_interpolate

logger = logging.getLogger(__name__)

SPECIAL_TOKEN_KEYS = ("bos_token_id", "eos_token_id", "start_of_image", "end_of_image")


def _is_nonneg_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0


def _check_args(local_rank: int, world_size: int, special_tokens: Any, dataset_info: Any, **numbers_: Any) -> None:
    """Validate the packer's arguments; errors name the argument and its value."""
    for name in ("expected_num_tokens", "max_num_tokens_per_sample", "max_num_tokens"):
        value = numbers_[name]
        if not _is_nonneg_int(value) or value == 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not _is_nonneg_int(world_size) or world_size == 0:
        raise ValueError(f"world_size must be a positive integer, got {world_size!r}")
    for name in ("prefer_buffer_before", "max_buffer_size", "num_workers"):
        if not _is_nonneg_int(numbers_[name]):
            raise ValueError(f"{name} must be a non-negative integer, got {numbers_[name]!r}")
    if not _is_nonneg_int(local_rank) or local_rank >= world_size:
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
    """Packs samples of several grouped datasets into batches of about ``expected_num_tokens``.

    Each batch is one packed sequence (a dict of tensors and lists, see ``to_tensor``);
    a DataLoader should use ``batch_size=1`` with :func:`collate_fn`. Randomness (group choice,
    cfg dropout, timesteps) comes from the global ``random`` / ``numpy`` RNGs exactly as in
    BAGEL, reseeded per rank and worker when iteration starts.
    """

    def __init__(
        self,
        data_config: GroupedDatasetConfig,
        tokenizer: Any,
        special_tokens: Mapping[str, int],
        local_rank: int | None = None,
        world_size: int | None = None,
        num_workers: int = 8,
        expected_num_tokens: int = 32768,
        max_num_tokens_per_sample: int = 16384,
        max_num_tokens: int = 36864,
        prefer_buffer_before: int = 16384,
        max_buffer_size: int = 50,
        interpolate_pos: bool = False,
        use_flex: bool = False,
        data_status: Mapping[str, Any] | None = None,
        dataset_info: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
        global_seed: int | None = None,
        *,
        registry: GroupRegistryMapping | None = None,
        image_dtype: str = "float32",
        elastic: bool = False,
        num_streams: int | None = None,
    ) -> None:
        super().__init__()
        self.image_dtype = check_image_dtype(image_dtype, "PackedDataset")
        local_rank, world_size = resolve_rank_and_world(local_rank, world_size)
        if data_config.grouped_datasets is None or (dataset_info is None and data_config.dataset_info_path):
            data_config = data_config.resolved()  # the config names files: read them (an editstream convenience)
        if dataset_info is None:
            dataset_info = data_config.dataset_info
        _check_args(
            local_rank,
            world_size,
            special_tokens,
            dataset_info,
            expected_num_tokens=expected_num_tokens,
            max_num_tokens_per_sample=max_num_tokens_per_sample,
            max_num_tokens=max_num_tokens,
            prefer_buffer_before=prefer_buffer_before,
            max_buffer_size=max_buffer_size,
            num_workers=num_workers,
        )
        assert dataset_info is not None
        self.expected_num_tokens = expected_num_tokens
        self.max_num_tokens_per_sample = max_num_tokens_per_sample
        self.max_num_tokens = max_num_tokens
        self.prefer_buffer_before = prefer_buffer_before
        self.max_buffer_size = max_buffer_size
        self.tokenizer = tokenizer
        self.local_rank = local_rank
        self.world_size = world_size
        self.num_workers = num_workers
        self.use_flex = use_flex
        self.data_config = data_config
        self._init_packer(special_tokens, interpolate_pos)
        self._dataset_info = dataset_info
        self._registry = registry
        # Seeds for the per-worker reseed: ``_global_seed`` wins when set (BAGEL's global seed),
        # otherwise the seed of the last ``set_epoch``.
        self._global_seed: int | None = global_seed
        self._data_seed: int | None = None
        assert data_config.grouped_datasets is not None  # resolved above
        self.group_names = list(data_config.grouped_datasets)
        self.grouped_datasets, self.is_mandatory, self.grouped_weights = self.build_datasets(
            data_config.grouped_datasets, data_status
        )
        if not sum(self.grouped_weights) > 0:
            weights = dict(zip(self.group_names, self.grouped_weights))
            raise ValueError(f"the group weights must sum to more than 0, got {weights}")
        self._draws: GroupDraws | None = None
        self._live: st.LiveIteration | None = None
        self._pending: dict[str, Any] | None = None
        self.drops = DropLog(dataset_name="PackedDataset")
        self._init_elastic(elastic, num_streams)
        for dataset in self.grouped_datasets:
            if isinstance(dataset, SourceIterableDataset):
                dataset.keep_parse_origins = True  # buffered samples are checkpointed as references

    def _init_elastic(self, elastic: bool, num_streams: int | None) -> None:
        """Elastic epochs (opt-in): the number of logical streams, the epoch, what a load left pending."""
        if num_streams is not None and (not _is_nonneg_int(num_streams) or num_streams == 0):
            raise ValueError(f"num_streams (elastic_streams) must be a positive integer, got {num_streams!r}")
        self.elastic = bool(elastic)
        self._streams_fixed = num_streams is not None
        self.num_streams = int(num_streams) if num_streams is not None else self.world_size * max(1, self.num_workers)
        self.epoch = 0
        self._elastic: ElasticRuntime | None = None
        self._elastic_pending: dict[str, Any] | None = None

    def seed_base(self) -> int:
        """The seed elastic epochs shuffle and seed streams from: the global seed, else ``set_epoch``'s."""
        return int(self._global_seed or self._data_seed or 0)

    def start_epoch(self, epoch: int) -> None:
        """Elastic mode: make the next iteration run epoch ``epoch`` from its start."""
        self.epoch, self._elastic_pending, self._elastic = int(epoch), None, None

    def _init_packer(self, special_tokens: Mapping[str, int], interpolate_pos: bool) -> None:
        """Special tokens as attributes (as the reference sets them) and the sample packer."""
        for key, value in special_tokens.items():
            setattr(self, key, value)
        self.interpolate_pos = interpolate_pos
        self.get_flattened_position_ids = (
            get_flattened_position_ids_interpolate if interpolate_pos else get_flattened_position_ids_extrapolate
        )
        tokens = SpecialTokens(**{k: special_tokens[k] for k in SPECIAL_TOKEN_KEYS})
        knobs = PackingKnobs.of(self.data_config)
        self.packer = SamplePacker(knobs, tokens, self.get_flattened_position_ids, self.use_flex)

    def build_datasets(
        self, datasets_metainfo: Mapping[str, Mapping[str, Any]], data_status: Mapping[str, Any] | None
    ) -> tuple[list[GroupDataset], list[bool], list[float]]:
        """Instantiate one registry dataset per group; return (datasets, is_mandatory, weights)."""
        registry = self._registry if self._registry is not None else DATASET_REGISTRY
        ctx = GroupContext(
            tokenizer=self.tokenizer,
            local_rank=self.local_rank,
            world_size=self.world_size,
            num_workers=self.num_workers,
            dataset_info=self._dataset_info,
            registry=registry,
            image_dtype=self.image_dtype,
        )
        return build_group_datasets(datasets_metainfo, data_status, ctx)

    def set_epoch(self, seed: int) -> None:
        """Remember ``seed`` for the worker reseed and forward it to every grouped dataset (which
        takes its rank's slice of units; elastic epochs do not use rank slices, so not then)."""
        self._data_seed = int(seed)
        if self.elastic:
            return  # elastic epochs split units over logical streams, not over ranks
        for dataset in self.grouped_datasets:
            dataset.set_epoch(seed)

    def worker_seed(self, worker_id: int) -> int:
        """Seed of the global RNGs for ``worker_id`` of this rank: distinct per (seed, rank, worker)."""
        base = int(self._global_seed or self._data_seed or 0)
        seed = base * max(1, self.world_size) + int(self.local_rank)
        seed = seed * max(1, self.num_workers) + int(worker_id)
        return seed & 0xFFFFFFFF

    # ------------------------------------------------------------------ one sequence
    def set_sequence_status(self) -> SequenceStatus:
        """A fresh, empty packed-sequence accumulator."""
        return SequenceStatus()

    def pack_sequence(self, sample: Mapping[str, Any], sequence_status: SequenceStatus) -> SequenceStatus:
        """Append one sample to the accumulator and return it (see :class:`SamplePacker`)."""
        return self.packer.pack(sample, sequence_status)

    def to_tensor(self, sequence_status: SequenceStatus) -> dict[str, Any]:
        """Turn an accumulator into the batch dict the model consumes."""
        return to_tensor(
            sequence_status, use_flex=self.use_flex, max_num_tokens=self.max_num_tokens, image_dtype=self.image_dtype
        )

    # ------------------------------------------------------------------ iteration
    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Start (or, after ``load_state_dict``, resume) the stream of packed batches."""
        self._live = None
        return self._run_elastic() if self.elastic else self._run()

    def _run_elastic(self) -> Iterator[dict[str, Any]]:
        pending, self._elastic_pending = self._elastic_pending, None
        if pending is None and self._elastic is not None:
            self.epoch += 1  # a new iteration after one that ran (to its end or not): the next epoch
        runtime = ElasticRuntime(self, self.epoch, pending)
        runtime.open()
        self._elastic = runtime
        yield from runtime.batches()  # the finished runtime stays: its state says "epoch done"

    def _run(self) -> Iterator[dict[str, Any]]:
        worker_id = current_worker_id()
        pending, self._pending = self._pending, None
        live = st.LiveIteration(worker_id=worker_id)
        if pending is not None and pending["started"]:
            if pending["worker_id"] != worker_id:
                raise ValueError(
                    f"state saved by DataLoader worker {pending['worker_id']} was loaded into worker "
                    f"{worker_id}; resume requires the same worker layout"
                )
            self._restore_buffer(pending, live)
        else:
            seed = self.worker_seed(worker_id)
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
        if self._draws is None:
            self._draws = GroupDraws(self, [iter(dataset) for dataset in self.grouped_datasets])
        self._live = live
        for batch in reference_batches(self, self._draws, live.buffer):
            # The generator is about to suspend: nothing draws from the RNGs until it resumes.
            live.rng = capture_point()
            yield batch

    def _restore_buffer(self, pending: Mapping[str, Any], live: st.LiveIteration) -> None:
        """The saved buffer (its referenced samples parsed again) and RNG states, into ``live``."""
        if pending["format"] == st.LITERAL_STATE_FORMAT:
            for sample in pending["buffer"]:
                live.buffer.append(sample, 0, None)
            st.restore_rng(pending["rng"])
            return
        live.buffer, point = restore_buffer(pending["buffer"], pending["rng"], self.group_names, self.grouped_datasets)
        apply_point(point)

    @property
    def vit_patch_size(self) -> int:
        """The ViT patch size of the config (samples are checked against it)."""
        return int(self.data_config.vit_patch_size)

    @property
    def drop_counts(self) -> dict[str, int]:
        """Samples skipped by this process so far, per reason (``oversize``, ``malformed``)."""
        return self.drops.as_dict()

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the stream after the last yielded batch.

        Buffered samples as references to their rows (see :mod:`~editstream.packing.buffer`), the
        RNG states of the last yielded batch as a compact chain, each grouped dataset's
        ``state_dict()``, the seeds and the rank/worker layout: a few kilobytes, JSON-ready unless a
        group's dataset cannot recreate samples. Valid between batches.
        """
        if self.elastic:
            return st.copy_tree(worker_state(self, self._elastic, self._elastic_pending))
        if self._pending is not None:
            return st.copy_tree(self._pending)
        live = self._live
        if live is not None and live.rng is None:
            raise RuntimeError("state_dict() is only valid between batches, and this iteration has not yielded one")
        buffer: list[dict[str, Any]] = []
        chain: dict[str, Any] | None = None
        if live is not None:
            assert live.rng is not None
            buffer, chain = buffer_state(live.buffer, live.rng, self.group_names, live.encoder)
        return {
            "format": st.STATE_FORMAT,
            "started": live is not None,
            "rank": self.local_rank,
            "world_size": self.world_size,
            "num_workers": self.num_workers,
            "worker_id": live.worker_id if live is not None else current_worker_id(),
            "data_seed": self._data_seed,
            "global_seed": self._global_seed,
            "buffer": buffer,
            "rng": chain,
            "datasets": {
                name: st.copy_tree(dataset.state_dict())
                for name, dataset in zip(self.group_names, self.grouped_datasets)
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Prepare this (fresh) dataset to resume from ``state``; call before ``iter()``.

        Restores the seeds (re-running ``set_epoch`` if the saved seed differs) and each
        dataset's state now; the buffer and RNG states are applied when iteration starts,
        instead of the usual reseed.
        """
        if self.elastic:
            self.epoch, self._elastic_pending, self.num_streams = load_elastic(self, state, self._streams_fixed)
            self._elastic = None
            return
        if isinstance(state, Mapping) and state.get("format") in (ELASTIC_FORMAT, MERGED_FORMAT):
            raise ValueError(
                f"cannot resume: the state ({state['format']}) was saved with elastic: true, this dataset is not "
                f"elastic; set elastic: true in the dataset config"
            )
        layout = {"rank": self.local_rank, "world_size": self.world_size, "num_workers": self.num_workers}
        st.check_resumable(state, layout, self.group_names)
        self._global_seed = state["global_seed"]
        if state["data_seed"] is not None and state["data_seed"] != self._data_seed:
            self.set_epoch(state["data_seed"])
        for name, dataset in zip(self.group_names, self.grouped_datasets):
            dataset.load_state_dict(st.copy_tree(state["datasets"][name]))
        self._pending = st.copy_tree(dict(state))
        self._draws = None
        self._live = None
