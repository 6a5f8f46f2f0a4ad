"""A list of RNG points in a few kilobytes of JSON: each point is "the one before, advanced by ``n`` words"
(found by stepping a private generator), or a literal key when not within ``MAX_BLOCKS``; always exact."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .points import MT_WORDS, RngPoint, mt_words

CHAIN_FORMAT = "editstream.rng-chain/1"
MAX_BLOCKS = 512
"""Key blocks (624 words each) searched between two consecutive points before a literal is written."""

Words = tuple[bytes, int]
"""A Mersenne Twister position: the key as 624 little-endian uint32 words, and the index in it."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


class _Stepper:
    """A private legacy ``RandomState`` moved word by word (``bytes(4 * n)`` takes exactly n words); it steps
    Python's ``random`` positions too, as both generators are the same Mersenne Twister."""

    def __init__(self) -> None:
        self.rng = np.random.RandomState()

    def set(self, words: Words) -> None:
        self.rng.set_state(("MT19937", np.frombuffer(words[0], dtype=np.uint32), words[1], 0, 0.0))

    def advance(self, n: int) -> None:
        if n > 0:
            self.rng.bytes(4 * n)

    def get(self) -> Words:
        return mt_words(self.rng)


def words_between(stepper: _Stepper, start: Words, end: Words, max_blocks: int = MAX_BLOCKS) -> int | None:
    """How many words take the generator from ``start`` to ``end``, or ``None`` if not within ``max_blocks``."""
    current, n, placed = start, 0, False
    for _ in range(max_blocks + 1):
        key, pos = current
        if key == end[0] and pos <= end[1]:
            return n + end[1] - pos
        if not placed:
            stepper.set(start)
            placed = True
        step = MT_WORDS - pos + 1  # to the end of this key, and one word into the next
        stepper.advance(step)
        n += step
        current = stepper.get()
    return None


def _words(name: str, point: RngPoint) -> Words:
    """The point's position in its ``"python"`` or ``"numpy"`` generator."""
    if name == "numpy":
        return point.numpy_key, point.numpy_pos
    internal = point.python[1]
    return np.asarray(internal[:MT_WORDS], dtype=np.uint32).tobytes(), int(internal[MT_WORDS])


class ChainEncoder:
    """Encodes point lists, remembering the word counts between consecutive points already seen."""

    def __init__(self) -> None:
        self._stepper = _Stepper()
        self._known: dict[tuple[str, int, int], tuple[RngPoint, RngPoint, int | None]] = {}

    def _count(self, name: str, a: RngPoint, b: RngPoint) -> int | None:
        key = (name, id(a), id(b))
        hit = self._known.get(key)
        if hit is not None and hit[0] is a and hit[1] is b:
            return hit[2]
        n = words_between(self._stepper, _words(name, a), _words(name, b))
        self._known[key] = (a, b, n)
        return n

    def _stream(self, name: str, points: Sequence[RngPoint]) -> dict[str, Any]:
        bases: list[str] = []
        steps: list[int] = []  # words from the point before; -1 - pos for a literal at position pos
        for i, point in enumerate(points):
            n = None if i == 0 else self._count(name, points[i - 1], point)
            if n is None:
                key, pos = _words(name, point)
                bases.append(_b64(key))
                steps.append(-1 - pos)
            else:
                steps.append(n)
        return {"bases": bases, "steps": steps}

    def encode(self, points: Sequence[RngPoint]) -> dict[str, Any]:
        """A JSON-ready encoding of ``points``; :func:`decode_points` gives them back exactly."""
        used = {(name, id(a), id(b)) for name in ("python", "numpy") for a, b in zip(points, points[1:])}
        python = self._stream("python", points)
        numpy_ = self._stream("numpy", points)
        self._known = {key: value for key, value in self._known.items() if key in used}
        torch_bases: list[str] = []
        torch_at: list[int] = []
        last: torch.Tensor | None = None
        for p in points:
            if last is None or not torch.equal(last, p.torch):
                torch_bases.append(_b64(p.torch.numpy().tobytes()))
                last = p.torch
            torch_at.append(len(torch_bases) - 1)
        python["gauss"] = [p.python[2] for p in points]
        numpy_["gauss"] = [None if p.numpy_gauss is None else list(p.numpy_gauss) for p in points]
        return {
            "format": CHAIN_FORMAT,
            "python": python,
            "numpy": numpy_,
            "torch": {"bases": torch_bases, "at": torch_at},
        }


def _decode_stream(stream: dict[str, Any], stepper: _Stepper, count: int) -> list[Words]:
    bases, steps = stream["bases"], stream["steps"]
    if len(steps) != count or (steps and steps[0] >= 0) or sum(1 for s in steps if s < 0) != len(bases):
        raise ValueError(f"damaged rng chain: {len(steps)} steps and {len(bases)} literals for {count} points")
    out: list[Words] = []
    literal = 0
    for step in steps:
        if step < 0:
            words = (_unb64(bases[literal]), -1 - step)
            literal += 1
            stepper.set(words)
        else:
            stepper.advance(step)
            words = stepper.get()
        out.append(words)
    return out


def decode_points(encoded: Any) -> list[RngPoint]:
    """The points :meth:`ChainEncoder.encode` was given, exactly; ``ValueError`` for a damaged encoding."""
    if not isinstance(encoded, dict) or encoded.get("format") != CHAIN_FORMAT:
        found = encoded.get("format") if isinstance(encoded, dict) else type(encoded).__name__
        raise ValueError(f"not an rng chain (expected format {CHAIN_FORMAT!r}, got {found!r})")
    count = len(encoded["torch"]["at"])
    python = _decode_stream(encoded["python"], _Stepper(), count)
    numpy_ = _decode_stream(encoded["numpy"], _Stepper(), count)
    torch_states = [
        torch.frombuffer(bytearray(_unb64(t)), dtype=torch.uint8).clone() for t in encoded["torch"]["bases"]
    ]
    points = []
    for i in range(count):
        key, pos = python[i]
        gauss = encoded["numpy"]["gauss"][i]
        points.append(
            RngPoint(
                python=(3, (*np.frombuffer(key, dtype=np.uint32).tolist(), pos), encoded["python"]["gauss"][i]),
                numpy_key=numpy_[i][0],
                numpy_pos=numpy_[i][1],
                numpy_gauss=None if gauss is None else (int(gauss[0]), float(gauss[1])),
                torch=torch_states[encoded["torch"]["at"][i]],
            )
        )
    return points
