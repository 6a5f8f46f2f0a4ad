"""Floors under the raw-rows goals against LitData (not a test): what the parquet rows cost pyarrow itself,
and what hashing and copying every byte of the large-row shards cost before any Python per row.

Reads the data ``benchmarks/peers.py`` cached under ``--out`` (its 36 KB rows' parquet in ``peers/src``,
its large rows' shards in ``peers/large/shards``); every figure is CPU time, the median of ``--repeat``
passes in one process, as rows/s over the same rows.

    .venv/bin/python benchmarks/raw_floors.py [--out bench-out] [--repeat 5]
"""

from __future__ import annotations

import argparse
import mmap
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import xxhash

import editstream


def rows_per_s(work: Callable[[], object], rows: int, repeat: int) -> float:
    """``rows`` over the median CPU seconds of ``repeat`` runs of ``work``."""
    seconds = []
    for _ in range(repeat):
        t0 = time.process_time()
        work()
        seconds.append(time.process_time() - t0)
    return rows / statistics.median(seconds)


def each_map(shards: list[Path], use: Callable[[mmap.mmap], object]) -> None:
    """``use`` on a read-only memory map of each shard, as the mapped reader opens them."""
    for shard in shards:
        with shard.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            use(buf)


def copy_all(buf: mmap.mmap) -> None:
    for start in range(0, len(buf), 1 << 20):
        buf[start : start + (1 << 20)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out", help="the out directory peers.py cached its data under")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    src, large = Path(args.out) / "peers" / "src", Path(args.out) / "peers" / "large" / "shards"
    files, shards = sorted(src.glob("*.parquet")), sorted(large.glob("*.tar"))
    if not files or not shards:
        raise SystemExit(f"no peers.py data under {args.out}/peers: run benchmarks/peers.py --only litdata first")
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    large_rows = sum(1 for _ in editstream.iter_rows(str(large)))

    def to_pylist() -> None:
        for f in files:
            for batch in pq.ParquetFile(f).iter_batches():
                batch.to_pylist()

    figures = [
        ("pyarrow `iter_batches().to_pylist()`", "36 KB", rows, to_pylist),
        ("`iter_rows`, parquet backend", "36 KB", rows, lambda: sum(1 for _ in editstream.iter_rows(str(src)))),
        ("xxh3-128 of every shard byte", "large", large_rows, lambda: each_map(shards, xxhash.xxh3_128_hexdigest)),
        ("one copy of every shard byte", "large", large_rows, lambda: each_map(shards, copy_all)),
        (
            "`iter_rows`, webdataset backend",
            "large",
            large_rows,
            lambda: sum(1 for _ in editstream.iter_rows(str(large))),
        ),
    ]
    print(f"CPU time, median of {args.repeat} passes; {rows} rows of ~36 KB, {large_rows} large rows\n")
    print("| work | rows | rows/s | us a row |\n|---|---|---:|---:|")
    for name, which, n, work in figures:
        rate = rows_per_s(work, n, args.repeat)
        print(f"| {name} | {which} | {rate:,.0f} | {1e6 / rate:.1f} |")


if __name__ == "__main__":
    main()
