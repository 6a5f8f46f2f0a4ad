"""Elastic epochs: every row of an epoch exactly once, at any layout, resumed at any other.

The data are the pipeline datasets (an edit group and a text-to-image group, planted bad rows)
on both backends; loaders are built the way a recipe builds them (``BagelDataloaderConfig``,
real DataLoader workers). Ranks are separate loaders in this process; the torchrun test of the
example runs them as real ranks.
"""

from __future__ import annotations

import collections

import pytest

import editstream
from editstream import BagelDatasetConfig, merge_states
from editstream.packing.checkpoint.streams import StateError
from helpers import (
    BACKEND_PAIRS,
    SMALL_PACKING,
    build_dataloader,
    check_state_contract,
    json_roundtrip,
    pipeline_groups,
    synth_pipeline_data,
    torch_roundtrip,
)

pytest.importorskip("torchdata.stateful_dataloader")

STREAMS = 4
TOTAL_ROWS = 16 + 12  # 2 files x 2 row groups x 4 edit rows, 2 x 2 x 3 text-to-image rows


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synth_pipeline_data(tmp_path_factory.mktemp("elastic"))


def dataset_config(root, backend, **overrides):
    groups, info = pipeline_groups(root, backend)
    settings = {**SMALL_PACKING, "elastic": True, "elastic_streams": STREAMS, **overrides}
    return BagelDatasetConfig(grouped_datasets=groups, dataset_info=info, **settings)


def build_loader(root, backend, rank, world_size, workers, **overrides):
    return build_dataloader(dataset_config(root, backend, **overrides), rank, world_size, workers)


def rows_of(batch):
    return tuple((d["dataset_name"], tuple(d["data_indexes"])) for d in batch.batch_data_indexes)


def epoch_batches(root, backend, ranks, workers):
    """Every batch of one epoch at a layout, as row tuples (a Counter: the order across ranks is free)."""
    out = collections.Counter()
    for rank in range(ranks):
        out.update(rows_of(b) for b in build_loader(root, backend, rank, ranks, workers))
    return out


@pytest.fixture(scope="module")
def reference(data):
    """The epoch in one process, no workers: its batches and the drops the datasets counted."""
    loader = build_loader(data, "parquet", 0, 1, 0)
    batches = [rows_of(b) for b in loader]
    drops = sum(sum(d.drops.as_dict().values()) for d in loader.dataset.grouped_datasets)
    return collections.Counter(batches), drops, loader


def all_rows(batches):
    return [row for batch, count in batches.items() for row in batch * count]


def test_an_epoch_yields_every_row_once_and_ends(reference):
    batches, drops, loader = reference
    rows = all_rows(batches)
    assert len(rows) == len(set(rows)) and len(rows) + drops == TOTAL_ROWS
    assert loader.dataset.drop_counts == {}  # the packer itself lost nothing
    assert drops > 0  # the planted bad rows were dropped and counted by the datasets
    assert {name for name, _ in rows} == {"unified_edit", "t2i_pretrain"}


def test_iterating_again_runs_the_next_epoch_in_a_new_order(data, reference):
    loader = build_loader(data, "parquet", 0, 1, 0)
    first = [rows_of(b) for b in loader]
    second = [rows_of(b) for b in loader]
    assert collections.Counter(first) == reference[0]
    second_rows = [row for batch in second for row in batch]
    assert second != first and len(second_rows) == len(set(second_rows))
    assert loader.dataset.epoch == 1  # the epoch the second iteration ran


@pytest.mark.parametrize("backend", ["parquet", "webdataset"])
@pytest.mark.parametrize(("ranks", "workers"), [(2, 2), (3, 1), (1, 4)])
def test_the_epoch_is_the_same_at_every_layout_and_on_both_backends(data, reference, backend, ranks, workers):
    assert epoch_batches(data, backend, ranks, workers) == reference[0]


