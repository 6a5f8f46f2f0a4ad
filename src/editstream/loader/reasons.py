"""Why a row was dropped, in the converter's words: the kind's row problem that matches the parser's exception.

``parse_row`` fails with whatever its code raised (``IndexError: Cannot choose from an empty
sequence``, ``UnidentifiedImageError``). The kind's row checks (the ones behind ``report.json``)
list the row's typed problems; the drop line gives the one the exception points at (an image
error -> an image problem, any other -> a text or row problem), and the cleaned exception when
no check explains it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..kinds import Part, UnknownKindError, get_kind
from .drops import error_text

_IMAGE_ERRORS = ("UnidentifiedImageError", "ImageRejected", "DecompressionBombError", "OSError", "SyntaxError")


def _is_image_error(exc: BaseException) -> bool:
    return any(type(e).__name__ in _IMAGE_ERRORS for e in type(exc).__mro__) or "image" in str(exc).lower()


def drop_reason(schema: str | None, row: Any, exc: BaseException) -> str:
    """The report-style reason ``row`` failed with ``exc`` (``""`` when nothing better than the error is known)."""
    if schema is None or not isinstance(row, Mapping):
        return ""
    try:
        kind = get_kind(schema)
    except UnknownKindError:
        return ""
    try:
        problems = kind.problems(row)
    except Exception:  # noqa: BLE001 - a row too broken to check: the error says enough
        return ""
    if not problems:
        return ""
    if _is_image_error(exc):
        chosen = [p for p in problems if p.part in (Part.IMAGE, Part.ROW)]
    else:
        chosen = [p for p in problems if p.part is not Part.IMAGE]
    return str((chosen or problems)[0]) + f" ({error_text(exc)})" * (not chosen)
