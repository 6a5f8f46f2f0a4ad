"""Options several subcommands share: storage options, sizes, dataset kind names (from the registry)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from typing import Any

import click

from ..kinds import DatasetKind, all_kinds, get_kind


class LiveChoice(click.Choice[str]):
    """A choice whose names ``names()`` reads when they are needed: a plug-in installed later is offered too, and
    ``editstream --help`` loads nothing to list them."""

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        super().__init__((), case_sensitive=True)
        self.names = names

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self.names())

    @choices.setter
    def choices(self, value: Any) -> None:
        """Ignored: the choices are always read from ``names()``."""


class KindChoice(LiveChoice):
    """The names and aliases of the registered kinds ``want`` accepts; the value is the kind's canonical name."""

    def __init__(self, want: Callable[[DatasetKind], bool] | None = None) -> None:
        super().__init__(lambda: (n for kind in all_kinds() if want is None or want(kind) for n in kind.names))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if isinstance(value, DatasetKind):
            return value.name
        return get_kind(str(super().convert(value, param, ctx))).name


def adapter_names() -> list[str]:
    """``--from``'s names: the built-in adapters (mapping files shipped with the package), sorted."""
    from ..adapters import builtin_names

    return builtin_names()


def trainable(kind: DatasetKind) -> bool:
    """Kinds with a training dataset (what ``stream`` builds)."""
    return kind.dataset is not None


def storage_options(pairs: tuple[str, ...], endpoint_url: str | None) -> dict[str, Any] | None:
    """``-o key=value`` pairs (values parsed as JSON when they parse) plus ``--endpoint-url``."""
    opts: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="'-o' / '--storage-option'")
        k, v = pair.split("=", 1)
        try:
            opts[k] = json.loads(v)
        except json.JSONDecodeError:
            opts[k] = v
    if endpoint_url:
        opts["endpoint_url"] = endpoint_url
    return opts or None


def with_storage_options(short: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add ``-o/--storage-option`` (without ``-o`` where ``short`` is false) and ``--endpoint-url`` to a command,
    which is given them parsed (:func:`storage_options`) as ``so``."""
    flag = "-o" if short else "--storage-option"

    def add(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def parsed(*args: Any, storage_option: tuple[str, ...], endpoint_url: str | None, **kwargs: Any) -> Any:
            return command(*args, so=storage_options(storage_option, endpoint_url), **kwargs)

        pairs = click.option(
            *(["-o"] if short else []),
            "--storage-option",
            "storage_option",
            multiple=True,
            metavar="KEY=VALUE",
            help=f"fsspec storage option for the paths (repeatable), e.g. {flag} anon=true. The standard AWS "
            "variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL ...) work too.",
        )
        endpoint = click.option("--endpoint-url", help=f"S3 endpoint URL (e.g. MinIO); same as {flag} endpoint_url=...")
        return pairs(endpoint(parsed))

    return add


class SizeType(click.ParamType[int]):
    """A byte size such as ``512MB``, ``1GiB`` or ``100000``."""

    name = "SIZE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        from ..conversion.config import parse_size

        try:
            size = parse_size(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if size <= 0:
            self.fail(f"{value!r} is not a positive size", param, ctx)
        return size
