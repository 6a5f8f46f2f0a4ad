"""``editstream stream``: samples from DATA through a dataset class, with throughput and drops. DATA is
opened (``editstream.data.open_data``) and checked before torch loads: a contradicting ``--backend`` or
``--schema`` is a usage error naming the option, and the arguments must agree."""

from __future__ import annotations

import json
import logging
import random
import time
from typing import TYPE_CHECKING, Any

import click

from ..data.backends import AUTO, BACKENDS, chosen_backend
from .app import main
from .errors import DataProblem, UsageProblem
from .options import KindChoice, trainable, with_storage_options
from .paths import check_bucket, open_problem

if TYPE_CHECKING:  # imported where used, so loading the CLI stays light
    from ..data.open import DataHandle

log = logging.getLogger("editstream")


def _open_one(
    url: str, backend: str, schema: str | None, so: dict[str, Any] | None, media_dir: str | None
) -> DataHandle:
    from ..data.layouts import JsonlFile, LayoutError
    from ..data.open import open_data
    from ..format import detect as d
    from ..kinds import all_kinds, get_kind

    if not d.names_pattern(url, so):
        check_bucket(url, so)
    wanted = chosen_backend(backend, "--backend")
    try:
        handle = open_data(url, backend=wanted, storage_options=so, media_dir=media_dir)
        if not trainable(handle.kind):  # stream builds the kind's training dataset
            names = " and ".join(k.name for k in all_kinds() if trainable(k))
            raise UsageProblem(
                f"{url} holds {handle.kind.name} data; stream reads {names}", "give data of a kind stream reads"
            )
        if schema is not None and schema != handle.kind.name:
            handle = open_data(url, kind=get_kind(schema), backend=wanted, storage_options=so, media_dir=media_dir)
    except LayoutError as exc:
        raise open_problem(url, exc) from None
    if isinstance(handle.layout, JsonlFile) and media_dir is None:
        raise UsageProblem(
            f"{url} is a JSONL file, and its image and video names need --media-dir DIR",
            f"editstream stream {url} --media-dir DIR",
        )
    return handle


def resolve(
    data: tuple[str, ...], backend: str, schema: str | None, so: dict[str, Any] | None, media_dir: str | None = None
) -> list[DataHandle]:
    """Open every DATA argument; they must agree on backend, kind and layout, and ``schema`` must fit."""
    found = [_open_one(url, backend, schema, so, media_dir) for url in data]
    kinds = {(h.backend, h.kind.name, type(h.layout)) for h in found}
    if len(kinds) > 1:
        shown = ", ".join(f"{h.url}: {h.kind.name} on {h.backend}" for h in found)
        raise UsageProblem(f"DATA arguments of different kinds ({shown})", "stream one kind at a time")
    return found


def _dataset(found: list[DataHandle], workers: int, kw: dict[str, Any]) -> Any:
    """The kind's training dataset over the DATA entries, with a ViT transform or frame sampler only when
    its class requires one."""
    from ..loader.datasets.parameters import dataset_parameters
    from ..loader.tokenizer import ByteTokenizer
    from ..loader.transforms import ImageTransform
    from ..loader.video import FrameSampler

    handle = found[0]
    cls = handle.kind.dataset_class()
    args: dict[str, Any] = handle.dataset_arguments()
    for extra in found[1:]:
        for key, value in extra.dataset_arguments().items():
            if isinstance(value, list):
                args[key] = [*args[key], *value]
    if kw["num_used"] is not None:
        args["num_used_data"] = [kw["num_used"]] * len(args["num_used_data"])
    args.update(
        dataset_name=handle.kind.name,
        transform=ImageTransform(kw["vae_max"], min(256, kw["vae_max"]), 16),
        tokenizer=ByteTokenizer(),
        local_rank=kw["rank"],
        world_size=kw["world_size"],
        num_workers=max(workers, 1),
        storage_options=handle.storage_options,
    )
    needed = dataset_parameters(cls)
    if needed.get("vit_transform"):
        args["vit_transform"] = ImageTransform(kw["vit_max"], min(224, kw["vit_max"]), 14)
    if needed.get("frame_sampler"):
        args["frame_sampler"] = FrameSampler(max_num_frames=8, min_num_frames=1)
    return cls(**args)


