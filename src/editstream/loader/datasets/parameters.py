"""What a dataset class's constructor takes and needs, for ``stream`` and the packer's groups alike."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def dataset_parameters(factory: Callable[..., Any]) -> dict[str, bool]:
    """``factory``'s named parameters, each mapped to whether it must be given (``**kwargs`` followed up)."""
    if isinstance(factory, type):
        inits = [vars(c)["__init__"] for c in factory.__mro__[:-1] if "__init__" in vars(c)]
        signatures = [list(inspect.signature(init).parameters.values())[1:] for init in inits]
    else:
        try:
            signatures = [list(inspect.signature(factory).parameters.values())]
        except (TypeError, ValueError):  # a callable without a signature: it takes nothing we know of
            signatures = []
    found: dict[str, bool] = {}
    for parameters in signatures:
        for p in parameters:
            if p.kind not in _VARIADIC:
                found.setdefault(p.name, p.default is inspect.Parameter.empty)
        if all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters):
            break
    return found
