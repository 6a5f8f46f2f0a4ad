"""``editstream convert SRC DST --from NAME`` (or ``--mapping FILE``): adapt a public dataset in its own
schema (then convert it to shards with ``--to webdataset``); a mapping, filter or DST it cannot use is a usage error."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from .app import SETTINGS
from .errors import DataProblem, UsageProblem
from .paths import check_bucket


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
"""Options of the shard conversion: meaningless (so refused) with ``--to parquet``; ``--workers``,
``--engine`` and ``--ray-address`` run the adaptation's output files too, so both targets take them."""


def given(ctx: click.Context, names: Sequence[str]) -> list[str]:
    """The options among ``names`` (parameter names) typed on the command line, as their flags."""
    default = (None, click.core.ParameterSource.DEFAULT)
    flags = {param.name: param.opts[0] for param in ctx.command.params}
    return [flags[name] for name in names if ctx.get_parameter_source(name) not in default]


def refuse_adapter_options(ctx: click.Context) -> None:
    """``--to``/``--where``/``--split``/``--staging`` without ``--from``/``--mapping`` are a usage error."""
    stray = given(ctx, ONLY_WITH_ADAPTER)
    if stray:
        raise UsageProblem(
            f"{', '.join(stray)} appl{'ies' if len(stray) == 1 else 'y'} to an adaptation only",
            "add --from NAME (a built-in adapter) or --mapping FILE, or leave them out",
        )


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
    if opts["target"] == "parquet":
        shard_only = given(ctx, SHARD_OPTIONS) + given(ctx, ["staging"])
        if shard_only:
            raise UsageProblem(
                f"{', '.join(shard_only)} appl{'ies' if len(shard_only) == 1 else 'y'} to --to webdataset only",
                "--to parquet writes BAGEL parquet into DST: leave them out",
            )


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
    if opts["target"] == "webdataset":
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

    try:
        result = _adapt(src, dst, mapping, opts, kw, so)
    except ForeignFilesError as exc:  # a FileExistsError of the shard DST: named like the plain convert's
        raise foreign_files_problem(dst, exc.names) from None
    except (MappingError, FilterError, FileExistsError, PlacesOverlapError) as exc:
        raise UsageProblem(_one_line(exc)) from None
    except NoChainsError as exc:
        raise DataProblem(_one_line(exc)) from None
    summary = {k: v for k, v in result["adapt"].items() if k != "drops"}
    click.echo(json.dumps({"adapt": summary, "convert": result["convert"]}, indent=2))
    if summary["dropped"]:
        codes = ", ".join(f"{code}: {n}" for code, n in summary["dropped_by_code"].items())
        click.echo(
            f"{summary['dropped_rows']} source rows dropped ({codes}); each is listed in {summary['report']}",
            err=True,
        )
