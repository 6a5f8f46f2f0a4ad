#!/usr/bin/env python
"""Convert a parquet edit / T2I dataset to WebDataset shards, then verify them: a script to copy.

For people who prefer a script to the ``editstream`` CLI. It runs the library's converter
(parallel, resumable: re-run the same command after a crash and finished shards are kept),
then re-reads every shard against the manifest (and, with ``--check-source``, every row
against the parquet), and exits 1 if anything does not match.

    python converters/parquet_to_wds.py SRC DST [--workers 8] [--layout rowgroup|size]
                                                [--check-source] [--endpoint-url URL]

SRC and DST may be local directories or any fsspec URL (``s3://bucket/prefix``); S3
credentials come from the standard AWS variables or ``--endpoint-url`` for MinIO / Ceph.
"""

from __future__ import annotations

import argparse
import json
import sys

from editstream import convert
from editstream.conversion.verify import verify


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="directory of *.parquet files (local or fsspec URL)")
    ap.add_argument("dst", help="output directory for the shards (local or fsspec URL)")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: the CPU count)")
    ap.add_argument(
        "--layout",
        choices=["rowgroup", "size"],
        default="rowgroup",
        help="rowgroup: one shard per row group (bit-identical to the parquet backend)",
    )
    ap.add_argument("--samples-per-shard", type=int, default=None, help="with --layout size")
    ap.add_argument("--check-source", action="store_true", help="also compare every row with the parquet source")
    ap.add_argument("--endpoint-url", default=None, help="S3 endpoint (MinIO, Ceph, moto ...)")
    ap.add_argument("--overwrite", action="store_true", help="replace a finished conversion in DST")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    storage_options = {"endpoint_url": args.endpoint_url} if args.endpoint_url else None
    summary = convert(
        args.src,
        args.dst,
        workers=args.workers,
        layout=args.layout,
        samples_per_shard=args.samples_per_shard,
        overwrite=args.overwrite,
        storage_options=storage_options,
        progress=sys.stderr.isatty(),
    )
    print(json.dumps(summary, indent=2))
    report = verify(
        args.dst, source=args.src if args.check_source else None, storage_options=storage_options, workers=args.workers
    )
    print(report.format())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
