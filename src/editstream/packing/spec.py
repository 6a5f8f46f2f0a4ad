"""``PackingSpec``: every packing knob in one frozen record, its defaults (NeMo's) written once; NeMo's keyword
surfaces take their defaults from :data:`DEFAULTS` and build a spec, so one rule checks each value."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

BUDGETS = (
    "expected_num_tokens",
    "max_num_tokens_per_sample",
    "max_num_tokens",
    "prefer_buffer_before",
    "max_buffer_size",
)
"""The token budgets and the buffer's knobs."""
PACKER_KEYWORDS = (*BUDGETS, "interpolate_pos", "use_flex")
"""The fields ``PackedDataset`` takes as NeMo's keyword arguments."""
SEQUENCE_KNOBS = (
    "text_cond_dropout_prob",
    "vit_cond_dropout_prob",
    "vae_cond_dropout_prob",
    "vae_image_downsample",
    "max_latent_size",
    "vit_patch_size",
    "max_num_patch_per_side",
)
"""The fields ``PackedDataset`` reads from its ``data_config``, as NeMo's does."""
EXTENSIONS = ("image_dtype", "elastic", "elastic_streams")
"""editstream's fields: ``PackedDataset`` keywords after NeMo's, passed by ``build()`` only when set."""

_PROBABILITIES = ("text_cond_dropout_prob", "vit_cond_dropout_prob", "vae_cond_dropout_prob")
_NON_NEGATIVE = ("prefer_buffer_before", "max_buffer_size")
_POSITIVE = tuple(name for name in (*BUDGETS, *SEQUENCE_KNOBS) if name not in _PROBABILITIES + _NON_NEGATIVE)


def is_int(value: Any) -> bool:
    """An integer that is not a bool (``True`` is not a token count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _problem(name: str, value: Any) -> str | None:
    """Why ``value`` is not a valid ``name`` (the words tests and users see), or ``None``."""
    if name in _PROBABILITIES and not (is_real(value) and 0.0 <= value <= 1.0):
        return "must be a probability in [0, 1]"
    if name in _POSITIVE and not (is_int(value) and value > 0):
        return "must be a positive integer"
    if name in _NON_NEGATIVE and not (is_int(value) and value >= 0):
        return "must be a non-negative integer"
    if name == "image_dtype" and value not in ("float32", "uint8"):
        return "must be 'float32' or 'uint8'"
    if name == "elastic" and not isinstance(value, bool):
        return "must be true or false"
    if name == "elastic_streams" and value is not None and not (is_int(value) and value > 0):
        return "must be a positive integer"
    return None


@dataclass(frozen=True, kw_only=True)
class PackingSpec:
    """How samples are packed: budgets, sequence layout, batch image dtype, elastic epochs (validated on creation)."""

    expected_num_tokens: int = 32768
    max_num_tokens_per_sample: int = 16384
    max_num_tokens: int = 36864
    prefer_buffer_before: int = 16384
    max_buffer_size: int = 50
    interpolate_pos: bool = False
    use_flex: bool = False
    text_cond_dropout_prob: float = 0.1
    vit_cond_dropout_prob: float = 0.4
    vae_cond_dropout_prob: float = 0.1
    vae_image_downsample: int = 16
    max_latent_size: int = 32
    vit_patch_size: int = 14
    max_num_patch_per_side: int = 70
    image_dtype: str = "float32"
    """``"uint8"`` hands batches over as uint8 pixels (see ``editstream.normalize_batch``)."""
    elastic: bool = False
    """Finite, exact epochs over logical streams that resume at any layout (docs/checkpoints.md)."""
    elastic_streams: int | None = None
    """The number of logical streams (default: world_size x num_workers of the first launch)."""

    def __post_init__(self) -> None:
        for name in FIELDS:
            value = getattr(self, name)
            problem = _problem(name, value)
            if problem is not None:
                raise ValueError(f"{name} {problem}, got {value!r}")

    def packer_arguments(self) -> dict[str, Any]:
        """``PackedDataset`` keywords carrying this spec (sequence knobs travel in ``data_config``): editstream's
        only when not default, so a packer class with NeMo's signature takes them."""
        arguments = {name: getattr(self, name) for name in PACKER_KEYWORDS}
        arguments.update({n: getattr(self, n) for n in EXTENSIONS if getattr(self, n) != getattr(DEFAULTS, n)})
        return arguments


FIELDS = tuple(f.name for f in dataclasses.fields(PackingSpec))
DEFAULTS = PackingSpec()
"""Every knob at its default: the one place the defaults of the keyword surfaces come from."""


class GroupedDatasetConfig(Protocol):
    """The dataset config a ``PackedDataset`` is built from (``BagelDatasetConfig`` is one)."""

    grouped_datasets: Mapping[str, Any] | None
    dataset_info: Mapping[str, Any] | None
    dataset_info_path: str | None

    def resolved(self) -> GroupedDatasetConfig:
        """A copy with ``grouped_datasets`` and ``dataset_info`` read from their files."""
