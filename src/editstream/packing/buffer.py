"""The packer's buffer: samples that did not fit a sequence wait here, each with where it came from.

A checkpoint saves it as references to the samples' rows (:mod:`.checkpoint.references`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..loader.origins import ParseOrigin


@dataclass
class Buffered:
    """One waiting sample: the sample, its group's index and, when known, where its parse began."""

    sample: dict[str, Any]
    group: int
    origin: ParseOrigin | None


class SampleBuffer:
    """First in, first out: samples wait here until a sequence has room for them."""

    def __init__(self, entries: list[Buffered] | None = None) -> None:
        self.entries: list[Buffered] = entries or []

    def __len__(self) -> int:
        return len(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def pop_first(self) -> dict[str, Any]:
        """The oldest waiting sample, taken out."""
        return self.entries.pop(0).sample

    def append(self, sample: dict[str, Any], group: int, origin: ParseOrigin | None) -> None:
        """A sample that did not fit, at the back."""
        self.entries.append(Buffered(sample, group, origin))

    def push_front(self, sample: dict[str, Any], group: int, origin: ParseOrigin | None) -> None:
        """Put a sample taken with ``pop_first`` back where it was (the lossless loop's undo)."""
        self.entries.insert(0, Buffered(sample, group, origin))

    def samples(self) -> list[dict[str, Any]]:
        """The waiting samples, oldest first."""
        return [entry.sample for entry in self.entries]