def refuse_repeated_data(data: tuple[str, ...]) -> None:
    """One source given twice (``A A``, ``A ./A/``, ``s3://b/p s3://b/p/``) would stream its rows twice: a
    usage error naming it."""
    from ..data.units import repeated_sources, source_key

    repeats = repeated_sources(data)
    if repeats:
        first, again = repeats[0]
        spelled = f" (as {first} and {again})" if first != again else ""
        raise UsageProblem(
            f"DATA names {source_key(first)} twice{spelled}: its rows would be streamed twice",
            "give each source once (--num-used repeats a source's files)",
        )


def _open_all(data: tuple[str, ...], schema: str | None, so: Any, kw: dict[str, Any]) -> list[DataHandle]:
    """The DATA arguments opened, or read in place through ``--from`` / ``--mapping`` and listed now, so a
    bad mapping or folder fails before torch loads."""
    from ..adapters import MappingError
    from ..data.adapted.inplace import in_place_entry
    from ..data.open import open_data

    refuse_repeated_data(data)
    adapter, mapping, where, split = (kw.pop(k) for k in ("adapter", "mapping_file", "where", "split"))
    if adapter is None and mapping is None:
        if where is not None or split is not None:
            raise UsageProblem("--where and --split apply to data read through an adapter", "add --from NAME")
        return resolve(data, kw.pop("backend"), schema, so, kw.pop("media_dir"))
    if adapter is not None and mapping is not None:
        raise UsageProblem("--from and --mapping both name the mapping", "give one of them")
    wanted = chosen_backend(kw.pop("backend"), "--backend")
    if wanted is not None and wanted.reads_shards:
        raise UsageProblem("data read through an adapter is read on the parquet backend", "leave --backend out")
    options = {"where": where, "split": split, "media_dir": kw.pop("media_dir")}
    named = {"from": adapter} if adapter is not None else {"mapping": mapping}
    found: list[DataHandle] = []
    for url in data:
        try:
            entry = in_place_entry({"data_dir": url, **named, **options}, "stream")
            handle = open_data(entry, kind=schema, storage_options=so)
            handle.layout.count()
        except (MappingError, ValueError) as exc:
            raise UsageProblem(" ".join(str(exc).split())) from None
        except FileNotFoundError as exc:
            raise DataProblem(str(exc)) from None
        found.append(handle)
    return found


def _tokens(sample: Any, ds: Any) -> int:
    """A sample's ``num_tokens``; a sample without one is a parser's bug, named with its kind, dataset and row."""
    tokens = sample.get("num_tokens") if isinstance(sample, dict) else None
    if isinstance(tokens, int) and not isinstance(tokens, bool):
        return tokens
    where = sample.get("data_indexes") if isinstance(sample, dict) else None
    what = f"a sample whose num_tokens is {tokens!r}" if isinstance(sample, dict) else f"a {type(sample).__name__}"
    kind = getattr(ds, "kind", None)
    raise DataProblem(
        f"dataset {ds.dataset_name!r} (kind {kind.name if kind else type(ds).__name__}): parse_row returned {what} "
        f"for the row at {where}; a sample needs num_tokens (an int)",
        "fix the kind's parse_row",
    )


def _check_rank(rank: int | None, world_size: int | None) -> None:
    """The rank must be in the world (given here or by torchrun's RANK / WORLD_SIZE): a usage error otherwise."""
    from ..loader.units import resolve_rank_and_world

    r, w = resolve_rank_and_world(rank, world_size)
    if not 0 <= r < w:
        given = "--rank/--world-size" + ("" if rank is not None and world_size is not None else " or RANK/WORLD_SIZE")
        raise UsageProblem(f"rank {r} is not in a world of size {w} ({given})", f"give a rank from 0 to {w - 1}")


