"""Text columns holding bytes that are not UTF-8: one bad value makes one bad row (an
:class:`UndecodableRow`), never a bad batch (pyarrow refuses the whole batch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa


@dataclass(frozen=True)
class InvalidText:
    """A text value whose bytes are not valid UTF-8."""

    raw: bytes

    @property
    def reason(self) -> str:
        """Where decoding fails, in words."""
        try:
            self.raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not valid UTF-8 (byte {exc.start}: {exc.reason})"
        return "valid UTF-8"  # pragma: no cover - made only of undecodable bytes

    def __str__(self) -> str:
        return f"<{len(self.raw)} bytes {self.reason}>"


class UndecodableRow(dict[str, Any]):
    """A row some of whose text is not UTF-8 (those values are :class:`InvalidText`); ``columns`` names them."""

    def __init__(self, values: dict[str, Any], columns: list[str]) -> None:
        super().__init__(values)
        self.columns = columns

    def reason(self, column: str) -> str:
        """Why ``column``'s value cannot be read: where its first bad text fails to decode."""
        first = next((v for v in _walk(self[column]) if isinstance(v, InvalidText)), None)
        return first.reason if first is not None else "not valid UTF-8"

    def problem(self) -> str:
        """The row's problem in one line: the columns and the first bad value's reason."""
        also = f" (also {self.columns[1:]})" if len(self.columns) > 1 else ""
        return f"column {self.columns[0]!r} holds text that is {self.reason(self.columns[0])}{also}"


def _walk(value: Any) -> Any:
    yield value
    if isinstance(value, (list, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _walk(item)


def _as_bytes_type(t: pa.DataType) -> pa.DataType:
    """``t`` with every text type replaced by the binary type of the same layout."""
    if pa.types.is_string(t):
        return pa.binary()
    if pa.types.is_large_string(t):
        return pa.large_binary()
    if pa.types.is_list(t):
        return pa.list_(_as_bytes_type(t.value_type))
    if pa.types.is_large_list(t):
        return pa.large_list(_as_bytes_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _as_bytes_type(f.type), f.nullable) for f in t])
    return t


def _revive(value: Any, t: pa.DataType) -> Any:
    """A value read with text as bytes, with its text decoded again (:class:`InvalidText` where it cannot be)."""
    if value is None:
        return None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return InvalidText(value)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_revive(item, t.value_type) for item in value]
    if pa.types.is_struct(t):
        return {f.name: _revive(value[f.name], f.type) for f in t}
    return value


def column_values(arr: pa.Array) -> tuple[list[Any], list[bool]]:
    """The Python values of one column, and per row whether one of its strings is not UTF-8."""
    try:
        return arr.to_pylist(), []
    except UnicodeDecodeError:
        pass
    as_bytes = arr.view(_as_bytes_type(arr.type)).to_pylist()
    values = [_revive(v, arr.type) for v in as_bytes]
    bad = [any(isinstance(x, InvalidText) for x in _walk(v)) for v in values]
    return values, bad
