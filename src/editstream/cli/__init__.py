"""The ``editstream`` command line: the group in ``app``, one small module per subcommand.

Every subcommand imports its heavy modules lazily, so ``editstream --help`` stays fast and a
subcommand's optional dependencies (Ray, moto ...) load only when that command runs. Errors
are shown as one or two lines (``errors``); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

from . import cmd_convert, cmd_inspect, cmd_preview, cmd_stream, cmd_synth, cmd_verify  # noqa: F401 - registers
from .app import main

__all__ = ["main"]
