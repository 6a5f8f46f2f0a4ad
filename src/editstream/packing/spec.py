"""``PackingSpec``: every packing knob in one frozen record, each with its type, default (NeMo's) and NeMo surface
written once; the surfaces are derived from it (:mod:`.surfaces`) and build a spec, so one rule checks each value."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

PACKER, SEQUENCE, EXTENSION = "packer keyword", "sequence knob", "extension"
"""Where NeMo's surfaces take a field: a ``PackedDataset`` keyword, a knob ``PackedDataset`` reads from its
``data_config`` (as NeMo's does), or editstream's own (a keyword after NeMo's, passed by ``build()`` only when set)."""

_PROBABILITIES = ("text_cond_dropout_prob", "vit_cond_dropout_prob", "vae_cond_dropout_prob")
_NON_NEGATIVE = ("prefer_buffer_before", "max_buffer_size")


def knob(default: Any, surface: str) -> Any:
    """A spec field: its default and the surface (:data:`PACKER`, :data:`SEQUENCE`, :data:`EXTENSION`) it is on."""
    return dataclasses.field(default=default, metadata={"surface": surface})


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

    expected_num_tokens: int = knob(32768, PACKER)
    max_num_tokens_per_sample: int = knob(16384, PACKER)
    max_num_tokens: int = knob(36864, PACKER)
    prefer_buffer_before: int = knob(16384, PACKER)
    max_buffer_size: int = knob(50, PACKER)
    interpolate_pos: bool = knob(False, PACKER)
    use_flex: bool = knob(False, PACKER)
    text_cond_dropout_prob: float = knob(0.1, SEQUENCE)
    vit_cond_dropout_prob: float = knob(0.4, SEQUENCE)
    vae_cond_dropout_prob: float = knob(0.1, SEQUENCE)
    vae_image_downsample: int = knob(16, SEQUENCE)
    max_latent_size: int = knob(32, SEQUENCE)
    vit_patch_size: int = knob(14, SEQUENCE)
    max_num_patch_per_side: int = knob(70, SEQUENCE)
    image_dtype: str = knob("float32", EXTENSION)
    """``"uint8"`` hands batches over as uint8 pixels (see ``editstream.normalize_batch``)."""
    elastic: bool = knob(False, EXTENSION)
    """Finite, exact epochs over logical streams that resume at any layout (docs/checkpoints.md)."""
    elastic_streams: int | None = knob(None, EXTENSION)
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
PACKER_KEYWORDS, SEQUENCE_KNOBS, EXTENSIONS = (
    tuple(f.name for f in dataclasses.fields(PackingSpec) if f.metadata["surface"] == surface)
    for surface in (PACKER, SEQUENCE, EXTENSION)
)
"""The fields on each surface, in the spec's order (which is NeMo's)."""
_POSITIVE = tuple(f.name for f in dataclasses.fields(PackingSpec) if f.type == "int" and f.name not in _NON_NEGATIVE)
"""The integer knobs: positive counts, but for the buffer's two (non-negative)."""
DEFAULTS = PackingSpec()
"""Every knob at its default: the one place the defaults of the keyword surfaces come from."""


class GroupedDatasetConfig(Protocol):
    """The dataset config a ``PackedDataset`` is built from (``BagelDatasetConfig`` is one)."""

    grouped_datasets: Mapping[str, Any] | None
    dataset_info: Mapping[str, Any] | None
    dataset_info_path: str | None

    def resolved(self) -> GroupedDatasetConfig: ...  # a copy with both read from their files
