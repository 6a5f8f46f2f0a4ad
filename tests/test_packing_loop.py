"""The PackedDataset packing loop on toy datasets: token budget, buffer, oversize samples,
mandatory groups, weighted group draws, the per-worker reseed, malformed samples."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from editstream import collate_fn
from helpers import (
    BOS,
    EOS,
    ToyDataset,
    assert_batches_equal,
    make_mixed,
    make_packer,
    names_and_positions,
    preserved_global_rng,
    sized_groups,
    take,
)


def test_buffer_oversize_skip_and_dropped_on_flush():
    packer = make_packer(
        sized_groups([5, 6, 9, 4, 3, 6, 2, 7, 5, 4, 4, 4]),
        epoch=1,
        expected_num_tokens=10,
        max_num_tokens=12,
        max_num_tokens_per_sample=8,
        prefer_buffer_before=4,
        max_buffer_size=1,
    )
    with preserved_global_rng():
        batches = take(iter(packer), 4)
    # row 2 (9 tokens) is too long; row 5 waits in the buffer; row 7 overflows with a full
    # buffer, which flushes the sequence and loses row 7 (the reference behaviour).
    assert [[p for _, p in names_and_positions(b)] for b in batches] == [[0, 1], [3, 4, 6], [5, 8], [9, 10, 11]]
    assert [b["sample_lens"] for b in batches] == [[5, 6], [4, 3, 2], [6, 5], [4, 4, 4]]
    assert batches[1]["packed_text_ids"].tolist() == [BOS, 21, 22, EOS, BOS, 28, EOS, BOS, EOS]
    assert packer.drop_counts == {"oversize": 1}


def test_a_buffered_sample_that_does_not_fit_flushes_and_is_lost():
    packer = make_packer(
        sized_groups([3, 10, 10, 2]),
        epoch=1,
        expected_num_tokens=12,
        max_num_tokens=12,
        max_num_tokens_per_sample=12,
        prefer_buffer_before=6,
        max_buffer_size=1,
    )
    with preserved_global_rng():
        batches = take(iter(packer), 2)
    assert [[p for _, p in names_and_positions(b)] for b in batches] == [[0], [2, 3]]


def test_mandatory_group_opens_every_sequence_and_needs_strictly_fewer_tokens():
    groups = {
        "toy": {"dataset_names": ["d0"], "weight": 0.0, "is_mandatory": True, "kind": "sized", "sizes": [8, 3]},
        "toy_b": {"dataset_names": ["d0"], "weight": 1.0, "kind": "sized", "sizes": [4]},
    }
    packer = make_packer(
        groups,
        epoch=1,
        expected_num_tokens=10,
        max_num_tokens=12,
        max_num_tokens_per_sample=8,
        prefer_buffer_before=0,
        max_buffer_size=0,
    )
    with preserved_global_rng():
        batches = take(iter(packer), 3)
    # mandatory rows of exactly max_num_tokens_per_sample (even rows) are skipped
    assert [names_and_positions(b) for b in batches] == [
        [("toy", 1), ("toy_b", 0), ("toy_b", 1)],
        [("toy", 3), ("toy_b", 2), ("toy_b", 3)],
        [("toy", 5), ("toy_b", 4), ("toy_b", 5)],
    ]


def test_a_regular_sample_of_exactly_the_sample_limit_is_kept():
    packer = make_packer(
        sized_groups([8, 4]), epoch=1, expected_num_tokens=8, max_num_tokens=8, max_num_tokens_per_sample=8
    )
    with preserved_global_rng():
        batch = next(iter(packer))
    assert names_and_positions(batch) == [("toy", 0)] and batch["sample_lens"] == [8]


def test_groups_are_drawn_by_weight_from_the_reseeded_global_random():
    groups = {
        "toy": {"dataset_names": ["d0"], "weight": 1.0, "kind": "sized", "sizes": [3]},
        "toy_b": {"dataset_names": ["d0"], "weight": 3.0, "kind": "sized", "sizes": [3]},
        "toy_c": {"dataset_names": ["d0"], "weight": 0.0, "kind": "sized", "sizes": [3]},
    }
    packer = make_packer(groups, epoch=5, num_workers=2, expected_num_tokens=3)
    with preserved_global_rng():
        drawn = [names_and_positions(b)[0][0] for b in take(iter(packer), 200)]
    seed = ((5 * 1 + 0) * 2 + 0) & 0xFFFFFFFF  # ((seed * world + rank) * workers + worker)
    draws = random.Random(seed)
    assert drawn == ["toy" if draws.random() < 0.25 else "toy_b" for _ in range(200)]
    assert "toy_c" not in drawn and 0.6 < drawn.count("toy_b") / 200 < 0.9


def test_same_seed_same_stream_and_rank_changes_it():
    with preserved_global_rng():
        first = take(iter(make_mixed()), 6)
        second = take(iter(make_mixed()), 6)
        other_rank = take(iter(make_mixed(world_size=2, local_rank=1)), 6)
    assert_batches_equal(first, second)
    with pytest.raises(AssertionError):
        assert_batches_equal(first, other_rank)


def first_timestep(batch):
    finite = batch["packed_timesteps"][torch.isfinite(batch["packed_timesteps"])]
    return finite[0]


def test_worker_reseed_formula_sets_numpy_and_prefers_global_seed():
    with preserved_global_rng():
        np.random.seed(1234)  # overwritten by the reseed
        batch = next(iter(make_mixed(epoch=9, world_size=4, local_rank=3, num_workers=2)))
        seed = ((9 * 4 + 3) * 2 + 0) & 0xFFFFFFFF
        assert first_timestep(batch) == torch.tensor(np.random.RandomState(seed).randn(), dtype=torch.float32)

        packer = make_mixed(epoch=9)
        packer._global_seed = 17
        batch = next(iter(packer))
        assert first_timestep(batch) == torch.tensor(np.random.RandomState(17).randn(), dtype=torch.float32)


def test_worker_reseed_uses_the_dataloader_worker_id():
    packer = make_mixed(epoch=9, num_workers=2)
    loader = torch.utils.data.DataLoader(packer, batch_size=1, num_workers=2, collate_fn=collate_fn)
    with preserved_global_rng():
        batches = take(iter(loader), 2)  # batch i comes from worker i
    for worker_id, batch in enumerate(batches):
        assert {d["worker_id"] for d in batch["batch_data_indexes"]} == {worker_id}
        seed = (9 * 1 + 0) * 2 + worker_id
        assert first_timestep(batch) == torch.tensor(np.random.RandomState(seed).randn(), dtype=torch.float32)


def test_mixed_stream_has_every_kind_of_output():
    with preserved_global_rng():
        batches = take(iter(make_mixed()), 8)
    keys = set().union(*batches)
    assert {"padded_images", "packed_vit_tokens", "packed_timesteps", "packed_label_ids"} <= keys
    for batch in batches:
        assert batch["sequence_length"] == sum(batch["sample_lens"]) <= 56
        assert batch["packed_position_ids"].shape == (batch["sequence_length"],)
        assert len(batch["nested_attention_masks"]) == len(batch["batch_data_indexes"])


def test_malformed_samples_are_skipped_and_counted():
    class Broken(ToyDataset):
        def _sized(self, row):
            sample = super()._sized(row)
            if row % 2:
                sample["text_ids_list"].append([1])  # one more text than the plan has
            return sample

    packer = make_packer(sized_groups([4]), epoch=0, expected_num_tokens=8, registry={"toy": Broken})
    with preserved_global_rng():
        batches = take(iter(packer), 2)
    assert [[p for _, p in names_and_positions(b)] for b in batches] == [[0, 2], [4, 6]]
    # rows 1, 3 and 5 were drawn (and dropped) before row 6 completed the second batch
    assert packer.drop_counts == {"malformed": 3}


def test_a_group_that_runs_dry_names_itself():
    packer = make_packer(sized_groups([4], length=3), epoch=0, expected_num_tokens=100, max_num_tokens=100)
    with preserved_global_rng(), pytest.raises(RuntimeError, match="'toy' stopped yielding"):
        next(iter(packer))


def test_a_second_iter_continues_the_datasets_with_a_fresh_reseed():
    packer = make_packer(sized_groups([4]), epoch=0, expected_num_tokens=8)
    with preserved_global_rng():
        first = next(iter(packer))
        second = next(iter(packer))
    assert [p for _, p in names_and_positions(first)] == [0, 1]
    assert [p for _, p in names_and_positions(second)] == [2, 3]
