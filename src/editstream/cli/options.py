"""Options several subcommands share: storage options, sizes, schema names."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

SCHEMA_CHOICES = ["unified_edit", "t2i", "t2i_pretrain", "vlm_sft"]
"""Schema names a user may type: ``t2i`` and ``t2i_pretrain`` are one schema."""


def canonical_schema(name: str | None) -> str | None:
    """``t2i`` -> ``t2i_pretrain``; other names as given."""
    return "t2i_pretrain" if name == "t2i" else name


def storage_options(pairs: tuple[str, ...], endpoint_url: str | None) -> dict | None:
    """``-o key=value`` pairs (values parsed as JSON when they parse) plus ``--endpoint-url``."""
    opts: dict = {}
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
    click.option("--endpoint-url", default=None, help="S3 endpoint URL (e.g. MinIO); same as -o endpoint_url=..."),
]


def with_storage_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``-o/--storage-option`` and ``--endpoint-url`` to a command."""
    for option in reversed(_STORAGE_OPTIONS):
        fn = option(fn)
    return fn


class SizeType(click.ParamType):
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
