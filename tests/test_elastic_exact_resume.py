"""Elastic states at an unchanged layout resume bit-identically, and a state is checked against itself.

An elastic epoch resumed at the layout it was saved at gives the batches the uninterrupted run gives, in the
same order: within a worker the stream that has yielded the fewest batches goes next (round robin from a fresh
start, the same turns after a resume), and across a rank's DataLoader workers a merged state says whose turn it
was. A state whose ``exhausted`` flag was flipped by hand (its group's rows would be lost unread) is refused.
Loaders are built as a recipe builds them, with real DataLoader workers.
"""

from __future__ import annotations

import pytest

from editstream import BagelDatasetConfig, merge_states
from editstream.packing.checkpoint.streams import StateError
from helpers import SMALL_PACKING, build_dataloader, json_roundtrip, pipeline_groups, synth_and_convert, torch_roundtrip
from test_elastic import rows_of

pytest.importorskip("torchdata.stateful_dataloader")

MANY_BATCHES = {"elastic_streams": 8, "expected_num_tokens": 150}
"""Eight streams (each with a file of each group) and short sequences: a worker runs several streams that all
have rows, and an epoch has a dozen batches or more."""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The pipeline layout (``edit`` and ``t2i``, planted bad rows) with eight small files per group."""
    root = tmp_path_factory.mktemp("exact")
    small = {"num_files": 8, "row_groups_per_file": 1, "corrupt_fraction": 0.2, "max_side": 64}
    synth_and_convert(root / "edit", rows_per_group=3, seed=13, **small)
    synth_and_convert(root / "t2i", schema="t2i_pretrain", rows_per_group=2, seed=14, **small)
    return root


def build_loader(root, backend, rank, world_size, workers, **overrides):
    """A recipe's loader over every file of both groups, elastic (``overrides`` on the small packing knobs)."""
    groups, info = pipeline_groups(root, backend)
    for group in groups.values():
        group["num_used_data"] = [8]
    settings = {**SMALL_PACKING, "elastic": True, **overrides}
    config = BagelDatasetConfig(grouped_datasets=groups, dataset_info=info, **settings)
    return build_dataloader(config, rank, world_size, workers)


def whole_epoch(data, rank, ranks, workers):
    return [rows_of(b) for b in build_loader(data, "parquet", rank, ranks, workers, **MANY_BATCHES)]


def taken(data, rank, ranks, workers, steps, state=None):
    """``steps`` batches of a rank's loader (resumed from ``state`` if given), and its state after them."""
    loader = build_loader(data, "parquet", rank, ranks, workers, **MANY_BATCHES)
    if state is not None:
        loader.load_state_dict(state)
    iterator = iter(loader)
    head = [rows_of(next(iterator)) for _ in range(steps)]
    saved = torch_roundtrip(loader.state_dict())
    del iterator
    return head, saved


def the_rest(data, rank, ranks, workers, state):
    loader = build_loader(data, "parquet", rank, ranks, workers, **MANY_BATCHES)
    loader.load_state_dict(state)
    return [rows_of(b) for b in loader]


@pytest.mark.parametrize("steps", [1, 2, 3])
@pytest.mark.parametrize("layout", [(1, 0), (1, 1), (1, 2), (2, 2)], ids=lambda x: f"{x[0]}x{x[1]}")
@pytest.mark.parametrize("how", ["own", "merged"])
def test_an_untouched_state_resumes_in_the_same_order_at_the_same_layout(data, layout, steps, how):
    ranks, workers = layout
    runs = [taken(data, rank, ranks, workers, steps) for rank in range(ranks)]
    merged = merge_states([state for _, state in runs])
    for rank, (head, state) in enumerate(runs):
        resumed = the_rest(data, rank, ranks, workers, merged if how == "merged" else state)
        assert head + resumed == whole_epoch(data, rank, ranks, workers)


def test_a_resumed_resume_still_keeps_the_order(data):
    """Two interruptions at one rank of two workers: the second resume starts from a shifted worker turn."""
    first, state = taken(data, 0, 1, 2, 1)
    second, state = taken(data, 0, 1, 2, 2, merge_states([state]))
    rest = the_rest(data, 0, 1, 2, merge_states([state]))
    assert first + second + rest == whole_epoch(data, 0, 1, 2)


