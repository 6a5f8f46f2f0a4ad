"""A training loop without a model: consume packed batches on every rank, check and count them.

Launch on CPU with torchrun (gloo), on either backend, from local disk or S3:

    torchrun --nproc_per_node=2 examples/train_loop.py --data demo-out/edit-parquet
    torchrun --nproc_per_node=2 examples/train_loop.py --data demo-out/edit-wds --backend webdataset
    torchrun --nproc_per_node=2 examples/train_loop.py --data s3://bucket/edit-wds --backend webdataset \\
        --endpoint-url http://127.0.0.1:9000

Rank and world size come from the process group torchrun sets up; each rank writes what it
received (which units, in which order) to ``--out/rank{R}.json`` and rank 0 prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from editstream import BagelDataloaderConfig, BagelDatasetConfig, ByteTokenizer
from editstream.data.open import entry_count

VAE_ARGS = {"image_stride": 16, "max_image_size": 128, "min_image_size": 32}
VIT_ARGS = {"image_stride": 14, "max_image_size": 112, "min_image_size": 28}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="parquet directory, or converted root for --backend webdataset")
    ap.add_argument("--backend", choices=["parquet", "webdataset"], default="parquet")
    ap.add_argument("--steps", type=int, default=10, help="packed batches per rank")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    ap.add_argument("--num-used", type=int, default=None, help="parquet files used (default: all)")
    ap.add_argument("--expected-tokens", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", default=None, help="directory for rank{R}.json")
    ap.add_argument("--endpoint-url", default=None, help="S3 endpoint (MinIO, moto ...)")
    return ap.parse_args(argv)


def make_loader(args: argparse.Namespace, rank: int | None = None, world_size: int | None = None) -> Any:
    """The checkpointable loader every rank builds (rank/world from torch.distributed when None)."""
    storage_options = {"endpoint_url": args.endpoint_url} if args.endpoint_url else None
    info = {"data_dir": args.data}
    if storage_options:
        info["storage_options"] = storage_options
    num_used = args.num_used if args.num_used is not None else entry_count(args.data, args.backend, storage_options)
    grouped = {
        "unified_edit": {
            "dataset_names": ["data"],
            "image_transform_args": dict(VAE_ARGS),
            "vit_image_transform_args": dict(VIT_ARGS),
            "num_used_data": [num_used],
            "weight": 1.0,
            "is_mandatory": True,
            "backend": args.backend,
        }
    }
    dataset_config = BagelDatasetConfig(
        grouped_datasets=grouped,
        dataset_info={"unified_edit": {"data": info}},
        data_seed=args.seed,
        expected_num_tokens=args.expected_tokens,
        max_num_tokens=args.expected_tokens + 1024,
        max_num_tokens_per_sample=args.expected_tokens,
        prefer_buffer_before=args.expected_tokens // 2,
        max_buffer_size=8,
    )
    if rank is None or world_size is None:
        rank = dist.get_rank() if dist.is_initialized() else 0
        world_size = dist.get_world_size() if dist.is_initialized() else 1
    tok = ByteTokenizer()
    built = BagelDataloaderConfig(dataset_config, num_workers=args.workers, pin_memory=False).build(
        tokenizer=tok,
        special_tokens=tok.special_token_ids(),
        rank=rank,
        world_size=world_size,
        batch_size=1,
        global_seed=args.seed,
    )
    return built.dataloader


def check_batch(batch: dict[str, Any], max_tokens: int) -> None:
    """What a model would rely on; a violation is a bug in the data pipeline."""
    length = int(batch["sequence_length"])
    assert 0 < length <= max_tokens, f"sequence_length {length} outside (0, {max_tokens}]"
    assert sum(batch["sample_lens"]) == length, "sample_lens do not add up to sequence_length"
    assert len(batch["packed_text_ids"]) == len(batch["packed_text_indexes"])
    assert len(batch["packed_position_ids"]) == length
    if "padded_images" in batch:
        assert batch["padded_images"].shape[0] == len(batch["patchified_vae_latent_shapes"])
    if "packed_vit_tokens" in batch:
        assert batch["packed_vit_tokens"].shape[0] == int(batch["vit_token_seqlens"].sum())
    assert len(batch["batch_data_indexes"]) == len(batch["nested_attention_masks"])


def consume(loader: Any, steps: int, max_tokens: int) -> list[dict[str, Any]]:
    """Take ``steps`` batches, check each, and record where its samples came from."""
    dataset = loader.dataset.grouped_datasets[0]
    workers = loader.num_workers
    unit_lists: dict[int, list] = {}
    records = []
    for step, packed in enumerate(loader):
        if step == steps:
            break
        batch = packed.to_dict()
        check_batch(batch, max_tokens)
        samples = []
        for entry in batch["batch_data_indexes"]:
            worker = entry["worker_id"]
            if worker not in unit_lists:
                unit_lists[worker] = dataset.worker_units(worker, workers)
            position, row = entry["data_indexes"]
            path, row_group = unit_lists[worker][position]
            samples.append({"worker": worker, "index": [position, row], "unit": [Path(path).name, row_group]})
        records.append({"sequence_length": int(batch["sequence_length"]), "samples": samples})
    return records


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "WORLD_SIZE" in os.environ and not dist.is_initialized():
        dist.init_process_group("gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    world = dist.get_world_size() if dist.is_initialized() else 1

    t0 = time.perf_counter()
    loader = make_loader(args)
    records = consume(loader, args.steps, args.expected_tokens + 1024)
    seconds = time.perf_counter() - t0
    summary = {
        "rank": rank,
        "world_size": world,
        "batches": len(records),
        "samples": sum(len(r["samples"]) for r in records),
        "tokens": sum(r["sequence_length"] for r in records),
        "units": len({tuple(s["unit"]) for r in records for s in r["samples"]}),
        "seconds": round(seconds, 2),
    }
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"rank{rank}.json").write_text(json.dumps({**summary, "records": records}))
    summaries = [None] * world
    if dist.is_initialized():
        dist.all_gather_object(summaries, summary)
    else:
        summaries = [summary]
    if rank == 0:
        print("rank  batches  samples  tokens  units  seconds")
        for s in summaries:
            print(f"{s['rank']:<5} {s['batches']:<8} {s['samples']:<8} {s['tokens']:<7} {s['units']:<6} {s['seconds']}")
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
