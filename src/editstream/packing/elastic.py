"""Elastic, exact epochs: a fixed number of logical streams mapped onto whatever ranks x workers run.

Each logical stream ``s`` of ``S`` owns, in epoch ``e``, a contiguous share of every group's
units (the sorted units shuffled by ``(seed, e)``), its own RNG states (seeded by ``(seed, e, s)``
and kept apart from the caller's) and its own lossless packer. What a stream yields therefore
depends on the data, the seed, the epoch and ``s`` alone, never on the layout: physical worker
``g`` of ``P = world_size x max(1, num_workers)`` runs the streams with ``s % P == g`` in turn,
and its state holds those streams' states. :func:`merge_states` joins the ranks' saved states
into one layout-free state that any layout loads; each stream then goes on from where it was.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from ..data.units import Unit
from ..loader.draws import RngPoint, apply_point, capture_point
from ..loader.iteration import SourceIterableDataset
from ..loader.units import epoch_order, stream_share
from .buffer import SampleBuffer, buffer_state, restore_buffer
from .loop import GroupDraws, Packer, lossless_batches
from .rngchain import ChainEncoder

ELASTIC_FORMAT = "editstream.ElasticPacked/1"
"""One physical worker's state: the states of the logical streams it runs."""
MERGED_FORMAT = "editstream.ElasticMerged/1"
"""Every stream's state, from :func:`merge_states`: loads into any layout."""


class ElasticPacker(Packer, Protocol):
    """What the elastic mode reads of a ``PackedDataset`` beyond the packing loop's needs."""

    local_rank: int
    world_size: int
    num_streams: int
    epoch: int

    def seed_base(self) -> int: ...


def stream_seed(base: int, epoch: int, stream: int) -> int:
    """The seed of stream ``stream``'s RNGs in epoch ``epoch`` (a CRC of the three numbers)."""
    return zlib.crc32(f"editstream-stream:{base}:{epoch}:{stream}".encode())


def physical_worker() -> tuple[int, int]:
    """(this process's worker id, the number of DataLoader workers; 1 in the main process)."""
    info = torch.utils.data.get_worker_info()
    return (info.id, info.num_workers) if info is not None else (0, 1)


def my_streams(num_streams: int, rank: int, world_size: int) -> list[int]:
    """The logical streams this process runs: ``s % P == g`` for physical worker ``g`` of ``P``."""
    worker, workers = physical_worker()
    g, p = rank * workers + worker, world_size * workers
    return [s for s in range(num_streams) if s % p == g]


def source_datasets(packer: ElasticPacker) -> list[SourceIterableDataset]:
    """The groups' datasets, each a source dataset (elastic epochs read units), or a TypeError naming the group."""
    datasets = list(packer.grouped_datasets)
    for name, dataset in zip(packer.group_names, datasets):
        if not isinstance(dataset, SourceIterableDataset):
            raise TypeError(
                f"elastic: group {name!r} is a {type(dataset).__name__}, not a source dataset; elastic epochs "
                "need datasets that read units (every registered kind's dataset does)"
            )
    return datasets


def fingerprint(packer: ElasticPacker, unit_lists: Sequence[Sequence[Unit]]) -> dict[str, Any]:
    """What a state must agree on to resume exactly: groups, their unit counts and the seed."""
    return {
        "groups": list(packer.group_names),
        "units": [len(units) for units in unit_lists],
        "seed": packer.seed_base(),
    }


@dataclass
class StreamRun:
    """One logical stream inside a worker: its packer loop, buffer, draws and RNG point."""

    stream: int
    draws: GroupDraws
    buffer: SampleBuffer
    rng: RngPoint
    batches: Iterator[dict[str, Any]] | None = None
    started: bool = False
    done: bool = False
    encoder: ChainEncoder = field(default_factory=ChainEncoder)


