"""Two reading options every row source that hands out binary values shares, each with an environment variable
that sets it for a whole process (the option, when given, wins): ``member_bytes`` and ``verify_reads``."""

from __future__ import annotations

import os

MEMBER_BYTES_ENV = "EDITSTREAM_MEMBER_BYTES"
"""Set to 1 to hand binary values to ``parse_row`` as ``bytes`` instead of zero-copy memoryviews."""
VERIFY_READS_ENV = "EDITSTREAM_VERIFY_READS"
"""Set to 1 to hash every local shard against its manifest digest before it is read."""


def env_flag(value: bool | None, name: str) -> bool:
    """``value``, or when it is ``None`` whether the environment variable ``name`` is set to a true value."""
    if value is not None:
        return bool(value)
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
