"""The declarative mapping: which source columns become an edit chain, read from YAML or JSON.

Every check runs when the mapping is built; errors name the file, the key and the value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...format.columns import normalize_type
from ...format.safe_yaml import YamlBoundError, brief, load_yaml
from ...kinds import DatasetKind, UnknownKindError, all_kinds, get_kind
from .where import Filter, FilterError, parse_filter

INSTRUCTION_FORMATS = ("string", "list", "json")
"""How a column holds an edit's phrasings: one string, a list of strings, or a JSON string of either."""
IMAGE_LIST_TYPE = "list<binary>"
INSTRUCTION_LIST_TYPE = "list<list<string>>"
CAPTIONED_PAIR = ("binary", "string")
"""A kind of one image and one text column (text-to-image): the mapping names one image column and the
caption columns, which become the kind's JSON object of captions."""
KEYS = (
    "name",
    "kind",
    "dataset",
    "description",
    "images",
    "instructions",
    "group_by",
    "order_by",
    "keep",
    "where",
    "metadata",
    "media",
    "paths_from",
    "optional_tail",
)


class MappingError(ValueError):
    """A mapping that cannot be used: the message names the file, the key and the offending value."""


def _error(origin: str, key: str, what: str, value: Any) -> MappingError:
    return MappingError(f"{origin}: key {brief(key)}: {what} (got {brief(value)})")


@dataclass(frozen=True)
class InstructionSource:
    """One edit's phrasings: the column they are in and how it holds them (``INSTRUCTION_FORMATS``)."""

    column: str
    format: str = "string"
    remove: tuple[str, ...] = ()
    """Literal texts cut out of every phrasing (e.g. an image placeholder such as ``<img><|image_1|></img>``)."""


@dataclass(frozen=True, kw_only=True)
class AdapterMapping:
    """A validated mapping from a source schema to edit-chain rows of ``kind``.

    One source row gives ``images`` (input, then one output per edit) and one phrasing list per edit. With
    ``group_by`` the rows of a key, sorted by ``order_by``, form one chain: the first row's images, then each
    later row's without its first (the repeated input). ``keep`` columns are carried (per row as a list in a
    group). ``metadata`` / ``media`` / ``paths_from`` describe a JSON source and where its images are.
    """

    name: str
    kind: str
    images: tuple[str, ...]
    instructions: tuple[InstructionSource, ...]
    group_by: tuple[str, ...] = ()
    order_by: str | None = None
    keep: tuple[str, ...] = ()
    where: str | None = None
    dataset: str | None = None
    description: str = ""
    metadata: tuple[str, ...] = ()
    media: tuple[str, ...] = ()
    paths_from: str | None = None
    optional_tail: bool = False
    origin: str = field(default="<mapping>", compare=False)

    @property
    def captioned(self) -> bool:
        """Whether the kind is one image and its captions (text-to-image), not an edit chain."""
        return target_columns(self.kind, self.origin)[2]

    def __post_init__(self) -> None:
        o = self.origin
        if self.captioned:
            if len(self.images) != 1 or not self.instructions or self.group_by or self.optional_tail:
                what = "a text-to-image kind takes one image column, caption columns, no group_by or optional_tail"
                raise _error(o, "images", what, self.images)
            return self._check_rest()
        if len(self.images) < 2:
            raise _error(o, "images", "a chain needs at least 2 image columns (the input and an output)", self.images)
        _no_duplicates(o, "images", self.images)
        if len(self.instructions) != len(self.images) - 1:
            raise _error(
                o,
                "instructions",
                f"{len(self.images)} image columns make {len(self.images) - 1} edits, so name that many instructions",
                [i.column for i in self.instructions],
            )
        self._check_rest()

    def _check_rest(self) -> None:
        o = self.origin
        if (self.paths_from or self.media) and not self.metadata:
            raise _error(o, "media", "media and paths_from go with metadata (the files that name the images)", None)
        for source in self.instructions:
            if source.format not in INSTRUCTION_FORMATS:
                raise _error(o, "instructions", f"format must be one of {list(INSTRUCTION_FORMATS)}", source.format)
        if self.order_by is not None and not self.group_by:
            raise _error(o, "order_by", "orders the rows of a group, so it needs group_by", self.order_by)
        _no_duplicates(o, "keep", self.keep)
        clash = sorted(set(self.keep) & set(self.target_columns))
        if clash:
            raise _error(o, "keep", f"{clash} are the output columns of kind {self.kind!r}", list(self.keep))
        if self.where is not None:
            try:
                parse_filter(self.where)
            except FilterError as exc:
                raise _error(o, "where", str(exc), self.where) from None

    @property
    def target_columns(self) -> tuple[str, str]:
        """The kind's image(-list) and instruction-list (or captions) column names, found by their types."""
        images, texts, _ = target_columns(self.kind, self.origin)
        return images, texts

    @property
    def source_columns(self) -> tuple[str, ...]:
        """Every source column the adaptation reads (filter columns excepted), in first-use order."""
        names = [*self.images, *(i.column for i in self.instructions), *self.group_by]
        names += [self.order_by] if self.order_by else []
        return tuple(dict.fromkeys([*names, *self.keep]))

    def filter(self, where: str | None = None) -> Filter | None:
        """The row filter: ``where`` in place of the mapping's own (``""``: none), parsed."""
        text = self.where if where is None else where
        return parse_filter(text) if text else None

    def read_columns(self, where: Filter | None) -> list[str]:
        """The source columns an adaptation with the filter ``where`` reads, in first-use order."""
        return list(dict.fromkeys([*self.source_columns, *(where.columns if where else ())]))

    def to_dict(self) -> dict[str, Any]:
        """The mapping as plain data (what a mapping file holds, keys in ``KEYS`` order, unset ones left out)."""
        out: dict[str, Any] = {}
        for key in KEYS:
            value = getattr(self, key)
            if key == "instructions":
                value = [{"column": i.column, "format": i.format, "remove": list(i.remove)} for i in value]
                value = [{k: v for k, v in source.items() if v} for source in value]
            if value not in (None, "", (), False):
                out[key] = list(value) if isinstance(value, tuple) else value
        return out

    def fingerprint_data(self) -> dict[str, Any]:
        """What changes the output: everything but the name, the description and the dataset id."""
        return {k: v for k, v in self.to_dict().items() if k not in ("name", "description", "dataset")}


