"""Worker processes never outlive their converter (a pool worker holds both ends of its queue, so it
watches the converter's pid instead), and SIGTERM stops a conversion like Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

_POLL_SECONDS = 1.0


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (on this host)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _wait_for_exit(pid: int) -> None:
    """Block until process ``pid`` has exited (returns at once if it already has)."""
    try:
        fd = os.pidfd_open(pid)  # Linux: readable when the process exits
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfds here: poll
        while pid_alive(pid):
            time.sleep(_POLL_SECONDS)
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def exit_with(parent_pid: int) -> None:
    """Pool initializer: end this worker process as soon as ``parent_pid`` is gone."""

    def watch() -> None:
        _wait_for_exit(parent_pid)
        os._exit(70)  # the converter is gone: nothing would read this worker's results

    threading.Thread(target=watch, name="editstream-parent-watch", daemon=True).start()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``KeyboardInterrupt`` (as Ctrl-C does), unless called off the main
    thread or SIGTERM already has a handler (an application's own is kept)."""
    default = signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None)
    if threading.current_thread() is not threading.main_thread() or not default:
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
