"""The converter's column check: does a parquet source have the columns (and types) its kind parses."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..format.columns import ColumnTypeError, column_type_problems
from ..kinds import DatasetKind


def check_columns(
    kind: DatasetKind, columns: Iterable[str], types: Mapping[str, str] | None = None, where: str = ""
) -> None:
    """Raise ``ValueError`` naming the missing columns when ``columns`` lack one of ``kind``'s, and
    :class:`~editstream.format.columns.ColumnTypeError` when ``types`` (column -> arrow type) shows a
    column of another type than the kind's parser reads."""
    columns = list(columns)
    missing = [c for c in kind.columns if c not in set(columns)]
    if missing:
        raise ValueError(
            f"schema {kind.name!r} needs columns {list(kind.columns)}; missing {missing} (found {sorted(columns)})"
        )
    if types is not None:
        problems = column_type_problems(types, kind.columns)
        if problems:
            raise ColumnTypeError(f"{where or 'source'}: {'; '.join(problems)} (schema {kind.name!r})")
