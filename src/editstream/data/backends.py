"""The backend flag every dataset, group config and command accepts: ``parquet`` (``source`` is another name:
the data as published) or ``webdataset`` (tar shards); apart from the readers, so the CLI imports it cheaply."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

BACKENDS: Mapping[str, str] = MappingProxyType({"parquet": "parquet", "source": "parquet", "webdataset": "webdataset"})
"""Each accepted ``backend`` value and the backend it means."""


def check_backend(value: object, owner: str) -> str:
    """The backend ``value`` means (``"parquet"`` or ``"webdataset"``); a ``ValueError`` naming ``owner`` otherwise."""
    if not isinstance(value, str) or value not in BACKENDS:
        raise ValueError(f"{owner}: unknown backend {value!r}; choose one of {list(BACKENDS)}")
    return BACKENDS[value]
