"""Benchmark: editstream beside the tools its users would pick instead, on the same edit data (not a test).

The same synthetic unified_edit parquet (``editstream.write_synthetic_dataset``) is prepared by
each tool the way its users do it, then read:

- editstream: ``editstream convert`` (2 workers), raw rows from ``editstream.iter_rows``;
- stock webdataset 1.0.2: ``WebDataset(urls)`` over editstream's shards (nothing to prepare);
- Megatron-Energon 7.4.1: ``energon prepare`` on a copy of editstream's shards (it indexes
  existing tars), then its loader (a ``CrudeWebdataset`` with a cooker, no decoder);
- LitData 0.2.76: ``litdata.optimize`` of the parquet rows (2 workers; the image list pickled),
  then ``StreamingDataset``;
- MosaicML streaming 0.13.0: ``MDSWriter`` of the parquet rows, then ``StreamingDataset``.

Each peer lives in its own venv under ``--venvs`` (created on first use and kept: ``torch==2.13.0``
first, then the pinned peer with torch held by a constraint, so nothing pulls a CUDA build). A
peer that cannot install or run is a table row with its error; the others still run.

Measures, each one process (``peers_tools.py``): preparation (the whole process, wall), raw
rows/s (one pass, no decode), decoded samples/s with one shared decode function
(``Image.open(io.BytesIO(b)).convert("RGB")`` on every image of a row) in 1 process and with 2
torch DataLoader workers, the decode limit (rows in memory, 1 and 2 processes), and editstream's
training dataset beside stock webdataset's own decoder. Runs alternate in pairs (editstream,
peer, editstream, peer ...) and the table shows medians of the pair ratios.

With LitData among the peers, two more raw-rows figures are judged against it (issue 29):
editstream's parquet backend (``iter_rows(src, backend="parquet")`` on the source parquet), and
both tools on rows of ~256 KB (images of ``LARGE_SIDES`` px a side, the same row counts, cached in
``OUT/peers/large``), both processes run with glibc's malloc thresholds fixed (``MALLOC``), so
neither pays for the allocator adjusting its mmap threshold mid-pass; ``--large-sides 0 0`` skips it.

    .venv/bin/python benchmarks/peers.py [--quick] [--repeat 3] [--rows-per-group 40] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from peers_report import pair_ratio_median, report  # noqa: E402, F401  (sibling modules of this script)
from quiet import CpuWatch  # noqa: E402

TORCH = "torch==2.13.0"
PILLOW = "pillow==13.0.0"
PYARROW = "pyarrow==26.0.1"
RUNNER = HERE / "peers_tools.py"
MEASURES = (("raw", 0), ("decoded", 0), ("decoded", 2))
LARGE_SIDES = (192, 1024)
"""Image sides (px) of the large rows: 268 KB of images a row of 2-5 images over the default 640 rows (the
synth's default 48-320 px: ~35 KB)."""
MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(64 << 20)}
"""glibc malloc thresholds both tools run with on the large rows: fixed, so no dynamic adjustment."""


@dataclass(frozen=True)
class Peer:
    name: str
    label: str
    requirements: tuple[str, ...]
    prepare: str | None
    """What its users run to prepare: ``None`` (reads editstream's shards as they are)."""
    module: str
    """What its users import: checked after every install, so a peer that cannot import is reported as such."""


PEERS = (
    Peer("webdataset", "stock webdataset 1.0.2", ("webdataset==1.0.2",), None, "webdataset"),
    Peer(
        "energon",
        "Megatron-Energon 7.4.1",
        ("megatron-energon==7.4.1",),
        "`energon prepare` (indexes the shards)",
        "megatron.energon",
    ),
    Peer("litdata", "LitData 0.2.76", ("litdata==0.2.76", PYARROW), "`litdata.optimize`, 2 workers", "litdata"),
    Peer("mosaic", "MosaicML streaming 0.13.0", ("mosaicml-streaming==0.13.0", PYARROW), "`MDSWriter`", "streaming"),
)


def one_line(text: str) -> str:
    """The last meaningful line of an error output (pip's and Python's put the cause last)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("WARNING")]
    return (lines[-1] if lines else "failed with no output")[:240]


class RunError(Exception):
    """A tool's process failed; the message is its one-line cause."""


