"""Options several subcommands share: storage options, sizes, dataset kind names (from the registry)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from ..kinds import DatasetKind, all_kinds, get_kind


class KindChoice(click.Choice[str]):
    """The names and aliases of the registered kinds ``want`` accepts, read each time (a plug-in installed
    later is offered too); the value is the kind's canonical name."""

    def __init__(self, want: Callable[[DatasetKind], bool] | None = None) -> None:
        super().__init__((), case_sensitive=True)
        self.want = want

    @property
    def choices(self) -> tuple[str, ...]:
        """Every name and alias of the wanted kinds, in registry order."""
        return tuple(n for kind in all_kinds() if self.want is None or self.want(kind) for n in kind.names)

    @choices.setter
    def choices(self, value: Any) -> None:
        """Ignored: the choices always come from the registry."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if isinstance(value, DatasetKind):
            return value.name
        return get_kind(str(super().convert(value, param, ctx))).name


class AdapterChoice(click.Choice[str]):
    """The built-in adapter names, read when needed so ``editstream --help`` does not load the adapters."""

    def __init__(self) -> None:
        super().__init__((), case_sensitive=True)

    @property
    def choices(self) -> tuple[str, ...]:
        """The names of the mapping files shipped with the package, sorted."""
        from ..adapters import builtin_names

        return tuple(builtin_names())

    @choices.setter
    def choices(self, value: Any) -> None:
        """Ignored: the choices always come from the shipped mapping files."""


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


_STORAGE_OPTIONS = [
    click.option(
        "-o",
        "--storage-option",
        "storage_option",
        multiple=True,
        metavar="KEY=VALUE",
        help="fsspec storage option for the paths (repeatable), e.g. -o anon=true. The standard AWS "
        "variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL ...) work too.",
    ),
    click.option("--endpoint-url", help="S3 endpoint URL (e.g. MinIO); same as -o endpoint_url=..."),
]


def with_storage_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``-o/--storage-option`` and ``--endpoint-url`` to a command."""
    for option in reversed(_STORAGE_OPTIONS):
        fn = option(fn)
    return fn


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
