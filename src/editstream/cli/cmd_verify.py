"""``editstream verify``: re-read every shard of a converted root and check it against the manifest, or
(``--recipe``) count what a training recipe's limits keep of each of its datasets."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from .app import SETTINGS, main
from .errors import UsageProblem
from .options import with_storage_options
from .paths import check_bucket, converted_root


def _count_recipe(path: str, as_json: bool) -> None:
    """``--recipe``: the recipe's ``dataset:`` section loaded as training loads it, then counted."""
    from ..format.safe_yaml import YamlBoundError, load_yaml
    from ..packing.config import BagelDatasetConfig
    from ..packing.recipe_count import count_recipe

    try:
        with open(path, "rb") as f:
            recipe = load_yaml(f.read(), path)
    except OSError as exc:
        raise UsageProblem(f"--recipe {path}: {exc.strerror or exc}", "give a recipe YAML file") from None
    except (YamlBoundError, ValueError) as exc:
        raise UsageProblem(f"--recipe {path} does not parse: {exc}") from None
    section = recipe.get("dataset", recipe) if isinstance(recipe, dict) else None
    if not isinstance(section, dict) or "grouped_datasets" not in section and "grouped_datasets_path" not in section:
        raise UsageProblem(f"--recipe {path} has no dataset: section with grouped_datasets", "give a BAGEL recipe")
    try:
        config = BagelDatasetConfig(**{k: v for k, v in section.items() if not str(k).startswith("_")})
    except (TypeError, ValueError) as exc:
        raise UsageProblem(f"--recipe {path}: {exc}") from None
    report = count_recipe(config)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else report.format())


@main.command()
@click.argument("dst", required=False)
@click.option(
    "--recipe",
    help="Instead of DST: count, per dataset of this BAGEL recipe (YAML), the samples that survive its "
    "max_num_tokens_per_sample and max_num_tokens at its transform sizes, and why the others do not.",
)
@click.option("--source", help="Also check every row of this parquet source (or JSONL) against the shards.")
@click.option("--workers", type=click.IntRange(min=1), help="Worker processes (default: the CPU count).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bar or progress lines.")
@with_storage_options()
def verify(
    dst: str | None,
    recipe: str | None,
    source: str | None,
    workers: int | None,
    as_json: bool,
    no_progress: bool,
    so: dict[str, Any] | None,
) -> None:
    """Re-read every shard of DST and check it against the manifest; exit 1 on any mismatch.
    With --recipe, count what the recipe's limits keep instead (exit 0 with the table)."""
    from ..conversion.verify import verify as run
    from ..data.layouts import LayoutError, recognise
    from ..format import detect as d

    if (recipe is None) == (dst is None):
        raise UsageProblem("give DST or --recipe, not both" if recipe else "give DST (or --recipe RECIPE.yaml)")
    if recipe is not None:
        if source is not None:
            raise UsageProblem("--source checks a conversion, not a --recipe", "leave out one of them")
        return _count_recipe(recipe, as_json)
    assert dst is not None
    converted_root(dst, so, "verify")
    if source is not None:
        check_bucket(source, so)
        try:
            recognise(source, so)
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
    report = run(dst, source=source, workers=workers, storage_options=so, progress=not (no_progress or SETTINGS.quiet))
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else report.format())
    if not report.ok:
        sys.exit(1)
