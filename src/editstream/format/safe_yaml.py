"""YAML a user hands in (a mapping, a recipe's dataset config), loaded within a bound, and values
quoted short for the error messages about them.

``yaml.safe_load`` runs no code, but an alias repeats what its anchor names, so 300 bytes of
nested aliases expand to a billion values: the objects are shared while loading, and blow up the
first time anything walks or prints them. :func:`load_yaml` counts the document's size with every
alias expanded (each node once, each scalar by its characters) before building any object, and
refuses a document over ``max_size``, one whose alias refers to itself, or one nested deeper than
Python's stack. :func:`brief` quotes a value for a message without ever printing all of it.
"""

from __future__ import annotations

import reprlib
from typing import Any

import yaml

DEFAULT_MAX_SIZE = 8_000_000
"""Nodes plus scalar characters of a document with its aliases expanded: far above any config,
far below what exhausts memory."""

_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 8
_SHORT.maxlevel = 3


class YamlBoundError(yaml.YAMLError, ValueError):
    """A YAML document refused before it was built: too large expanded, self-referring, too deep."""


def brief(value: Any) -> str:
    """``repr(value)``, cut short: at most about 60 characters per string and 8 items per list."""
    return _SHORT.repr(value)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def expanded_size(root: yaml.Node, limit: int, origin: str) -> int:
    """The size of ``root`` with every alias expanded (nodes + scalar characters), each shared node
    counted once per use but computed once; a ``YamlBoundError`` past ``limit`` or on a loop."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_nodes.discard(key)
            total = 1 + (len(node.value) if isinstance(node, yaml.ScalarNode) else 0)
            total += sum(sizes[id(child)] for child in _children(node))
            if total > limit:
                raise YamlBoundError(
                    f"{origin}: the YAML expands to more than {limit:,} values and characters "
                    "(aliases repeat what their anchor names); refused"
                )
            sizes[key] = total
        elif key in open_nodes:
            raise YamlBoundError(f"{origin}: a YAML alias refers to itself (a loop); refused")
        elif key not in sizes:
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]


def load_yaml(text: str | bytes, origin: str, *, max_size: int = DEFAULT_MAX_SIZE) -> Any:
    """The document in ``text`` (``yaml.safe_load``'s types), or a ``YamlBoundError`` naming
    ``origin`` when it expands past ``max_size``, loops or nests too deep; other syntax errors
    stay ``yaml.YAMLError``."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node, max_size, origin)
        return loader.construct_document(node)
    except RecursionError:
        raise YamlBoundError(f"{origin}: the YAML is nested too deeply; refused") from None
    finally:
        loader.dispose()
