"""What ``verify`` reports: one :class:`Problem` per mismatch, shared by every source shape's checks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One mismatch: what kind, which shard (if any), and a precise description."""

    kind: str
    shard: str | None
    detail: str

    def __str__(self) -> str:
        where = f"{self.shard}: " if self.shard else ""
        return f"[{self.kind}] {where}{self.detail}"
