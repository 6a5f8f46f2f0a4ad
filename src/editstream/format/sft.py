"""What the converter and loader both need to know about the rows of a JSONL + media kind: a converted
line holds ``{"line": <text>, "media": {<name>: bytes | None, <folder>/: {<entry>: bytes | None}}}``."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .manifest import Manifest, ManifestError

LINE_COLUMN = "line"
MEDIA_COLUMN = "media"
COLUMNS = ((LINE_COLUMN, "string"), (MEDIA_COLUMN, "struct<name: binary | struct<entry: binary>>"))
"""The columns a converted line has, as the manifest lists them."""
LINES_COPY = "lines.jsonl"
"""Name of the byte copy of the source JSONL inside a converted root."""

# The reference's pattern, kept as it is: the dot is a wildcard and "jpg" is case-sensitive.
_FRAME_NUMBER = re.compile(r"_(\d+).jpg$")


def extract_frame_number(name: str) -> int:
    """The frame number in a name ending ``_<digits>.jpg`` (``.`` matches any character), else -1."""
    match = _FRAME_NUMBER.search(name)
    return int(match.group(1)) if match else -1


def sort_frames(names: Iterable[str]) -> list[str]:
    """Frame names (or paths) in frame order, by :func:`extract_frame_number` of the base name; stable,
    so names without a number keep their listing order (the reference's ``os.listdir`` order)."""
    return sorted(names, key=lambda name: extract_frame_number(posixpath.basename(name)))


def is_frame_folder(name: str) -> bool:
    """A ``"video"`` value naming a folder of frames (it ends with ``/``) rather than a video file."""
    return name.endswith("/")


def media_path(image_dir: str, name: str) -> str:
    """Where the reference looks for ``name``: ``os.path.join(image_dir, name)`` on POSIX."""
    return posixpath.join(image_dir, name)


class MediaOutsideError(ValueError):
    """A media name that leads outside the media directory, refused unless the user opts out (a JSONL
    line is data, often someone else's); a ``ValueError``, so the loader counts the line as bad data."""


OPT_OUT = "--allow-outside-media-dir (allow_outside_media_dir=True)"
"""How a user says that names outside the media directory are meant (quoted in refusals)."""


def outside_media_dir(name: str) -> bool:
    """Whether ``name`` leads outside the media directory, from the name alone (so local and S3 agree)."""
    if name.startswith("/") or "://" in name:
        return True
    normal = posixpath.normpath(name)
    return normal == ".." or normal.startswith("../")


def check_media_name(name: Any) -> None:
    """Raise :class:`MediaOutsideError` for a string ``name`` outside the media directory."""
    if isinstance(name, str) and outside_media_dir(name):
        raise MediaOutsideError(f"media {name!r} is outside the media directory; refused (opt in with {OPT_OUT})")


def check_links(image_dir: str, path: str, name: str) -> None:
    """Raise :class:`MediaOutsideError` when the local ``path`` resolves through a link outside ``image_dir``."""
    if "://" in image_dir and not image_dir.startswith("file://"):
        return
    root = os.path.realpath(image_dir.removeprefix("file://"))
    real = os.path.realpath(path.removeprefix("file://"))
    if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
        raise MediaOutsideError(
            f"media {name!r} leads outside the media directory through a symbolic link (to {real}); "
            f"refused (opt in with {OPT_OUT})"
        )


def contained_media_path(image_dir: str, name: Any, allow_outside: bool = False) -> str:
    """:func:`media_path`, refusing a name outside ``image_dir`` (by text and by link) unless ``allow_outside``."""
    path = media_path(image_dir, name)
    if not allow_outside:
        check_media_name(name)
        check_links(image_dir, path, name)
    return path


def referenced_media(item: Any) -> list[tuple[str, bool]]:
    """``(name, is_folder)`` for the media a parsed JSONL line makes the reference open, in order
    (``"image"`` wins over ``"video"``; names that are not strings are left to the loader to fail on)."""
    if not isinstance(item, dict):
        return []
    if "image" in item:
        value = item["image"]
        names = value if type(value) is list else [value]
        return [(name, False) for name in names if isinstance(name, str)]
    if "video" in item and isinstance(item["video"], str):
        return [(item["video"], is_frame_folder(item["video"]))]
    return []


def line_images(item: Any, media: Mapping[str, Any], frames: int = 4) -> list[bytes | None]:
    """The images a converted line's ``media`` hold for what the parsed line ``item`` references, in order, to
    draw: an image's bytes (``None``: missing), a frame folder's first ``frames`` frames in the loader's order."""
    images: list[bytes | None] = []
    for name, is_folder in referenced_media(item):
        value = media.get(name + ("/" if is_folder and not name.endswith("/") else ""), media.get(name))
        if isinstance(value, dict):
            images.extend(value[frame] for frame in sort_frames(value)[:frames])
        elif isinstance(value, (bytes, type(None))):
            images.append(value)
    return images


@dataclass(frozen=True, kw_only=True)
class SftInfo:
    """The JSONL record of a converted root's manifest (``extra[<kind name>]``, the manifest's ``schema``)."""

    media_dir: str
    """The media directory exactly as given to the converter: the source backend's ``data_dir``."""
    jsonl: str
    """The source JSONL as given to the converter (for messages and drop locations)."""
    lines_path: str
    lines_bytes: int
    lines_sha256: str
    num_lines: int
    missing_media: int = 0
    """Lines that referenced media missing at conversion time (kept verbatim, listed in report.json)."""
    allow_outside_media_dir: bool = False
    """Whether media names outside the media directory were read (the user opted out)."""

    def to_dict(self) -> dict[str, Any]:
        """The record as the manifest's ``extra`` holds it (the opt-out only when taken, as older versions wrote)."""
        record = asdict(self)
        if not self.allow_outside_media_dir:
            del record["allow_outside_media_dir"]
        return record

    @classmethod
    def from_manifest(cls, manifest: Manifest, root: str) -> SftInfo:
        """Read and check the JSONL record of ``manifest``; ``ManifestError`` naming ``root`` when it has none."""
        key = manifest.schema
        raw = manifest.extra.get(key)
        if not isinstance(raw, dict):
            raise ManifestError(f"{root}: its {key!r} manifest has no extra[{key!r}] record of JSONL lines")
        try:
            info = cls(**raw)
        except TypeError as exc:
            raise ManifestError(f"{root}: malformed extra[{key!r}]: {exc}") from None
        path = posixpath.normpath(info.lines_path)
        if path.startswith(("/", "..")) or "://" in path:
            raise ManifestError(f"{root}: lines copy {info.lines_path!r} is not inside the root")
        if len(manifest.source_files) != 1 or manifest.source_files[0].num_rows != info.num_lines:
            raise ManifestError(f"{root}: the manifest's source files do not hold the {info.num_lines} JSONL lines")
        return info
