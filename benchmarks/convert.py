"""Benchmark: ``editstream convert`` beside ``cp -r`` and a hand-written pandas + ShardWriter script.

Not a test. Generates (once, cached) >= 1 GB of synthetic unified_edit parquet, warms the page
cache, then times, one after another on the same source (every output removed and ``sync`` run
before each timing; ``--repeat`` rounds, every other round in reverse order, so each method
alternates with ``tar -cf`` in pairs):

1. ``cp -r SRC OUT`` and ``cp -r SRC OUT && sync``  (the floor: just moving the bytes; the converter
   fsyncs its output before writing the manifest, so the second is the like-for-like one)
2. references: ``tar -cf`` of the source files (packing the same bytes with GNU tar) and
   ``sha256sum`` of the source (hashing them once, which the converter did by default until
   xxh3-128); and two floors every converter in Python pays: starting Python and importing
   pyarrow, and decoding every row group with pyarrow in ``--workers`` processes (no output)
3. ``editstream convert SRC OUT --workers 2``     (the CLI, interpreter start-up included)
4. the script a user would write by hand:       ``pandas.read_parquet`` + ``iterrows`` +
   ``webdataset.ShardWriter`` (image extension from Pillow), one process

and prints a markdown table: the median and best wall time, MB/s (source parquet bytes per
second), and each method's time over ``tar -cf``'s and ``cp -r && sync``'s as the median of the
ratios within a round. The machine is shared: before every round the share of the CPUs that
others use is measured over an idle second, and the table says how loaded the machine was.
``--baseline-src DIR`` adds ``editstream convert`` run on another checkout's ``src`` (an older
commit), alternating with this one, so before/after is measured in the same rounds.

    .venv/bin/python benchmarks/convert.py [--out bench-out] [--gb 1.2] [--repeat 3] [--quick] [--fast]
        [--baseline-src DIR] [--results FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import quiet  # a sibling module of this script
from machine import describe

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
    from editstream.sandbox.synth import write_synthetic_dataset

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


def become_subreaper() -> bool:
    """Adopt the orphans of the commands this script runs (Linux ``PR_SET_CHILD_SUBREAPER``), so
    a fork server left to exit after its converter is reaped here and its CPU time counted."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # 36: PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _children_cpu() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def timed(cmd: list[str], outputs: list[Path], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds of ``cmd`` and the CPU seconds of it and every process it started."""
    for out in outputs:
        if out.exists():
            shutil.rmtree(out)
    subprocess.run(["sync"], check=False)
    before = _own_children()  # this script's own helpers (a resource tracker) never exit: not waited for
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    while orphans := _own_children() - before:  # adopted from the command (a fork server): count their CPU
        for pid in orphans:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return wall, _children_cpu() - cpu0


