"""The elastic run: exact epochs over a fixed number of logical streams, whatever the layout. Stream ``s`` owns a
share of every group's shuffled units, RNGs seeded by ``(seed, epoch, s)`` and its own lossless packer, so its
batches never depend on the layout; worker ``g`` of ``P`` runs ``s % P == g``."""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch

from ...loader.origins import TracedDataset
from ...loader.units import epoch_order, stream_share
from ..checkpoint import streams as saved_streams
from ..checkpoint.formats import ELASTIC_FORMAT, copy_tree, elastic_state
from ..checkpoint.points import apply_point, capture_point, draw_point, seed_all
from ..checkpoint.references import Buffered, SampleBuffer, restore_buffer
from ..checkpoint.streams import StreamRun
from ..draws import GroupDraws, finish, limit_exceeded, sample_tokens
from ..roles import PackingHost, SequencePacking


def stream_seed(base: int, epoch: int, stream: int) -> int:
    """The seed of stream ``stream``'s RNGs in epoch ``epoch`` (a CRC of the three numbers)."""
    return zlib.crc32(f"editstream-stream:{base}:{epoch}:{stream}".encode())


def worker_streams(num_streams: int, rank: int, world_size: int, worker: int, workers: int) -> list[int]:
    """The logical streams physical worker ``g = rank * workers + worker`` of ``P`` runs: ``s % P == g``."""
    g, p = rank * workers + worker, world_size * max(1, workers)
    return [s for s in range(num_streams) if s % p == g]


def my_streams(num_streams: int, rank: int, world_size: int, turn: int = 0) -> list[int]:
    """The logical streams this process runs; ``turn`` shifts which worker runs which rank's share, so that a
    loader resuming a saved state gives its first batch from the worker whose turn it was."""
    info = torch.utils.data.get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return worker_streams(num_streams, rank, world_size, (worker + turn) % workers, workers)


def resumed_turn(num_streams: int, rank: int, world_size: int, workers: int, turns: Sequence[Sequence[int]]) -> int:
    """The worker of this rank whose streams a merged state says come next (0 when none does: a new layout)."""
    wanted = {tuple(streams) for streams in turns}
    for worker in range(workers):
        if tuple(worker_streams(num_streams, rank, world_size, worker, workers)) in wanted:
            return worker
    return 0


def own_turn(num_streams: int, rank: int, world_size: int, saved: Iterable[str]) -> int:
    """The shift that gives this worker the streams its own saved state holds (0 when they are no worker's)."""
    info = torch.utils.data.get_worker_info()
    if info is None:
        return 0
    held = sorted(int(key) for key in saved)
    for worker in range(info.num_workers):
        if worker_streams(num_streams, rank, world_size, worker, info.num_workers) == held:
            return (worker - info.id) % info.num_workers
    return 0


def epoch_datasets(packer: PackingHost) -> list[TracedDataset]:
    """The groups' datasets, each one that reads units in a given order, or a TypeError naming the group."""
    datasets: list[TracedDataset] = []
    for name, dataset in zip(packer.group_names, packer.grouped_datasets):
        if not isinstance(dataset, TracedDataset):
            raise TypeError(
                f"elastic: group {name!r} is a {type(dataset).__name__}, not a source dataset; elastic epochs "
                "need datasets that read units (every registered kind's dataset does)"
            )
        datasets.append(dataset)
    return datasets


def _draw_live(weights: Sequence[float], live: Sequence[bool]) -> int:
    """A group drawn by weight among the live ones (evenly when they all weigh 0: an exact epoch reads those too)."""
    if not any(w > 0 for w, ok in zip(weights, live) if ok):
        weights = [1.0] * len(weights)
    total = sum(w for w, ok in zip(weights, live) if ok)
    draw = random.random() * total
    last = -1
    for group, (weight, ok) in enumerate(zip(weights, live)):
        if not ok:
            continue
        last = group
        draw -= weight
        if draw < 0:
            return group
    return last