# ---- environments -----------------------------------------------------------------------------
def ensure_venv(peer: Peer, root: Path) -> Path:
    """The venv of ``peer`` (kept while its pins are unchanged); a RunError with pip's cause otherwise."""
    venv = root / peer.name
    pins = " ".join((TORCH, PILLOW, *peer.requirements))
    marker = venv / "editstream-peer.txt"
    python = venv / "bin" / "python"
    if marker.exists() and marker.read_text() == pins and python.exists():
        return _imports(peer, python)
    shutil.rmtree(venv, ignore_errors=True)
    print(f"creating {venv} ({pins}) ...", file=sys.stderr, flush=True)
    _setup([sys.executable, "-m", "venv", str(venv)])
    _setup([str(python), "-m", "pip", "install", "-q", TORCH])
    (venv / "constraints.txt").write_text(TORCH + "\n")  # a peer cannot move torch to another build
    _setup([str(python), "-m", "pip", "install", "-q", "-c", str(venv / "constraints.txt"), PILLOW, *peer.requirements])
    marker.write_text(pins)
    return _imports(peer, python)


TORCHVISION_HINT = (
    " (PyPI's torchvision is built for the CUDA torch, which the benchmark never installs; "
    "with the CPU torch==2.13.0 its operators do not load)"
)


def _imports(peer: Peer, python: Path) -> Path:
    """``python`` once ``import peer.module`` works there; a RunError with the import's cause otherwise."""
    done = subprocess.run([str(python), "-c", f"import {peer.module}"], capture_output=True, text=True)
    if done.returncode != 0:
        hint = TORCHVISION_HINT if "torchvision" in done.stderr else ""
        raise RunError(f"`import {peer.module}` fails: {one_line(done.stderr)}{hint}")
    return python


def _setup(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RunError(f"install failed: {one_line(done.stderr or done.stdout)}")


# ---- data -------------------------------------------------------------------------------------
@dataclass
class Data:
    src: Path
    shards: Path
    rows: int = 0
    images: int = 0
    image_bytes: int = 0
    source_bytes: int = 0


def make_data(root: Path, files: int, groups: int, rows: int, sides: tuple[int, int] | None = None) -> Data:
    """The synthetic parquet (images of ``sides`` px, default the synth's own) and its editstream conversion,
    kept while the size is unchanged."""
    import editstream

    data = Data(root / "src", root / "shards")
    want: dict[str, Any] = {"files": files, "groups": groups, "rows": rows, "seed": 21}
    if sides is not None:
        want["sides"] = list(sides)
    stamp = json.dumps(want)
    marker = root / "data.json"
    if not (marker.exists() and marker.read_text() == stamp and (data.shards / "manifest.json").exists()):
        shutil.rmtree(data.src, ignore_errors=True)
        low, high = sides if sides is not None else (None, None)
        editstream.write_synthetic_dataset(
            str(data.src),
            num_files=files,
            row_groups_per_file=groups,
            rows_per_group=rows,
            seed=21,
            min_side=low,
            max_side=high,
            progress=False,
        )
        editstream.convert(str(data.src), str(data.shards), workers=2, overwrite=True, progress=False)
        marker.write_text(stamp)
    for raw in editstream.iter_rows(str(data.shards)):
        data.rows += 1
        data.images += len(raw.row["image_list"])
        data.image_bytes += sum(len(b) for b in raw.row["image_list"])
    data.source_bytes = sum(p.stat().st_size for p in data.src.glob("*.parquet"))
    return data


def warm(*dirs: Path) -> None:
    """Read every file once, so every run starts with the page cache warm."""
    for d in dirs:
        for p in d.rglob("*"):
            if p.is_file():
                p.read_bytes()


# ---- runs -------------------------------------------------------------------------------------
@dataclass
class Runner:
    data: Data
    work: Path
    pythons: dict[str, Path] = field(default_factory=dict)
    malloc: dict[str, str] = field(default_factory=dict)
    """Environment every process of this runner gets on top of ours (``MALLOC`` for the large rows)."""

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO / "src")
        env.setdefault("OMP_NUM_THREADS", "1")
        env.update(self.malloc)
        return env

    def measure(self, tool: str, measure: str, workers: int = 0, data: Path | None = None) -> dict[str, Any]:
        """One ``peers_tools.py`` process; its JSON line (``rows``, ``images``, ``seconds``)."""
        python = self.pythons.get(tool, Path(sys.executable))
        where = data if data is not None else self.data.shards
        cmd = [str(python), str(RUNNER), tool, measure, "--data", str(where), "--src", str(self.data.src)]
        done = subprocess.run([*cmd, "--workers", str(workers)], capture_output=True, text=True, env=self.env())
        if done.returncode != 0:
            raise RunError(one_line(done.stderr))
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        if measure != "prepare" and result["rows"] != self.data.rows:
            raise RunError(f"{tool} {measure} read {result['rows']} rows, the data has {self.data.rows}")
        return result

    def rate(self, tool: str, measure: str, workers: int, data: Path | None = None) -> float:
        result = self.measure(tool, measure, workers, data)
        return float(result["rows"] / result["seconds"])

    def timed(self, cmd: list[str]) -> float:
        """Wall seconds of a whole process (start-up and imports included, as a user waits for it)."""
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=self.env())
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            raise RunError(one_line(done.stderr or done.stdout))
        return seconds

    def prepare_editstream(self) -> float:
        dst = self.work / "prep-editstream"
        shutil.rmtree(dst, ignore_errors=True)
        cmd = [sys.executable, "-m", "editstream.cli", "convert", str(self.data.src), str(dst), "--workers", "2"]
        return self.timed([*cmd, "--no-progress", "--quiet"])

    def peer_data(self, peer: Peer) -> Path:
        return self.data.shards if peer.prepare is None else self.work / f"prep-{peer.name}"

    def prepare_peer(self, peer: Peer) -> float:
        dst = self.peer_data(peer)
        shutil.rmtree(dst, ignore_errors=True)
        python = self.pythons[peer.name]
        if peer.name == "energon":
            shutil.copytree(self.data.shards, dst)  # energon indexes shards in place: a fresh copy, not timed
            energon = str(python.with_name("energon"))
            flags = ["--non-interactive", "--split-ratio", "1,0,0", "--sample-type", "CrudeWebdataset"]
            return self.timed([energon, "prepare", str(dst), *flags, "--force-overwrite", "--num-workers", "2"])
        cmd = [str(python), str(RUNNER), peer.name, "prepare", "--data", str(dst), "--src", str(self.data.src)]
        return self.timed(cmd)

    def raw_pairs(self, ours: str, peer: Peer, repeat: int) -> list[tuple[float, float]]:
        """editstream's raw measure ``ours`` beside the peer's raw rows (its prepared data): ``repeat`` pairs."""
        data = self.peer_data(peer)
        pairs = []
        for _ in range(repeat):
            mine = self.rate("editstream", ours, 0)
            pairs.append((mine, self.rate(peer.name, "raw", 0, data)))
        return pairs


