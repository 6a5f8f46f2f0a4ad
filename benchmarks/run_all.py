"""Every benchmark in one run, side by side: ``make bench`` (``--quick`` for a short run).

Runs, one after another, each as its own process (so none inherits another's imports,
threads or memory), and keeps the table each prints:

- ``convert.py``: ``editstream convert`` beside ``cp -r``, ``cp -r && sync``, ``tar -cf``,
  ``sha256sum`` and a hand-written pandas + ``webdataset.ShardWriter`` script;
- ``raw_rows.py``: raw rows/s of both backends beside stock webdataset and pyarrow ``to_pylist``;
- ``s3_latency.py``: raw rows from S3 with 0 / 20 / 50 ms added per request;
- ``loader.py``: decoded samples/s beside the decode limit, 0 and 2 DataLoader workers;
- ``memory.py``: peak RSS of one worker for a small and a big shard;
- ``soak.py``: a stream through injected S3 faults equals the fault-free stream;
- ``vlm_sft.py``: vlm_sft conversion and loading;
- ``handoff.py`` (float32 vs uint8 hand-off) and ``fast_decode.py`` (opt-in fast decode);
- ``peers.py``: editstream beside stock webdataset, Megatron-Energon, LitData and MosaicML
  streaming (each in a venv of its own, kept under ``bench-out/peers-venvs/``): preparation,
  raw rows/s and decoded samples/s;
- ``hqedit_memory.py``: peak RSS of reading one HQ-Edit-shaped row group, by its size.

It then prints issue 40's speed goals, one row each with its ratio and whether it holds
(``speed_goals.py``; the benchmarks they need: ``--only convert raw_rows s3_latency handoff
fast_decode peers --peers litdata``), and writes ``benchmarks/RESULTS.md``: the machine and date,
that table, a summary of the figures with their ratios to the peers and goals, and every benchmark's own table (a hand-written
``## Analysis`` section at the end of the file is kept). Synthetic data is built
on the first run and cached under ``bench-out/`` (``bench-out/quick/`` for ``--quick``), so a
first run also spends minutes generating images. A benchmark that fails is reported as failed
in the file and the others still run; the exit code is then 1.

    .venv/bin/python benchmarks/run_all.py [--quick] [--only convert raw_rows ...] [--peers litdata]
        [--venvs DIR] [--results FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from machine import describe  # noqa: E402  (sibling modules of this script)
from speed_goals import goals_table  # noqa: E402

REPO = HERE.parent
ANALYSIS_HEADING = "## Analysis"


@dataclass
class Bench:
    name: str
    script: str
    full: list[str]
    quick: list[str]
    json_flag: str | None = "--json"
    seconds: float = 0.0
    output: str = ""
    ok: bool = False
    data: dict[str, Any] = field(default_factory=dict)


def benches(out: str) -> list[Bench]:
    return [
        Bench("convert", "convert.py", ["--gb", "1.2", "--repeat", "3"], ["--gb", "0.25", "--repeat", "1"]),
        Bench("raw_rows", "raw_rows.py", ["--gb", "1.2", "--repeat", "3"], ["--gb", "0.25", "--repeat", "2"]),
        Bench(
            "s3_latency",
            "s3_latency.py",
            ["--gb", "1.2", "--files", "8"],
            ["--gb", "0.25", "--files", "2", "--pairs", "1"],
        ),
        Bench(
            "loader",
            "loader.py",
            ["--samples", "300", "--repeat", "2", "--max-wait", "60", "--results", ""],
            ["--samples", "60", "--warmup", "10", "--repeat", "1", "--max-wait", "0", "--results", ""],
        ),
        Bench(
            "memory",
            "memory.py",
            ["--big-mb", "512", "--md", f"{out}/MEMORY.md"],
            ["--small-mb", "32", "--big-mb", "128", "--md", f"{out}/MEMORY.md"],
            json_flag=None,
        ),
        Bench(
            "soak",
            "soak.py",
            ["--samples", "500", "--min-faults", "1000"],
            ["--samples", "60", "--min-faults", "50"],
            None,
        ),
        Bench(
            "vlm_sft",
            "vlm_sft.py",
            ["--lines", "1000", "--samples", "200", "--repeat", "1"],
            ["--lines", "200", "--samples", "60", "--repeat", "1"],
            None,
        ),
        Bench(
            "handoff",
            "handoff.py",
            ["--samples", "600", "--repeat", "3", "--max-wait", "600"],
            ["--samples", "60", "--warmup", "10", "--repeat", "1", "--max-wait", "0"],
        ),
        Bench(
            "fast_decode",
            "fast_decode.py",
            ["--pairs", "3", "--max-wait", "600"],
            ["--pairs", "1", "--scale", "0.3", "--max-wait", "0"],
        ),
        Bench("peers", "peers.py", ["--repeat", "3"], ["--quick"]),
        Bench("hqedit_memory", "hqedit_memory.py", ["--sizes", "100,200,400"], ["--sizes", "50,100"]),
    ]


def run(bench: Bench, quick: bool, out: Path) -> None:
    args = list(bench.quick if quick else bench.full)
    if bench.name in ("convert", "raw_rows", "s3_latency", "peers"):
        args += ["--out", str(out)]
    elif bench.name in ("loader", "memory", "vlm_sft", "fast_decode", "hqedit_memory"):
        args += ["--out", str(out / bench.name)]
    elif bench.name == "handoff":  # it shares the loader benchmark's cached data
        args += ["--out", str(out / "loader")]
    if quick and "--quick" in args and "--quick" not in _help(bench):
        args.remove("--quick")
    json_path = out / f"{bench.name}.json"
    if bench.json_flag:
        json_path.unlink(missing_ok=True)
        args += [bench.json_flag, str(json_path)]
    cmd = [sys.executable, str(HERE / bench.script), *args]
    print(f"\n=== {bench.name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True, env=_env())
    bench.seconds = time.perf_counter() - t0
    bench.output = done.stdout.strip()
    bench.ok = done.returncode == 0
    print(bench.output, flush=True)
    print(
        f"=== {bench.name}: {'ok' if bench.ok else f'FAILED (exit {done.returncode})'} in {bench.seconds:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    if bench.json_flag and json_path.exists():
        bench.data = json.loads(json_path.read_text())
    if bench.name == "memory" and (out / "memory" / "results.json").exists():
        bench.data = {"results": json.loads((out / "memory" / "results.json").read_text())}


def _help(bench: Bench) -> str:
    done = subprocess.run(
        [sys.executable, str(HERE / bench.script), "--help"], capture_output=True, text=True, env=_env()
    )
    return done.stdout


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(REPO / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def machine() -> str:
    return describe(("pyarrow", "PIL", "torch", "webdataset", "xxhash"))


def _fmt(x: float, digits: int = 2) -> str:
    return f"{x:,.{digits}f}"


Add = Callable[[str, str, str, "float | None", str, "bool | None"], None]


def _opt_in_rows(by_name: dict[str, Bench], add: Add) -> None:
    """The summary rows of the two opt-ins: uint8 hand-off and fast decode."""
    handoff = by_name.get("handoff")
    if handoff and handoff.data:
        for row in handoff.data["rows"]:
            if "DataLoader" not in row["row"]:
                continue
            goal = ">= 90%" if row["dtype"] == "uint8" and "not normalized" in row["row"] else "-"
            add(
                f"hand-off, {row['row']}, {row['dtype']}, {handoff.data['workers']} DataLoader workers",
                f"{row['samples_per_s']:.1f} samples/s",
                f"float32 decode limit ({handoff.data['workers']} processes)",
                row["share_of_limit"],
                goal,
                row["share_of_limit"] >= 0.9 if goal != "-" else None,
            )
    fast = by_name.get("fast_decode")
    if fast and fast.data:
        for images, fig in fast.data.items():
            # both ratios are measured against the reference's image work, run beside them
            vs_reference = fig.get("fast_vs_reference")
            if fig.get("mean_psnr") is None or vs_reference is None:
                continue
            # the goals: 1024-4000 px JPEG / PNG / WebP, and camera-size (3100-4000 px) JPEGs
            judged = images.startswith("mixed large") or images.endswith("3100-4000 px")
            add(
                f"fast decode, {images}",
                f"{fig['speedup']:.2f}x the exact path; PSNR mean {fig['mean_psnr']:.1f} dB, "
                f"worst {fig['worst_psnr']:.1f} dB",
                "the reference's decode and transforms",
                vs_reference,
                ">= 2x, mean >= 38 dB" if judged else "-",
                vs_reference >= 2 and fig["mean_psnr"] >= 38 if judged else None,
            )
            exact = fig.get("exact_vs_reference")
            if exact is not None and images.startswith("mixed large"):
                add(f"exact decode, {images}", "bit-identical tensors", "the same", exact, ">= 1.2x", exact >= 1.2)


def _peer_rows(by_name: dict[str, Bench], add: Add) -> None:
    """The summary rows of the peer benchmark: its goals (raw rows, preparation, decode share) as it judged them."""
    peers = by_name.get("peers")
    if not peers or not peers.data:
        return
    failed = [name for name, fig in peers.data["peers"].items() if fig.get("error")]
    for goal in peers.data["goals"]:
        add(
            f"against the peers: {goal['goal']}",
            goal["figure"],
            goal["peer"],
            goal["ratio"],
            goal["target"],
            goal["holds"],
        )
    if failed:
        add("against the peers: peers that failed to install or run", ", ".join(failed), "-", None, "-", None)


def _convert_rows(by_name: dict[str, Bench], add: Add) -> None:
    """The summary rows of the converter benchmark: its time over `tar -cf`'s, and beside the other references."""
    conv = by_name.get("convert")
    if conv and conv.data:
        sec, vs_tar = conv.data["median_seconds"], conv.data["vs_tar"]
        ours = next(k for k in sec if k.startswith("editstream convert"))
        tar = "reference: tar -cf of the source files"
        add(
            "convert 1.2 GB edit parquet, 2 workers" if "1.2" in " ".join(conv.full) else "convert, 2 workers",
            f"{sec[ours]:.2f} s",
            f"`tar -cf`: {sec[tar]:.2f} s",
            vs_tar[ours],
            "<= 1.2x tar",
            vs_tar[ours] <= 1.2,
        )
        cpu_vs_tar = conv.data.get("cpu_vs_tar", {}).get(ours)
        if cpu_vs_tar is not None:
            add("convert, CPU time (same run)", "-", "`tar -cf`", cpu_vs_tar, "-", None)
        for peer in sec:
            if peer not in (ours, tar):
                label = peer.removeprefix("floor: ").removeprefix("reference: ")
                add(
                    "convert (same run)",
                    f"{sec[ours]:.2f} s",
                    f"{label}: {sec[peer]:.2f} s",
                    vs_tar[ours] / vs_tar[peer],
                    "-",
                    None,
                )


