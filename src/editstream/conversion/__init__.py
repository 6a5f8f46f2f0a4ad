"""The converter: source rows -> row codec -> tar shards, planned, parallel, resumable; it never imports
the loader. The names below load on first use, so a light module (``executors``) imports without the rest."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "PROGRESS_DIR": "records",
    "ConvertConfig": "config",
    "Plan": "task",
    "ShardResult": "records",
    "ShardTask": "task",
    "convert": "run",
    "convert_shard": "shard",
    "parse_size": "config",
    "plan_conversion": "shapes",
}

if TYPE_CHECKING:  # the same names, visible to type checkers without importing at run time
    from .config import ConvertConfig as ConvertConfig
    from .config import parse_size as parse_size
    from .records import PROGRESS_DIR as PROGRESS_DIR
    from .records import ShardResult as ShardResult
    from .run import convert as convert
    from .shapes import plan_conversion as plan_conversion
    from .shard import convert_shard as convert_shard
    from .task import Plan as Plan
    from .task import ShardTask as ShardTask

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
