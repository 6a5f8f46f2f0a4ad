"""Grouped-dataset configs -> dataset objects: a group's arguments plus its ``dataset_info`` entries become the
keywords of its registered dataset class (the caller's config is never mutated)."""

from __future__ import annotations

import copy
import logging
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..data.adapted.inplace import IN_PLACE_KEYS, in_place_entry
from ..data.backends import WEBDATASET, Backend, get_backend
from ..io.parquet_info import ParquetInfo
from ..loader.datasets.parameters import dataset_parameters
from ..loader.datasets.registry import DATASET_REGISTRY
from ..loader.transforms import ImageTransform
from ..loader.video import FrameSampler

logger = logging.getLogger(__name__)

ENTRY_KEYS = (
    "data_dir",
    "parquet_info_path",
    "json_dir",
    "jsonl_path",
    "backend",
    "storage_options",
    WEBDATASET,
    "num_files",
    "num_total_samples",
    *IN_PLACE_KEYS,
)
"""The keys of a ``dataset_info`` entry (the reference's ``num_files`` / ``num_total_samples`` are not read)."""
WEBDATASET_KEYS = ("data_dir", "storage_options")
"""The keys of an entry's ``webdataset:`` sub-entry."""
TRANSFORM_ARGS = (
    ("frame_sampler_args", "frame_sampler", FrameSampler),
    ("image_transform_args", "transform", ImageTransform),
    ("vit_image_transform_args", "vit_transform", ImageTransform),
)
"""A group's ``*_args`` -> the dataset keyword built from them, and its class."""


class GroupDataset(Protocol):
    """What the packer needs of a group's dataset: an endless sample stream it can seed and checkpoint."""

    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def set_epoch(self, seed: int) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


GroupRegistryMapping = Mapping[str, Callable[..., GroupDataset]]
"""Group name -> the dataset class (or factory) that builds the group's dataset."""


@dataclass(frozen=True)
class GroupContext:
    """What every dataset of a packer shares: tokenizer, dataset_info, rank layout, classes (default
    ``DATASET_REGISTRY``), image dtype."""

    tokenizer: Any
    dataset_info: Mapping[str, Mapping[str, Mapping[str, Any]]]
    local_rank: int = 0
    world_size: int = 1
    num_workers: int = 1
    registry: GroupRegistryMapping | None = None
    image_dtype: str = "float32"


def build_group_datasets(
    grouped_datasets: Mapping[str, Mapping[str, Any]], data_status: Mapping[str, Any] | None, ctx: GroupContext
) -> tuple[list[GroupDataset], list[bool], list[float]]:
    """One registry dataset per group (from a deep copy), every entry's keys checked first: (datasets,
    is_mandatory, weights)."""
    check_dataset_info(ctx.dataset_info)
    datasets: list[GroupDataset] = []
    is_mandatory: list[bool] = []
    weights: list[float] = []
    for group, group_args in copy.deepcopy(dict(grouped_datasets)).items():
        args = dict(group_args)
        is_mandatory.append(bool(args.pop("is_mandatory", False)))
        weight = args.pop("weight", 0.0)
        if not isinstance(weight, numbers.Real) or isinstance(weight, bool) or not float(weight) >= 0:
            raise ValueError(f"group {group!r}: weight must be a number >= 0, got {weight!r}")
        weights.append(float(weight))
        for given, key, build in TRANSFORM_ARGS:
            if given in args:
                args[key] = build(**args.pop(given))
        attach_dataset_info(group, args, ctx)
        group_status = (data_status or {}).get(group) if args.pop("resume_data_status", True) else None
        datasets.append(_instantiate(group, args, group_status, ctx))
    return datasets, is_mandatory, weights


def _instantiate(group: str, args: dict[str, Any], group_status: Any, ctx: GroupContext) -> GroupDataset:
    registry = DATASET_REGISTRY if ctx.registry is None else ctx.registry
    if group not in registry:
        raise ValueError(f"no dataset class registered for group {group!r}; known: {sorted(registry)}")
    dataset_cls = registry[group]
    takes = dataset_parameters(dataset_cls)
    if ctx.image_dtype != "float32" and "image_dtype" not in args and "image_dtype" in takes:
        args = {**args, "image_dtype": ctx.image_dtype}
    backend = args.get("backend")
    if (
        backend is not None
        and get_backend(backend, f"group {group!r}").reads_shards
        and "jsonl_path_list" not in args
        and "jsonl_path_list" in takes
    ):
        # A converted root holds its JSONL copy: a shard-only entry (data_dir alone) names no JSONL.
        args = {**args, "jsonl_path_list": None}
    try:
        return dataset_cls(
            dataset_name=group,
            tokenizer=ctx.tokenizer,
            local_rank=ctx.local_rank,
            world_size=ctx.world_size,
            num_workers=ctx.num_workers,
            data_status=group_status,
            **args,
        )
    except TypeError as exc:
        raise TypeError(
            f"cannot build dataset group {group!r} with {getattr(dataset_cls, '__name__', dataset_cls)}"
            f" and arguments {sorted(args)}: {exc}"
        ) from exc


