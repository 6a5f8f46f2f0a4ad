"""Where the global RNGs stand: full captures, and the cheap point taken before every parse (numpy's words read
from its ctypes state address, as ``get_state()`` costs over 100 us; its normal cache left out)."""

from __future__ import annotations

import ctypes
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

MT_WORDS = 624
"""Words in a Mersenne Twister key (Python's ``random`` and numpy's legacy ``RandomState`` both)."""
_KEY_BYTES = MT_WORDS * 4


@dataclass(frozen=True)
class RngPoint:
    """The global ``random`` / ``numpy`` / ``torch`` RNG states at one moment (``numpy_gauss``: numpy's normal
    cache ``(has_gauss, cached)``, ``None`` when taken cheaply)."""

    python: tuple[Any, ...]
    numpy_key: bytes
    numpy_pos: int
    numpy_gauss: tuple[int, float] | None
    torch: torch.Tensor


def _words_direct(rng: np.random.RandomState) -> tuple[bytes, int]:
    raw = ctypes.string_at(rng._bit_generator.ctypes.state_address, _KEY_BYTES + 4)
    return raw[:_KEY_BYTES], int.from_bytes(raw[_KEY_BYTES:], "little", signed=True)


def _words_copied(rng: np.random.RandomState) -> tuple[bytes, int]:
    _, key, pos, _, _ = rng.get_state()
    return np.asarray(key, dtype=np.uint32).tobytes(), int(pos)


def _direct_read_works() -> bool:
    """Whether the ctypes read gives what ``get_state()`` says (checked once, on a private generator)."""
    probe = np.random.RandomState(7)
    probe.bytes(12)
    try:
        return _words_direct(probe) == _words_copied(probe)
    except (AttributeError, TypeError, ValueError, OSError):
        return False


_words = _words_direct if _direct_read_works() else _words_copied


def mt_words(rng: np.random.RandomState | None = None) -> tuple[bytes, int]:
    """The Mersenne Twister key bytes and position of a legacy numpy generator (default: the global one), cheaply."""
    return _words(np.random.mtrand._rand if rng is None else rng)


def capture_point() -> RngPoint:
    """The full state of the three global RNGs (numpy's normal cache included)."""
    _, key, pos, has_gauss, cached = np.random.get_state()
    return RngPoint(
        python=random.getstate(),
        numpy_key=np.asarray(key, dtype=np.uint32).tobytes(),
        numpy_pos=int(pos),
        numpy_gauss=(int(has_gauss), float(cached)),
        torch=torch.get_rng_state(),
    )


def draw_point() -> RngPoint:
    """The point a parse starts from, taken cheaply (about 20 us; numpy's normal cache left out)."""
    key, pos = mt_words()
    return RngPoint(
        python=random.getstate(), numpy_key=key, numpy_pos=pos, numpy_gauss=None, torch=torch.get_rng_state()
    )


def seed_all(seed: int) -> None:
    """Seed the three global RNGs (Python's, numpy's legacy one, torch's) with ``seed``."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def apply_point(point: RngPoint) -> None:
    """Put the global RNGs where ``point`` says (an empty numpy normal cache when it has none)."""
    version, internal, gauss = point.python
    random.setstate((version, tuple(internal), gauss))
    has_gauss, cached = point.numpy_gauss or (0, 0.0)
    key = np.frombuffer(point.numpy_key, dtype=np.uint32)
    np.random.set_state(("MT19937", key, point.numpy_pos, has_gauss, cached))
    torch.set_rng_state(point.torch)
