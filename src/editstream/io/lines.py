"""JSONL text as lines, exactly as the reference's ``open(path, "r").readlines()`` reads them (the line
texts are sort keys of its epoch order), whatever the storage."""

from __future__ import annotations

import io

from .storage import StorageOptions, read_bytes

ENCODING = "utf-8"


class LineDecodeError(ValueError):
    """A text file that is not valid UTF-8; names the file and the byte offset."""


def _not_utf8(data: bytes, where: str) -> LineDecodeError:
    """The error for ``data`` that is not UTF-8, with the offset in the whole file (not in a chunk)."""
    try:
        data.decode(ENCODING)
    except UnicodeDecodeError as exc:
        return LineDecodeError(f"{where}: not valid {ENCODING} at byte {exc.start}: {exc.reason}")
    return LineDecodeError(f"{where}: not valid {ENCODING}")  # pragma: no cover - the wrapper agreed it was bad


def decode_lines(data: bytes, where: str = "<bytes>", newline: str | None = None) -> list[str]:
    """The lines ``open(path, "r", encoding="utf-8", newline=newline).readlines()`` gives for a file of ``data``."""
    try:
        with io.TextIOWrapper(io.BytesIO(data), encoding=ENCODING, newline=newline) as text:
            return text.readlines()
    except UnicodeDecodeError:
        raise _not_utf8(data, where) from None


def line_start_offsets(data: bytes, where: str = "<bytes>") -> list[int]:
    """Byte offset where each line of ``data`` starts (where :func:`decode_lines` splits), plus ``len(data)``."""
    raw_lines = decode_lines(data, where, newline="")  # untranslated endings: their byte lengths add up to the file
    offsets = [0]
    for line in raw_lines:
        offsets.append(offsets[-1] + len(line.encode(ENCODING)))
    if offsets[-1] != len(data):  # pragma: no cover - a decoder that dropped bytes would be a bug
        raise LineDecodeError(f"{where}: lines cover {offsets[-1]} of {len(data)} bytes")
    return offsets


def read_jsonl_lines(url: str, storage_options: StorageOptions | None = None) -> list[str]:
    """Every line of the text file at ``url`` (local or any fsspec URL), newline kept, one read."""
    return decode_lines(read_bytes(url, storage_options), url)
