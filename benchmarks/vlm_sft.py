"""Benchmark: vlm_sft conversion throughput and loader samples/s on both backends (not a test).

Writes (once, cached under ``--out``) a synthetic vlm_sft dataset of ``--lines`` JSONL lines
with single images, image lists, frame folders and (with OpenCV) MP4s, then measures:

1. conversion, local JSONL + media -> local shards, and S3 -> S3 (a ``moto_server`` this
   script starts on loopback): rows/s and MB/s of shard output, as ``convert()`` reports them;
2. the loader (``SftJSONLIterableDataset`` with ``ImageTransform(490, 112, 14)``,
   ``FrameSampler(8, 4)``, ``ByteTokenizer``) on the source backend and the webdataset
   backend, from local disk and from S3, in this process and with 2 DataLoader workers:
   samples/s over ``--samples`` samples after ``--warmup``, the best of ``--repeat`` runs
   (the rows take turns). Every run seeds the global generators the same way, so every row of
   a backend pair parses the same samples; drops are counted, not logged.

    .venv/bin/python benchmarks/vlm_sft.py [--lines 3000] [--samples 400] [--repeat 2] [--out bench-out/vlm_sft]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from editstream import ByteTokenizer, FrameSampler, ImageTransform, SftJSONLIterableDataset, convert
from editstream.sandbox.s3server import LocalS3Server
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset

BUCKET = "vlm-bench"


def build(out: Path, lines: int) -> dict[str, Any]:
    """The synthetic source under ``out/src`` (reused when its summary matches)."""
    summary_path = out / "src-summary.json"
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        if summary.get("num_lines") == lines:
            return summary
    shutil.rmtree(out / "src", ignore_errors=True)
    t0 = time.perf_counter()
    summary = write_synthetic_vlm_dataset(str(out / "src"), num_lines=lines, seed=0, min_side=64, max_side=320)
    print(f"wrote {lines} lines in {time.perf_counter() - t0:.1f}s")
    out.mkdir(parents=True, exist_ok=True)
    summary_path.write_text(json.dumps(summary))
    return summary


def time_convert(src: str, dst: str, media_dir: str, storage_options: dict | None = None) -> dict[str, Any]:
    return convert(src, dst, media_dir=media_dir, overwrite=True, progress=False, storage_options=storage_options)


def samples_per_s(ds: SftJSONLIterableDataset, workers: int, warmup: int, samples: int) -> float:
    random.seed(0)
    np.random.seed(0)
    ds.set_epoch(0)
    if workers:
        source: Any = torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=workers, generator=torch.Generator().manual_seed(0)
        )
    else:
        source = ds
    it = iter(source)
    for _ in range(warmup):
        next(it)
    t0 = time.perf_counter()
    for _ in itertools.islice(it, samples):
        pass
    rate = samples / (time.perf_counter() - t0)
    del it
    return rate


def loader(jsonl: str | None, data_dir: str, backend: str, workers: int, so: dict | None) -> SftJSONLIterableDataset:
    return SftJSONLIterableDataset(
        "vlm_sft",
        ImageTransform(490, 112, 14),
        ByteTokenizer(),
        FrameSampler(8, 4),
        [jsonl] if jsonl else None,
        [data_dir],
        [10**9],
        num_workers=max(workers, 1),
        backend=backend,
        storage_options=so,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", default="bench-out/vlm_sft")
    args = parser.parse_args()
    logging.getLogger("editstream.drops").setLevel(logging.ERROR)  # planted bad rows: counted, not printed
    out = Path(args.out).resolve()
    summary = build(out, args.lines)
    rows: list[tuple[str, str]] = []

    local = time_convert(summary["jsonl"], str(out / "wds"), summary["media_dir"])
    rows.append(("convert, local -> local", f"{local['rows_per_s']:.0f} rows/s, {local['mb_per_s']:.1f} MB/s"))
    with LocalS3Server() as s3:
        so = s3.storage_options
        s3.upload(out / "src", f"s3://{BUCKET}/src")
        s3_jsonl, s3_media = f"s3://{BUCKET}/src/data.jsonl", f"s3://{BUCKET}/src/media"
        remote = time_convert(s3_jsonl, f"s3://{BUCKET}/wds", s3_media, so)
        rows.append(("convert, S3 -> S3", f"{remote['rows_per_s']:.0f} rows/s, {remote['mb_per_s']:.1f} MB/s"))
        cases = [
            ("source, local", summary["jsonl"], summary["media_dir"], "parquet", None),
            ("webdataset, local", None, str(out / "wds"), "webdataset", None),
            ("source, S3", s3_jsonl, s3_media, "parquet", so),
            ("webdataset, S3", None, f"s3://{BUCKET}/wds", "webdataset", so),
        ]
        best: dict[str, float] = {}
        for _ in range(args.repeat):
            for workers in (0, 2):
                for name, jsonl, data_dir, backend, options in cases:
                    ds = loader(jsonl, data_dir, backend, workers, options)
                    label = f"loader, {name}, {workers} workers"
                    best[label] = max(best.get(label, 0.0), samples_per_s(ds, workers, args.warmup, args.samples))
        rows.extend((label, f"{rate:.1f} samples/s") for label, rate in best.items())
    width = max(len(r[0]) for r in rows)
    print(f"\nvlm_sft, {args.lines} lines, {local['output_bytes'] / 1e6:.1f} MB of shards, {os.cpu_count()} CPUs")
    print(f"| {'what'.ljust(width)} | result |\n|{'-' * (width + 2)}|--------|")
    for what, result in rows:
        print(f"| {what.ljust(width)} | {result} |")


if __name__ == "__main__":
    main()
