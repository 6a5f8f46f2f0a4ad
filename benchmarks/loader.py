"""Benchmark: samples/s of the data loader beside the image-decode limit (not a test).

Builds (once, cached under ``--out``) a synthetic ``unified_edit`` parquet dataset and its
WebDataset conversion, then times ``--samples`` samples of ``UnifiedEditIterableDataset``
(VAE ``ImageTransform(512, 256, 16)``, ViT ``ImageTransform(490, 224, 14)``, ``ByteTokenizer``):

1. *decode limit*: ``parse_row`` called directly on rows already in memory (read beforehand
   with ``parquet_rows.read_row_group_rows``) in exactly the order the loader reads them, so
   only decoding, transforms and tokenizing are timed: the upper bound for any backend;
2. the parquet backend, local disk;
3. the WebDataset backend, local disk;
4. the WebDataset backend from S3 (a ``moto_server`` this script starts on loopback);

each with no DataLoader (the dataset iterated in this process), then again with
``torch.utils.data.DataLoader(ds, batch_size=None, num_workers=W)`` beside a W-process
decode limit (the same rows split by worker, parsed by W forked processes) and the decode
limit run inside DataLoader workers (in-memory rows, so it adds only the cost of handing
samples to the main process).

Every measurement discards the first ``--warmup`` samples' time (the clock starts after
them), times the next ``--samples``, and is repeated ``--repeat`` times, the rows of the
table taking turns; the table shows the best run. ``random.seed(0)`` precedes each run (a
DataLoader worker / limit process ``w`` is seeded with ``random.seed(w)``), so every row
parses the same samples; the script checks that from their indexes, shapes and token counts.

    .venv/bin/python benchmarks/loader.py [--samples 600] [--repeat 3] [--workers 2]
                                          [--out bench-out/loader] [--results benchmarks/LOADER.md]
    .venv/bin/python benchmarks/loader.py --profile parquet     # cProfile one in-process run
    .venv/bin/python benchmarks/loader.py --profile parquet --profile-workers 2   # main + workers
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import itertools
import json
import multiprocessing as mp
import os
import pstats
import random
import resource
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from editstream.sandbox.s3server import LocalS3Server

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

REPO = Path(__file__).resolve().parent.parent
DEFAULT_RESULTS = REPO / "benchmarks" / "LOADER.md"
BUILD = {"num_files": 8, "row_groups_per_file": 4, "rows_per_group": 32, "seed": 0, "min_side": 256, "max_side": 768}
ANALYSIS_HEADING = "## Analysis"
S3_BUCKET = "loader-bench"
LIMIT = "decode limit"
HANDOFF = "decode limit through the DataLoader"
PARQUET, WDS, S3 = "parquet, local disk", "webdataset, local disk", "webdataset, S3 (moto)"
PROFILE_CHOICES = {"limit": LIMIT, "handoff": HANDOFF, "parquet": PARQUET, "webdataset": WDS, "s3": S3}

Fingerprint = tuple  # (worker, data_indexes, num_tokens, image shapes, text lengths)


# ---------------------------------------------------------------------------------------
# Data


def dir_bytes(path: Path) -> int:
    """Total size of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build_data(root: Path) -> tuple[Path, Path]:
    """The synthetic parquet source and its conversion under ``root`` (rebuilt only when BUILD changes)."""
    from editstream import convert, write_synthetic_dataset

    src, wds, marker = root / "src", root / "wds", root / "build.json"
    if marker.exists() and json.loads(marker.read_text()) == BUILD and (wds / "manifest.json").exists():
        return src, wds
    for path in (src, wds):
        if path.exists():
            shutil.rmtree(path)
    marker.unlink(missing_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    print(f"building the dataset under {root} ...", file=sys.stderr)
    write_synthetic_dataset(str(src), schema="unified_edit", **BUILD)
    convert(str(src), str(wds), workers=2, progress=False)
    marker.write_text(json.dumps(BUILD))
    return src, wds


def make_dataset(data_dir: str, backend: str, num_workers: int, storage_options: dict | None = None) -> Any:
    """The benchmarked dataset: one rank, the project's standard transforms, default epoch seed."""
    from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset

    return UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(512, 256, 16),
        ByteTokenizer(),
        ImageTransform(490, 224, 14),
        data_dir_list=[data_dir],
        num_used_data=[BUILD["num_files"]],
        local_rank=0,
        world_size=1,
        num_workers=num_workers,
        backend=backend,
        storage_options=storage_options,
    )


