"""Issue 40's speed goals, one row each, from the figures the benchmarks of one ``run_all.py`` run wrote.

Every ratio is the benchmark's own median of alternating pairs (editstream over the peer for rates,
editstream's time over ``tar -cf``'s for the converter); a goal whose benchmark did not run, or
failed, is a row that says so. Pure: the benchmarks' JSON in, markdown lines out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Row = tuple[str, str, str, "float | None", str, "bool | None"]
"""work, editstream's figure, what it is measured against, ratio, goal, holds."""

CAMERA = "camera JPEGs, 3100-4000 px"
RAW_GOAL = 2.0


def _litdata_rows(peers: Mapping[str, Any]) -> list[Row | str]:
    """Raw rows against LitData: the webdataset backend on the table's rows and on the large rows, the
    parquet backend on the table's rows."""
    lit = peers.get("peers", {}).get("litdata")
    out: list[Row | str] = []
    if lit is None or "raw/0" not in lit.get("ratios", {}):
        failed = f" (failed: {lit['error']})" if lit and lit.get("error") else ""
        out.append(f"raw rows, webdataset backend, against LitData{failed}")
    else:
        ratio = lit["ratios"]["raw/0"]
        out.append(
            (
                f"raw rows, {peers['rows']} edit rows of ~{peers.get('row_kb', 0):.0f} KB (`iter_rows`, webdataset backend)",
                f"{peers['editstream']['raw/0']:,.0f} rows/s",
                f"LitData `StreamingDataset`: {lit['rates']['raw/0']:,.0f}",
                ratio,
                f">= {RAW_GOAL:g}x",
                ratio >= RAW_GOAL,
            )
        )
    extras = {fig["name"]: fig for fig in peers.get("litdata_raw", [])}
    for name, work, missing in (
        (
            "large",
            "raw rows of ~{kb:.0f} KB, webdataset backend, glibc malloc thresholds fixed for both ({malloc})",
            "raw rows of ~256 KB against LitData",
        ),
        (
            "parquet",
            "raw rows, `iter_rows` parquet backend ({rows} rows of ~{kb:.0f} KB)",
            "raw rows, parquet backend, against LitData",
        ),
    ):
        fig = extras.get(name)
        if fig is None or "ratio" not in fig:
            out.append(missing + (f" (failed: {fig['error']})" if fig else ""))
            continue
        malloc = ", ".join(f"`{k}={v}`" for k, v in fig["malloc"].items())
        out.append(
            (
                work.format(kb=fig["row_kb"], rows=fig["rows"], malloc=malloc),
                f"{fig['editstream']:,.0f} rows/s",
                f"LitData `StreamingDataset`: {fig['litdata']:,.0f}",
                fig["ratio"],
                f">= {RAW_GOAL:g}x",
                fig["ratio"] >= RAW_GOAL,
            )
        )
    return out


def _parquet_row(raw: Mapping[str, Any]) -> Row:
    ratio = raw["cpu_ratios"]["parquet"]
    return (
        "raw rows, parquet backend (CPU time)",
        f"{raw['rows_per_s']['parquet']:,.0f} rows/s",
        f"pyarrow `iter_batches().to_pylist()`: {raw['rows_per_s']['pyarrow']:,.0f}",
        ratio,
        ">= 1.5x",
        ratio >= 1.5,
    )


def _convert_row(conv: Mapping[str, Any]) -> Row:
    sec = conv["median_seconds"]
    ours = next(k for k in sec if k.startswith("editstream convert"))
    tar = next(k for k in sec if "tar -cf" in k)
    ratio = conv["vs_tar"][ours]
    return (
        "convert, 2 workers (time)",
        f"{sec[ours]:.2f} s",
        f"`tar -cf`: {sec[tar]:.2f} s",
        ratio,
        "<= 1.2x",
        ratio <= 1.2,
    )


def _fast_decode_row(fast: Mapping[str, Any]) -> Row:
    fig = fast[CAMERA]
    ratio = fig["fast_vs_reference"]
    return (
        f"fast decode, {CAMERA}",
        f"PSNR mean {fig['mean_psnr']:.1f} dB, worst {fig['worst_psnr']:.1f} dB",
        "the reference's decode and transforms",
        ratio,
        ">= 2x, mean >= 38 dB",
        ratio >= 2 and fig["mean_psnr"] >= 38,
    )


