"""The packing spec's fields as NeMo's surfaces take them: spliced into a function's signature or a config's
dataclass fields after a named parameter, with the spec's types and defaults. Each knob is declared once, in
:class:`~editstream.packing.spec.PackingSpec`, and each surface keeps NeMo's names, order, kinds and defaults."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from .spec import DEFAULTS, PackingSpec

Places = Mapping[str, Sequence[str]]
"""Where the spec's fields go: after the parameter (or field) each key names, the fields its value lists."""
R = TypeVar("R")
T = TypeVar("T")

TYPES = {field.name: field.type for field in dataclasses.fields(PackingSpec)}
"""Each spec field's annotation, as written in ``PackingSpec``."""


def with_knobs(places: Places) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Give a function whose last parameter is ``knobs`` the spec's fields ``places[name]`` as parameters after
    its parameter ``name`` (of that one's kind, with the spec's defaults): ``inspect.signature`` shows them in
    place, a call binds to that signature, and the function gets their values by name in ``knobs``."""

    def splice(function: Callable[..., R]) -> Callable[..., R]:
        own = inspect.signature(function)
        parameters: list[inspect.Parameter] = []
        for parameter in own.parameters.values():
            parameters += [parameter] if parameter.name != "knobs" else []
            for name in places.get(parameter.name, ()):
                default, annotation = getattr(DEFAULTS, name), TYPES[name]
                parameters.append(inspect.Parameter(name, parameter.kind, default=default, annotation=annotation))
        public = own.replace(parameters=parameters)
        names = {name for group in places.values() for name in group}

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> R:
            bound = public.bind(*args, **kwargs)
            bound.apply_defaults()
            given = {name: value for name, value in bound.arguments.items() if name not in names}
            return function(**given, knobs={name: bound.arguments[name] for name in names})

        call.__signature__ = public  # type: ignore[attr-defined]
        return call

    return splice


def requiring(names: Sequence[str], function: Callable[..., R]) -> Callable[..., R]:
    """``function`` with its parameters ``names`` required (no default): NeMo's twin of an editstream surface
    that fills them in itself; a call without one is Python's ``TypeError``, as with NeMo's."""
    public = inspect.signature(function)
    strict = public.replace(
        parameters=[p.replace(default=p.empty) if p.name in names else p for p in public.parameters.values()]
    )

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> R:
        strict.bind(*args, **kwargs)
        return function(*args, **kwargs)

    call.__signature__ = strict  # type: ignore[attr-defined]
    return call


def with_fields(places: Places) -> Callable[[type[T]], type[T]]:
    """Give a class about to become a dataclass the spec's fields ``places[name]`` (annotation and default) after
    its own field ``name``, so the config has NeMo's field order; after a ``KW_ONLY`` marker they are keyword-only."""

    def splice(cls: type[T]) -> type[T]:
        annotations: dict[str, Any] = {}
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            annotations[name] = annotation
            for knob in places.get(name, ()):
                annotations[knob] = TYPES[knob]
                setattr(cls, knob, getattr(DEFAULTS, knob))
        cls.__annotations__ = annotations
        return cls

    return splice
