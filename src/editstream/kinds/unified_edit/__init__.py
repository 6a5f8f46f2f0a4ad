"""The image-editing kind: ``image_list`` (an edit chain of >= 2 images) + ``instruction_list``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ...format.images import image_decode_note, image_header_problem
from ..record import Certainty, DatasetKind, Part, RowProblem

COLUMNS = {"image_list": "list<binary>", "instruction_list": "list<list<string>>"}


def _if_drawn(text: str, part: Part) -> RowProblem:
    return RowProblem(text, part, Certainty.IF_DRAWN)


def row_problems(row: Mapping[str, Any]) -> Iterator[RowProblem]:
    """Too few images or no instruction list (always fatal), then bad instructions and images (fatal if drawn)."""
    images = row.get("image_list")
    if not isinstance(images, list):
        yield RowProblem(f"image_list is {type(images).__name__}, not a list")
        return
    n = len(images)
    if n < 2:
        yield RowProblem(f"fewer than 2 images ({n})", Part.TEXT)
        return
    instructions = row.get("instruction_list")
    if not isinstance(instructions, list):
        yield RowProblem(f"instruction_list is {type(instructions).__name__}, not a list", Part.TEXT)
        return
    if len(instructions) < n - 1:
        text = f"instruction list has {len(instructions)} entries; a chain of {n} images needs {n - 1}"
        yield _if_drawn(text, Part.TEXT)
    for i, phrasings in enumerate(instructions[: n - 1]):
        if not isinstance(phrasings, list) or not phrasings:
            yield _if_drawn(f"instruction {i} has no phrasings", Part.TEXT)
        elif not all(isinstance(p, str) for p in phrasings):
            yield _if_drawn(f"instruction {i} has a phrasing that is not a string", Part.TEXT)
    for i, image in enumerate(images):
        problem = image_header_problem(image)
        if problem is not None:
            yield _if_drawn(f"image {i}: {problem}", Part.IMAGE)


def row_notes(row: Mapping[str, Any]) -> Iterator[str]:
    """Images of the chain that decode without error but not to their pixels (``image_decode_note``)."""
    images = row.get("image_list")
    for i, image in enumerate(images if isinstance(images, list) else ()):
        note = image_decode_note(image)
        if note is not None:
            yield f"image {i}: {note}"


KIND = DatasetKind(
    name="unified_edit",
    summary="image editing: an edit chain of images and the instructions between them",
    columns=COLUMNS,
    row_problems=row_problems,
    row_notes=row_notes,
    dataset="editstream.kinds.unified_edit.dataset:UnifiedEditIterableDataset",
    preview="editstream.kinds.unified_edit.preview:edit_chain",
    synth="editstream.kinds.unified_edit.synth:write_edit_chains",
)