def _own_children() -> set[int]:
    """This process's children now, adopted orphans included (Linux lists them per thread)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            pids.update(int(pid) for pid in (task / "children").read_text().split())
    return pids


TAR = "reference: tar -cf of the source files"
SYNC = "cp -r && sync"
SLOW = ("reference: sha256sum of the source", "hand-written (pandas iterrows + wds.ShardWriter)")


def pair_ratio(times: dict[str, list[float]], name: str, ref: str) -> float:
    """The median over rounds of ``name``'s time over ``ref``'s in the same round."""
    return statistics.median(a / b for a, b in zip(times[name], times[ref]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out", help="work directory (source is cached here)")
    ap.add_argument("--gb", type=float, default=None, help="minimum source size in GB (default 1.2, --quick 0.25)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="rounds of every method (pairs with tar -cf)")
    ap.add_argument("--quick", action="store_true", help="a 0.25 GB source under OUT/quick")
    ap.add_argument("--fast", action="store_true", help="leave out the slow peers (sha256sum, hand-written)")
    ap.add_argument("--baseline-src", default=None, help="also run editstream convert with PYTHONPATH=DIR")
    ap.add_argument("--results", default=None, help="also write the table (markdown) to this file")
    ap.add_argument("--json", default=None, help="also write the timings as JSON to this file")
    args = ap.parse_args()
    gb = args.gb if args.gb is not None else (0.25 if args.quick else 1.2)

    root = Path(args.out).resolve() / ("quick" if args.quick else "")
    root.mkdir(parents=True, exist_ok=True)
    src = make_source(root, gb)
    size = dir_bytes(src)
    editstream = str(Path(sys.executable).with_name("editstream"))
    script = root / "hand_written.py"
    script.write_text(HAND_WRITTEN)
    decode_only = root / "decode_only.py"
    decode_only.write_text(DECODE_ONLY)
    warm(src)
    runs = _methods(args, src, root, editstream, script, decode_only)
    outputs = [out for _, _, out, _ in runs if out is not None]
    times: dict[str, list[float]] = {name: [] for name, _, _, _ in runs}
    cpus: dict[str, list[float]] = {name: [] for name, _, _, _ in runs}
    reaper = become_subreaper()
    sizes: dict[str, int] = {}
    load_before = os.getloadavg()
    others: list[float] = []
    for attempt in range(args.repeat):
        others.append(quiet.busy_share(1.0))  # this script idles meanwhile: all of it is others'
        order = runs if attempt % 2 == 0 else runs[::-1]  # each method alternates with tar -cf
        for name, cmd, out, env in order:
            seconds, cpu = timed(cmd, outputs, env)  # every output is removed first: each run starts alike
            times[name].append(seconds)
            cpus[name].append(cpu)
            sizes[name] = dir_bytes(out) if out is not None else 0
            print(f"[{attempt + 1}/{args.repeat}] {name}: {seconds:.2f} s, CPU {cpu:.2f} s", file=sys.stderr)
    load_after = os.getloadavg()
    lines = _table(args, src, size, runs, times, cpus if reaper else {}, sizes, others, (load_before, load_after))
    table = "\n".join(lines)
    print(table)
    best = {name: min(v) for name, v in times.items()}
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "source_bytes": size,
                    "seconds": best,
                    "median_seconds": {name: statistics.median(v) for name, v in times.items()},
                    "runs": times,
                    "cpu_seconds": cpus,
                    "vs_tar": {name: pair_ratio(times, name, TAR) for name in times},
                    "cpu_vs_tar": {name: pair_ratio(cpus, name, TAR) for name in cpus} if reaper else {},
                    "others_share": others,
                    "output_bytes": sizes,
                    "table": lines,
                },
                indent=1,
            )
        )
    if args.results:
        flags = " --quick" * args.quick + " --fast" * args.fast
        Path(args.results).write_text(
            "# Converter benchmark\n\nCommand: `.venv/bin/python benchmarks/convert.py "
            f"--gb {gb:g} --workers {args.workers} --repeat {args.repeat}{flags}`\n\n{table}\n"
        )


Run = tuple[str, list[str], "Path | None", "dict[str, str] | None"]


def _methods(
    args: argparse.Namespace, src: Path, root: Path, editstream: str, script: Path, decode_only: Path
) -> list[Run]:
    """``(name, command, output directory, environment)`` of every method, in running order."""
    q = shlex.quote
    cp_sync = f"cp -r {q(str(src))} {q(str(root / 'cp'))} && sync"
    tar_cmd = f"mkdir -p {q(str(root / 'tar'))} && tar -cf {q(str(root / 'tar' / 'all.tar'))} -C {q(str(src))} ."
    sha_cmd = f"cat {q(str(src))}/*.parquet | sha256sum > /dev/null"
    convert = [editstream, "convert", str(src), str(root / "wds"), "--workers", str(args.workers), "--no-progress"]
    runs: list[Run] = [
        ("cp -r", ["cp", "-r", str(src), str(root / "cp")], root / "cp", None),
        (SYNC, ["sh", "-c", cp_sync], root / "cp", None),
        (TAR, ["sh", "-c", tar_cmd], root / "tar", None),
        (SLOW[0], ["sh", "-c", sha_cmd], None, None),
        (
            "floor: python start-up + import pyarrow.parquet",
            [sys.executable, "-c", "import pyarrow.parquet"],
            None,
            None,
        ),
        (
            f"floor: pyarrow decode of every row group, {args.workers} processes, no output",
            [sys.executable, str(decode_only), str(src), str(args.workers)],
            None,
            None,
        ),
        (f"editstream convert --workers {args.workers}", convert, root / "wds", None),
    ]
    if args.baseline_src:
        env = dict(os.environ, PYTHONPATH=str(Path(args.baseline_src).resolve()))
        runs.append((f"editstream convert --workers {args.workers}, baseline src", convert, root / "wds", env))
    runs.append((SLOW[1], [sys.executable, str(script), str(src), str(root / "hand")], root / "hand", None))
    return [r for r in runs if not (args.fast and r[0] in SLOW)]


def _table(
    args: argparse.Namespace,
    src: Path,
    size: int,
    runs: list[Run],
    times: dict[str, list[float]],
    cpus: dict[str, list[float]],
    sizes: dict[str, int],
    others: list[float],
    loads: tuple[tuple[float, ...], tuple[float, ...]],
) -> list[str]:
    """The markdown lines of the report."""
    load = " / ".join(f"{v:.2f}" for v in loads[0]), " / ".join(f"{v:.2f}" for v in loads[1])
    lines = [
        f"Source: {size / 1e9:.2f} GB synthetic unified_edit parquet ({sum(1 for _ in src.glob('*.parquet'))} files), "
        f"page cache warm, {args.repeat} rounds of every method (outputs removed and `sync` before each; every "
        f"other round in reverse order, so each method alternates with `tar -cf`). MB/s = source bytes / median "
        f"wall time; the ratios are medians of the ratios within a round; CPU s: user + system time of the "
        f"command and every process it started (fork server and workers included).",
        "",
        f"Machine: {describe(('pyarrow', 'xxhash'))}. Others' share of the CPUs in an idle second before each "
        f"round: {', '.join(f'{100 * o:.0f}%' for o in others)}; load average (1 / 5 / 15 min) {load[0]} before, "
        f"{load[1]} after.",
        "",
        "| method | median wall (s) | best (s) | CPU s (median) | MB/s | output GB | vs tar -cf | vs cp -r && sync |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, _, _, _ in runs:
        median = statistics.median(times[name])
        out_gb = f"{sizes[name] / 1e9:.2f}" if sizes.get(name) else "-"
        cpu = f"{statistics.median(cpus[name]):.2f}" if cpus else "-"
        lines.append(
            f"| {name} | {median:.2f} | {min(times[name]):.2f} | {cpu} | {size / median / 1e6:.0f} | {out_gb} | "
            f"{pair_ratio(times, name, TAR):.2f}x | {pair_ratio(times, name, SYNC):.2f}x |"
        )
    conv = f"editstream convert --workers {args.workers}"
    lines += [
        "",
        f"editstream convert (which fsyncs its output before writing the manifest) takes "
        f"{pair_ratio(times, conv, TAR):.2f}x the time of tar -cf of the same files (goal <= 1.2x) and "
        f"{pair_ratio(times, conv, SYNC):.2f}x that of cp -r && sync.",
    ]
    if cpus:
        lines[-1] += (
            f" Its CPU time is {pair_ratio(cpus, conv, TAR):.2f}x that of tar -cf (median of the rounds' ratios)."
        )
    if SLOW[1] in times:
        lines[-1] += f" It is {1 / pair_ratio(times, conv, SLOW[1]):.1f}x faster than the hand-written script."
    return lines


if __name__ == "__main__":
    main()
