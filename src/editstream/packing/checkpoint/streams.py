"""Elastic states: per stream, each group's last unit and row read (or exhausted), its buffer and RNG chain;
per worker, its streams and the fingerprint (groups, unit counts, seed) a resume must match. Checks on load."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...data.units import Unit
from ...loader.origins import ParseOrigin
from .chain import ChainEncoder
from .formats import ELASTIC_FORMAT, MERGED_FORMAT, MERGED_FORMATS, OLD_ELASTIC_FORMAT, OLD_MERGED_FORMAT
from .points import RngPoint
from .references import SampleBuffer, buffer_state


class Cursors(Protocol):
    """Where a stream's reading is: each group's last drawn row (an origin) and whether the group ran out."""

    origins: list[ParseOrigin | None]
    exhausted: list[bool]


@dataclass
class StreamRun:
    """One logical stream in a worker (batches, cursors, buffer, RNG point): the elastic run's, saved here."""

    stream: int
    draws: Cursors
    buffer: SampleBuffer
    rng: RngPoint
    shares: list[int]
    """Units of each group in this stream's share of the epoch (an exhausted group's state says it ended there)."""
    batches_of: Iterator[dict[str, Any]] | None = None
    started: bool = False
    done: bool = False
    batches: int = 0
    """Batches this stream has yielded in the epoch: the fewest goes next, so a resume keeps the turns."""
    encoder: ChainEncoder = field(default_factory=ChainEncoder)


def fingerprint(group_names: Sequence[str], unit_lists: Sequence[Sequence[Unit]], seed: int) -> dict[str, Any]:
    """What a state must agree on to resume exactly: groups, their unit counts and the seed."""
    return {"groups": list(group_names), "units": [len(units) for units in unit_lists], "seed": seed}


def not_started(stream: int, epoch: int) -> dict[str, Any]:
    """The state of a stream that has not yielded yet in ``epoch``."""
    return {"stream": stream, "epoch": epoch, "started": False, "done": False, "batches": 0}


def stream_state(run: StreamRun, epoch: int, group_names: Sequence[str]) -> dict[str, Any]:
    """One stream's state (JSON-ready): where each group's reading is, its buffer and RNG point."""
    if not run.started:
        return not_started(run.stream, epoch)
    buffer, chain = buffer_state(run.buffer, run.rng, group_names, run.encoder)
    groups = [
        {
            "unit": None if origin is None else origin.unit_position,
            "position": None if origin is None else list(origin.position),
            "exhausted": exhausted,
            "end": share if exhausted else None,
        }
        for origin, exhausted, share in zip(run.draws.origins, run.draws.exhausted, run.shares)
    ]
    head = {**not_started(run.stream, epoch), "started": True, "done": run.done, "batches": run.batches}
    return {**head, "groups": groups, "buffer": buffer, "rng": chain}


def saved_cursors(saved: Mapping[str, Any]) -> tuple[list[ParseOrigin | None], list[bool]]:
    """Each group's last drawn row (an origin without a point) and exhausted flag, of a started stream's state."""
    origins: list[ParseOrigin | None] = [
        None if e["unit"] is None else ParseOrigin(int(e["unit"]), tuple(e["position"]), None) for e in saved["groups"]
    ]
    return origins, [bool(entry["exhausted"]) for entry in saved["groups"]]


def resume_at(order: list[int], entry: Mapping[str, Any], group: str, epoch: int) -> tuple[int, tuple[int, ...] | None]:
    """Where a group's reading goes on in a stream's share ``order``: (index in it, row to resume after)."""
    if entry["exhausted"]:
        return len(order), None
    if entry["unit"] is None:
        return 0, None
    unit = int(entry["unit"])
    if unit not in order:
        raise ValueError(
            f"elastic: group {group!r}: the state's unit {unit} is not in this stream's share of epoch {epoch}; "
            f"the state is from other data or another seed"
        )
    return order.index(unit), tuple(int(p) for p in entry["position"])


def check_share_ends(saved: Mapping[str, Any], shares: Sequence[int], group_names: Sequence[str]) -> None:
    """Refuse a started stream state whose exhausted groups ended at another share length than this epoch gives
    the stream (``shares``: units per group): a flag flipped by hand would lose that share's rows unread."""
    for g, (entry, share) in enumerate(zip(saved["groups"], shares)):
        end = entry.get("end")
        if end is not None and end != share:
            raise StateError(
                f"elastic state: streams[{saved['stream']}].groups[{g}] ({group_names[g]!r}) says its share ended "
                f"after {end} units, but stream {saved['stream']}'s share of epoch {saved['epoch']} has {share}; "
                f"the state does not add up (edited by hand, or from other data)"
            )


class StateError(ValueError):
    """A saved elastic state that is malformed or impossible (edited, truncated, or from another run)."""


