"""The two packing runs behind one interface: :class:`ReferenceRun` (BAGEL's endless stream) and
:class:`ElasticRun` (exact epochs resumable at any layout); ``PackedDataset`` never asks which it has."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from ..roles import PackingHost
from .elastic import ElasticRun
from .reference import ReferenceRun


class PackingRun(Protocol):
    """Batches, state, load: what a ``PackedDataset`` asks of its run."""

    epoch: int

    def batches(self) -> Iterator[dict[str, Any]]:
        """One iteration's batches (resuming a loaded state when there is one)."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue after the last yielded batch."""

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Prepare the next iteration to resume from ``state`` (checked against this dataset)."""

    def set_epoch(self, seed: int) -> None:
        """What the run does with the packer's ``set_epoch`` seed beyond remembering it."""

    def start_epoch(self, epoch: int) -> None:
        """Make the next iteration run epoch ``epoch`` from its start (elastic epochs)."""


def packing_run(packer: PackingHost) -> PackingRun:
    """The run the packer's spec asks for: elastic epochs when ``spec.elastic``, else the reference's stream."""
    spec = packer.spec
    return ElasticRun(packer, spec.elastic_streams) if spec.elastic else ReferenceRun(packer)