@dataclass
class PeerResult:
    peer: Peer
    error: str | None = None
    prepare: list[tuple[float, float]] = field(default_factory=list)
    """(peer seconds, editstream seconds) per pair."""
    rates: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """measure -> (editstream rate, peer rate) per pair."""


def run_peer(runner: Runner, peer: Peer, repeat: int) -> PeerResult:
    """Every measure of one peer, each in ``repeat`` alternating pairs; the first failure ends the peer."""
    result = PeerResult(peer)
    try:
        if peer.prepare is not None:
            for _ in range(repeat):
                ours = runner.prepare_editstream()
                result.prepare.append((runner.prepare_peer(peer), ours))
        data = runner.peer_data(peer)
        warm(data)
        for measure, workers in MEASURES:
            key = f"{measure}/{workers}"
            for _ in range(repeat):
                ours = runner.rate("editstream", measure, workers)
                result.rates.setdefault(key, []).append((ours, runner.rate(peer.name, measure, workers, data)))
            print(f"{peer.name} {key}: {result.rates[key]}", file=sys.stderr, flush=True)
    except RunError as exc:
        result.error = str(exc)
        print(f"{peer.name}: {exc}", file=sys.stderr, flush=True)
    return result


@dataclass
class Extra:
    """A raw-rows figure judged against LitData beside the table: editstream's ``measure`` over ``data``."""

    name: str
    """``parquet`` (the parquet backend on the table's rows) or ``large`` (the large rows)."""
    work: str
    measure: str
    data: Data
    malloc: dict[str, str] = field(default_factory=dict)
    pairs: list[tuple[float, float]] = field(default_factory=list)
    """(editstream rate, LitData rate) per pair."""
    error: str | None = None


