"""The tables ``benchmarks/peers.py`` prints and the summary it writes as JSON (pure: figures in, lines out)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

RAW_GOAL = 2.0  # raw rows >= 2x the fastest peer
PREPARE_GOAL = 3.0  # preparation >= 3x faster than each peer's
LIMIT_GOAL = 0.95  # decoded samples within 5 % of the decode limit
COLUMNS = ("raw/0", "decoded/0", "decoded/2")


def pair_ratio_median(pairs: Sequence[tuple[float, float]]) -> float:
    """The median over pairs of ``first / second``: the figure every ratio in the table is."""
    if not pairs:
        raise ValueError("no pairs to take a median of")
    return float(statistics.median(a / b for a, b in pairs))


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _rate(value: float | None, digits: int = 0) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:,.{digits}f}"


def _verdict(holds: bool) -> str:
    return "yes" if holds else "**no**"


def own_figures(results: Sequence[Any]) -> dict[str, float | None]:
    """editstream's medians over every run it made beside any peer: prepare seconds and each rate."""
    figures: dict[str, float | None] = {"prepare": _median([ours for r in results for _, ours in r.prepare])}
    for key in COLUMNS:
        figures[key] = _median([ours for r in results for ours, _ in r.rates.get(key, [])])
    return figures


def peer_figures(result: Any) -> dict[str, Any]:
    """A peer's medians and the medians of its pair ratios (editstream over the peer, >1: editstream faster)."""
    out: dict[str, Any] = {"error": result.error, "rates": {}, "ratios": {}}
    if result.prepare:
        out["prepare_s"] = _median([theirs for theirs, _ in result.prepare])
        out["prepare_ratio"] = pair_ratio_median(result.prepare)
    for key, pairs in result.rates.items():
        out["rates"][key] = _median([theirs for _, theirs in pairs])
        out["ratios"][key] = pair_ratio_median(pairs)
    return out


def _peer_row(result: Any, fig: dict[str, Any]) -> str:
    peer = result.peer
    prep = "-" if peer.prepare is None else "not measured"
    if "prepare_s" in fig:
        prep = f"{fig['prepare_s']:.2f} s ({fig['prepare_ratio']:.2f}x)"
    cells = [prep]
    for key in COLUMNS:
        rate, ratio = fig["rates"].get(key), fig["ratios"].get(key)
        cells.append("-" if rate is None else f"{_rate(rate, 0 if key == 'raw/0' else 1)} ({ratio:.2f}x)")
    how = f"{peer.label}, {peer.prepare}" if peer.prepare else f"{peer.label}, editstream's shards as they are"
    if result.error:
        how += f"; **failed**: {result.error.replace('|', '/')}"
    return f"| {how} | {' | '.join(cells)} |"


def _goal(goal: str, ratio: float, figure: str, target: float, peer: str) -> dict[str, Any]:
    return dict(goal=goal, ratio=ratio, figure=figure, target=f">= {target:g}x", peer=peer, holds=ratio >= target)


def goals(figs: dict[str, dict[str, Any]], shares: dict[int, float]) -> list[dict[str, Any]]:
    """The issue's goals with their figures: raw rows over the fastest peer, preparation over each, decode share."""
    out: list[dict[str, Any]] = []
    raw = {name: f for name, f in figs.items() if "raw/0" in f["rates"]}
    if raw:
        fastest = max(raw, key=lambda n: raw[n]["rates"]["raw/0"])
        ratio = raw[fastest]["ratios"]["raw/0"]
        out.append(
            _goal(f"raw rows >= {RAW_GOAL:g}x the fastest peer ({fastest})", ratio, f"{ratio:.2f}x", RAW_GOAL, fastest)
        )
    for name, f in figs.items():
        if "prepare_ratio" in f:
            ratio = f["prepare_ratio"]
            goal = f"preparation >= {PREPARE_GOAL:g}x faster than {name}'s"
            out.append(_goal(goal, ratio, f"{ratio:.2f}x", PREPARE_GOAL, name))
    for workers, share in sorted(shares.items()):
        if not math.isnan(share):
            where = "1 process" if workers == 0 else f"{workers} DataLoader workers"
            goal = f"decoded samples within 5 % of the decode limit, {where}"
            out.append(_goal(goal, share, f"{share:.2f} of the limit", LIMIT_GOAL, "decode limit"))
    return out


def row_kb(data: Any) -> float:
    """KB of images a row of ``data`` holds (the bytes every tool delivers, the instructions aside)."""
    return float(data.image_bytes / max(data.rows, 1) / 1024)


def extra_figures(extras: Sequence[Any]) -> list[dict[str, Any]]:
    """The raw-rows figures against LitData beside the table: medians of each side and of the pair ratios."""
    out = []
    for extra in extras:
        fig: dict[str, Any] = dict(name=extra.name, work=extra.work, rows=extra.data.rows, row_kb=row_kb(extra.data))
        fig.update(malloc=extra.malloc, error=extra.error)
        if extra.pairs:
            fig["editstream"] = _median([a for a, _ in extra.pairs])
            fig["litdata"] = _median([b for _, b in extra.pairs])
            fig["ratio"] = pair_ratio_median(extra.pairs)
        out.append(fig)
    return out


