"""Source rows -> one output row of the target kind; the output schema depends on the mapping and the
source schema only, so every output file of an adaptation has the same column types."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from ..format.safe_yaml import brief
from ..kinds import get_kind
from .mapping import AdapterMapping, InstructionSource
from .values import BadValue, MediaDir, bad_cell, image_bytes, phrasings


def output_schema(mapping: AdapterMapping, source: pa.Schema) -> pa.Schema:
    """The kind's two columns, then each ``keep`` column (a list of its type per row of a grouped chain)."""
    images, texts = mapping.target_columns
    fields = [pa.field(images, pa.list_(pa.binary())), pa.field(texts, pa.list_(pa.list_(pa.string())))]
    if mapping.captioned:
        fields = [pa.field(images, pa.binary()), pa.field(texts, pa.string())]
    for column in mapping.keep:
        arrow_type = source.field(column).type if column in source.names else pa.string()
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

    def __init__(self, mapping: AdapterMapping, media: MediaDir, schema: pa.Schema | None = None) -> None:
        self.mapping = mapping
        self.media = media
        self.kind = get_kind(mapping.kind)
        self.image_column, self.text_column = mapping.target_columns
        # a JSON source's keep columns are typed by their first rows (parquet's by the file): checked per chain
        self.keep_types = {c: schema.field(c).type for c in mapping.keep} if schema and mapping.metadata else {}

    def build(self, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The output row of ``rows`` (one row, or a group's in order); ``BadValue`` (``exc.row``: the failing
        row) for a cell that cannot be adapted or a chain the kind's checks reject."""
        images: list[bytes] = []
        instructions: list[list[str]] = []
        for i, row in enumerate(rows):
            try:
                bad = bad_cell(row)
                if bad is not None:
                    raise bad
                images_in, texts_in = self._parts(row, first=i == 0)
                images.extend(_cell(row, c, image_bytes, self.media) for c in images_in)
                instructions.extend(_cell(row, s.column, phrasings, s) for s in texts_in)
            except BadValue as exc:
                raise BadValue(exc.reason, exc.code, i, exc.column) from None
        out: dict[str, Any] = {self.image_column: images, self.text_column: instructions}
        if self.mapping.captioned:
            out = {self.image_column: images[0], self.text_column: _captions(self.mapping, instructions)}
        for column in self.mapping.keep:
            per_row = self.mapping.group_by and column not in self.mapping.group_by
            out[column] = [row[column] for row in rows] if per_row else rows[0][column]
        for column, arrow_type in self.keep_types.items():
            try:
                pa.array([out[column]], arrow_type)
            except (pa.ArrowException, TypeError, ValueError):
                reason = f"{column}: {brief(out[column])} is not {arrow_type}, the type of its first rows"
                raise BadValue(reason, "bad_type", column=column) from None
        problem = self.kind.first_problem(out)
        if problem is not None:
            raise BadValue(f"the chain fails the {self.kind.name} checks: {problem}", "kind_check")
        return out

    def _parts(self, row: dict[str, Any], first: bool) -> tuple[Sequence[str], Sequence[InstructionSource]]:
        """The image columns and instruction sources of ``row`` (no first image after a group's first row;
        with ``optional_tail`` only those before the first absent image)."""
        images, texts = self.mapping.images, self.mapping.instructions
        if self.mapping.optional_tail:
            end = next((k for k in range(2, len(images)) if row.get(images[k]) is None), len(images))
            later = [c for c in images[end:] if row.get(c) is not None]
            if later:  # a turn missing before others: dropped and counted, not cut short in silence
                raise BadValue(
                    f"{images[end]} is absent but {later[0]} is not; a chain ends at its last turn",
                    "null_image",
                    column=images[end],
                )
            images, texts = images[:end], texts[: end - 1]
        return (images if first else images[1:]), texts


def _captions(mapping: AdapterMapping, phrasings: list[list[str]]) -> str:
    """The captions JSON object of a text-to-image row (``name.1``, ``name.2``... for further phrasings)."""
    captions: dict[str, str] = {}
    for source, texts in zip(mapping.instructions, phrasings):
        for k, text in enumerate(texts):
            captions[source.column if k == 0 else f"{source.column}.{k}"] = text
    return json.dumps(captions, ensure_ascii=False)


def to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """The output rows as a table of ``schema`` (column by column, so empty lists keep their types)."""
    return pa.Table.from_pydict({name: [row[name] for row in rows] for name in schema.names}, schema=schema)
