"""Group name -> dataset class: every registered kind with a training dataset, under its name, and (a
mutable mapping, as in BAGEL) the groups you add with ``DATASET_REGISTRY["name"] = MyDataset``."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

from ...kinds import DatasetKind, all_kinds


class GroupRegistry(MutableMapping[str, type]):
    """Every trainable kind's dataset class under its name (imported on first lookup), plus groups you add."""

    def __init__(self) -> None:
        self._added: dict[str, type] = {}
        self._removed: set[str] = set()

    def _kinds(self) -> dict[str, DatasetKind]:
        return {k.name: k for k in all_kinds() if k.dataset is not None and k.name not in self._removed}

    def __getitem__(self, name: str) -> type:
        if name in self._added:
            return self._added[name]
        kind = self._kinds().get(name)
        if kind is None:
            raise KeyError(name)
        return kind.dataset_class()

    def __setitem__(self, name: str, dataset_class: type) -> None:
        self._added[name] = dataset_class
        self._removed.discard(name)

    def __delitem__(self, name: str) -> None:
        if name in self._added:
            del self._added[name]
        elif name in self._kinds():
            self._removed.add(name)
        else:
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        names = list(self._kinds())
        yield from names
        yield from (name for name in self._added if name not in names)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._added or name in self._kinds())

    def __repr__(self) -> str:
        return f"GroupRegistry({sorted(self)})"


DATASET_REGISTRY = GroupRegistry()
"""The groups a ``grouped_datasets`` config may name (``PackedDataset(registry=...)`` overrides it)."""
