"""``editstream convert``: parquet (or a JSONL + media source) to WebDataset shards, checked before it starts;
with ``--from``/``--mapping`` (:func:`convert_from`) a public dataset in its own schema is adapted first (then
converted to shards with ``--to webdataset``); a mapping, filter or DST it cannot use is a usage error."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from ..data.backends import TARGETS, get_backend
from ..io import storage
from ..io.words import counted
from .app import SETTINGS, main
from .errors import DataProblem, UsageProblem
from .options import KindChoice, LiveChoice, SizeType, adapter_names, with_storage_options
from .paths import check_bucket, parquet_columns, parquet_source

if TYPE_CHECKING:  # imported where used, so loading the CLI stays light
    from ..data.layouts import JsonlFile, ParquetDirectory


def catch_all_kind() -> str:
    """The kind that converts any parquet columns as they are (the one with no columns to require)."""
    from ..kinds import all_kinds

    return next(k.name for k in all_kinds() if k.source.takes_columns and not k.columns)


def check_convert_usage(
    src: str,
    dst: str,
    found: ParquetDirectory | JsonlFile,
    schema: str | None,
    media_dir: str | None,
    so: dict[str, Any] | None,
) -> None:
    """``convert``'s arguments fit together: SRC and DST apart, ``--media-dir`` with (and only with) a JSONL
    SRC, and a ``--schema`` that fits SRC (needed for a parquet SRC whose columns fit no kind)."""
    from ..conversion.config import PlacesOverlapError, check_apart
    from ..data.layouts import JsonlFile
    from ..data.shapes import data_shape
    from ..kinds import get_kind

    if isinstance(found, JsonlFile) and schema is not None and not data_shape(get_kind(schema)).reads(found.title):
        raise UsageProblem(f"{src} is a JSONL file (JSONL + media data); --schema {schema} needs a parquet directory")
    try:
        check_apart({"SRC": src, "DST": dst})
    except PlacesOverlapError as exc:
        raise UsageProblem(str(exc), "give DST a new or empty directory outside SRC") from None
    if isinstance(found, JsonlFile):
        if not media_dir:
            raise UsageProblem(
                f"SRC {src} is a JSONL file, and its image and video names need --media-dir DIR",
                f"editstream convert {src} {dst} --media-dir DIR (the source backend's data_dir)",
            )
        fs, path = storage.url_to_fs(media_dir, so)
        if fs.isfile(path):
            raise UsageProblem(
                f"--media-dir {media_dir} is a file, not a directory",
                "give the directory the JSONL's image and video names are relative to (unpack an archive first)",
            )
        return
    if media_dir is not None:
        raise UsageProblem(f"--media-dir is for a JSONL SRC; {src} is a parquet directory", "leave --media-dir out")
    _check_columns(src, dst, found, schema)


def _check_columns(src: str, dst: str, found: ParquetDirectory, schema: str | None) -> None:
    """A parquet SRC has the columns ``--schema`` needs, or without it those of a kind detection recognises; columns
    a built-in adapter reads (a public dataset, ``--from`` forgotten) get that ``--from`` command as advice."""
    from ..adapters.suggest import from_advice
    from ..kinds import all_kinds, detect_kind, get_kind

    kind = None if schema is None else get_kind(schema)
    if kind is not None and not kind.columns:
        return
    columns = parquet_columns(found)
    fits = detect_kind(columns)
    if kind is None:
        if fits is not None:
            return
        names = ", ".join(k.name for k in all_kinds() if k.source.takes_columns and k.detectable and k.columns)
        raise UsageProblem(
            f"cannot tell the dataset kind of {src} from its columns {columns} ({names} need other columns)",
            from_advice(columns, src, dst)
            or f"pass --schema NAME; --schema {catch_all_kind()} converts the rows as they are",
        )
    if all(c in columns for c in kind.columns):
        return
    advice = (
        f"these columns are {fits.name} data: pass --schema {fits.name} or leave --schema out"
        if fits
        else from_advice(columns, found.url, dst) or f"pass --schema {catch_all_kind()} to convert the rows as they are"
    )
    raise UsageProblem(f"--schema {schema} needs columns {list(kind.columns)}; {found.url} has {columns}", advice)


def _layout(ctx: click.Context, layout: str, shard_size: int | None, samples_per_shard: int | None) -> str:
    if shard_size is None and samples_per_shard is None:
        return layout
    if layout == "rowgroup" and given(ctx, ["layout"]):
        raise UsageProblem(
            "--shard-size / --samples-per-shard cut shards by size; --layout rowgroup makes one shard per row group",
            "use --layout size (or leave --layout out)",
        )
    return "size"


@contextmanager
def running_executor(engine: str, workers: int | None, ray_address: str | None) -> Iterator[Any]:
    """The conversion executor for ``--engine``/``--workers``, started now (local workers import while this
    process plans; Ray connects before any work) and closed on exit; a missing Ray or bad address is a usage error."""
    from ..conversion.executors import make_executor

    try:
        runner = make_executor(engine, workers, ray_address=ray_address)
    except (ImportError, ValueError) as exc:
        raise UsageProblem(str(exc)) from None
    try:
        start = getattr(runner, "start", None)
        if start is not None:
            start()
        yield runner
    finally:
        runner.close()


def foreign_files_problem(dst: str, names: list[str]) -> UsageProblem:
    """The usage error for a DST that holds files editstream did not write (``names``, the first few shown)."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return UsageProblem(
        f"DST {dst} holds files editstream did not write ({shown})",
        "convert into a new or empty directory (--overwrite goes on: it replaces only editstream's own files)",
    )


