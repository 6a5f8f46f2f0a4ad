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
@click.option(
    "--schema",
    type=click.Choice(["unified_edit", "t2i"]),
    default="unified_edit",
    show_default=True,
    help="Source schema to generate (t2i writes the t2i_pretrain schema).",
)
@click.option("--files", "num_files", type=int, default=2, show_default=True, help="Parquet files to write.")
@click.option(
    "--row-groups", "row_groups_per_file", type=int, default=2, show_default=True, help="Row groups per file."
)
@click.option("--rows", "rows_per_group", type=int, default=8, show_default=True, help="Rows per row group.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--corrupt-fraction",
    type=float,
    default=0.0,
    show_default=True,
    help="Fraction of rows made bad on purpose (bad image bytes, too few images, short instructions).",
)
@click.option("--min-side", type=int, default=None, help="Smallest image side in pixels.")
@click.option("--max-side", type=int, default=None, help="Largest image side in pixels.")
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
) -> None:
    """Write a synthetic parquet dataset (plus parquet_info.json) to OUT."""
    from .testing.synth import SynthConfig, write_synthetic_dataset

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
    )
    click.echo(json.dumps(summary, indent=2, default=str))


# ---------------------------------------------------------------------------------------
# convert / verify / inspect (the converter's commands)


def _storage_options(pairs: tuple[str, ...], endpoint_url: str | None) -> dict | None:
    """``-o key=value`` pairs (values parsed as JSON when they parse) plus ``--endpoint-url``."""
    opts: dict = {}
    for pair in pairs:
        if "=" not in pair:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--storage-option")
        k, v = pair.split("=", 1)
        try:
            opts[k] = json.loads(v)
        except json.JSONDecodeError:
            opts[k] = v
    if endpoint_url:
        opts["endpoint_url"] = endpoint_url
    return opts or None


_STORAGE_OPTIONS = [
    click.option(
        "-o",
        "--storage-option",
        "storage_option",
        multiple=True,
        metavar="KEY=VALUE",
        help="fsspec storage option for SRC/DST (repeatable), e.g. -o anon=false. The standard AWS "
        "variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL ...) work too.",
    ),
    click.option("--endpoint-url", default=None, help="S3 endpoint URL (e.g. MinIO); same as -o endpoint_url=..."),
]


def _with_storage_options(fn):
    for option in reversed(_STORAGE_OPTIONS):
        fn = option(fn)
    return fn


