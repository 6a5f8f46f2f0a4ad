"""What a dataset kind is: one typed record every layer reads instead of branching on a kind's name; its code
is named by dotted paths (``"package.module:attribute"``), imported only when used."""

from __future__ import annotations

import enum
import importlib
import importlib.util
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .shapes import SourceShape


class Certainty(enum.Enum):
    """Whether a row's parser always fails on a problem, or only in epochs whose draws reach it."""

    ALWAYS = "always"
    IF_DRAWN = "if_drawn"


class Part(enum.Enum):
    """Which part of a row a problem is about, so a parser's exception can be matched to it."""

    IMAGE = "image"
    MEDIA = "media"
    TEXT = "text"
    ROW = "row"


@dataclass(frozen=True)
class RowProblem:
    """One reason a row fails its kind's training-time parser, in the words report.json uses."""

    text: str
    part: Part = Part.ROW
    certainty: Certainty = Certainty.ALWAYS
    missing: tuple[str, ...] = ()
    """Media names the problem is about when they could not be read (JSONL + media kinds)."""

    def __str__(self) -> str:
        return self.text


RowCheck = Callable[[Mapping[str, Any]], Iterator[RowProblem]]
RowNotes = Callable[[Mapping[str, Any]], Iterator[str]]
"""A row -> what its parser does to it silently that report.json should say (never a bad row)."""


def _nothing(row: Mapping[str, Any]) -> Iterator[Any]:
    return iter(())


class KindPathError(ValueError):
    """A kind's dotted path (``dataset``, ``preview`` or ``synth``) that names no module or attribute."""


def resolve(path: str, find_only: bool = False) -> Any:
    """The object a ``"package.module:attribute"`` path names; ``find_only``: only find its module (else an
    ``ImportError``) and return ``None``."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{path!r} is not a 'package.module:attribute' path")
    if find_only:
        if importlib.util.find_spec(module_name) is None:
            raise ModuleNotFoundError(f"No module named {module_name!r}")
        return None
    value: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


@dataclass(frozen=True)
class DatasetKind:
    """A dataset kind: its names, the columns its parser reads (name -> type notation), its row checks, and the
    dotted paths of its dataset class, preview and synth functions (``None``: the commands refuse the kind),
    checked at registration (built-in and entry-point kinds only have their modules found, so no torch import)."""

    name: str
    summary: str
    columns: Mapping[str, str] = field(default_factory=dict)
    row_problems: RowCheck = _nothing
    aliases: tuple[str, ...] = ()
    source: SourceShape = SourceShape.PARQUET
    dataset: str | None = None
    preview: str | None = None
    """Dotted path of the preview function (``editstream.preview.record.PreviewFunction``)."""
    synth: str | None = None
    """Dotted path of the synth function (``editstream.sandbox.synth.SynthWriter``)."""
    detectable: bool = True
    """Whether a parquet source whose columns include ``columns`` is taken to be of this kind."""
    image_columns: tuple[str, ...] | None = None
    """Columns whose members are images, for ``inspect``'s counts; ``None``: the binary columns of ``columns``."""
    row_notes: RowNotes = _nothing
    """What the parser does to a row's data without failing (a 16-bit greyscale PNG decodes white):
    report.json lists these as notes, apart from bad rows, so they never change which rows are bad."""

    @property
    def names(self) -> tuple[str, ...]:
        """The canonical name first, then its aliases."""
        return (self.name, *self.aliases)

    def image_column_names(self) -> tuple[str, ...]:
        """The columns ``inspect`` counts images in: ``image_columns``, else every binary-typed column."""
        if self.image_columns is not None:
            return self.image_columns
        return tuple(name for name, notation in self.columns.items() if "binary" in notation)

    def problems(self, row: Mapping[str, Any]) -> list[RowProblem]:
        """Every problem of ``row`` under this kind, in the order its checks find them."""
        return list(self.row_problems(row))

    def first_problem(self, row: Mapping[str, Any]) -> RowProblem | None:
        """The first problem of ``row`` (what report.json records), or ``None``."""
        return next(iter(self.row_problems(row)), None)

    def code(self, field_name: str, find_only: bool = False) -> Any:
        """The object the dotted path of ``field_name`` names, or a :class:`KindPathError` naming kind, field, path."""
        path = getattr(self, field_name)
        try:
            return resolve(path, find_only)
        except (ImportError, AttributeError, ValueError) as exc:
            raise KindPathError(f"dataset kind {self.name!r}: {field_name}={path!r} names nothing: {exc}") from exc

    def check_paths(self, load: bool) -> None:
        """Refuse a dotted path that names nothing (``load``: import it; else only find its module)."""
        for name in ("dataset", "preview", "synth"):
            if getattr(self, name) is not None:
                self.code(name, find_only=not load)

    def dataset_class(self) -> type:
        """The training dataset class, imported now; a ``ValueError`` naming the kind when it has none."""
        if self.dataset is None:
            raise ValueError(f"dataset kind {self.name!r} has no training dataset (it is for conversion only)")
        cls = self.code("dataset")
        if not isinstance(cls, type):
            raise TypeError(f"dataset kind {self.name!r}: {self.dataset!r} is not a class")
        return cls