@main.command()
@click.argument("data", nargs=-1, required=True)
@click.option(
    "--backend",
    type=click.Choice([AUTO, *BACKENDS]),
    default="auto",
    show_default=True,
    help="auto: by what DATA holds; parquet (or source): the data as published (directories of *.parquet, "
    "a JSONL file); webdataset: converted roots (manifest.json) or tar shards by pattern "
    "('shards-{000..099}.tar', a .tar, a directory of them).",
)
@click.option(
    "--schema",
    type=KindChoice(trainable),
    help="Dataset kind of the data (a kind's aliases name it too); default: from the manifest or the parquet "
    "columns (foreign shards: the kind their default member map reads). A kind the data does not have is an error.",
)
@click.option("--samples", type=click.IntRange(min=1), default=200, show_default=True, help="Samples to stream.")
@click.option(
    "--workers", type=click.IntRange(min=0), default=0, show_default=True, help="DataLoader worker processes."
)
@click.option("--seed", type=int, default=42, show_default=True, help="Epoch seed (unit shuffle) and global seed.")
@click.option("--rank", type=click.IntRange(min=0), help="Rank (default: torchrun's RANK, else 0).")
@click.option(
    "--world-size",
    type=click.IntRange(min=1),
    help="World size (default: torchrun's WORLD_SIZE, else 1).",
)
@click.option("--num-used", type=click.IntRange(min=1), help="Files (or shards) used per DATA (default: all).")
@click.option(
    "--vae-max", type=click.IntRange(min=16), default=512, show_default=True, help="VAE transform max image side."
)
@click.option(
    "--vit-max", type=click.IntRange(min=14), default=490, show_default=True, help="ViT transform max image side."
)
@click.option(
    "--max-tokens-per-sample",
    type=click.IntRange(min=1),
    default=16384,
    show_default=True,
    help="Samples over this many tokens are counted (over_token_limit) and the first is named: the recipe's "
    "max_num_tokens_per_sample, over which the packer drops a sample.",
)
@click.option(
    "--media-dir",
    help="For a JSONL DATA (LLaVA-style lines), or a mapping's image paths: the directory the names are relative to.",
)
@click.option(
    "--from",
    "adapter",
    metavar="NAME",
    help="Read DATA (a public dataset's parquet folder, repository root or Hub cache folder) in place through "
    "this built-in adapter: the stream convert --from NAME and the converted data would give.",
)
@click.option("--mapping", "mapping_file", metavar="FILE", help="As --from, with a mapping file.")
@click.option("--where", help="With --from/--mapping: a filter replacing the mapping's own.")
@click.option("--split", help="With --from/--mapping: read only {split}-*.parquet.")
@with_storage_options()
def stream(data: tuple[str, ...], schema: str | None, samples: int, workers: int, seed: int, **kw: Any) -> None:
    """Stream samples from DATA (parquet directories, converted roots, shard patterns, a JSONL file
    with --media-dir, or a public dataset read in place with --from) through the dataset class of its
    kind and report throughput and drops (all worker processes)."""
    found = _open_all(data, schema, kw.pop("so"), kw)  # before torch loads: mistakes fail fast
    _check_rank(kw["rank"], kw["world_size"])
    import torch

    ds = _dataset(found, workers, kw)
    ds.set_epoch(seed)
    random.seed(seed)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=workers, generator=torch.Generator().manual_seed(seed)
    )
    t0 = time.perf_counter()
    n = tokens = over = 0
    for sample in loader:
        n += 1
        size = _tokens(sample, ds)
        tokens += size
        if size > kw["max_tokens_per_sample"]:
            over += 1
            if over == 1:
                limit = kw["max_tokens_per_sample"]
                log.warning(
                    f"sample {sample.get('data_indexes')} has {size} tokens, over --max-tokens-per-sample {limit}: "
                    "a packer with that limit drops it"
                )
        if n >= samples:
            break
    seconds = time.perf_counter() - t0
    del loader  # workers stop (and have written their drop counts)
    from ..data.layouts import ForeignShards

    summary = {
        "backend": found[0].backend,
        "schema": found[0].kind.name,
        "foreign_shards": isinstance(found[0].layout, ForeignShards),
        "units": len(ds.data_paths),
        "samples": n,
        "tokens": tokens,
        "seconds": round(seconds, 3),
        "samples_per_s": round(n / seconds, 1) if seconds else None,
        "drops": ds.drop_counts,
        "over_token_limit": over,
    }
    click.echo(json.dumps(summary, indent=2))