def _field(state: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    """``state[key]``, refused (naming ``where.key``) when missing or not one of ``kinds``."""
    if not isinstance(state, Mapping) or key not in state:
        raise StateError(f"elastic state: {where} has no {key!r}; the state is truncated or not an elastic state")
    value = state[key]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise StateError(f"elastic state: {where}.{key} is {value!r:.80}, not {names}")
    return value


def _check_group_entry(entry: Any, where: str, counted: bool) -> bool:
    """Check one group's place in a stream's state (``counted``: a format that says where an exhausted group's
    share ended); return its ``exhausted`` flag."""
    unit = _field(entry, "unit", (int, type(None)), where)
    position = _field(entry, "position", (list, type(None)), where)
    exhausted = bool(_field(entry, "exhausted", (bool,), where))
    end = _field(entry, "end", (int, type(None)), where) if counted else None
    if counted and exhausted != (end is not None):
        said = f"exhausted but no end of its share (end={end!r})" if exhausted else f"not exhausted but ended at {end}"
        raise StateError(f"elastic state: {where} is {said}; the state does not add up (edited by hand?)")
    if (unit is None) != (position is None) or (unit is not None and unit < 0):
        raise StateError(f"elastic state: {where} has unit {unit!r} with position {position!r}")
    if position is not None and not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in position):
        raise StateError(f"elastic state: {where}.position {position!r:.80} is not a list of row indexes")
    return exhausted


def check_stream_state(saved: Any, stream: int, epoch: int, group_names: Sequence[str], counted: bool = True) -> None:
    """Refuse a stream state that is malformed or impossible (another stream's or epoch's, a group missing, a bad
    position, ``done`` with rows left, an exhausted group that says no end) before anything is resumed from it."""
    where = f"streams[{stream}]"
    if counted and _field(saved, "batches", (int,), where) < 0:
        raise StateError(f"elastic state: {where}.batches is {saved['batches']}, not a count of batches")
    if _field(saved, "stream", (int,), where) != stream or _field(saved, "epoch", (int,), where) != epoch:
        raise StateError(
            f"elastic state: {where} holds stream {saved['stream']} of epoch {saved['epoch']}, "
            f"not stream {stream} of epoch {epoch}"
        )
    started, done = _field(saved, "started", (bool,), where), _field(saved, "done", (bool,), where)
    if not started:
        if done:
            raise StateError(f"elastic state: {where} is done but never started")
        return
    groups = _field(saved, "groups", (list,), where)
    if len(groups) != len(group_names):
        raise StateError(f"elastic state: {where}.groups has {len(groups)} entries for the {len(group_names)} groups")
    exhausted = [_check_group_entry(entry, f"{where}.groups[{g}]", counted) for g, entry in enumerate(groups)]
    buffer = _field(saved, "buffer", (list,), where)
    _field(saved, "rng", (dict,), where)
    if done and (not all(exhausted) or buffer):
        left = [name for name, gone in zip(group_names, exhausted) if not gone]
        raise StateError(
            f"elastic state: {where} is done but has rows left (groups not exhausted: {left}, "
            f"{len(buffer)} buffered samples); the state was edited"
        )


def check_elastic_state(
    state: Any, num_streams: int | None, fingerprint_now: Callable[[], dict[str, Any]]
) -> tuple[int, dict[str, Any] | None, int]:
    """Check an elastic state (a worker's or merged) against this dataset and the config's ``num_streams`` (if
    set); return ``(epoch, saved streams by id or None to start it fresh, number of streams)``."""
    found = state.get("format") if isinstance(state, Mapping) else type(state).__name__
    if found not in (ELASTIC_FORMAT, MERGED_FORMAT, OLD_ELASTIC_FORMAT, OLD_MERGED_FORMAT):
        what = "an empty state" if state == {} else f"a state of format {found!r}"
        raise StateError(
            f"cannot resume: this dataset is elastic but was given {what}; an elastic dataset resumes "
            f"from a state saved with elastic: true (or editstream.merge_states of such states)"
        )
    saved_streams = _field(state, "num_streams", (int,), "state")
    if saved_streams < 1:
        raise StateError(f"elastic state: state.num_streams is {saved_streams}, not a positive number")
    epoch = int(_field(state, "epoch", (int,), "state"))
    _field(state, "fingerprint", (dict,), "state")
    streams = dict(_field(state, "streams", (dict,), "state"))
    if num_streams is not None and saved_streams != num_streams:
        raise ValueError(
            f"cannot resume: the state has {saved_streams} logical streams, the config sets "
            f"elastic_streams={num_streams}; an epoch resumes exactly only with the same streams"
        )
    mine = fingerprint_now()
    if state["fingerprint"] != mine:
        raise ValueError(
            f"cannot resume: the state was saved over {state['fingerprint']}, this dataset reads {mine} "
            f"(groups, units per group, seed); an elastic epoch resumes only over the same data and seed"
        )
    for key, saved in streams.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) < saved_streams):
            last = saved_streams - 1
            raise StateError(f"elastic state: state.streams has key {key!r:.40}, not a stream of 0..{last}")
        check_stream_state(saved, int(key), epoch, mine["groups"], counted=found in (ELASTIC_FORMAT, MERGED_FORMAT))
    if found in MERGED_FORMATS and all(s.get("done") for s in streams.values()):
        return epoch + 1, None, saved_streams  # the saved epoch was complete: go on with the next
    return epoch, streams, saved_streams
