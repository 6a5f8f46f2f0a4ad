"""``editstream inspect``: what a converted root holds, its keys, one sample's row or members."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from .app import SETTINGS, main
from .errors import DataProblem, UsageProblem
from .options import with_storage_options
from .paths import converted_root


def _find(dst: str, key: str, so: dict[str, Any] | None) -> dict[str, bytes]:
    from ..data.members import find_members

    try:
        return find_members(dst, key, storage_options=so)
    except KeyError as exc:
        raise DataProblem(str(exc.args[0]), f"list the keys with: editstream inspect {dst} --list") from None


def _extract(dst: str, key: str, out_dir: str, so: dict[str, Any] | None) -> None:
    members = _find(dst, key, so)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageProblem(f"--extract writes into a directory, and {out_dir} is a file", "give a directory")
    os.makedirs(out_dir, exist_ok=True)
    for suffix, data in members.items():
        path = os.path.join(out_dir, f"{key}.{suffix}")
        with open(path, "wb") as f:
            f.write(data)
        click.echo(path)


@main.command()
@click.argument("dst")
@click.option("--sample", "key", help="Print the row of the sample with this key.")
@click.option("--list", "list_keys", is_flag=True, help="List every sample key (tab: its shard).")
@click.option(
    "--extract",
    nargs=2,
    metavar="KEY DIR",
    help="Write the members of sample KEY (images, JSON ...) as files KEY.<member> into DIR.",
)
@click.option(
    "--max-samples",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Samples scanned for image statistics (0: all).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar or progress lines.")
@with_storage_options()
def inspect(
    dst: str,
    key: str | None,
    list_keys: bool,
    extract: tuple[str, str] | None,
    max_samples: int,
    no_progress: bool,
    so: dict[str, Any] | None,
) -> None:
    """Show what DST holds: shards, samples, bytes, images per sample, image formats and sizes."""
    from ..conversion import inspect as ins
    from ..data import members

    if sum(x is not None for x in (key, list_keys or None, extract)) > 1:
        raise UsageProblem("--sample, --list and --extract do one thing each", "give one of them")
    converted_root(dst, so, "inspect")
    if list_keys:
        for sample_key, shard in members.list_keys(dst, storage_options=so):
            click.echo(f"{sample_key}\t{shard}")
        return
    if extract is not None:
        _extract(dst, extract[0], extract[1], so)
        return
    if key is not None:
        from ..format.rowcodec import decode_sample

        row = decode_sample(key, _find(dst, key, so))
        click.echo(json.dumps(ins.describe_value(row), indent=2, ensure_ascii=False, default=str))
        return
    progress = not (no_progress or SETTINGS.quiet)
    info = ins.inspect_dataset(dst, storage_options=so, max_samples=max_samples or None, progress=progress)
    click.echo(json.dumps(info, indent=2))