def load_rows(ds: Any) -> dict[Any, list[dict]]:
    """Every row of every unit of ``ds``, read into memory up front (for the decode limit)."""
    from editstream.io.parquet import read_row_group_rows

    return {unit: read_row_group_rows(unit[0], unit[1]) for unit in sorted(set(ds.data_paths_per_rank))}


def worker_rows(ds: Any, rows: dict[Any, list[dict]], worker: int, num_workers: int) -> Iterator[tuple[list, dict]]:
    """``(data_indexes, row)`` in the order DataLoader worker ``worker`` of ``num_workers`` reads them, forever."""
    from editstream.data.rows import Row

    units = ds.worker_units(worker, num_workers)
    while True:
        for position, unit in enumerate(units):
            for index, row in enumerate(rows[unit]):
                yield [position, index], Row(row)


def fingerprint(sample: dict) -> Fingerprint:
    """What identifies a parsed sample cheaply: where it came from, its token count and tensor shapes."""
    idx = sample["data_indexes"]
    return (
        idx["worker_id"],
        tuple(idx["data_indexes"]),
        sample["num_tokens"],
        tuple(tuple(t.shape) for t in sample["image_tensor_list"]),
        tuple(len(ids) for ids in sample["text_ids_list"]),
    )


# ---------------------------------------------------------------------------------------
# Measurements


@dataclass
class Run:
    """One timed run: seconds for the timed samples, rows dropped, and each worker's fingerprints."""

    seconds: float
    drops: int
    fingerprints: dict[int, list[Fingerprint]] = field(default_factory=dict)
    server_cpu: float | None = None  # CPU seconds the S3 server used during the run, when there is one


def parsed(ds: Any, rows: Iterator[tuple[list, dict]], worker: int) -> Iterator[dict | None]:
    """``parse_row`` over ``rows`` as the loader applies it: a sample per row, None for a dropped row."""
    for index, row in rows:
        try:
            data = ds.parse_row(row)
        except Exception:  # noqa: BLE001 - a bad row is a drop, as in the loader
            yield None
            continue
        if not data:
            yield None
            continue
        data["data_indexes"] = {"data_indexes": index, "worker_id": worker, "dataset_name": ds.dataset_name}
        yield data


def parse_rows(samples: Iterator[dict | None], count: int, fps: list[Fingerprint]) -> int:
    """Take samples from ``samples`` until ``count`` came out; returns the rows dropped on the way."""
    drops = 0
    made = 0
    while made < count:
        data = next(samples)
        if data is None:
            drops += 1
            continue
        fps.append(fingerprint(data))
        made += 1
    return drops


class InMemoryRows(torch.utils.data.IterableDataset):
    """The decode limit as a DataLoader dataset: in-memory rows parsed in each worker, in the
    backend's order, so a DataLoader over it costs decoding plus handing samples to the main process."""

    def __init__(self, ds: Any, rows: dict[Any, list[dict]]) -> None:
        self.ds = ds
        self.rows = rows

    def __iter__(self) -> Iterator[dict]:
        info = torch.utils.data.get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info is not None else (0, 0)
        for data in parsed(self.ds, worker_rows(self.ds, self.rows, worker, num_workers), worker):
            if data is not None:
                yield data


def run_limit(ds: Any, rows: dict[Any, list[dict]], samples: int, warmup: int) -> Run:
    """The decode limit in this process: parse the in-memory rows in the loader's order."""
    random.seed(0)
    stream = parsed(ds, worker_rows(ds, rows, 0, 0), 0)
    fps: list[Fingerprint] = []
    drops = parse_rows(stream, warmup, fps)
    t0 = time.perf_counter()
    drops += parse_rows(stream, samples, fps)
    return Run(time.perf_counter() - t0, drops, {0: fps[warmup:]})


