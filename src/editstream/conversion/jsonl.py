"""The JSONL + media source shape: the JSONL cut into shards of consecutive lines (one "row group" of
all its lines, so a ``RowSlice`` is a line range), a task's lines read with their media, ``verify``'s checks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..data.rows import LineRow
from ..data.sources.jsonl import DirectoryMedia, read_line_range
from ..format import manifest as mf
from ..format import sft
from ..format.keys import key_stems
from ..format.sft import COLUMNS, LINE_COLUMN, LINES_COPY, MEDIA_COLUMN, SftInfo, media_path
from ..io import service, storage
from ..io.lines import LineDecodeError, decode_lines, line_start_offsets
from ..io.prefetch import prefetch_ordered
from .problems import Problem
from .records import ShardResult
from .task import LinePart, Plan, ShardCutter, ShardTask, TaskMaker

if TYPE_CHECKING:
    from .config import ConvertConfig

DEFAULT_LINES_PER_SHARD = 1000
"""Lines per shard of a JSONL + media conversion when neither a size nor a sample count is given."""

_SAMPLE_OVERHEAD = 1536  # tar headers and the JSON member of one line, for the shard_size estimate
_MEMBER_OVERHEAD = 1024  # a tar header plus padding per media member


def _media_size(url: str, is_folder: bool, so: dict[str, Any] | None) -> tuple[int, int]:
    """``(bytes, members)`` a media name adds to a shard; unreadable media count as nothing."""
    try:
        if not is_folder:
            return storage.size(url, so), 1
        fs, path = storage.url_to_fs(url, so)
        entries = [e for e in fs.ls(path.rstrip("/"), detail=True) if e.get("type") == "file"]
        return sum(int(e.get("size") or 0) for e in entries), len(entries)
    except (OSError, ValueError):
        return 0, 0


def _line_sizes(data: bytes, media_dir: str, so: dict[str, Any] | None, allow_outside: bool) -> list[int]:
    """Estimated shard bytes of every line: its text, its media (refused names not even sized) and tar overhead."""
    lines = decode_lines(data)
    refs: list[list[tuple[str, bool]]] = []
    for line in lines:
        try:
            found = sft.referenced_media(json.loads(line))
        except ValueError:
            found = []
        refs.append([ref for ref in found if allow_outside or not sft.outside_media_dir(ref[0])])
    wanted = sorted({ref for line_refs in refs for ref in line_refs})
    sizes = dict(zip(wanted, service.pool().map(lambda r: _media_size(media_path(media_dir, r[0]), r[1], so), wanted)))
    out = []
    for line, line_refs in zip(lines, refs):
        media = [sizes[ref] for ref in dict.fromkeys(line_refs)]
        out.append(len(line.encode()) + _SAMPLE_OVERHEAD + sum(b + n * _MEMBER_OVERHEAD for b, n in media))
    return out


def _line_ranges(cfg: ConvertConfig, data: bytes, num_lines: int, media_dir: str) -> list[tuple[int, int]]:
    """``[start, stop)`` line ranges of the shards, in order, each holding at least one line."""
    if cfg.shard_size is None:  # counted only: no media is sized
        cutter = ShardCutter(None, cfg.samples_per_shard or DEFAULT_LINES_PER_SHARD)
        cutter.add(cfg.src, 0, 0, num_lines, 0.0)
    else:
        cutter = ShardCutter(cfg.shard_size, cfg.samples_per_shard)
        sizes = _line_sizes(data, media_dir, cfg.storage_options, cfg.allow_outside_media_dir)
        for i, line_size in enumerate(sizes):
            cutter.add(cfg.src, 0, i, i + 1, line_size)
    cutter.flush()
    return [(lines[0].start, lines[-1].stop) for lines in cutter.shards]


def plan_lines_conversion(cfg: ConvertConfig) -> Plan:
    """Read the JSONL once and cut its lines into shard tasks."""
    assert cfg.media_dir is not None and cfg.schema is not None  # ConvertConfig checks them for this shape
    so = cfg.storage_options
    try:
        data = storage.read_bytes(cfg.src, so)
    except FileNotFoundError:
        raise FileNotFoundError(f"JSONL file not found: {cfg.src}") from None
    offsets = line_start_offsets(data, cfg.src)
    num_lines = len(offsets) - 1
    root, name = cfg.src.rsplit("/", 1) if "/" in cfg.src else (".", cfg.src)
    stem = key_stems([name[: -len(".jsonl")] if name.endswith(".jsonl") else name])[0]
    media_dir = storage.absolute(cfg.media_dir)
    fs, path = storage.url_to_fs(media_dir, so)
    if fs.isfile(path):  # an archive, say: every name in it would read as missing
        raise NotADirectoryError(
            f"media_dir {media_dir} is a file, not a directory; give the directory the JSONL's image and "
            "video names are relative to (unpack an archive first)"
        )
    make = TaskMaker(cfg, root, cfg.schema, COLUMNS, {name: stem})  # no identities: each task checks its lines' hash
    tasks, outside = [], cfg.allow_outside_media_dir
    for i, (a, b) in enumerate(_line_ranges(cfg, data, num_lines, media_dir)):
        start, stop = offsets[a], offsets[b]
        digest = hashlib.sha256(data[start:stop]).hexdigest()
        part = LinePart(byte_start=start, byte_stop=stop, sha256=digest, media_dir=media_dir, allow_outside=outside)
        tasks.append(make(f"shard-{i:06d}.tar", (mf.RowSlice(file=name, row_group=0, start=a, stop=b),), part))
    info = {
        "media_dir": cfg.media_dir,
        "jsonl": cfg.src,
        "lines_path": LINES_COPY,
        "lines_bytes": len(data),
        "lines_sha256": hashlib.sha256(data).hexdigest(),
        "num_lines": num_lines,
    }
    if outside:
        info["allow_outside_media_dir"] = True
    return Plan(
        tasks=tasks,
        schema=cfg.schema,
        columns=COLUMNS,
        files=[name],
        row_groups={name: [num_lines]},
        num_row_groups={name: 1},
        stems={name: stem},
        source_bytes=len(data),
        source_root=root,
        extra={cfg.schema: info},
        side_files={LINES_COPY: data},
    )


def lines_manifest_extra(plan: Plan, results: list[ShardResult]) -> dict[str, Any]:
    """The plan's record (under the kind's name) completed with the count of lines whose media was missing."""
    missing = sum(1 for r in results for b in r.bad_rows if b.missing)
    info = SftInfo(**plan.extra[plan.schema], missing_media=missing)
    return {plan.schema: info.to_dict()}


def check_lines_options(cfg: ConvertConfig) -> None:
    """The options a JSONL + media conversion takes: a media directory, the size layout, no parquet options."""
    what = f"a {cfg.schema} (JSONL + media) conversion"
    if not cfg.media_dir:
        raise ValueError(
            f"{what} needs media_dir (--media-dir): the directory its image and "
            "video names are relative to, given as the source backend's data_dir"
        )
    if cfg.layout != "size":
        raise ValueError(f"{what} writes shards of consecutive lines (layout='size')")
    if cfg.drop_bad_rows:
        raise ValueError(f"drop_bad_rows does not apply to {what}: every line is kept so the loader drops it")
    if cfg.parquet_info is not None:
        raise ValueError(f"parquet_info does not apply to {what}")


_LINES_AHEAD = 17


def line_media(media_dir: str, storage_options: dict[str, Any] | None, allow_outside: bool) -> Callable[[str], Any]:
    """``line -> {name: stored media}`` as a converted sample holds it."""

    def read(line: str) -> dict[str, Any]:
        stored, _ = LineRow(line, DirectoryMedia(media_dir, storage_options, allow_outside)).record()
        return cast(dict[str, Any], stored[MEDIA_COLUMN])

    return read


def iter_line_rows(task: ShardTask) -> Iterator[tuple[mf.RowSlice, int, dict[str, Any]]]:
    """``(slice, line index, {"line": text, "media": {...}})`` for every line of the task, in order, read from
    its byte range of the JSONL; an error if the JSONL changed since planning."""
    part = task.part
    assert isinstance(part, LinePart) and len(task.slices) == 1
    s = task.slices[0]
    url = storage.join(task.src_root, s.file)
    lines = read_line_range(url, part.byte_start, part.byte_stop, part.sha256, s.num_rows, task.storage_options)
    read_media = line_media(part.media_dir, task.storage_options, part.allow_outside)
    fetched = prefetch_ordered(lines, read_media, lambda _: 0, max_items=_LINES_AHEAD)
    for index, (line, media) in enumerate(fetched, start=s.start):
        yield s, index, {LINE_COLUMN: line, MEDIA_COLUMN: media.result()}


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
    return MediaComparison(storage.absolute(info.media_dir), info.allow_outside_media_dir, storage_options)


def check_lines_root(
    root: str, manifest: mf.Manifest, source: str | None, storage_options: dict[str, Any] | None
) -> list[Problem]:
    """Problems with the root's line copy (and with its source JSONL, when given)."""
    try:
        info = SftInfo.from_manifest(manifest, root)
    except mf.ManifestError as exc:
        return [Problem("manifest", None, str(exc))]
    url = storage.join(root, info.lines_path)
    try:
        data = storage.read_bytes(url, storage_options)
    except FileNotFoundError:
        return [Problem("lines", None, f"{url} does not exist")]
    digest = hashlib.sha256(data).hexdigest()
    found: list[tuple[str, str]] = []  # (problem kind, detail)
    if len(data) != info.lines_bytes or digest != info.lines_sha256:
        said = f"{info.lines_bytes} bytes with sha256 {info.lines_sha256}"
        found.append(("lines", f"{url}: {len(data)} bytes with sha256 {digest}, the manifest says {said}"))
    else:
        try:
            count = len(decode_lines(data, url))
            if count != info.num_lines:
                found.append(("lines", f"{url}: {count} lines, the manifest says {info.num_lines}"))
        except LineDecodeError as exc:
            found.append(("lines", str(exc)))
    if source is not None:
        try:
            source_digest = hashlib.sha256(storage.read_bytes(source, storage_options)).hexdigest()
        except FileNotFoundError:
            found.append(("source", f"{source} does not exist"))
        else:
            if source_digest != info.lines_sha256:
                found.append(("source", f"{source} is not the JSONL that was converted (hash differs)"))
    return [Problem(kind, None, detail) for kind, detail in found]