@pytest.mark.parametrize(("saved_on", "restored_on"), BACKEND_PAIRS)
def test_an_elastic_packer_meets_the_state_contract(data, saved_on, restored_on):
    """Mid-epoch at the same layout (one process), through JSON and torch.save, and across backends."""

    def packer_on(backend):
        return lambda: build_loader(data, backend, 0, 1, 0).dataset

    state = check_state_contract(
        packer_on(saved_on), 2, 3, roundtrips=(json_roundtrip, torch_roundtrip), make_restored=packer_on(restored_on)
    )
    assert state["format"] == "editstream.ElasticPacked/2" and sorted(state["streams"]) == ["0", "1", "2", "3"]


def run_partly(root, backend, ranks, workers, steps):
    """``steps`` batches of each rank's loader, then each rank's saved state (as a checkpoint keeps it)."""
    consumed, states = collections.Counter(), []
    for rank in range(ranks):
        loader = build_loader(root, backend, rank, ranks, workers)
        iterator = iter(loader)
        for _ in range(steps):
            consumed[rows_of(next(iterator))] += 1
        states.append(torch_roundtrip(loader.state_dict()))
        del iterator
    return consumed, states


def finish(root, backend, ranks, workers, merged):
    rest = collections.Counter()
    for rank in range(ranks):
        loader = build_loader(root, backend, rank, ranks, workers)
        loader.load_state_dict(json_roundtrip(merged))
        rest.update(rows_of(b) for b in loader)
    return rest


@pytest.mark.parametrize(
    ("saved_on", "finished_on", "layout"),
    [
        ("parquet", "parquet", (3, 1)),
        ("parquet", "parquet", (1, 4)),
        ("parquet", "parquet", (1, 0)),
        ("webdataset", "webdataset", (3, 1)),
        ("webdataset", "webdataset", (1, 4)),
        ("parquet", "webdataset", (3, 1)),
        ("webdataset", "parquet", (1, 0)),
    ],
)
def test_a_merged_state_finishes_the_epoch_at_another_layout(data, reference, saved_on, finished_on, layout):
    consumed, states = run_partly(data, saved_on, 2, 2, steps=2)
    merged = merge_states(states)
    rest = finish(data, finished_on, *layout, merged)
    assert consumed + rest == reference[0]
    assert sum(consumed.values()) == 4 and sum(rest.values()) > 0


@pytest.mark.parametrize("backend", ["parquet", "webdataset"])
def test_each_rank_resumes_its_own_state_at_the_same_layout(data, reference, backend):
    consumed, states = run_partly(data, backend, 2, 2, steps=2)
    rest = collections.Counter()
    for rank, state in enumerate(states):
        loader = build_loader(data, backend, rank, 2, 2)
        loader.load_state_dict(state)  # torchdata's own per-worker state, no merge
        rest.update(rows_of(b) for b in loader)
    assert consumed + rest == reference[0]


def test_after_a_restored_epoch_the_next_one_starts(data):
    consumed, states = run_partly(data, "parquet", 2, 2, steps=1)
    loader = build_loader(data, "parquet", 0, 1, 2)
    loader.load_state_dict(merge_states(states))
    list(loader)  # the rest of epoch 0
    following = collections.Counter(rows_of(b) for b in loader)
    single = build_loader(data, "parquet", 0, 1, 0)
    list(single)
    assert following == collections.Counter(rows_of(b) for b in single)  # epoch 1, as one process makes it


def test_a_complete_epoch_state_resumes_at_the_next_epoch(data, reference):
    loader = build_loader(data, "parquet", 0, 1, 2)
    list(loader)
    state = loader.state_dict()
    again = build_loader(data, "parquet", 0, 1, 2)
    again.load_state_dict(state)
    epoch_one = collections.Counter(rows_of(b) for b in again)
    assert sum(epoch_one.values()) > 0 and again.dataset.epoch == 1


