"""Joining the ranks' elastic states (found at any nesting of loader or dataset states) into one any layout
loads; whatever would make the resumed epoch inexact is an error naming the numbers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .formats import ELASTIC_FORMAT, ELASTIC_FORMATS, MERGED_FORMAT, MERGED_FORMATS, OLD_MERGED_FORMAT, elastic_state

STEPS_SINCE_SNAPSHOT = "_steps_since_snapshot"
"""torchdata's key for the batches a StatefulDataLoader yielded after its last worker snapshot."""
SNAPSHOT, LAST_WORKER, WORKER_SNAPSHOTS = "_snapshot", "_last_yielded_worker_id", "_worker_snapshots"
"""torchdata's keys for a loader's snapshot, the worker that yielded its last batch, and each worker's state."""


def _elastic_parts(obj: Any, where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if isinstance(obj, Mapping):
        if obj.get("format") in ELASTIC_FORMATS:
            yield where, obj
            return
        behind = obj.get(STEPS_SINCE_SNAPSHOT)
        if isinstance(behind, int) and behind > 0:
            raise ValueError(
                f"{where}: this loader state is {behind} batch(es) past its last worker snapshot, so its "
                f"streams' positions are not the consumed ones; build the loader with snapshot_every_n_steps=1"
            )
        for key, value in obj.items():
            yield from _elastic_parts(value, f"{where}.{key}")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from _elastic_parts(value, f"{where}[{i}]")


def _same(parts: Sequence[tuple[str, Mapping[str, Any]]], key: str) -> Any:
    first_where, first = parts[0]
    for where, part in parts[1:]:
        if part[key] != first[key]:
            raise ValueError(
                f"cannot merge: {first_where} has {key}={first[key]!r} but {where} has {key}={part[key]!r}; "
                f"the states are from different runs"
            )
    return first[key]


def merge_states(states: Sequence[Any]) -> dict[str, Any]:
    """One layout-free elastic state from a list of every rank's saved state, for every rank of the new layout
    to load (``dataloader.load_state_dict``); each worker takes its streams from it."""
    if isinstance(states, Mapping) or not isinstance(states, Sequence) or not states:
        raise ValueError("merge_states takes a non-empty list of saved states, one per rank")
    parts = [part for i, state in enumerate(states) for part in _elastic_parts(state, f"state[{i}]")]
    if not parts:
        raise ValueError(
            f"none of the {len(states)} states holds an elastic packer state; merge_states needs states "
            f"saved with elastic: true in the dataset config"
        )
    version = _same(parts, "format")
    num_streams = _same(parts, "num_streams")
    epoch, print_ = _same(parts, "epoch"), _same(parts, "fingerprint")
    streams: dict[str, Any] = {}
    for where, part in parts:
        for key, stream_state in part["streams"].items():
            if key in streams:
                raise ValueError(f"cannot merge: stream {key} is in two states (again at {where}); one state per rank")
            streams[key] = stream_state
    missing = [s for s in range(num_streams) if str(s) not in streams]
    if missing:
        raise ValueError(
            f"cannot merge: streams {missing} of {num_streams} are in none of the {len(states)} states; "
            f"pass the state of every rank that ran"
        )
    if version != ELASTIC_FORMAT:
        return elastic_state(num_streams, epoch, print_, streams, OLD_MERGED_FORMAT)
    merged = elastic_state(num_streams, epoch, print_, streams, MERGED_FORMAT)
    merged["turns"] = [turn for state in states for turn in _next_turns(state)]
    return merged


def _loader_snapshots(obj: Any) -> Iterator[Mapping[str, Any]]:
    """The torchdata snapshots (a loader with workers) at any nesting of ``obj``."""
    if isinstance(obj, Mapping):
        snapshot = obj.get(SNAPSHOT)
        if isinstance(snapshot, Mapping) and LAST_WORKER in snapshot and WORKER_SNAPSHOTS in snapshot:
            yield snapshot
            return
        for value in obj.values():
            yield from _loader_snapshots(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _loader_snapshots(value)


def _next_turns(state: Any) -> Iterator[list[int]]:
    """For each loader with workers in ``state``: the streams of the worker whose batch comes next (the one after
    the last to yield that has rows left), so the same layout resumes that worker's turn first."""
    for snapshot in _loader_snapshots(state):
        workers = snapshot[WORKER_SNAPSHOTS]
        count = len(workers)
        last = snapshot[LAST_WORKER]
        if not isinstance(last, int) or count == 0:
            continue
        for step in range(1, count + 1):
            parts = [part for _, part in _elastic_parts(workers.get(f"worker_{(last + step) % count}"), "worker")]
            streams = {key: stream for part in parts for key, stream in part["streams"].items()}
            if streams and not all(stream.get("done") for stream in streams.values()):
                yield sorted(int(key) for key in streams)
                break


def saved_progress(state: Any) -> tuple[int, bool] | None:
    """``(epoch, every stream there and done)`` of the elastic state(s) inside ``state``, or None if none is usable."""
    try:
        parts = [state] if isinstance(state, Mapping) and state.get("format") in MERGED_FORMATS else None
        parts = parts or [part for _, part in _elastic_parts(state, "state")]
    except ValueError:
        return None
    if not parts:
        return None
    streams = {key: stream for part in parts for key, stream in part["streams"].items()}
    every_stream = len(streams) == int(parts[0]["num_streams"])  # a rank's own part may be done while others run
    return int(parts[0]["epoch"]), every_stream and all(stream.get("done") for stream in streams.values())
