"""``stream``'s DATA arguments, opened (``editstream.data.open_data``) and checked before a row is read: a
contradicting ``--backend`` or ``--schema`` is a usage error naming the option; the arguments must agree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import DataProblem, UsageProblem
from .options import trainable
from .paths import check_bucket, missing_path, unfinished_conversion

if TYPE_CHECKING:  # imported where used, so loading the CLI stays light
    from ..data.layouts import LayoutError
    from ..data.open import DataHandle


def all_trainable() -> list[Any]:
    """The registered kinds ``stream`` can build a dataset for, in registry order."""
    from ..kinds import all_kinds

    return [k for k in all_kinds() if trainable(k)]


def open_problem(url: str, exc: LayoutError) -> DataProblem | UsageProblem:
    """A data-layer refusal in CLI words: the option to change, or the command that fixes the data."""
    from ..data.layouts import BackendMismatch, KindMismatch
    from ..format import detect as d

    if isinstance(exc, BackendMismatch):
        return UsageProblem(exc.message, f"use --backend {exc.right} (or leave --backend out)")
    if isinstance(exc, KindMismatch):
        return UsageProblem(exc.message, f"pass --schema {exc.held} or leave --schema out")
    if exc.found is not None and exc.found.kind == d.MISSING:
        return missing_path(url, "DATA")
    if exc.found is not None and exc.found.kind == d.PARTIAL:
        return unfinished_conversion(exc.found)
    return (UsageProblem if exc.usage else DataProblem)(exc.message, exc.fix)


def _check_streamable(url: str, handle: DataHandle) -> None:
    """The kind must have a training dataset: the datasets ``stream`` builds."""
    if trainable(handle.kind):
        return
    names = " and ".join(k.name for k in all_trainable())
    raise UsageProblem(f"{url} holds {handle.kind.name} data; stream reads {names}", "give data of a kind stream reads")


def _open_one(
    url: str, backend: str, schema: str | None, so: dict[str, Any] | None, media_dir: str | None
) -> DataHandle:
    from ..data.layouts import JsonlFile, LayoutError
    from ..data.open import open_data
    from ..format import detect as d
    from ..kinds import get_kind

    if not d.names_pattern(url, so):
        check_bucket(url, so)
    wanted = None if backend == "auto" else backend
    try:
        handle = open_data(url, backend=wanted, storage_options=so, media_dir=media_dir)
        _check_streamable(url, handle)
        if schema is not None and schema != handle.kind.name:
            handle = open_data(url, kind=get_kind(schema), backend=wanted, storage_options=so, media_dir=media_dir)
    except LayoutError as exc:
        raise open_problem(url, exc) from None
    if isinstance(handle.layout, JsonlFile) and media_dir is None:
        raise UsageProblem(
            f"{url} is a JSONL file, and its image and video names need --media-dir DIR",
            f"editstream stream {url} --media-dir DIR",
        )
    return handle


def resolve(
    data: tuple[str, ...], backend: str, schema: str | None, so: dict[str, Any] | None, media_dir: str | None = None
) -> list[DataHandle]:
    """Open every DATA argument; they must agree on backend, kind and layout, and ``schema`` must fit."""
    found = [_open_one(url, backend, schema, so, media_dir) for url in data]
    kinds = {(h.backend, h.kind.name, type(h.layout)) for h in found}
    if len(kinds) > 1:
        shown = ", ".join(f"{h.url}: {h.kind.name} on {h.backend}" for h in found)
        raise UsageProblem(f"DATA arguments of different kinds ({shown})", "stream one kind at a time")
    return found
