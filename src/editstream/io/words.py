"""Counts in words for messages: ``1 shard``, ``4 shards``, so no summary says "1 shards"."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, the noun with an ``s`` unless ``n`` is 1."""
    return f"{n} {noun if n == 1 else noun + 's'}"
