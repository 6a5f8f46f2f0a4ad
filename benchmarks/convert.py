"""Benchmark: ``editstream convert`` beside ``cp -r`` and a hand-written pandas + ShardWriter script.

Not a test. Generates (once, cached) >= 1 GB of synthetic unified_edit parquet, warms the page
cache, then times, one after another on the same source (every output removed and ``sync`` run
before each timing, best of ``--repeat`` runs):

1. ``cp -r SRC OUT`` and ``cp -r SRC OUT && sync``  (the floor: just moving the bytes; the converter
   fsyncs its output before writing the manifest, so the second is the like-for-like one)
2. references: ``tar -cf`` of the source files (packing the same bytes with GNU tar) and
   ``sha256sum`` of the source (hashing them once, which the converter did by default until
   xxh3-128); and two floors every converter in Python pays: starting Python and importing
   pyarrow, and decoding every row group with pyarrow in ``--workers`` processes (no output)
3. ``editstream convert SRC OUT --workers 2``     (the CLI, interpreter start-up included)
4. the script a user would write by hand:       ``pandas.read_parquet`` + ``iterrows`` +
   ``webdataset.ShardWriter`` (image extension from Pillow), one process

and prints a markdown table of wall time and MB/s (source parquet bytes per second).

    .venv/bin/python benchmarks/convert.py [--out bench-out] [--gb 1.0] [--repeat 2] [--results FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

HAND_WRITTEN = r"""
import io, json, os, sys
import pandas as pd
import webdataset as wds
from PIL import Image

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
with wds.ShardWriter(os.path.join(out, "shard-%06d.tar"), maxcount=16, verbose=0) as sink:
    for name in sorted(os.listdir(src)):
        if not name.endswith(".parquet"):
            continue
        df = pd.read_parquet(os.path.join(src, name))
        for i, row in df.iterrows():
            sample = {"__key__": f"{name[:-8]}-{i:07d}"}
            images = list(row["image_list"])
            for j, img in enumerate(images):
                fmt = Image.open(io.BytesIO(img)).format.lower()
                sample[f"{j}.{'jpg' if fmt == 'jpeg' else fmt}"] = img
            sample["json"] = {
                "row_id": row["row_id"],
                "instruction_list": [list(x) for x in row["instruction_list"]],
                "source": row["source"],
                "score": row["score"],
                "tags": list(row["tags"]),
            }
            if row["meta_blob"] is not None:
                sample["meta_blob.bin"] = row["meta_blob"]
            sink.write(sample)
"""


DECODE_ONLY = r"""
import os, sys
from concurrent.futures import ProcessPoolExecutor
import pyarrow.parquet as pq

def decode(path):
    pf = pq.ParquetFile(path, memory_map=True)
    rows = 0
    for rg in range(pf.metadata.num_row_groups):
        for batch in pf.iter_batches(batch_size=256, row_groups=[rg], use_threads=False):
            rows += batch.num_rows
    return rows

if __name__ == "__main__":
    src, workers = sys.argv[1], int(sys.argv[2])
    files = sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".parquet"))
    with ProcessPoolExecutor(workers) as pool:
        print(sum(pool.map(decode, files)))
