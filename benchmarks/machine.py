"""One line describing this machine for a benchmark report: CPU model and count, memory, OS,
Python and the versions of the libraries a benchmark names."""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Sequence
from pathlib import Path


def describe(modules: Sequence[str]) -> str:
    """CPU model, CPUs, RAM, kernel, Python and ``module version`` for each importable module."""
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, IndexError, ValueError):
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    versions = []
    for module in modules:
        with contextlib.suppress(Exception):  # a missing library is only left out of the description
            versions.append(f"{module} {__import__(module).__version__}")
    return (
        f"{model}, {os.cpu_count()} CPUs{mem}, {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, {', '.join(versions)}"
    )
