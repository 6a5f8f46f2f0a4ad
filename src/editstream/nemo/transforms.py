"""Twin of NeMo's ``multimodal.transforms``: the stride-aligned image transform."""

from __future__ import annotations

from ..loader.transforms import ImageTransform

__all__ = ["ImageTransform"]