def _limit_process(
    ds: Any,
    rows: dict[Any, list[dict]],
    worker: int,
    num_workers: int,
    samples: int,
    warmup: int,
    start: Any,
    results: Any,
) -> None:
    """One process of the multi-process decode limit (forked, so rows are inherited, not copied)."""
    torch.set_num_threads(1)  # what a DataLoader worker does
    random.seed(worker)
    stream = parsed(ds, worker_rows(ds, rows, worker, num_workers), worker)
    fps: list[Fingerprint] = []
    drops = parse_rows(stream, warmup, fps)
    results.put(("ready", worker))
    start.wait()
    drops += parse_rows(stream, samples, fps)
    results.put(("done", worker, time.perf_counter(), drops, fps[warmup:]))


def run_released_together(target: Callable, args: Callable[[int, Any, Any], tuple], workers: int) -> tuple[float, list]:
    """Fork ``workers`` processes running ``target(*args(w, start, results))``; once each has put
    ``("ready", ...)`` on ``results``, release them all through ``start`` and collect one
    ``("done", worker, finish_time, ...)`` message each. Returns the release time and the messages."""
    ctx = mp.get_context("fork")
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=args(w, start, results)) for w in range(workers)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            message = results.get(timeout=600)
            assert message[0] == "ready", message
        t0 = time.perf_counter()
        start.set()
        done = [results.get(timeout=600) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    return t0, done


def run_limit_parallel(ds: Any, rows: dict[Any, list[dict]], num_workers: int, samples: int, warmup: int) -> Run:
    """The decode limit with ``num_workers`` processes, each parsing its DataLoader worker's rows.

    The clock runs from releasing all (already warmed-up) processes to the last one finishing.
    """

    def args(w: int, start: Any, results: Any) -> tuple:
        return (ds, rows, w, num_workers, samples // num_workers, warmup // num_workers, start, results)

    t0, done = run_released_together(_limit_process, args, num_workers)
    return Run(max(d[2] for d in done) - t0, sum(d[3] for d in done), {d[1]: d[4] for d in done})


def _seed_worker(worker_id: int) -> None:
    random.seed(worker_id)


def count_drops(fps: dict[int, list[Fingerprint]], unit_rows: dict[int, list[int]]) -> int:
    """Rows skipped between consecutive samples of each worker (drops seen from the main process).

    ``unit_rows[w]`` holds the row count of each of worker ``w``'s units, in its reading order.
    """
    drops = 0
    for worker, prints in fps.items():
        sizes = unit_rows[worker]
        offsets = [0, *itertools.accumulate(sizes)]
        total = offsets[-1]
        expected = 0
        for fp in prints:
            unit, row = fp[1]
            linear = offsets[unit] + row
            drops += (linear - expected) % total
            expected = (linear + 1) % total
    return drops


def run_loader(
    make: Callable[[], Any], num_workers: int, samples: int, warmup: int, unit_rows: dict[int, list[int]]
) -> Run:
    """Time a fresh dataset from ``make()``, iterated directly (0 workers) or through a DataLoader."""
    ds = make()
    random.seed(0)
    if num_workers == 0:
        source: Iterable = ds
    else:
        source = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=num_workers, worker_init_fn=_seed_worker)
    it = iter(source)
    fps: dict[int, list[Fingerprint]] = {}
    for _ in range(warmup):
        fp = fingerprint(next(it))
        fps.setdefault(fp[0], []).append(fp)
    t0 = time.perf_counter()
    timed: dict[int, list[Fingerprint]] = {}
    for _ in range(samples):
        fp = fingerprint(next(it))
        timed.setdefault(fp[0], []).append(fp)
    seconds = time.perf_counter() - t0
    del it
    for worker, prints in timed.items():
        fps.setdefault(worker, []).extend(prints)
    drops = count_drops(fps, unit_rows)
    return Run(seconds, drops, timed)


# ---------------------------------------------------------------------------------------
# S3


class MotoServer(LocalS3Server):
    """The shared local S3 server, plus the CPU time it used (it competes for the same cores)."""

    def upload(self, local_dir: Path, prefix: str) -> str:  # type: ignore[override]
        """Copy ``local_dir`` to ``s3://S3_BUCKET/prefix`` and return that URL."""
        return super().upload(local_dir, f"s3://{S3_BUCKET}/{prefix}")

    def cpu_seconds(self) -> float:
        """User + system CPU time the server process has used so far (from /proc)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------
# Report


def machine() -> str:
    """CPU model, core count, memory and library versions of this machine."""
    return describe(("torch", "PIL", "pyarrow"))


def load_text() -> str:
    """The 1, 5 and 15-minute load averages, formatted."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def wait_for_quiet(max_load: float, max_wait: float) -> None:
    """Wait (up to ``max_wait`` s) until the 1-minute load average is below ``max_load``."""
    deadline = time.monotonic() + max_wait
    while os.getloadavg()[0] >= max_load and time.monotonic() < deadline:
        print(f"load {load_text()} >= {max_load}: waiting ...", file=sys.stderr)
        time.sleep(15)


def table(results: list[tuple[str, int, Run]], samples: int, same: dict[tuple[str, int], bool]) -> str:
    """Markdown table of the best runs, each compared with the decode limit at its worker count."""
    limits = {workers: run.seconds for name, workers, run in results if name == LIMIT}
    lines = [
        "| row | workers | samples | seconds | samples/s | % of decode limit | drops | same samples |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, workers, run in results:
        rate = samples / run.seconds
        limit = limits.get(workers)
        share = f"{100 * limit / run.seconds:.0f}%" if limit else "-"
        label = f"**{name}**" if name == LIMIT else name
        check = "-" if name == LIMIT else ("yes" if same[(name, workers)] else "NO")
        lines.append(
            f"| {label} | {workers} | {samples} | {run.seconds:.2f} | {rate:.1f} | {share} | {run.drops} | {check} |"
        )
    return "\n".join(lines)


def write_results(path: Path, body: str) -> None:
    """Write ``body`` to ``path``, keeping a hand-written analysis section of an earlier file."""
    analysis = ""
    if path.exists():
        old = path.read_text()
        if ANALYSIS_HEADING in old:
            analysis = "\n" + old[old.index(ANALYSIS_HEADING) :]
    path.write_text(body + analysis)


# ---------------------------------------------------------------------------------------


def print_stats(title: str, stats: pstats.Stats, lines: int = 25) -> None:
    """Print ``stats`` sorted by own time and by cumulative time."""
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        stats.stream = buf
        stats.strip_dirs().sort_stats(key).print_stats(lines)
        print(f"---- {title}, by {key}\n{buf.getvalue()}")


def profile_in_process(name: str, run: Callable[[], Run], out: Path) -> None:
    """Run one 0-worker measurement under cProfile and print where the time goes."""
    prof = cProfile.Profile()
    prof.enable()
    result = run()
    prof.disable()
    prof.dump_stats(str(out))
    print(f"{name}, 0 workers: {result.seconds:.2f} s profiled (warm-up included in the profile; stats in {out})")
    print_stats(name, pstats.Stats(prof))


class ProfiledDataset(torch.utils.data.IterableDataset):
    """Wraps a dataset so each DataLoader worker profiles its own iteration (main thread only)
    and writes the stats after its first ``quota`` samples."""

    def __init__(self, ds: Any, quota: int, prefix: Path) -> None:
        self.ds = ds
        self.quota = quota
        self.prefix = prefix

    def __iter__(self) -> Iterator[dict]:
        info = torch.utils.data.get_worker_info()
        worker = info.id if info is not None else 0
        prof = cProfile.Profile()
        it = iter(self.ds)
        made = 0
        while True:
            prof.enable()
            sample = next(it)
            prof.disable()
            made += 1
            if made == self.quota:
                prof.dump_stats(f"{self.prefix}-worker{worker}.prof")
            yield sample


def handoff_cost(ds: Any, rows: dict[Any, list[dict]], count: int) -> str:
    """What handing ``count`` parsed samples to another process costs here: pickling them the
    way a DataLoader worker's queue does (tensors moved into shared memory) versus parsing them."""
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing

    torch.set_num_threads(1)  # as in a DataLoader worker
    random.seed(0)
    stream = parsed(ds, worker_rows(ds, rows, 0, 0), 0)
    t0 = time.perf_counter()
    samples = [s for s in itertools.islice(stream, count) if s is not None]
    parse_ms = (time.perf_counter() - t0) / len(samples) * 1e3
    mb = sum(t.numel() * t.element_size() for s in samples for t in s["image_tensor_list"]) / len(samples) / 1e6
    tensors = sum(len(s["image_tensor_list"]) for s in samples) / len(samples)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    blobs = [ForkingPickler.dumps(s) for s in samples]
    pickle_ms = (time.perf_counter() - t0) / len(samples) * 1e3
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    del blobs
    n = len(samples)
    return (
        f"per sample: parse_row {parse_ms:.1f} ms; {tensors:.1f} tensors, {mb:.1f} MB; ForkingPickler.dumps "
        f"(tensors copied into new shared memory, strategy {torch.multiprocessing.get_sharing_strategy()}) "
        f"{pickle_ms:.1f} ms (user {(r1.ru_utime - r0.ru_utime) / n * 1e3:.1f} ms, "
        f"sys {(r1.ru_stime - r0.ru_stime) / n * 1e3:.1f} ms, "
        f"{(r1.ru_minflt - r0.ru_minflt) / n:.0f} page faults)"
    )


def profile_dataloader(
    name: str, make: Callable[[], Any], num_workers: int, samples: int, warmup: int, out: Path
) -> None:
    """One DataLoader run with the main process and every worker profiled, plus CPU time per process."""
    for old in out.parent.glob(f"{out.name}-worker*.prof"):
        old.unlink()
    ds = ProfiledDataset(make(), (warmup + samples) // num_workers, out)
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=num_workers, worker_init_fn=_seed_worker)
    it = iter(loader)
    for _ in range(warmup):
        next(it)
    prof = cProfile.Profile()
    main0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(samples):
        next(it)
    prof.disable()
    seconds = time.perf_counter() - t0
    main1 = resource.getrusage(resource.RUSAGE_SELF)
    it._shutdown_workers()  # reap the workers so their CPU time is counted
    del it
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{name}, {num_workers} workers: {seconds:.2f} s for {samples} samples (profiled)")
    print(
        f"CPU: main process (timed part) user {main1.ru_utime - main0.ru_utime:.2f} s, sys "
        f"{main1.ru_stime - main0.ru_stime:.2f} s; workers (whole life: warm-up, timed part, prefetch) "
        f"user {children1.ru_utime - children0.ru_utime:.2f} s, sys {children1.ru_stime - children0.ru_stime:.2f} s"
    )
    print_stats("main process", pstats.Stats(prof))
    files = sorted(out.parent.glob(f"{out.name}-worker*.prof"))
    if files:
        print_stats(
            f"workers' main threads ({len(files)} merged; the queue's pickling thread is not profiled)",
            pstats.Stats(*map(str, files)),
        )


def parse_args() -> argparse.Namespace:
    """The command line, checked."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out/loader", help="work directory (the dataset is cached here)")
    ap.add_argument("--samples", type=int, default=600, help="timed samples per run")
    ap.add_argument("--warmup", type=int, default=20, help="samples read before the clock starts")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row; the table shows the fastest")
    ap.add_argument(
        "--workers", type=int, default=2, help="DataLoader workers (and limit processes) for the second half"
    )
    ap.add_argument("--results", default=str(DEFAULT_RESULTS), help="markdown file to write ('' for none)")
    ap.add_argument("--json", default=None, help="also write the best runs as JSON to this file")
    ap.add_argument("--max-load", type=float, default=1.5, help="wait until the 1-minute load is below this")
    ap.add_argument("--max-wait", type=float, default=600, help="give up waiting for a quiet machine after this (s)")
    ap.add_argument(
        "--profile",
        choices=sorted(PROFILE_CHOICES),
        default=None,
        help="instead of the table, cProfile one run of this row",
    )
    ap.add_argument(
        "--profile-workers",
        type=int,
        default=0,
        help="with --profile: 0 (in this process) or the DataLoader workers to profile",
    )
    args = ap.parse_args()
    if args.samples < 1 or args.repeat < 1 or args.warmup < 0 or args.workers < 1 or args.profile_workers < 0:
        ap.error("--samples, --repeat and --workers must be >= 1, --warmup and --profile-workers >= 0")
    for nw in {args.workers, args.profile_workers} - {0}:
        if args.samples % nw or args.warmup % nw:
            ap.error(f"--samples and --warmup must be multiples of the worker count ({nw})")
    return args


def run_plan(
    plan: list[tuple[str, int]], measurement: Callable[[str, int], Callable[[], Run]], s3: Any, args: Any
) -> dict[tuple[str, int], Run]:
    """Every row of the plan ``args.repeat`` times in turn; the fastest run of each row."""
    best: dict[tuple[str, int], Run] = {}
    for attempt in range(args.repeat):
        for name, nw in plan:
            server0 = s3.cpu_seconds()
            run = measurement(name, nw)()
            if name == S3:
                run.server_cpu = s3.cpu_seconds() - server0
            key = (name, nw)
            if key not in best or run.seconds < best[key].seconds:
                best[key] = run
            print(
                f"[{attempt + 1}/{args.repeat}] {name}, {nw} workers: {run.seconds:.2f} s "
                f"({args.samples / run.seconds:.1f} samples/s), drops {run.drops}, load {load_text()}",
                file=sys.stderr,
            )
    return best


def main() -> int:
    """Build the data, time every row (or profile one), print the table and write the results file."""
    args = parse_args()
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

    root = Path(args.out).resolve()
    src, wds = build_data(root)
    src_url, wds_url = str(src), str(wds)
    sizes = (dir_bytes(src), dir_bytes(wds))

    base = make_dataset(src_url, "parquet", 0)
    rows = load_rows(base)
    num_rows = sum(len(r) for r in rows.values())
    worker_counts = (0, args.workers)
    unit_rows = {
        nw: {w: [len(rows[u]) for u in base.worker_units(w, nw)] for w in range(max(nw, 1))} for nw in worker_counts
    }

    wait_for_quiet(args.max_load, args.max_wait if args.profile is None else 0)
    load_before = load_text()
    started = dt.datetime.now().astimezone()
    with MotoServer() as s3:
        s3_url = s3.upload(wds, "wds")
        sources = {
            PARQUET: (src_url, "parquet", None),
            WDS: (wds_url, "webdataset", None),
            S3: (s3_url, "webdataset", s3.storage_options),
        }

        def dataset(name: str, nw: int) -> Callable[[], Any]:
            if name == HANDOFF:
                return lambda: InMemoryRows(base, rows)
            url, backend, opts = sources[name]
            return lambda: make_dataset(url, backend, nw, opts)

        def measurement(name: str, nw: int) -> Callable[[], Run]:
            if name == LIMIT:
                if nw == 0:
                    return lambda: run_limit(base, rows, args.samples, args.warmup)
                return lambda: run_limit_parallel(base, rows, nw, args.samples, args.warmup)
            return lambda: run_loader(dataset(name, nw), nw, args.samples, args.warmup, unit_rows[nw])

        if args.profile is not None:
            name, nw = PROFILE_CHOICES[args.profile], args.profile_workers
            out = root / f"profile-{args.profile}-{nw}w"
            if nw == 0:
                measurement(name, 0)()  # once unprofiled, so caches and imports are warm
                profile_in_process(name, measurement(name, 0), out.with_suffix(".prof"))
            elif name == LIMIT:
                raise SystemExit("--profile limit runs in this process only (--profile-workers 0)")
            else:
                profile_dataloader(name, dataset(name, nw), nw, args.samples, args.warmup, out)
                print(handoff_cost(base, rows, 100))
            return 0

        plan = [(name, nw) for nw in worker_counts for name in (LIMIT, *((HANDOFF,) if nw else ()), PARQUET, WDS, S3)]
        best = run_plan(plan, measurement, s3, args)
    load_after = load_text()

    results = [(name, nw, best[(name, nw)]) for name, nw in plan]
    same = {(name, nw): run.fingerprints == best[(LIMIT, nw)].fingerprints for name, nw, run in results}
    md_table = table(results, args.samples, same)
    print(md_table)
    if args.json:
        limits = {nw: run.seconds for name, nw, run in results if name == LIMIT}
        rows_json = [
            {
                "row": name,
                "workers": nw,
                "seconds": run.seconds,
                "samples_per_s": args.samples / run.seconds,
                "share_of_limit": limits[nw] / run.seconds,
                "same_samples": name == LIMIT or same[(name, nw)],
            }
            for name, nw, run in results
        ]
        Path(args.json).write_text(json.dumps({"samples": args.samples, "rows": rows_json, "table": md_table}))
    if not args.results:
        return 0

    moto_cpu = (
        "During the best S3 runs moto used "
        + " and ".join(
            f"{run.server_cpu:.2f} s of CPU with {nw} workers ({100 * run.server_cpu / run.seconds:.0f}% of a core)"
            for name, nw, run in results
            if name == S3 and run.server_cpu is not None
        )
        + "."
    )
    command = ".venv/bin/python benchmarks/loader.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    w = args.workers
    body = f"""# Loader benchmark

Command: `{command.strip()}`
Date: {started:%Y-%m-%d %H:%M %Z}. Machine: {machine()}.
Load average (1 / 5 / 15 min): {load_before} before, {load_after} after.

Data: `write_synthetic_dataset(out, schema="unified_edit", {", ".join(f"{k}={v}" for k, v in BUILD.items())})`,
{num_rows} rows in {len(rows)} row groups (units), {sizes[0] / 1e6:.0f} MB of parquet, converted with
`editstream.convert(src, dst, workers=2)` to {sizes[1] / 1e6:.0f} MB of shards (one per row group).
Local files are in the page cache. Transforms: VAE `ImageTransform(512, 256, 16)`, ViT
`ImageTransform(490, 224, 14)`, `ByteTokenizer()`; one rank, epoch seed 42.

Each run reads {args.warmup} samples untimed (warm-up: the clock starts after them), then times
{args.samples}; best of {args.repeat} runs per row (rows take turns). samples/s = {args.samples} / seconds;
"% of decode limit" compares with the decode limit at the same worker count.

| | |
|---|---|
| decode limit, 0 workers | `parse_row` on rows read into memory beforehand (`read_row_group_rows`), in the loader's order, this process |
| decode limit, {w} workers | the same rows split as the DataLoader splits them, parsed by {w} forked processes (torch 1 thread each); wall time from releasing the warmed-up processes to the last one done |
| decode limit through the DataLoader, {w} workers | the same in-memory rows parsed inside `DataLoader(InMemoryRows(...), batch_size=None, num_workers={w})` workers: the decode limit plus handing every sample to the main process, no storage reads |
| backends, 0 workers | the dataset iterated in this process |
| backends, {w} workers | `torch.utils.data.DataLoader(ds, batch_size=None, num_workers={w})`, dataset built with `num_workers={w}`; worker start-up falls in the warm-up |
| S3 | a `moto_server` started by the script on loopback, the converted root uploaded with s3fs, read with `storage_options={{"endpoint_url": ..., "key": "x", "secret": "x"}}` |

`random.seed(0)` before each run; DataLoader worker `w` and limit process `w` run `random.seed(w)`.
"same samples" compares every timed sample's worker, `data_indexes`, `num_tokens`, tensor shapes
and text lengths with the decode limit's at the same worker count. drops = rows the parser dropped
(read from the skipped `data_indexes` for DataLoader runs); the synthetic data has no bad rows.

{md_table}

**S3 numbers are a lower bound.** moto is a Python HTTP server (Werkzeug, a thread per request)
on the same {os.cpu_count()} cores: every ranged GET costs moto CPU time that the loader's decode
work competes with, and it answers more slowly than a real S3 or MinIO endpoint would. {moto_cpu}
A real object store on other machines costs this machine no CPU but adds network latency, which the
read-ahead (several 4 MiB ranged reads in flight along the unit order, within 64 MiB per process) is there to hide.

The load average counts the benchmark's own processes (up to {w} workers + the main process during
the run), so the "before" figure is the one that shows other jobs on the machine.
"""
    write_results(Path(args.results), body)
    print(f"wrote {args.results}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
