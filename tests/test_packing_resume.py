"""PackedDataset checkpointing: a restored packer continues exactly like an uninterrupted one."""

from __future__ import annotations

import pytest

from editstream import collate_fn
from editstream.packing.state import STATE_FORMAT
from helpers import (
    assert_batches_equal,
    assert_resumes_identically,
    make_mixed,
    make_packer,
    mixed_groups,
    preserved_global_rng,
    sized_groups,
    take,
    torch_roundtrip,
)


def first_state_with_buffer(make, limit=60):
    """Number of batches after which the packer's buffer is non-empty, and that state."""
    packer = make()
    with preserved_global_rng():
        iterator = iter(packer)
        for n in range(1, limit + 1):
            next(iterator)
            state = packer.state_dict()
            if state["buffer"]:
                return n, state
    raise AssertionError(f"the buffer stayed empty for {limit} batches")


@pytest.mark.parametrize("use_flex", [False, True])
@pytest.mark.parametrize("n_before", [0, 1, 4, 9])
def test_resume_matches_uninterrupted_run(n_before, use_flex):
    assert_resumes_identically(lambda: make_mixed(use_flex=use_flex), n_before, 5)


@pytest.mark.parametrize("use_flex", [False, True])
def test_resume_with_samples_waiting_in_the_buffer(use_flex):
    def make():
        return make_mixed(use_flex=use_flex)

    n_before, probe = first_state_with_buffer(make)
    state = assert_resumes_identically(make, n_before, 6, roundtrip=torch_roundtrip)
    assert state["buffer"] and state["started"]
    assert_batches_equal(probe["buffer"], state["buffer"])


def test_resume_with_a_mandatory_group_and_workers_in_the_layout():
    groups = mixed_groups()
    groups["toy_c"] = {"dataset_names": ["d0"], "weight": 0.5, "is_mandatory": True, "kind": "mixed"}

    def make():
        return make_packer(
            groups,
            probs=(0.3, 0.4, 0.2),
            epoch=3,
            world_size=2,
            local_rank=1,
            num_workers=3,
            expected_num_tokens=30,
            max_num_tokens=40,
            max_num_tokens_per_sample=36,
            prefer_buffer_before=10,
            max_buffer_size=2,
        )

    assert_resumes_identically(make, 3, 4)


def test_state_is_plain_data_that_survives_torch_save_and_later_iteration():
    n_before, _ = first_state_with_buffer(make_mixed)
    packer = make_mixed()
    with preserved_global_rng():
        iterator = iter(packer)
        take(iterator, n_before)
        state = packer.state_dict()
        snapshot = torch_roundtrip(state)
        take(iterator, 5)  # later iteration must not change a state already taken
    assert state["buffer"]
    assert_batches_equal(snapshot, state)
    assert state["format"] == STATE_FORMAT
    assert (state["rank"], state["world_size"], state["num_workers"], state["worker_id"]) == (0, 1, 0, 0)
    assert state["data_seed"] == 9 and list(state["datasets"]) == ["toy", "toy_b"]
    assert isinstance(state["datasets"]["toy_b"]["data_status"][0], int)


def test_a_loaded_state_is_reported_until_iteration_starts():
    source = make_mixed()
    with preserved_global_rng():
        take(iter(source), 3)
    state = source.state_dict()
    fresh = make_mixed()
    fresh.load_state_dict(state)
    iter(fresh)  # created but not started, as DataLoader workers do before their first fetch
    assert_batches_equal(state, fresh.state_dict())


def test_state_before_iteration_restarts_like_a_fresh_packer():
    state = make_mixed().state_dict()
    assert state["started"] is False and state["buffer"] == [] and state["rng"] is None
    assert_resumes_identically(make_mixed, 0, 3)


def test_load_restores_the_epoch_seed():
    source = make_mixed(epoch=21)
    with preserved_global_rng():
        expected = take(iter(source), 4)
        restart = make_mixed(epoch=21)
        take(iter(restart), 2)
        state = restart.state_dict()
        fresh = make_mixed(epoch=None)
        fresh.load_state_dict(state)
        assert [d.epoch_seeds for d in fresh.grouped_datasets] == [[21], [21]]
        assert_batches_equal(expected[2:], take(iter(fresh), 2))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"world_size": 2}, "world_size=1 but this dataset has world_size=2"),
        ({"world_size": 2, "local_rank": 1}, "rank=0 but this dataset has rank=1"),
        ({"num_workers": 4}, "num_workers=0 but this dataset has num_workers=4"),
    ],
)
def test_a_different_layout_is_refused(kwargs, match):
    with preserved_global_rng():
        source = make_mixed()
        take(iter(source), 2)
    with pytest.raises(ValueError, match=match):
        make_mixed(**kwargs).load_state_dict(source.state_dict())


def test_other_groups_or_foreign_states_are_refused():
    state = make_mixed().state_dict()
    with pytest.raises(ValueError, match=r"groups \['toy', 'toy_b'\].*\['toy'\]"):
        make_packer(sized_groups([4]), epoch=9).load_state_dict(state)
    with pytest.raises(ValueError, match="not a PackedDataset state"):
        make_mixed().load_state_dict({"data_status": [1]})
    truncated = {key: value for key, value in state.items() if key != "rng"}
    with pytest.raises(ValueError, match=r"lacks \['rng'\]"):
        make_mixed().load_state_dict(truncated)


def test_a_state_from_another_worker_is_refused_when_iteration_starts():
    source = make_mixed()
    with preserved_global_rng():
        take(iter(source), 2)
        state = source.state_dict()
        state["worker_id"] = 1
        fresh = make_mixed()
        fresh.load_state_dict(state)
        with pytest.raises(ValueError, match="worker 1 was loaded into worker 0"):
            next(iter(fresh))


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_in_its_workers(workers):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def loader(state=None):
        packer = make_mixed(num_workers=workers)
        result = stateful.StatefulDataLoader(packer, batch_size=1, num_workers=workers, collate_fn=collate_fn)
        if state is not None:
            result.load_state_dict(state)
        return result

    with preserved_global_rng():
        expected = take(iter(loader()), 8)
        first = loader()
        head = take(iter(first), 4)
        state = torch_roundtrip(first.state_dict())
        del first
        tail = take(iter(loader(state)), 4)
    assert_batches_equal(expected[:4], head)
    assert_batches_equal(expected[4:], tail)
    if workers:
        assert {d["worker_id"] for batch in tail for d in batch["batch_data_indexes"]} == {0, 1}
