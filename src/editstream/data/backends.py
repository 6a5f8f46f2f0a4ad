"""The backend flag every dataset class, group config and command accepts: one table, one rule.

``"parquet"`` reads the data as published (parquet files, a JSONL and its media) and ``"source"`` is
another name for it (the natural word for JSONL data); ``"webdataset"`` reads tar shards (converted
by ``editstream convert``, or foreign). Kept apart from the data layer's readers so the command line
can offer the choices without importing them.
"""

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
