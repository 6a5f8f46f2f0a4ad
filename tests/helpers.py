"""Shared helpers of the test suite, in one module: data to test with, comparisons, resume checks.

Tests import from here (``from helpers import ...``), never from other test files.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import math
import random
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from editstream.conversion import convert
from editstream.testing.synth import write_synthetic_dataset

# Small images keep the tests fast; stride 16 (VAE) and 14 (ViT) as in BAGEL.
VAE = dict(max_image_size=128, min_image_size=32, image_stride=16)
VIT = dict(max_image_size=112, min_image_size=28, image_stride=14)


def synth_and_convert(root: Path, **synth_kwargs: Any) -> Path:
    """Write a synthetic parquet dataset to ``root/pq`` and its rowgroup-layout shards to ``root/wds``."""
    write_synthetic_dataset(str(root / "pq"), **synth_kwargs)
    convert(str(root / "pq"), str(root / "wds"), workers=1, progress=False)
    return root


def first(items: Iterable[Any], n: int) -> list[Any]:
    """The first ``n`` items of an iterable (a DataLoader, say), without running it further."""
    return list(itertools.islice(items, n))


def assert_batches_equal(expected: Any, actual: Any, path: str = "item") -> None:
    """Recursive equality: same keys and types; tensors and arrays equal with the same dtype.

    Batch objects with ``to_dict()`` (``SimpleCustomBatch``) are compared as their dicts.
    """
    if hasattr(expected, "to_dict") and not isinstance(expected, dict):
        assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert_batches_equal(expected.to_dict(), actual.to_dict(), path)
        return
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a tensor, got {type(actual).__name__}"
        assert expected.dtype == actual.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert expected.shape == actual.shape, f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        assert torch.equal(expected, actual), f"{path}: tensor values differ"
        return
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{path}: expected an ndarray, got {type(actual).__name__}"
        assert expected.dtype == actual.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert np.array_equal(expected, actual), f"{path}: array values differ"
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected a dict, got {type(actual).__name__}"
        assert list(expected) == list(actual), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_batches_equal(expected[key], actual[key], f"{path}[{key!r}]")
        return
    if isinstance(expected, (list, tuple)):
        assert type(expected) is type(actual), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert len(expected) == len(actual), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_batches_equal(e, a, f"{path}[{i}]")
        return
    if isinstance(expected, float) and math.isnan(expected):
        assert isinstance(actual, float) and math.isnan(actual), f"{path}: {actual!r} != nan"
        return
    assert type(expected) is type(actual) and expected == actual, f"{path}: {actual!r} != {expected!r}"


@contextlib.contextmanager
def preserved_global_rng() -> Iterator[None]:
    """Put the global random / numpy / torch RNG states back afterwards (stages may reseed them)."""
    saved = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    try:
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.set_rng_state(saved[2])


def scramble_global_rng(seed: int = 987_654_321) -> None:
    """Move the global random / numpy / torch RNGs somewhere unrelated, as a new process would be."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def torch_roundtrip(state: Any) -> Any:
    """Pass a state through ``torch.save`` / ``torch.load`` as a checkpoint would."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def take(iterator: Iterator[Any], n: int) -> list[Any]:
    """The next ``n`` items of ``iterator``; fails clearly if it ends early."""
    items = []
    for i in range(n):
        try:
            items.append(next(iterator))
        except StopIteration:
            raise AssertionError(f"the stage stopped after {i} items, {n} were needed") from None
    return items


def assert_resumes_identically(
    make: Callable[[], Any],
    n_before: int,
    n_after: int,
    compare: Callable[[Any, Any], None] = assert_batches_equal,
    roundtrip: Callable[[Any], Any] | None = None,
) -> Any:
    """Check that state taken after ``n_before`` items resumes to the uninterrupted stream.

    ``make()`` must return a fresh, ready-to-iterate stage (e.g. ``set_epoch`` already called)
    that behaves the same on every call. ``roundtrip`` may transform the state in between
    (e.g. :func:`torch_roundtrip`). Before resuming, the global RNGs are scrambled, so a stage
    that relies on them must restore them from its state. Returns the state, for further
    assertions by the caller. The runs happen one after another; the global RNGs are put back
    at the end.
    """
    with preserved_global_rng():
        uninterrupted = take(iter(make()), n_before + n_after)

        first = make()
        first_items = take(iter(first), n_before)
        for expected, actual in zip(uninterrupted, first_items):
            compare(expected, actual)
        state = first.state_dict()
        if roundtrip is not None:
            state = roundtrip(state)
        scramble_global_rng()  # a resumed job starts in a new process with unrelated RNG states

        resumed = make()
        resumed.load_state_dict(state)
        resumed_items = take(iter(resumed), n_after)
        for expected, actual in zip(uninterrupted[n_before:], resumed_items):
            compare(expected, actual)
    return state


ROOT = Path(__file__).resolve().parents[1]
TRAIN_LOOP = ROOT / "examples" / "train_loop.py"


def load_example(path: Path = TRAIN_LOOP) -> ModuleType:
    """The example script at ``path`` as a module (its ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
