"""The one table of dataset kinds: built-in kinds by dotted path, third-party kinds by entry point.

Every layer that needs to know which kinds exist (CLI choices, detection, conversion, verify,
inspect, preview, synth, drop reasons, the NeMo group registry) asks this module. A package adds
a kind by naming a :class:`DatasetKind` in the ``editstream.kinds`` entry-point group, or by
calling :func:`register`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib.metadata import entry_points

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


class UnknownKindError(ValueError):
    """A kind name that no registered kind answers to."""


class _Registry:
    """Kinds by canonical name, loaded on first use (built-ins, then entry points)."""

    def __init__(self) -> None:
        self._kinds: dict[str, DatasetKind] = {}
        self._loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for path in _BUILTIN:
            self.add(resolve(path))
        for point in entry_points(group=ENTRY_POINT_GROUP):
            try:
                kind = point.load()
            except Exception as exc:  # noqa: BLE001 - one broken plug-in must not take the built-in kinds down
                logger.warning(
                    "editstream: the dataset kind plug-in %r (%s) failed to load: %s", point.name, point.value, exc
                )
                continue
            if not isinstance(kind, DatasetKind):
                logger.warning("editstream: the plug-in %r (%s) is not a DatasetKind; ignored", point.name, point.value)
                continue
            if kind.name in self._kinds and self._kinds[kind.name] is not kind:
                logger.warning(
                    "editstream: the plug-in %r names kind %r, which is already registered", point.name, kind.name
                )
                continue
            self.add(kind)

    def add(self, kind: DatasetKind, replace: bool = False) -> None:
        taken = {n: k for k in self._kinds.values() for n in k.names if k.name != kind.name or not replace}
        clashes = sorted(n for n in kind.names if n in taken and taken[n] is not kind)
        if clashes:
            raise ValueError(f"dataset kind {kind.name!r}: the names {clashes} are already taken by registered kinds")
        self._kinds[kind.name] = kind

    def kinds(self) -> tuple[DatasetKind, ...]:
        self._load()
        return tuple(self._kinds.values())

    def remove(self, name: str) -> None:
        self._load()
        self._kinds.pop(get_kind(name).name)


_REGISTRY = _Registry()


def register(kind: DatasetKind, replace: bool = False) -> DatasetKind:
    """Add ``kind`` to the registry (``replace=True`` swaps a kind of the same name); returns it."""
    _REGISTRY.kinds()
    _REGISTRY.add(kind, replace=replace)
    return kind


def unregister(name: str) -> None:
    """Remove the kind called ``name`` (or one of its aliases)."""
    _REGISTRY.remove(name)


def all_kinds() -> tuple[DatasetKind, ...]:
    """Every registered kind, built-ins first, in registration order."""
    return _REGISTRY.kinds()


def get_kind(name: str) -> DatasetKind:
    """The kind called ``name`` or answering to it as an alias; an error listing the known names otherwise."""
    for kind in all_kinds():
        if name in kind.names:
            return kind
    raise UnknownKindError(f"unknown dataset kind {name!r}; expected one of {kind_choices()}")


def kind_choices(trainable: bool = False) -> list[str]:
    """Every name and alias a user may give, in registry order (``trainable``: kinds with a dataset only)."""
    return [n for k in all_kinds() if k.dataset is not None or not trainable for n in k.names]


def detect_kind(columns: Iterable[str]) -> DatasetKind | None:
    """The first detectable kind whose columns are all in ``columns``, or ``None``."""
    present = set(columns)
    for kind in all_kinds():
        if kind.detectable and kind.columns and set(kind.columns) <= present:
            return kind
    return None


def kind_of_dataset(cls: type) -> DatasetKind | None:
    """The kind whose dataset class is ``cls`` or one of its bases (a user's ``parse_row`` subclass)."""
    paths = {f"{c.__module__}:{c.__qualname__}": i for i, c in enumerate(cls.__mro__)}
    found = [(paths[k.dataset], k) for k in all_kinds() if k.dataset in paths]
    return min(found, key=lambda pair: pair[0])[1] if found else None