ADAPTER_OPTIONS = ("adapter", "mapping_file", "target", "where", "split", "staging")
"""The ``convert`` parameters that only an adaptation reads."""
ONLY_WITH_ADAPTER = ("target", "where", "split", "staging")
NEVER_WITH_ADAPTER = ("schema", "parquet_info", "dry_run")
"""The adapter decides the kind and writes its own parquet_info; it has no dry run."""
SHARD_OPTIONS = ("layout", "shard_size", "samples_per_shard", "overwrite", "drop_bad_rows", "digest", "break_lock")
"""Options of the shard conversion: meaningless (so refused) with ``--to parquet``, but ``--overwrite`` (it
replaces another adaptation there); ``--workers``, ``--engine`` and ``--ray-address`` run the adaptation's
output files too, so both targets take them."""


def given(ctx: click.Context, names: Sequence[str]) -> list[str]:
    """The options among ``names`` (parameter names) typed on the command line, as their flags."""
    default = (None, click.core.ParameterSource.DEFAULT)
    flags = {param.name: param.opts[0] for param in ctx.command.params}
    return [flags[name] for name in names if ctx.get_parameter_source(name) not in default]


def refuse_given(ctx: click.Context, names: Sequence[str], only: str, advice: str) -> None:
    """The options among ``names`` typed on the command line are a usage error: they apply to ``only`` only."""
    stray = given(ctx, names)
    if stray:
        raise UsageProblem(f"{', '.join(stray)} appl{'ies' if len(stray) == 1 else 'y'} to {only} only", advice)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _check(ctx: click.Context, opts: dict[str, Any]) -> None:
    if opts["adapter"] is not None and opts["mapping_file"] is not None:
        raise UsageProblem("--from and --mapping both name the mapping", "give one of them")
    refused = given(ctx, NEVER_WITH_ADAPTER)
    if refused:
        raise UsageProblem(
            f"{', '.join(refused)} cannot be used with --from/--mapping",
            "the mapping decides the kind and the adapter writes parquet_info.json itself: leave them out",
        )
    if not get_backend(opts["target"], "--to").reads_shards:
        shard_only = [*(o for o in SHARD_OPTIONS if o != "overwrite"), "staging"]
        refuse_given(ctx, shard_only, "--to webdataset", "--to parquet writes BAGEL parquet into DST: leave them out")


def _resolve(opts: dict[str, Any]) -> Any:
    """The mapping (and the ``--where`` text parsed), checked before any file is read."""
    from ..adapters import FilterError, MappingError, parse_filter, resolve_mapping

    try:
        mapping = resolve_mapping(opts["adapter"] or opts["mapping_file"])
        if opts["where"]:
            parse_filter(opts["where"])
    except (MappingError, FilterError) as exc:
        where = "--where: " if isinstance(exc, FilterError) else ""
        raise UsageProblem(where + _one_line(exc)) from None
    return mapping


def _adapt(src: str, dst: str, mapping: Any, opts: dict[str, Any], kw: dict[str, Any], so: Any) -> dict[str, Any]:
    from ..adapters import run_adapter

    progress = not (kw["no_progress"] or SETTINGS.quiet)
    common = dict(where=opts["where"], media_dir=kw["media_dir"], split=opts["split"], storage_options=so)
    common["overwrite"] = kw["overwrite"]  # both targets: another adaptation (or conversion) in DST is replaced
    if get_backend(opts["target"], "--to").reads_shards:
        common.update({k: kw[k] for k in (*SHARD_OPTIONS, "workers", "engine", "ray_address")}, staging=opts["staging"])
    with running_executor(kw["engine"], kw["workers"], kw["ray_address"]) as runner:
        result: dict[str, Any] = run_adapter(
            src, dst, mapping, to=opts["target"], executor=runner, progress=progress, **common
        )
    return result