class ElasticRuntime:
    """The logical streams of one process, opened (or restored) for one epoch, run in turn."""

    def __init__(self, packer: ElasticPacker, epoch: int, saved: Mapping[str, Any] | None) -> None:
        self.packer = packer
        self.epoch = epoch
        self.datasets = source_datasets(packer)
        self.unit_lists = [dataset.sorted_units() for dataset in self.datasets]
        for dataset in self.datasets:
            dataset.keep_parse_origins = True
        self.streams = my_streams(packer.num_streams, packer.local_rank, packer.world_size)
        self.saved = saved
        self.runs: list[StreamRun] = []

    def _order(self, group: int, stream: int) -> list[int]:
        units = self.unit_lists[group]
        return stream_share(
            epoch_order(len(units), self.packer.seed_base(), self.epoch), stream, self.packer.num_streams
        )

    def open(self) -> None:
        """Open every stream of this process: fresh at the epoch's start, or where its saved state says."""
        caller = capture_point()
        try:
            self.runs = [self._open_stream(s) for s in self.streams]
        finally:
            apply_point(caller)

    def _open_stream(self, stream: int) -> StreamRun:
        saved = None if self.saved is None else self.saved.get(str(stream))
        if self.saved is not None and saved is None:
            raise ValueError(
                f"elastic: the loaded state has no state for stream {stream} (of {self.packer.num_streams}); "
                f"load editstream.merge_states([...every rank's state...]) when the layout changes"
            )
        orders = [self._order(g, stream) for g in range(len(self.datasets))]
        starts: list[tuple[int, tuple[int, ...] | None]] = [(0, None)] * len(orders)
        draws_state = None
        if saved is not None and saved["started"]:
            draws_state = saved["groups"]
            starts = [self._start(orders[g], entry, g) for g, entry in enumerate(draws_state)]
        iterators = [
            dataset.iter_epoch_units(self.unit_lists[g], orders[g], *starts[g])
            for g, dataset in enumerate(self.datasets)
        ]
        draws = GroupDraws(self.packer, iterators, finite=True)
        if saved is not None and saved["started"]:
            assert draws_state is not None
            draws.exhausted = [bool(entry["exhausted"]) for entry in draws_state]
            draws.cursor = [
                None if entry["unit"] is None else (int(entry["unit"]), tuple(entry["position"]))
                for entry in draws_state
            ]
            buffer, point = restore_buffer(
                saved["buffer"], saved["rng"], self.packer.group_names, self.datasets, self.unit_lists
            )
            run = StreamRun(stream, draws, buffer, point, started=True, done=bool(saved["done"]))
        else:
            seed = stream_seed(self.packer.seed_base(), self.epoch, stream)
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            run = StreamRun(stream, draws, SampleBuffer(), capture_point())
        run.batches = lossless_batches(self.packer, run.draws, run.buffer)
        return run

    def _start(self, order: list[int], entry: Mapping[str, Any], group: int) -> tuple[int, tuple[int, ...] | None]:
        if entry["exhausted"]:
            return len(order), None
        if entry["unit"] is None:
            return 0, None
        unit = int(entry["unit"])
        if unit not in order:
            raise ValueError(
                f"elastic: group {self.packer.group_names[group]!r}: the state's unit {unit} is not in this "
                f"stream's share of epoch {self.epoch}; the state is from other data or another seed"
            )
        return order.index(unit), tuple(int(p) for p in entry["position"])

    def batches(self) -> Iterator[dict[str, Any]]:
        """Every batch of this process's streams for the epoch, one stream after another in turn."""
        while True:
            progressed = False
            for run in self.runs:
                if run.done:
                    continue
                batch = self._step(run)
                if batch is not None:
                    progressed = True
                    yield batch
            if not progressed:
                return

    def _step(self, run: StreamRun) -> dict[str, Any] | None:
        caller = capture_point()
        apply_point(run.rng)
        try:
            assert run.batches is not None
            batch = next(run.batches, None)
            if batch is None:
                run.done = True
            else:
                run.rng, run.started = capture_point(), True
            return batch
        finally:
            apply_point(caller)

    def stream_state(self, run: StreamRun) -> dict[str, Any]:
        """One stream's state (JSON-ready): where each group's reading is, its buffer and RNG point."""
        buffer, chain = buffer_state(run.buffer, run.rng, self.packer.group_names, run.encoder)
        return {
            "stream": run.stream,
            "epoch": self.epoch,
            "started": run.started,
            "done": run.done,
            "groups": [
                {
                    "unit": None if cursor is None else cursor[0],
                    "position": None if cursor is None else list(cursor[1]),
                    "exhausted": exhausted,
                }
                for cursor, exhausted in zip(run.draws.cursor, run.draws.exhausted)
            ],
            "buffer": buffer,
            "rng": chain,
        }


