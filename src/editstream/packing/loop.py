"""The packing loops: samples drawn from weighted groups, packed greedily into token-budget sequences.

``reference_batches`` is BAGEL's loop as NeMo Automodel runs it (endless groups, the same RNG
draws in the same order, and, for parity, a sample that does not fit while the buffer is full is
not packed later). ``lossless_batches`` is the elastic mode's: finite groups (one epoch), no
sample lost (one that does not fit goes back to the buffer), the buffer drained at the end. Both
draw samples through :class:`GroupDraws`, which checks each one and notes where it came from.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from ..data.drops import DropLog
from ..loader.iteration import SourceIterableDataset
from ..loader.recreate import ParseOrigin
from .accumulator import SequenceStatus
from .buffer import SampleBuffer
from .validation import sample_problem

logger = logging.getLogger(__name__)


class Packer(Protocol):
    """What the loops read of a ``PackedDataset``: its knobs, groups and sequence methods."""

    expected_num_tokens: int
    max_num_tokens_per_sample: int
    max_num_tokens: int
    prefer_buffer_before: int
    max_buffer_size: int
    group_names: list[str]
    is_mandatory: list[bool]
    grouped_weights: list[float]
    drops: DropLog

    @property
    def grouped_datasets(self) -> Sequence[Any]: ...

    @property
    def vit_patch_size(self) -> int: ...

    def set_sequence_status(self) -> SequenceStatus: ...

    def pack_sequence(self, sample: Mapping[str, Any], sequence_status: SequenceStatus) -> SequenceStatus: ...

    def to_tensor(self, sequence_status: SequenceStatus) -> dict[str, Any]: ...


def draw_group(cumprobs: list[float]) -> int:
    """The group a ``random.random()`` draw falls in (0 when it falls past the last cumulative probability)."""
    draw = random.random()
    for i, cumprob in enumerate(cumprobs):
        if draw < cumprob:
            return i
    return 0


def sample_tokens(sample: Mapping[str, Any]) -> int:
    """A sample's packed length: its tokens plus the two marker tokens of each sequence-plan item."""
    return int(sample["num_tokens"]) + 2 * len(sample["sequence_plan"])


class GroupDraws:
    """One stream's group iterators: the next valid sample of a group, and where it came from.

    ``finite`` (elastic epochs): a group whose iterator ends is marked exhausted instead of being
    an error, and ``cursor[g]`` keeps ``(unit, position)`` of the group's last drawn row.
    """

    def __init__(self, packer: Packer, iterators: list[Iterator[dict[str, Any]]], *, finite: bool = False) -> None:
        self.packer = packer
        self.iterators = iterators
        self.finite = finite
        self.exhausted = [False] * len(iterators)
        self.cursor: list[tuple[int, tuple[int, ...]] | None] = [None] * len(iterators)

    def origin_of(self, group: int) -> ParseOrigin | None:
        """Where the sample just drawn from ``group`` was parsed from, when its dataset notes it."""
        dataset = self.packer.grouped_datasets[group]
        return dataset.last_origin if isinstance(dataset, SourceIterableDataset) else None

    def next_sample(self, group: int) -> dict[str, Any] | None:
        """Next sample of a group, or None: malformed (counted and logged) or, when finite, none left."""
        try:
            sample = next(self.iterators[group])
        except StopIteration:
            if self.finite:
                self.exhausted[group] = True
                return None
            raise RuntimeError(
                f"dataset group {self.packer.group_names[group]!r} stopped yielding samples; grouped "
                "datasets must loop over their data forever"
            ) from None
        if self.finite:
            origin = self.origin_of(group)
            if origin is not None:
                self.cursor[group] = (origin.unit_position, tuple(origin.position))
        problem = sample_problem(sample, self.packer.vit_patch_size)
        if problem is not None:
            self.note_drop("malformed", sample, f"group {self.packer.group_names[group]!r}: {problem}")
            return None
        return sample

    def note_drop(self, reason: str, sample: Any, detail: str) -> None:
        where = sample.get("data_indexes") if isinstance(sample, Mapping) else None
        self.packer.drops.record(reason, {"data_indexes": where}, detail)


def finish(packer: Packer, status: SequenceStatus, batch_data_indexes: list[Any]) -> dict[str, Any]:
    """The batch of a full sequence, with the ``data_indexes`` of every sample in it."""
    batch = packer.to_tensor(status)
    batch["batch_data_indexes"] = batch_data_indexes
    logger.debug("yielding a packed sequence of %d tokens", batch["sequence_length"])
    return batch


