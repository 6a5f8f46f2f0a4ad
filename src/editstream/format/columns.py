"""Column types in one normalised notation (field names dropped, large/view variants folded), so a
column of the wrong type is caught when a source is opened, not as one-character instructions at training."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_FIELD_NAME = re.compile(r"(?<=<)\s*[\w.]+\s*:\s*")
_VARIANTS = {
    "binary": ("large_binary", "binary_view", "fixed_size_binary"),
    "string": ("large_string", "large_utf8", "utf8", "string_view"),
    "list": ("large_list", "list_view", "large_list_view", "fixed_size_list"),
}
_ALIASES = {variant: base for base, variants in _VARIANTS.items() for variant in variants}
_WORD = re.compile(r"[a-z_]+")


class ColumnTypeError(ValueError):
    """A source whose columns do not have the types its dataset parses: a configuration error, not a bad row."""


def normalize_type(arrow_type: Any) -> str:
    """``list<element: large_binary>`` -> ``list<binary>``: the notation column checks compare."""
    text = str(arrow_type).strip().lower()
    text = _FIELD_NAME.sub("", text)
    text = re.sub(r"\[[^\]]*\]", "", text)  # fixed_size_list<...>[3], fixed_size_binary[16]
    return _WORD.sub(lambda m: _ALIASES.get(m.group(0), m.group(0)), text).replace(" ", "")


def column_type_problems(actual: Mapping[str, Any], expected: Mapping[str, str]) -> list[str]:
    """Each expected column that is missing or of another type, as ``"column 'x' is T, expected U"``."""
    problems = []
    for column, want in expected.items():
        if column not in actual:
            problems.append(f"column {column!r} is missing (columns: {sorted(actual)})")
            continue
        got = normalize_type(actual[column])
        if got != normalize_type(want):
            problems.append(f"column {column!r} is {got}, expected {normalize_type(want)}")
    return problems