def _group_metas(group: str, names: Any, dataset_info: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if names is None:
        raise ValueError(f"group {group!r} has no dataset_names")
    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        raise ValueError(f"group {group!r}: dataset_names must be a non-empty list, got {names!r}")
    group_info = dataset_info.get(group)
    if group_info is None:
        raise ValueError(f"dataset_info has no group {group!r}; it has {sorted(dataset_info)}")
    metas = []
    for name in names:
        if name not in group_info:
            raise ValueError(f"dataset_info[{group!r}] has no dataset {name!r}; it has {sorted(group_info)}")
        meta = group_info[name]
        if "data_dir" not in meta:
            raise ValueError(f"dataset_info[{group!r}][{name!r}] has no data_dir")
        metas.append(meta)
    return metas


def check_dataset_info(dataset_info: Mapping[str, Any]) -> None:
    """Refuse unknown keys in every entry of ``dataset_info`` (a typo must not read other data silently)."""
    for group, entries in dataset_info.items():
        if isinstance(entries, Mapping):
            for name, meta in entries.items():
                _check_entry_keys(group, name, meta)


def _check_entry_keys(group: str, name: str, meta: Any) -> None:
    where = f"dataset_info[{group!r}][{name!r}]"
    if not isinstance(meta, Mapping):
        raise ValueError(f"{where} (dataset {name!r} of group {group!r}) must be a mapping, got {type(meta).__name__}")
    unknown = sorted(str(key) for key in meta if key not in ENTRY_KEYS)
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {unknown} in the entry of dataset {name!r} of group {group!r}; "
            f"an entry takes {list(ENTRY_KEYS)}"
        )
    sub = meta.get(WEBDATASET)
    if isinstance(sub, Mapping):
        unknown = sorted(str(key) for key in sub if key not in WEBDATASET_KEYS)
        if unknown:
            raise ValueError(
                f"{where}['webdataset']: unknown key(s) {unknown} in the webdataset sub-entry of dataset "
                f"{name!r} of group {group!r}; it takes {list(WEBDATASET_KEYS)}"
            )


def _location(group: str, name: str, meta: Mapping[str, Any], backend: Backend | None) -> Mapping[str, Any]:
    """The entry to read: a ``webdataset:`` sub-entry replaces the source location on the backend reading shards."""
    sub = meta.get(WEBDATASET)
    if sub is None or backend is None or not backend.reads_shards:
        return meta
    if not isinstance(sub, Mapping) or "data_dir" not in sub:
        raise ValueError(
            f"dataset_info[{group!r}][{name!r}]['webdataset'] must be a mapping with a data_dir, got {sub!r}"
        )
    located = {"data_dir": sub["data_dir"]}
    if "storage_options" in sub or "storage_options" in meta:
        located["storage_options"] = sub.get("storage_options", meta.get("storage_options"))
    return located


def attach_dataset_info(group: str, args: dict[str, Any], ctx: GroupContext) -> None:
    """Turn ``dataset_names`` into data_dir_list / parquet_info / jsonl_path_list / backend / storage_options
    (the group's and its entries' backend must agree; the webdataset backend reads no source-only key)."""
    names = args.pop("dataset_names", None)
    metas = _group_metas(group, names, ctx.dataset_info)
    named = _agreed_setting(group, names, metas, "backend", args.pop("backend", None))
    backend = None if named is None else get_backend(named, f"group {group!r}")
    source_only = backend is not None and backend.reads_shards
    if source_only and any("jsonl_path" in meta for meta in metas):
        args["jsonl_path_list"] = None  # the shards hold the lines: no JSONL is read on the webdataset backend
    for name, meta in zip(names, metas):
        if source_only and WEBDATASET not in meta and ("from" in meta or "mapping" in meta):
            raise ValueError(
                f"dataset_info[{group!r}][{name!r}]: data read through an adapter is read on the parquet backend; "
                f"give its converted shards in a webdataset: sub-entry to read group {group!r} on webdataset"
            )
    metas = [_location(group, name, meta, backend) for name, meta in zip(names, metas)]
    storage_options = _agreed_setting(group, names, metas, "storage_options", args.pop("storage_options", None))
    args["data_dir_list"] = []
    for name, meta in zip(names, metas):
        if ctx.local_rank == 0:
            logger.info("preparing dataset %s/%s", group, name)
        entry = in_place_entry(meta, f"dataset_info[{group!r}][{name!r}]") if not source_only else None
        args["data_dir_list"].append(meta["data_dir"] if entry is None else entry)
        if "parquet_info_path" in meta and not source_only:
            info = _read_parquet_info(
                meta["parquet_info_path"], meta.get("storage_options", storage_options), group, name
            )
            args["parquet_info"] = {**args.get("parquet_info", {}), **info.entries}
        if "json_dir" in meta:
            args.setdefault("json_dir_list", []).append(meta["json_dir"])
        if "jsonl_path" in meta and not source_only:
            args.setdefault("jsonl_path_list", []).append(meta["jsonl_path"])
    settings = {"backend": backend, "storage_options": storage_options}
    args.update({key: value for key, value in settings.items() if value is not None})


def _agreed_setting(
    group: str, names: Sequence[str], metas: Sequence[Mapping[str, Any]], key: str, group_value: Any
) -> Any:
    """The one value of ``key`` shared by a group's dataset_info entries (group value as default)."""
    resolved = [meta.get(key, group_value) for meta in metas]
    if any(value != resolved[0] for value in resolved[1:]):
        listing = ", ".join(f"{name}={value!r}" for name, value in zip(names, resolved))
        raise ValueError(
            f"group {group!r}: its datasets disagree on {key} ({listing}); one group is read with one "
            f"{key}, so put datasets with a different {key} in their own group"
        )
    if group_value is not None and resolved and resolved[0] != group_value:
        raise ValueError(
            f"group {group!r}: {key}={group_value!r} in grouped_datasets but {resolved[0]!r} in dataset_info"
        )
    return resolved[0] if resolved else group_value


def _read_parquet_info(url: str, storage_options: Mapping[str, Any] | None, group: str, name: str) -> ParquetInfo:
    try:
        return ParquetInfo.load(url, dict(storage_options) if storage_options else None)
    except (OSError, ValueError) as exc:
        raise type(exc)(f"parquet_info_path of dataset {group}/{name}: {exc}") from exc
