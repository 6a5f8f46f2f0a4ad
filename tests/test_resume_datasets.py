"""Resuming the datasets (UnifiedEditIterableDataset, T2IIterableDataset) on both backends.

Each dataset is held to ``check_state_contract``: its ``data_status`` restores inside a unit,
across units and after a full pass, survives JSON and torch.save, and moves from one backend
to the other. The sources (ParquetSource, TarSource) are not stateful objects of their own;
they are covered here, through the datasets. Per-sample draws use the caller's global RNG
(PackedDataset saves it for them), hence ``owns_global_rng=False``.
"""

from __future__ import annotations

import pytest

from editstream import ByteTokenizer, ImageTransform, T2IIterableDataset, UnifiedEditIterableDataset
from helpers import (
    BACKEND_DIRS,
    BACKEND_PAIRS,
    VAE,
    VIT,
    assert_batches_equal,
    check_state_contract,
    json_roundtrip,
    preserved_global_rng,
    seed_global_rng,
    synth_pipeline_data,
    take,
)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synth_pipeline_data(tmp_path_factory.mktemp("resume-datasets"))


def edit(root, backend, **kwargs):
    ds = UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(**VAE),
        ByteTokenizer(),
        ImageTransform(**VIT),
        [str(root / "edit" / BACKEND_DIRS[backend])],
        [2],
        None,
        num_workers=0,
        backend=backend,
        **kwargs,
    )
    ds.set_epoch(7)
    return ds


def t2i(root, backend, **kwargs):
    ds = T2IIterableDataset(
        "t2i_pretrain",
        ImageTransform(**VAE),
        ByteTokenizer(),
        [str(root / "t2i" / BACKEND_DIRS[backend])],
        [2],
        num_workers=0,
        backend=backend,
        **kwargs,
    )
    ds.set_epoch(7)
    return ds


DATASETS = {"edit": edit, "t2i": t2i}


# A pass is 13 good edit rows (16, 3 bad) or 10 good t2i rows (12, 2 bad): 3 stops inside the
# first units, 14 after the stream started over.
@pytest.mark.parametrize("n_before", [3, 14])
@pytest.mark.parametrize(("saved_on", "restored_on"), BACKEND_PAIRS)
@pytest.mark.parametrize("kind", ["edit", "t2i"])
def test_dataset_state_contract(data, kind, saved_on, restored_on, n_before):
    build = DATASETS[kind]
    state = check_state_contract(
        lambda: build(data, saved_on),
        n_before,
        4,
        make_restored=lambda: build(data, restored_on),
        owns_global_rng=False,
    )
    (position,) = state["data_status"]
    assert len(position) == {"edit": 2, "t2i": 3}[kind]  # [unit, row] or [file, row_group, row]


@pytest.mark.parametrize("backend", ["parquet", "webdataset"])
@pytest.mark.parametrize("kind", ["edit", "t2i"])
def test_the_state_is_the_position_of_the_last_yielded_sample(data, kind, backend):
    ds = DATASETS[kind](data, backend)
    assert ds.state_dict() == {"data_status": None}
    with preserved_global_rng():
        seed_global_rng(0)
        items = iter(ds)
        for _ in range(15):  # more than a pass
            sample = next(items)
            assert ds.state_dict() == {"data_status": [sample["data_indexes"]["data_indexes"]]}


@pytest.mark.parametrize("backend", ["parquet", "webdataset"])
@pytest.mark.parametrize("kind", ["edit", "t2i"])
def test_a_status_passed_to_the_constructor_resumes_like_load_state_dict(data, kind, backend):
    """PackedDataset hands each dataset its ``data_status`` through the constructor."""
    build = DATASETS[kind]
    with preserved_global_rng():
        first = build(data, backend)
        take(iter(first), 5)
        status = json_roundtrip(first.state_dict())["data_status"]
        loaded = build(data, backend)
        loaded.load_state_dict({"data_status": status})
        seed_global_rng(3)
        want = take(iter(loaded), 4)
        seed_global_rng(3)
        got = take(iter(build(data, backend, data_status=status)), 4)
    assert_batches_equal(want, got)