def open_with_mandatory(
    packer: Packer, draws: GroupDraws, status: SequenceStatus, batch_data_indexes: list[Any]
) -> SequenceStatus:
    """Start a sequence with one sample of every mandatory group (strictly under the sample limit)."""
    for group in range(len(packer.grouped_datasets)):
        if not packer.is_mandatory[group]:
            continue
        while not draws.exhausted[group]:
            sample = draws.next_sample(group)
            if sample is None:
                continue
            num_tokens = sample_tokens(sample)
            if num_tokens < packer.max_num_tokens_per_sample:
                status = packer.pack_sequence(sample, status)
                batch_data_indexes.append(sample["data_indexes"])
                break
            draws.note_drop("oversize", sample, f"{num_tokens} tokens, not < {packer.max_num_tokens_per_sample}")
    return status


def reference_batches(packer: Packer, draws: GroupDraws, buffer: SampleBuffer) -> Iterator[dict[str, Any]]:
    """BAGEL's packing loop, endless, draw for draw."""
    total = sum(packer.grouped_weights)
    cumprobs = [sum(packer.grouped_weights[: i + 1]) / total for i in range(len(packer.grouped_weights))]
    status = packer.set_sequence_status()
    batch_data_indexes: list[Any] = []
    while True:
        if status.curr == 0:
            status = open_with_mandatory(packer, draws, status, batch_data_indexes)
        if status.curr < packer.prefer_buffer_before and buffer:
            sample: dict[str, Any] | None = buffer.pop_first()
            from_buffer = True
        else:
            group = draw_group(cumprobs)
            sample = draws.next_sample(group)
            from_buffer = False
        if sample is None:
            continue
        num_tokens = sample_tokens(sample)
        if num_tokens > packer.max_num_tokens_per_sample:
            draws.note_drop("oversize", sample, f"{num_tokens} tokens > {packer.max_num_tokens_per_sample}")
            continue
        if status.curr + num_tokens > packer.max_num_tokens:
            if len(buffer) < packer.max_buffer_size and not from_buffer:
                buffer.append(sample, group, draws.origin_of(group))
            else:
                # As in the reference, the sample that did not fit is not packed later.
                yield finish(packer, status, batch_data_indexes)
                status, batch_data_indexes = packer.set_sequence_status(), []
            continue
        status = packer.pack_sequence(sample, status)
        batch_data_indexes.append(sample["data_indexes"])
        if status.curr >= packer.expected_num_tokens:
            yield finish(packer, status, batch_data_indexes)
            status, batch_data_indexes = packer.set_sequence_status(), []


def _draw_live(weights: Sequence[float], live: Sequence[bool]) -> int:
    """A group drawn with ``random.random()`` among the live ones, by weight."""
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


def lossless_batches(packer: Packer, draws: GroupDraws, buffer: SampleBuffer) -> Iterator[dict[str, Any]]:
    """One epoch of packed batches in which every valid sample is packed exactly once.

    Groups are drawn by weight among those with samples left; a sample that does not fit goes
    back to the buffer (to its front when it came from there) and the sequence is yielded; once
    every group is exhausted the buffer is drained; the last, partial sequence is yielded too.
    Only a sample that cannot fit any sequence is dropped, and counted (``oversize``).
    """
    weights = packer.grouped_weights
    status = packer.set_sequence_status()
    batch_data_indexes: list[Any] = []
    opening = 0  # samples of the sequence put there by the mandatory groups
    while True:
        if status.curr == 0:
            status = open_with_mandatory(packer, draws, status, batch_data_indexes)
            opening = len(batch_data_indexes)
        live = [not done and weight > 0 for done, weight in zip(draws.exhausted, weights)]
        origin: ParseOrigin | None
        if buffer and (status.curr < packer.prefer_buffer_before or not any(live)):
            entry = buffer.entries.pop(0)
            sample, group, origin, from_buffer = entry.sample, entry.group, entry.origin, True
        elif any(live):
            group = _draw_live(weights, live)
            drawn = draws.next_sample(group)
            if drawn is None:
                continue
            sample, origin, from_buffer = drawn, draws.origin_of(group), False
        else:
            break
        num_tokens = sample_tokens(sample)
        if num_tokens > packer.max_num_tokens_per_sample or (
            len(batch_data_indexes) == opening and status.curr + num_tokens > packer.max_num_tokens
        ):
            draws.note_drop("oversize", sample, f"{num_tokens} tokens do not fit a sequence")
            continue
        if status.curr + num_tokens > packer.max_num_tokens:
            if from_buffer:
                buffer.push_front(sample, group, origin)
            else:
                buffer.append(sample, group, origin)
                if len(buffer) <= packer.max_buffer_size:
                    continue
            yield finish(packer, status, batch_data_indexes)
            status, batch_data_indexes = packer.set_sequence_status(), []
            continue
        status = packer.pack_sequence(sample, status)
        batch_data_indexes.append(sample["data_indexes"])
        if status.curr >= packer.expected_num_tokens:
            yield finish(packer, status, batch_data_indexes)
            status, batch_data_indexes = packer.set_sequence_status(), []
    if batch_data_indexes:
        yield finish(packer, status, batch_data_indexes)