# --------------------------------------------------------------------------- refusals
def test_states_that_cannot_resume_exactly_are_refused(data):
    _, states = run_partly(data, "parquet", 2, 1, steps=1)
    with pytest.raises(ValueError, match=r"streams \[1, 3\] of 4 are in none of the 1 states"):
        merge_states(states[:1])
    with pytest.raises(ValueError, match="stream 0 is in two states"):
        merge_states([states[0], states[0]])
    merged = merge_states(states)
    other_streams = build_loader(data, "parquet", 0, 1, 0, elastic_streams=3)
    with pytest.raises(ValueError, match="the state has 4 logical streams, the config sets elastic_streams=3"):
        other_streams.load_state_dict(merged)
    other_seed = build_loader(data, "parquet", 0, 1, 0, data_seed=43)
    other_seed.dataset._global_seed = 8
    with pytest.raises(ValueError, match="an elastic epoch resumes only over the same data and seed"):
        other_seed.load_state_dict(merged)
    plain = build_loader(data, "parquet", 0, 1, 0, elastic=False)
    with pytest.raises(ValueError, match="saved with elastic: true, this dataset is not elastic"):
        plain.dataset.load_state_dict(merged)
    with pytest.raises(ValueError, match="none of the 1 states holds an elastic packer state"):
        merge_states([plain.state_dict()])


def test_a_single_ranks_state_on_a_new_layout_is_refused(data):
    _, states = run_partly(data, "parquet", 2, 1, steps=1)
    loader = build_loader(data, "parquet", 0, 1, 0)
    loader.dataset.load_state_dict(states[0]["_snapshot"]["_worker_snapshots"]["worker_0"]["dataset_state"])
    with pytest.raises(ValueError, match="no state for stream 1 .* load editstream.merge_states"):
        next(iter(loader.dataset))


def test_a_loader_state_behind_its_snapshot_is_refused(data):
    loader = build_loader(data, "parquet", 0, 1, 1)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    state["_steps_since_snapshot"] = 2
    with pytest.raises(ValueError, match="2 batch\\(es\\) past its last worker snapshot"):
        merge_states([state])


def test_bad_elastic_settings_name_the_value():
    with pytest.raises(ValueError, match="elastic_streams must be a positive integer, got 0"):
        BagelDatasetConfig(grouped_datasets={"g": {}}, elastic=True, elastic_streams=0)
    with pytest.raises(ValueError, match="elastic must be true or false, got 'yes'"):
        BagelDatasetConfig(grouped_datasets={"g": {}}, elastic="yes")
    assert editstream.EpochSteps is not None


# --------------------------------------------------------------------------- hand-edited states
def saved_midway(data, backend="parquet"):
    """The state after one batch of one logical stream (JSON-ready): its groups have rows left."""
    loader = build_loader(data, backend, 0, 1, 0, elastic_streams=1)
    iterator = iter(loader)
    next(iterator)
    return json_roundtrip(loader.dataset.state_dict())


def resume(data, state, backend="parquet"):
    dataset = build_loader(data, backend, 0, 1, 0, elastic_streams=1).dataset
    dataset.load_state_dict(state)
    return [tuple((d["dataset_name"], tuple(d["data_indexes"])) for d in b["batch_data_indexes"]) for b in dataset]


@pytest.mark.parametrize("backend", ["parquet", "webdataset"])
def test_a_position_past_the_units_rows_is_refused(data, backend):
    state = saved_midway(data, backend)
    entry = next(e for e in state["streams"]["0"]["groups"] if e["unit"] is not None and not e["exhausted"])
    entry["position"][-1] += 1000
    with pytest.raises(ValueError, match=r"resume position \[.*\] is not a row of .*edited"):
        resume(data, state, backend)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s, k: s["streams"][k].update(done=True), "is done but has rows left"),
        (lambda s, k: s["streams"][k].pop("rng"), r"streams\[\d\] has no 'rng'"),
        (lambda s, k: s["streams"][k]["rng"].clear(), "rng chain is malformed"),
        (lambda s, k: s["streams"][k].update(epoch=5), "not stream .* of epoch 0"),
        (lambda s, k: s["streams"][k]["groups"].pop(), "groups has 1 entries for the 2 groups"),
        (lambda s, k: s["streams"][k]["groups"][0].update(position="7"), r"groups\[0\].position is '7', not list"),
        (lambda s, k: s["streams"].update({"9": s["streams"][k]}), "key '9', not a stream of 0..0"),
        (lambda s, k: s.pop("fingerprint"), "state has no 'fingerprint'"),
        (lambda s, k: s.update(num_streams="4"), "state.num_streams is '4', not int"),
    ],
)
def test_malformed_states_are_refused_naming_the_field(data, edit, message):
    state = saved_midway(data)
    edit(state, "0")
    with pytest.raises(ValueError, match=message):
        resume(data, state)


