"""The converter: parquet rows -> row codec -> tar shards, planned, parallel, resumable.

``shapes`` is the one dispatch on a kind's source shape: ``parquet_*`` modules plan, read and
verify parquet slices, ``lines_*`` modules JSONL lines + media. ``shard`` writes one shard of a
``task``, ``run`` drives a whole conversion on an executor (``executors``: in-process, process
pool, Ray), and ``verify`` and ``inspect`` read the result back.
The converter uses the shared ``io`` and ``format`` layers and never the loader.
"""

from __future__ import annotations

from .config import ConvertConfig, parse_size
from .records import PROGRESS_DIR, ShardResult
from .run import convert
from .shapes import plan_conversion
from .shard import convert_shard
from .task import Plan, ShardTask

__all__ = [
    "PROGRESS_DIR",
    "ConvertConfig",
    "Plan",
    "ShardResult",
    "ShardTask",
    "convert",
    "convert_shard",
    "parse_size",
    "plan_conversion",
]
