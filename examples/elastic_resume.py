"""Stop a 2-rank job mid-epoch, finish the epoch on 3 ranks: every row exactly once (elastic epochs).

    python examples/elastic_resume.py [--out demo-out/elastic] [--backend webdataset] [--stop-after 2]
                                      [--streams 6] [--finish-ranks 3]

makes synthetic edit and text-to-image data, then runs two torchrun jobs on CPU (gloo):

1. ``--phase first`` on 2 ranks x 2 DataLoader workers: ``--stop-after`` steps, then every rank
   saves ``dataloader.state_dict()`` (as a training checkpoint would) and stops;
2. ``--phase finish`` on 3 ranks x 1 worker: every rank loads ``editstream.merge_states`` of the
   saved states and trains to the end of the epoch inside ``editstream.EpochSteps``, which gives
   a rank that has run out ``None`` until every rank is done, so no rank waits on another.

Each step all-reduces a tensor, as DDP's gradient sync does: a rank that stopped early would
hang the others. The script then checks the batches of both jobs against the epoch computed in
one process: every row once, nothing lost, nothing repeated.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

import editstream
from editstream import BagelDataloaderConfig, BagelDatasetConfig, ByteTokenizer

VAE = {"image_stride": 16, "max_image_size": 128, "min_image_size": 32}
VIT = {"image_stride": 14, "max_image_size": 112, "min_image_size": 28}
PACKING = {
    "expected_num_tokens": 512,
    "max_num_tokens": 544,
    "max_num_tokens_per_sample": 512,
    "prefer_buffer_before": 256,
    "max_buffer_size": 4,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="demo-out/elastic", help="directory for the data, states and results")
    ap.add_argument("--backend", choices=["parquet", "webdataset"], default="webdataset")
    ap.add_argument("--stop-after", type=int, default=2, help="steps of the first job before it stops")
    ap.add_argument("--phase", choices=["first", "finish"], default=None, help="(set by the script for torchrun)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank in this phase")
    ap.add_argument("--streams", type=int, default=6, help="logical streams (elastic_streams)")
    ap.add_argument("--finish-ranks", type=int, default=3, help="ranks of the job that finishes the epoch")
    return ap.parse_args(argv)


def make_data(root: Path) -> None:
    """Synthetic edit (3 files x 2 row groups x 6 rows) and text-to-image data, with bad rows, both backends."""
    from editstream import convert, write_synthetic_dataset

    for name, schema, seed in (("edit", "unified_edit", 5), ("t2i", "t2i_pretrain", 6)):
        if (root / name / "wds" / "manifest.json").exists():
            continue
        write_synthetic_dataset(
            str(root / name / "pq"),
            schema=schema,
            num_files=3,
            row_groups_per_file=2,
            rows_per_group=6,
            seed=seed,
            corrupt_fraction=0.1,
            max_side=64,
        )
        convert(str(root / name / "pq"), str(root / name / "wds"), workers=1, progress=False, overwrite=True)


def build_loader(root: Path, backend: str, rank: int, world_size: int, workers: int, streams: int) -> Any:
    sub = "wds" if backend == "webdataset" else "pq"
    groups = {
        "unified_edit": {
            "dataset_names": ["edit"],
            "weight": 2.0,
            "num_used_data": [3],
            "image_transform_args": dict(VAE),
            "vit_image_transform_args": dict(VIT),
            "backend": backend,
        },
        "t2i_pretrain": {
            "dataset_names": ["t2i"],
            "weight": 1.0,
            "num_used_data": [3],
            "image_transform_args": dict(VAE),
            "backend": backend,
        },
    }
    info = {
        "unified_edit": {"edit": {"data_dir": str(root / "edit" / sub)}},
        "t2i_pretrain": {"t2i": {"data_dir": str(root / "t2i" / sub)}},
    }
    config = BagelDatasetConfig(
        grouped_datasets=groups, dataset_info=info, elastic=True, elastic_streams=streams, **PACKING
    )
    tokenizer = ByteTokenizer()
    return (
        BagelDataloaderConfig(config, num_workers=workers, pin_memory=False)
        .build(
            tokenizer=tokenizer,
            special_tokens=tokenizer.special_token_ids(),
            rank=rank,
            world_size=world_size,
            batch_size=1,
            global_seed=11,
        )
        .dataloader
    )


def rows_of(batch: Any) -> list[list[Any]]:
    return [[d["dataset_name"], list(d["data_indexes"])] for d in batch.batch_data_indexes]


def train_step(batch: Any) -> None:
    """A stand-in for forward/backward: every rank joins one all-reduce per step (zero for no batch)."""
    value = torch.zeros(1) if batch is None else batch.packed_text_ids.float().mean().reshape(1)
    dist.all_reduce(value)


def run_phase(args: argparse.Namespace) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    root = Path(args.out)
    loader = build_loader(root / "data", args.backend, rank, world, args.workers, args.streams)
    batches: list[list[list[Any]]] = []
    if args.phase == "first":
        steps = editstream.EpochSteps(loader)
        for batch in steps:
            train_step(batch)
            if batch is not None:
                batches.append(rows_of(batch))
            if steps.steps == args.stop_after:
                break
        torch.save(loader.state_dict(), root / f"state-rank{rank}.pt")
    else:
        saved = sorted(root.glob("state-rank*.pt"))
        merged = editstream.merge_states([torch.load(p, weights_only=False) for p in saved])
        loader.load_state_dict(merged)
        steps = editstream.EpochSteps(loader)
        for batch in steps:
            train_step(batch)
            if batch is not None:
                batches.append(rows_of(batch))
    result = {"rank": rank, "world": world, "steps": steps.steps, "idle_steps": steps.idle_steps, "batches": batches}
    (root / f"{args.phase}-rank{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


def torchrun(nproc: int, args: argparse.Namespace, phase: str, workers: int) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={port}",
        __file__,
        "--out",
        args.out,
        "--backend",
        args.backend,
        "--stop-after",
        str(args.stop_after),
        "--phase",
        phase,
        "--workers",
        str(workers),
        "--streams",
        str(args.streams),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"torchrun {phase} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def one_process_epoch(root: Path, backend: str, streams: int) -> collections.Counter[str]:
    loader = build_loader(root / "data", backend, 0, 1, 0, streams)
    return collections.Counter(json.dumps(rows_of(b)) for b in loader)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.phase is not None:
        run_phase(args)
        return 0
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    for old in [*root.glob("state-rank*.pt"), *root.glob("first-rank*.json"), *root.glob("finish-rank*.json")]:
        old.unlink()
    make_data(root / "data")
    torchrun(2, args, "first", workers=2)
    torchrun(args.finish_ranks, args, "finish", workers=1)
    results = {p.stem: json.loads(p.read_text()) for p in sorted(root.glob("*-rank*.json"))}
    seen = collections.Counter(json.dumps(b) for r in results.values() for b in r["batches"])
    expected = one_process_epoch(root, args.backend, args.streams)
    rows = [tuple(map(str, row)) for b in seen for row in json.loads(b) for _ in range(seen[b])]
    print(f"{'job':<8} {'rank':>4} {'steps':>6} {'batches':>8} {'idle steps':>10}")
    for name, r in results.items():
        print(f"{name.split('-')[0]:<8} {r['rank']:>4} {r['steps']:>6} {len(r['batches']):>8} {r['idle_steps']:>10}")
    exact = seen == expected and len(rows) == len(set(rows))
    print(f"rows trained: {len(rows)} (distinct {len(set(rows))}); batches equal the one-process epoch: {exact}")
    summary = {"rows": len(rows), "distinct": len(set(rows)), "exact": exact, "results": results}
    (root / "summary.json").write_text(json.dumps(summary))
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