def summary(by_name: dict[str, Bench]) -> list[str]:
    """The issue's rows: what editstream does, the peer, the ratio, the goal, whether it holds."""
    rows: list[tuple[str, str, str, str, str, str]] = []

    def add(work: str, ours: str, peer: str, ratio: float | None, goal: str, holds: bool | None) -> None:
        verdict = "-" if holds is None else ("yes" if holds else "**no**")
        rows.append((work, ours, peer, "-" if ratio is None else f"{ratio:.2f}x", goal, verdict))

    raw = by_name.get("raw_rows")
    if raw and raw.data:
        r, cpu_ratio = raw.data["rows_per_s"], raw.data["cpu_ratios"]
        for name, work, peer, label, goal in (
            ("webdataset", "WebDataset backend", "stock webdataset", "stock webdataset 1.0.2 `WebDataset(urls)`", 4),
            ("parquet", "parquet backend", "pyarrow", "pyarrow `iter_batches().to_pylist()`", 1.5),
        ):
            add(
                f"raw rows, {work}, no image decode (CPU time, median of pair ratios)",
                f"{_fmt(r[name], 0)} rows/s",
                f"{label}: {_fmt(r[peer], 0)}",
                cpu_ratio[name],
                f">= {goal:g}x",
                cpu_ratio[name] >= goal,
            )
    s3 = by_name.get("s3_latency")
    if s3 and s3.data:
        ratios = s3.data["ratios"]
        for key, value in ratios.items():
            mode, latency = key.split("|")
            if float(latency) == 0:
                continue
            goal = ">= 0.9x" if mode.startswith("read-ahead") and abs(float(latency) - 0.02) < 1e-9 else "-"
            holds = value >= 0.9 if goal != "-" else None
            add(
                f"raw rows from S3, {float(latency) * 1000:.0f} ms added per request, {mode}",
                f"{value:.2f} of the same S3 without added latency",
                "-",
                value,
                goal,
                holds,
            )
    loader = by_name.get("loader")
    if loader and loader.data:
        table = {(row["row"], row["workers"]): row for row in loader.data["rows"]}
        for (name, workers), row in table.items():
            if name == "decode limit":
                continue
            add(
                f"decoded edit samples, {name}, {workers} DataLoader workers",
                f"{row['samples_per_s']:.1f} samples/s",
                f"decode limit ({workers} processes)",
                row["share_of_limit"],
                "-",
                None,
            )
    _opt_in_rows(by_name, add)
    _peer_rows(by_name, add)
    _convert_rows(by_name, add)
    lines = ["| work | editstream | peer | ratio | goal | holds |", "|---|---:|---|---:|---|---|"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    return lines


def write_results(path: Path, items: list[Bench], command: str, started: dt.datetime, seconds: float) -> None:
    by_name = {b.name: b for b in items}
    parts = [
        "# Benchmark results",
        "",
        f"Command: `{command}`, {seconds / 60:.1f} minutes in all.",
        f"Date: {started:%Y-%m-%d %H:%M %Z}. Machine: {machine()}.",
        f"Load average before the run (1 / 5 / 15 min): {_load_before}; other jobs on this shared VM make "
        "single figures drift by 10-20 %, the ratios less (peers run beside ours in alternating pairs).",
        "",
        "## Issue 29's speed goals",
        "",
        "Each ratio is its benchmark's median of alternating pairs (its section below says how it was measured).",
        "",
        *goals_table({b.name: b.data for b in items if b.ok}),
        "",
        "## Summary",
        "",
        "Ratios are editstream over the peer for rates, editstream's time over the peer's for the "
        "conversion. Loader rows compare with the decode limit (`parse_row` on rows already in memory).",
        "",
        *summary(by_name),
        "",
    ]
    for bench in items:
        status = "" if bench.ok else " - **FAILED**"
        parts += [f"## {bench.name} (`benchmarks/{bench.script}`, {bench.seconds:.0f} s){status}", "", bench.output, ""]
    analysis = ""
    if path.exists():  # a hand-written analysis at the end of an earlier file is kept
        old = path.read_text()
        if ANALYSIS_HEADING in old:
            analysis = "\n" + old[old.index(ANALYSIS_HEADING) :]
    path.write_text("\n".join(parts).rstrip() + "\n" + analysis)


_load_before = ""


def main() -> int:
    global _load_before
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small data, one repeat: a few minutes once data is cached")
    ap.add_argument("--only", nargs="+", default=None, help="run only these benchmarks")
    ap.add_argument("--peers", nargs="+", default=None, help="peers.py: only these peers (e.g. litdata)")
    ap.add_argument("--venvs", default=None, help="peers.py: the peers' venvs (default bench-out/peers-venvs)")
    ap.add_argument("--results", default=str(HERE / "RESULTS.md"))
    ap.add_argument("--out", default=None, help="work directory (default bench-out, or bench-out/quick)")
    args = ap.parse_args()
    out = Path(args.out or ("bench-out/quick" if args.quick else "bench-out")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    one, five, fifteen = os.getloadavg()
    _load_before = f"{one:.2f} / {five:.2f} / {fifteen:.2f}"
    started = dt.datetime.now().astimezone()
    t0 = time.perf_counter()
    items = [b for b in benches(str(out)) if args.only is None or b.name in args.only]
    for bench in items:
        extra = (["--only", *args.peers] if args.peers else []) + (["--venvs", args.venvs] if args.venvs else [])
        if bench.name == "peers":
            bench.full, bench.quick = [*bench.full, *extra], [*bench.quick, *extra]
    for bench in items:
        run(bench, args.quick, out)
    command = " ".join(["benchmarks/run_all.py", *sys.argv[1:]])
    write_results(Path(args.results), items, command, started, time.perf_counter() - t0)
    print("\n" + "\n".join(goals_table({b.name: b.data for b in items if b.ok})), flush=True)
    print(f"\nwrote {args.results}", file=sys.stderr)
    return 0 if all(b.ok for b in items) else 1


if __name__ == "__main__":
    sys.exit(main())
