"""What a dataset class's constructor takes and needs, for ``stream`` and the packer's groups alike.

Both build every dataset by keyword and ask here which optional pieces (a ViT transform, a frame
sampler, ``image_dtype``) a class takes or must be given. A constructor that forwards ``**kwargs``
(one that only reorders the reference's positional arguments) is read through to its base.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


@dataclass(frozen=True)
class DatasetParameters:
    """The named parameters of a dataset constructor (``names``) and those without a default."""

    names: frozenset[str]
    required: frozenset[str]

    def takes(self, name: str) -> bool:
        """Whether the constructor has a parameter called ``name``."""
        return name in self.names

    def needs(self, name: str) -> bool:
        """Whether the constructor must be given ``name`` (it has no default)."""
        return name in self.required


def dataset_parameters(factory: Callable[..., Any]) -> DatasetParameters:
    """The parameters of ``factory`` (a dataset class, or a function building one), following
    ``**kwargs`` up a class's bases; the first constructor naming a parameter gives its default."""
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
    return DatasetParameters(frozenset(found), frozenset(name for name, needed in found.items() if needed))
