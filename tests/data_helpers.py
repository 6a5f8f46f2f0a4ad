"""Small shared pieces of the data tests: transform sizes, a synthesized + converted dataset,
and the first items of a loader."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
