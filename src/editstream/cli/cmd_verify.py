"""``editstream verify``: re-read every shard of a converted root and check it against the manifest."""

from __future__ import annotations

import json
import sys

import click

from ..data.layouts import LayoutError, recognise
from ..format import detect as d
from .app import SETTINGS, main
from .errors import UsageProblem
from .options import storage_options, with_storage_options
from .paths import check_bucket, converted_root


@main.command()
@click.argument("dst")
@click.option(
    "--source", default=None, help="Also check every row of this parquet source (or JSONL) against the shards."
)
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Worker processes (default: the CPU count).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bar or progress lines.")
@with_storage_options
def verify(
    dst: str,
    source: str | None,
    workers: int | None,
    as_json: bool,
    no_progress: bool,
    storage_option: tuple[str, ...],
    endpoint_url: str | None,
) -> None:
    """Re-read every shard of DST and check it against the manifest; exit 1 on any mismatch."""
    from ..conversion.verify import verify as run

    opts = storage_options(storage_option, endpoint_url)
    converted_root(dst, opts, "verify")
    if source is not None:
        check_bucket(source, opts)
        try:
            recognise(source, opts)
        except LayoutError as exc:
            found = exc.found.kind if exc.found is not None else None
            if found == d.MISSING:
                raise UsageProblem(
                    f"--source {source} does not exist", "give the parquet directory DST was converted from"
                ) from None
            if found == d.PARQUET_FILE:
                raise UsageProblem(
                    f"--source {source} is one parquet file", "give the directory DST was converted from"
                ) from None
    report = run(
        dst, source=source, workers=workers, storage_options=opts, progress=not (no_progress or SETTINGS.quiet)
    )
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else report.format())
    if not report.ok:
        sys.exit(1)
