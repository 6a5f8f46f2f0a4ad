"""Benchmark: raw rows/s of the WebDataset backend from S3 with 0, 20 and 50 ms added per request (not a test).

A subset of the converter benchmark's synthetic edit parquet (``--files`` source files,
rowgroup conversion, cached under ``--out``) is uploaded to a local S3 server (moto, started
here on loopback) and read through ``tests/faultproxy.py``: ``FaultProxy(upstream,
latency=...)``, which waits ``latency`` seconds before forwarding each request (an object
store's first-byte latency; no faults). Each run reads every row once with ``TarSource`` as
the dataset loop does (``plan_units`` then ``iter_unit_rows``), no image decode, best of
``--repeat``:

- the default read-ahead (several ranged requests in flight, 64 MiB per process);
- the read-ahead held to two 4 MiB blocks (``readahead_bytes=8 MiB``): the old behaviour,
  one block being read and the next one in flight.

The goal is rows/s with 20 ms added >= 0.9x the same S3 without added latency. moto and the
proxy are Python servers on the same 2 cores, so the absolute rates are lower bounds.

    .venv/bin/python benchmarks/s3_latency.py [--files 8] [--repeat 2] [--latency 0 0.02 0.05] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests"))  # the fault proxy lives beside the tests

import convert as convert_bench

from editstream.testing.s3server import LocalS3Server
from faultproxy import FaultProxy

BUCKET = "latency-bench"
MODES = {"read-ahead (default, 64 MiB)": None, "2 blocks in flight (old behaviour)": 8 << 20}


def subset_root(root: Path, src: Path, files: int) -> Path:
    """The first ``files`` source files converted on their own (cached)."""
    from editstream import convert

    names = sorted(p.name for p in src.glob("*.parquet"))[:files]
    sub = root / f"s3-src-{files}"
    dst = root / f"s3-wds-{files}"
    stamp = json.dumps({"source": (root / "src.json").read_text(), "files": names})
    marker = root / f"s3-wds-{files}.json"
    if marker.exists() and marker.read_text() == stamp and (dst / "manifest.json").exists():
        return dst
    sub.mkdir(parents=True, exist_ok=True)
    for old in sub.glob("*.parquet"):
        old.unlink()
    for name in names:
        os.link(src / name, sub / name)  # a hard link: listed as a plain file, no copy
    convert(str(sub), str(dst), workers=2, overwrite=True, progress=False)
    marker.write_text(stamp)
    return dst


def read_all(url: str, options: dict[str, Any], readahead_bytes: int | None) -> tuple[int, float, int]:
    """Rows, seconds and the most bytes the read-ahead held, for one pass over every unit."""
    from editstream.data.sources.webdataset import TarSource

    source = TarSource(dataset_name="bench", storage_options=options, readahead_bytes=readahead_bytes)
    units = source.list_units([url], [10**6])[: len(source._shards)]
    t0 = time.perf_counter()
    source.plan_units(iter(units))
    rows = 0
    for unit in units:
        for _ in source.iter_unit_rows(unit, None):
            rows += 1
    seconds = time.perf_counter() - t0
    held = source.reads.readahead().account.peak
    source.plan_units(iter(()))
    return rows, seconds, held


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--gb", type=float, default=1.2, help="the converter benchmark's source size (cached)")
    ap.add_argument("--files", type=int, default=8, help="source files uploaded (about 43 MB each)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--latency", type=float, nargs="+", default=[0.0, 0.02, 0.05])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    root = Path(args.out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    src = convert_bench.make_source(root, args.gb)
    dst = subset_root(root, src, args.files)
    size = convert_bench.dir_bytes(dst)
    results: dict[str, dict[str, Any]] = {}
    with LocalS3Server() as s3:
        url = s3.upload(dst, f"s3://{BUCKET}/wds")
        for attempt in range(args.repeat):
            for latency in args.latency:
                with FaultProxy(s3.endpoint, latency=latency) as proxy:
                    options = {**s3.storage_options, "endpoint_url": proxy.url}
                    for mode, budget in MODES.items():
                        rows, seconds, held = read_all(url, options, budget)
                        if attempt == 0 and latency == args.latency[0] and mode == next(iter(MODES)):
                            rows, seconds, held = read_all(url, options, budget)  # the first pass warms up s3fs
                        key = f"{mode}|{latency}"
                        best = results.get(key)
                        if best is None or seconds < best["seconds"]:
                            results[key] = {
                                "rows": rows,
                                "seconds": seconds,
                                "held": held,
                                "requests": proxy.requests_seen,
                            }
                        print(
                            f"[{attempt + 1}/{args.repeat}] {mode}, +{latency * 1000:.0f} ms: {rows} rows in {seconds:.2f} s",
                            file=sys.stderr,
                        )
    lines = [
        f"Data: {size / 1e6:.0f} MB of shards ({args.files} source files, rowgroup layout) on moto_server, read "
        f"through FaultProxy with the added latency per request; one process, no image decode, best of {args.repeat}.",
        "",
        "| reader | added latency | seconds | rows/s | MB/s | vs no added latency | most bytes held |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    ratios: dict[str, float] = {}
    for mode in MODES:
        base = results[f"{mode}|{args.latency[0]}"]
        for latency in args.latency:
            r = results[f"{mode}|{latency}"]
            ratio = base["seconds"] / r["seconds"]
            ratios[f"{mode}|{latency}"] = ratio
            lines.append(
                f"| {mode} | {latency * 1000:.0f} ms | {r['seconds']:.2f} | {r['rows'] / r['seconds']:,.0f} | "
                f"{size / r['seconds'] / 1e6:,.0f} | {ratio:.2f}x | {r['held'] / 2**20:.0f} MiB |"
            )
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "ratios": ratios, "bytes": size, "table": lines}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
