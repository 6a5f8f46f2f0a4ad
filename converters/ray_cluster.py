#!/usr/bin/env python
"""Convert on a Ray cluster: every parquet row group becomes a Ray task that writes its shard.

On a cluster (``ray start --head`` on one node, ``ray start --address HEAD:6379`` on the
others), run this on any node with SRC and DST on storage every node reaches (S3 or a shared
filesystem):

    python converters/ray_cluster.py s3://raw/edit s3://shards/edit --address auto

Each task reads its row group from SRC and writes its shard and ``.tar.idx`` straight to DST
(a multipart upload that completes only on success); this process writes ``manifest.json``
last. Re-running after a failure redoes only the missing shards, and the output is
byte-identical to the local engine's. Verification runs as Ray tasks too.

``--demo`` needs no cluster and no data: it starts a local Ray instance, synthesizes a small
edit dataset in a temporary directory, converts and verifies it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from editstream import convert, write_synthetic_dataset
from editstream.conversion.executors import RayExecutor
from editstream.conversion.verify import verify


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", nargs="?", help="directory of *.parquet files every node can read")
    ap.add_argument("dst", nargs="?", help="output directory every node can write")
    ap.add_argument("--address", default=None, help="Ray cluster address ('auto': the running cluster)")
    ap.add_argument("--max-in-flight", type=int, default=None, help="shards submitted at once (default: 2x CPUs)")
    ap.add_argument("--demo", action="store_true", help="synthesize data and convert it on a local Ray instance")
    args = ap.parse_args(argv)
    if not args.demo and (args.src is None or args.dst is None):
        ap.error("SRC and DST are required unless --demo is given")
    return args


def run(src: str, dst: str, address: str | None, max_in_flight: int | None) -> int:
    executor = RayExecutor(address=address, max_in_flight=max_in_flight)
    try:
        summary = convert(src, dst, executor=executor, progress=sys.stderr.isatty())
        print(json.dumps(summary, indent=2))
        report = verify(dst, engine="ray", workers=None)
    finally:
        executor.close()
    print(report.format())
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.demo:
        return run(args.src, args.dst, args.address, args.max_in_flight)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "parquet", Path(tmp) / "shards"
        write_synthetic_dataset(str(src), num_files=2, row_groups_per_file=2, rows_per_group=4, max_side=64)
        return run(str(src), str(dst), args.address, args.max_in_flight)


if __name__ == "__main__":
    sys.exit(main())
