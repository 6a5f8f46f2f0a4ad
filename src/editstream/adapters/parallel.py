"""An adaptation's output files as picklable tasks on the converter's executors: this process, a pool, or Ray."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..conversion.executors import Executor, ProcessPoolExecutor, TaskError, make_executor
from ..io.progress import Progress

PRELOAD = ("editstream.adapters.run",)
"""What a local pool's fork server imports once for its workers."""


@dataclass(frozen=True)
class OutputWork:
    """One output file to write: ``run(*args)`` returns its done record."""

    name: str
    run: Callable[..., dict[str, Any]]
    args: tuple[Any, ...]

    def describe(self) -> str:
        return f"adapter output file {self.name}"


def run_work(work: OutputWork) -> dict[str, Any]:
    """Run one task (in whichever process the executor chose)."""
    return work.run(*work.args)


def _executor(engine: str, workers: int | None, ray_address: str | None) -> Executor:
    """The converter's executor for ``engine`` / ``workers``; a local pool's workers preload the adapter."""
    if engine == "ray":
        return make_executor(engine, workers, ray_address=ray_address)
    n = workers or 1
    if engine == "process" or (engine in ("auto", "local") and n > 1):
        return ProcessPoolExecutor(n, preload=PRELOAD)
    return make_executor(engine, n, ray_address=ray_address)


def run_outputs(
    works: Sequence[OutputWork],
    bar: Progress,
    *,
    executor: Executor | None = None,
    engine: str = "auto",
    workers: int | None = 1,
    ray_address: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Every task's record by output name, in the order of ``works``, run on ``executor`` (else on one made
    from ``engine`` / ``workers`` and closed after)."""
    if not works:
        return {}
    runner = executor if executor is not None else _executor(engine, workers, ray_address)
    done: dict[str, dict[str, Any]] = {}
    try:
        for work, record in runner.map_unordered(run_work, works):
            done[work.name] = record
            bar.update(1, rows=record["num_rows"], nbytes=record["size"])
    except TaskError as exc:  # the task's own error (it names the source file), as one process raises it
        raise (exc.__cause__ if isinstance(exc.__cause__, Exception) else exc) from None
    finally:
        if executor is None:
            runner.close()
    return {work.name: done[work.name] for work in works}
