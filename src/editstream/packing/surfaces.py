"""NeMo's surfaces derived from the packing spec: its fields spliced into a function's signature or a config's
dataclass fields in NeMo's places (with the spec's types and defaults), and NeMo's twins' other defaults."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from .spec import DEFAULTS, PackingSpec

T = TypeVar("T")

TYPES = {field.name: field.type for field in dataclasses.fields(PackingSpec)}  # as written in PackingSpec


def with_knobs(places: Mapping[str, Sequence[str]]) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Give a function ending in ``**knobs`` the spec's fields ``places[name]`` as parameters after its parameter
    ``name`` (of its kind): ``inspect.signature`` shows them there, and their values come in ``knobs``."""

    def splice(function: Callable[..., T]) -> Callable[..., T]:
        own = inspect.signature(function)
        parameters: list[inspect.Parameter] = []
        for parameter in own.parameters.values():
            parameters += [] if parameter.kind is parameter.VAR_KEYWORD else [parameter]  # **knobs gives way
            for name in places.get(parameter.name, ()):
                default, annotation = getattr(DEFAULTS, name), TYPES[name]
                parameters.append(inspect.Parameter(name, parameter.kind, default=default, annotation=annotation))
        return behind(own.replace(parameters=parameters), function, by_name=True)

    return splice


REQUIRED = inspect.Parameter.empty
"""As a default for :func:`with_defaults`: the parameter has none (a call must give it)."""


def with_defaults(function: Callable[..., T], **defaults: Any) -> Callable[..., T]:
    """``function`` with other defaults for the parameters named (``REQUIRED``: none): NeMo's twin of an editstream
    surface, whose signature shows NeMo's defaults and whose calls reach ``function`` with them filled in."""
    own = inspect.signature(function)
    if not set(defaults) <= set(own.parameters):
        raise TypeError(f"{function.__qualname__} has no parameter {sorted(set(defaults) - set(own.parameters))}")
    twin = [p.replace(default=defaults.get(p.name, p.default)) for p in own.parameters.values()]
    return behind(own.replace(parameters=twin), function, by_name=False)


def behind(public: inspect.Signature, function: Callable[..., T], *, by_name: bool) -> Callable[..., T]:
    """``function`` behind the signature ``public`` (what ``inspect.signature`` reports): a call binds to it,
    defaults filled in, and reaches ``function`` with every argument by name (``by_name``) or as bound."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> T:
        bound = public.bind(*args, **kwargs)
        bound.apply_defaults()
        return function(**bound.arguments) if by_name else function(*bound.args, **bound.kwargs)

    call.__signature__ = public  # type: ignore[attr-defined]
    return call


def with_fields(places: Mapping[str, Sequence[str]]) -> Callable[[type[T]], type[T]]:
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