def not_started(stream: int, epoch: int) -> dict[str, Any]:
    """The state of a stream that has not yielded yet in ``epoch``."""
    return {"stream": stream, "epoch": epoch, "started": False, "done": False}


def worker_state(
    packer: ElasticPacker, runtime: ElasticRuntime | None, pending: Mapping[str, Any] | None
) -> dict[str, Any]:
    """This process's elastic state: its streams (running, loaded-not-started or fresh) and the checks."""
    streams: dict[str, Any] = {}
    if runtime is not None:
        unit_lists = runtime.unit_lists
        for run in runtime.runs:
            started = run.started
            streams[str(run.stream)] = runtime.stream_state(run) if started else not_started(run.stream, runtime.epoch)
    else:
        unit_lists = [dataset.sorted_units() for dataset in source_datasets(packer)]
        for s in my_streams(packer.num_streams, packer.local_rank, packer.world_size):
            saved = None if pending is None else pending.get(str(s))
            streams[str(s)] = saved if saved is not None else not_started(s, packer.epoch)
    return {
        "format": ELASTIC_FORMAT,
        "num_streams": packer.num_streams,
        "epoch": runtime.epoch if runtime is not None else packer.epoch,
        "fingerprint": fingerprint(packer, unit_lists),
        "streams": streams,
    }


def load_elastic(
    packer: ElasticPacker, state: Mapping[str, Any], streams_fixed: bool
) -> tuple[int, dict[str, Any] | None, int]:
    """Check an elastic state (one worker's or merged) against ``packer``; return what to resume:
    ``(epoch, the saved streams by id or None to start the epoch fresh, the number of streams)``.

    ``streams_fixed``: the config set ``elastic_streams``, which the state must then match.
    """
    found = state.get("format") if isinstance(state, Mapping) else type(state).__name__
    if found not in (ELASTIC_FORMAT, MERGED_FORMAT):
        raise ValueError(
            f"cannot resume: this dataset is elastic but the state is {found!r}; an elastic dataset resumes "
            f"from a state saved with elastic: true (or editstream.merge_states of such states)"
        )
    saved_streams = int(state["num_streams"])
    if streams_fixed and saved_streams != packer.num_streams:
        raise ValueError(
            f"cannot resume: the state has {saved_streams} logical streams, the config sets "
            f"elastic_streams={packer.num_streams}; an epoch resumes exactly only with the same streams"
        )
    mine = fingerprint(packer, [d.sorted_units() for d in source_datasets(packer)])
    if state["fingerprint"] != mine:
        raise ValueError(
            f"cannot resume: the state was saved over {state['fingerprint']}, this dataset reads {mine} "
            f"(groups, units per group, seed); an elastic epoch resumes only over the same data and seed"
        )
    streams = dict(state["streams"])
    epoch = int(state["epoch"])
    if found == MERGED_FORMAT and all(s.get("done") for s in streams.values()):
        return epoch + 1, None, saved_streams  # the saved epoch was complete: go on with the next
    return epoch, streams, saved_streams
