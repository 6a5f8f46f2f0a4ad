"""A packed batch crosses from a real DataLoader worker as views of one shared-memory block per dtype,
with the values, dtypes and shapes it was built with, and can still be saved with ``torch.save``; in
the main process the collate leaves it untouched."""

from __future__ import annotations

import io
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from editstream import SimpleCustomBatch, bagel_packed_collate_fn, collate_fn
from editstream.packing.one_block import ALIGN, in_one_block


def batch(seed: int) -> dict[str, Any]:
    """A dict shaped like a packed batch: tensors of several dtypes, a list of tensors, plain values."""
    g = torch.Generator().manual_seed(seed)
    return {
        "packed_text_ids": torch.randint(0, 1000, (37,), generator=g),
        "packed_position_ids": torch.arange(37, dtype=torch.int32),
        "padded_images": torch.randint(0, 256, (2, 3, 17, 9), generator=g, dtype=torch.uint8),
        "packed_vit_tokens": torch.rand(5, 12, generator=g),
        "nested_attention_masks": [torch.rand(3, 3, generator=g) > 0.5, torch.zeros(4, 4)],
        "empty": torch.zeros(0, dtype=torch.int64),
        "transposed": torch.arange(6).reshape(2, 3).t(),
        "sample_lens": [12, 25],
        "sequence_length": 37,
    }


def reference_batch(seed: int) -> dict[str, Any]:
    """The keys every packed batch of the reference has (no image groups), from :func:`batch`."""
    data = batch(seed)
    return {
        "sequence_length": 37,
        "sample_lens": [12, 25],
        "packed_text_ids": data["packed_text_ids"],
        "packed_text_indexes": torch.arange(37),
        "packed_position_ids": data["packed_position_ids"],
        "batch_data_indexes": [{"dataset_name": "edit", "data_indexes": [0, 1]}],
        "nested_attention_masks": data["nested_attention_masks"],
    }


class Batches(IterableDataset):
    def __iter__(self):
        return (batch(seed) for seed in range(3))


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert list(got) == list(want)
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert got[key].dtype == value.dtype and torch.equal(got[key], value), key
        elif isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
            assert all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(got[key], value, strict=True)), key
        else:
            assert got[key] == value, key


def test_outside_a_worker_the_batch_is_returned_as_it_is():
    data = batch(0)
    assert in_one_block(data) is data
    assert all(a is b for a, b in zip(collate_fn(data).values(), data.values()))


def test_a_workers_batch_arrives_as_views_of_one_block_per_dtype_with_its_values():
    got = list(DataLoader(Batches(), batch_size=None, num_workers=1, collate_fn=collate_fn))
    assert len(got) == 3
    for seed, received in enumerate(got):
        assert_same(received, batch(seed))
        moved = [
            received[key] for key in ("packed_text_ids", "packed_position_ids", "padded_images", "packed_vit_tokens")
        ] + received["nested_attention_masks"]
        blocks = {}
        for t in moved:
            blocks.setdefault(t.dtype, set()).add(t.untyped_storage().data_ptr())
            assert t.storage_offset() * t.element_size() % ALIGN == 0 and t.is_contiguous()
        assert set(blocks) == {torch.int64, torch.int32, torch.uint8, torch.float32, torch.bool}
        assert all(len(ptrs) == 1 for ptrs in blocks.values())  # the two float32 tensors share one block
        assert len({ptr for ptrs in blocks.values() for ptr in ptrs}) == len(blocks)
        float32 = [received["packed_vit_tokens"], received["nested_attention_masks"][1]]
        assert float32[0].storage_offset() != float32[1].storage_offset()
        # left as they were: the empty tensor and the transposed view (moving it would change its strides)
        assert received["transposed"].stride() == batch(seed)["transposed"].stride()
        assert received["transposed"].untyped_storage().data_ptr() not in {p for ps in blocks.values() for p in ps}
        saved = io.BytesIO()
        torch.save(received, saved)
        assert_same(torch.load(io.BytesIO(saved.getvalue())), batch(seed))


def test_the_reference_batch_object_gets_the_same_hand_off():
    loader = DataLoader(
        [reference_batch(seed) for seed in range(2)], batch_size=1, num_workers=1, collate_fn=bagel_packed_collate_fn
    )
    for seed, received in enumerate(loader):
        assert isinstance(received, SimpleCustomBatch)
        assert_same(received.to_dict(), reference_batch(seed))
        int64 = [received.packed_text_ids, received.packed_text_indexes]
        assert len({t.untyped_storage().data_ptr() for t in int64}) == 1
