"""``install()`` / ``uninstall()``: point NeMo Automodel's BAGEL data entry points at editstream's, by rebinding
the module attributes NeMo's recipe reads when it builds the loader (``uninstall()`` restores them)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from . import datasets, loader, packing

NEMO_PACKAGE = "nemo_automodel.components.datasets.multimodal"
"""NeMo's module tree that ``editstream.nemo`` mirrors."""

REBOUND: tuple[tuple[str, str, ModuleType], ...] = (
    ("", "BagelDatasetConfig", datasets),
    ("", "DataConfig", packing),
    ("", "make_bagel_multimodal_dataset", datasets),
    (".datasets", "BagelDatasetConfig", datasets),
    (".datasets", "make_bagel_multimodal_dataset", datasets),
    (".packing", "DataConfig", packing),
    (".loader", "BagelDataloaderConfig", loader),
)
"""``(NeMo submodule relative to NEMO_PACKAGE, name, editstream's twin module)``: ``install()`` rebinds the name
in NeMo's module to the twin's."""

_saved: dict[tuple[str, str], Any] = {}


def nemo_module(suffix: str = "") -> ModuleType:
    """Import NeMo's ``multimodal`` package (or one of its submodules), saying what to install if absent."""
    name = NEMO_PACKAGE + suffix
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"editstream.nemo needs NVIDIA NeMo Automodel's {name} (the nemo-automodel package, "
            f"e.g. pip install --no-deps nemo-automodel==0.7.0), which failed to import: {exc}"
        ) from exc


def installed() -> bool:
    """Whether NeMo's BAGEL entry points currently point at editstream's."""
    return bool(_saved)


def install() -> None:
    """Make NeMo's BAGEL recipe build editstream's dataset config and dataloader (idempotent); call it in every
    process before the recipe's ``setup()``. An ``ImportError`` naming the package without NeMo Automodel."""
    if _saved:
        return
    modules = {suffix: nemo_module(suffix) for suffix, _, _ in REBOUND}  # all of NeMo first: none or every name
    for suffix, name, twin in REBOUND:
        _saved[(suffix, name)] = getattr(modules[suffix], name)
        setattr(modules[suffix], name, getattr(twin, name))


def uninstall() -> None:
    """Give NeMo back its own entry points (a no-op when ``install()`` has not run)."""
    for (suffix, name), original in list(_saved.items()):
        setattr(nemo_module(suffix), name, original)
    _saved.clear()