def _live_groups(draws: GroupDraws, weights: Sequence[float]) -> list[bool]:
    """The groups a draw may pick: those with rows left and a weight, else any with rows left."""
    live = [not done and weight > 0 for done, weight in zip(draws.exhausted, weights)]
    return live if any(live) else [not done for done in draws.exhausted]


class LosslessSequence:
    """The sequence being packed in an exact epoch, and what it holds."""

    def __init__(self, packer: SequencePacking) -> None:
        self.packer = packer
        self.status = packer.set_sequence_status()
        self.indexes: list[Any] = []
        self.opening = 0  # samples put there before any drawn one: a lead, then the mandatory groups'

    def fits(self, num_tokens: int) -> bool:
        return self.status.curr + num_tokens <= self.packer.spec.max_num_tokens

    def add(self, sample: dict[str, Any]) -> None:
        self.status = self.packer.pack_sequence(sample, self.status)
        self.indexes.append(sample["data_indexes"])

    def batch(self) -> dict[str, Any]:
        return finish(self.packer, self.status, self.indexes)


def _too_big(packer: SequencePacking, draws: GroupDraws, sample: dict[str, Any]) -> bool:
    """Whether a sample fits no sequence at all (counted as ``oversize``): the only drop of an exact epoch."""
    num_tokens, spec = sample_tokens(sample), packer.spec
    if limit_exceeded(num_tokens, spec) is None:
        return False
    draws.note_drop(
        "oversize",
        sample,
        f"{num_tokens} tokens, over max_num_tokens_per_sample={spec.max_num_tokens_per_sample} "
        f"or max_num_tokens={spec.max_num_tokens}",
    )
    return True


def _open(packer: SequencePacking, draws: GroupDraws, buffer: SampleBuffer) -> LosslessSequence:
    """A new sequence: the buffer's lead sample first, then one sample of each mandatory group with rows
    left (one with no room waits in the buffer)."""
    sequence = LosslessSequence(packer)
    if buffer and buffer[0].lead:
        sequence.add(buffer.pop(0).sample)
    for group, mandatory in enumerate(packer.is_mandatory):
        while mandatory and not draws.exhausted[group]:
            sample = draws.next_sample(group)
            if sample is None or _too_big(packer, draws, sample):
                continue
            if sequence.fits(sample_tokens(sample)):
                sequence.add(sample)
            else:
                buffer.append(Buffered(sample, group, draws.origins[group]))
            break
    sequence.opening = len(sequence.indexes)
    return sequence


def _take(
    packer: SequencePacking, draws: GroupDraws, buffer: SampleBuffer, sequence: LosslessSequence
) -> tuple[Buffered, int | None] | None:
    """The next candidate and its buffer slot (None: freshly drawn), or None at the epoch's end; the buffer
    (first fit, else first) is preferred while the sequence is short or no group has rows."""
    fit = next((i for i, e in enumerate(buffer) if sequence.fits(sample_tokens(e.sample))), None)
    if fit is None or sequence.status.curr >= packer.spec.prefer_buffer_before:
        live = _live_groups(draws, packer.grouped_weights)
        while any(live):
            group = _draw_live(packer.grouped_weights, live)
            sample = draws.next_sample(group)
            if sample is not None:
                return Buffered(sample, group, draws.origins[group]), None
            live = _live_groups(draws, packer.grouped_weights)
    if not buffer:
        return None
    slot = 0 if fit is None else fit
    return buffer[slot], slot


