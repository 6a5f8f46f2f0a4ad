"""Compact packer states: buffered samples saved as references to their rows, parsed again on restore.

The state of a packer over real datasets holds no tensors: it passes the state contract through
JSON as well as torch.save, on both backends and from one to the other; a StatefulDataLoader's
whole state stays small with full buffers whatever the image size; states in the first format
(buffered tensors) still load; and a reference that no longer matches the data is refused.
"""

from __future__ import annotations

import copy
import io
import json
import random

import numpy as np
import pytest
import torch

from editstream.loader.origins import RecreateError
from editstream.packing.checkpoint import formats as st
from editstream.packing.checkpoint.chain import ChainEncoder, decode_points
from editstream.packing.checkpoint.points import capture_point
from helpers import (
    BACKEND_PAIRS,
    assert_batches_equal,
    check_state_contract,
    json_roundtrip,
    make_real_packer,
    preserved_global_rng,
    synth_pipeline_data,
    take,
    torch_roundtrip,
)

stateful = pytest.importorskip("torchdata.stateful_dataloader")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synth_pipeline_data(tmp_path_factory.mktemp("compact-state"))


def state_with_buffer(make, limit=40):
    """(batches taken, packer's running iterator, its state) at the first batch after which the
    buffer holds references."""
    packer = make()
    iterator = iter(packer)
    for n in range(1, limit + 1):
        next(iterator)
        state = packer.state_dict()
        if any("sample" not in entry for entry in state["buffer"]):
            return n, (packer, iterator), state
    raise AssertionError(f"no buffered reference within {limit} batches")


def saved_size(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.tell()


@pytest.mark.parametrize(("saved_on", "restored_on"), BACKEND_PAIRS)
def test_a_real_packer_state_holds_no_tensors_and_restores_through_json(data, saved_on, restored_on):
    with preserved_global_rng():
        n_before, _, probe = state_with_buffer(lambda: make_real_packer(data, saved_on))
    state = check_state_contract(
        lambda: make_real_packer(data, saved_on),
        n_before,
        4,
        roundtrips=(json_roundtrip, torch_roundtrip),
        make_restored=lambda: make_real_packer(data, restored_on),
    )
    assert state["format"] == st.STATE_FORMAT and state == json_roundtrip(state)
    entries = state["buffer"]
    assert entries and all(set(entry) == {"group", "unit", "position", "num_tokens"} for entry in entries)
    assert json.dumps(state) == json.dumps(probe)
    assert len(json.dumps(state)) < 32 * 1024


def test_a_state_taken_after_a_restore_is_compact_too(data):
    """Recreated samples keep their origins, so the next state references them again."""
    with preserved_global_rng():
        n_before, _, state = state_with_buffer(lambda: make_real_packer(data, "webdataset"))
        fresh = make_real_packer(data, "webdataset")
        fresh.load_state_dict(json_roundtrip(state))
        iterator = iter(fresh)
        next(iterator)
        later = fresh.state_dict()
    assert all("sample" not in entry for entry in later["buffer"])


def test_a_state_in_the_first_format_still_loads(data):
    """Format 1 kept the buffered samples' tensors and the captured RNG states; it resumes exactly."""
    with preserved_global_rng():
        n_before, (packer, iterator), state = state_with_buffer(lambda: make_real_packer(data, "parquet"))
        assert packer.run.live is not None and packer.run.live.rng is not None
        point = packer.run.live.rng
        old = copy.deepcopy(state)
        old["format"] = st.LITERAL_STATE_FORMAT
        old["buffer"] = [entry.sample for entry in packer.run.live.buffer]
        old["rng"] = {
            "python": point.python,
            "numpy": ("MT19937", np.frombuffer(point.numpy_key, dtype=np.uint32), point.numpy_pos, *point.numpy_gauss),
            "torch": point.torch,
        }
        expected = take(iterator, 3)
        fresh = make_real_packer(data, "parquet")
        fresh.load_state_dict(torch_roundtrip(old))
        assert_batches_equal(expected, take(iter(fresh), 3))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda entry: entry.update(num_tokens=entry["num_tokens"] + 1), "parsed again into .* tokens"),
        (lambda entry: entry.update(position=[*entry["position"][:-1], 10_000]), "cannot read buffered row"),
        (lambda entry: entry.update(unit=10_000), "names unit 10000"),
    ],
    ids=["tokens", "row", "unit"],
)
def test_a_reference_that_does_not_match_the_data_is_refused(data, change, match):
    with preserved_global_rng():
        _, _, state = state_with_buffer(lambda: make_real_packer(data, "parquet"))
        change(next(entry for entry in state["buffer"] if "sample" not in entry))
        fresh = make_real_packer(data, "parquet")
        fresh.load_state_dict(state)
        with pytest.raises(RecreateError, match=match):
            next(iter(fresh))


def test_the_rng_chain_gives_back_the_saved_points():
    points = []
    with preserved_global_rng():
        torch.manual_seed(0)
        random.seed(3)
        np.random.seed(4)
        for i in range(30):
            for _ in range(i * 97):
                random.random()
            np.random.randn(i % 3)
            np.random.randint(0, 9, size=i * 50)
            if i == 12:
                random.seed(11)  # a reseed: the next point is a new literal
            if i == 20:
                torch.rand(4)
            points.append(capture_point())
    encoded = json_roundtrip(ChainEncoder().encode(points))
    assert len(encoded["python"]["bases"]) == 2 and len(encoded["torch"]["bases"]) == 2
    for saved, back in zip(points, decode_points(encoded)):
        assert saved.python == back.python and saved.numpy_gauss == back.numpy_gauss
        assert (saved.numpy_key, saved.numpy_pos) == (back.numpy_key, back.numpy_pos)
        assert torch.equal(saved.torch, back.torch)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stateful_loader_state_with_full_buffers_stays_small(data, workers):
    """Every worker's buffer full (4 references): the loader state is a few tens of KB and restores exactly."""
    from editstream import collate_fn

    def loader():
        return stateful.StatefulDataLoader(
            make_real_packer(data, "webdataset", num_workers=workers),
            batch_size=1,
            num_workers=workers,
            collate_fn=collate_fn,
            snapshot_every_n_steps=1,
        )

    with preserved_global_rng():
        source = loader()
        it = iter(source)
        for _ in range(40):
            next(it)
            state = source.state_dict()
            buffers = [w["dataset_state"]["buffer"] for w in state["_snapshot"]["_worker_snapshots"].values()]
            if all(len(buffer) == 4 for buffer in buffers):  # max_buffer_size of make_real_packer
                break
        else:
            raise AssertionError("the workers' buffers were never all full at once")
        expected = take(it, 3)
        del it
        restored = loader()
        restored.load_state_dict(json_roundtrip(state))
        assert_batches_equal(expected, take(iter(restored), 3))
    assert all("sample" not in entry for buffer in buffers for entry in buffer)
    assert saved_size(state) < 64 * 1024 and len(json.dumps(state)) < 64 * 1024
