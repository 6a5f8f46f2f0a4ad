"""Adapters: public image-editing datasets in their own Hub schemas -> BAGEL-format edit rows.

A mapping (:class:`AdapterMapping`, :func:`load_mapping`; the built-in ones are
:func:`builtin_names`) says which columns form the edit chain. :func:`adapt` writes BAGEL parquet,
:func:`run_adapter` adapts then converts (``convert --from``), :func:`peek` reads the first chains
in place (``preview --from``), an :class:`InPlace` entry trains on the source in place
(``dataset_info``'s ``from:``, ``stream --from``). This layer uses the converter's public API only.
"""

from __future__ import annotations

from .builtin import builtin_names, builtin_path, resolve_mapping
from .inplace import InPlace
from .mapping import AdapterMapping, InstructionSource, MappingError, load_mapping, mapping_from_dict
from .peek import Peeked, peek
from .pipeline import run_adapter, staging_dir
from .run import NoChainsError, adapt
from .values import BadValue
from .where import Filter, FilterError, parse_filter

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
