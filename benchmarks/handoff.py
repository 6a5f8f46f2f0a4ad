"""Benchmark: the opt-in uint8 hand-off against float32 with DataLoader workers (not a test).

Uses the synthetic ``unified_edit`` dataset of ``benchmarks/loader.py`` (built once and cached
under ``--out``, shared with that script: 1024 rows, 256-768 px images in five formats) and its
transforms (VAE ``ImageTransform(512, 256, 16)``, ViT ``ImageTransform(490, 224, 14)``), parquet
backend, and times with ``--workers`` DataLoader workers (default 2, on this machine's cores):

- the *decode limit*: ``parse_row`` on rows already in memory, split as the DataLoader splits
  them, in ``--workers`` forked processes (``loader.py``'s ``run_limit_parallel``), float32 and
  uint8 (uint8 skips the float32 step, so its limit is a little higher; the goal is stated
  against the float32 one, which produces what the trainer consumes);
- the dataset in ``DataLoader(ds, batch_size=None, num_workers=W)``: float32; uint8 with every
  sample normalized in the main process (``normalize_uint8`` per image, the CPU path of
  ``normalize_batch``); uint8 not normalized (what the trainer's process pays when the GPU
  normalizes after the copy);
- the *packing limit*: the same ``PackedDataset`` iterated in ``--workers`` forked processes,
  each as its DataLoader worker would (parse_row plus packing, nothing handed over);
- ``PackedDataset`` (``BagelDatasetConfig(..., use_flex=True, image_dtype=...).build``, the
  default 32768-token budget) in
  ``DataLoader(packer, batch_size=1, num_workers=W, collate_fn=collate_fn)``: float32; uint8 with
  ``editstream.normalize_batch`` in the main process; uint8 not normalized. samples/s counts
  packed samples.

Every run discards ``--warmup`` samples, times ``--samples``; ``--repeat`` rounds (rows take
turns). The machine is shared: before each run the script waits until other processes use under
``--max-others`` of the CPUs, measures what they used during the run (``/proc/stat`` minus this
benchmark's own CPU time); the table shows each row's median run and, as its shares of the
limits, the medians of same-round ratios (rows take turns, so a round's runs share the
machine's state). "main process CPU" is the trainer-side process's CPU time over the run's
wall time: what the hand-off and normalisation cost the process that would drive the GPU. "exact" compares the first samples / batches of each uint8 row, normalized, with the
float32 row's, tensor by tensor (``torch.equal``); "same samples" compares indexes, token
counts and shapes of every timed sample with the float32 decode limit's.

    .venv/bin/python benchmarks/handoff.py [--samples 600] [--repeat 3] [--workers 2] [--out bench-out/loader]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loader as lb  # the loader benchmark's data, decode limit and machine report
import quiet  # waiting for an idle machine, others' CPU during a run

CHECKED = 6  # samples / batches of each uint8 row compared bit for bit with the float32 row


@dataclass
class Result:
    """One timed run: seconds, samples, image bytes handed over, fingerprints and the first outputs."""

    seconds: float
    samples: int
    image_bytes: int
    fingerprints: dict[int, list[Any]]
    head: list[Any]
    others: float = 0.0  # share of the machine's CPUs other processes used during the run
    main_cpu: float = 0.0  # the main process's CPU seconds over the run's wall seconds

    @property
    def rate(self) -> float:
        return self.samples / self.seconds


def make_dataset(data_dir: str, num_workers: int, image_dtype: str) -> Any:
    """``loader.py``'s benchmarked dataset with ``image_dtype``."""
    from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset

    return UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(512, 256, 16),
        ByteTokenizer(),
        ImageTransform(490, 224, 14),
        data_dir_list=[data_dir],
        num_used_data=[lb.BUILD["num_files"]],
        local_rank=0,
        world_size=1,
        num_workers=num_workers,
        image_dtype=image_dtype,
    )


