"""What a recipe's limits keep of each dataset (``editstream verify --recipe``): each entry read once by its group's
dataset built as training builds it, images sized not decoded, samples judged as an exact epoch judges them."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..loader.origins import TracedDataset
from ..loader.pixels import sizes_only
from ..loader.tokenizer import ByteTokenizer
from .checkpoint.points import apply_point, capture_point, seed_all
from .config import BagelDatasetConfig
from .draws import limit_exceeded, sample_tokens
from .groups import GroupContext, GroupRegistryMapping, build_group_datasets
from .spec import PackingSpec
from .validation import sample_problem

LIMITS = ("max_num_tokens_per_sample", "max_num_tokens")


@dataclasses.dataclass
class EntryCount:
    """One dataset of one group: the samples its rows gave, how many survive, and why the rest do not."""

    group: str
    dataset: str
    samples: int = 0
    survive: int = 0
    over: dict[str, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(LIMITS, 0))
    malformed: int = 0
    dropped: dict[str, int] = dataclasses.field(default_factory=dict)
    largest: int = 0
    """The most packed tokens of one sample."""

    def add(self, sample: Mapping[str, Any], spec: PackingSpec) -> None:
        """Judge one sample as the packer would."""
        self.samples += 1
        if sample_problem(sample, spec.vit_patch_size) is not None:
            self.malformed += 1
            return
        tokens = sample_tokens(sample)
        self.largest = max(self.largest, tokens)
        limit = limit_exceeded(tokens, spec)
        if limit is None:
            self.survive += 1
        else:
            self.over[limit] += 1


@dataclasses.dataclass
class RecipeCount:
    """Every entry's count, under the recipe's limits."""

    limits: dict[str, int]
    entries: list[EntryCount]

    def totals(self) -> dict[str, Any]:
        """The entries added up."""
        dropped: Counter[str] = Counter()
        for e in self.entries:
            dropped.update(e.dropped)
        return {
            "samples": sum(e.samples for e in self.entries),
            "survive": sum(e.survive for e in self.entries),
            "over": {limit: sum(e.over[limit] for e in self.entries) for limit in LIMITS},
            "malformed": sum(e.malformed for e in self.entries),
            "dropped": dict(sorted(dropped.items())),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"limits": self.limits, "entries": [dataclasses.asdict(e) for e in self.entries], "total": self.totals()}

    def format(self) -> str:
        """A table: one line per entry, its drop reasons under it, and the totals."""
        head = ("group", "dataset", "samples", "survive", "over_per_sample", "over_max_tokens", "malformed", "dropped")
        lines: list[tuple[str, ...]] = [head]
        notes: dict[int, str] = {}
        for e in [*self.entries, None]:
            t = self.totals() if e is None else dataclasses.asdict(e)
            over = t["over"]
            name = ("total", "") if e is None else (e.group, e.dataset)
            counts = (t["samples"], t["survive"], over[LIMITS[0]], over[LIMITS[1]], t["malformed"])
            lines.append((*name, *map(str, counts), str(sum(t["dropped"].values()))))
            if t["dropped"]:
                notes[len(lines) - 1] = "  dropped rows: " + ", ".join(f"{k} {v}" for k, v in t["dropped"].items())
        widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
        out = [f"limits: {', '.join(f'{k}={v}' for k, v in self.limits.items())} (packed tokens of a sample)"]
        for i, row in enumerate(lines):
            out.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
            if i in notes:
                out.append(notes[i])
        return "\n".join(out)


def _entries(group: str, args: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The group's arguments split into one set per dataset name (``num_used_data`` split with them)."""
    names = args.get("dataset_names")
    if isinstance(names, str) or not isinstance(names, list):
        return [(str(names), dict(args))]  # build_group_datasets names what is wrong
    used = args.get("num_used_data")
    if not (isinstance(used, list) and len(used) == len(names)):
        return [(name, {**args, "dataset_names": [name]}) for name in names]
    return [(name, {**args, "dataset_names": [name], "num_used_data": [n]}) for name, n in zip(names, used)]


def count_entry(dataset: Any, entry: EntryCount, spec: PackingSpec) -> EntryCount:
    """Read every unit of ``dataset`` once, images opened not decoded, and judge each sample into ``entry``."""
    if not isinstance(dataset, TracedDataset):
        raise TypeError(
            f"group {entry.group!r}: a {type(dataset).__name__} cannot be counted; counting reads units in "
            "order, as elastic epochs do (every registered kind's dataset can)"
        )
    with sizes_only():
        units = dataset.sorted_units()
        for sample, _ in dataset.iter_epoch_units(units, range(len(units)), 0, None, lambda: None):
            entry.add(sample, spec)
    entry.dropped = dict(sorted(getattr(dataset, "drop_counts", {}).items()))
    return entry


def count_recipe(
    config: BagelDatasetConfig, tokenizer: Any = None, registry: GroupRegistryMapping | None = None
) -> RecipeCount:
    """Count, per (group, dataset) of ``config``, the samples that survive its limits and why the others do not;
    the default byte tokenizer counts at least what a byte-level BPE does (survivors are a lower bound)."""
    runtime = config.resolved()
    spec = config.spec()
    assert runtime.grouped_datasets is not None and runtime.dataset_info is not None
    tokenizer = tokenizer if tokenizer is not None else ByteTokenizer()
    ctx = GroupContext(tokenizer, runtime.dataset_info, registry=registry, image_dtype=spec.image_dtype)
    entries = []
    caller = capture_point()
    try:
        seed_all(config.data_seed)
        for group, args in runtime.grouped_datasets.items():
            for name, one in _entries(group, args):
                datasets, _, _ = build_group_datasets({group: one}, None, ctx)
                entries.append(count_entry(datasets[0], EntryCount(group, name), spec))
    finally:
        apply_point(caller)
    limits = {limit: int(getattr(spec, limit)) for limit in LIMITS}
    return RecipeCount(limits, entries)
