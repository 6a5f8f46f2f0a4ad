"""Source rows -> one output row of the target kind: the edit chain, its phrasings and kept extras.

The output schema is fixed by the mapping and the source schema alone (never by the data),
so every output file of one adaptation has the same column types, even an empty one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from ..kinds import get_kind
from .mapping import AdapterMapping
from .values import BadValue, MediaDir, bad_cell, image_bytes, phrasings


def output_schema(mapping: AdapterMapping, source: pa.Schema) -> pa.Schema:
    """The kind's two columns, then each ``keep`` column: its source type, or a list of it for a
    per-row column of a grouped chain (a ``group_by`` column stays a single value)."""
    images, texts = mapping.target_columns
    fields = [pa.field(images, pa.list_(pa.binary())), pa.field(texts, pa.list_(pa.list_(pa.string())))]
    for column in mapping.keep:
        arrow_type = source.field(column).type
        per_row = bool(mapping.group_by) and column not in mapping.group_by
        fields.append(pa.field(column, pa.list_(arrow_type) if per_row else arrow_type))
    return pa.schema(fields)


def _cell(row: dict[str, Any], column: str, read: Callable[..., Any], option: Any) -> Any:
    """``read(row[column], column, option)``, its ``BadValue`` naming ``column``."""
    try:
        return read(row[column], column, option)
    except BadValue as exc:
        raise BadValue(exc.reason, exc.code, column=column) from None


class ChainBuilder:
    """Builds output rows from the source rows of one chain, checked by the target kind's own row checks."""

    def __init__(self, mapping: AdapterMapping, media: MediaDir) -> None:
        self.mapping = mapping
        self.media = media
        self.kind = get_kind(mapping.kind)
        self.image_column, self.text_column = mapping.target_columns

    def build(self, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The output row of ``rows`` (one row, or a group's rows in order).

        Raises ``BadValue`` (``exc.row``: the index of the failing row): a cell that cannot be
        adapted, or a chain the kind's parser would reject.
        """
        images: list[bytes] = []
        instructions: list[list[str]] = []
        for i, row in enumerate(rows):
            columns = self.mapping.images if i == 0 else self.mapping.images[1:]
            try:
                bad = bad_cell(row)
                if bad is not None:
                    raise bad
                images.extend(_cell(row, c, image_bytes, self.media) for c in columns)
                instructions.extend(_cell(row, s.column, phrasings, s.format) for s in self.mapping.instructions)
            except BadValue as exc:
                raise BadValue(exc.reason, exc.code, i, exc.column) from None
        out: dict[str, Any] = {self.image_column: images, self.text_column: instructions}
        for column in self.mapping.keep:
            if self.mapping.group_by and column not in self.mapping.group_by:
                out[column] = [row[column] for row in rows]
            else:
                out[column] = rows[0][column]
        problem = self.kind.first_problem(out)
        if problem is not None:
            raise BadValue(f"the chain fails the {self.kind.name} checks: {problem}", "kind_check")
        return out


def to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """The output rows as a table of ``schema`` (column by column, so empty lists keep their types)."""
    return pa.Table.from_pydict({name: [row[name] for row in rows] for name in schema.names}, schema=schema)
