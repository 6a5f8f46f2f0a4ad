"""Benchmark: the built-in adapters on synthetic data in each dataset's published Hub schema.

Not a test. For each dataset it writes ``--rows`` rows of parquet in the dataset's own schema
(Hugging Face Image structs of JPEG noise, ``--files`` files of 100-row row groups; MagicBrush's
sessions of 1-3 turns shuffled across the files), adapts it to BAGEL parquet and prints a
markdown table: dataset, rows in, chains out, source MB, seconds, MB/s (source bytes / second).

Then the memory of grouping: MagicBrush-schema data at two sizes, each adapted in a fresh
process that reports the plan pass's Python heap peak (tracemalloc; the plan holds one packed
location and one order value per row, no image bytes), arrow's peak allocation and the
process's peak RSS over the whole adaptation (the gather holds one output row group of chains
plus one source row group at a time, so it should not grow with the dataset).

    .venv/bin/python benchmarks/adapters.py [--out bench-adapters] [--rows 600] [--sizes 2000,8000]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import shutil
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
Cell = Callable[[int], Any]


def jpeg_pool(n: int, side: int, seed: int = 0) -> list[bytes]:
    """``n`` distinct noise JPEGs of ``side`` x ``side`` (noise defeats compression, like photos)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def schemas(pool: list[bytes]) -> dict[str, list[tuple[str, pa.DataType, Cell]]]:
    """Each dataset's published columns with a value maker per column (row index -> value)."""

    def img(k: int) -> Cell:
        return lambda i: {"bytes": pool[(2 * i + k) % len(pool)], "path": None}

    def text(prefix: str) -> Cell:
        return lambda i: f"{prefix} {i}"

    def num(kind: Callable[[int], Any]) -> Cell:
        return kind

    return {
        "instructpix2pix": [
            ("original_prompt", pa.string(), text("a photo")),
            ("original_image", IMAGE, img(0)),
            ("edit_prompt", pa.string(), text("make it")),
            ("edited_prompt", pa.string(), text("an edited photo")),
            ("edited_image", IMAGE, img(1)),
        ],
        "ultraedit": [
            *[(c, pa.float64(), num(lambda i: (i % 100) / 100)) for c in ("clip_sim_source", "clip_sim_target")],
            *[(c, pa.float64(), num(lambda i: (i % 7) / 7)) for c in ("clip_sim_dir", "clip_sim_image")],
            ("dinov2_sim", pa.float64(), num(lambda i: 0.5)),
            ("ssim", pa.float64(), num(lambda i: 0.7)),
            ("source_caption", pa.string(), text("source")),
            ("target_caption", pa.string(), text("target")),
            ("idx", pa.int64(), num(lambda i: i)),
            ("edit_prompt", pa.string(), text("add")),
            ("edit_object", pa.null(), num(lambda i: None)),
            ("source_image", IMAGE, img(0)),
            ("edited_image", IMAGE, img(1)),
            ("mask_image", pa.null(), num(lambda i: None)),
        ],
        "omniedit": [
            ("omni_edit_id", pa.string(), text("omni")),
            ("task", pa.string(), num(lambda i: ["add", "removal", "swap"][i % 3])),
            ("src_img", IMAGE, img(0)),
            ("edited_img", IMAGE, img(1)),
            ("edited_prompt_list", pa.list_(pa.string()), num(lambda i: [f"edit {i}", f"please edit {i}"])),
            *[(c, pa.int64(), num(lambda i: 256)) for c in ("width", "height")],
            *[(c, pa.int64(), num(lambda i: i % 10)) for c in ("sc_score_1", "sc_score_2")],
            ("sc_reasoning", pa.string(), text("reason")),
            ("pq_score", pa.int64(), num(lambda i: 8)),
            ("pq_reasoning", pa.string(), text("reason")),
            ("o_score", pa.float64(), num(lambda i: float(i % 10))),
        ],
        "hqedit": [
            ("input", pa.string(), text("input")),
            ("input_image", IMAGE, img(0)),
            ("edit", pa.string(), text("edit")),
            ("inverse_edit", pa.string(), text("undo")),
            ("output", pa.string(), text("output")),
            ("output_image", IMAGE, img(1)),
        ],
        "anyedit": [
            ("image_id", pa.string(), text("any")),
            ("edit_instruction", pa.string(), text("remove")),
            ("edit_type", pa.string(), num(lambda i: ["remove", "replace"][i % 2])),
            ("image_file", IMAGE, img(0)),
            ("edited_file", IMAGE, img(1)),
            ("visual_input", IMAGE, num(lambda i: None)),
            ("input", pa.string(), text("scene")),
            ("output", pa.string(), text("scene after")),
        ],
    }


