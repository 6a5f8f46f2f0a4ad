"""The ``generic`` schema: any columns, no row checks (lossless conversion only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NAME = "generic"
REQUIRED_COLUMNS: tuple[str, ...] = ()
COLUMN_TYPES: dict[str, str] = {}


def check_row(row: Mapping[str, Any]) -> str | None:
    """Never a problem: the generic schema only promises a lossless copy."""
    return None