@main.command()
@click.argument("src")
@click.argument("dst")
@click.option(
    "--schema",
    type=click.Choice(["unified_edit", "t2i", "t2i_pretrain", "vlm_sft", "generic"]),
    default=None,
    help="Source schema; detected from the columns when omitted (vlm_sft from a .jsonl SRC).",
)
@click.option(
    "--media-dir",
    default=None,
    help="vlm_sft: the directory the JSONL's image/video names are relative to. Give the same string as "
    "the source backend's data_dir: it is recorded and decides the epoch order.",
)
@click.option("--parquet-info", default=None, help="parquet_info JSON (row groups per file); footers otherwise.")
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Worker processes (default: the CPU count); with --engine ray, the most shards in flight "
    "at once (default: twice the cluster's CPUs).",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local: a process pool on this machine; ray: Ray tasks (pip install 'editstream[ray]'), same output bytes.",
)
@click.option(
    "--ray-address",
    default=None,
    help="With --engine ray: the cluster to use, as for ray.init ('auto': the running cluster; "
    "default: RAY_ADDRESS, else a `ray start` cluster on this machine, else a new local instance).",
)
@click.option(
    "--layout",
    type=click.Choice(["rowgroup", "size"]),
    default="rowgroup",
    show_default=True,
    help="rowgroup: one shard per parquet row group (matches the parquet backend); size: shards of a target size.",
)
@click.option("--shard-size", type=str, default=None, help="Target shard size for --layout size, e.g. 512MB.")
@click.option("--samples-per-shard", type=int, default=None, help="Samples per shard for --layout size.")
@click.option("--overwrite", is_flag=True, help="Replace a finished conversion in DST.")
@click.option(
    "--drop-bad-rows",
    is_flag=True,
    help="Leave out rows that fail the schema checks (loses equivalence with the parquet backend).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option(
    "--digest",
    type=click.Choice(["xxh3_128", "sha256"]),
    default="xxh3_128",
    show_default=True,
    help="Digest of every shard and idx, recorded in the manifest and checked by verify and resume.",
)
@_with_storage_options
def convert(
    src: str,
    dst: str,
    schema: str | None,
    media_dir: str | None,
    parquet_info: str | None,
    workers: int | None,
    engine: str,
    ray_address: str | None,
    layout: str,
    shard_size: str | None,
    samples_per_shard: int | None,
    overwrite: bool,
    drop_bad_rows: bool,
    no_progress: bool,
    digest: str,
    storage_option: tuple[str, ...],
    endpoint_url: str | None,
) -> None:
    """Convert the parquet dataset SRC (or a vlm_sft JSONL file, with --media-dir) into WebDataset
    tar shards under DST (local or s3://). A JSONL becomes shards of consecutive lines
    (--samples-per-shard, 1000 by default, or --shard-size)."""
    from .conversion.executors import make_executor

    try:
        runner = make_executor(engine, workers, ray_address=ray_address)
    except (ImportError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    start = getattr(runner, "start", None)
    if start is not None:
        try:
            start()  # local workers import pyarrow & co. while this process does the same; Ray connects
        except ConnectionError as exc:
            raise click.ClickException(str(exc)) from None
    try:
        from .conversion import convert as run
        from .conversion import parse_size

        summary = run(
            src,
            dst,
            schema=schema,
            parquet_info=parquet_info,
            workers=workers,
            layout=layout,
            shard_size=parse_size(shard_size) if shard_size else None,
            samples_per_shard=samples_per_shard,
            overwrite=overwrite,
            drop_bad_rows=drop_bad_rows,
            storage_options=_storage_options(storage_option, endpoint_url),
            progress=not no_progress,
            engine=engine,
            ray_address=ray_address,
            executor=runner,
            media_dir=media_dir,
            digest=digest,
        )
    except (ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        runner.close()
    click.echo(json.dumps(summary, indent=2))
    if summary["num_bad_rows"]:
        action = "dropped" if drop_bad_rows else "kept verbatim"
        click.echo(f"{summary['num_bad_rows']} bad rows {action}; see {summary['report']}", err=True)


@main.command()
@click.argument("dst")
@click.option("--source", default=None, help="Also check every row of this parquet source against the shards.")
@click.option("--workers", type=int, default=None, help="Worker processes (default: the CPU count).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_with_storage_options
def verify(
    dst: str,
    source: str | None,
    workers: int | None,
    as_json: bool,
    storage_option: tuple[str, ...],
    endpoint_url: str | None,
) -> None:
    """Re-read every shard of DST and check it against the manifest; exit 1 on any mismatch."""
    from .conversion.verify import verify as run

    report = run(dst, source=source, workers=workers, storage_options=_storage_options(storage_option, endpoint_url))
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else report.format())
    if not report.ok:
        sys.exit(1)


@main.command()
@click.argument("dst")
@click.option("--sample", "key", default=None, help="Print the row of the sample with this key.")
@click.option(
    "--max-samples", type=int, default=1000, show_default=True, help="Samples scanned for image statistics (0: all)."
)
@_with_storage_options
def inspect(
    dst: str, key: str | None, max_samples: int, storage_option: tuple[str, ...], endpoint_url: str | None
) -> None:
    """Show what DST holds: shards, samples, bytes, images per sample, image formats and sizes."""
    from .conversion.inspect import describe_value, find_sample, inspect_dataset

    opts = _storage_options(storage_option, endpoint_url)
    if key is not None:
        try:
            row = find_sample(dst, key, storage_options=opts)
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0])) from None
        click.echo(json.dumps(describe_value(row), indent=2, ensure_ascii=False, default=str))
        return
    click.echo(json.dumps(inspect_dataset(dst, storage_options=opts, max_samples=max_samples or None), indent=2))


