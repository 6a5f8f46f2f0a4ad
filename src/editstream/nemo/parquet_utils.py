"""Twin of NeMo's ``multimodal.parquet_utils`` (for code calling NeMo's helpers): the parquet files of local or
fsspec directories in their listing order (``os.listdir``'s locally, as NeMo takes them), and a pyarrow
filesystem for one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..io import storage

__all__ = ["get_parquet_data_paths", "init_arrow_pf_fs"]


def get_parquet_data_paths(
    data_dir_list: Sequence[str], num_sampled_data_paths: Sequence[int], rank: int = 0, world_size: int = 1
) -> list[str]:
    """Parquet files of every directory in listing order, each list cycled or cut to its count; as in NeMo, each
    rank lists a contiguous slice of the directories and the lists are all-gathered (a process group is then
    needed)."""
    dirs, counts = list(data_dir_list), list(num_sampled_data_paths)
    if world_size > 1:
        chunk = (len(dirs) + world_size - 1) // world_size
        dirs, counts = dirs[rank * chunk : (rank + 1) * chunk], counts[rank * chunk : (rank + 1) * chunk]
    local: list[str] = []
    for data_dir, count in zip(dirs, counts):
        files = storage.list_files(data_dir, ".parquet", ordered=False)
        if not files:
            raise FileNotFoundError(f"no .parquet files in {data_dir}")
        local.extend((files * (count // len(files) + 1))[:count])
    if world_size == 1:
        return local
    import torch.distributed as dist

    gathered: list[Any] = [None] * world_size
    dist.all_gather_object(gathered, local)
    return [path for part in gathered if part is not None for path in part]


def init_arrow_pf_fs(parquet_file_path: str) -> Any:
    """A pyarrow filesystem that can open ``parquet_file_path`` (local, or an fsspec URL wrapped for pyarrow)."""
    import pyarrow.fs as pafs

    if storage.is_local(parquet_file_path):
        return pafs.LocalFileSystem()
    fs, _ = storage.url_to_fs(parquet_file_path)
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs))
