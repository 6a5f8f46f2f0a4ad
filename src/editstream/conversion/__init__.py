"""The converter: parquet rows -> row codec -> tar shards, planned, parallel, resumable.

``plan`` cuts the source into shard tasks, ``shard`` writes one shard, ``run`` drives a whole
conversion on an executor (``executors``: in-process, process pool, Ray), ``verify`` and
``inspect`` read the result back, and ``schemas`` holds one small module per source schema.
The converter uses the shared ``io`` and ``format`` layers and never the loader.
"""

from __future__ import annotations

from .config import ConvertConfig, parse_size
from .plan import Plan, ShardTask, plan_conversion
from .records import PROGRESS_DIR, ShardResult
from .run import convert
from .shard import convert_shard

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