def lossless_batches(packer: SequencePacking, draws: GroupDraws, buffer: SampleBuffer) -> Iterator[dict[str, Any]]:
    """One epoch of batches packing every row that fits a sequence exactly once: a sample that does not fit waits
    in the buffer (the sequence is yielded when full), one not fitting beside a mandatory opening leads the next
    sequence, and the buffer is drained at the end."""
    sequence = _open(packer, draws, buffer)
    while True:
        taken = _take(packer, draws, buffer, sequence)
        if taken is None:
            break
        entry, slot = taken
        if slot is None and _too_big(packer, draws, entry.sample):
            continue
        if sequence.fits(sample_tokens(entry.sample)):
            if slot is not None:
                del buffer[slot]
            sequence.add(entry.sample)
            if sequence.status.curr < packer.spec.expected_num_tokens:
                continue
        else:
            beside_opening = len(sequence.indexes) == sequence.opening > 0
            if beside_opening and not (buffer and buffer[0].lead):
                if slot is not None:
                    del buffer[slot]
                buffer.insert(0, Buffered(entry.sample, entry.group, entry.origin, lead=True))
                continue
            if slot is None:
                buffer.append(entry)
                if len(buffer) <= packer.spec.max_buffer_size:
                    continue
        yield sequence.batch()
        sequence = _open(packer, draws, buffer)
    if sequence.indexes:
        yield sequence.batch()


class ElasticRuntime:
    """The logical streams of one process, opened (fresh at the epoch's start, or where ``saved`` says) for one
    epoch, run in turn."""

    def __init__(
        self, packer: PackingHost, num_streams: int, epoch: int, saved: Mapping[str, Any] | None, turn: int = 0
    ) -> None:
        self.packer = packer
        self.num_streams = num_streams
        self.epoch = epoch
        self.datasets = epoch_datasets(packer)
        self.unit_lists = [dataset.sorted_units() for dataset in self.datasets]
        self.streams = my_streams(num_streams, packer.local_rank, packer.world_size, turn)
        self.saved = saved
        caller = capture_point()
        try:
            self.runs = [self._open_stream(s) for s in self.streams]
        finally:
            apply_point(caller)

    def _open_stream(self, stream: int) -> StreamRun:
        saved = None if self.saved is None else self.saved.get(str(stream))
        if self.saved is not None and saved is None:
            raise ValueError(
                f"elastic: the loaded state has no state for stream {stream} (of {self.num_streams}); "
                f"load editstream.merge_states([...every rank's state...]) when the layout changes"
            )
        names = self.packer.group_names
        seed = self.packer.seed_base()
        orders = [
            stream_share(epoch_order(len(u), seed, self.epoch), stream, self.num_streams) for u in self.unit_lists
        ]
        starts: list[tuple[int, tuple[int, ...] | None]] = [(0, None)] * len(orders)
        shares = [len(order) for order in orders]
        if saved is not None and saved["started"]:
            saved_streams.check_share_ends(saved, shares, names)
            starts = [
                saved_streams.resume_at(orders[g], e, names[g], self.epoch) for g, e in enumerate(saved["groups"])
            ]
        iterators = [
            dataset.iter_epoch_units(self.unit_lists[g], orders[g], *starts[g], draw_point)
            for g, dataset in enumerate(self.datasets)
        ]
        draws = GroupDraws(self.packer, iterators, finite=True)
        if saved is not None and saved["started"]:
            draws.origins, draws.exhausted = saved_streams.saved_cursors(saved)
            buffer, point = restore_buffer(saved["buffer"], saved["rng"], names, self.datasets, self.unit_lists)
            done, count = bool(saved["done"]), int(saved.get("batches", 0))
            run = StreamRun(stream, draws, buffer, point, shares, started=True, done=done, batches=count)
        else:
            seed_all(stream_seed(self.packer.seed_base(), self.epoch, stream))
            run = StreamRun(stream, draws, [], capture_point(), shares)
        run.batches_of = lossless_batches(self.packer, draws, run.buffer)
        return run

    def batches(self) -> Iterator[dict[str, Any]]:
        """Every batch of this process's streams for the epoch, in turn: next is the live stream that has yielded
        the fewest (the first of those), which is round robin from a fresh start and the same turns after a resume."""
        while True:
            live = [run for run in self.runs if not run.done]
            if not live:
                return
            batch = self._step(min(live, key=lambda run: run.batches))
            if batch is not None:
                yield batch

    def _step(self, run: StreamRun) -> dict[str, Any] | None:
        caller = capture_point()
        apply_point(run.rng)
        try:
            assert run.batches_of is not None
            batch = next(run.batches_of, None)
            if batch is None:
                run.done = True
            else:
                run.rng, run.started = capture_point(), True
                run.batches += 1
            return batch
        finally:
            apply_point(caller)