def make_packer(data_dir: str, num_workers: int, image_dtype: str) -> Any:
    """A PackedDataset over the same data (one group, BAGEL's default token budget, flex attention)."""
    from editstream import BagelDatasetConfig, ByteTokenizer

    config = BagelDatasetConfig(
        grouped_datasets={
            "unified_edit": {
                "dataset_names": ["bench"],
                "weight": 1.0,
                "num_used_data": [lb.BUILD["num_files"]],
                "image_transform_args": {"max_image_size": 512, "min_image_size": 256, "image_stride": 16},
                "vit_image_transform_args": {"max_image_size": 490, "min_image_size": 224, "image_stride": 14},
            }
        },
        dataset_info={"unified_edit": {"bench": {"data_dir": data_dir}}},
        use_flex=True,  # as flex-attention training runs: no dense per-sample masks to build
        image_dtype=image_dtype,
    )
    tok = ByteTokenizer()
    return config.build(
        tokenizer=tok,
        special_tokens=tok.special_token_ids(),
        rank=0,
        world_size=1,
        num_workers=num_workers,
        global_seed=0,
    )


def normalize_sample(sample: dict) -> dict:
    """A uint8 sample's images normalized as ``normalize_batch`` does on CPU (float32 samples unchanged)."""
    from editstream.packing.normalize import normalize_uint8

    norms = sample.pop("image_normalization", None)
    if norms is not None:
        sample["image_tensor_list"] = [
            normalize_uint8(t, n, 0) if n is not None else t for t, n in zip(sample["image_tensor_list"], norms)
        ]
    return sample


def image_nbytes(item: dict) -> int:
    """Bytes of image tensors in a sample or a packed batch, as handed from a worker."""
    if "image_tensor_list" in item:
        return sum(t.numel() * t.element_size() for t in item["image_tensor_list"])
    return sum(item[k].numel() * item[k].element_size() for k in ("padded_images", "packed_vit_tokens") if k in item)


def run_dataset(make: Callable[[], Any], workers: int, samples: int, warmup: int, post: Callable | None) -> Result:
    """Samples of a fresh dataset through a DataLoader, ``post`` (normalization) applied in this process."""
    random.seed(0)
    loader = torch.utils.data.DataLoader(make(), batch_size=None, num_workers=workers, worker_init_fn=lb._seed_worker)
    it = iter(loader)
    head = []
    for _ in range(warmup):
        sample = next(it)
        if len(head) < CHECKED:
            head.append(post(sample) if post else sample)
    prints: dict[int, list[Any]] = {}
    nbytes = 0
    t0 = time.perf_counter()
    for _ in range(samples):
        sample = next(it)
        nbytes += image_nbytes(sample)
        if post is not None:
            sample = post(sample)
        fp = lb.fingerprint(sample)
        prints.setdefault(fp[0], []).append(fp)
    seconds = time.perf_counter() - t0
    it._shutdown_workers()
    return Result(seconds, samples, nbytes, prints, head)


def run_packed(make: Callable[[], Any], workers: int, samples: int, warmup: int, post: Callable | None) -> Result:
    """Packed batches of a fresh PackedDataset through a DataLoader until ``samples`` samples came out."""
    from editstream import collate_fn

    loader = torch.utils.data.DataLoader(make(), batch_size=1, num_workers=workers, collate_fn=collate_fn)
    it: Iterator[dict] = iter(loader)
    head = []
    seen = 0
    while seen < warmup:
        batch = next(it)
        seen += len(batch["batch_data_indexes"])
        if len(head) < CHECKED:
            head.append(post(batch) if post else batch)
    done = nbytes = 0
    t0 = time.perf_counter()
    while done < samples:
        batch = next(it)
        nbytes += image_nbytes(batch)
        if post is not None:
            batch = post(batch)
        done += len(batch["batch_data_indexes"])
    seconds = time.perf_counter() - t0
    it._shutdown_workers()  # type: ignore[attr-defined]
    return Result(seconds, done, nbytes, {}, head)


