"""``editstream synth``: a synthetic source dataset of any registered kind to try everything on."""

from __future__ import annotations

import json
from typing import Any

import click

from .app import SETTINGS, main
from .options import KindChoice


def _first_synth_kind() -> str:
    """The default ``--schema``: the first registered kind that can write synthetic data."""
    from ..sandbox.synth import synth_kinds

    return synth_kinds()[0].name


@main.command()
@click.argument("out")
@click.option(
    "--schema",
    type=KindChoice(lambda kind: kind.synth is not None),
    default=_first_synth_kind,
    show_default="the first kind listed",
    help="Dataset kind to generate (a kind's aliases name it too).",
)
@click.option("--files", "num_files", type=click.IntRange(min=1), default=2, show_default=True, help="Parquet files.")
@click.option(
    "--row-groups",
    "row_groups_per_file",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Row groups per file.",
)
@click.option(
    "--rows", "rows_per_group", type=click.IntRange(min=1), default=8, show_default=True, help="Rows per row group."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--corrupt-fraction",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="Fraction of rows made bad on purpose (each kind plants its own bad rows: bad image bytes, "
    "missing parts ...).",
)
@click.option("--min-side", type=click.IntRange(min=1), help="Smallest image side in pixels.")
@click.option("--max-side", type=click.IntRange(min=1), help="Largest image side in pixels.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def synth(out: str, no_progress: bool, **options: Any) -> None:
    """Write a synthetic source dataset of a kind to OUT: parquet files plus parquet_info.json, or a
    JSONL file with its media directory (--files x --row-groups x --rows lines)."""
    from ..sandbox.synth import write_synthetic_dataset

    summary = write_synthetic_dataset(out, progress=not (no_progress or SETTINGS.quiet), **options)
    click.echo(json.dumps(summary, indent=2, default=str))
