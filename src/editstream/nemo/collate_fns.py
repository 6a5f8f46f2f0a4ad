"""Twin of NeMo's ``multimodal.collate_fns``: the packed-batch wrapper and its collate functions."""

from __future__ import annotations

from ..packing.collate import SimpleCustomBatch, bagel_packed_collate_fn, collate_wrapper

__all__ = ["SimpleCustomBatch", "bagel_packed_collate_fn", "collate_wrapper"]
