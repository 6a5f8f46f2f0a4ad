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

from ..format.safe_yaml import brief


class FilterError(ValueError):
    """A filter expression that does not parse, or does not fit the source's columns."""


MAX_FILTER_CHARS = 1_000_000
"""The longest filter text parsed: parsing is linear, but each row is checked against every comparison."""
MAX_DEPTH = 100
"""The deepest nesting of parentheses, ``not`` and alternating ``and`` / ``or`` a filter may have."""

_SPACE = re.compile(r"\s*")
_TOKEN = re.compile(
    r"""(?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
      | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<op>==|!=|<=|>=|<|>|=)
      | (?P<paren>[()])
      | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)""",
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
_RANK = {"or": 1, "and": 2, "not": 3}
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
        if self.op == "and":
            return all(part(row) for part in self.parts)
        return any(part(row) for part in self.parts)


Node = Compare | Not | Join
Token = tuple[str, str, int]
"""A token's kind (a ``_TOKEN`` group), its text and the character it starts at."""


def _skip_space(text: str, pos: int) -> int:
    m = _SPACE.match(text, pos)
    return m.end() if m else pos


def _tokens(text: str) -> list[Token]:
    """The tokens of ``text``, in one pass."""
    out: list[Token] = []
    pos = _skip_space(text, 0)
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise FilterError(f"filter {brief(text)}: cannot read {brief(text[pos : pos + 20])} at character {pos}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind), pos))
        pos = _skip_space(text, m.end())
    return out


@dataclass
class _Run:
    """A run of one operator being parsed (parts appended in place, so a long run stays linear)."""

    op: str
    parts: list[Node | _Run]
    depth: int


def _freeze(node: Node | _Run) -> Node:
    if not isinstance(node, _Run):
        return node
    return Join(node.op, tuple(_freeze(p) for p in node.parts))


class _Parser:
    """Operator precedence over the token list with explicit stacks (no recursion): parentheses,
    then ``not``, ``and``, ``or``; depth and length bounded."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0
        self.operands: list[tuple[Node | _Run, int]] = []
        self.operators: list[str] = []

    def fail(self, what: str) -> FilterError:
        if self.i < len(self.tokens):
            _, found, pos = self.tokens[self.i]
            return FilterError(f"filter {brief(self.text)}: {what}, found {brief(found)} at character {pos}")
        return FilterError(f"filter {brief(self.text)}: {what}, found 'the end'")

    def peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def is_word(self, *values: str) -> str | None:
        tok = self.peek()
        if tok is not None and tok[0] == "word" and tok[1].lower() in values:
            return tok[1].lower()
        return None

    def push(self, op: str) -> None:
        if len(self.operators) >= MAX_DEPTH:
            raise self.fail(f"nested more than {MAX_DEPTH} levels deep")
        self.operators.append(op)
        self.i += 1

    def apply(self, op: str) -> None:
        """Pop ``op``'s operands and push the node it makes."""
        right, right_depth = self.operands.pop()
        if op == "not":
            node: Node | _Run = Not(_freeze(right))
            depth = right_depth + 1
        else:
            left, left_depth = self.operands.pop()
            if isinstance(left, _Run) and left.op == op:
                left.parts.append(right)
                left.depth = max(left.depth, right_depth + 1)
                node, depth = left, left.depth
            else:
                depth = max(left_depth, right_depth) + 1
                node = _Run(op, [_freeze(left), right], depth)
        if depth > MAX_DEPTH:
            raise self.fail(f"nested more than {MAX_DEPTH} levels deep")
        self.operands.append((node, depth))

    def reduce(self, rank: int) -> None:
        """Apply the pending operators that bind at least as tightly as ``rank`` (up to a ``(``)."""
        while self.operators and self.operators[-1] != "(" and _RANK[self.operators[-1]] >= rank:
            self.apply(self.operators.pop())

    def at(self, kind: str, text: str) -> bool:
        tok = self.peek()
        return tok is not None and tok[:2] == (kind, text)

    def close(self) -> None:
        """A ``)``: everything since its ``(`` becomes one operand."""
        self.reduce(0)
        if not self.operators:
            raise self.fail("a ')' without its '('")
        self.operators.pop()
        self.i += 1

    def parse(self) -> Node:
        while True:
            while self.is_word("not") or self.at("paren", "("):
                self.push("not" if self.is_word("not") else "(")
            self.operands.append((self.comparison(), 1))
            while self.at("paren", ")"):
                self.close()
            joiner = self.is_word("and", "or")
            if joiner is None:
                break
            self.reduce(_RANK[joiner])
            self.push(joiner)
        if self.peek() is not None:
            raise self.fail("expected 'and', 'or' or the end")
        self.reduce(0)
        if self.operators:
            raise self.fail("expected ')'")
        return _freeze(self.operands[0][0])

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
        kind, text, _ = tok
        if kind == "number":
            self.i += 1
            return float(text) if any(c in text for c in ".eE") else int(text)
        if kind == "string":
            self.i += 1
            return re.sub(r"\\(.)", r"\1", text[1:-1])
        if kind == "word" and text.lower() in ("true", "false", "null"):
            self.i += 1
            return {"true": True, "false": False, "null": None}[text.lower()]
        raise self.fail("expected a number, a quoted string, true, false or null")


def _leaves(root: Node) -> list[Compare]:
    """The comparisons of ``root``, left to right (walked with a stack, not recursion)."""
    found: list[Compare] = []
    todo: list[Node] = [root]
    while todo:
        node = todo.pop()
        if isinstance(node, Compare):
            found.append(node)
        elif isinstance(node, Not):
            todo.append(node.inner)
        else:
            todo.extend(reversed(node.parts))
    return found


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