def _s3_row(s3: Mapping[str, Any]) -> Row:
    key = next(k for k in s3["ratios"] if k.startswith("read-ahead") and abs(float(k.split("|")[1]) - 0.02) < 1e-9)
    ratio = s3["ratios"][key]
    return ("raw rows from S3, 20 ms added per request, under load", "-", "the same S3", ratio, ">= 0.9x", ratio >= 0.9)


def _handoff_row(handoff: Mapping[str, Any]) -> Row:
    row = next(
        r
        for r in handoff["rows"]
        if r["dtype"] == "uint8" and "not normalized" in r["row"] and r["row"].startswith("dataset")
    )
    share = row["share_of_limit"]
    return (
        f"{handoff['workers']} DataLoader workers, uint8 hand-off",
        f"{row['samples_per_s']:.1f} samples/s",
        f"decode limit ({handoff['workers']} processes)",
        share,
        ">= 0.95",
        share >= 0.95,
    )


def _one_process_row(loader: Mapping[str, Any]) -> Row:
    row = next(r for r in loader["rows"] if r["workers"] == 0 and r["row"].startswith("webdataset, local"))
    share = row["share_of_limit"]
    return (
        "decoded samples, 1 process (webdataset backend, local)",
        f"{row['samples_per_s']:.1f} samples/s",
        "decode limit (1 process)",
        share,
        ">= 0.97",
        share >= 0.97,
    )


MEMORY_COMMAND = "convert HUB WDS --from hqedit"
"""The command whose peak is judged: it reads the row group as the Hub wrote it (default page size)."""


def _memory_row(memory: Mapping[str, Any]) -> Row:
    peaks = memory["vmhwm_mb"][MEMORY_COMMAND]
    sizes = memory["sizes_mb"]
    growth = peaks[-1] / peaks[0]
    return (
        f"peak RSS reading one HQ-Edit-shaped row group (`{MEMORY_COMMAND}`), {sizes[0]}-{sizes[-1]} MB",
        " / ".join(f"{p:.0f}" for p in peaks) + " MB",
        "the same command on the smallest row group",
        growth,
        "flat in the row group (<= 1.1x)",
        growth <= 1.1,
    )


MAKERS: tuple[tuple[str, str, Callable[[Mapping[str, Any]], Row]], ...] = (
    ("raw_rows", "raw rows, parquet backend, against pyarrow", _parquet_row),
    ("convert", "convert against `tar -cf`", _convert_row),
    ("fast_decode", f"fast decode, {CAMERA}", _fast_decode_row),
    ("s3_latency", "S3 with 20 ms added per request", _s3_row),
    ("handoff", "uint8 hand-off", _handoff_row),
    ("loader", "decoded samples in one process", _one_process_row),
    ("hqedit_memory", "peak RSS of one HQ-Edit row group", _memory_row),
)


def goal_rows(figures: Mapping[str, Mapping[str, Any]]) -> list[Row | str]:
    """The issue's rows in its order; a bare string names a goal with no figure (its benchmark did not run)."""
    rows = _litdata_rows(figures.get("peers") or {})
    for bench, missing, make in MAKERS:
        data = figures.get(bench)
        try:
            rows.append(make(data) if data else missing)
        except (KeyError, StopIteration):
            rows.append(f"{missing}: its figure is missing from {bench}'s output")
    return rows


def goals_table(figures: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The markdown table of :func:`goal_rows` (``figures``: each benchmark's JSON, by benchmark name)."""
    lines = ["| work | editstream | against | ratio | goal | holds |", "|---|---:|---|---:|---|---|"]
    for row in goal_rows(figures):
        if isinstance(row, str):
            lines.append(f"| {row} | not measured in this run | - | - | - | - |")
            continue
        work, ours, peer, ratio, goal, holds = row
        verdict = "-" if holds is None else ("yes" if holds else "**no**")
        lines.append(f"| {work} | {ours} | {peer} | {'-' if ratio is None else f'{ratio:.2f}x'} | {goal} | {verdict} |")
    return lines
