"""The member index of a media archive as flat arrays (an archive of ~3M members is indexed in every process
reading it): sorted NUL-joined names and 64-bit offsets and sizes, looked up by bisection; ~24 bytes a member."""

from __future__ import annotations

import base64
import bisect
import json
import sys
from array import array
from collections.abc import Iterator, Mapping


class MemberIndex:
    """Member name -> ``(offset, size)``, read-only; iterates the names in sorted order."""

    def __init__(self, blob: bytes, starts: array[int], offsets: array[int], sizes: array[int]) -> None:
        self.blob, self.starts, self.offsets, self.sizes = blob, starts, offsets, sizes

    @classmethod
    def of(cls, members: Mapping[str, tuple[int, int]]) -> MemberIndex:
        """The index of ``members``."""
        keys = sorted((name.encode(), at, size) for name, (at, size) in members.items())
        starts, at = array("q"), 0
        for key, _, _ in keys:
            starts.append(at)
            at += len(key) + 1
        offsets, sizes = array("q", (k[1] for k in keys)), array("q", (k[2] for k in keys))
        return cls(b"\0".join(k[0] for k in keys), starts, offsets, sizes)

    def _key(self, i: int) -> bytes:
        end = self.starts[i + 1] - 1 if i + 1 < len(self.starts) else len(self.blob)
        return self.blob[self.starts[i] : end]

    def get(self, name: str) -> tuple[int, int] | None:
        """``(offset, size)`` of member ``name``, or ``None``."""
        key = name.encode()
        i = bisect.bisect_left(range(len(self.starts)), key, key=self._key)
        return (self.offsets[i], self.sizes[i]) if i < len(self.starts) and self._key(i) == key else None

    def __getitem__(self, name: str) -> tuple[int, int]:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __len__(self) -> int:
        return len(self.starts)

    def __iter__(self) -> Iterator[str]:
        return (self._key(i).decode() for i in range(len(self.starts)))

    def dumps(self) -> bytes:
        """The index as JSON text (the arrays as base64 of their bytes, in this machine's byte order)."""
        arrays = {k: base64.b64encode(getattr(self, k).tobytes()).decode() for k in ("starts", "offsets", "sizes")}
        names = base64.b64encode(self.blob).decode()
        return json.dumps({"byteorder": sys.byteorder, "names": names, **arrays}).encode()

    @classmethod
    def loads(cls, data: bytes) -> MemberIndex:
        """An index from :meth:`dumps`; a ``ValueError`` for one of another form or byte order."""
        kept = json.loads(data)
        if kept.get("byteorder") != sys.byteorder:
            raise ValueError("a member index of another byte order")
        arrays = [array("q", base64.b64decode(kept[k])) for k in ("starts", "offsets", "sizes")]
        if not len(arrays[0]) == len(arrays[1]) == len(arrays[2]):
            raise ValueError("a member index whose arrays differ in length")
        return cls(base64.b64decode(kept["names"]), *arrays)
