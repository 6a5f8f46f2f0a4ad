"""What a dataset turns an encoded image into: the opt-in uint8 output (resized pixels plus their
``(mean, std)``) and the opt-in fast decode; with both off, exactly the reference's decode and transform."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from .decode import decode_image, opened_image
from .fast_decode import decode_image_reduced
from .transforms import ImageTransform, Normalization

IMAGE_DTYPES = ("float32", "uint8")
"""What datasets and packers hand out as image tensors; ``float32`` (normalized) is the default."""

NORMALIZATION_KEY = "image_normalization"
"""The sample key listing, per entry of ``image_tensor_list``, its ``(mean, std)`` or ``None``."""


SIZES_ONLY = contextvars.ContextVar("editstream_sizes_only", default=False)
"""Set by :func:`sizes_only`: images are opened, not decoded, and transformed to their shape alone."""


@contextlib.contextmanager
def sizes_only() -> Iterator[None]:
    """Within this block datasets count tokens without pixels (``verify --recipe``): images are only opened."""
    token = SIZES_ONLY.set(True)
    try:
        yield
    finally:
        SIZES_ONLY.reset(token)


def check_image_dtype(value: Any, owner: str) -> str:
    """``value`` if it is one of :data:`IMAGE_DTYPES`, else a ``ValueError`` naming ``owner``."""
    if value not in IMAGE_DTYPES:
        raise ValueError(f"{owner}: image_dtype must be one of {IMAGE_DTYPES}, got {value!r}")
    return str(value)


def check_fast_decode(value: Any, owner: str) -> bool:
    """``value`` if it is a bool, else a ``TypeError`` naming ``owner``."""
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: fast_decode must be True or False, got {value!r}")
    return value


def transform_image(
    transform: Any, image: Any, image_dtype: str, img_num: int | None = None
) -> tuple[torch.Tensor, Normalization | None]:
    """``(tensor, normalization)``: uint8 pixels and their ``(mean, std)``, or the transform's own output
    and None; ``img_num`` is passed on only when given, as the reference calls ``transform(image)``."""
    kwargs = {} if img_num is None else {"img_num": img_num}
    if SIZES_ONLY.get() and isinstance(transform, ImageTransform):
        width, height = transform.target_size(*image.size, **kwargs)
        return torch.zeros((), dtype=torch.uint8).expand(3, height, width), None
    # uint8 only when the float output is normalize_pixels(to_uint8(...)): an unmodified ImageTransform
    plain = isinstance(transform, ImageTransform) and type(transform).__call__ is ImageTransform.__call__
    if image_dtype == "uint8" and plain:
        return transform.to_uint8(image, **kwargs), transform.normalization
    return transform(image, **kwargs), None


def share_one_storage(sample: dict[str, Any]) -> dict[str, Any]:
    """``sample`` with its uint8 images moved into views of one storage (values and shapes unchanged):
    a worker's hand-off costs a shared-memory segment and a file descriptor per storage, not per tensor."""
    images = sample["image_tensor_list"]
    picked = [i for i, t in enumerate(images) if isinstance(t, torch.Tensor) and t.dtype == torch.uint8]
    if len({images[i].untyped_storage().data_ptr() for i in picked}) < 2:  # shared already (or one image)
        return sample
    flat = torch.empty(sum(images[i].numel() for i in picked), dtype=torch.uint8)
    offset = 0
    for i in picked:
        size = images[i].numel()
        view = flat[offset : offset + size].view(images[i].shape)
        view.copy_(images[i])
        images[i] = view
        offset += size
    return sample


def load_image(data: Any, transforms: Sequence[Any], fast_decode: bool, img_num: int = 1) -> Any:
    """Decode one image for ``transforms``: exact unless ``fast_decode`` and all are ImageTransforms."""
    used = [t for t in transforms if t is not None]
    if SIZES_ONLY.get() and used and all(isinstance(t, ImageTransform) for t in used):
        return opened_image(bytes(data))
    if not fast_decode or not used or not all(isinstance(t, ImageTransform) for t in used):
        return decode_image(data)

    def target(width: int, height: int) -> tuple[int, int]:
        sizes = [t.target_size(width, height, img_num=img_num) for t in used]
        return max(w for w, _ in sizes), max(h for _, h in sizes)

    return decode_image_reduced(data, target)
