"""``verify`` for JSONL + media roots: ``lines.jsonl`` against its record and the source JSONL, and
(with a source) every sample's media against the media directory now, so older roots check alike."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..format import manifest as mf
from ..format.sft import LINE_COLUMN, MEDIA_COLUMN, SftInfo, media_path
from ..io import storage
from ..io.lines import LineDecodeError, decode_lines
from .lines_plan import resolve_media_dir
from .lines_rows import line_media
from .problems import Problem


def _blob_difference(name: str, url: str, converted: Any, now: Any) -> str | None:
    """How one media file differs between the sample (``converted``) and the media directory now."""
    if converted == now:
        return None
    if now is None:
        return f"media {name!r} ({url}) is gone since the conversion (deleted or unreadable)"
    if converted is None:
        return f"media {name!r} ({url}) was missing at conversion and exists now"
    if isinstance(converted, bytes) and isinstance(now, bytes):
        return f"media {name!r} ({url}) changed since the conversion ({len(converted)} bytes then, {len(now)} now)"
    return f"media {name!r} ({url}) is no longer what was converted (a file then and a folder now, or the reverse)"


@dataclass(frozen=True)
class MediaComparison:
    """Compares a converted line's media with the media directory now (picklable: it runs in verify's workers)."""

    media_dir: str
    """The recorded media directory, resolved as the converter resolves it."""
    allow_outside: bool
    storage_options: dict[str, Any] | None

    def __call__(self, row: Mapping[str, Any]) -> list[str]:
        """One text per media file (or folder entry) of ``row`` that differs now, naming it and its path."""
        line = row.get(LINE_COLUMN)
        converted = row.get(MEDIA_COLUMN)
        if not isinstance(line, str) or not isinstance(converted, dict):
            return []  # not a converted line: the decode and key checks report it
        now = line_media(self.media_dir, self.storage_options, self.allow_outside)(line)
        return _media_differences(self.media_dir, "", converted, now)


def _media_differences(directory: str, prefix: str, then: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """One text per media file (or frame folder entry, named ``prefix`` + entry) that differs now."""
    out = []
    for name in dict.fromkeys([*then, *now]):
        url = media_path(directory, name)
        then_value, now_value = then.get(name), now.get(name)
        if isinstance(then_value, dict) and isinstance(now_value, dict):
            out += _media_differences(url, prefix + name, then_value, now_value)
            if list(then_value) != list(now_value) and set(then_value) == set(now_value):
                out.append(f"frame folder {name!r} ({url}) lists its entries in another order now")
        elif (text := _blob_difference(prefix + name, url, then_value, now_value)) is not None:
            out.append(text)
    return out


def lines_media_comparison(
    root: str, manifest: mf.Manifest, source: str | None, storage_options: dict[str, Any] | None
) -> MediaComparison | None:
    """The per-sample media comparison of ``verify --source``; ``None`` without a source or a readable record."""
    if source is None:
        return None
    try:
        info = SftInfo.from_manifest(manifest, root)
    except mf.ManifestError:
        return None
    return MediaComparison(resolve_media_dir(info.media_dir), info.allow_outside_media_dir, storage_options)


def check_lines_root(
    root: str, manifest: mf.Manifest, source: str | None, storage_options: dict[str, Any] | None
) -> list[Problem]:
    """Problems with the root's line copy (and with its source JSONL, when given)."""
    try:
        info = SftInfo.from_manifest(manifest, root)
    except mf.ManifestError as exc:
        return [Problem("manifest", None, str(exc))]
    url = storage.join(root, info.lines_path)
    problems: list[Problem] = []
    try:
        data = storage.read_bytes(url, storage_options)
    except FileNotFoundError:
        return [Problem("lines", None, f"{url} does not exist")]
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != info.lines_bytes or digest != info.lines_sha256:
        said = f"{info.lines_bytes} bytes with sha256 {info.lines_sha256}"
        problems.append(
            Problem("lines", None, f"{url}: {len(data)} bytes with sha256 {digest}, the manifest says {said}")
        )
    else:
        try:
            count = len(decode_lines(data, url))
        except LineDecodeError as exc:
            count = -1
            problems.append(Problem("lines", None, str(exc)))
        if count >= 0 and count != info.num_lines:
            problems.append(Problem("lines", None, f"{url}: {count} lines, the manifest says {info.num_lines}"))
    if source is not None:
        try:
            source_digest = hashlib.sha256(storage.read_bytes(source, storage_options)).hexdigest()
        except FileNotFoundError:
            problems.append(Problem("source", None, f"{source} does not exist"))
        else:
            if source_digest != info.lines_sha256:
                problems.append(Problem("source", None, f"{source} is not the JSONL that was converted (hash differs)"))
    return problems
