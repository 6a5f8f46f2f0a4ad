"""Shared helpers of the test suite, in one module.

Tests import from here (``from helpers import ...``), never from other test files.

- data to test with: transform sizes (``VAE``, ``VIT``), ``synth_and_convert``,
  ``synth_pipeline_data`` and ``make_real_packer`` (real datasets on either backend), ``first``,
  and the toy packing kit (hand-made samples, ``ToyDataset``, ``make_packer`` ...);
- comparisons: ``assert_batches_equal``;
- resume: ``check_state_contract`` (the state contract every stateful stage is held to),
  ``assert_resumes_identically``, ``json_roundtrip``, ``torch_roundtrip``, ``take`` and the
  global-RNG helpers;
- examples: ``ROOT``, ``TRAIN_LOOP``, ``load_example``;
- the command line: ``run_cli`` (this checkout's CLI in a subprocess), ``error_lines``;
- foreign shards (img2dataset-style, by webdataset's ShardWriter): ``write_foreign_shards``.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import itertools
import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from editstream import ByteTokenizer, PackedDataset, make_bagel_multimodal_dataset
from editstream.conversion import convert
from editstream.loader.iteration import SourceIterableDataset
from editstream.packing.config import BagelDatasetConfig
from editstream.sandbox.synth import write_synthetic_dataset

# --------------------------------------------------------------------------- data to test with
# Small images keep the tests fast; stride 16 (VAE) and 14 (ViT) as in BAGEL.
VAE = dict(max_image_size=128, min_image_size=32, image_stride=16)
VIT = dict(max_image_size=112, min_image_size=28, image_stride=14)
BACKEND_DIRS = {"parquet": "pq", "webdataset": "wds"}
"""Sub-directory of a :func:`synth_and_convert` root that each backend reads."""
BACKEND_PAIRS = [
    ("parquet", "parquet"),
    ("webdataset", "webdataset"),
    ("parquet", "webdataset"),
    ("webdataset", "parquet"),
]
"""(backend a state is saved on, backend it is restored on): each backend, and each way across."""


def synth_and_convert(root: Path, **synth_kwargs: Any) -> Path:
    """Write a synthetic parquet dataset to ``root/pq`` and its rowgroup-layout shards to ``root/wds``."""
    write_synthetic_dataset(str(root / "pq"), **synth_kwargs)
    convert(str(root / "pq"), str(root / "wds"), workers=1, progress=False)
    return root


def synth_pipeline_data(root: Path) -> Path:
    """Small edit and text-to-image datasets with planted bad rows, on both backends.

    ``root/edit`` holds 2 files x 2 row groups x 4 rows, ``root/t2i`` 2 files x 2 row groups
    x 3 rows; each has ``pq`` and ``wds`` sub-directories (see :func:`synth_and_convert`).
    """
    synth_and_convert(
        root / "edit", num_files=2, row_groups_per_file=2, rows_per_group=4, seed=13, corrupt_fraction=0.2, max_side=64
    )
    synth_and_convert(
        root / "t2i",
        schema="t2i_pretrain",
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=3,
        seed=14,
        corrupt_fraction=0.2,
        max_side=64,
    )
    return root


SMALL_PACKING = {
    "expected_num_tokens": 512,
    "max_num_tokens": 544,
    "max_num_tokens_per_sample": 512,
    "prefer_buffer_before": 256,
    "max_buffer_size": 4,
}
"""Packing knobs small enough for the test data: a few samples per packed sequence."""


def pipeline_groups(root: Path, backend: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(grouped_datasets, dataset_info)`` over the edit and t2i datasets of :func:`synth_pipeline_data`,
    both groups reading ``backend`` (edit weighs 2, t2i 1)."""
    sub = BACKEND_DIRS[backend]
    groups = {
        "unified_edit": {
            "dataset_names": ["edit"],
            "weight": 2.0,
            "num_used_data": [2],
            "image_transform_args": dict(VAE),
            "vit_image_transform_args": dict(VIT),
            "backend": backend,
        },
        "t2i_pretrain": {
            "dataset_names": ["t2i"],
            "weight": 1.0,
            "num_used_data": [2],
            "image_transform_args": dict(VAE),
            "backend": backend,
        },
    }
    info = {
        "unified_edit": {"edit": {"data_dir": str(root / "edit" / sub)}},
        "t2i_pretrain": {"t2i": {"data_dir": str(root / "t2i" / sub)}},
    }
    return groups, info


