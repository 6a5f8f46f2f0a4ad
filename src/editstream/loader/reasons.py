"""Why a row was dropped, in the converter's words: the row check that matches the parser's exception.

``parse_row`` fails with whatever its code raised (``IndexError: Cannot choose from an empty
sequence``, ``UnidentifiedImageError``). The schema's row checks (``format.rowproblems``, the
ones behind ``report.json``) list the row's problems; the drop line gives the one the exception
points at (an image error -> the image problem, an index or type error -> the instruction or
caption problem), and the cleaned exception when no check explains it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..format.rowproblems import row_problems
from .drops import error_text

_IMAGE_ERRORS = ("UnidentifiedImageError", "ImageRejected", "DecompressionBombError", "OSError", "SyntaxError")


def _is_image_error(exc: BaseException) -> bool:
    return any(type(e).__name__ in _IMAGE_ERRORS for e in type(exc).__mro__) or "image" in str(exc).lower()


def drop_reason(schema: str | None, row: Any, exc: BaseException) -> str:
    """The report-style reason ``row`` failed with ``exc`` (``""`` when nothing better than the error is known)."""
    if schema is None or not isinstance(row, Mapping):
        return ""
    try:
        problems = row_problems(schema, row)
    except Exception:  # noqa: BLE001 - a row too broken to check: the error says enough
        return ""
    if not problems:
        return ""
    if _is_image_error(exc):
        chosen = [p for p in problems if p.startswith("image")]
    else:
        chosen = [p for p in problems if not p.startswith("image ") and not p.startswith("image:")]
    return str((chosen or problems)[0]) + f" ({error_text(exc)})" * (not chosen)
