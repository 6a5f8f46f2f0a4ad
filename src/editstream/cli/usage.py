"""Command-line mistakes found before any work starts, named by their option as usage errors (exit 2), where
the library's own ``ValueError`` would say ``schema=...`` and end as a data problem."""

from __future__ import annotations

from typing import Any

from ..data.layouts import JsonlFile, ParquetDirectory
from ..io import storage
from .errors import UsageProblem
from .paths import parquet_columns


def catch_all_kind() -> str:
    """The kind that converts any parquet columns as they are (the one with no columns to require)."""
    from ..kinds import all_kinds

    return next(k.name for k in all_kinds() if k.source.takes_columns and not k.columns)


def check_convert_usage(
    src: str,
    dst: str,
    found: ParquetDirectory | JsonlFile,
    schema: str | None,
    media_dir: str | None,
    so: dict[str, Any] | None,
) -> None:
    """``convert``'s arguments fit together: DST and SRC do not overlap (``check_apart``), ``--media-dir``
    goes with a JSONL SRC (and a JSONL SRC needs it), and a parquet SRC whose columns fit no kind is
    given ``--schema``."""
    from ..conversion.config import PlacesOverlapError, check_apart

    try:
        check_apart({"SRC": src, "DST": dst})
    except PlacesOverlapError as exc:
        raise UsageProblem(str(exc), "give DST a new or empty directory outside SRC") from None
    if isinstance(found, JsonlFile):
        if not media_dir:
            raise UsageProblem(
                f"SRC {src} is a JSONL file, and its image and video names need --media-dir DIR",
                f"editstream convert {src} {dst} --media-dir DIR (the source backend's data_dir)",
            )
        fs, path = storage.url_to_fs(media_dir, so)
        if fs.isfile(path):
            raise UsageProblem(
                f"--media-dir {media_dir} is a file, not a directory",
                "give the directory the JSONL's image and video names are relative to (unpack an archive first)",
            )
        return
    if media_dir is not None:
        raise UsageProblem(f"--media-dir is for a JSONL SRC; {src} is a parquet directory", "leave --media-dir out")
    if schema is None:
        _check_detectable(src, found, so)


def _check_detectable(src: str, found: ParquetDirectory, so: dict[str, Any] | None) -> None:
    """A parquet SRC without ``--schema`` must have the columns of a kind detection recognises."""
    from ..kinds import all_kinds, detect_kind

    columns = parquet_columns(found)
    if detect_kind(columns) is not None:
        return
    names = ", ".join(k.name for k in all_kinds() if k.source.takes_columns and k.detectable and k.columns)
    raise UsageProblem(
        f"cannot tell the dataset kind of {src} from its columns {columns} ({names} need other columns)",
        f"pass --schema NAME; --schema {catch_all_kind()} converts the rows as they are",
    )
