"""``editstream synth``: a synthetic source dataset of any registered kind to try everything on."""

from __future__ import annotations

import json

import click

from .app import SETTINGS, main
from .options import KindChoice


def _first_synth_kind() -> str:
    """The default ``--schema``: the first registered kind that can write synthetic data."""
    from ..testing.synth import synth_kinds

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
@click.option("--min-side", type=click.IntRange(min=1), default=None, help="Smallest image side in pixels.")
@click.option("--max-side", type=click.IntRange(min=1), default=None, help="Largest image side in pixels.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def synth(
    out: str,
    schema: str,
    num_files: int,
    row_groups_per_file: int,
    rows_per_group: int,
    seed: int,
    corrupt_fraction: float,
    min_side: int | None,
    max_side: int | None,
    no_progress: bool,
) -> None:
    """Write a synthetic source dataset of a kind to OUT: parquet files plus parquet_info.json, or a
    JSONL file with its media directory (--files x --row-groups x --rows lines)."""
    from ..testing.synth import write_synthetic_dataset

    summary = write_synthetic_dataset(
        out,
        schema=schema,
        num_files=num_files,
        row_groups_per_file=row_groups_per_file,
        rows_per_group=rows_per_group,
        seed=seed,
        corrupt_fraction=corrupt_fraction,
        min_side=min_side,
        max_side=max_side,
        progress=not (no_progress or SETTINGS.quiet),
    )
    click.echo(json.dumps(summary, indent=2, default=str))
