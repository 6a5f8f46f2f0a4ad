"""Why a row of a known schema fails its training-time parser: one vocabulary for the converter and the loader.

``row_problems(schema, row)`` lists every problem of a row in a fixed order, as short phrases
("fewer than 2 images (1)", "instruction 1 has no phrasings", "image 0: undecodable image
header (...)"). The converter's ``report.json`` gives the first; the loader, when ``parse_row``
raised, gives the one its exception points at, so a drop line reads like the report entry.
A :class:`IfDrawn` phrase is a problem the parser meets only when its random draws reach it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from .images import image_header_problem


class IfDrawn(str):
    """A row problem the parser meets only when its random draws select the bad part."""


def unified_edit_problems(row: Mapping[str, Any]) -> Iterator[str]:
    """Problems of an edit row: too few images or no instruction list (always), then bad
    instructions and images (:class:`IfDrawn`)."""
    images = row.get("image_list")
    if not isinstance(images, list):
        yield f"image_list is {type(images).__name__}, not a list"
        return
    n = len(images)
    if n < 2:
        yield f"fewer than 2 images ({n})"
        return
    instructions = row.get("instruction_list")
    if not isinstance(instructions, list):
        yield f"instruction_list is {type(instructions).__name__}, not a list"
        return
    if len(instructions) < n - 1:
        yield IfDrawn(f"instruction list has {len(instructions)} entries; a chain of {n} images needs {n - 1}")
    for i in range(min(n - 1, len(instructions))):
        phrasings = instructions[i]
        if not isinstance(phrasings, list) or not phrasings:
            yield IfDrawn(f"instruction {i} has no phrasings")
        elif not all(isinstance(p, str) for p in phrasings):
            yield IfDrawn(f"instruction {i} has a phrasing that is not a string")
    for i, image in enumerate(images):
        problem = image_header_problem(image)
        if problem is not None:
            yield IfDrawn(f"image {i}: {problem}")


def t2i_problems(row: Mapping[str, Any]) -> Iterator[str]:
    """Problems of a text-to-image row: captions that are not a JSON object of text, a bad image."""
    captions = row.get("captions")
    if not isinstance(captions, str):
        yield f"captions is {type(captions).__name__}, not a JSON string"
    else:
        try:
            parsed = json.loads(captions)
        except json.JSONDecodeError as exc:
            yield f"caption JSON does not parse ({exc})"
        else:
            if not isinstance(parsed, dict):
                yield f"caption JSON is a {type(parsed).__name__}, not an object"
            else:
                for key, value in parsed.items():
                    if not isinstance(value, str):
                        yield f"caption {key!r} is a {type(value).__name__}, not text"
                        break
    problem = image_header_problem(row.get("image"))
    if problem is not None:
        yield f"image: {problem}"


_CHECKS = {"unified_edit": unified_edit_problems, "t2i_pretrain": t2i_problems}


def row_problems(schema: str, row: Mapping[str, Any]) -> list[str]:
    """Every problem of ``row`` under ``schema`` (none for schemas without checks)."""
    check = _CHECKS.get(schema)
    return list(check(row)) if check is not None else []
