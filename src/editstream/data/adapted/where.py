"""A small, safe row filter: ``o_score >= 8 and task != 'removal'``, parsed by hand, never ``eval``.

Comparisons with a literal joined by ``and`` / ``or`` / ``not`` and parentheses; a null fails every
comparison but ``== null`` / ``!= null``, as in SQL. Nesting and text length are bounded.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ...format.safe_yaml import brief


class FilterError(ValueError):
    """A filter expression that does not parse, or does not fit the source's columns."""


MAX_FILTER_CHARS = 1_000_000
"""The longest filter text parsed: parsing is linear, but each row is checked against every comparison."""
MAX_DEPTH = 100
"""The deepest nesting of parentheses and ``not`` a filter may have (so the parser's recursion is bounded)."""

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
      | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<op>==|!=|<=|>=|<|>|=)
      | (?P<paren>[()])
      | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
    )\s*""",
    re.VERBOSE,
)
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_KEYWORDS = {"and", "or", "not", "true", "false", "null"}
Value = int | float | str | bool | None


@dataclass(frozen=True)
class Compare:
    """``column OP literal``."""

    column: str
    op: str
    value: Value

    def __call__(self, row: Mapping[str, Any]) -> bool:
        got = row.get(self.column)
        if self.value is None:
            return (got is None) == (self.op in ("==", "="))
        if got is None:
            return False
        return bool(_OPS[self.op](got, self.value))


@dataclass(frozen=True)
class Not:
    """``not inner``."""

    inner: Node

    def __call__(self, row: Mapping[str, Any]) -> bool:
        return not self.inner(row)


@dataclass(frozen=True)
class Join:
    """``a and b and ...`` / ``a or b or ...``: a run of one operator is one node, however long."""

    op: str
    parts: tuple[Node, ...]

    def __call__(self, row: Mapping[str, Any]) -> bool:
        return (all if self.op == "and" else any)(part(row) for part in self.parts)


Node = Compare | Not | Join


def _tokens(text: str) -> list[tuple[str, str]]:
    """The tokens of ``text`` in one pass (each match eats the spaces after it)."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise FilterError(f"filter {brief(text)}: cannot read {brief(text[pos : pos + 20])} at character {pos}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    """Recursive descent: or > and > not > comparison / parentheses, at most ``MAX_DEPTH`` deep."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0
        self.depth = 0

    def fail(self, what: str) -> FilterError:
        where = self.tokens[self.i][1] if self.i < len(self.tokens) else "the end"
        return FilterError(f"filter {brief(self.text)}: {what}, found {brief(where)}")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def word(self, value: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "word" and tok[1].lower() == value:
            self.i += 1
            return True
        return False

    def parse(self) -> Node:
        node = self.disjunction()
        if self.peek() is not None:
            raise self.fail("expected 'and', 'or' or the end")
        return node

    def joined(self, op: str, part: Callable[[], Node]) -> Node:
        """A run of ``part`` joined by ``op`` (a single part is itself)."""
        parts = [part()]
        while self.word(op):
            parts.append(part())
        return parts[0] if len(parts) == 1 else Join(op, tuple(parts))

    def disjunction(self) -> Node:
        return self.joined("or", lambda: self.joined("and", self.negation))

    def negation(self) -> Node:
        negate = self.word("not")
        if not negate and self.peek() != ("paren", "("):
            return self.comparison()
        if self.depth == MAX_DEPTH:
            raise self.fail(f"nested more than {MAX_DEPTH} levels deep")
        self.depth += 1
        if negate:
            node: Node = Not(self.negation())
        else:
            self.i += 1
            node = self.disjunction()
            if self.peek() != ("paren", ")"):
                raise self.fail("expected ')'")
            self.i += 1
        self.depth -= 1
        return node

    def comparison(self) -> Compare:
        tok = self.peek()
        if tok is None or tok[0] != "word" or tok[1].lower() in _KEYWORDS:
            raise self.fail("expected a column name")
        self.i += 1
        op = self.peek()
        if op is None or op[0] != "op":
            raise self.fail(f"expected a comparison operator after {brief(tok[1])}")
        self.i += 1
        value = self.literal()
        if value is None and op[1] not in ("==", "=", "!="):
            raise FilterError(f"filter {brief(self.text)}: null compares with == or != only, not {op[1]!r}")
        return Compare(tok[1], op[1], value)

    def literal(self) -> Value:
        tok = self.peek()
        if tok is None:
            raise self.fail("expected a literal")
        kind, text = tok
        self.i += 1
        if kind == "number":
            return float(text) if any(c in text for c in ".eE") else int(text)
        if kind == "string":
            return re.sub(r"\\(.)", r"\1", text[1:-1])
        if kind == "word" and text.lower() in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text.lower()]
        self.i -= 1
        raise self.fail("expected a number, a quoted string, true, false or null")


def _leaves(node: Node) -> list[Compare]:
    if isinstance(node, Compare):
        return [node]
    if isinstance(node, Not):
        return _leaves(node.inner)
    return [leaf for part in node.parts for leaf in _leaves(part)]


def _fits(value: Value, arrow_type: pa.DataType) -> bool:
    if pa.types.is_dictionary(arrow_type):  # a dictionary-encoded column compares as its values
        arrow_type = arrow_type.value_type
    if value is None:
        return True
    if isinstance(value, bool):
        return bool(pa.types.is_boolean(arrow_type))
    if isinstance(value, (int, float)):
        return bool(pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type))
    return bool(pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))


@dataclass(frozen=True)
class Filter:
    """A parsed filter: call it on a row (a mapping of column -> value) for keep / drop."""

    text: str
    root: Node

    def __call__(self, row: Mapping[str, Any]) -> bool:
        return self.root(row)

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the filter reads, in first-use order."""
        return tuple(dict.fromkeys(leaf.column for leaf in _leaves(self.root)))

    def check_types(self, schema: pa.Schema, where: str) -> None:
        """A ``FilterError`` naming ``where`` when a column is missing or its type cannot equal its literal."""
        for leaf in _leaves(self.root):
            if leaf.column not in schema.names:
                raise FilterError(
                    f"filter {brief(self.text)}: {where} has no column {brief(leaf.column)} "
                    f"(columns: {brief(schema.names)})"
                )
            arrow_type = schema.field(leaf.column).type
            if not _fits(leaf.value, arrow_type):
                raise FilterError(
                    f"filter {brief(self.text)}: column {brief(leaf.column)} of {where} is {arrow_type}, "
                    f"which cannot compare with {brief(leaf.value)}"
                )


def parse_filter(text: str) -> Filter:
    """Parse ``text`` (see the module docstring); a ``FilterError`` saying where it stopped otherwise."""
    if not text or not text.strip():
        raise FilterError("filter is empty")
    if len(text) > MAX_FILTER_CHARS:
        raise FilterError(f"filter {brief(text)} is longer than {MAX_FILTER_CHARS:,} characters ({len(text):,})")
    return Filter(text, _Parser(text).parse())
