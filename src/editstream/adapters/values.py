"""Source cell values -> chain parts: image bytes (Hugging Face Image structs unwrapped) and phrasings.

A Hugging Face ``Image`` column is stored as ``struct<bytes: binary, path: string>``: the bytes
inline, or a null ``bytes`` and a ``path`` relative to where the files were (the media
directory). Anything that cannot become an image or a list of phrasings raises
:class:`BadValue` with a reason that names the column, so the row is dropped and counted.
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

from ..io import storage


class BadValue(Exception):
    """A cell (or chain) that cannot be adapted: ``reason`` for the report, ``code`` to count it by,
    ``row`` the index of the failing row within its chain."""

    def __init__(self, reason: str, code: str, row: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code
        self.row = row


class MediaDir:
    """Reads the files a null-bytes image struct points at, inside one media directory only."""

    def __init__(self, root: str | None, storage_options: storage.StorageOptions | None = None) -> None:
        self.root = root
        self.storage_options = storage_options

    def read(self, column: str, path: str) -> bytes:
        """The bytes of ``path`` under the media directory; ``BadValue`` if absent, outside it or unset."""
        if self.root is None:
            raise BadValue(
                f"{column}: no image bytes, only the path {path!r}, and no media_dir to resolve it", "no_media_dir"
            )
        clean = posixpath.normpath(path.replace("\\", "/"))
        if clean.startswith("/") or clean == ".." or clean.startswith("../") or "://" in path:
            raise BadValue(f"{column}: image path {path!r} is not inside the media directory", "media_outside")
        url = storage.join(self.root, clean)
        try:
            return storage.read_bytes(url, self.storage_options)
        except FileNotFoundError:
            raise BadValue(f"{column}: media file {url} is missing", "media_missing") from None
        except IsADirectoryError:
            raise BadValue(f"{column}: media path {url} is a directory", "media_missing") from None


def image_bytes(value: Any, column: str, media: MediaDir) -> bytes:
    """The image bytes of one cell: raw binary, an Image struct (bytes, else path), or a path string."""
    if value is None:
        raise BadValue(f"{column} is null", "null_image")
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) == 0:
            raise BadValue(f"{column} is empty", "null_image")
        return bytes(value)
    if isinstance(value, dict):
        data = value.get("bytes")
        if data is not None and len(data) > 0:
            return bytes(data)
        path = value.get("path")
        if isinstance(path, str) and path:
            return media.read(column, path)
        raise BadValue(f"{column} has neither image bytes nor a path", "null_image")
    if isinstance(value, str) and value:
        return media.read(column, value)
    raise BadValue(f"{column} is a {type(value).__name__}, not an image", "null_image")


def _checked(column: str, items: Any) -> list[str]:
    if not isinstance(items, list) or not items:
        raise BadValue(f"{column} holds no phrasings", "bad_instruction")
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise BadValue(f"{column} holds a phrasing that is not a non-empty string: {item!r}", "bad_instruction")
    return list(items)


def phrasings(value: Any, column: str, fmt: str) -> list[str]:
    """The phrasings of one edit from a cell of format ``string``, ``list`` or ``json``."""
    if value is None:
        raise BadValue(f"{column} is null", "bad_instruction")
    if fmt == "string":
        return _checked(column, [value])
    if fmt == "list":
        return _checked(column, value)
    if not isinstance(value, str):
        raise BadValue(f"{column} is a {type(value).__name__}, not a JSON string", "bad_instruction")
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise BadValue(f"{column} is not valid JSON: {exc}", "bad_instruction") from None
    return _checked(column, [parsed] if isinstance(parsed, str) else parsed)
