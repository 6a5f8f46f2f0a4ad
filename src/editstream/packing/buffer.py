"""The packer's buffer of samples that did not fit, and how a checkpoint keeps it small.

A buffered sample is saved as a reference: its group, its row (the unit's place in the worker's
list and the row's position) and the point the RNGs stood at when its parse began, plus its
token count as a check. Restoring parses those rows again (``recreate_samples`` of the group's
dataset), which gives the same tensors bit for bit, so the state stays a few kilobytes whatever
the images. A group whose dataset cannot recreate samples (one that is not a source dataset)
keeps its buffered samples literally, as the first state format did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..data.units import Unit
from ..loader.draws import RngPoint
from ..loader.recreate import ParseOrigin, RecreateError
from .groups import GroupDataset
from .rngchain import ChainEncoder, decode_points


@dataclass
class Buffered:
    """One waiting sample: the sample, its group's index and, when known, where its parse began."""

    sample: dict[str, Any]
    group: int
    origin: ParseOrigin | None


class SampleBuffer:
    """First in, first out: samples wait here until a sequence has room for them."""

    def __init__(self, entries: list[Buffered] | None = None) -> None:
        self.entries: list[Buffered] = entries or []

    def __len__(self) -> int:
        return len(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def pop_first(self) -> dict[str, Any]:
        return self.entries.pop(0).sample

    def append(self, sample: dict[str, Any], group: int, origin: ParseOrigin | None) -> None:
        self.entries.append(Buffered(sample, group, origin))

    def push_front(self, sample: dict[str, Any], group: int, origin: ParseOrigin | None) -> None:
        """Put a sample taken with ``pop_first`` back where it was (the lossless loop's undo)."""
        self.entries.insert(0, Buffered(sample, group, origin))

    def samples(self) -> list[dict[str, Any]]:
        return [entry.sample for entry in self.entries]


def buffer_state(
    buffer: SampleBuffer, current: RngPoint, group_names: Sequence[str], encoder: ChainEncoder
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The buffer as references (literal samples where no origin is known) and the RNG chain:
    the referenced samples' points in buffer order, then ``current``."""
    entries: list[dict[str, Any]] = []
    points: list[RngPoint] = []
    for entry in buffer.entries:
        name = group_names[entry.group]
        if entry.origin is None:
            entries.append({"group": name, "sample": entry.sample})
            continue
        entries.append(
            {
                "group": name,
                "unit": entry.origin.unit_position,
                "position": list(entry.origin.position),
                "num_tokens": int(entry.sample["num_tokens"]),
            }
        )
        points.append(entry.origin.point)
    return entries, encoder.encode([*points, current])


def restore_buffer(
    entries: Sequence[dict[str, Any]],
    chain: dict[str, Any],
    group_names: Sequence[str],
    datasets: Sequence[GroupDataset],
    unit_lists: Sequence[Sequence[Unit]] | None = None,
) -> tuple[SampleBuffer, RngPoint]:
    """The buffer and the RNG point a saved state names; referenced samples are parsed again.

    ``unit_lists[g]`` are the units group ``g``'s references index (default: the worker's own list).
    Leaves the global RNGs moved (the caller applies the returned point). Raises
    :class:`~editstream.loader.recreate.RecreateError` when a sample does not come back as saved.
    """
    points = decode_points(chain)
    referenced = [e for e in entries if "sample" not in e]
    if len(points) != len(referenced) + 1:
        raise RecreateError(f"the state's rng chain has {len(points)} points for {len(referenced)} buffered references")
    index = {name: i for i, name in enumerate(group_names)}
    origins: dict[int, list[tuple[int, ParseOrigin]]] = {}
    n = 0
    for slot, entry in enumerate(entries):
        if "sample" in entry:
            continue
        origin = ParseOrigin(int(entry["unit"]), tuple(int(p) for p in entry["position"]), points[n])
        origins.setdefault(index[entry["group"]], []).append((slot, origin))
        n += 1
    recreated: dict[int, tuple[dict[str, Any], ParseOrigin]] = {}
    for group, wanted in origins.items():
        recreate = getattr(datasets[group], "recreate_samples", None)
        if recreate is None:
            raise RecreateError(f"group {group_names[group]!r}: its dataset cannot recreate buffered samples")
        units = None if unit_lists is None else unit_lists[group]
        for (slot, origin), sample in zip(wanted, recreate([origin for _, origin in wanted], units)):
            if int(sample["num_tokens"]) != int(entries[slot]["num_tokens"]):
                raise RecreateError(
                    f"group {group_names[group]!r}: buffered row {entries[slot]['unit']}/{entries[slot]['position']} "
                    f"parsed again into {sample['num_tokens']} tokens, it had {entries[slot]['num_tokens']}"
                )
            recreated[slot] = (sample, origin)
    buffer = SampleBuffer()
    for slot, entry in enumerate(entries):
        if "sample" in entry:
            buffer.append(entry["sample"], index[entry["group"]], None)
        else:
            sample, origin = recreated[slot]
            buffer.append(sample, index[entry["group"]], origin)
    return buffer, points[-1]
