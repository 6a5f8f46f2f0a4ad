"""The NeMo group registry is the kinds registry's trainable kinds, and stays a mapping users extend."""

from __future__ import annotations

import pytest

import editstream
from editstream import T2IIterableDataset, UnifiedEditIterableDataset
from editstream.kinds import DatasetKind, all_kinds, kind_of_dataset, register, unregister
from editstream.loader.datasets.registry import DATASET_REGISTRY, GroupRegistry


class ToyKindDataset(UnifiedEditIterableDataset):
    """A plug-in kind's dataset class (named by dotted path below)."""


def test_every_trainable_kind_is_a_group_under_its_name():
    names = [k.name for k in all_kinds() if k.dataset is not None]
    assert list(DATASET_REGISTRY) == names and len(DATASET_REGISTRY) == len(names)
    for name in names:
        assert kind_of_dataset(DATASET_REGISTRY[name]).name == name
    assert DATASET_REGISTRY["t2i_pretrain"] is T2IIterableDataset
    assert editstream.DATASET_REGISTRY is DATASET_REGISTRY
    assert "t2i" not in DATASET_REGISTRY  # group names are the kinds' names, not their aliases


def test_a_registered_kind_becomes_a_group():
    kind = register(DatasetKind(name="toy_kind", summary="toy", dataset="test_group_registry:ToyKindDataset"))
    try:
        assert "toy_kind" in DATASET_REGISTRY and DATASET_REGISTRY["toy_kind"] is ToyKindDataset
        assert kind_of_dataset(ToyKindDataset) is kind  # its own kind, not its base class's
    finally:
        unregister("toy_kind")
    assert "toy_kind" not in DATASET_REGISTRY


def test_users_add_replace_and_remove_groups_as_in_a_dict():
    registry = GroupRegistry()
    registry["mine"] = ToyKindDataset
    registry["unified_edit"] = ToyKindDataset
    assert registry["mine"] is registry["unified_edit"] is ToyKindDataset
    assert list(registry).count("unified_edit") == 1 and "mine" in registry
    del registry["unified_edit"]  # back to the kind's class
    assert registry["unified_edit"] is UnifiedEditIterableDataset
    del registry["unified_edit"]  # the kind's group itself
    assert "unified_edit" not in registry and "unified_edit" not in list(registry)
    with pytest.raises(KeyError):
        registry["unified_edit"]
    with pytest.raises(KeyError):
        del registry["nothing"]
    assert {**registry} == {name: registry[name] for name in registry}
