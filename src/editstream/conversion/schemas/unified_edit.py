"""Checks for the ``unified_edit`` schema: ``image_list`` (>= 2 images) + ``instruction_list``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...format.columns import SCHEMA_COLUMNS
from ...format.images import image_header_problem
from .problems import IfDrawn

NAME = "unified_edit"
COLUMN_TYPES = SCHEMA_COLUMNS[NAME]
REQUIRED_COLUMNS = tuple(COLUMN_TYPES)


def check_row(row: Mapping[str, Any]) -> str | None:
    """The first reason this row would fail ``UnifiedEditIterableDataset.parse_row``, or ``None``.

    A row is always bad when it has fewer than 2 images or no instruction list; it is bad in
    the epochs whose draws reach an image whose header does not parse or is over the limits,
    or an instruction entry that is missing, empty or not text (:class:`IfDrawn`).
    """
    images = row.get("image_list")
    if not isinstance(images, list):
        return f"image_list is {type(images).__name__}, not a list"
    n = len(images)
    if n < 2:
        return f"fewer than 2 images ({n})"
    instructions = row.get("instruction_list")
    if not isinstance(instructions, list):
        return f"instruction_list is {type(instructions).__name__}, not a list"
    if len(instructions) < n - 1:
        return IfDrawn(f"instruction list has {len(instructions)} entries; a chain of {n} images needs {n - 1}")
    for i in range(n - 1):
        phrasings = instructions[i]
        if not isinstance(phrasings, list) or not phrasings:
            return IfDrawn(f"instruction {i} has no phrasings")
        if not all(isinstance(p, str) for p in phrasings):
            return IfDrawn(f"instruction {i} has a phrasing that is not a string")
    for i, image in enumerate(images):
        problem = image_header_problem(image)
        if problem is not None:
            return IfDrawn(f"image {i}: {problem}")
    return None
