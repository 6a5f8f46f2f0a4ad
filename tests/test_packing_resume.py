"""PackedDataset checkpointing: every packer meets check_state_contract, in the main process,
over toy datasets (flex or not, a full buffer, a mandatory group, another rank layout) and over
the real datasets on both backends (and from one backend to the other); states that cannot
resume are refused clearly. Inside DataLoader workers: test_stateful_loader.py.

The state holds tensors and RNG states, so it is checked through torch.save, not JSON.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from editstream.packing.checkpoint.chain import CHAIN_FORMAT
from editstream.packing.checkpoint.formats import STATE_FORMAT
from helpers import (
    BACKEND_PAIRS,
    assert_batches_equal,
    check_state_contract,
    make_mixed,
    make_packer,
    make_real_packer,
    mixed_groups,
    preserved_global_rng,
    sized_groups,
    synth_pipeline_data,
    take,
    torch_roundtrip,
)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synth_pipeline_data(tmp_path_factory.mktemp("resume-packer"))


def check_packer(make, n_before, n_after, **kwargs):
    return check_state_contract(make, n_before, n_after, roundtrips=(torch_roundtrip,), **kwargs)


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


# n_before = 0 (a state taken before iteration) is clause (d) of every check.
@pytest.mark.parametrize("use_flex", [False, True])
@pytest.mark.parametrize("n_before", [1, 4, 9])
def test_packer_state_contract(n_before, use_flex):
    check_packer(lambda: make_mixed(use_flex=use_flex), n_before, 5)


@pytest.mark.parametrize("use_flex", [False, True])
def test_state_contract_with_samples_waiting_in_the_buffer(use_flex):
    def make():
        return make_mixed(use_flex=use_flex)

    n_before, probe = first_state_with_buffer(make)
    state = check_packer(make, n_before, 6)
    assert state["buffer"] and state["started"]
    assert_batches_equal(probe["buffer"], state["buffer"])


def test_state_contract_with_a_mandatory_group_and_workers_in_the_layout():
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

    check_packer(make, 3, 4)


@pytest.mark.parametrize(("saved_on", "restored_on"), BACKEND_PAIRS)
def test_real_packer_state_contract_with_a_full_buffer(data, saved_on, restored_on):
    n_before, probe = first_state_with_buffer(lambda: make_real_packer(data, saved_on))
    state = check_packer(
        lambda: make_real_packer(data, saved_on), n_before, 4, make_restored=lambda: make_real_packer(data, restored_on)
    )
    assert len(state["buffer"]) == len(probe["buffer"]) > 0
    assert list(state["datasets"]) == ["unified_edit", "t2i_pretrain"]


def test_the_state_records_format_layout_seeds_buffer_and_dataset_positions():
    n_before, _ = first_state_with_buffer(make_mixed)
    packer = make_mixed()
    with preserved_global_rng():
        batches = take(iter(packer), n_before)
    state = packer.state_dict()
    assert state["format"] == STATE_FORMAT and state["started"] is True
    assert (state["rank"], state["world_size"], state["num_workers"], state["worker_id"]) == (0, 1, 0, 0)
    assert (state["data_seed"], state["global_seed"]) == (9, None)
    assert state["rng"]["format"] == CHAIN_FORMAT and set(state["rng"]) == {"format", "python", "numpy", "torch"}
    # toy datasets cannot parse a row again, so their buffered samples are kept whole, with their group
    assert state["buffer"] and all(
        entry["group"] == entry["sample"]["data_indexes"]["dataset_name"] in ("toy", "toy_b")
        for entry in state["buffer"]
    )
    # every sample drawn so far was packed or is waiting in the buffer: the positions are the last drawn ones
    waiting = [entry["sample"]["data_indexes"] for entry in state["buffer"]]
    drawn = [d for batch in batches for d in batch["batch_data_indexes"]] + waiting
    for name in ("toy", "toy_b"):
        assert state["datasets"][name] == {
            "data_status": [max(d["data_indexes"] for d in drawn if d["dataset_name"] == name)]
        }


def test_a_loaded_state_is_reported_until_iteration_starts():
    source = make_mixed()
    with preserved_global_rng():
        take(iter(source), 3)
    state = source.state_dict()
    fresh = make_mixed()
    fresh.load_state_dict(state)
    iter(fresh)  # created but not started, as DataLoader workers do before their first fetch
    assert_batches_equal(state, fresh.state_dict())


def test_the_state_before_iteration_is_not_started():
    """Loading it restarts the stream: clause (d) of the contract checks."""
    state = make_mixed().state_dict()
    assert state["started"] is False and state["buffer"] == [] and state["rng"] is None
    assert state["datasets"] == {"toy": {"data_status": None}, "toy_b": {"data_status": None}}


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


def nemo_shaped_state(packer, yielded):
    """What NeMo Automodel's own PackedDataset.state_dict() returns at this point of a 0-worker run:
    the buffer's samples, the RNG states as they stand, each group's data_status."""
    return {
        "version": 1,
        "yielded_batches": yielded,
        "buffer": [entry.sample for entry in packer.run.live.buffer],
        "sequence_status": {"curr": 0, "sample_lens": [], "packed_text_ids": []},  # NeMo's empty sequence
        "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
        "grouped_dataset_states": [dataset.state_dict() for dataset in packer.grouped_datasets],
    }


def test_a_state_in_nemos_format_resumes_with_the_same_next_batches():
    with preserved_global_rng():
        n, _ = first_state_with_buffer(make_mixed)
        source = make_mixed()
        iterator = iter(source)
        take(iterator, n)
        state = nemo_shaped_state(source, n)
        assert state["buffer"]  # the resume must rebuild a buffer of literal samples
        expected = take(iterator, 4)
        resumed = make_mixed()
        resumed.load_state_dict(state)
        assert_batches_equal(expected, take(iter(resumed), 4))


def test_nemo_states_editstream_cannot_resume_exactly_are_refused():
    with preserved_global_rng():
        source = make_mixed()
        take(iter(source), 2)
        state = nemo_shaped_state(source, 2)
    with pytest.raises(ValueError, match="NeMo's PackedDataset state version 2"):
        make_mixed().load_state_dict({**state, "version": 2})
    with pytest.raises(ValueError, match="sequence half packed"):
        make_mixed().load_state_dict({**state, "sequence_status": {**state["sequence_status"], "curr": 7}})
    with pytest.raises(ValueError, match="NeMo's state has 1 dataset groups"):
        make_mixed().load_state_dict({**state, "grouped_dataset_states": state["grouped_dataset_states"][:1]})
