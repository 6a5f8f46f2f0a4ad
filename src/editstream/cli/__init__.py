"""The ``editstream`` command line: the group in ``app``, one small module per subcommand, each importing its
heavy modules lazily so ``editstream --help`` stays fast."""

from __future__ import annotations

from . import cmd_convert, cmd_inspect, cmd_preview, cmd_stream, cmd_synth, cmd_verify  # noqa: F401 - registers
from .app import main

__all__ = ["main"]
