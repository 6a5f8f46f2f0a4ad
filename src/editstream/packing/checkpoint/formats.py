"""The state formats a ``PackedDataset`` saves, the checks a state passes before it loads, copies."""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

STATE_FORMAT = "editstream.PackedDataset/2"
"""The reference run's state: buffered samples as references to their rows, the RNG states as a chain."""
LITERAL_STATE_FORMAT = "editstream.PackedDataset/1"
"""The first format: buffered samples with their tensors, the RNG states as captured. Still loads."""
STATE_FORMATS = (STATE_FORMAT, LITERAL_STATE_FORMAT)
ELASTIC_FORMAT = "editstream.ElasticPacked/2"
"""One physical worker's elastic state: the states of the logical streams it runs (each with its batch count and,
per exhausted group, the share length it ended at, so a state can be checked against itself)."""
MERGED_FORMAT = "editstream.ElasticMerged/2"
"""Every stream's state, from :func:`~editstream.packing.checkpoint.merge.merge_states`: loads into any layout."""
OLD_ELASTIC_FORMAT = "editstream.ElasticPacked/1"
OLD_MERGED_FORMAT = "editstream.ElasticMerged/1"
"""The first elastic formats (no batch counts, no share ends): still load, with the checks they allow."""
ELASTIC_FORMATS = (ELASTIC_FORMAT, OLD_ELASTIC_FORMAT)
MERGED_FORMATS = (MERGED_FORMAT, OLD_MERGED_FORMAT)
STATE_KEYS = (
    "started",
    "rank",
    "world_size",
    "num_workers",
    "worker_id",
    "data_seed",
    "global_seed",
    "buffer",
    "rng",
    "datasets",
)


def elastic_state(
    num_streams: int, epoch: int, fingerprint: dict[str, Any], streams: dict[str, Any], fmt: str = ELASTIC_FORMAT
) -> dict[str, Any]:
    """An elastic state: one worker's (or, ``MERGED_FORMAT``, every rank's) streams and the fingerprint they
    were taken over."""
    return {"format": fmt, "num_streams": num_streams, "epoch": epoch, "fingerprint": fingerprint, "streams": streams}


def restore_rng(states: Mapping[str, Any]) -> None:
    """Put back the RNG states of a format-1 state (also after a JSON round trip turned tuples into lists)."""
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    np.random.set_state(tuple(states["numpy"]))
    torch.set_rng_state(states["torch"])


def copy_tree(obj: Any) -> Any:
    """Deep copy of containers and numpy arrays; torch tensors are shared (the packer never writes into them)."""
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, dict):
        return {key: copy_tree(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [copy_tree(value) for value in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(copy_tree(value) for value in obj)
    if isinstance(obj, np.ndarray):
        return obj.copy()
    return copy.deepcopy(obj)


def check_resumable(state: Any, layout: Mapping[str, Any], group_names: list[str]) -> None:
    """Raise ``ValueError`` unless ``state`` is a complete packer state saved with this ``layout`` and groups."""
    if not isinstance(state, Mapping) or state.get("format") not in STATE_FORMATS:
        found = state.get("format") if isinstance(state, Mapping) else type(state).__name__
        raise ValueError(f"not a PackedDataset state (expected format {STATE_FORMAT!r}, got {found!r})")
    missing = [key for key in STATE_KEYS if key not in state]
    if missing:
        raise ValueError(f"PackedDataset state lacks {missing}; it may be truncated or from another tool")
    for key, mine in layout.items():
        if state[key] != mine:
            raise ValueError(
                f"cannot resume: the state was saved with {key}={state[key]} but this dataset has "
                f"{key}={mine}; resume requires the same rank / world_size / num_workers layout"
            )
    saved_groups = list(state["datasets"])
    if saved_groups != group_names:
        raise ValueError(f"cannot resume: the state has dataset groups {saved_groups}, this dataset has {group_names}")


NEMO_STATE_KEYS = ("version", "yielded_batches", "buffer", "sequence_status", "rng", "grouped_dataset_states")
"""The keys of NeMo Automodel's ``PackedDataset.state_dict()`` (its version 1)."""


def is_nemo_state(state: Any) -> bool:
    """Whether ``state`` is what NeMo Automodel's own ``PackedDataset.state_dict()`` returns."""
    return isinstance(state, Mapping) and "format" not in state and all(key in state for key in NEMO_STATE_KEYS)


def from_nemo_state(state: Mapping[str, Any], layout: Mapping[str, Any], group_names: list[str]) -> dict[str, Any]:
    """NeMo's packer state as editstream's format-1 state (a switched ``recipe:`` keeps its data position);
    NeMo records no layout or seeds, so this dataset's (``layout``) are taken: resume at the same layout."""
    if state["version"] != 1:
        raise ValueError(f"cannot resume from NeMo's PackedDataset state version {state['version']} (reads 1)")
    sequence = state["sequence_status"]
    curr = sequence.get("curr", 0) if isinstance(sequence, Mapping) else getattr(sequence, "curr", 0)
    if curr:
        raise ValueError("cannot resume from a NeMo state taken with a sequence half packed")
    datasets = list(state["grouped_dataset_states"])
    if len(datasets) != len(group_names):
        raise ValueError(
            f"cannot resume: NeMo's state has {len(datasets)} dataset groups, this dataset has {group_names}"
        )
    return {
        "format": LITERAL_STATE_FORMAT,
        "started": True,
        **layout,
        "buffer": list(state["buffer"]),
        "rng": state["rng"],
        "datasets": {name: dataset or {} for name, dataset in zip(group_names, datasets)},
    }
