"""``editstream preview``: see a dataset's first records, drawn by their kind's preview function, as HTML or PNG."""

from __future__ import annotations

import os
from typing import Any

import click

from ..format import detect as d
from .app import main
from .errors import DataProblem, UsageProblem
from .options import storage_options
from .paths import check_bucket, missing_path, unfinished_conversion

_OK = {
    "auto": None,
    "parquet": {d.PARQUET_DIR},
    "webdataset": {d.CONVERTED, d.SHARD_DIR, d.SHARD_PATTERN, d.TAR_FILE},
}


def _kinds() -> list[str]:
    from ..kinds import all_kinds

    return [kind.name for kind in all_kinds() if kind.preview is not None]


def _check(data: str, backend: str, opts: dict[str, Any] | None) -> None:
    if d.names_pattern(data, opts):
        kind = d.SHARD_PATTERN
    else:
        check_bucket(data, opts)
        found = d.detect(data, opts)
        kind = found.kind
        if kind == d.MISSING:
            raise missing_path(data, "DATA")
        if kind == d.PARTIAL:
            raise unfinished_conversion(found)
    allowed = _OK[backend]
    if allowed is not None and kind not in allowed:
        other = "webdataset" if backend == "parquet" else "parquet"
        raise UsageProblem(
            f"DATA {data} is {kind.replace('_', ' ')}, which --backend {backend} does not read",
            f"use --backend {other} or leave --backend out",
        )


@main.command()
@click.argument("data")
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    help="OUT.html (self-contained page, images embedded) or OUT.png (contact sheet).",
)
@click.option("-n", "--samples", "n", type=click.IntRange(min=1), default=16, show_default=True, help="Records shown.")
@click.option(
    "--backend",
    type=click.Choice(["auto", "parquet", "webdataset"]),
    default="auto",
    show_default=True,
    help="auto: by what DATA holds; parquet: a parquet directory; webdataset: a converted root or shards.",
)
@click.option("--media-dir", default=None, help="JSONL DATA: the directory its image names are relative to.")
@click.option("--endpoint-url", default=None, help="S3 endpoint URL (e.g. MinIO).")
@click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE", help="fsspec storage option.")
def preview(
    data: str,
    out: str,
    n: int,
    backend: str,
    media_dir: str | None,
    endpoint_url: str | None,
    storage_option: tuple[str, ...],
) -> None:
    """Draw the first records of DATA (a converted root, a parquet directory, shards by pattern, or a
    JSONL of VLM conversations with --media-dir), each drawn as its kind says: edit chains as rows of
    thumbnails with their instructions, images with their captions, prompt or conversation."""
    from ..preview.collect import NoPreviewError, collect
    from ..preview.render import save_png, to_html, to_png

    suffix = os.path.splitext(out)[1].lower()
    if suffix not in (".html", ".htm", ".png"):
        raise UsageProblem(f"-o {out}: the preview is written as .html or .png", "name the output OUT.html or OUT.png")
    opts = storage_options(storage_option, endpoint_url)
    _check(data, backend, opts)
    try:
        records = collect(data, n, media_dir=media_dir, storage_options=opts)
    except NoPreviewError as exc:
        raise DataProblem(str(exc), f"install the package of its kind; preview knows {', '.join(_kinds())}") from None
    if not records:
        raise DataProblem(f"{data} holds no records to preview")
    title = f"editstream preview: {data} (first {len(records)})"
    folder = os.path.dirname(out)
    if folder:
        os.makedirs(folder, exist_ok=True)
    if suffix == ".png":
        save_png(to_png(records, title), out)
    else:
        with open(out, "w", encoding="utf-8") as f:
            f.write(to_html(records, title))
    click.echo(f"wrote {out} ({len(records)} records)")
