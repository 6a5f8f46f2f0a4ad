#!/usr/bin/env python
"""OmniEdit (TIGER-Lab/OmniEdit-Filtered-1.2M) from its Hub layout to BAGEL edit chains, filtered by score.

Each OmniEdit row is one edit, [src_img, edited_img], with several phrasings of its instruction
(edited_prompt_list: they become instruction_list[0], from which training draws one at random)
and quality scores. ``--min-score`` and ``--task`` become the adapter's filter (the same
expression ``editstream convert --where`` takes); the scores and the task stay as extra columns.

    python converters/omniedit.py SRC DST [--min-score 8] [--task add --task swap] [--to parquet]

SRC is the dataset's data/ directory (in the HF cache its files are symlinks into blobs/: fine).
"""

from __future__ import annotations

import argparse
import json
import sys

from editstream.adapters import run_adapter


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="the dataset's data/ directory (the *.parquet files)")
    ap.add_argument("dst", help="output directory (shards, or BAGEL parquet with --to parquet)")
    ap.add_argument("--min-score", type=float, default=None, help="keep rows with o_score >= this (0-10)")
    ap.add_argument("--task", action="append", default=[], help="keep only this task (repeatable), e.g. add, swap")
    ap.add_argument("--to", choices=["webdataset", "parquet"], default="webdataset")
    ap.add_argument("--workers", type=int, default=None, help="shard conversion processes (default: CPU count)")
    return ap.parse_args(argv)


def where_expression(min_score: float | None, tasks: list[str]) -> str | None:
    """The filter for ``--min-score`` and ``--task``, in the adapters' ``where`` syntax (None: keep all)."""
    parts = []
    if min_score is not None:
        parts.append(f"o_score >= {min_score}")
    if tasks:
        parts.append("(" + " or ".join(f"task == {json.dumps(t)}" for t in tasks) + ")")
    return " and ".join(parts) or None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    where = where_expression(args.min_score, args.task)
    options = {"workers": args.workers} if args.to == "webdataset" else {}
    progress = sys.stderr.isatty()
    result = run_adapter(args.src, args.dst, "omniedit", to=args.to, where=where, progress=progress, **options)
    summary = {k: v for k, v in result["adapt"].items() if k != "drops"}  # drops: see adapt_report.json
    print(json.dumps({"where": where, **summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