def test_after_a_shifted_resume_the_next_epoch_is_the_uninterrupted_one(data):
    head, state = taken(data, 0, 1, 2, 1)
    loader = build_loader(data, "parquet", 0, 1, 2, **MANY_BATCHES)
    loader.load_state_dict(merge_states([state]))
    list(loader)
    following = [rows_of(b) for b in loader]
    plain = build_loader(data, "parquet", 0, 1, 2, **MANY_BATCHES)
    list(plain)
    assert following == [rows_of(b) for b in plain]


def test_a_merged_state_names_the_worker_whose_turn_is_next(data):
    _, state = taken(data, 0, 1, 2, 1)  # worker 0 (streams 0, 2, 4, 6) gave the batch: worker 1's turn
    assert merge_states([state])["turns"] == [[1, 3, 5, 7]]
    _, state = taken(data, 0, 1, 2, 2)
    assert merge_states([state])["turns"] == [[0, 2, 4, 6]]


# --------------------------------------------------------------------------- a state checked against itself
def one_stream_state(data, steps):
    """A one-stream state after ``steps`` batches (JSON-ready), and the batches of the whole epoch."""
    loader = build_loader(data, "parquet", 0, 1, 0, elastic_streams=1)
    whole = [rows_of(b) for b in build_loader(data, "parquet", 0, 1, 0, elastic_streams=1)]
    iterator = iter(loader)
    for _ in range(steps):
        next(iterator)
    return json_roundtrip(loader.dataset.state_dict()), whole


def resume_one_stream(data, state):
    dataset = build_loader(data, "parquet", 0, 1, 0, elastic_streams=1).dataset
    dataset.load_state_dict(state)
    return [tuple((d["dataset_name"], tuple(d["data_indexes"])) for d in b["batch_data_indexes"]) for b in dataset]


def test_an_exhausted_flag_flipped_by_hand_is_refused(data):
    state, _ = one_stream_state(data, 1)
    group = state["streams"]["0"]["groups"][0]
    assert not group["exhausted"] and group["end"] is None
    group["exhausted"] = True
    with pytest.raises(StateError, match=r"streams\[0\].groups\[0\] is exhausted but no end of its share"):
        resume_one_stream(data, state)


def test_an_end_that_is_not_the_streams_share_is_refused(data):
    state, whole = one_stream_state(data, 4)
    groups = state["streams"]["0"]["groups"]
    ended = next(g for g, entry in enumerate(groups) if entry["exhausted"])
    assert resume_one_stream(data, json_roundtrip(state)) == whole[4:]  # the honest state resumes
    groups[ended]["end"] -= 1
    with pytest.raises(StateError, match=rf"groups\[{ended}\] .* says its share ended after \d+ units, but .* has"):
        resume_one_stream(data, state)


def test_a_group_said_to_end_but_not_exhausted_is_refused(data):
    state, _ = one_stream_state(data, 1)
    state["streams"]["0"]["groups"][0]["end"] = 3
    with pytest.raises(StateError, match=r"groups\[0\] is not exhausted but ended at 3"):
        resume_one_stream(data, state)


def test_a_merged_state_with_a_flipped_flag_is_refused_when_loaded(data):
    _, state = taken(data, 0, 1, 2, 1)
    merged = merge_states([state])
    started = [s for s in merged["streams"].values() if s["started"]]
    entry = next(e for s in started for e in s["groups"] if not e["exhausted"])
    entry.update(exhausted=True)
    with pytest.raises(StateError, match="is exhausted but no end of its share"):
        build_loader(data, "parquet", 0, 1, 2, **MANY_BATCHES).load_state_dict(merged)


def test_a_first_format_state_still_resumes(data):
    """States saved before batch counts and share ends (format 1) load, with the checks they allow."""
    state, whole = one_stream_state(data, 1)
    state["format"] = "editstream.ElasticPacked/1"
    stream = state["streams"]["0"]
    del stream["batches"]
    for entry in stream["groups"]:
        del entry["end"]
    assert resume_one_stream(data, state) == whole[1:]
