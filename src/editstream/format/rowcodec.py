"""One row codec for converter and loader: a parquet row <-> the members of one tar sample. Each binary is a
member ``{key}.{column}[.{index}...].{ext}`` (stock webdataset decoders read the images); the rest is ``{key}.json``
in column order, a binary as ``{"$bytes": "<suffix>"}``, values JSON cannot hold exactly tagged (``$float`` ...)."""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..io.text import InvalidText
from .images import sniff_extension
from .keys import safe_component

JSON_SUFFIX = "json"
_TAG_PREFIX = "$"
_SELF_ENCODED = frozenset({str, int, bool, type(None)})
"""Exact types whose values ``_Encoder.value`` returns unchanged (floats are checked for NaN/inf)."""
_BINARY = (bytes, bytearray, memoryview)


def _plain(item: Any) -> bool:
    """Whether ``item`` is its own JSON form: a plain scalar, or a list of them."""
    t = type(item)
    return t in _SELF_ENCODED or (t is list and all(type(x) in _SELF_ENCODED for x in item))


class RowCodecError(ValueError):
    """A row that cannot be encoded, or members that do not decode to a row; names key and column."""


# ---------------------------------------------------------------------------------------
# Encoding


class _Encoder:
    """Walks one row, collecting binary members and building the JSON document."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.members: list[tuple[str, Any]] = []
        self.used: set[str] = {JSON_SUFFIX}

    def _member_name(self, path: list[str], data: bytes | bytearray | memoryview) -> str:
        ext = sniff_extension(data)
        base = ".".join(path)
        name = f"{base}.{ext}"
        n = 1
        while name in self.used:
            name = f"{base}_{n}.{ext}"
            n += 1
        self.used.add(name)
        return name

    def value(self, v: Any, path: list[str], column: str) -> Any:
        """The JSON form of one value; bytes become members named after ``path``."""
        t = type(v)
        if t in _SELF_ENCODED:
            return v
        if t in _BINARY:  # memoryviews (zero-copy arrow slices) are written as they are
            return self._binary(v, path)
        if isinstance(v, (str, int)):  # subclasses (exact types returned above)
            return v
        if isinstance(v, (list, tuple, dict)):
            return self._container(v, path, column)
        return self._leaf(v, path, column)

    def _leaf(self, v: Any, path: list[str], column: str) -> Any:
        if isinstance(v, float):
            if math.isfinite(v):
                return v
            return {"$float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
        if isinstance(v, InvalidText):  # kept exactly, so both backends drop the row at the same place
            return {"$invalid_utf8": v.raw.hex()}
        if isinstance(v, _BINARY):
            return self._binary(v, path)
        for cls, tag, form in _SCALAR_TAGS:
            if isinstance(v, cls):
                return {tag: form(v)}
        raise RowCodecError(f"sample {self.key!r}, column {column!r}: cannot encode a value of type {type(v).__name__}")

    def _binary(self, v: bytes | bytearray | memoryview, path: list[str]) -> dict[str, str]:
        name = self._member_name(path, v)
        self.members.append((name, v))
        return {"$bytes": name}

    def _container(self, v: list[Any] | tuple[Any, ...] | dict[Any, Any], path: list[str], column: str) -> Any:
        if isinstance(v, list):
            # plain scalars and lists of them (phrasings, tags) are their own JSON: no walk, no path
            return [item if _plain(item) else self.value(item, [*path, str(i)], column) for i, item in enumerate(v)]
        if isinstance(v, tuple):
            return {"$tuple": [self.value(item, path + [str(i)], column) for i, item in enumerate(v)]}
        out = {}
        for k, item in v.items():
            if not isinstance(k, str):
                raise RowCodecError(f"sample {self.key!r}, column {column!r}: dict key {k!r} is not a string")
            out[k] = self.value(item, path + [safe_component(k)], column)
        if len(out) == 1 and next(iter(out)).startswith(_TAG_PREFIX):
            return {"$dict": out}
        return out


_ISO = operator.methodcaller("isoformat")
_SCALAR_TAGS: tuple[tuple[type, str, Callable[[Any], Any]], ...] = (
    (_dt.datetime, "$datetime", _ISO),  # before date: a datetime is a date
    (_dt.date, "$date", _ISO),
    (_dt.time, "$time", _ISO),
    (_dt.timedelta, "$timedelta", lambda v: [v.days, v.seconds, v.microseconds]),
    (decimal.Decimal, "$decimal", str),
)
"""The tagged JSON forms of the scalar types plain JSON cannot hold exactly, tested in order."""


_column_part = functools.lru_cache(maxsize=1024)(safe_component)
"""A column's name as the first part of its members' names, computed once."""


def encode_members(row: Mapping[str, Any], key: str, columns: Sequence[str] | None = None) -> list[tuple[str, bytes]]:
    """Members of one sample as ``(suffix, data)`` pairs sorted by suffix, ``data`` the row's own bytes
    object (zero-copy memoryviews stay so); ``columns`` checked so another dataset's row cannot slip in."""
    if not key or "." in key:
        raise RowCodecError(f"invalid sample key {key!r}: must be non-empty and contain no dot")
    if columns is not None and list(row) != list(columns):
        raise RowCodecError(f"sample {key!r}: columns {list(row)} do not match the dataset's columns {list(columns)}")
    enc = _Encoder(key)
    doc = {
        column: v if type(v) in _SELF_ENCODED else enc.value(v, [_column_part(column)], column)
        for column, v in row.items()
    }
    text = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    enc.members.append((JSON_SUFFIX, text.encode("utf-8")))
    enc.members.sort(key=lambda item: item[0])
    return enc.members