def convert_from(
    ctx: click.Context, src: str, dst: str, opts: dict[str, Any], kw: dict[str, Any], so: dict[str, Any] | None
) -> None:
    """Run the adaptation the command line asks for and print its summary (drops: only counted)."""
    _check(ctx, opts)
    mapping = _resolve(opts)
    check_bucket(src, so)
    check_bucket(dst, so)
    from ..adapters import FilterError, MappingError, NoChainsError
    from ..conversion.config import PlacesOverlapError
    from ..conversion.dst import ForeignFilesError
    from ..data.adapted.sources import SeveralSnapshotsError

    try:
        result = _adapt(src, dst, mapping, opts, kw, so)
    except ForeignFilesError as exc:  # a FileExistsError of the shard DST: named like the plain convert's
        raise foreign_files_problem(dst, exc.names) from None
    except (MappingError, FilterError, FileExistsError, PlacesOverlapError, SeveralSnapshotsError) as exc:
        raise UsageProblem(_one_line(exc)) from None
    except NoChainsError as exc:
        raise DataProblem(_one_line(exc)) from None
    summary = {k: v for k, v in result["adapt"].items() if k != "drops"}
    click.echo(json.dumps({"adapt": summary, "convert": result["convert"]}, indent=2))
    if summary["dropped"]:
        codes = ", ".join(f"{code}: {n}" for code, n in summary["dropped_by_code"].items())
        click.echo(
            f"{counted(summary['dropped_rows'], 'source row')} dropped ({codes}); "
            f"each is listed in {summary['report']}",
            err=True,
        )