class ElasticRun:
    """Elastic epochs as a packing run: the next epoch per iteration, its state, resuming any layout's."""

    def __init__(self, packer: PackingHost, elastic_streams: int | None) -> None:
        self.packer = packer
        self.fixed_streams = elastic_streams
        default = packer.world_size * max(1, packer.num_workers)
        self.num_streams = int(elastic_streams) if elastic_streams is not None else default
        self.epoch = 0
        self.runtime: ElasticRuntime | None = None
        self.pending: dict[str, Any] | None = None
        self.turn = 0  # the worker shift of a resumed epoch (see my_streams); a new epoch starts at worker 0

    def set_epoch(self, seed: int) -> None:
        """Nothing to forward: elastic epochs split units over logical streams, not over ranks."""

    def start_epoch(self, epoch: int) -> None:
        """Make the next iteration run epoch ``epoch`` from its start."""
        self.epoch, self.pending, self.runtime, self.turn = int(epoch), None, None, 0

    def batches(self) -> Iterator[dict[str, Any]]:
        """This process's batches of the epoch: the loaded one resumed, else the next after one that ran."""
        pending, self.pending = self.pending, None
        if pending is None and self.runtime is not None:
            self.epoch += 1  # a new iteration after one that ran (to its end or not): the next epoch
            self.turn = 0
        self.runtime = ElasticRuntime(self.packer, self.num_streams, self.epoch, pending, self.turn)
        yield from self.runtime.batches()  # the finished runtime stays: its state says "epoch done"

    def _fingerprint(self, unit_lists: Sequence[Sequence[Any]] | None = None) -> dict[str, Any]:
        if unit_lists is None:
            unit_lists = [dataset.sorted_units() for dataset in epoch_datasets(self.packer)]
        return saved_streams.fingerprint(self.packer.group_names, unit_lists, self.packer.seed_base())

    def state_dict(self) -> dict[str, Any]:
        """This process's streams (running, loaded-not-started or fresh) and what a resume must match."""
        runtime, names = self.runtime, self.packer.group_names
        if runtime is not None:
            epoch, mine = runtime.epoch, self._fingerprint(runtime.unit_lists)
            streams = {str(run.stream): saved_streams.stream_state(run, epoch, names) for run in runtime.runs}
        else:
            epoch, mine, pending = self.epoch, self._fingerprint(), self.pending or {}
            ids = my_streams(self.num_streams, self.packer.local_rank, self.packer.world_size, self.turn)
            streams = {str(s): pending.get(str(s)) or saved_streams.not_started(s, epoch) for s in ids}
        return copy_tree(elastic_state(self.num_streams, epoch, mine, streams))

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Check an elastic state (this layout's, or ``merge_states`` of any layout's) and resume from it."""
        loaded = saved_streams.check_elastic_state(state, self.fixed_streams, self._fingerprint)
        self.epoch, self.pending, self.num_streams = loaded
        self.runtime, self.turn = None, 0
        packer = self.packer
        if self.pending is not None and state.get("format") == ELASTIC_FORMAT:
            self.turn = own_turn(self.num_streams, packer.local_rank, packer.world_size, self.pending)
        elif self.pending is not None and packer.num_workers > 1:
            turns = state.get("turns") or []
            self.turn = resumed_turn(self.num_streams, packer.local_rank, packer.world_size, packer.num_workers, turns)
