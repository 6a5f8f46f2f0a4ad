"""What identifies a source file's content without reading it: a local file's size, mtime (ns) and inode
(replacing it changes the inode); an object's size and ETag. A changed source is never trusted."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..io import storage
from ..io.storage import StorageOptions

Identity = dict[str, Any]
"""``{"size": ..., "mtime_ns": ..., "inode": ...}`` (local) or ``{"size": ..., "etag": ...}`` (object stores)."""


class SourceChangedError(OSError):
    """A source file is not the one the conversion was planned (or made) from."""


def file_identity(url: str, storage_options: StorageOptions | None = None) -> Identity:
    """The identity of the file at ``url`` (see the module docstring)."""
    if storage.is_local(url):
        st = os.stat(storage.local_path(url))
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}
    fs, path = storage.url_to_fs(url, storage_options)
    fs.invalidate_cache(path)  # a listing's cached entry would show the object as it was listed
    info = fs.info(path)
    tag = info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("LastModified") or info.get("mtime")
    return {"size": int(info.get("size") or 0), "etag": str(tag).strip('"') if tag is not None else None}


def identities(urls: Iterable[str], storage_options: StorageOptions | None = None) -> dict[str, Identity]:
    """The identity of every file, by URL."""
    return {url: file_identity(url, storage_options) for url in urls}


def difference(before: Mapping[str, Any], now: Mapping[str, Any]) -> str | None:
    """What changed between two identities of one file (``None``: nothing)."""
    changed = [f"{key} {before.get(key)} -> {now.get(key)}" for key in before if before.get(key) != now.get(key)]
    return ", ".join(changed) or None


def check_unchanged(url: str, expected: Mapping[str, Any], storage_options: StorageOptions | None = None) -> None:
    """Raise :class:`SourceChangedError` naming ``url`` and what changed when its identity is not ``expected``."""
    what = difference(expected, file_identity(url, storage_options))
    if what is not None:
        raise SourceChangedError(
            f"{url} changed since the conversion was planned ({what}); "
            "run the conversion again to convert it as it is now"
        )


def fingerprint(data: Any) -> str:
    """sha256 of ``data`` as canonical JSON: what a done record (or a kept plan index) must match to be kept."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
