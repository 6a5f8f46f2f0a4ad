"""Whose files are in DST: a conversion writes only into a directory that holds nothing but its own."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from ..format import manifest as mf
from ..format.detect import PLAN_NOTE, PROGRESS_DIR_NAME
from ..format.idx import idx_path_for
from ..format.sft import LINES_COPY
from ..io import storage
from .config import ConvertConfig
from .records import TEMP_NAME
from .shapes import plan_conversion
from .source import absolute, resolve_source
from .task import Plan

log = logging.getLogger(__name__)

_OWN_SHARD = re.compile(r"^(?:[a-z0-9_-]+-rg\d{5,}|shard-\d{6,})\.tar(?:\.idx)?$")
"""Shard and idx names the planner gives: ``{stem}-rg00000.tar`` and ``shard-000000.tar``."""
_OWN_NAMES = {mf.MANIFEST_NAME, mf.REPORT_NAME, LINES_COPY, PROGRESS_DIR_NAME}


class ForeignFilesError(FileExistsError):
    """DST holds files editstream did not write (``names``)."""

    def __init__(self, dst: str, names: list[str]) -> None:
        self.dst = dst
        self.names = names
        super().__init__(
            f"{dst} holds {_not_ours(names)}; convert into a new or empty directory (overwrite=True goes on, "
            "replacing only editstream's own files)"
        )


def _not_ours(names: list[str]) -> str:
    """``2 files editstream did not write (a, b)``, naming at most three."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{len(names)} file{'s' if len(names) != 1 else ''} editstream did not write ({shown})"


def is_own_name(name: str) -> bool:
    """Whether a name directly in DST is one editstream writes (outputs, records, temp files, a lock)."""
    if name in _OWN_NAMES or _OWN_SHARD.match(name) or TEMP_NAME.match(name):
        return True
    return name.startswith((".editstream", "_editstream")) or name.endswith(".lock")


def _names(dst: str, so: dict[str, Any] | None) -> list[str]:
    try:
        return sorted(storage.list_names(dst, so))
    except (FileNotFoundError, NotADirectoryError):
        return []


def foreign_names(dst: str, so: dict[str, Any] | None) -> list[str]:
    """The names directly in ``dst`` that editstream did not write (none when it does not exist)."""
    return [n for n in _names(dst, so) if not is_own_name(n)]


def held_conversion(dst: str, so: dict[str, Any] | None) -> str | None:
    """The source of the WebDataset conversion ``dst`` holds, finished (its manifest) or not (its plan
    note); ``None`` when it holds none."""
    for url, key in (
        (storage.join(dst, mf.MANIFEST_NAME), "source_root"),
        (storage.join(dst, PROGRESS_DIR_NAME, PLAN_NOTE), "src"),
    ):
        try:
            held = json.loads(storage.read_bytes(url, so))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except ValueError:
            return f"an unreadable {url.rsplit('/', 1)[-1]}"
        return str(held.get(key)) if isinstance(held, dict) else f"an unreadable {url.rsplit('/', 1)[-1]}"
    return None


def check_dst(cfg: ConvertConfig) -> None:
    """Refuse a DST holding files editstream did not write, unless ``overwrite`` (they are left alone)."""
    foreign = foreign_names(cfg.dst, cfg.storage_options)
    if foreign and not cfg.overwrite:
        raise ForeignFilesError(cfg.dst, foreign)
    if foreign:
        log.warning("%s holds %s; left in place", cfg.dst, _not_ours(foreign))


def tidy_dst(cfg: ConvertConfig, plan: Plan) -> None:
    """Delete an earlier run's shards, idx files and done records the plan does not write, and the temp
    files a killed run left of its outputs; note the plan."""
    so = cfg.storage_options
    planned = {t.shard_path for t in plan.tasks} | {idx_path_for(t.shard_path) for t in plan.tasks}
    outputs = planned | {mf.MANIFEST_NAME, mf.REPORT_NAME, LINES_COPY, *plan.side_files}
    names = _names(cfg.dst, so)
    orphans = [n for n in names if _OWN_SHARD.match(n) and n not in planned]
    stale = [n for n in names if (temp := TEMP_NAME.match(n)) and temp.group("name") in outputs]
    for name in stale + orphans:
        storage.remove(storage.join(cfg.dst, name), so)
    records = storage.join(cfg.dst, PROGRESS_DIR_NAME)
    for name in _names(records, so):
        if TEMP_NAME.match(name) or (name.endswith(".tar.json") and name[: -len(".json")] not in planned):
            storage.remove(storage.join(records, name), so)
    if orphans:
        log.warning("removed %d shard and idx files of an earlier conversion into %s", len(orphans), cfg.dst)
    note = {"num_shards": len(plan.tasks), "src": cfg.src, "schema": plan.schema, "layout": cfg.layout}
    url = storage.join(cfg.dst, PROGRESS_DIR_NAME, PLAN_NOTE)
    storage.write_bytes(url, json.dumps(note, indent=1).encode(), cfg.storage_options)


def dry_run(src: str, dst: str, **options: Any) -> dict[str, Any]:
    """What ``convert(src, dst, **options)`` would do, planned but not written, and what DST holds now."""
    so = options.get("storage_options")
    schema, layout = resolve_source(src, options.pop("schema", None), options.pop("layout", "rowgroup"), so)
    cfg = ConvertConfig(src=absolute(src), dst=absolute(dst), schema=schema, layout=layout, **options)
    plan = plan_conversion(cfg)
    rows = sum(sum(sizes) for sizes in plan.row_groups.values() if sizes is not None)
    rows_known = all(sizes is not None for sizes in plan.row_groups.values())
    summary: dict[str, Any] = {
        "dry_run": True,
        "src": cfg.src,
        "dst": cfg.dst,
        "schema": plan.schema,
        "layout": cfg.layout,
        "source_files": len(plan.files),
        "row_groups": sum(plan.num_row_groups.values()),
        "rows": rows if rows_known else None,
        "shards": len(plan.tasks),
        "source_bytes": plan.source_bytes,
        "estimated_output_bytes": plan.source_bytes + 2048 * rows,
        "first_shards": [t.shard_path for t in plan.tasks[:3]],
    }
    names = _names(cfg.dst, cfg.storage_options)
    foreign = [n for n in names if not is_own_name(n)]
    if foreign:
        summary["dst_state"] = f"holds {_not_ours(foreign)}: refused"
    elif mf.MANIFEST_NAME in names:
        summary["dst_state"] = "holds a finished conversion (the same one: nothing to do; another: needs overwrite)"
    elif PROGRESS_DIR_NAME in names:
        summary["dst_state"] = "holds an unfinished conversion: its shards that match this plan are kept"
    else:
        summary["dst_state"] = "new or empty"
    return summary