def run_extras(runner: Runner, large: Data | None, repeat: int) -> list[Extra]:
    """The parquet backend on the table's rows, and both tools on the large rows with malloc's thresholds
    fixed (LitData prepares those once, untimed: the figure is the reading), each in alternating pairs."""
    peer = next(p for p in PEERS if p.name == "litdata")
    extras = [Extra("parquet", "`iter_rows`, parquet backend (the source parquet)", "raw-parquet", runner.data)]
    if large is not None:
        extras.append(Extra("large", "`iter_rows`, webdataset backend, large rows", "raw", large, MALLOC))
    for extra in extras:
        where = runner
        if extra.data is not runner.data:
            where = Runner(extra.data, extra.data.src.parent, runner.pythons, extra.malloc)
        try:
            if where is not runner:
                where.prepare_peer(peer)
                warm(extra.data.src, extra.data.shards, where.peer_data(peer))
            extra.pairs = where.raw_pairs(extra.measure, peer, repeat)
            print(f"litdata, {extra.work}: {extra.pairs}", file=sys.stderr, flush=True)
        except RunError as exc:
            extra.error = str(exc)
            print(f"litdata, {extra.work}: {exc}", file=sys.stderr, flush=True)
    return extras


def run_own(runner: Runner, repeat: int) -> dict[str, Any]:
    """The decode limit (1 and 2 processes), each beside editstream's decoded run in pairs, and the
    dataset path beside stock webdataset's own decoder."""
    own: dict[str, Any] = {"limit": {}, "dataset": {}}
    for workers in (0, 2):
        limit = []
        for _ in range(repeat):
            ours = runner.rate("editstream", "decoded", workers)
            limit.append((ours, runner.rate("editstream", "limit", workers)))
        own["limit"][workers] = limit
        pairs = []
        if "webdataset" in runner.pythons:
            for _ in range(repeat):
                ours = runner.rate("editstream", "dataset", workers)
                pairs.append((ours, runner.rate("webdataset", "dataset", workers)))
        else:
            pairs = [(runner.rate("editstream", "dataset", workers), float("nan")) for _ in range(repeat)]
        own["dataset"][workers] = pairs
    return own


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out", help="work directory (data cached in OUT/peers)")
    ap.add_argument("--venvs", default=str(REPO / "bench-out" / "peers-venvs"), help="the peers' venvs (kept)")
    ap.add_argument("--quick", action="store_true", help="2 files x 2 row groups x 8 rows, 1 pair")
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--row-groups", type=int, default=4)
    ap.add_argument("--rows-per-group", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3, help="alternating pairs per figure")
    ap.add_argument(
        "--large-sides",
        type=int,
        nargs=2,
        default=list(LARGE_SIDES),
        metavar=("MIN", "MAX"),
        help="image sides (px) of the large rows read against LitData (0 0: skip them)",
    )
    ap.add_argument("--only", nargs="+", default=None, help="only these peers")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.quick:
        args.files, args.row_groups, args.rows_per_group, args.repeat = 2, 2, 8, 1
    work = Path(args.out).resolve() / "peers"
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    data = make_data(work, args.files, args.row_groups, args.rows_per_group)
    runner = Runner(data, work)
    peers = [p for p in PEERS if args.only is None or p.name in args.only]
    large = None
    if any(p.name == "litdata" for p in peers) and min(args.large_sides) > 0:
        sides = (args.large_sides[0], args.large_sides[1])
        large = make_data(work / "large", args.files, args.row_groups, args.rows_per_group, sides)
    results: list[PeerResult] = []
    for peer in peers:
        try:
            runner.pythons[peer.name] = ensure_venv(peer, Path(args.venvs))
        except RunError as exc:
            results.append(PeerResult(peer, error=str(exc)))
    warm(data.src, data.shards)
    watch = CpuWatch()
    watch.start()
    t0 = time.perf_counter()
    for peer in peers:
        if peer.name in runner.pythons:
            results.append(run_peer(runner, peer, args.repeat))
    extras = run_extras(runner, large, args.repeat) if "litdata" in runner.pythons else []
    own = run_own(runner, args.repeat)
    seconds = time.perf_counter() - t0
    others = watch.stop()
    results.sort(key=lambda r: [p.name for p in PEERS].index(r.peer.name))
    share = others / (seconds * (os.cpu_count() or 1))
    lines, summary = report(data, results, own, args.repeat, load, share, extras)
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({**summary, "table": lines}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