@main.command()
@click.argument("src")
@click.argument("dst")
@click.option(
    "--schema",
    type=KindChoice(),
    help="Source dataset kind; detected from the columns when omitted (the JSONL + media kind from a .jsonl SRC).",
)
@click.option(
    "--media-dir",
    help="JSONL SRC: the directory the JSONL's image/video names are relative to. Give the same string as "
    "the source backend's data_dir: it is recorded and decides the epoch order. With --from/--mapping: "
    "the directory that image structs holding only a path (no bytes) are relative to.",
)
@click.option(
    "--from",
    "adapter",
    type=LiveChoice(adapter_names),
    help="SRC is this public dataset in its own Hub schema (data/*.parquet, HF Image structs): adapt its "
    "rows to BAGEL edit chains first. See 'Bring your dataset' in the README.",
)
@click.option(
    "--mapping",
    "mapping_file",
    metavar="FILE",
    help="Like --from, with your own YAML/JSON mapping file (copy a built-in one from "
    "editstream/data/adapted/builtin).",
)
@click.option(
    "--to",
    "target",
    type=click.Choice(TARGETS),
    default=TARGETS[0],
    show_default=True,
    help="With --from/--mapping: webdataset writes shards to DST (from BAGEL parquet staged beside it); "
    "parquet writes BAGEL's parquet + parquet_info.json to DST.",
)
@click.option(
    "--where",
    metavar="EXPR",
    help="With --from/--mapping: keep only source rows that match, e.g. \"o_score >= 8 and task == 'add'\" "
    "(replaces the mapping's own filter; '' turns it off).",
)
@click.option("--split", help="With --from/--mapping: read only SRC's {split}-*.parquet files.")
@click.option(
    "--staging",
    metavar="DIR",
    help="With --from/--mapping and --to webdataset: where the BAGEL parquet goes (default: DST-parquet).",
)
@click.option(
    "--allow-outside-media-dir",
    is_flag=True,
    help="JSONL SRC: read media names outside --media-dir (absolute, or climbing out with ..); "
    "refused by default, so a JSONL cannot copy other files into the shards.",
)
@click.option("--parquet-info", help="parquet_info JSON (row groups per file); footers otherwise.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Worker processes (default: the CPU count); with --engine ray, the most shards in flight "
    "at once (default: twice the cluster's CPUs). With --from/--mapping they write the adapted files too.",
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
    help="With --engine ray: the cluster to use, as for ray.init ('auto': the running cluster; "
    "default: RAY_ADDRESS, else a `ray start` cluster on this machine, else a new local instance).",
)
@click.option(
    "--layout",
    type=click.Choice(["rowgroup", "size"]),
    default="rowgroup",
    show_default=True,
    help="rowgroup: one shard per parquet row group (matches the parquet backend); size: shards of a "
    "target size (implied by --shard-size / --samples-per-shard).",
)
@click.option("--shard-size", type=SizeType(), help="Target shard size (implies --layout size), e.g. 512MB.")
@click.option("--samples-per-shard", type=click.IntRange(min=1), help="Samples per shard (implies --layout size).")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace a finished conversion in DST (with --from/--mapping: another adaptation in DST or its "
    "staging); removes only editstream's own files (other files stay).",
)
@click.option(
    "--drop-bad-rows",
    is_flag=True,
    help="Leave out rows that fail the schema checks (loses equivalence with the parquet backend).",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the plan (files, row groups, shards, estimated bytes); write nothing."
)
@click.option("--no-progress", is_flag=True, help="No progress bar or progress lines.")
@click.option(
    "--digest",
    type=click.Choice(["xxh3_128", "sha256"]),
    default="xxh3_128",
    show_default=True,
    help="Digest of every shard and idx, recorded in the manifest and checked by verify and resume.",
)
@click.option(
    "--break-lock",
    is_flag=True,
    help="Take over DST's lock now, when you know the conversion that holds it is dead.",
)
@with_storage_options()
@click.pass_context
def convert(ctx: click.Context, src: str, dst: str, so: dict[str, Any] | None, **kw: Any) -> None:
    """Convert the parquet dataset SRC (or a JSONL file of VLM conversations, with --media-dir) into WebDataset
    tar shards under DST (local or s3://). A JSONL becomes shards of consecutive lines
    (--samples-per-shard, 1000 by default, or --shard-size). With --from NAME or --mapping FILE, SRC is
    a public dataset in its own schema (a Hub data/ directory): its rows are adapted to BAGEL edit
    chains first (--to parquet writes BAGEL parquet instead of shards). An interrupted run resumes
    when run again."""
    adapting = {k: kw.pop(k) for k in ADAPTER_OPTIONS}
    layout = _layout(ctx, kw.pop("layout"), kw["shard_size"], kw["samples_per_shard"])
    if adapting["adapter"] is not None or adapting["mapping_file"] is not None:
        convert_from(ctx, src, dst, adapting, dict(kw, layout=layout), so)
        return
    advice = "add --from NAME (a built-in adapter) or --mapping FILE, or leave them out"
    refuse_given(ctx, ONLY_WITH_ADAPTER, "an adaptation", advice)
    if not kw["dry_run"]:
        from ..conversion.executors import warm_up

        warm_up(kw["engine"], kw["workers"])  # the fork server imports while SRC is checked and planned
    schema = kw.pop("schema")
    found = parquet_source(src, so, dst)
    check_convert_usage(src, dst, found, schema, kw["media_dir"], so)
    check_bucket(dst, so)
    from ..conversion.dst import ForeignFilesError

    try:
        summary = _run(src, dst, schema=schema, layout=layout, storage_options=so, **kw)
    except ForeignFilesError as exc:
        raise foreign_files_problem(dst, exc.names) from None
    click.echo(json.dumps(summary, indent=2))
    if summary.get("num_bad_rows"):
        action = "dropped" if kw["drop_bad_rows"] else "kept verbatim"
        click.echo(f"{counted(summary['num_bad_rows'], 'bad row')} {action}; see {summary['report']}", err=True)
    notes = summary.get("num_image_notes", 0)
    if notes:
        what = "1 image decodes" if notes == 1 else f"{notes} images decode"
        click.echo(
            f"{what} to other pixels than they hold, as in the reference (16-bit greyscale PNGs turn white); "
            f"see image_notes in {summary['report']}",
            err=True,
        )


API_OPTIONS: tuple[str, ...] = ("schema", "layout", "storage_options", "media_dir", "allow_outside_media_dir")
API_OPTIONS += ("parquet_info", "shard_size", "samples_per_shard", "overwrite", "drop_bad_rows", "digest")
API_OPTIONS += ("workers", "engine")
"""The command's options that ``conversion.convert`` (and its dry run) take by the same name."""


def _run(src: str, dst: str, **kw: Any) -> dict[str, Any]:
    """The conversion, or with ``--dry-run`` its plan (no executor started, no lock taken)."""
    from ..conversion import convert as run
    from ..conversion.dst import dry_run

    api = {k: kw[k] for k in API_OPTIONS}
    if kw["dry_run"]:
        return dry_run(src, dst, progress=False, **api)
    with running_executor(kw["engine"], kw["workers"], kw["ray_address"]) as runner:
        progress = not (kw["no_progress"] or SETTINGS.quiet)
        return run(
            src,
            dst,
            ray_address=kw["ray_address"],
            executor=runner,
            progress=progress,
            break_lock=kw["break_lock"],
            **api,
        )