def _no_duplicates(origin: str, key: str, names: tuple[str, ...]) -> None:
    seen = [n for i, n in enumerate(names) if n in names[:i]]
    if seen:
        raise _error(origin, key, f"names {sorted(set(seen))} more than once", list(names))


def _chain_pair(kind: DatasetKind) -> tuple[str, str, bool] | None:
    """The kind's (images, texts, captioned) columns: an edit chain's two lists, or one image and its captions."""
    by_type: dict[str, list[str]] = {}
    for column, notation in kind.columns.items():
        by_type.setdefault(normalize_type(notation), []).append(column)
    for (image_type, text_type), captioned in (
        ((IMAGE_LIST_TYPE, INSTRUCTION_LIST_TYPE), False),
        (CAPTIONED_PAIR, True),
    ):
        images, texts = by_type.get(image_type, []), by_type.get(text_type, [])
        if len(images) == 1 and len(texts) == 1:
            return images[0], texts[0], captioned
    return None


def default_kind(origin: str = "<mapping>") -> str:
    """The kind a mapping without ``kind:`` targets: the one registered edit-chain kind, else an error."""
    chains = [k.name for k in all_kinds() if k.source.takes_columns and (_chain_pair(k) or (0, 0, 1))[2] is False]
    if len(chains) != 1:
        raise _error(origin, "kind", f"is required: the registered edit-chain kinds are {chains}", None)
    return chains[0]


def target_columns(kind_name: str, origin: str = "<mapping>") -> tuple[str, str, bool]:
    """The ``(image list, instruction list, False)`` columns of ``kind_name`` (typed ``list<binary>`` and
    ``list<list<string>>``), or ``(image, captions, True)`` of a one-image kind (``binary`` + ``string``),
    so no module but the kind's own spells them."""
    try:
        kind = get_kind(kind_name)
    except UnknownKindError as exc:
        raise _error(origin, "kind", str(exc), kind_name) from None
    pair = _chain_pair(kind)
    if pair is None:
        raise _error(
            origin,
            "kind",
            f"kind {kind.name!r} has no single {IMAGE_LIST_TYPE} + {INSTRUCTION_LIST_TYPE} pair "
            f"(nor one {CAPTIONED_PAIR[0]} image + {CAPTIONED_PAIR[1]} captions)",
            kind_name,
        )
    return pair


