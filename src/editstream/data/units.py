"""What a unit is and how a data directory's listing becomes units: the reference's listing rule.

A *unit* is what one rank/worker owns: a ``(file, row_group)`` pair (edit datasets), a whole
file (text-to-image), a shard, or a ``(line, media_dir)`` pair (JSONL lines). Every source lists
its units with these helpers, so both backends choose the same files in the same order.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

logger = logging.getLogger("editstream")

Unit = str | tuple[str, int] | tuple[str, str]
"""What one rank/worker owns, as its source lists it: a ``(path, row_group)`` pair, a path / URL
string (a whole file, a shard), or a ``(line, media_dir)`` pair (a JSONL line). Units are sorted
before the epoch shuffle, so one source's units are all of one shape."""


def path_of(unit: Unit) -> str:
    """The path / URL of a whole-file or shard unit; a ``TypeError`` for a pair."""
    if not isinstance(unit, str):
        raise TypeError(f"expected a file or shard unit (a path), got {unit!r}")
    return unit


def row_group_of(unit: Unit) -> tuple[str, int]:
    """The ``(path, row_group)`` of a row-group unit; a ``TypeError`` for any other shape."""
    if isinstance(unit, str) or not isinstance(unit[1], int):
        raise TypeError(f"expected a (path, row_group) unit, got {unit!r}")
    return unit[0], unit[1]


def line_of(unit: Unit) -> tuple[str, str]:
    """The ``(line, media_dir)`` of a JSONL-line unit; a ``TypeError`` for any other shape."""
    if isinstance(unit, str) or not isinstance(unit[1], str):
        raise TypeError(f"expected a (line, media_dir) unit, got {unit!r}")
    return unit[0], unit[1]


def repeat_to(paths: list[str], num_used: int) -> list[str]:
    """The reference's sampling rule: repeat the listing, then keep the first ``num_used``."""
    if num_used < 0:
        raise ValueError(f"num_used_data must be >= 0, got {num_used}")
    return (paths * (num_used // len(paths) + 1))[:num_used]


def warn_unread(dataset_name: str, where: str, num_used: int, available: int, what: str = "files") -> None:
    """Log, with the numbers, a ``num_used_data`` entry that leaves part of ``where`` unread.

    ``num_used`` below the ``available`` files (shards for shard patterns) reads only the first
    ``num_used`` of them on either backend; the default count (every file) never logs.
    """
    if num_used < available:
        logger.warning(
            "dataset %s: num_used_data %d for %s, which holds %d %s: %d of them are not read "
            "(num_used_data counts %s; give %d, or more, to read all)",
            dataset_name,
            num_used,
            where,
            available,
            what,
            available - num_used,
            what,
            available,
        )


def check_counts(dataset_name: str, data_dir_list: Sequence[str], num_used_data: Sequence[int]) -> None:
    """One ``num_used_data`` entry per data directory, or an error naming the dataset and both lengths."""
    if len(data_dir_list) != len(num_used_data):
        raise ValueError(
            f"dataset {dataset_name!r}: {len(data_dir_list)} data directories but "
            f"{len(num_used_data)} num_used_data entries; give one count per directory"
        )
