"""Import the scripts under examples/ (not a package) so tests run the code users run."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
TRAIN_LOOP = ROOT / "examples" / "train_loop.py"


def load_example(path: Path = TRAIN_LOOP) -> ModuleType:
    """The example script at ``path`` as a module (its ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
