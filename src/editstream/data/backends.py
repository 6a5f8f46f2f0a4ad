"""The backends every dataset, group config and command reads through, as objects: :data:`PARQUET` (the data as
published; ``source`` is another name for it) and :data:`WEBDATASET` (converted tar shards). Code asks a backend
what it does (``reads_shards``, ``options``); only this module spells their names. Apart from the readers, so the
CLI imports it cheaply."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


class Backend(str):
    """One backend: its name (it compares equal to it, so ``dataset.backend`` stays the string users pass) and what
    it reads. Made only here and pickled by name, so every process holds the registry's own objects."""

    reads: str
    """What it reads, in a message: ``{url} holds ..., not {reads}``."""
    reads_shards: bool
    """It reads converted shards, which hold the source's rows, lines and adapted chains themselves."""
    options: tuple[str, ...]
    """Keyword arguments its parquet-slice row sources take beyond the common ones."""

    def __new__(cls, name: str, reads: str, reads_shards: bool, options: tuple[str, ...]) -> Backend:
        made = super().__new__(cls, name)
        made.reads, made.reads_shards, made.options = reads, reads_shards, options
        return made

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return get_backend, (str(self), "a pickled backend")


PARQUET = Backend("parquet", "parquet files", False, ("retry", "file_order", "member_bytes"))
WEBDATASET = Backend(
    "webdataset",
    "converted shards (no manifest.json)",
    True,
    (
        "retry",
        "block_size",
        "max_member_size",
        "prefetch",
        "columns",
        "readahead_bytes",
        "file_order",
        "verify_reads",
        "member_bytes",
    ),
)

BACKENDS: Mapping[str, Backend] = MappingProxyType({"parquet": PARQUET, "source": PARQUET, "webdataset": WEBDATASET})
"""Each accepted ``backend`` value and the backend it means."""

TARGETS = (WEBDATASET, PARQUET)
"""What an adaptation writes for (``--to``): shards for the backend reading them, or BAGEL parquet (the first is the
default)."""

AUTO = "auto"
"""The commands' ``--backend`` value that lets the data say which backend reads it."""


def get_backend(value: object, owner: str) -> Backend:
    """The backend ``value`` names; a ``ValueError`` naming ``owner`` and the choices otherwise."""
    if not isinstance(value, str) or value not in BACKENDS:
        raise ValueError(f"{owner}: unknown backend {value!r}; choose one of {list(BACKENDS)}")
    return BACKENDS[value]


def chosen_backend(value: str, owner: str) -> Backend | None:
    """A command's ``--backend``: the backend it names, or ``None`` for ``auto`` (the data decides)."""
    return None if value == AUTO else get_backend(value, owner)
