"""Dataset kinds: :class:`DatasetKind`, the registry, and each built-in kind as a package (record, dataset,
preview, synth)."""

from __future__ import annotations

from .record import Certainty, DatasetKind, KindPathError, Part, RowCheck, RowNotes, RowProblem, resolve
from .registry import (
    ENTRY_POINT_GROUP,
    AmbiguousKindError,
    KindPluginError,
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
    "AmbiguousKindError",
    "Certainty",
    "DatasetKind",
    "KindPathError",
    "KindPluginError",
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
