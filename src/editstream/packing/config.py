"""``BagelDatasetConfig``: NeMo Automodel's dataset section of a BAGEL recipe (same fields, order and
defaults, then editstream's), validated on creation; ``build()`` returns a ready ``PackedDataset``."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from ..format.safe_yaml import YamlBoundError, load_yaml
from ..io.storage import read_bytes
from .dataset import PackedDataset
from .groups import GroupRegistryMapping
from .spec import EXTENSIONS, FIELDS, PACKER_KEYWORDS, SEQUENCE_KNOBS, PackingSpec, is_int
from .surfaces import with_fields

DEFAULT_DATA_SEED = 42
"""The seed of ``set_epoch`` (the rank slices) when a config names none."""


def load_mapping(
    *, inline: Mapping[str, Any] | None, path: str | None, name: str, storage_options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A deep copy of ``inline``, or of the mapping in the YAML (``.yaml`` / ``.yml``) or JSON file at ``path``
    (local or fsspec URL; it wins). Errors name the field and the file."""
    if path is not None:
        try:
            raw = read_bytes(path, dict(storage_options) if storage_options else None)
        except FileNotFoundError:
            raise FileNotFoundError(f"BAGEL {name}_path {path!r} does not exist") from None
        origin = f"BAGEL {name}_path {path!r}"
        try:
            value: Any = load_yaml(raw, origin) if path.endswith((".yaml", ".yml")) else json.loads(raw)
        except YamlBoundError as exc:
            raise ValueError(str(exc)) from None
        except (ValueError, RecursionError, yaml.YAMLError) as exc:
            raise ValueError(f"{origin} does not parse: {str(exc)[:500]}") from None
    elif inline is not None:
        value = inline
    else:
        raise ValueError(f"BAGEL dataset config requires {name} or {name}_path")
    if not isinstance(value, Mapping):
        where = f" (from {path!r})" if path is not None else ""
        raise TypeError(f"BAGEL {name} must resolve to a mapping, got {type(value).__name__}{where}")
    return copy.deepcopy(dict(value))


@dataclass
@with_fields({"dataset_info_path": PACKER_KEYWORDS, "data_seed": (*SEQUENCE_KNOBS, *EXTENSIONS)})
class BagelDatasetConfig:
    """The dataset section of a BAGEL recipe: ``grouped_datasets`` maps a group name (a kind or a ``DATASET_REGISTRY``
    key) to its arguments, ``dataset_info`` group -> dataset name -> location (either from a ``*_path`` file), then
    the spec's knobs in NeMo's places (read them typed through :meth:`spec`)."""

    grouped_datasets: Mapping[str, Any] | None = None
    grouped_datasets_path: str | None = None
    dataset_info: Mapping[str, Any] | None = None
    dataset_info_path: str | None = None
    data_seed: int = DEFAULT_DATA_SEED

    if TYPE_CHECKING:  # the spec's knobs are spliced in at import, where a type checker cannot see them

        def __init__(self, *args: Any, **fields: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...

    def __post_init__(self) -> None:
        for name, path in (("grouped_datasets", self.grouped_datasets_path), ("dataset_info", self.dataset_info_path)):
            if path is not None and not isinstance(path, str):
                raise TypeError(f"{name}_path must be a path or URL string, got {type(path).__name__} {path!r}")
        if self.grouped_datasets is None and self.grouped_datasets_path is None:
            raise ValueError("BAGEL dataset config requires grouped_datasets or grouped_datasets_path")
        if self.grouped_datasets is not None and self.grouped_datasets_path is None:
            check_grouped_datasets(self.grouped_datasets)
        self.spec()  # the knobs are the spec's, checked by its rules
        if not is_int(self.data_seed):
            raise ValueError(f"data_seed must be an integer, got {self.data_seed!r}")

    def spec(self) -> PackingSpec:
        """The packing spec of this config's knobs (a ``ValueError`` naming a bad field and its value)."""
        return PackingSpec(**{name: getattr(self, name) for name in FIELDS})

    def resolved(self) -> BagelDatasetConfig:
        """A copy with ``grouped_datasets`` and ``dataset_info`` loaded (deep copies; ``self`` untouched)."""
        groups = load_mapping(inline=self.grouped_datasets, path=self.grouped_datasets_path, name="grouped_datasets")
        check_grouped_datasets(groups)
        info = load_mapping(inline=self.dataset_info, path=self.dataset_info_path, name="dataset_info")
        return dataclasses.replace(self, grouped_datasets=groups, dataset_info=info)

    def packed_dataset_class(self) -> Callable[..., PackedDataset]:
        """The packer class ``build()`` constructs; a subclass (``editstream.nemo``'s) may look it up elsewhere."""
        return PackedDataset

    def build(
        self,
        *,
        tokenizer: Any,
        special_tokens: Mapping[str, Any],
        rank: int,
        world_size: int,
        num_workers: int,
        global_seed: int,
        data_status: Any = None,
        registry: GroupRegistryMapping | None = None,
    ) -> PackedDataset:
        """The ``PackedDataset`` of this config for one rank (``global_seed`` seeds its worker RNGs), with
        ``set_epoch(data_seed)`` applied; editstream's extensions are passed only when set, so any packer class
        with NeMo's signature can stand in (:meth:`packed_dataset_class`)."""
        runtime = self.resolved()
        extensions = {"registry": registry} if registry is not None else {}
        dataset = self.packed_dataset_class()(
            data_config=runtime,
            tokenizer=tokenizer,
            special_tokens=special_tokens,
            local_rank=rank,
            world_size=world_size,
            num_workers=num_workers,
            data_status=data_status,
            dataset_info=runtime.dataset_info,
            global_seed=global_seed,
            **self.spec().packer_arguments(),
            **extensions,
        )
        dataset.set_epoch(self.data_seed)
        return dataset


def check_grouped_datasets(groups: Any) -> None:
    """``grouped_datasets`` must be a non-empty mapping of group name -> mapping of arguments."""
    if not isinstance(groups, Mapping):
        raise ValueError(f"grouped_datasets must be a mapping of group name -> arguments, got {type(groups).__name__}")
    if not groups:
        raise ValueError("grouped_datasets is empty: configure at least one dataset group")
    for group, args in groups.items():
        if not isinstance(args, Mapping):
            raise ValueError(f"grouped_datasets[{group!r}] must be a mapping of arguments, got {type(args).__name__}")


DataConfig = BagelDatasetConfig
"""The reference's older name for the same config."""