def build_dataloader(dataset_config: BagelDatasetConfig, rank: int, world_size: int, workers: int) -> Any:
    """The loader a recipe builds from ``dataset_config`` (``BagelDataloaderConfig``, real workers, seed 7)."""
    from editstream import BagelDataloaderConfig

    tokenizer = ByteTokenizer()
    built = BagelDataloaderConfig(dataset_config, num_workers=workers, pin_memory=False)
    return built.build(
        tokenizer=tokenizer,
        special_tokens=tokenizer.special_token_ids(),
        rank=rank,
        world_size=world_size,
        batch_size=1,
        global_seed=7,
    ).dataloader


def make_real_packer(root: Path, backend: str, *, num_workers: int = 0, seed: int = 42) -> PackedDataset:
    """A ``PackedDataset`` over the real edit and t2i datasets of :func:`synth_pipeline_data`.

    Both groups read ``backend``; the budget (512 tokens, 544 at most, a buffer of 4) makes
    the buffer fill and sequences hold several samples. ``set_epoch(seed)`` is called.
    """
    groups, info = pipeline_groups(root, backend)
    tokenizer = ByteTokenizer()
    packer = make_bagel_multimodal_dataset(
        tokenizer=tokenizer,
        special_tokens=tokenizer.special_token_ids(),
        grouped_datasets=groups,
        dataset_info=info,
        local_rank=0,
        world_size=1,
        num_workers=num_workers,
        **SMALL_PACKING,
        data_seed=seed,
    )
    packer.set_epoch(seed)
    return packer


def first(items: Iterable[Any], n: int) -> list[Any]:
    """The first ``n`` items of an iterable (a DataLoader, say), without running it further."""
    return list(itertools.islice(items, n))


# --------------------------------------------------------------------------- the toy packing kit
# Hand-made samples and ToyDataset stand in for real datasets in the packer tests: 2x2 ViT
# patches, a 2x downsampling VAE, and these special token ids.
BOS, EOS, SOI, EOI = 100, 101, 102, 103
SPECIAL = {"bos_token_id": BOS, "eos_token_id": EOS, "start_of_image": SOI, "end_of_image": EOI}
NEG = float("-inf")


def text_item(loss=0, cfg=0, special_loss=0, label=None, **extra):
    """A ``sequence_plan`` entry for a text span."""
    return {
        "type": "text",
        "enable_cfg": cfg,
        "loss": loss,
        "special_token_loss": special_loss,
        "special_token_label": label,
        **extra,
    }


def vit_item(cfg=0, **extra):
    """A ``sequence_plan`` entry for a ViT-encoded image."""
    return {
        "type": "vit_image",
        "enable_cfg": cfg,
        "loss": 0,
        "special_token_loss": 0,
        "special_token_label": None,
        **extra,
    }


def vae_item(loss=0, cfg=0, **extra):
    """A ``sequence_plan`` entry for a VAE-encoded image."""
    return {
        "type": "vae_image",
        "enable_cfg": cfg,
        "loss": loss,
        "special_token_loss": 0,
        "special_token_label": None,
        **extra,
    }


