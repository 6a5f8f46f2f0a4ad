"""``editstream preview``: a dataset's first records drawn by their kind's preview function, as HTML or PNG
(with ``--from`` / ``--mapping``: the chains ``convert --from`` would make, adapted in place)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from ..data.backends import AUTO, BACKENDS, chosen_backend
from ..io.words import counted
from .app import main
from .errors import DataProblem, UsageProblem
from .options import LiveChoice, adapter_names, with_storage_options
from .paths import check_bucket, open_problem


def adapted_records(
    data: str,
    n: int,
    media_dir: str | None,
    opts: dict[str, Any] | None,
    *,
    adapter: str | None,
    mapping_file: str | None,
    where: str | None,
    split: str | None,
) -> list[Any]:
    """The first ``n`` chains the adapter makes of DATA as preview records (a dropped row with its reason)."""
    from ..adapters import FilterError, MappingError, peek, resolve_mapping
    from ..data.adapted.inplace import media_index_dir
    from ..preview.collect import to_record
    from ..preview.record import Record

    if adapter is not None and mapping_file is not None:
        raise UsageProblem("--from and --mapping both name the mapping", "give one of them")
    try:
        mapping = resolve_mapping(adapter or mapping_file or "")
        index = media_index_dir()  # archives indexed by a first look are not read whole again, nor in place
        shown = peek(
            data, mapping, n, where=where, media_dir=media_dir, split=split, storage_options=opts, index_dir=index
        )
        return [
            to_record(mapping.kind, title, row)
            if isinstance(row, dict)
            else Record(title, [], [f"(dropped by the adapter: {row.reason})"], mapping.kind)
            for title, row in shown
        ]
    except (MappingError, FilterError) as exc:
        raise UsageProblem(" ".join(str(exc).split())) from None


def _records(
    data: str, n: int, backend: str, media_dir: str | None, opts: dict[str, Any] | None, allow_outside: bool
) -> list[Any]:
    """The first ``n`` records of data editstream reads as it is (not through an adapter)."""
    from ..data.layouts import LayoutError
    from ..format import detect as d
    from ..kinds import all_kinds
    from ..preview.collect import NoPreviewError, collect

    if not d.names_pattern(data, opts):
        check_bucket(data, opts)
    try:
        return collect(
            data,
            n,
            backend=chosen_backend(backend, "--backend"),
            media_dir=media_dir,
            storage_options=opts,
            allow_outside_media_dir=allow_outside,
        )
    except LayoutError as exc:
        raise open_problem(data, exc) from None
    except NoPreviewError as exc:
        known = ", ".join(kind.name for kind in all_kinds() if kind.preview is not None)
        advice = f"install the package of its kind; preview knows {known}"
        raise DataProblem(str(exc), advice) from None


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
    type=click.Choice([AUTO, *BACKENDS]),
    default="auto",
    show_default=True,
    help="auto: by what DATA holds; parquet (or source): the data as published (a parquet directory, a JSONL "
    "file); webdataset: a converted root or shards.",
)
@click.option(
    "--media-dir",
    help="JSONL DATA, or with --from/--mapping: the directory image names (paths without bytes) are relative to.",
)
@click.option(
    "--from",
    "adapter",
    type=LiveChoice(adapter_names),
    help="DATA is this public dataset in its own Hub schema: show the chains its adapter makes (nothing is written).",
)
@click.option("--mapping", "mapping_file", metavar="FILE", help="Like --from, with a mapping file.")
@click.option("--where", metavar="EXPR", help="With --from/--mapping: only source rows that match.")
@click.option("--split", help="With --from/--mapping: only DATA's {split}-*.parquet files.")
@click.option(
    "--allow-outside-media-dir",
    is_flag=True,
    help="JSONL DATA: read image names outside --media-dir (absolute, or climbing out with ..); refused by default.",
)
@with_storage_options(short=False)
def preview(
    data: str,
    out: str,
    n: int,
    backend: str,
    media_dir: str | None,
    allow_outside_media_dir: bool,
    so: dict[str, Any] | None,
    **adapting: Any,
) -> None:
    """Draw the first records of DATA (a converted root, a parquet directory, shards by pattern, or a
    JSONL of VLM conversations with --media-dir, or a public dataset's Hub parquet with --from NAME),
    each drawn as its kind says: edit chains as rows of thumbnails with their instructions, images
    with their captions, prompt or conversation."""
    from ..preview.render import save_png, to_html, to_png

    suffix = os.path.splitext(out)[1].lower()
    if suffix not in (".html", ".htm", ".png"):
        raise UsageProblem(f"-o {out}: the preview is written as .html or .png", "name the output OUT.html or OUT.png")
    if adapting["adapter"] is not None or adapting["mapping_file"] is not None:
        if chosen_backend(backend, "--backend") is not None:
            raise UsageProblem("--backend reads converted data; --from/--mapping read DATA in its own schema")
        records = adapted_records(data, n, media_dir, so, **adapting)
    else:
        stray = [f"--{k}" for k in ("where", "split") if adapting[k] is not None]
        if stray:
            advice = "add --from NAME or --mapping FILE, or leave them out"
            raise UsageProblem(f"{', '.join(stray)} apply to --from/--mapping only", advice)
        records = _records(data, n, backend, media_dir, so, allow_outside_media_dir)
    if not records:
        raise DataProblem(f"{data} holds no records to preview")
    via = adapting["adapter"] or adapting["mapping_file"]
    title = f"editstream preview: {data}{f' via {via}' if via else ''} (first {len(records)})"
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    if suffix == ".png":
        save_png(to_png(records, title), out)
    else:
        Path(out).write_text(to_html(records, title), encoding="utf-8")
    click.echo(f"wrote {out} ({counted(len(records), 'record')})")
