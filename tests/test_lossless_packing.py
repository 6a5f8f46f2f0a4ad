"""Exact (elastic) epochs pack every row once, whatever the groups: property tests over random
group sizes, weights, mandatory flags, token sizes, layouts and merged resumes.

The groups are real source datasets over in-memory rows (``helpers.SizedRowsDataset``), so the
elastic run reads, saves and recreates them exactly as it does parquet or shards.
"""

from __future__ import annotations

import collections
import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from editstream import merge_states
from helpers import SIZED_REGISTRY, make_packer, names_and_positions

EXAMPLES = int(os.environ.get("EDITSTREAM_HYPOTHESIS_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_TOKENS, PER_SAMPLE = 16, 14

units = st.lists(st.lists(st.integers(min_value=3, max_value=18), max_size=6), min_size=1, max_size=3)
group = st.fixed_dictionaries(
    {"unit_sizes": units, "weight": st.sampled_from([0.0, 0.5, 1.0, 3.0]), "is_mandatory": st.booleans()}
)
knobs = st.fixed_dictionaries(
    {
        "expected_num_tokens": st.integers(min_value=4, max_value=MAX_TOKENS),
        "prefer_buffer_before": st.integers(min_value=0, max_value=MAX_TOKENS),
        "max_buffer_size": st.integers(min_value=0, max_value=4),
    }
)
groups_of = st.lists(group, min_size=1, max_size=3).filter(lambda gs: sum(g["weight"] for g in gs) > 0)
layout = st.tuples(st.integers(min_value=1, max_value=3), st.integers(min_value=1, max_value=4))


def packers(groups, knobs, world_size, streams):
    config = {f"g{g}": {"dataset_names": ["d0"], **spec} for g, spec in enumerate(groups)}
    return [
        make_packer(
            config,
            registry=SIZED_REGISTRY,
            world_size=world_size,
            local_rank=rank,
            elastic=True,
            elastic_streams=streams,
            max_num_tokens=MAX_TOKENS,
            max_num_tokens_per_sample=PER_SAMPLE,
            **knobs,
        )
        for rank in range(world_size)
    ]


def rows_in(batches):
    return collections.Counter((name, tuple(index)) for b in batches for name, index in names_and_positions(b))


def expected_rows(groups):
    """Every row that fits an empty sequence, by (group, [unit id, row]); the rest are the drops."""
    kept, dropped = collections.Counter(), 0
    for g, spec in enumerate(groups):
        for u, sizes in enumerate(spec["unit_sizes"]):
            for i, size in enumerate(sizes):
                if size <= PER_SAMPLE and size <= MAX_TOKENS:
                    kept[(f"g{g}", (u, i))] += 1
                else:
                    dropped += 1
    return kept, dropped


def drops(packers_):
    return sum(sum(p.drop_counts.values()) for p in packers_)


@SETTINGS
@given(groups_of, knobs, layout)
def test_every_row_that_fits_a_sequence_is_packed_exactly_once(groups, knobs, at):
    world_size, streams = at
    ranks = packers(groups, knobs, world_size, streams)
    got = sum((rows_in(list(p)) for p in ranks), collections.Counter())
    kept, dropped = expected_rows(groups)
    assert got == kept
    assert drops(ranks) == dropped


@SETTINGS
@given(groups_of, knobs, layout, layout, st.integers(min_value=0, max_value=3))
def test_a_merged_resume_at_any_layout_packs_the_rest_exactly_once(groups, knobs, first, then, steps):
    streams = first[1]
    saved_ranks = packers(groups, knobs, first[0], streams)
    consumed, states = collections.Counter(), []
    for packer in saved_ranks:
        iterator = iter(packer)
        consumed += rows_in(batch for _, batch in zip(range(steps), iterator))
        states.append(json.loads(json.dumps(packer.state_dict())))
    merged = merge_states(states)
    rest = collections.Counter()
    for packer in packers(groups, knobs, then[0], streams):
        packer.load_state_dict(json.loads(json.dumps(merged)))
        rest += rows_in(list(packer))
    kept, _ = expected_rows(groups)
    if all(stream["done"] for stream in merged["streams"].values()):
        assert consumed == kept and rest == kept  # a finished epoch's state resumes at the next epoch
    else:
        assert consumed + rest == kept
