"""The ``editstream`` command group: one small function per subcommand.

Each subcommand imports its module lazily so ``editstream --help`` stays fast and a
subcommand's optional dependencies (Ray, moto ...) load only when that command runs.
"""

from __future__ import annotations

import json
import sys

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="editstream")
def main() -> None:
    """editstream: parquet <-> WebDataset data pipelines for BAGEL-style training."""


@main.command()
@click.argument("out")
@click.option("--schema", type=click.Choice(["unified_edit", "t2i"]), default="unified_edit", show_default=True,
              help="Source schema to generate (t2i writes the t2i_pretrain schema).")
@click.option("--files", "num_files", type=int, default=2, show_default=True, help="Parquet files to write.")
@click.option("--row-groups", "row_groups_per_file", type=int, default=2, show_default=True,
              help="Row groups per file.")
@click.option("--rows", "rows_per_group", type=int, default=8, show_default=True, help="Rows per row group.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--corrupt-fraction", type=float, default=0.0, show_default=True,
              help="Fraction of rows made bad on purpose (bad image bytes, too few images, short instructions).")
@click.option("--min-side", type=int, default=None, help="Smallest image side in pixels.")
@click.option("--max-side", type=int, default=None, help="Largest image side in pixels.")
def synth(out: str, schema: str, num_files: int, row_groups_per_file: int, rows_per_group: int, seed: int,
          corrupt_fraction: float, min_side: int | None, max_side: int | None) -> None:
    """Write a synthetic parquet dataset (plus parquet_info.json) to OUT."""
    from .synth import write_synthetic_dataset

    kwargs = {}
    if min_side is not None:
        kwargs["min_side"] = min_side
    if max_side is not None:
        kwargs["max_side"] = max_side
    summary = write_synthetic_dataset(
        out,
        schema="t2i_pretrain" if schema == "t2i" else schema,
        num_files=num_files,
        row_groups_per_file=row_groups_per_file,
        rows_per_group=rows_per_group,
        seed=seed,
        corrupt_fraction=corrupt_fraction,
        **kwargs,
    )
    click.echo(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
