"""Executors run independent units of work (one shard each) and yield results as they finish.

An executor is any object with ``map_unordered(fn, tasks)`` and ``close()``. ``fn`` must be a
picklable top-level function and ``tasks`` picklable values, so the same work runs in this
process, in a process pool, or on a cluster (a Ray executor plugs in through ``make_executor``).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import ProcessPoolExecutor as _Pool
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("auto", "inprocess", "process")


class TaskError(RuntimeError):
    """A unit of work failed; ``task`` is the task that failed and the cause is chained."""

    def __init__(self, message: str, task: Any) -> None:
        super().__init__(message)
        self.task = task


class Executor(Protocol):
    """Runs ``fn`` over ``tasks`` and yields ``(task, result)`` pairs in completion order."""

    def map_unordered(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[tuple[T, R]]: ...

    def close(self) -> None: ...


class InProcessExecutor:
    """Runs tasks one after another in this process (debuggable, no pickling)."""

    def map_unordered(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[tuple[T, R]]:
        for task in tasks:
            try:
                result = fn(task)
            except (KeyboardInterrupt, SystemExit, MemoryError):
                raise
            except Exception as exc:
                raise TaskError(f"{_describe(task)} failed: {type(exc).__name__}: {exc}", task) from exc
            yield task, result

    def close(self) -> None:
        pass


def default_start_method() -> str:
    """``forkserver`` where available, else ``spawn``: never plain fork, since s3fs, aiohttp and
    arrow's thread pools in the parent do not survive a fork."""
    methods = multiprocessing.get_all_start_methods()
    return "forkserver" if "forkserver" in methods else "spawn"


class ProcessPoolExecutor:
    """Runs tasks on ``workers`` processes; each worker builds its own filesystems."""

    def __init__(self, workers: int, *, start_method: str | None = None, max_in_flight: int | None = None,
                 preload: tuple[str, ...] = ("editstream.convert", "editstream.verify")) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self._ctx = multiprocessing.get_context(start_method or default_start_method())
        if self._ctx.get_start_method() == "forkserver":
            # Import the heavy modules (pyarrow, PIL) once in the fork server, not in every worker.
            self._ctx.set_forkserver_preload(list(preload))
        self._pool: _Pool | None = None
        self._max_in_flight = max_in_flight or 2 * workers

    def start(self) -> None:
        """Launch the workers now, without waiting for them, so their start-up (imports in the
        fork server) overlaps with whatever the caller does next."""
        if self._pool is None:
            self._pool = _Pool(max_workers=self.workers, mp_context=self._ctx)
            for _ in range(self.workers):
                self._pool.submit(os.getpid)

    def map_unordered(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[tuple[T, R]]:
        self.start()
        assert self._pool is not None
        pending: dict[Future, Any] = {}
        source = iter(tasks)
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < self._max_in_flight:
                    try:
                        task = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    pending[self._pool.submit(fn, task)] = task
                if not pending:
                    return
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for future in done:
                    task = pending.pop(future)
                    exc = future.exception()
                    if exc is not None:
                        raise TaskError(f"{_describe(task)} failed: {type(exc).__name__}: {exc}", task) from exc
                    yield task, future.result()
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _describe(task: Any) -> str:
    describe = getattr(task, "describe", None)
    return describe() if callable(describe) else f"task {task!r}"


def default_workers() -> int:
    """The default worker count: the machine's CPU count."""
    return os.cpu_count() or 1


def make_executor(engine: str = "auto", workers: int | None = None) -> Executor:
    """Build the executor named ``engine`` with ``workers`` workers (default: the CPU count).

    ``auto`` runs in-process for one worker and on a process pool otherwise.
    """
    n = default_workers() if workers is None else workers
    if n < 1:
        raise ValueError(f"workers must be >= 1, got {n}")
    if engine == "auto":
        engine = "inprocess" if n == 1 else "process"
    if engine == "inprocess":
        return InProcessExecutor()
    if engine == "process":
        return ProcessPoolExecutor(n)
    raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")