def _names(origin: str, key: str, value: Any, *, single_ok: bool = True) -> tuple[str, ...]:
    if value is None and single_ok:
        return ()
    if isinstance(value, str) and single_ok:
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _error(origin, key, "must be a list of column names", value)
    return tuple(value)


def _instruction(origin: str, value: Any) -> InstructionSource:
    if isinstance(value, str) and value:
        return InstructionSource(value)
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"column", "format", "remove"})
        if unknown:
            raise _error(origin, "instructions", f"an entry takes 'column', 'format', 'remove', not {unknown}", value)
        column = value.get("column")
        if not isinstance(column, str) or not column:
            raise _error(origin, "instructions", "an entry needs a 'column' name", value)
        remove = _names(origin, "remove", value.get("remove", []))
        return InstructionSource(column, value.get("format", "string"), remove)  # the format is checked later
    raise _error(origin, "instructions", "an entry is a column name or {column: NAME, format: string|list|json}", value)


def _text(origin: str, data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _error(origin, key, "must be a non-empty string", value)
    return value


def _flag(origin: str, data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise _error(origin, key, "must be true or false", value)
    return value


def mapping_from_dict(data: Any, origin: str = "<mapping>") -> AdapterMapping:
    """Build and validate a mapping from plain data (a parsed YAML/JSON document)."""
    if not isinstance(data, dict):
        raise MappingError(
            f"{origin}: a mapping is a YAML/JSON object with keys {list(KEYS)}, not {type(data).__name__}"
        )
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise _error(origin, unknown[0], f"is not a mapping key; the keys are {list(KEYS)}", data[unknown[0]])
    for key in ("images", "instructions"):
        if key not in data:
            raise _error(origin, key, "is required", None)
    raw_instructions = data["instructions"]
    if isinstance(raw_instructions, (str, dict)):
        raw_instructions = [raw_instructions]
    if not isinstance(raw_instructions, list):
        raise _error(origin, "instructions", "must be a list (one entry per edit)", raw_instructions)
    return AdapterMapping(
        name=_text(origin, data, "name") or Path(origin).stem,
        kind=_text(origin, data, "kind") or default_kind(origin),
        images=_names(origin, "images", data["images"], single_ok=False),
        instructions=tuple(_instruction(origin, v) for v in raw_instructions),
        group_by=_names(origin, "group_by", data.get("group_by")),
        order_by=_text(origin, data, "order_by"),
        keep=_names(origin, "keep", data.get("keep")),
        where=_text(origin, data, "where"),
        dataset=_text(origin, data, "dataset"),
        description=_text(origin, data, "description") or "",
        metadata=_names(origin, "metadata", data.get("metadata")),
        media=_names(origin, "media", data.get("media")),
        paths_from=_text(origin, data, "paths_from"),
        optional_tail=_flag(origin, data, "optional_tail"),
        origin=origin,
    )


def load_mapping(path: str | Path) -> AdapterMapping:
    """Read a mapping file: JSON by a ``.json`` suffix, else YAML (aliases expanded within a bound)."""
    path = Path(path)
    origin = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MappingError(f"mapping file not found: {origin}") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else load_yaml(text, origin)
    except YamlBoundError as exc:
        raise MappingError(str(exc)) from None
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        raise MappingError(f"{origin}: cannot parse the mapping: {brief(str(exc))}") from None
    return mapping_from_dict(data, origin)


BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


def _builtin_files() -> dict[str, Path]:
    return {load_mapping(path).name: path for path in sorted(BUILTIN_DIR.glob("*.yaml"))}


def builtin_names() -> list[str]:
    """The names ``--from`` accepts, sorted."""
    return sorted(_builtin_files())


def builtin_path(name: str) -> Path:
    """The mapping file of the built-in adapter ``name`` (to read, or to copy and change)."""
    files = _builtin_files()
    if name not in files:
        raise MappingError(
            f"unknown adapter {name!r}; the built-in adapters are {sorted(files)} (or give a mapping file)"
        )
    return files[name]


def resolve_mapping(adapter: str | Path | AdapterMapping) -> AdapterMapping:
    """A mapping from a built-in name, a mapping file path, or a mapping itself."""
    if isinstance(adapter, AdapterMapping):
        return adapter
    path = Path(adapter)
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.exists():
        return load_mapping(path)
    return load_mapping(builtin_path(str(adapter)))
