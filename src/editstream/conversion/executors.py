"""Executors run independent units of work (one shard each), yielding results as they finish; ``fn`` and
the tasks are picklable, so the same work runs in this process, a process pool, or as Ray tasks."""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import ProcessPoolExecutor as _Pool
from typing import Any, Protocol, TypeVar

from .lifetime import exit_with

T = TypeVar("T")
R = TypeVar("R")
H = TypeVar("H")

ENGINES = ("auto", "local", "inprocess", "process", "ray")
"""``local`` is another name for ``auto``: this machine, in-process for one worker, else a process pool."""


class TaskError(RuntimeError):
    """A unit of work failed; ``task`` is the task that failed and the cause is chained."""

    def __init__(self, message: str, task: Any) -> None:
        super().__init__(message)
        self.task = task


class Executor(Protocol):
    """Runs ``fn`` over ``tasks`` and yields ``(task, result)`` pairs in completion order."""

    def map_unordered(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[tuple[T, R]]: ...

    def close(self) -> None: ...


def bounded_map(
    submit: Callable[[T], H],
    tasks: Iterable[T],
    limit: int,
    wait_some: Callable[[list[H]], list[H]],
    result: Callable[[H], R],
    *,
    cancel: Callable[[H], object],
) -> Iterator[tuple[T, R]]:
    """Keep at most ``limit`` tasks submitted and yield ``(task, result)`` as they finish (``wait_some``: the
    done handles); a task's error becomes a :class:`TaskError` naming it; pending ones are cancelled at exit."""
    pending: dict[H, T] = {}
    source = iter(tasks)
    try:
        while True:
            for task in itertools.islice(source, limit - len(pending)):
                pending[submit(task)] = task
            if not pending:
                return
            for handle in wait_some(list(pending)):
                task = pending.pop(handle)
                try:
                    value = result(handle)
                except Exception as exc:
                    raise _failed(task, exc) from exc
                yield task, value
    finally:
        for handle in pending:
            cancel(handle)


class InProcessExecutor:
    """Runs tasks one after another in this process (debuggable, no pickling)."""

    def map_unordered(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[tuple[T, R]]:
        for task in tasks:
            try:
                result = fn(task)
            except (KeyboardInterrupt, SystemExit, MemoryError):
                raise
            except Exception as exc:
                raise _failed(task, exc) from exc
            yield task, result

    def close(self) -> None:
        pass


PRELOAD = ("editstream.conversion.run", "editstream.conversion.verify")
"""Modules the fork server imports once for every worker it forks (pyarrow, PIL and the converter)."""


def default_start_method() -> str:
    """``forkserver`` where available, else ``spawn``: never plain fork, since s3fs, aiohttp and
    arrow's thread pools in the parent do not survive a fork."""
    methods = multiprocessing.get_all_start_methods()
    return "forkserver" if "forkserver" in methods else "spawn"


def warm_up(engine: str = "auto", workers: int | None = None) -> bool:
    """Start (without waiting) the fork server a local process pool of ``engine`` and ``workers`` will fork
    from, ``PRELOAD`` imported in it, so its imports overlap with planning; ``False`` when there is none."""
    if _pool_size(engine, workers) is None or default_start_method() != "forkserver":
        return False
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(list(PRELOAD))
    forkserver.ensure_running()
    return True


class ProcessPoolExecutor:
    """Runs tasks on ``workers`` processes; each worker builds its own filesystems."""

    def __init__(self, workers: int, *, preload: tuple[str, ...] = PRELOAD) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self._ctx = multiprocessing.get_context(default_start_method())
        if self._ctx.get_start_method() == "forkserver":
            self._ctx.set_forkserver_preload(list(preload))
        self._pool: _Pool | None = None

    def start(self) -> None:
        """Launch the workers without waiting, so their start-up overlaps with what the caller does next."""
        if self._pool is None:
            self._pool = _Pool(
                max_workers=self.workers, mp_context=self._ctx, initializer=exit_with, initargs=(os.getpid(),)
            )
            for _ in range(self.workers):
                self._pool.submit(os.getpid)

    def map_unordered(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[tuple[T, R]]:
        self.start()
        pool = self._pool
        assert pool is not None

        def wait_some(handles: list[Future[R]]) -> list[Future[R]]:
            return list(wait(handles, return_when=FIRST_COMPLETED).done)

        return bounded_map(
            lambda task: pool.submit(fn, task), tasks, 2 * self.workers, wait_some, Future.result, cancel=Future.cancel
        )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def abort(self) -> None:
        """Stop now (after an error or an interrupt): terminate the workers instead of waiting
        for their running tasks; a task's atomic write leaves nothing half-written behind."""
        for process in list((getattr(self._pool, "_processes", None) or {}).values()):
            with contextlib.suppress(Exception):
                process.terminate()
        self.close()


class RayExecutor:
    """Runs each task as a Ray task (shut down on ``close()`` only if this executor started Ray), at most
    ``max_in_flight`` at a time (``workers``, else twice the cluster's CPUs) so no plan floods the scheduler."""

    def __init__(
        self, workers: int | None = None, *, address: str | None = None, max_in_flight: int | None = None
    ) -> None:
        for name, value in (("workers", workers), ("max_in_flight", max_in_flight)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self._ray = import_ray()
        self.workers = workers
        self.address = address
        self.max_in_flight = max_in_flight
        self._owns_ray = False

    def start(self) -> None:
        """Connect to (or start) Ray now unless it is already initialised in this process."""
        ray = self._ray
        if ray.is_initialized():
            return
        try:
            ray.init(address=self.address, include_dashboard=False)
        except ConnectionError as exc:
            raise ConnectionError(f"cannot connect to Ray at {self.address or 'the default address'}: {exc}") from exc
        self._owns_ray = True

    def map_unordered(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[tuple[T, R]]:
        self.start()
        ray = self._ray
        remote_fn = ray.remote(num_cpus=1)(fn)

        def wait_some(refs: list[Any]) -> list[Any]:
            ray.wait(refs, num_returns=1)
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            return list(ready)

        def result(ref: Any) -> Any:
            try:
                return ray.get(ref)
            except Exception as exc:
                cause = getattr(exc, "cause", None)
                raise (cause if isinstance(cause, BaseException) else exc) from exc

        def cancel(ref: Any) -> None:
            with contextlib.suppress(Exception):
                ray.cancel(ref)

        limit = self.max_in_flight or self.workers or max(1, int(2 * ray.cluster_resources().get("CPU", 1)))
        return bounded_map(remote_fn.remote, tasks, limit, wait_some, result, cancel=cancel)

    def close(self) -> None:
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_ray = False


def import_ray() -> Any:
    """The ``ray`` module, or an ImportError that says which extra provides it."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError("engine 'ray' needs Ray, which is not installed: pip install 'editstream[ray]'") from exc
    return ray


def _failed(task: Any, exc: Exception) -> TaskError:
    describe = getattr(task, "describe", None)
    what = describe() if callable(describe) else f"task {task!r}"
    return TaskError(f"{what} failed: {type(exc).__name__}: {exc}", task)


def default_workers() -> int:
    """The default worker count: the machine's CPU count."""
    return os.cpu_count() or 1


def check_engine(engine: str, workers: int | None, ray_address: str | None) -> None:
    """A ``ValueError`` for an unknown engine, a ``ray_address`` without Ray, or fewer than one worker."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if ray_address is not None and engine != "ray":
        raise ValueError(f"ray_address applies to engine='ray' only, not engine={engine!r}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")


def _pool_size(engine: str, workers: int | None) -> int | None:
    """The processes of the local pool ``engine`` and ``workers`` make (``None``: none; one worker runs in-process)."""
    n = default_workers() if workers is None else workers
    return n if engine == "process" or (engine in ("auto", "local") and n > 1) else None


def make_executor(engine: str = "auto", workers: int | None = None, *, ray_address: str | None = None) -> Executor:
    """Build the executor named ``engine`` with ``workers`` workers (default: the CPU count); ``ray``
    connects to ``ray_address`` (``"auto"``: an existing cluster)."""
    check_engine(engine, workers, ray_address)
    if engine == "ray":
        return RayExecutor(workers, address=ray_address)
    n = _pool_size(engine, workers)
    return InProcessExecutor() if n is None else ProcessPoolExecutor(n)
