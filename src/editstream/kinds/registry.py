"""The one table of dataset kinds: built-ins by dotted path, plug-ins by ``editstream.kinds`` entry point or
:func:`register`; a plug-in that cannot load is an error naming its package, never a kind gone missing."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points

from .record import DatasetKind, resolve

logger = logging.getLogger("editstream")

ENTRY_POINT_GROUP = "editstream.kinds"
"""The entry-point group a third-party package names its :class:`DatasetKind` objects in."""

_BUILTIN = (
    "editstream.kinds.unified_edit:KIND",
    "editstream.kinds.t2i_pretrain:KIND",
    "editstream.kinds.vlm_sft:KIND",
    "editstream.kinds.generic:KIND",
)
_REPORTED: set[tuple[str, ...]] = set()
"""Column sets whose overlapping kinds were reported already (one warning, not one per call)."""


class UnknownKindError(ValueError):
    """A kind name that no registered kind answers to."""


class AmbiguousKindError(ValueError):
    """Columns that two detectable kinds fit equally well (as many columns each): name the kind."""


class KindPluginError(RuntimeError):
    """An installed plug-in whose kind cannot be loaded: the package and the entry point, and why."""


def _add(kinds: dict[str, DatasetKind], kind: DatasetKind, replace: bool = False) -> None:
    taken = {n: k for k in kinds.values() for n in k.names if k.name != kind.name or not replace}
    clashes = sorted(n for n in kind.names if n in taken and taken[n] is not kind)
    if clashes:
        raise ValueError(f"dataset kind {kind.name!r}: the names {clashes} are already taken by registered kinds")
    kinds[kind.name] = kind


def _add_plugin(kinds: dict[str, DatasetKind], point: EntryPoint) -> None:
    """Add an entry point's kind, or a :class:`KindPluginError` naming package and entry point."""
    dist = getattr(point, "dist", None)
    package = dist.name if dist is not None else point.value.partition(":")[0]
    where = f"the plug-in package {package!r} ({ENTRY_POINT_GROUP!r} entry point {point.name} = {point.value!r})"
    try:
        kind = point.load()
    except Exception as exc:  # whatever a plug-in's import raises is reported as that plug-in's failure
        raise KindPluginError(f"{where} failed to import ({type(exc).__name__}: {exc}); fix or uninstall it") from exc
    if not isinstance(kind, DatasetKind):
        raise KindPluginError(f"{where} names a {type(kind).__name__}, not a DatasetKind")
    try:
        kind.check_paths(load=False)
        _add(kinds, kind)
    except ValueError as exc:
        raise KindPluginError(f"{where}: {exc}") from exc


_KINDS: dict[str, DatasetKind] | None = None


def _loaded() -> dict[str, DatasetKind]:
    """Kinds by canonical name, loaded on first use; a failed load leaves nothing loaded (later calls fail alike)."""
    global _KINDS
    if _KINDS is None:
        kinds: dict[str, DatasetKind] = {}
        for path in _BUILTIN:
            kind = resolve(path)
            kind.check_paths(load=False)
            _add(kinds, kind)
        for point in entry_points(group=ENTRY_POINT_GROUP):
            _add_plugin(kinds, point)
        _KINDS = kinds
    return _KINDS


def register(kind: DatasetKind, replace: bool = False) -> DatasetKind:
    """Add ``kind`` (``replace=True`` swaps a kind of the same name) and return it; its dotted paths are resolved
    now, so a wrong one fails here rather than in the first command."""
    kind.check_paths(load=True)
    _add(_loaded(), kind, replace)
    return kind


def unregister(name: str) -> None:
    """Remove the kind called ``name`` (or one of its aliases)."""
    _loaded().pop(get_kind(name).name)


def all_kinds() -> tuple[DatasetKind, ...]:
    """Every registered kind, built-ins first, in registration order."""
    return tuple(_loaded().values())


def get_kind(name: str) -> DatasetKind:
    """The kind called ``name`` or answering to it as an alias; an error listing the known names otherwise."""
    for kind in all_kinds():
        if name in kind.names:
            return kind
    raise UnknownKindError(f"unknown dataset kind {name!r}; expected one of {kind_choices()}")


def kind_choices(trainable: bool = False) -> list[str]:
    """Every name and alias a user may give, in registry order (``trainable``: kinds with a dataset only)."""
    return [n for k in all_kinds() if k.dataset is not None or not trainable for n in k.names]


def _described(kinds: Iterable[DatasetKind]) -> str:
    return ", ".join(f"{k.name} {sorted(k.columns)}" for k in kinds)


def detect_kind(columns: Iterable[str]) -> DatasetKind | None:
    """The most specific detectable kind (most columns) whose columns are all in ``columns``, or ``None``; two as
    specific are an :class:`AmbiguousKindError`, a less specific fit a warning (once per set of columns)."""
    present = sorted(set(columns))
    found = [k for k in all_kinds() if k.detectable and k.columns and set(k.columns) <= set(present)]
    found.sort(key=lambda kind: -len(kind.columns))
    equal = [k for k in found if len(k.columns) == len(found[0].columns)]
    if len(equal) > 1:
        raise AmbiguousKindError(f"the columns {present} fit the kinds {_described(equal)} equally; name the kind")
    if len(found) > 1 and tuple(present) not in _REPORTED:
        _REPORTED.add(tuple(present))
        text = "editstream: the columns %s fit %s, and also %s with fewer columns; read as %s (name the kind if not)"
        logger.warning(text, present, _described(equal), _described(found[1:]), found[0].name)
    return found[0] if found else None


def kind_of_dataset(cls: type) -> DatasetKind | None:
    """The kind whose dataset class is ``cls`` or one of its bases (a user's ``parse_row`` subclass)."""
    paths = {f"{c.__module__}:{c.__qualname__}": i for i, c in enumerate(cls.__mro__)}
    found = [(paths[k.dataset], k) for k in all_kinds() if k.dataset in paths]
    return min(found, key=lambda pair: pair[0])[1] if found else None
