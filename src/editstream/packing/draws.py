"""Drawing samples for both packing runs: each checked, with the origin that lets a buffered sample be saved
as a reference; the mandatory opening of a sequence; a finished sequence's batch."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from ..loader.origins import ParseOrigin, Traced, TracedDataset
from .accumulator import SequenceStatus
from .checkpoint.points import draw_point
from .roles import SequencePacking
from .spec import PackingSpec
from .validation import sample_problem

logger = logging.getLogger(__name__)


def draw_group(cumprobs: list[float]) -> int:
    """The group a ``random.random()`` draw falls in (0 when it falls past the last cumulative probability)."""
    draw = random.random()
    return next((i for i, cumprob in enumerate(cumprobs) if draw < cumprob), 0)


def sample_tokens(sample: Mapping[str, Any]) -> int:
    """A sample's packed length: its tokens plus the two marker tokens of each sequence-plan item."""
    return int(sample["num_tokens"]) + 2 * len(sample["sequence_plan"])


def limit_exceeded(num_tokens: int, spec: PackingSpec) -> str | None:
    """The limit ``num_tokens`` packed tokens are over (it fits no sequence: an exact epoch's ``oversize``), or None."""
    if num_tokens > spec.max_num_tokens_per_sample:
        return "max_num_tokens_per_sample"
    if num_tokens > spec.max_num_tokens:
        return "max_num_tokens"
    return None


def traced(dataset: Any) -> Traced:
    """A group's endless stream, each sample with its origin (``None`` from a dataset that is not traced)."""
    if isinstance(dataset, TracedDataset):
        return dataset.iter_with_origins(draw_point)
    return ((sample, None) for sample in dataset)


class GroupDraws:
    """One stream's group iterators: the next valid sample of a group, and where it came from (``origins``).
    ``finite`` (elastic epochs): a group that ends is marked exhausted instead of being an error."""

    def __init__(self, packer: SequencePacking, iterators: list[Traced], *, finite: bool = False) -> None:
        self.packer = packer
        self.iterators = iterators
        self.finite = finite
        self.exhausted = [False] * len(iterators)
        self.origins: list[ParseOrigin | None] = [None] * len(iterators)

    def next_sample(self, group: int) -> dict[str, Any] | None:
        """Next sample of a group, or None: malformed (counted and logged) or, when finite, none left."""
        try:
            sample, self.origins[group] = next(self.iterators[group])
        except StopIteration:
            if self.finite:
                self.exhausted[group] = True
                return None
            raise RuntimeError(
                f"dataset group {self.packer.group_names[group]!r} stopped yielding samples; grouped "
                "datasets must loop over their data forever"
            ) from None
        problem = sample_problem(sample, self.packer.spec.vit_patch_size)
        if problem is not None:
            self.note_drop("malformed", sample, f"group {self.packer.group_names[group]!r}: {problem}")
            return None
        return sample

    def note_drop(self, reason: str, sample: Any, detail: str) -> None:
        """Count a sample the packer skipped (``malformed``, ``oversize``), with where it came from."""
        where = sample.get("data_indexes") if isinstance(sample, Mapping) else None
        self.packer.drops.record(reason, {"data_indexes": where}, detail)


def finish(packer: SequencePacking, status: SequenceStatus, batch_data_indexes: list[Any]) -> dict[str, Any]:
    """The batch of a full sequence, with the ``data_indexes`` of every sample in it."""
    batch = packer.to_tensor(status)
    batch["batch_data_indexes"] = batch_data_indexes
    logger.debug("yielding a packed sequence of %d tokens", batch["sequence_length"])
    return batch


def open_with_mandatory(
    packer: SequencePacking, draws: GroupDraws, status: SequenceStatus, batch_data_indexes: list[Any]
) -> SequenceStatus:
    """Start a sequence with one sample of every mandatory group (strictly under the sample limit)."""
    for group, mandatory in enumerate(packer.is_mandatory):
        while mandatory and not draws.exhausted[group]:
            sample = draws.next_sample(group)
            if sample is None:
                continue
            num_tokens = sample_tokens(sample)
            if num_tokens < packer.spec.max_num_tokens_per_sample:
                status = packer.pack_sequence(sample, status)
                batch_data_indexes.append(sample["data_indexes"])
                break
            draws.note_drop("oversize", sample, f"{num_tokens} tokens, not < {packer.spec.max_num_tokens_per_sample}")
    return status
