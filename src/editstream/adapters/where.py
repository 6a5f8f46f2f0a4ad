"""A small, safe row filter: ``o_score >= 8 and task != 'removal'``, parsed by hand, never ``eval``.

A filter is comparisons of a column with a literal (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``),
joined by ``and`` / ``or``, negated by ``not``, grouped by parentheses. Literals are numbers,
quoted strings, ``true`` / ``false`` and ``null`` (``== null`` / ``!= null`` only). A null
column value fails every other comparison, as in SQL. :meth:`Filter.check_types` compares the
literals with the source's arrow types before any row is read, so a typo fails at once.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa


class FilterError(ValueError):
    """A filter expression that does not parse, or does not fit the source's columns."""


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
      | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<op>==|!=|<=|>=|<|>|=)
      | (?P<paren>[()])
      | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
    )""",
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
    """``left and right`` / ``left or right``."""

    op: str
    left: Node
    right: Node

    def __call__(self, row: Mapping[str, Any]) -> bool:
        if self.op == "and":
            return self.left(row) and self.right(row)
        return self.left(row) or self.right(row)


Node = Compare | Not | Join


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise FilterError(f"filter {text!r}: cannot read {text[pos:].strip()[:20]!r} at character {pos}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    """Recursive descent over the token list: or > and > not > comparison / parentheses."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0

    def fail(self, what: str) -> FilterError:
        where = self.tokens[self.i][1] if self.i < len(self.tokens) else "the end"
        return FilterError(f"filter {self.text!r}: {what}, found {where!r}")

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

    def disjunction(self) -> Node:
        node = self.conjunction()
        while self.word("or"):
            node = Join("or", node, self.conjunction())
        return node

    def conjunction(self) -> Node:
        node = self.negation()
        while self.word("and"):
            node = Join("and", node, self.negation())
        return node

    def negation(self) -> Node:
        if self.word("not"):
            return Not(self.negation())
        tok = self.peek()
        if tok == ("paren", "("):
            self.i += 1
            node = self.disjunction()
            if self.peek() != ("paren", ")"):
                raise self.fail("expected ')'")
            self.i += 1
            return node
        return self.comparison()

    def comparison(self) -> Compare:
        tok = self.peek()
        if tok is None or tok[0] != "word" or tok[1].lower() in _KEYWORDS:
            raise self.fail("expected a column name")
        self.i += 1
        op = self.peek()
        if op is None or op[0] != "op":
            raise self.fail(f"expected a comparison operator after {tok[1]!r}")
        self.i += 1
        value = self.literal()
        if value is None and op[1] not in ("==", "=", "!="):
            raise FilterError(f"filter {self.text!r}: null compares with == or != only, not {op[1]!r}")
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
    return _leaves(node.left) + _leaves(node.right)


def _fits(value: Value, arrow_type: pa.DataType) -> bool:
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
                    f"filter {self.text!r}: {where} has no column {leaf.column!r} (columns: {schema.names})"
                )
            arrow_type = schema.field(leaf.column).type
            if not _fits(leaf.value, arrow_type):
                raise FilterError(
                    f"filter {self.text!r}: column {leaf.column!r} of {where} is {arrow_type}, "
                    f"which cannot compare with {leaf.value!r}"
                )


def parse_filter(text: str) -> Filter:
    """Parse ``text`` (see the module docstring); a ``FilterError`` saying where it stopped otherwise."""
    if not text or not text.strip():
        raise FilterError("filter is empty")
    return Filter(text, _Parser(text).parse())
