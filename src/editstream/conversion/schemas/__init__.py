"""Source-schema checks for the converter: one small module per known schema.

``vlm_sft`` is the one schema whose source is a JSONL file (plus a media directory), not
parquet; it is chosen by the ``.jsonl`` suffix or by name, never detected from columns.

A schema module exposes ``NAME``, ``REQUIRED_COLUMNS`` and ``check_row(row) -> str | None``
(the reason a row would fail the training-time parser, or ``None``). ``generic`` accepts any
columns and checks nothing, for datasets that only need the lossless conversion.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import ModuleType

from ...format.columns import ColumnTypeError, column_type_problems
from . import generic, t2i, unified_edit, vlm_sft

_MODULES: tuple[ModuleType, ...] = (unified_edit, t2i, vlm_sft, generic)
_ALIASES = {
    "t2i": t2i.NAME,
    "t2i_pretrain": t2i.NAME,
    "unified_edit": unified_edit.NAME,
    "vlm_sft": vlm_sft.NAME,
    "generic": generic.NAME,
}

SCHEMA_NAMES = tuple(m.NAME for m in _MODULES)


def canonical_name(name: str) -> str:
    """The canonical schema name for ``name`` (``t2i`` is an alias of ``t2i_pretrain``)."""
    try:
        return _ALIASES[name]
    except KeyError:
        raise ValueError(f"unknown schema {name!r}; expected one of {sorted(_ALIASES)}") from None


def get_schema(name: str) -> ModuleType:
    """The schema module for ``name`` (or an alias)."""
    canonical = canonical_name(name)
    return next(m for m in _MODULES if canonical == m.NAME)


def detect_schema(columns: Iterable[str]) -> str | None:
    """The known schema whose required columns are all present, or ``None``."""
    present = set(columns)
    for module in (unified_edit, t2i):
        if set(module.REQUIRED_COLUMNS) <= present:
            return module.NAME
    return None


def check_columns(name: str, columns: Iterable[str], types: Mapping[str, str] | None = None, where: str = "") -> None:
    """Raise ``ValueError`` naming the missing columns when ``columns`` do not fit schema ``name``,
    and :class:`~editstream.format.columns.ColumnTypeError` when ``types`` (column -> arrow type)
    shows a column of another type than the schema's parser reads."""
    module = get_schema(name)
    columns = list(columns)
    missing = [c for c in module.REQUIRED_COLUMNS if c not in set(columns)]
    if missing:
        raise ValueError(
            f"schema {module.NAME!r} needs columns {list(module.REQUIRED_COLUMNS)}; "
            f"missing {missing} (found {sorted(columns)})"
        )
    if types is not None:
        problems = column_type_problems(types, module.COLUMN_TYPES)
        if problems:
            raise ColumnTypeError(f"{where or 'source'}: {'; '.join(problems)} (schema {module.NAME!r})")
