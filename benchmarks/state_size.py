"""Benchmark: the size of ``dataloader.state_dict()`` and what taking it costs, before and after compact states (not a test).

The loader is a recipe's: ``BagelDatasetConfig(...)`` over ``loader.py``'s synthetic edit data
(cached under ``--out``; 256-768 px images), flex attention, an 8192-token budget (9216 at most)
and ``prefer_buffer_before=0``, so samples that do not fit wait and the buffers fill and stay
full (the worst case for a state's size),
``BagelDataloaderConfig(num_workers=2).build(...)``, i.e. torchdata's StatefulDataLoader with
``snapshot_every_n_steps=1``, so every batch ships its worker's state to the main process.
For each VAE image size (``max_image_size`` 256 and 512) and buffer length (``max_buffer_size``
10 and 50), one run reads ``--batches`` batches (default 30) and then saves the loader's state with
``torch.save`` (bytes, and whether the state passes through JSON). The same is run on the
source tree of ``--before`` (default: the commit before compact states, extracted with
``git archive``) and on this tree, each run its own process, in alternating pairs; samples/s
compares the two (medians of pair ratios): the cost of shipping states through IPC.

    .venv/bin/python benchmarks/state_size.py [--batches 12] [--pairs 2] [--before 0e4e715] [--json FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

SETTINGS = [(256, 10), (256, 50), (512, 10), (512, 50)]


def run_one(data_dir: str, vae_size: int, buffer: int, batches: int) -> dict[str, Any]:
    """In this process (``editstream`` from ``sys.path``): read ``batches`` batches, save the state."""
    import torch

    from editstream import BagelDataloaderConfig, BagelDatasetConfig, ByteTokenizer

    config = BagelDatasetConfig(
        grouped_datasets={
            "unified_edit": {
                "dataset_names": ["bench"],
                "weight": 1.0,
                "num_used_data": [8],
                "image_transform_args": {"max_image_size": vae_size, "min_image_size": 128, "image_stride": 16},
                "vit_image_transform_args": {"max_image_size": 490, "min_image_size": 224, "image_stride": 14},
            }
        },
        dataset_info={"unified_edit": {"bench": {"data_dir": data_dir}}},
        use_flex=True,
        expected_num_tokens=8192,
        max_num_tokens=9216,
        prefer_buffer_before=0,  # buffered samples wait: the buffers fill and stay full (the worst case)
        max_buffer_size=buffer,
    )
    tok = ByteTokenizer()
    loader = (
        BagelDataloaderConfig(config, num_workers=2, pin_memory=False)
        .build(tokenizer=tok, special_tokens=tok.special_token_ids(), rank=0, world_size=1, batch_size=1, global_seed=0)
        .dataloader
    )
    iterator = iter(loader)
    next(iterator)  # workers up, first batch: not timed
    samples = 0
    start = time.perf_counter()
    for _ in range(batches):
        samples += len(next(iterator).batch_data_indexes)
    seconds = time.perf_counter() - start
    state = loader.state_dict()
    saved = io.BytesIO()
    torch.save(state, saved)
    try:
        json_bytes: int | None = len(json.dumps(state))
    except TypeError:
        json_bytes = None
    snaps = state["_snapshot"]["_worker_snapshots"].values()
    buffered = [len(s["dataset_state"]["buffer"]) for s in snaps]
    del iterator
    return {"bytes": saved.tell(), "json": json_bytes, "buffered": buffered, "samples_s": samples / seconds}


def extract(rev: str, into: Path) -> Path:
    """``src/`` of commit ``rev`` (via ``git archive``) under ``into``; returns the ``src`` path."""
    blob = subprocess.run(["git", "archive", rev, "src"], cwd=REPO, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def in_process(src: Path, data: Path, vae: int, buffer: int, batches: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import state_size as s; "
        "print(json.dumps(s.run_one(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))))"
    )
    args = [str(HERE), str(data), str(vae), str(buffer), str(batches)]
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def mib(n: int | None) -> str:
    if n is None:
        return "no"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--pairs", type=int, default=2, help="alternating before/after pairs per setting")
    ap.add_argument("--before", default="0e4e715", help="the commit to compare with (before compact states)")
    ap.add_argument("--out", default=str(REPO / "bench-out" / "loader"))
    ap.add_argument("--quick", action="store_true", help="one setting, one pair, 12 batches")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import loader as lb

    data, _ = lb.build_data(Path(args.out))
    settings = SETTINGS[-1:] if args.quick else SETTINGS
    batches, pairs = (12, 1) if args.quick else (args.batches, args.pairs)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        before_src = extract(args.before, Path(tmp))
        for vae, buffer in settings:
            runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
            for _ in range(pairs):
                runs["before"].append(in_process(before_src, data, vae, buffer, batches))
                runs["after"].append(in_process(REPO / "src", data, vae, buffer, batches))
            ratio = statistics.median(a["samples_s"] / b["samples_s"] for a, b in zip(runs["after"], runs["before"]))
            rows.append(
                {"vae": vae, "buffer": buffer, "before": runs["before"][-1], "after": runs["after"][-1], "ratio": ratio}
            )
    print(f"StatefulDataLoader, 2 workers, snapshot every step, {batches} batches; state saved with torch.save\n")
    print(
        "| VAE px | max_buffer_size | buffered (w0, w1) | state before | state after | JSON after | samples/s after / before |"
    )
    print("|---:|---:|---|---:|---:|---|---:|")
    for r in rows:
        b, a = r["before"], r["after"]
        print(
            f"| {r['vae']} | {r['buffer']} | {b['buffered']} -> {a['buffered']} | {mib(b['bytes'])} | {mib(a['bytes'])} "
            f"| {mib(a['json'])} | {r['ratio']:.2f}x |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
