"""``editstream synth``: a synthetic parquet dataset to try everything on."""

from __future__ import annotations

import json

import click

from .app import SETTINGS, main


@main.command()
@click.argument("out")
@click.option(
    "--schema",
    type=click.Choice(["unified_edit", "t2i", "t2i_pretrain"]),
    default="unified_edit",
    show_default=True,
    help="Source schema to generate (t2i and t2i_pretrain are the same schema).",
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
    help="Fraction of rows made bad on purpose (bad image bytes, too few images, short instructions).",
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
    """Write a synthetic parquet dataset (plus parquet_info.json) to OUT."""
    from ..testing.synth import SynthConfig, write_synthetic_dataset

    summary = write_synthetic_dataset(
        out,
        schema="t2i_pretrain" if schema == "t2i" else schema,
        num_files=num_files,
        row_groups_per_file=row_groups_per_file,
        rows_per_group=rows_per_group,
        seed=seed,
        corrupt_fraction=corrupt_fraction,
        min_side=SynthConfig.min_side if min_side is None else min_side,
        max_side=SynthConfig.max_side if max_side is None else max_side,
        progress=not (no_progress or SETTINGS.quiet),
    )
    click.echo(json.dumps(summary, indent=2, default=str))
