"""Benchmark: raw rows/s (no image decode) of both backends beside their stock peers (not a test).

Uses the converter benchmark's synthetic unified_edit parquet (``benchmarks/convert.py``'s
``make_source``, cached under ``--out``) and its ``editstream convert`` output (rowgroup layout,
cached beside it), page cache warm, and times one pass over every row of:

1. the WebDataset backend: ``editstream.iter_rows(shards)``, every unit once (what a dataset's
   ``parse_row`` receives: the row dict, bytes values, JSON columns decoded);
2. stock webdataset: ``webdataset.WebDataset(urls, shardshuffle=False)`` over the same shards
   (a dict of raw member bytes per sample, nothing decoded);
3. the parquet backend: ``editstream.iter_rows(parquet_dir)``;
4. pyarrow: ``ParquetFile(path).iter_batches()`` and ``batch.to_pylist()`` per file.

Each is run ``--repeat`` times in turns (alternating rounds); the table shows medians, and each
ratio is the median of the rounds' CPU-time ratios (the figure that holds on a busy machine). ``--profile NAME`` runs one
pass of ``webdataset`` or ``parquet`` under cProfile and prints where the time goes.

    .venv/bin/python benchmarks/raw_rows.py [--gb 1.2] [--repeat 3] [--json FILE] [--profile webdataset]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import convert as convert_bench


def converted(root: Path, src: Path) -> Path:
    """``editstream convert`` of ``src`` (rowgroup layout, 2 workers), re-used while the source is unchanged."""
    from editstream import convert

    dst = root / "wds-rows"
    marker = root / "wds-rows.json"
    stamp = (root / "src.json").read_text()
    if marker.exists() and marker.read_text() == stamp and (dst / "manifest.json").exists():
        return dst
    convert(str(src), str(dst), workers=2, overwrite=True, progress=False)
    marker.write_text(stamp)
    return dst


def editstream_rows(root: Path, backend: str) -> Callable[[], int]:
    """One pass of ``editstream.iter_rows`` over ``root`` (listing included, as a reader pays it)."""
    from editstream import iter_rows

    def run() -> int:
        return sum(1 for _ in iter_rows(str(root), backend=backend))

    return run


def wds_rows(dst: Path) -> Callable[[], int]:
    import webdataset as wds

    urls = [str(dst / s["path"]) for s in json.loads((dst / "manifest.json").read_text())["shards"]]

    def run() -> int:
        return sum(1 for _ in wds.WebDataset(urls, shardshuffle=False))

    return run


def pyarrow_rows(src: Path) -> Callable[[], int]:
    import pyarrow.parquet as pq

    files = sorted(src.glob("*.parquet"))

    def run() -> int:
        n = 0
        for path in files:
            for batch in pq.ParquetFile(path).iter_batches():
                n += len(batch.to_pylist())
        return n

    return run


def runs(src: Path, dst: Path) -> dict[str, Callable[[], int]]:
    return {
        "webdataset": editstream_rows(dst, "webdataset"),
        "stock webdataset": wds_rows(dst),
        "parquet": editstream_rows(src, "parquet"),
        "pyarrow": pyarrow_rows(src),
    }


LABELS = {
    "webdataset": "editstream, WebDataset backend (`iter_rows`)",
    "stock webdataset": "stock webdataset `WebDataset(urls)`",
    "parquet": "editstream, parquet backend (`iter_rows`)",
    "pyarrow": "pyarrow `iter_batches().to_pylist()`",
}
PEERS = {"webdataset": ("stock webdataset", 4.0), "parquet": ("pyarrow", 1.5)}


def profile(name: str, run: Callable[[], int], lines: int = 22) -> None:
    prof = cProfile.Profile()
    prof.enable()
    rows = run()
    prof.disable()
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(lines)
        print(f"## {name}: {rows} rows, sorted by {key}\n{buf.getvalue()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out", help="work directory (source and shards cached here)")
    ap.add_argument("--gb", type=float, default=1.2, help="minimum source size in GB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the results as JSON here")
    ap.add_argument("--profile", choices=sorted(LABELS), default=None)
    args = ap.parse_args()

    root = Path(args.out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    src = convert_bench.make_source(root, args.gb)
    dst = converted(root, src)
    convert_bench.warm(src)
    convert_bench.warm(dst)
    todo = runs(src, dst)
    if args.profile:
        profile(args.profile, todo[args.profile])
        return 0
    wall: dict[str, list[float]] = {name: [] for name in todo}
    cpu: dict[str, list[float]] = {name: [] for name in todo}
    rows: dict[str, int] = {}
    for attempt in range(args.repeat):  # alternating: each reader beside its peer, round after round
        for name, run in todo.items():
            t0, c0 = time.perf_counter(), time.process_time()
            rows[name] = run()
            seconds, cpu_s = time.perf_counter() - t0, time.process_time() - c0
            wall[name].append(seconds)
            cpu[name].append(cpu_s)
            print(
                f"[{attempt + 1}/{args.repeat}] {name}: {rows[name]} rows in {seconds:.2f} s ({cpu_s:.2f} CPU s)",
                file=sys.stderr,
            )
    if len(set(rows.values())) != 1:
        raise SystemExit(f"the runs read different row counts: {rows}")
    med = {name: statistics.median(wall[name]) for name in todo}
    med_cpu = {name: statistics.median(cpu[name]) for name in todo}
    rate = {name: rows[name] / med[name] for name in todo}
    size = convert_bench.dir_bytes(src)
    lines = [
        f"Source: {size / 1e9:.2f} GB synthetic unified_edit parquet, {rows['parquet']} rows; its rowgroup "
        f"conversion; page cache warm; medians of {args.repeat} alternating rounds (wall time and, separately, CPU "
        f"time of the process); ratios are medians of the rounds' CPU-time ratios (peer CPU s over ours: > 1 means "
        f"editstream is faster); one process, one thread reading, no image decode.",
        "",
        "| reader | seconds | CPU s | CPU us/row | rows/s | MB/s | vs peer (CPU) | goal |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    ratios: dict[str, float] = {}
    for name in todo:
        peer = PEERS.get(name)
        if peer:
            ratios[name] = statistics.median(p / o for p, o in zip(cpu[peer[0]], cpu[name]))
        ratio = f"{ratios[name]:.2f}x {peer[0]}" if peer else "-"
        goal = f">= {peer[1]:g}x" if peer else "-"
        lines.append(
            f"| {LABELS[name]} | {med[name]:.2f} | {med_cpu[name]:.2f} | {med_cpu[name] / rows[name] * 1e6:.1f} | "
            f"{rate[name]:,.0f} | {size / med[name] / 1e6:,.0f} | {ratio} | {goal} |"
        )
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "rows": rows,
                    "seconds": med,
                    "cpu_seconds": med_cpu,
                    "cpu_ratios": ratios,
                    "rows_per_s": rate,
                    "source_bytes": size,
                    "table": lines,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
