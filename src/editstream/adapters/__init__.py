"""Adapters: public image-editing datasets in their own Hub schemas -> BAGEL-format edit rows.

A mapping says which columns form the edit chain; :func:`adapt` writes BAGEL parquet, :func:`run_adapter`
also converts it, :func:`peek` previews it and :class:`InPlace` trains on the source in place.
"""

from __future__ import annotations

from ..data.adapted.chains import BadValue
from ..data.adapted.inplace import InPlace, Peeked, peek
from ..data.adapted.mapping import (
    AdapterMapping,
    InstructionSource,
    MappingError,
    builtin_names,
    builtin_path,
    load_mapping,
    mapping_from_dict,
    resolve_mapping,
)
from ..data.adapted.where import Filter, FilterError, parse_filter
from .run import NoChainsError, adapt, run_adapter, staging_dir

__all__ = [
    "AdapterMapping",
    "BadValue",
    "Filter",
    "FilterError",
    "InPlace",
    "InstructionSource",
    "MappingError",
    "NoChainsError",
    "Peeked",
    "adapt",
    "builtin_names",
    "builtin_path",
    "load_mapping",
    "mapping_from_dict",
    "parse_filter",
    "peek",
    "resolve_mapping",
    "run_adapter",
    "staging_dir",
]