# ---------------------------------------------------------------------------------------
# Decoding

_SIMPLE_TAGS: dict[str, Callable[[Any], Any]] = {
    "$float": float,
    "$datetime": _dt.datetime.fromisoformat,
    "$date": _dt.date.fromisoformat,
    "$time": _dt.time.fromisoformat,
    "$decimal": decimal.Decimal,
    "$timedelta": lambda p: _dt.timedelta(days=p[0], seconds=p[1], microseconds=p[2]),
}


_PLAIN = frozenset({str, int, float, bool, type(None)})
"""JSON values that decode to themselves (checked by exact type: JSON makes no subclasses)."""


def _decode_value(v: Any, members: Mapping[str, bytes], key: str, used: set[str], invalid: bool = False) -> Any:
    t = type(v)
    if t is list:
        return [item if type(item) in _PLAIN else _decode_value(item, members, key, used, invalid) for item in v]
    if t is not dict:
        return v
    if len(v) == 1:
        tag, payload = next(iter(v.items()))
        if tag.startswith(_TAG_PREFIX):
            return _decode_tagged(tag, payload, members, key, used, invalid)
    return {k: _decode_value(item, members, key, used, invalid) for k, item in v.items()}


def _decode_tagged(
    tag: str, payload: Any, members: Mapping[str, bytes], key: str, used: set[str], invalid: bool
) -> Any:
    """The value a one-key ``{"$tag": payload}`` object stands for."""
    if tag == "$bytes":
        if payload not in members:
            raise RowCodecError(f"sample {key!r}: member {payload!r} named in the JSON is missing")
        used.add(payload)
        return members[payload]
    if tag == "$invalid_utf8":
        text = InvalidText(bytes.fromhex(payload))
        if not invalid:
            raise RowCodecError(f"sample {key!r} holds text that is {text.reason} (a bad row of its source)")
        return text
    if tag == "$tuple":
        return tuple(_decode_value(item, members, key, used, invalid) for item in payload)
    if tag == "$dict":
        return {k: _decode_value(item, members, key, used, invalid) for k, item in payload.items()}
    if tag in _SIMPLE_TAGS:
        return _SIMPLE_TAGS[tag](payload)
    raise RowCodecError(f"sample {key!r}: unknown tag {tag!r} in the JSON member")


