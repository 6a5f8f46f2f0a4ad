"""YAML a user hands in, loaded within a bound (a few hundred bytes of nested aliases expand to a
billion values), and values quoted short for the error messages about them."""

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


def expanded_size(node: yaml.Node, limit: int, origin: str, sizes: dict[int, int], path: set[int]) -> int:
    """The size of ``node`` with every alias expanded (1 per node, plus each scalar's characters),
    each shared node computed once (``sizes``); a ``YamlBoundError`` past ``limit`` or on a loop."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in path:
        raise YamlBoundError(f"{origin}: a YAML alias refers to itself (a loop); refused")
    path.add(key)
    if isinstance(node, yaml.ScalarNode):
        total = 1 + len(node.value)
    else:
        parts = [p for item in node.value for p in (item if isinstance(item, tuple) else (item,))]
        total = 1 + sum(expanded_size(p, limit, origin, sizes, path) for p in parts)
    if total > limit:
        raise YamlBoundError(
            f"{origin}: the YAML expands to more than {limit:,} values and characters "
            "(aliases repeat what their anchor names); refused"
        )
    path.discard(key)
    sizes[key] = total
    return total


def load_yaml(text: str | bytes, origin: str, *, max_size: int = DEFAULT_MAX_SIZE) -> Any:
    """The document in ``text``, or a ``YamlBoundError`` naming ``origin`` past ``max_size``, looping or too deep."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node, max_size, origin, {}, set())
        return loader.construct_document(node)
    except RecursionError:
        raise YamlBoundError(f"{origin}: the YAML is nested too deeply; refused") from None
    finally:
        loader.dispose()
