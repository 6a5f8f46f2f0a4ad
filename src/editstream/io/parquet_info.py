"""``parquet_info``: a user's ``{path: {"num_row_groups": n, ...}}`` file, matched by exact path, else
by a unique file name, so it still applies after the dataset moved to another directory or bucket."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from . import storage


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


class ParquetInfo:
    """Row-group counts (and any other per-file facts) a user supplied, looked up by file URL."""

    def __init__(self, entries: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.entries: dict[str, Mapping[str, Any]] = dict(entries or {})
        by_name: dict[str, list[str]] = {}
        for key in self.entries:
            by_name.setdefault(_basename(key), []).append(key)
        self._by_name = {name: keys[0] for name, keys in by_name.items() if len(keys) == 1}

    @classmethod
    def load(
        cls, source: str | Mapping[str, Any] | ParquetInfo | None, storage_options: storage.StorageOptions | None = None
    ) -> ParquetInfo:
        """From a mapping, a JSON file path/URL, another ``ParquetInfo`` or ``None`` (empty)."""
        if isinstance(source, ParquetInfo):
            return source
        if source is None:
            return cls()
        if isinstance(source, Mapping):
            return cls(source)
        try:
            raw = storage.read_bytes(source, storage_options)
        except FileNotFoundError:
            raise FileNotFoundError(f"parquet_info file not found: {source}") from None
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"parquet_info file {source} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError(f"parquet_info file {source} holds a {type(data).__name__}, not a JSON object")
        return cls(data)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def entry(self, url: str) -> Mapping[str, Any] | None:
        """The entry of ``url``: by exact key, else by a unique file name, else ``None``."""
        found = self.entries.get(url)
        if found is not None:
            return found
        key = self._by_name.get(_basename(url))
        return self.entries[key] if key is not None else None

    def num_row_groups(self, url: str) -> int | None:
        """``num_row_groups`` of ``url``'s entry, or ``None`` when the info does not say."""
        found = self.entry(url)
        if found is None or "num_row_groups" not in found:
            return None
        value = found["num_row_groups"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"parquet_info entry of {url}: num_row_groups must be an integer >= 0, got {value!r}")
        return value