def make_sample(plan, texts=(), images=(), num_tokens=None, index=0, name="hand"):
    """A dataset sample as ``parse_row`` returns it, with ``num_tokens`` computed for 2x2 patches."""
    if num_tokens is None:
        num_tokens = sum(len(t) for t in texts) + sum(img.shape[1] * img.shape[2] // 4 for img in images)
    return {
        "sequence_plan": list(plan),
        "text_ids_list": [list(t) for t in texts],
        "image_tensor_list": list(images),
        "num_tokens": num_tokens,
        "data_indexes": {"data_indexes": index, "worker_id": 0, "dataset_name": name},
    }


class ToyDataset(torch.utils.data.IterableDataset):
    """Stands in for a DistributedIterableDataset: generated rows, sharded over workers, resumable.

    ``kind="sized"``: row i is one text item whose packed length is ``sizes[i % len(sizes)]``
    (no randomness). ``kind="mixed"``: t2i / edit / chat-like samples whose structure, text
    lengths and pixels are drawn from the global ``random`` and ``torch`` RNGs, like a real
    ``parse_row``. ``data_status[worker] = pos`` resumes at position ``pos + 1``.
    """

    def __init__(
        self,
        dataset_name,
        tokenizer,
        local_rank,
        world_size,
        num_workers,
        data_status=None,
        data_dir_list=(),
        kind="sized",
        sizes=(4,),
        length=None,
        **extra,
    ):
        self.dataset_name = dataset_name
        self.tokenizer = tokenizer
        self.local_rank = local_rank
        self.world_size = world_size
        self.num_workers = num_workers
        self.data_dir_list = list(data_dir_list)
        self.kind = kind
        self.sizes = list(sizes)
        self.length = length
        self.extra = extra
        self.epoch_seeds = []
        self.init_data_status = copy.deepcopy(data_status)
        self.load_state_dict({"data_status": data_status})

    def set_epoch(self, seed=42):
        self.epoch_seeds.append(seed)

    def state_dict(self):
        return {"data_status": copy.deepcopy(self._resume_status)}

    def load_state_dict(self, state):
        self.data_status = copy.deepcopy(state["data_status"])
        self._resume_status = copy.deepcopy(state["data_status"])

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker_id, n_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        pos = 0
        if self.data_status is not None and self.data_status[worker_id] is not None:
            pos = self.data_status[worker_id] + 1
        while self.length is None or pos < self.length:
            row = pos * n_workers + worker_id
            sample = self._sized(row) if self.kind == "sized" else self._mixed(row)
            sample["data_indexes"] = {"data_indexes": pos, "worker_id": worker_id, "dataset_name": self.dataset_name}
            if self._resume_status is None:
                self._resume_status = [None] * max(1, self.num_workers)
            self._resume_status[worker_id] = pos
            yield sample
            pos += 1

    def _sized(self, row):
        n_ids = self.sizes[row % len(self.sizes)] - 2
        ids = [(row * 7 + k) % 90 for k in range(n_ids)]
        return make_sample([text_item()], [ids], num_tokens=n_ids)

    def _mixed(self, row):
        h, w = 2 * (1 + row % 3), 2 * (1 + (row // 3) % 2)
        u = random.random()
        ids = [(row * 7 + k) % 90 for k in range(random.randint(1, 4))]
        if u < 0.4:  # text-to-image
            return make_sample([text_item(cfg=1), vae_item(loss=1)], [ids], [torch.rand(3, h, w)])
        if u < 0.8:  # edit: condition image (vae + vit), instruction, target image
            source, target = torch.rand(3, h, w), torch.rand(3, w, h)
            plan = [vae_item(cfg=1), vit_item(cfg=1), text_item(cfg=1), vae_item(loss=1)]
            return make_sample(plan, [ids], [source, source.clone(), target])
        answer = [(row + k) % 90 for k in range(random.randint(1, 4))]
        plan = [text_item(cfg=1), text_item(loss=1, special_loss=1, label=77)]
        return make_sample(plan, [ids, answer])


REGISTRY = {"toy": ToyDataset, "toy_b": ToyDataset, "toy_c": ToyDataset}


class SizedRowSource:
    """In-memory units of rows, each row a packed length: ``units[k][i]`` is row ``i`` of unit ``u<k>``."""

    def __init__(self, units: Sequence[Sequence[int]]) -> None:
        self.units = {f"u{k:03d}": list(sizes) for k, sizes in enumerate(units)}

    def iter_unit_rows(self, unit, after):
        for i in range(after[0] + 1 if after else 0, len(self.units[unit])):
            yield (i,), {"size": self.units[unit][i], "unit": unit, "row": i}

    def describe(self, unit, position=None):
        return {"unit": unit, **({"row": position[0]} if position else {})}

    def plan_units(self, units):
        """Nothing to read ahead in memory."""


class SizedRowsDataset(SourceIterableDataset):
    """A real source dataset (elastic-ready: it reads units in any order and recreates rows) over
    :class:`SizedRowSource`: row ``i`` of a unit parses into one text item of its packed length."""

    def __init__(
        self,
        dataset_name,
        tokenizer,
        local_rank,
        world_size,
        num_workers,
        data_status=None,
        data_dir_list=(),
        unit_sizes=((4,),),
        **extra,
    ):
        super().__init__(dataset_name, local_rank, world_size, num_workers)
        self.source = SizedRowSource(unit_sizes)
        self.data_paths = sorted(self.source.units)
        self.set_data_status(data_status)

    def parse_row(self, row):
        ids = [(row["row"] * 7 + k) % 90 for k in range(row["size"] - 2)]
        return make_sample([text_item()], [ids], num_tokens=len(ids))


SIZED_REGISTRY = {"g0": SizedRowsDataset, "g1": SizedRowsDataset, "g2": SizedRowsDataset}


def toy_info(*groups, names=("d0",)):
    """A ``dataset_info`` naming a (never read) data_dir for each toy group and dataset name."""
    return {g: {n: {"data_dir": f"/data/{g}/{n}"} for n in names} for g in groups}


def make_packer(groups=None, *, probs=(0.0, 0.0, 0.0), world_size=1, local_rank=0, num_workers=0, epoch=None, **kwargs):
    """A PackedDataset over toy groups with 2x2 ViT patches and a 2x downsampling VAE."""
    groups = groups or {"toy": {"dataset_names": ["d0"], "weight": 1.0, "kind": "sized", "sizes": [4]}}
    config = BagelDatasetConfig(
        groups,
        text_cond_dropout_prob=probs[0],
        vit_cond_dropout_prob=probs[1],
        vae_cond_dropout_prob=probs[2],
        vit_patch_size=2,
        vae_image_downsample=2,
        max_num_patch_per_side=4,
        max_latent_size=4,
    )
    kwargs.setdefault("dataset_info", toy_info(*groups))
    kwargs.setdefault("registry", REGISTRY)
    packer = PackedDataset(config, None, SPECIAL, local_rank, world_size, num_workers, **kwargs)
    if epoch is not None:
        packer.set_epoch(epoch)
    return packer


def pack(packer, *samples):
    """Pack ``samples`` into one fresh accumulator with ``packer.pack_sequence``."""
    status = packer.set_sequence_status()
    for sample in samples:
        status = packer.pack_sequence(sample, status)
    return status


def names_and_positions(batch):
    """``(dataset_name, position)`` of every sample of a packed batch, in packing order."""
    return [(d["dataset_name"], d["data_indexes"]) for d in batch["batch_data_indexes"]]


def sized_groups(sizes, **extra):
    """One toy group whose row i packs to ``sizes[i % len(sizes)]`` tokens."""
    return {"toy": {"dataset_names": ["d0"], "weight": 1.0, "kind": "sized", "sizes": sizes, **extra}}


def mixed_groups():
    """A random-content toy group (weight 2) and a sized one (weight 1)."""
    return {
        "toy": {"dataset_names": ["d0"], "weight": 2.0, "kind": "mixed"},
        "toy_b": {"dataset_names": ["d0"], "weight": 1.0, "kind": "sized", "sizes": [5, 9, 4]},
    }


def make_mixed(**kwargs):
    """The packer over :func:`mixed_groups` that the loop and resume tests share (buffer, dropout, epoch 9)."""
    kwargs.setdefault("epoch", 9)
    return make_packer(
        mixed_groups(),
        probs=(0.3, 0.4, 0.2),
        expected_num_tokens=40,
        max_num_tokens=56,
        max_num_tokens_per_sample=36,
        prefer_buffer_before=20,
        max_buffer_size=3,
        **kwargs,
    )


# --------------------------------------------------------------------------- comparisons
def assert_batches_equal(expected: Any, actual: Any, path: str = "item") -> None:
    """Recursive equality: same keys and types; tensors and arrays equal with the same dtype.

    Batch objects with ``to_dict()`` (``SimpleCustomBatch``) are compared as their dicts.
    """
    if hasattr(expected, "to_dict") and not isinstance(expected, dict):
        assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert_batches_equal(expected.to_dict(), actual.to_dict(), path)
        return
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a tensor, got {type(actual).__name__}"
        assert expected.dtype == actual.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert expected.shape == actual.shape, f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        assert torch.equal(expected, actual), f"{path}: tensor values differ"
        return
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{path}: expected an ndarray, got {type(actual).__name__}"
        assert expected.dtype == actual.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert np.array_equal(expected, actual), f"{path}: array values differ"
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected a dict, got {type(actual).__name__}"
        assert list(expected) == list(actual), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_batches_equal(expected[key], actual[key], f"{path}[{key!r}]")
        return
    if isinstance(expected, (list, tuple)):
        assert type(expected) is type(actual), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert len(expected) == len(actual), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_batches_equal(e, a, f"{path}[{i}]")
        return
    if isinstance(expected, float) and math.isnan(expected):
        assert isinstance(actual, float) and math.isnan(actual), f"{path}: {actual!r} != nan"
        return
    assert type(expected) is type(actual) and expected == actual, f"{path}: {actual!r} != {expected!r}"


# --------------------------------------------------------------------------- resume
GlobalRng = tuple[Any, Any, torch.Tensor]


def capture_global_rng() -> GlobalRng:
    """The global random / numpy / torch RNG states."""
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def restore_global_rng(saved: GlobalRng) -> None:
    """Put back states from :func:`capture_global_rng`."""
    random.setstate(saved[0])
    np.random.set_state(saved[1])
    torch.set_rng_state(saved[2])


@contextlib.contextmanager
def preserved_global_rng() -> Iterator[None]:
    """Put the global random / numpy / torch RNG states back afterwards (stages may reseed them)."""
    saved = capture_global_rng()
    try:
        yield
    finally:
        restore_global_rng(saved)


def seed_global_rng(seed: int) -> None:
    """Seed the global random / numpy / torch RNGs."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def scramble_global_rng(seed: int = 987_654_321) -> None:
    """Move the global random / numpy / torch RNGs somewhere unrelated, as a new process would be."""
    seed_global_rng(seed)


def json_roundtrip(state: Any) -> Any:
    """Pass a state through ``json.dumps`` / ``json.loads`` as a JSON checkpoint would."""
    return json.loads(json.dumps(state))


def torch_roundtrip(state: Any) -> Any:
    """Pass a state through ``torch.save`` / ``torch.load`` as a checkpoint would."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def take(iterator: Iterator[Any], n: int) -> list[Any]:
    """The next ``n`` items of ``iterator``; fails clearly if it ends early."""
    items = []
    for i in range(n):
        try:
            items.append(next(iterator))
        except StopIteration:
            raise AssertionError(f"the stage stopped after {i} items, {n} were needed") from None
    return items


RUN_START_SEED = 0
"""The global RNGs are seeded with this at the start of every run from the start of a stream."""


def _expect_next(
    compare: Callable[[Any, Any], None], items: Iterator[Any], reference: list[Any], start: int, stop: int, what: str
) -> None:
    """The next items of ``items`` are ``reference[start:stop]``; a failure names the clause and the item."""
    for position in range(start, stop):
        try:
            item = next(items)
        except StopIteration:
            raise AssertionError(f"{what}: the stage stopped before item {position}") from None
        try:
            compare(reference[position], item)
        except AssertionError as exc:
            raise AssertionError(f"{what}: item {position} differs from the uninterrupted run: {exc}") from None


def _restore(make: Callable[[], Any], state: Any, rng: GlobalRng | None) -> tuple[Any, Iterator[Any]]:
    """A stage from ``make()`` loaded with ``state`` in a "new process", and its iterator.

    The global RNGs are scrambled first; ``rng`` (for stages that leave their draws to the
    caller's global RNGs) is put back just before iteration, as ``PackedDataset`` does for
    its datasets.
    """
    scramble_global_rng()
    stage = make()
    stage.load_state_dict(state)
    if rng is not None:
        restore_global_rng(rng)
    return stage, iter(stage)


def check_state_contract(
    make: Callable[[], Any],
    n_before: int,
    n_after: int,
    *,
    compare: Callable[[Any, Any], None] = assert_batches_equal,
    roundtrips: Sequence[Callable[[Any], Any]] = (json_roundtrip, torch_roundtrip),
    make_restored: Callable[[], Any] | None = None,
    owns_global_rng: bool = True,
) -> Any:
    """Check the state contract of a stateful stage (``__iter__``, ``state_dict``, ``load_state_dict``).

    ``make()`` returns a fresh stage, ready to iterate, that behaves the same on every call.
    Against an uninterrupted run of ``n_before + n_after`` items:

    (a) the state taken after ``n_before`` items, loaded into a fresh stage in a "new process"
        (global random / numpy / torch RNGs scrambled), continues with exactly the next items;
        taking it changes nothing in the stage it was taken from, and that stage going on does
        not change the state already taken;
    (b) (a) holds after each of ``roundtrips`` (e.g. JSON for a dataset's ``data_status``,
        ``torch.save`` for states holding tensors and RNG states);
    (c) a state taken part-way through a restored stage restores too: a state taken after a
        restore is as good as one from an uninterrupted run;
    (d) the state of a stage that has yielded nothing gives the stream from the start, loaded
        into a fresh stage or into one that has already yielded items (a reset).

    States are loaded into stages from ``make_restored`` (default ``make``), e.g. the same
    dataset on the other backend. A stage whose draws use the caller's global RNGs without
    saving them (the datasets, whose caller ``PackedDataset`` saves and restores the RNGs)
    passes ``owns_global_rng=False``: the check then keeps the RNG states with each state and
    puts them back when the restored stage starts, as that caller does. Every run from the
    start begins with the global RNGs seeded with ``RUN_START_SEED``; they are put back as they
    were at the end. ``n_after >= 2``. Returns the state taken after ``n_before`` items.
    """
    if n_before < 0 or n_after < 2 or not roundtrips:
        raise ValueError(f"need n_before >= 0, n_after >= 2 and a roundtrip; got {n_before}, {n_after}, {roundtrips}")
    restore_into = make_restored or make
    total, middle = n_before + n_after, n_before + n_after // 2

    def caller_rng() -> GlobalRng | None:
        return None if owns_global_rng else capture_global_rng()

    with preserved_global_rng():
        seed_global_rng(RUN_START_SEED)
        start_rng = caller_rng()
        reference = take(iter(make()), total)

        seed_global_rng(RUN_START_SEED)
        stage = make()
        items = iter(stage)
        _expect_next(compare, items, reference, 0, n_before, "the run the state is taken from")
        state, rng = stage.state_dict(), caller_rng()
        _expect_next(compare, items, reference, n_before, total, "(a) the run the state was taken from, going on")

        later = None
        for roundtrip in roundtrips:
            how = getattr(roundtrip, "__name__", repr(roundtrip))
            what = f"(a, b) a stage restored after {n_before} items through {how}"
            stage, items = _restore(restore_into, roundtrip(state), rng)
            _expect_next(compare, items, reference, n_before, middle, what)
            if later is None:
                later = roundtrip(stage.state_dict()), caller_rng()
            _expect_next(compare, items, reference, middle, total, what)

        _, items = _restore(restore_into, *later)
        what = f"(c) a stage restored from a state taken {middle - n_before} items after a restore"
        _expect_next(compare, items, reference, middle, total, what)

        initial = roundtrips[0](make().state_dict())
        _, items = _restore(restore_into, initial, start_rng)
        _expect_next(compare, items, reference, 0, total, "(d) a fresh stage loaded with a new stage's state")
        seed_global_rng(RUN_START_SEED)
        used = restore_into()
        take(iter(used), max(1, n_before))
        _, items = _restore(lambda: used, initial, start_rng)
        _expect_next(compare, items, reference, 0, total, "(d) a used stage loaded with a new stage's state")
    return state


def assert_resumes_identically(
    make: Callable[[], Any],
    n_before: int,
    n_after: int,
    compare: Callable[[Any, Any], None] = assert_batches_equal,
    roundtrip: Callable[[Any], Any] | None = None,
) -> Any:
    """Clause (a) of :func:`check_state_contract` alone: state taken after ``n_before`` items,
    passed through ``roundtrip`` and loaded into a fresh stage after the global RNGs were
    scrambled, continues with the uninterrupted stream. Returns the (round-tripped) state."""
    with preserved_global_rng():
        reference = take(iter(make()), n_before + n_after)
        stage = make()
        items = iter(stage)
        _expect_next(compare, items, reference, 0, n_before, "the run the state is taken from")
        state = stage.state_dict()
        if roundtrip is not None:
            state = roundtrip(state)
        _, items = _restore(make, state, None)
        _expect_next(compare, items, reference, n_before, n_before + n_after, "the restored stage")
    return state


# --------------------------------------------------------------------------- examples
ROOT = Path(__file__).resolve().parents[1]
TRAIN_LOOP = ROOT / "examples" / "train_loop.py"


def load_example(path: Path = TRAIN_LOOP) -> ModuleType:
    """The example script at ``path`` as a module (its ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- the command line
SRC_DIR = ROOT / "src"


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | str | None = None, timeout: float = 300, **kwargs: Any
) -> subprocess.CompletedProcess:
    """Run ``python -m editstream.cli ARGS`` on this checkout's code; text output captured.

    ``env`` entries are added to (``None`` values removed from) this process's environment.
    """
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC_DIR), os.environ.get("PYTHONPATH", "")])}
    for key, value in (env or {}).items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    kwargs.setdefault("stderr", subprocess.PIPE)  # a test may hand stderr a terminal (pty) instead
    return subprocess.run(
        [sys.executable, "-m", "editstream.cli", *args],
        stdout=subprocess.PIPE,
        text=True,
        env=full,
        cwd=cwd,
        timeout=timeout,
        **kwargs,
    )


_PAUSED_CONVERT = """
import runpy, signal, sys
from editstream.conversion import shard

after = int(sys.argv.pop(1))
resume = sys.argv.pop(1) == "resume"
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
real_write_rows = shard._write_rows
written = 0

def write_rows(task, writer):
    global written
    work = real_write_rows(task, writer)
    written += 1
    if written == after + 1:  # this shard's rows are written, the shard is not committed yet
        print("paused", flush=True)
        if resume:
            signal.sigwait({signal.SIGUSR1})
            return work
        while True:
            signal.pause()
    return work

shard._write_rows = write_rows
sys.argv[0] = "editstream"
runpy.run_module("editstream.cli", run_name="__main__", alter_sys=True)
"""


def paused_convert_command(after_shards: int, *args: str, resume_on_usr1: bool = False) -> list[str]:
    """``editstream convert ARGS`` (use ``--workers 1``: shards are written in this process) that
    stops inside the shard after ``after_shards`` finished ones, prints ``paused`` on stdout and
    waits for a signal: a kill or an interrupt lands at a known point instead of a raced one.
    With ``resume_on_usr1`` a SIGUSR1 lets it go on, so a test can change the source meanwhile."""
    mode = "resume" if resume_on_usr1 else "wait"
    return [sys.executable, "-c", _PAUSED_CONVERT, str(after_shards), mode, "convert", *args]


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    """The non-empty lines a failed command printed on stderr."""
    return [line for line in result.stderr.splitlines() if line.strip()]


# --------------------------------------------------------------------------- foreign shards
FOREIGN_SHARDS, FOREIGN_PER_SHARD = 8, 5


def write_foreign_shards(out: Path, *, with_json: bool = True) -> list[str]:
    """Shards as img2dataset writes them, by the stock ``webdataset.ShardWriter`` (no manifest):
    ``FOREIGN_SHARDS`` shards of ``FOREIGN_PER_SHARD`` samples with ``jpg`` or ``png``, ``txt``
    (``text i``) and ``json`` (``{"caption": "json caption i"}``); returns the shard paths."""
    import webdataset as wds
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    with wds.ShardWriter(str(out / "shard-%06d.tar"), maxcount=FOREIGN_PER_SHARD, verbose=0) as sink:
        for i in range(FOREIGN_SHARDS * FOREIGN_PER_SHARD):
            image = Image.fromarray(rng.integers(0, 255, (32 + i % 5 * 8, 48, 3), dtype=np.uint8))
            buf = io.BytesIO()
            image.save(buf, format="PNG" if i % 3 == 0 else "JPEG")
            sample = {"__key__": f"{i:09d}", "png" if i % 3 == 0 else "jpg": buf.getvalue(), "txt": f"text {i}"}
            if with_json:
                sample["json"] = json.dumps({"caption": f"json caption {i}", "url": f"http://x/{i}"}).encode()
            sink.write(sample)
    return sorted(str(p) for p in out.glob("*.tar"))


def nemo_checkpointer(directory: Path, dp_rank: int, aware: bool = True) -> Any:
    """NeMo Automodel's ``Checkpointer`` for ``directory`` at ``dp_rank`` (torch_save, no Hub), DP-aware as
    editstream's recipes make it on load unless ``aware`` is false (NeMo's stock one)."""
    from nemo_automodel.components.checkpoint.checkpointing import Checkpointer, CheckpointingConfig

    from editstream.nemo.dp_checkpoint import make_dp_aware

    config = CheckpointingConfig(
        enabled=True,
        checkpoint_dir=str(directory),
        model_save_format="torch_save",
        model_cache_dir="",
        model_repo_id="",
        save_consolidated=False,
        is_peft=False,
    )
    made = Checkpointer(config=config, dp_rank=dp_rank, tp_rank=0, pp_rank=0)
    return make_dp_aware(made) if aware else made
