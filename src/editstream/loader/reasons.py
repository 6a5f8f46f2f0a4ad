"""Why a row was dropped, and whether its data or the parser's own code is to blame: bad data (a
problem the kind's checks find, or one of :data:`DATA_ERRORS`) is only counted; anything else is a
parser error, counted against a failure budget so a broken parser stops the stream."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from PIL import Image, UnidentifiedImageError

from ..data.drops import error_text
from ..kinds import DatasetKind, Part, RowProblem
from .decode import ImageRejected

IMAGE_ERRORS: tuple[type[BaseException], ...] = (
    UnidentifiedImageError,
    ImageRejected,
    Image.DecompressionBombError,
    OSError,
    SyntaxError,
)
"""What decoding bad image bytes raises (Pillow raises ``SyntaxError`` for some broken files)."""

DATA_ERRORS: tuple[type[BaseException], ...] = (
    *IMAGE_ERRORS,
    ValueError,  # json.JSONDecodeError, UnicodeDecodeError, a rule of the format (no <video> marker)
    LookupError,  # KeyError of a missing column or field, IndexError of random.choice([])
    EOFError,
    struct.error,
    zlib.error,
)
"""Exceptions that bad row data raises in a parser: the row is dropped and counted, nothing more."""


@dataclass(frozen=True)
class Verdict:
    """Why a row failed: the report-style ``detail`` (``""``: the error says it) and whose fault it is."""

    detail: str
    data_problem: bool


def _problems(kind: DatasetKind | None, row: Any) -> list[RowProblem]:
    if kind is None or not isinstance(row, Mapping):
        return []
    try:
        return kind.problems(row)
    except Exception:  # noqa: BLE001 - a row too broken to check: the error says enough
        return []


def judge(kind: DatasetKind | None, row: Any, exc: BaseException) -> Verdict:
    """The verdict on ``row`` failing with ``exc`` under ``kind`` (``None``: no row checks)."""
    problems = _problems(kind, row)
    data_problem = bool(problems) or isinstance(exc, DATA_ERRORS)
    if not problems:
        return Verdict("", data_problem)
    if isinstance(exc, IMAGE_ERRORS):
        chosen = [p for p in problems if p.part in (Part.IMAGE, Part.ROW)]
    else:
        chosen = [p for p in problems if p.part is not Part.IMAGE]
    detail = str((chosen or problems)[0]) + f" ({error_text(exc)})" * (not chosen)
    return Verdict(detail, data_problem)
