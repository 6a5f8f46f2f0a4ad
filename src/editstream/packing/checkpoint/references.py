"""A buffer of waiting samples as references to their rows (group, unit, row position, token count as a check;
the parse's RNG point in the chain), and the buffer those give back; a sample of unknown origin stays literal."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...data.units import Unit
from ...loader.origins import ParseOrigin, RecreateError, TracedDataset
from .chain import ChainEncoder, decode_points
from .points import RngPoint, apply_point


@dataclass
class Buffered:
    """A sample waiting in a run's buffer (FIFO), its group and, when known, where its parse began."""

    sample: dict[str, Any]
    group: int
    origin: ParseOrigin | None
    lead: bool = False
    """An exact epoch's sample that did not fit beside a mandatory opening: it opens the next sequence."""


SampleBuffer = list[Buffered]
"""A run's buffer, oldest first."""


def buffer_state(
    buffer: SampleBuffer, current: RngPoint, group_names: Sequence[str], encoder: ChainEncoder
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The buffer as references (literal samples where no origin is known) and the RNG chain:
    the referenced samples' points in buffer order, then ``current``."""
    entries: list[dict[str, Any]] = []
    points: list[RngPoint] = []
    for entry in buffer:
        origin, lead = entry.origin, {"lead": True} if entry.lead else {}
        if origin is None:
            entries.append({"group": group_names[entry.group], "sample": entry.sample, **lead})
            continue
        row = {"unit": origin.unit_position, "position": list(origin.position)}
        entries.append(
            {"group": group_names[entry.group], **row, "num_tokens": int(entry.sample["num_tokens"]), **lead}
        )
        points.append(origin.point)
    return entries, encoder.encode([*points, current])


def restore_buffer(
    entries: Sequence[dict[str, Any]],
    chain: dict[str, Any],
    group_names: Sequence[str],
    datasets: Sequence[object],
    unit_lists: Sequence[Sequence[Unit]] | None = None,
) -> tuple[SampleBuffer, RngPoint]:
    """The buffer and the RNG point a saved state names, referenced samples parsed again (from ``unit_lists[g]``,
    default the worker's own); a ``RecreateError`` when one does not come back as saved. Moves the global RNGs."""
    try:
        points = decode_points(chain)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RecreateError(f"the state's rng chain is malformed ({type(exc).__name__}: {str(exc):.120})") from exc
    referenced = [e for e in entries if "sample" not in e]
    if len(points) != len(referenced) + 1:
        raise RecreateError(f"the state's rng chain has {len(points)} points for {len(referenced)} buffered references")
    index = {name: i for i, name in enumerate(group_names)}
    wanted: dict[int, list[tuple[int, ParseOrigin]]] = {}
    for slot, entry in enumerate(referenced):
        try:
            origin = ParseOrigin(int(entry["unit"]), tuple(int(p) for p in entry["position"]), points[slot])
            group = index[entry["group"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise RecreateError(f"buffered entry {slot} of the state is malformed: {entry!r:.120}") from exc
        wanted.setdefault(group, []).append((slot, origin))
    recreated: dict[int, tuple[dict[str, Any], ParseOrigin]] = {}
    for group, origins in wanted.items():
        units = None if unit_lists is None else unit_lists[group]
        recreated.update(_recreate(group_names[group], datasets[group], origins, referenced, units))
    buffer: SampleBuffer = []
    slots = itertools.count()
    for entry in entries:
        sample, parsed_at = (entry["sample"], None) if "sample" in entry else recreated[next(slots)]
        buffer.append(Buffered(sample, index[entry["group"]], parsed_at, lead=bool(entry.get("lead", False))))
    return buffer, points[-1]


def _recreate(
    name: str,
    dataset: object,
    origins: Sequence[tuple[int, ParseOrigin]],
    referenced: Sequence[dict[str, Any]],
    units: Sequence[Unit] | None,
) -> dict[int, tuple[dict[str, Any], ParseOrigin]]:
    """One group's referenced samples parsed again, by slot, each checked against its saved token count."""
    if not isinstance(dataset, TracedDataset):
        raise RecreateError(f"group {name!r}: its dataset cannot recreate buffered samples")
    samples = dataset.recreate_samples([origin for _, origin in origins], units, apply_point)
    out = {}
    for (slot, origin), sample in zip(origins, samples):
        saved = referenced[slot]
        if int(sample["num_tokens"]) != int(saved["num_tokens"]):
            raise RecreateError(
                f"group {name!r}: buffered row {saved['unit']}/{saved['position']} "
                f"parsed again into {sample['num_tokens']} tokens, it had {saved['num_tokens']}"
            )
        out[slot] = (sample, origin)
    return out
