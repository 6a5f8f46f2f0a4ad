"""Dataset kinds: what a kind is (:class:`DatasetKind`) and the registry every layer loops over."""

from __future__ import annotations

from .record import Certainty, DatasetKind, Part, RowCheck, RowNotes, RowProblem, resolve
from .registry import (
    ENTRY_POINT_GROUP,
    UnknownKindError,
    all_kinds,
    detect_kind,
    get_kind,
    kind_choices,
    kind_of_dataset,
    register,
    unregister,
)
from .shapes import SourceShape

__all__ = [
    "ENTRY_POINT_GROUP",
    "Certainty",
    "DatasetKind",
    "Part",
    "RowCheck",
    "RowNotes",
    "RowProblem",
    "SourceShape",
    "UnknownKindError",
    "all_kinds",
    "detect_kind",
    "get_kind",
    "kind_choices",
    "kind_of_dataset",
    "register",
    "resolve",
    "unregister",
]