"""


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def make_source(root: Path, gb: float) -> Path:
    """Synthetic unified_edit parquet of at least ``gb`` GB (re-used when already there)."""
    src = root / "src"
    marker = root / "src.json"
    # ~0.35 MB per row with these sides (2-5 images each); 16 rows per row group, 8 per file.
    rows_per_group, groups = 16, 8
    files = max(1, math.ceil(gb * 1e9 / (0.33e6 * rows_per_group * groups)))
    want = {"files": files, "groups": groups, "rows": rows_per_group, "min_side": 256, "max_side": 1024, "seed": 0}
    if marker.exists() and json.loads(marker.read_text()).get("params") == want and dir_bytes(src) >= gb * 1e9:
        return src
    from editstream.testing.synth import write_synthetic_dataset

    if src.exists():
        shutil.rmtree(src)
    while True:
        summary = write_synthetic_dataset(
            str(src),
            schema="unified_edit",
            num_files=want["files"],
            row_groups_per_file=groups,
            rows_per_group=rows_per_group,
            seed=0,
            min_side=want["min_side"],
            max_side=want["max_side"],
        )
        if summary["total_bytes"] >= gb * 1e9:
            break
        want["files"] += max(1, want["files"] // 4)
        shutil.rmtree(src)
    (src / "parquet_info.json").unlink(missing_ok=True)  # keep exactly the parquet files
    marker.write_text(json.dumps({"params": want, "bytes": summary["total_bytes"]}))
    return src


def warm(src: Path) -> None:
    for p in sorted(src.rglob("*")):
        if p.is_file():
            with open(p, "rb") as f:
                while f.read(16 << 20):
                    pass


def timed(cmd: list[str], outputs: list[Path]) -> float:
    for out in outputs:
        if out.exists():
            shutil.rmtree(out)
    subprocess.run(["sync"], check=False)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out", help="work directory (source is cached here)")
    ap.add_argument("--gb", type=float, default=1.0, help="minimum source size in GB")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2, help="runs per method; the table shows the fastest")
    ap.add_argument("--results", default=None, help="also write the table (markdown) to this file")
    ap.add_argument("--json", default=None, help="also write the timings as JSON to this file")
    args = ap.parse_args()

    root = Path(args.out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    src = make_source(root, args.gb)
    size = dir_bytes(src)
    editstream = str(Path(sys.executable).with_name("editstream"))
    script = root / "hand_written.py"
    script.write_text(HAND_WRITTEN)
    decode_only = root / "decode_only.py"
    decode_only.write_text(DECODE_ONLY)
    warm(src)

    q = shlex.quote
    cp_sync = f"cp -r {q(str(src))} {q(str(root / 'cp'))} && sync"
    tar_cmd = f"mkdir -p {q(str(root / 'tar'))} && tar -cf {q(str(root / 'tar' / 'all.tar'))} -C {q(str(src))} ."
    sha_cmd = f"cat {q(str(src))}/*.parquet | sha256sum > /dev/null"
    runs = [
        ("cp -r", ["cp", "-r", str(src), str(root / "cp")], root / "cp"),
        ("cp -r && sync", ["sh", "-c", cp_sync], root / "cp"),
        ("reference: tar -cf of the source files", ["sh", "-c", tar_cmd], root / "tar"),
        ("reference: sha256sum of the source", ["sh", "-c", sha_cmd], None),
        ("floor: python start-up + import pyarrow.parquet", [sys.executable, "-c", "import pyarrow.parquet"], None),
        (
            f"floor: pyarrow decode of every row group, {args.workers} processes, no output",
            [sys.executable, str(decode_only), str(src), str(args.workers)],
            None,
        ),
        (
            f"editstream convert --workers {args.workers}",
            [editstream, "convert", str(src), str(root / "wds"), "--workers", str(args.workers), "--no-progress"],
            root / "wds",
        ),
        (
            "hand-written (pandas iterrows + wds.ShardWriter)",
            [sys.executable, str(script), str(src), str(root / "hand")],
            root / "hand",
        ),
    ]
    outputs = [out for _, _, out in runs if out is not None]
    best: dict[str, float] = {}
    sizes: dict[str, int] = {}
    for attempt in range(args.repeat):
        for name, cmd, out in runs:
            seconds = timed(cmd, outputs)  # every output is removed first: each run starts alike
            best[name] = min(best.get(name, seconds), seconds)
            sizes[name] = dir_bytes(out) if out is not None else 0
            print(f"[{attempt + 1}/{args.repeat}] {name}: {seconds:.2f} s", file=sys.stderr)
    results = [(name, best[name], sizes[name]) for name, _, _ in runs]

    cp_s = results[0][1]
    sync_s = results[1][1]
    lines = [
        f"Source: {size / 1e9:.2f} GB synthetic unified_edit parquet ({sum(1 for _ in src.glob('*.parquet'))} files), "
        f"{os.cpu_count()} CPUs, page cache warm, best of {args.repeat} runs per method (outputs removed and "
        f"`sync` before each). MB/s = source bytes / wall time.",
        "",
        "| method | wall time (s) | MB/s | output GB | vs cp -r | vs cp -r && sync |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, seconds, out_bytes in results:
        out_gb = f"{out_bytes / 1e9:.2f}" if out_bytes else "-"
        lines.append(
            f"| {name} | {seconds:.2f} | {size / seconds / 1e6:.0f} | {out_gb} | "
            f"{seconds / cp_s:.2f}x | {seconds / sync_s:.2f}x |"
        )
    conv_s = next(v for k, v in best.items() if k.startswith("editstream convert"))
    hand_s = next(v for k, v in best.items() if k.startswith("hand-written"))
    lines += [
        "",
        f"editstream convert (which fsyncs its output before writing the manifest) takes "
        f"{conv_s / cp_s:.2f}x the time of cp -r and {conv_s / sync_s:.2f}x that of cp -r && sync "
        f"(goal <= 1.5x), and is {hand_s / conv_s:.1f}x faster than the hand-written script "
        f"(goal >= 2x).",
    ]
    table = "\n".join(lines)
    print(table)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"source_bytes": size, "seconds": best, "output_bytes": sizes, "table": lines}, indent=1)
        )
    if args.results:
        Path(args.results).write_text(
            "# Converter benchmark\n\nCommand: `.venv/bin/python benchmarks/convert.py "
            f"--gb {args.gb:g} --workers {args.workers} --repeat {args.repeat}`\n\n{table}\n"
        )


if __name__ == "__main__":
    main()