def _extra_lines(figs: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "Raw rows against LitData beside the table (the same rows and bytes delivered; LitData reads its "
        "`optimize` output of the same parquet; ratio: editstream over LitData):",
        "",
        "| editstream | rows, KB of images a row | glibc malloc | editstream rows/s | LitData rows/s | ratio |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for fig in figs:
        malloc = ", ".join(f"`{k}={v}`" for k, v in fig["malloc"].items()) or "defaults"
        cells = [fig["work"], f"{fig['rows']}, {fig['row_kb']:.0f} KB", malloc]
        if "ratio" in fig:
            cells += [_rate(fig["editstream"]), _rate(fig["litdata"]), f"{fig['ratio']:.2f}x"]
        else:
            cells += ["-", "-", f"**failed**: {str(fig['error']).replace('|', '/')}"]
        lines.append(f"| {' | '.join(cells)} |")
    return lines


def report(
    data: Any,
    results: Sequence[Any],
    own_runs: dict[str, Any],
    repeat: int,
    load: Sequence[float],
    others: float,
    extras: Sequence[Any] = (),
) -> tuple[list[str], dict[str, Any]]:
    """The markdown lines and the JSON summary of one run of ``peers.py``."""
    own = own_figures(results)
    figs = {r.peer.name: peer_figures(r) for r in results}
    limit_pairs = {int(k): v for k, v in own_runs["limit"].items()}
    limit = {w: _median([b for _, b in pairs]) for w, pairs in limit_pairs.items()}
    shares = {w: pair_ratio_median(pairs) if pairs else math.nan for w, pairs in limit_pairs.items()}
    lines = [
        f"Data: {data.rows} synthetic unified_edit rows, {data.images:,} images ({row_kb(data):.0f} KB of images a "
        f"row), {data.source_bytes / 1e6:.0f} MB of parquet; page cache warm; every run its own process; {repeat} alternating pair(s) per figure "
        f"(editstream, peer, ...), medians, ratios are medians of the pair ratios (editstream over the peer: "
        f"> 1 means editstream is faster). Load average before: {' / '.join(f'{x:.2f}' for x in load)}; "
        f"other processes used {100 * others:.0f} % of the CPUs during the runs.",
        "",
        "| tool, preparation | prepare (whole process) | raw rows/s | decoded samples/s, 1 process | decoded samples/s, 2 DataLoader workers |",
        "|---|---:|---:|---:|---:|",
        "| editstream, `editstream convert` (2 workers); raw rows from `editstream.iter_rows` | "
        + " | ".join(
            ["-" if own["prepare"] is None else f"{own['prepare']:.2f} s"]
            + [_rate(own[k], 0 if k == "raw/0" else 1) for k in COLUMNS]
        )
        + " |",
    ]
    lines += [_peer_row(r, figs[r.peer.name]) for r in results]
    lines.append(
        f"| decode limit: rows in memory, decoded in 1 / 2 processes | - | - | {_rate(limit.get(0), 1)} | {_rate(limit.get(2), 1)} |"
    )
    judged = goals(figs, shares)
    extra = extra_figures(extras)
    for fig in extra:
        if "ratio" in fig:
            goal = f"raw rows >= {RAW_GOAL:g}x LitData: {fig['work']}, {fig['row_kb']:.0f} KB rows"
            judged.append(_goal(goal, fig["ratio"], f"{fig['ratio']:.2f}x", RAW_GOAL, "litdata"))
    lines += _extra_lines(extra) if extra else []
    lines += ["", "| goal (issue 21) | figure | holds |", "|---|---:|---|"]
    lines += [f"| {g['goal']} | {g['figure']} | {_verdict(g['holds'])} |" for g in judged]
    lines += [
        "",
        "The training-dataset path beside its nearest peer equivalent (samples/s over one pass of rows):",
        "",
        "| path | 1 process | 2 DataLoader workers |",
        "|---|---:|---:|",
    ]
    ds = {int(k): v for k, v in own_runs["dataset"].items()}
    ours = [_median([a for a, _ in ds[w]]) for w in (0, 2)]
    theirs = [_median([b for _, b in ds[w]]) for w in (0, 2)]
    lines.append(
        "| editstream `UnifiedEditIterableDataset`, webdataset backend (decode, resize to 512 / 490 px, tokenize) | "
        f"{_rate(ours[0], 1)} | {_rate(ours[1], 1)} |"
    )
    ratios = [pair_ratio_median(ds[w]) if not math.isnan(ds[w][0][1]) else math.nan for w in (0, 2)]
    lines.append(
        '| stock webdataset `.decode("pilrgb")` (decode only: no resize, no tokens) | '
        + " | ".join(f"{_rate(t, 1)} ({r:.2f}x)" if not math.isnan(r) else "-" for t, r in zip(theirs, ratios))
        + " |"
    )
    summary = {
        "rows": data.rows,
        "images": data.images,
        "source_bytes": data.source_bytes,
        "row_kb": row_kb(data),
        "repeat": repeat,
        "editstream": own,
        "peers": figs,
        "limit": limit,
        "limit_shares": shares,
        "dataset": {"editstream": ours, "webdataset": theirs, "ratios": ratios},
        "goals": judged,
        "litdata_raw": extra,
        "others_cpu_share": others,
    }
    return lines, summary
