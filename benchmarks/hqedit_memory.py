"""Peak memory of ``convert --from hqedit``, ``stream`` and ``preview --from hqedit`` on one big row group.

Not a test, and nothing is timed. HQ-Edit publishes parquet row groups of ~315 MiB; this writes
HQ-Edit-shaped files (its six columns, Hub Image structs, large noise PNGs, so the bytes do not
compress) of ``--sizes`` MB, each file a single row group in a Hub ``data/`` folder, and runs each
command on each in a fresh process, reading that process's own high-water mark (``VmHWM`` from
/proc, written at exit; the launcher imports nothing heavy, and ``ru_maxrss`` of ``wait4`` is shown
beside it). If a peak follows the row group, the table shows it growing with the file.

    .venv/bin/python benchmarks/hqedit_memory.py [--out bench-out/hqedit-memory] [--sizes 100,200,400] [--md FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IMAGE_SIDE = 640
"""A 640 x 640 noise PNG is about 1.2 MB: a row (two images) about 2.5 MB, the size of HQ-Edit's."""
POOL = 24
"""Distinct images; rows reuse them (dictionary encoding is off, so every row stores its bytes)."""

WRAPPER = """
import atexit, os, runpy, sys
def _hwm():
    with open("/proc/self/status") as f:
        kb = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    with open(os.environ["HWM_FILE"], "w") as out:
        out.write(kb)
atexit.register(_hwm)
sys.argv = ["editstream", *sys.argv[1:]]
runpy.run_module("editstream.cli", run_name="__main__")
"""


def make(path: Path, megabytes: int) -> None:
    """An HQ-Edit-shaped parquet file of about ``megabytes`` MB in one row group (run in its own process)."""
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    rng = np.random.default_rng(0)
    pool = []
    for _ in range(POOL):
        out = io.BytesIO()
        pixels = rng.integers(0, 256, (IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(out, format="PNG", compress_level=1)
        pool.append(out.getvalue())
    per_row = 2 * len(pool[0])
    rows = []
    for i in range(max(1, megabytes * 1_000_000 // per_row)):
        rows.append(
            {
                "input": f"a photo of a house {i}",
                "input_image": {"bytes": pool[(2 * i) % POOL], "path": None},
                "edit": f"paint house {i} blue",
                "inverse_edit": f"paint house {i} red",
                "output": f"a photo of a blue house {i}",
                "output_image": {"bytes": pool[(2 * i + 1) % POOL], "path": None},
            }
        )
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    text = pa.string()
    names = ["input", "input_image", "edit", "inverse_edit", "output", "output_image"]
    schema = pa.schema([(n, image if n.endswith("_image") else text) for n in names])
    table = pa.Table.from_pylist(rows, schema=schema)
    for folder, pages in ((path, {}), (small_pages(path), {"write_batch_size": 1})):
        folder.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder, row_group_size=len(rows), use_dictionary=False, **pages)
    (path.parents[2] / "rows.txt").write_text(str(len(rows)))


def small_pages(path: Path) -> Path:
    """The same rows with data pages of one image (or 1 MB): ``hub-pages/`` beside ``hub/``."""
    return path.parents[2] / "hub-pages" / "data" / path.name


def measure(args: list[str], hwm_file: Path, src: str) -> tuple[float, float]:
    """``(VmHWM MB, ru_maxrss MB)`` of ``editstream ARGS`` run in a fresh process on the sources at ``src``."""
    env = {**os.environ, "HWM_FILE": str(hwm_file), "PYTHONPATH": src}
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER, "-q", *args], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode == 2 and "--to" in args and "--workers" in args:  # a checkout whose adapter runs in one process
        at = args.index("--workers")
        return measure(args[:at] + args[at + 2 :], hwm_file, src)
    if proc.returncode != 0:
        raise SystemExit(f"editstream {' '.join(args)} exited {proc.returncode}")
    return int(hwm_file.read_text()) / 1024, usage.ru_maxrss / 1024


def commands(root: Path, rows: int) -> dict[str, list[str]]:
    """The commands, in the order they run: the two conversions make what the two streams read."""
    src, out, wds = root / "hub", root / "out", root / "wds"
    return {
        "convert HUB OUT --from hqedit --to parquet": [
            "convert", str(src), str(out), "--from", "hqedit", "--to", "parquet", "--workers", "1", "--no-progress",
        ],
        "convert HUB WDS --from hqedit": ["convert", str(src), str(wds), "--from", "hqedit", "--workers", "1", "--no-progress"],
        "stream OUT (the adapted parquet)": ["stream", str(out), "--samples", str(rows)],
        "stream WDS (the shards)": ["stream", str(wds), "--samples", str(rows)],
        "preview HUB --from hqedit -n 16": ["preview", str(src), "--from", "hqedit", "-o", str(root / "p.html"), "-n", "16"],
        "convert HUB-PAGES OUT2 --from hqedit --to parquet": [
            "convert", str(root / "hub-pages"), str(root / "out2"), "--from", "hqedit", "--to", "parquet", "--workers",
            "1", "--no-progress",
        ],
        "preview HUB-PAGES --from hqedit -n 16": [
            "preview", str(root / "hub-pages"), "--from", "hqedit", "-o", str(root / "p.html"), "-n", "16",
        ],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "bench-out" / "hqedit-memory"))
    parser.add_argument("--sizes", default="100,200,400", help="File sizes in MB, one row group each.")
    parser.add_argument("--md", default=None, help="Also write the table to this file.")
    parser.add_argument("--json", default=None, help="Also write the peaks (VmHWM, MB) as JSON here.")
    parser.add_argument(
        "--src", default=str(REPO / "src"), help="The editstream sources to measure (another checkout's)."
    )
    parser.add_argument("--make", nargs=2, metavar=("PATH", "MB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make:
        make(Path(args.make[0]), int(args.make[1]))
        return
    lines = ["| command | " + " | ".join(f"{mb} MB row group" for mb in args.sizes.split(",")) + " |"]
    lines.append("|---|" + "---:|" * len(args.sizes.split(",")))
    peaks: dict[str, list[str]] = {}
    hwms: dict[str, list[float]] = {}
    for mb in args.sizes.split(","):
        root = Path(args.out) / f"{mb}mb"
        data = root / "hub" / "data" / "train-00000-of-00001.parquet"
        if not small_pages(data).exists():
            subprocess.run([sys.executable, __file__, "--make", str(data), mb], check=True)
        rows = int((root / "rows.txt").read_text())
        for stale in (root / "out", root / "out2", root / "wds", root / "wds-parquet"):
            shutil.rmtree(stale, ignore_errors=True)
        for name, argv in commands(root, rows).items():
            hwm, maxrss = measure(argv, root / "hwm.txt", args.src)
            peaks.setdefault(name, []).append(f"{hwm:.0f} ({maxrss:.0f})")
            hwms.setdefault(name, []).append(hwm)
            print(f"{mb} MB ({rows} rows): {name}: VmHWM {hwm:.0f} MB, ru_maxrss {maxrss:.0f} MB", flush=True)
    lines += [f"| `{name}` | " + " | ".join(values) + " |" for name, values in peaks.items()]
    table = "\n".join(lines)
    print(table)
    if args.md:
        Path(args.md).write_text(table + "\n")
    if args.json:
        sizes = [int(mb) for mb in args.sizes.split(",")]
        Path(args.json).write_text(json.dumps({"sizes_mb": sizes, "vmhwm_mb": hwms}, indent=1))


if __name__ == "__main__":
    main()