def run_limit(ds: Any, rows: Any, workers: int, samples: int, warmup: int) -> Result:
    """``loader.py``'s decode limit: ``parse_row`` on in-memory rows in ``workers`` forked processes."""
    run = lb.run_limit_parallel(ds, rows, workers, samples, warmup)
    return Result(run.seconds, samples, 0, run.fingerprints, [])


def _packing_process(
    make: Callable[[], Any], worker: int, workers: int, quota: tuple, start: Any, results: Any
) -> None:
    """One process of the packing limit: the PackedDataset as DataLoader worker ``worker`` would run it."""
    from torch.utils.data._utils import worker as worker_module

    torch.set_num_threads(1)  # what a DataLoader worker does
    packer = make()
    worker_module._worker_info = worker_module.WorkerInfo(id=worker, num_workers=workers, seed=0, dataset=packer)
    it = iter(packer)
    seen = 0
    while seen < quota[1]:
        seen += len(next(it)["batch_data_indexes"])
    results.put(("ready", worker))
    start.wait()
    done = 0
    while done < quota[0]:
        done += len(next(it)["batch_data_indexes"])
    results.put(("done", worker, time.perf_counter(), done))


def run_packing_limit(make: Callable[[], Any], workers: int, samples: int, warmup: int) -> Result:
    """The packing limit: PackedDataset batches (parse_row plus packing, no hand-off) in ``workers``
    forked processes, each reading what its DataLoader worker would; wall time from releasing the
    warmed-up processes to the last one done."""
    quota = (samples // workers, warmup // workers)
    t0, done = lb.run_released_together(
        _packing_process, lambda w, start, results: (make, w, workers, quota, start, results), workers
    )
    return Result(max(d[2] for d in done) - t0, sum(d[3] for d in done), 0, {}, [])


def equal(a: Any, b: Any) -> bool:
    """Recursive equality; tensors by dtype, shape and ``torch.equal``."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out/loader", help="work directory (the dataset is cached here)")
    ap.add_argument("--samples", type=int, default=600, help="timed samples per run")
    ap.add_argument("--warmup", type=int, default=20, help="samples read before the clock starts")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row; the table shows medians")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers (and decode-limit processes)")
    ap.add_argument(
        "--max-others", type=float, default=0.05, help="before each run, wait until others use under this CPU share"
    )
    ap.add_argument("--max-wait", type=float, default=3600, help="total time to wait for an idle machine (s)")
    ap.add_argument("--json", default=None, help="also write the rows here (for run_all.py's summary)")
    args = ap.parse_args()
    if args.samples < 1 or args.repeat < 1 or args.warmup < CHECKED or args.workers < 1:
        ap.error(f"--samples, --repeat, --workers must be >= 1 and --warmup >= {CHECKED}")
    if args.samples % args.workers or args.warmup % args.workers:
        ap.error("--samples and --warmup must be multiples of --workers")
    return args


def main() -> int:
    args = parse_args()
    src, _ = lb.build_data(Path(args.out).resolve())
    url, w = str(src), args.workers
    rows = lb.load_rows(make_dataset(url, 0, "float32"))
    limits = {dtype: make_dataset(url, 0, dtype) for dtype in ("float32", "uint8")}

    def normalize(batch: dict) -> dict:
        from editstream import normalize_batch

        return normalize_batch(batch)

    def ds(dtype: str) -> Callable[[], Any]:
        return lambda: make_dataset(url, w, dtype)

    def pk(dtype: str) -> Callable[[], Any]:
        return lambda: make_packer(url, w, dtype)

    n = (args.samples, args.warmup)
    limit_row, ds_row = "decode limit (parse_row, forked processes)", "dataset -> DataLoader"
    plan: list[tuple[str, str, Callable[[], Result]]] = [
        (limit_row, "float32", lambda: run_limit(limits["float32"], rows, w, *n)),
        (limit_row, "uint8", lambda: run_limit(limits["uint8"], rows, w, *n)),
        (ds_row, "float32", lambda: run_dataset(ds("float32"), w, *n, None)),
        (f"{ds_row}, normalized in main", "uint8", lambda: run_dataset(ds("uint8"), w, *n, normalize_sample)),
        (f"{ds_row}, not normalized (GPU would)", "uint8", lambda: run_dataset(ds("uint8"), w, *n, None)),
        ("packing limit (PackedDataset, forked processes)", "float32", lambda: run_packing_limit(pk("float32"), w, *n)),
        ("packing limit (PackedDataset, forked processes)", "uint8", lambda: run_packing_limit(pk("uint8"), w, *n)),
        ("PackedDataset -> DataLoader", "float32", lambda: run_packed(pk("float32"), w, *n, None)),
        (
            "PackedDataset -> DataLoader, normalize_batch in main",
            "uint8",
            lambda: run_packed(pk("uint8"), w, *n, normalize),
        ),
        (
            "PackedDataset -> DataLoader, not normalized (GPU would)",
            "uint8",
            lambda: run_packed(pk("uint8"), w, *n, None),
        ),
    ]
    exact_against = {3: 2, 8: 7}  # uint8 row, normalized -> the float32 row it must equal
    packing_limit = 5  # the row the packed rows are also compared with

    deadline = time.monotonic() + args.max_wait
    load_before, started = lb.load_text(), dt.datetime.now().astimezone()
    runs: dict[int, list[Result]] = {i: [] for i in range(len(plan))}
    for attempt in range(args.repeat):
        for i, (name, dtype, run) in enumerate(plan):
            quiet.wait_until_idle(args.max_others, deadline)
            watch = quiet.CpuWatch()
            watch.start()
            t0, cpu0 = time.monotonic(), time.process_time()
            result = run()
            wall = time.monotonic() - t0
            result.others = watch.stop() / (wall * (os.cpu_count() or 1))
            result.main_cpu = (time.process_time() - cpu0) / wall
            runs[i].append(result)
            print(
                f"[{attempt + 1}/{args.repeat}] {name}, {dtype}: {result.rate:.1f} samples/s, "
                f"others used {100 * result.others:.0f}% of the CPUs",
                file=sys.stderr,
            )
    # per row, the run of median rate; shares are medians of same-round ratios to the limits
    best = {i: sorted(results, key=lambda r: r.rate)[len(results) // 2] for i, results in runs.items()}

    def share(i: int, against: int) -> float:
        return statistics.median(r.rate / base.rate for r, base in zip(runs[i], runs[against]))

    lines = [
        f"Date: {started:%Y-%m-%d %H:%M %Z}. Machine: {lb.machine()}.",
        f"Load average (1 / 5 / 15 min): {load_before} before, {lb.load_text()} after. {w} DataLoader workers.",
        "",
        "| row | images | samples | seconds | samples/s | % of float32 decode limit | % of float32 packing limit "
        "| image MB handed over per sample | same samples | exact | main process CPU | others' CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|",
    ]
    table = []
    for i, (name, dtype, _) in enumerate(plan):
        r = best[i]
        rate = r.samples / r.seconds
        of_limit = share(i, 0)
        table.append({"row": name, "dtype": dtype, "samples_per_s": rate, "share_of_limit": of_limit})
        mb = f"{r.image_bytes / r.samples / 1e6:.2f}" if r.image_bytes else "-"
        same = "-" if not r.fingerprints or i == 0 else ("yes" if r.fingerprints == best[0].fingerprints else "NO")
        exact = "-"
        if i in exact_against:
            exact = "yes" if equal(best[exact_against[i]].head, r.head) else "NO"
        label = f"**{name}**" if i == 0 else name
        packed = f"{100 * share(i, packing_limit):.0f}%" if i >= packing_limit else "-"
        lines.append(
            f"| {label} | {dtype} | {r.samples} | {r.seconds:.2f} | {rate:.1f} | {100 * of_limit:.0f}% | {packed} "
            f"| {mb} | {same} | {exact} | {100 * r.main_cpu:.0f}% | {100 * r.others:.0f}% |"
        )
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"workers": w, "rows": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
