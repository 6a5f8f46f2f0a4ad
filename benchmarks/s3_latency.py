"""Benchmark: raw rows/s of the WebDataset backend from S3 with 0, 20 and 50 ms added per request (not a test).

A subset of the converter benchmark's synthetic edit parquet (``--files`` source files,
rowgroup conversion, cached under ``--out``) is uploaded to a local S3 server (moto, started
here on loopback) and read through ``tests/faultproxy.py``: ``FaultProxy(upstream,
latency=...)``, which waits ``latency`` seconds before forwarding each request (an object
store's first-byte latency; no faults). Each run reads every row once with ``TarSource`` as
the dataset loop does (``plan_units`` then ``iter_unit_rows``), no image decode,
medians of ``--pairs`` rounds with the latencies' order alternating, while ``--busy``
busy-loop processes load the CPUs (the goal must hold on a loaded machine, not only a quiet one):

- the default read-ahead (several ranged requests in flight, 64 MiB per process);
- the read-ahead held to two 4 MiB blocks (``readahead_bytes=8 MiB``): the old behaviour,
  one block being read and the next one in flight.

The goal is rows/s with 20 ms added >= 0.9x the same S3 without added latency. moto and the
proxy are Python servers on the same 2 cores, so the absolute rates are lower bounds.

    .venv/bin/python benchmarks/s3_latency.py [--files 8] [--pairs 3] [--busy 2] [--latency 0 0.02 0.05] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests"))  # the fault proxy lives beside the tests

import convert as convert_bench

from editstream.sandbox.s3server import LocalS3Server
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
    units = source.list_units([url], [10**6])[: len(source.shard_layout.shards)]
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


def busy_loop() -> None:
    """Spin one CPU until killed: the load the goal must hold under."""
    while True:
        pass


def start_load(count: int) -> list[mp.process.BaseProcess]:
    """``count`` busy-loop processes (daemons, so they never outlive the benchmark)."""
    loops: list[mp.process.BaseProcess] = [
        mp.get_context("fork").Process(target=busy_loop, daemon=True) for _ in range(count)
    ]
    for loop in loops:
        loop.start()
    return loops


def measure(url: str, s3: LocalS3Server, latencies: list[float], pairs: int) -> dict[str, list[dict[str, Any]]]:
    """Every (mode, latency) run ``pairs`` times, the latencies' order reversed every other round,
    so each round's runs share the machine's state of that moment."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for round_ in range(pairs):
        order = latencies if round_ % 2 == 0 else latencies[::-1]
        for latency in order:
            with FaultProxy(s3.endpoint, latency=latency) as proxy:
                options = {**s3.storage_options, "endpoint_url": proxy.url}
                for mode, budget in MODES.items():
                    rows, seconds, held = read_all(url, options, budget)
                    runs.setdefault(f"{mode}|{latency}", []).append({"rows": rows, "seconds": seconds, "held": held})
                    print(
                        f"[{round_ + 1}/{pairs}] {mode}, +{latency * 1000:.0f} ms: {rows} rows in {seconds:.2f} s",
                        file=sys.stderr,
                    )
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--gb", type=float, default=1.2, help="the converter benchmark's source size (cached)")
    ap.add_argument("--files", type=int, default=8, help="source files uploaded (about 43 MB each)")
    ap.add_argument("--pairs", type=int, default=3, help="rounds of every latency, alternating in order")
    ap.add_argument("--busy", type=int, default=2, help="busy-loop processes loading the CPUs during the runs")
    ap.add_argument("--latency", type=float, nargs="+", default=[0.0, 0.02, 0.05])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    root = Path(args.out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    src = convert_bench.make_source(root, args.gb)
    dst = subset_root(root, src, args.files)
    size = convert_bench.dir_bytes(dst)
    load_before = os.getloadavg()
    with LocalS3Server() as s3:
        url = s3.upload(dst, f"s3://{BUCKET}/wds")
        with FaultProxy(s3.endpoint, latency=0.0) as proxy:  # the first pass warms up s3fs
            read_all(url, {**s3.storage_options, "endpoint_url": proxy.url}, None)
        loops = start_load(args.busy)
        try:
            runs = measure(url, s3, args.latency, args.pairs)
        finally:
            for loop in loops:
                loop.kill()
    base_latency = args.latency[0]
    lines = [
        f"Data: {size / 1e6:.0f} MB of shards ({args.files} source files, rowgroup layout) on moto_server, read "
        f"through FaultProxy with the added latency per request; one process, no image decode; {args.busy} "
        f"busy-loop processes load the {os.cpu_count()} CPUs throughout; {args.pairs} rounds, the latencies' order "
        f"alternating; medians, each ratio the median of same-round ratios. Load average before: "
        + " / ".join(f"{v:.2f}" for v in load_before)
        + ".",
        "",
        "| reader | added latency | seconds | rows/s | MB/s | vs no added latency | most bytes held |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    ratios: dict[str, float] = {}
    for mode in MODES:
        base = [r["seconds"] for r in runs[f"{mode}|{base_latency}"]]
        for latency in args.latency:
            these = runs[f"{mode}|{latency}"]
            seconds = statistics.median(r["seconds"] for r in these)
            ratio = statistics.median(b / r["seconds"] for b, r in zip(base, these))
            ratios[f"{mode}|{latency}"] = ratio
            rows, held = these[0]["rows"], max(r["held"] for r in these)
            lines.append(
                f"| {mode} | {latency * 1000:.0f} ms | {seconds:.2f} | {rows / seconds:,.0f} | "
                f"{size / seconds / 1e6:,.0f} | {ratio:.2f}x | {held / 2**20:.0f} MiB |"
            )
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "ratios": ratios, "bytes": size, "table": lines}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