class _BytesRefs:
    """A JSON scanner that puts each ``{"$bytes": name}`` object's member in its place as it parses, so
    no walk over the row follows; pooled (:data:`_PARSERS`), as building one costs more than a row."""

    def __init__(self) -> None:
        self.members: Mapping[str, bytes] = {}
        self.used: set[str] = set()
        self.scan = json.JSONDecoder(object_hook=self._member).scan_once  # type: ignore[attr-defined]

    def _member(self, obj: dict[str, Any]) -> Any:
        if len(obj) == 1 and "$bytes" in obj:
            self.used.add(obj["$bytes"])
            return self.members[obj["$bytes"]]
        return obj


_PARSERS: list[_BytesRefs] = []
_PLAIN_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner json.loads runs


def _fast_parse(raw: bytes, members: Mapping[str, bytes]) -> tuple[Any, set[str]] | None:
    """``(document, member names it references)`` when the JSON is compact UTF-8 whose only tags are
    ``$bytes`` (or none); ``None`` for anything else, which the general path decodes (and reports)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    dollars = text.count('"$')
    if dollars and dollars != text.count('{"$bytes":"'):
        return None  # other tags, or a "$..." string
    parser = _PARSERS.pop() if _PARSERS else _BytesRefs()
    parser.members, parser.used = members, set()
    try:
        doc, end = (parser.scan if dollars else _PLAIN_SCAN)(text, 0)
        return (doc, parser.used) if end == len(text) else None
    except (ValueError, KeyError, TypeError, StopIteration, RecursionError):
        return None
    finally:
        parser.members = {}
        _PARSERS.append(parser)


def decode_sample(key: str, members: Mapping[str, bytes], *, invalid_text: bool = False) -> dict[str, Any]:
    """The original row of a sample from its members (keyed by suffix). A member the JSON does not reference
    is an error (no data lost silently); so is text that was not UTF-8, unless ``invalid_text``
    (``verify`` compares its :class:`~editstream.io.text.InvalidText` values with the source)."""
    raw = members.get(JSON_SUFFIX)
    if raw is None:
        raise RowCodecError(f"sample {key!r} has no {JSON_SUFFIX!r} member (members: {sorted(members)})")
    if type(raw) is not bytes:  # a memoryview member: the JSON parsers take bytes
        raw = bytes(raw)
    fast = _fast_parse(raw, members)
    if fast is not None and type(fast[0]) is dict:
        row, used = fast
    else:
        row, used = _general_parse(key, raw, members, invalid_text)
    if len(members) != len(used) + 1 or JSON_SUFFIX in used:
        extra = set(members) - used - {JSON_SUFFIX}
        if extra:
            raise RowCodecError(f"sample {key!r}: members {sorted(extra)} are not referenced by the JSON member")
    return row


def _general_parse(
    key: str, raw: bytes, members: Mapping[str, bytes], invalid_text: bool
) -> tuple[dict[str, Any], set[str]]:
    """The row and the member names it references, through ``json.loads`` and a walk over every tag."""
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RowCodecError(f"sample {key!r}: JSON member does not parse: {exc}") from None
    if not isinstance(doc, dict):
        raise RowCodecError(f"sample {key!r}: JSON member is a {type(doc).__name__}, expected an object")
    used: set[str] = set()
    try:
        row = {
            column: v if type(v) in _PLAIN else _decode_value(v, members, key, used, invalid_text)
            for column, v in doc.items()
        }
    except RowCodecError:
        raise
    except (TypeError, ValueError, LookupError, AttributeError, ArithmeticError, RecursionError) as exc:
        raise RowCodecError(f"sample {key!r}: malformed tagged value in the JSON member: {exc}") from None
    return row, used