def write_files(out: Path, split: str, schema: pa.Schema, rows: list[dict[str, Any]], files: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    per = -(-len(rows) // files)
    for k in range(files):
        table = pa.Table.from_pylist(rows[k * per : (k + 1) * per], schema=schema)
        pq.write_table(table, out / f"{split}-{k:05d}-of-{files:05d}.parquet", row_group_size=100)


def magicbrush_rows(pool: list[bytes], n_rows: int, seed: int = 1) -> list[dict[str, Any]]:
    """MagicBrush-schema rows (at least ``n_rows``): sessions of 1-3 turns, shuffled over the files."""
    rows: list[dict[str, Any]] = []
    session = 0
    while len(rows) < n_rows:
        for t in range(1 + session % 3):
            rows.append(
                {
                    "img_id": str(100000 + session),
                    "turn_index": t + 1,
                    "source_img": {"bytes": pool[(session + t) % len(pool)], "path": None},
                    "mask_img": {"bytes": pool[(session + 7) % len(pool)], "path": None},
                    "instruction": f"session {session} turn {t + 1}",
                    "target_img": {"bytes": pool[(session + t + 1) % len(pool)], "path": None},
                }
            )
        session += 1
    random.Random(seed).shuffle(rows)  # whole sessions, so rows in is n_rows rounded up to a session
    return rows


MAGICBRUSH = pa.schema(
    [
        ("img_id", pa.string()),
        ("turn_index", pa.int32()),
        ("source_img", IMAGE),
        ("mask_img", IMAGE),
        ("instruction", pa.string()),
        ("target_img", IMAGE),
    ]
)


def source_bytes(src: Path) -> int:
    return sum(f.stat().st_size for f in src.glob("*.parquet"))


def throughput(out: Path, rows: int, files: int, side: int) -> list[dict[str, Any]]:
    from editstream.adapters import adapt

    pool = jpeg_pool(64, side)
    results = []
    datasets: dict[str, tuple[pa.Schema, list[dict[str, Any]], str]] = {}
    for name, columns in schemas(pool).items():
        schema = pa.schema([(c, t) for c, t, _ in columns])
        datasets[name] = (schema, [{c: make(i) for c, _, make in columns} for i in range(rows)], "train")
    datasets["magicbrush"] = (MAGICBRUSH, magicbrush_rows(pool, rows), "train")
    for name in sorted(datasets):
        schema, data, split = datasets[name]
        src, dst = out / name / "src", out / name / "bagel"
        shutil.rmtree(out / name, ignore_errors=True)
        write_files(src, split, schema, data, files)
        t0 = time.perf_counter()
        summary = adapt(str(src), str(dst), name, progress=False)
        seconds = time.perf_counter() - t0
        mb = source_bytes(src) / 1e6
        results.append(
            {
                "dataset": name,
                "rows_in": summary["rows_in"],
                "chains_out": summary["chains_out"],
                "source_mb": round(mb, 1),
                "seconds": round(seconds, 2),
                "mb_per_s": round(mb / seconds, 1),
            }
        )
    return results


def _status_mb(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1e3
    return float("nan")


def memory_child(src: str, dst: str) -> None:
    """In a fresh process: the plan pass's heap peak, then a whole adaptation's RSS and arrow peaks."""
    from editstream.adapters import adapt, resolve_mapping
    from editstream.data.adapted.plan import list_sources, plan_groups

    mapping = resolve_mapping("magicbrush")
    baseline = _status_mb("VmRSS")
    files = list_sources(src, None, None)
    tracemalloc.start()
    plan = plan_groups(files, mapping, None, 1000, "part")
    plan_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del plan
    summary = adapt(src, dst, mapping, progress=False)
    print(
        json.dumps(
            {
                "rows_in": summary["rows_in"],
                "chains_out": summary["chains_out"],
                "plan_heap_mb": round(plan_peak / 1e6, 2),
                "arrow_peak_mb": round(pa.default_memory_pool().max_memory() / 1e6, 1),
                "rss_before_mb": round(baseline, 1),
                "peak_rss_mb": round(_status_mb("VmHWM"), 1),
                "peak_minus_before_mb": round(_status_mb("VmHWM") - baseline, 1),
            }
        )
    )


def grouping_memory(out: Path, sizes: list[int], side: int) -> list[dict[str, Any]]:
    pool = jpeg_pool(64, side, seed=5)
    results = []
    for n in sizes:
        src, dst = out / f"mb-{n}" / "src", out / f"mb-{n}" / "bagel"
        shutil.rmtree(out / f"mb-{n}", ignore_errors=True)
        write_files(src, "train", MAGICBRUSH, magicbrush_rows(pool, n), max(2, n // 1000))
        child = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(src), str(dst)], check=True, capture_output=True, text=True
        )
        results.append({"rows": n, "source_mb": round(source_bytes(src) / 1e6, 1), **json.loads(child.stdout)})
    return results


def table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="bench-adapters")
    parser.add_argument("--rows", type=int, default=600, help="rows per dataset for the throughput table")
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--side", type=int, default=256, help="image side in pixels")
    parser.add_argument("--sizes", default="2000,8000", help="MagicBrush rows for the grouping memory runs")
    parser.add_argument("--memory-child", nargs=2, metavar=("SRC", "DST"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(*args.memory_child)
        return
    out = Path(args.out)
    print(table(throughput(out, args.rows, args.files, args.side)))
    print()
    print(table(grouping_memory(out, [int(s) for s in args.sizes.split(",")], 64)))


if __name__ == "__main__":
    main()
