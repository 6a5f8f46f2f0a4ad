"""Benchmark helpers for a shared machine: wait until nobody else is using the CPUs, and measure
how much CPU others used while a run was timed (so a disturbed run can be seen and discarded).

The load average cannot tell this apart from the benchmark's own processes; ``/proc/stat``
(all CPU time on the machine) minus the benchmark's own ``getrusage`` (itself and its reaped
children) can.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from dataclasses import dataclass


def _machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (not idle / iowait) since boot."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    """CPU seconds of this process and its reaped children."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def busy_share(window: float = 2.0) -> float:
    """Share of the machine's CPUs busy over ``window`` seconds (call it while the benchmark idles)."""
    before = _machine_busy_seconds()
    time.sleep(window)
    return (_machine_busy_seconds() - before) / (window * (os.cpu_count() or 1))


def wait_until_idle(max_share: float, deadline: float) -> float:
    """Wait (until ``time.monotonic() >= deadline``) for others to use under ``max_share`` of the
    CPUs; returns the last share seen."""
    share = busy_share()
    while share > max_share and time.monotonic() < deadline:
        print(f"others use {100 * share:.0f}% of the CPUs: waiting ...", file=sys.stderr)
        time.sleep(10)
        share = busy_share()
    return share


@dataclass
class CpuWatch:
    """CPU seconds others used on the machine between ``start()`` and ``stop()``."""

    busy0: float = 0.0
    own0: float = 0.0
    others: float = 0.0

    def start(self) -> None:
        self.busy0, self.own0 = _machine_busy_seconds(), _own_seconds()

    def stop(self) -> float:
        """Others' CPU seconds during the watch (clamped at 0: clock-tick rounding)."""
        busy = _machine_busy_seconds() - self.busy0
        own = _own_seconds() - self.own0
        self.others = max(0.0, busy - own)
        return self.others
