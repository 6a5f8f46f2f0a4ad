"""A third-party editstream dataset kind: subject-driven generation (reference images + prompt -> target).

This module is what editstream loads from the ``editstream.kinds`` entry point, for every
command, so it stays light: the kind record, its row checks and its preview function. The
training dataset and the synthetic-data writer live in :mod:`editstream_subject.data` and are
named by dotted path, imported only when ``stream``, a recipe or ``synth`` needs them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from editstream.plugin import DatasetKind, Layout, Part, Record, RowProblem, image_header_problem

NAME = "subject_driven"
COLUMNS = {"reference_images": "list<binary>", "prompt": "string", "target_image": "binary"}
"""The columns the parser reads (and detection looks for), in editstream's type notation."""


def row_problems(row: Mapping[str, Any]) -> Iterator[RowProblem]:
    """Why the parser would fail on ``row``: no reference images, no prompt, an image whose header
    does not parse. The parser decodes every image and encodes the prompt, so each is always fatal."""
    references = row.get("reference_images")
    if not isinstance(references, list):
        yield RowProblem(f"reference_images is {type(references).__name__}, not a list")
    elif not references:
        yield RowProblem("no reference images")
    prompt = row.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        yield RowProblem(f"prompt is {prompt!r}, not text", Part.TEXT)
    for i, image in enumerate(references if isinstance(references, list) else []):
        problem = image_header_problem(image)
        if problem is not None:
            yield RowProblem(f"reference image {i}: {problem}", Part.IMAGE)
    problem = image_header_problem(row.get("target_image"))
    if problem is not None:
        yield RowProblem(f"target image: {problem}", Part.IMAGE)


def preview(title: str, row: Mapping[str, Any]) -> Record:
    """The reference images side by side, then the prompt, then the target they should produce."""
    references = list(row.get("reference_images") or [])
    prompt = row.get("prompt")
    texts = ["+"] * max(len(references) - 1, 0) + [str(prompt) if prompt else "(no prompt)"]
    return Record(title, [*references, row.get("target_image")], texts, layout=Layout.CHAIN)


KIND = DatasetKind(
    name=NAME,
    aliases=("subject",),
    summary="subject-driven generation: reference images of a subject and a prompt, the target image to produce",
    columns=COLUMNS,
    row_problems=row_problems,
    dataset="editstream_subject.data:SubjectDrivenIterableDataset",
    preview="editstream_subject:preview",
    synth="editstream_subject.data:write_subject_dataset",
)
