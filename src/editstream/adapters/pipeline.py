"""``run_adapter``: what ``convert SRC DST --from NAME`` runs: adapt, then (by default) convert to shards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..conversion import convert
from ..conversion.config import check_apart
from ..conversion.dst import ForeignFilesError, foreign_names
from ..io import storage
from .mapping import AdapterMapping, resolve_mapping
from .output import PARQUET_INFO
from .run import DEFAULT_CHAINS_PER_FILE, DEFAULT_ROWS_PER_GROUP, adapt

TARGETS = ("webdataset", "parquet")
PARALLEL = ("workers", "engine", "ray_address", "executor")
"""Options both steps take: the adaptation's output files and the shards run on the same executor."""


def staging_dir(dst: str) -> str:
    """Where ``--to webdataset`` puts the BAGEL parquet it converts: beside DST, ``DST-parquet``."""
    return f"{dst.rstrip('/')}-parquet"


def run_adapter(
    src: str,
    dst: str,
    adapter: str | Path | AdapterMapping,
    *,
    to: str = "webdataset",
    where: str | None = None,
    media_dir: str | None = None,
    split: str | None = None,
    staging: str | None = None,
    rows_per_group: int = DEFAULT_ROWS_PER_GROUP,
    chains_per_file: int = DEFAULT_CHAINS_PER_FILE,
    storage_options: storage.StorageOptions | None = None,
    progress: bool = True,
    **convert_options: Any,
) -> dict[str, Any]:
    """Adapt ``src`` with ``adapter`` into ``dst``: BAGEL parquet there (``to="parquet"``), or staged in
    ``staging`` and converted to shards there (``convert_options`` pass to ``editstream.convert``; the
    parallel ones run the adaptation too). Returns ``{"adapt": summary, "convert": summary or None}``."""
    if to not in TARGETS:
        raise ValueError(f"to must be one of {TARGETS}, got {to!r}")
    parallel = {k: convert_options[k] for k in PARALLEL if k in convert_options}
    shard_only = sorted(k for k in convert_options if k not in PARALLEL)
    if to == "parquet" and (staging is not None or shard_only):
        raise ValueError(f"staging and converter options apply to to='webdataset' only, not {shard_only}")
    mapping = resolve_mapping(adapter)
    parquet_dst = dst if to == "parquet" else (staging or staging_dir(dst))
    check_apart({"SRC": src, "DST": dst} if to == "parquet" else {"SRC": src, "staging": parquet_dst, "DST": dst})
    foreign = foreign_names(dst, storage_options) if to == "webdataset" else []
    if foreign and not convert_options.get("overwrite"):
        raise ForeignFilesError(dst, foreign)
    summary = adapt(
        src, parquet_dst, mapping, media_dir=media_dir, where=where, split=split, rows_per_group=rows_per_group,
        chains_per_file=chains_per_file, storage_options=storage_options, progress=progress, **parallel,
    )  # fmt: skip
    if to == "parquet":
        return {"adapt": summary, "convert": None}
    converted = convert(
        parquet_dst,
        dst,
        schema=mapping.kind,
        parquet_info=storage.join(parquet_dst, PARQUET_INFO),
        storage_options=storage_options,
        progress=progress,
        **convert_options,
    )
    return {"adapt": summary, "convert": converted}
