"""What the plain ``convert`` and ``convert --from`` share: the executor's lifetime and the foreign-DST error."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .errors import UsageProblem


@contextmanager
def running_executor(engine: str, workers: int | None, ray_address: str | None) -> Iterator[Any]:
    """The conversion executor for ``--engine``/``--workers``, started now (local workers import while this
    process plans; Ray connects before any work) and closed on exit; a missing Ray or bad address is a usage error."""
    from ..conversion.executors import make_executor

    try:
        runner = make_executor(engine, workers, ray_address=ray_address)
    except (ImportError, ValueError) as exc:
        raise UsageProblem(str(exc)) from None
    try:
        start = getattr(runner, "start", None)
        if start is not None:
            start()
        yield runner
    finally:
        runner.close()


def foreign_files_problem(dst: str, names: list[str]) -> UsageProblem:
    """The usage error for a DST that holds files editstream did not write (``names``, the first few shown)."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return UsageProblem(
        f"DST {dst} holds files editstream did not write ({shown})",
        "convert into a new or empty directory (--overwrite goes on: it replaces only editstream's own files)",
    )
