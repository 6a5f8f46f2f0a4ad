"""What a dataset class's constructor takes and what it must be given, read once from its signatures.

``stream`` and the packer's groups build every dataset the same way, by keyword: they ask this
module which optional pieces (a ViT transform, a frame sampler, ``image_dtype``) a class takes or
needs instead of each sniffing signatures its own way. A constructor that forwards ``**kwargs`` (a
subclass that only reorders the reference's positional arguments) is read through to its base.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DatasetParameters:
    """The named parameters of a dataset constructor and those of them without a default."""

    names: frozenset[str]
    required: frozenset[str]

    def takes(self, name: str) -> bool:
        """Whether the constructor has a parameter called ``name``."""
        return name in self.names

    def needs(self, name: str) -> bool:
        """Whether the constructor must be given ``name`` (it has no default)."""
        return name in self.required


def _signatures(factory: Callable[..., Any]) -> Iterator[list[inspect.Parameter]]:
    """The parameters of each ``__init__`` of a class's MRO (``self`` left out), or of a factory."""
    if not isinstance(factory, type):
        try:
            yield list(inspect.signature(factory).parameters.values())
        except (TypeError, ValueError):  # a builtin or C callable without a signature: it takes nothing we know
            return
        return
    for klass in factory.__mro__:
        init = vars(klass).get("__init__")
        if init is not None and klass is not object:
            yield list(inspect.signature(init).parameters.values())[1:]


def dataset_parameters(factory: Callable[..., Any]) -> DatasetParameters:
    """The parameters ``factory`` (a dataset class, or a function building one) takes, following
    ``**kwargs`` up the bases; the first constructor to name a parameter says whether it has a default."""
    names: set[str] = set()
    required: set[str] = set()
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    for parameters in _signatures(factory):
        for p in parameters:
            if p.kind not in variadic and p.name not in names:
                names.add(p.name)
                if p.default is inspect.Parameter.empty:
                    required.add(p.name)
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            break
    return DatasetParameters(frozenset(names), frozenset(required))