def test_an_empty_state_is_refused_by_the_dataset_and_the_loader(data):
    with pytest.raises(ValueError, match="was given an empty state"):
        build_loader(data, "parquet", 0, 1, 0).dataset.load_state_dict({})
    with pytest.raises(ValueError, match="the loader was given an empty state"):
        build_loader(data, "parquet", 0, 1, 2).load_state_dict({})


def test_an_unmerged_rank_state_loaded_at_other_workers_is_refused_by_editstreams_message(data):
    _, states = run_partly(data, "parquet", 2, 2, steps=1)
    for workers in (0, 1):
        loader = build_loader(data, "parquet", 0, 2, workers)
        with pytest.raises(ValueError, match=f"saved with num_workers=2, this loader has num_workers={workers}"):
            loader.load_state_dict(states[0])


def test_an_untouched_state_still_resumes_after_the_checks(data):
    loader = build_loader(data, "parquet", 0, 1, 0, elastic_streams=1)
    whole = [rows_of(b) for b in loader]
    assert resume(data, saved_midway(data)) == whole[1:]


# NeMo Automodel's proposed DP-aware protocol (PR #2730): every saved DP rank's state at once.


def rank_states_of(states):
    return dict(enumerate(states))


@pytest.mark.parametrize("layout", [(1, 0), (3, 1)], ids=["shrink-to-1", "grow-to-3"])
def test_every_dp_ranks_state_at_once_finishes_the_epoch_at_a_new_dp_size(data, reference, layout):
    consumed, states = run_partly(data, "parquet", 2, 2, steps=2)
    ranks, workers = layout
    rest = collections.Counter()
    for rank in range(ranks):
        loader = build_loader(data, "parquet", rank, ranks, workers)
        assert not loader.can_load_single_dp_rank_state(states[0], saved_dp_world_size=2)
        loader.load_state_dict_from_dp_rank_states(rank_states_of(states))
        rest.update(rows_of(b) for b in loader)
    assert consumed + rest == reference[0]


def test_at_an_unchanged_dp_size_each_rank_takes_its_own_state(data, reference):
    consumed, states = run_partly(data, "parquet", 2, 2, steps=2)
    rest = collections.Counter()
    for rank in range(2):
        loader = build_loader(data, "parquet", rank, 2, 2)
        assert loader.can_load_single_dp_rank_state(states[rank], saved_dp_world_size=2)
        loader.load_state_dict_from_dp_rank_states(rank_states_of(states))
        rest.update(rows_of(b) for b in loader)
    assert consumed + rest == reference[0]


def test_a_non_elastic_loader_refuses_a_new_dp_size_naming_both_sizes(data):
    states = []
    for rank in range(2):
        loader = build_loader(data, "parquet", rank, 2, 0, elastic=False)
        next(iter(loader))
        states.append(torch_roundtrip(loader.state_dict()))
    loader = build_loader(data, "parquet", 0, 1, 0, elastic=False)
    with pytest.raises(StateError, match=r"loader states of 2 DP ranks, this run has 1, .*`elastic: true`") as refused:
        loader.load_state_dict_from_dp_rank_states(rank_states_of(states))
    assert "\n" not in str(refused.value)
    with pytest.raises(StateError, match=r"DP ranks \[0, 2\] but not of \[1\]"):
        loader.load_state_dict_from_dp_rank_states({0: states[0], 2: states[1]})
