"""``python -m editstream.cli``: the same command line as the ``editstream`` script."""

from __future__ import annotations

from . import main

main(prog_name="editstream")