# ---------------------------------------------------------------------------------------
# stream (the loader, on either backend)


@main.command()
@click.argument("data_dirs", nargs=-1, required=True)
@click.option(
    "--backend",
    type=click.Choice(["parquet", "webdataset"]),
    default="parquet",
    show_default=True,
    help="parquet: DATA_DIRS hold *.parquet; webdataset: DATA_DIRS are converted roots (manifest.json).",
)
@click.option("--schema", type=click.Choice(["unified_edit", "t2i"]), default="unified_edit", show_default=True)
@click.option("--samples", type=int, default=200, show_default=True, help="Samples to stream.")
@click.option("--workers", type=int, default=0, show_default=True, help="DataLoader worker processes.")
@click.option("--seed", type=int, default=42, show_default=True, help="Epoch seed (unit shuffle) and global seed.")
@click.option("--rank", type=int, default=None, help="Rank (default: torchrun's RANK, else 0).")
@click.option("--world-size", type=int, default=None, help="World size (default: torchrun's WORLD_SIZE, else 1).")
@click.option("--num-used", type=int, default=None, help="Files used per directory (default: all).")
@click.option("--vae-max", type=int, default=512, show_default=True, help="VAE transform max image side.")
@click.option("--vit-max", type=int, default=490, show_default=True, help="ViT transform max image side.")
@_with_storage_options
def stream(
    data_dirs: tuple[str, ...],
    backend: str,
    schema: str,
    samples: int,
    workers: int,
    seed: int,
    rank: int | None,
    world_size: int | None,
    num_used: int | None,
    vae_max: int,
    vit_max: int,
    storage_option: tuple[str, ...],
    endpoint_url: str | None,
) -> None:
    """Stream samples from DATA_DIRS through a dataset class and report throughput and drops."""
    import random
    import time

    import torch

    from .loader.datasets.registry import DATASET_REGISTRY
    from .loader.datasets.standard import count_source_files
    from .loader.tokenizer import ByteTokenizer
    from .loader.transforms import ImageTransform

    opts = _storage_options(storage_option, endpoint_url)
    counts = [num_used if num_used is not None else count_source_files(d, backend, opts) for d in data_dirs]
    vae = ImageTransform(vae_max, min(256, vae_max), 16)
    common = dict(
        local_rank=rank, world_size=world_size, num_workers=max(workers, 1), backend=backend, storage_options=opts
    )
    if schema == "t2i":
        ds = DATASET_REGISTRY["t2i_pretrain"]("t2i_pretrain", vae, ByteTokenizer(), list(data_dirs), counts, **common)
    else:
        vit = ImageTransform(vit_max, min(224, vit_max), 14)
        ds = DATASET_REGISTRY["unified_edit"](
            "unified_edit", vae, ByteTokenizer(), vit, list(data_dirs), counts, **common
        )
    ds.set_epoch(seed)
    random.seed(seed)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=workers, generator=torch.Generator().manual_seed(seed)
    )
    t0 = time.perf_counter()
    n = tokens = 0
    for sample in loader:
        n += 1
        tokens += sample["num_tokens"]
        if n >= samples:
            break
    seconds = time.perf_counter() - t0
    click.echo(
        json.dumps(
            {
                "backend": backend,
                "schema": schema,
                "units": len(ds.data_paths),
                "samples": n,
                "tokens": tokens,
                "seconds": round(seconds, 3),
                "samples_per_s": round(n / seconds, 1) if seconds else None,
                "drops_main_process": ds.drop_counts,
            },
            indent=2,
        )
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
