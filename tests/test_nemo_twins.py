"""editstream.nemo's twins against NeMo Automodel's own ``components.datasets.multimodal``: every public
name of every NeMo module has a twin of the same name whose signature takes NeMo's parameters (names,
kinds, defaults, order); editstream's additions are keyword-only with defaults (or ``**options``), so
NeMo-style code ports unchanged. The behaviours NeMo users rely on are checked against NeMo's classes."""

from __future__ import annotations

import importlib
import inspect
import itertools
import json
import logging
import os
import pkgutil
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.nemo_env

NEMO = "nemo_automodel.components.datasets.multimodal"

ALLOWED: dict[str, str] = {
    "parquet_utils.get_hdfs_host": "NeMo's HDFS cluster stub; editstream opens hdfs:// URLs through fsspec",
    "parquet_utils.get_hdfs_block_size": "NeMo's HDFS cluster stub; editstream opens hdfs:// URLs through fsspec",
    "parquet_utils.get_hdfs_extra_conf": "NeMo's HDFS cluster stub; editstream opens hdfs:// URLs through fsspec",
    "parquet_utils.hdfs_ls_cmd": "NeMo's `hdfs dfs ls` hook; editstream lists hdfs:// directories through fsspec",
}
"""Differences kept on purpose: ``module.name`` (or ``module.Class.method``) -> why."""


def nemo_modules() -> list[str]:
    """NeMo's multimodal package and each of its modules, as suffixes (``""``, ``".datasets"``, ...)."""
    package = importlib.import_module(NEMO)
    return ["", *sorted("." + info.name for info in pkgutil.iter_modules(package.__path__))]


def public_names(module: Any) -> list[str]:
    """The names a NeMo module offers: its ``__all__`` and the public functions and classes it defines."""
    names = set(getattr(module, "__all__", ()))
    for name, value in vars(module).items():
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__:
            names.add(name)
    return sorted(names)


def parameters(function: Any) -> list[inspect.Parameter]:
    return list(inspect.signature(function).parameters.values())


def signature_problems(nemo: Any, ours: Any) -> list[str]:
    """How ``ours`` fails to take every call ``nemo`` takes, as NeMo takes it (empty when it does)."""
    theirs, mine = parameters(nemo), parameters(ours)
    problems = []
    for position, expected in enumerate(theirs):
        got = mine[position] if position < len(mine) else None
        if got is None or (got.name, got.kind) != (expected.name, expected.kind):
            problems.append(f"parameter {position}: NeMo's {expected} is {got} here")
            continue
        if got.default is not expected.default and got.default != expected.default:
            problems.append(f"{expected.name}: default {got.default!r}, NeMo's {expected.default!r}")
    for extra in mine[len(theirs) :]:
        optional_keyword = extra.kind is inspect.Parameter.KEYWORD_ONLY and extra.default is not inspect.Parameter.empty
        if not optional_keyword and extra.kind is not inspect.Parameter.VAR_KEYWORD:
            problems.append(f"extra parameter {extra} is not keyword-only with a default")
    return problems


def methods(cls: type) -> dict[str, Any]:
    """A class's own public methods and ``__init__`` (properties and data left out)."""
    own = {}
    for name, value in vars(cls).items():
        if name.startswith("_") and name != "__init__":
            continue
        function = value.__func__ if isinstance(value, staticmethod | classmethod) else value
        if inspect.isfunction(function):
            own[name] = getattr(cls, name)
    return own


def twin_differences() -> list[str]:
    """Every public NeMo name whose editstream twin is missing or takes different arguments."""
    found = []
    for suffix in nemo_modules():
        nemo_module = importlib.import_module(NEMO + suffix)
        ours = importlib.import_module("editstream.nemo" + suffix)
        for name in public_names(nemo_module):
            key = f"{suffix.lstrip('.')}.{name}".lstrip(".")
            theirs = getattr(nemo_module, name)
            if not hasattr(ours, name):
                found.append(f"{key}: missing")
                continue
            twin = getattr(ours, name)
            if callable(theirs) and not inspect.isclass(theirs):
                found += [f"{key}: {p}" for p in signature_problems(theirs, twin)]
            if inspect.isclass(theirs):
                found += [f"{key}: {p}" for p in signature_problems(theirs, twin)]
                for method_name, method in methods(theirs).items():
                    where = f"{key}.{method_name}"
                    if not hasattr(twin, method_name):
                        found.append(f"{where}: missing")
                    else:
                        found += [f"{where}: {p}" for p in signature_problems(method, getattr(twin, method_name))]
    return [line for line in found if line.split(":", 1)[0] not in ALLOWED]


def test_every_public_nemo_name_has_a_twin_that_takes_nemos_arguments():
    assert twin_differences() == []


def test_the_allow_list_names_only_real_differences():
    """Each allowed difference exists in NeMo (so a stale entry fails here) and gives a reason."""
    for key, reason in ALLOWED.items():
        module, _, name = key.rpartition(".")
        assert hasattr(importlib.import_module(f"{NEMO}.{module}"), name), key
        assert reason


# --------------------------------------------------------------------------- behaviour, as NeMo's


def test_datasets_built_without_a_rank_are_rank_0_of_1_as_nemos_under_torchrun(monkeypatch):
    """torchrun sets RANK / WORLD_SIZE; NeMo's datasets still default to rank 0 of 1 (the recipe passes the
    rank it means), and so do the twins; editstream's own classes keep reading the environment."""
    from nemo_automodel.components.datasets.multimodal import distributed_iterable as nemo_base

    from editstream.loader.distributed import DistributedIterableDataset as EditstreamsOwn
    from editstream.nemo import interleave
    from editstream.nemo.datasets import T2IIterableDataset, UnifiedEditIterableDataset
    from editstream.nemo.distributed_iterable import DistributedIterableDataset

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    theirs = nemo_base.DistributedIterableDataset("d")
    for twin in (DistributedIterableDataset, interleave.InterleavedBaseIterableDataset):
        ours = twin("d")
        assert (ours.local_rank, ours.world_size) == (theirs.local_rank, theirs.world_size) == (0, 1)
    for twin_class in (T2IIterableDataset, UnifiedEditIterableDataset):
        assert inspect.signature(twin_class).parameters["local_rank"].default == 0
    own = EditstreamsOwn("d")
    assert (own.local_rank, own.world_size) == (1, 2), "editstream's own base reads the environment"


def test_a_twin_dataset_without_a_rank_reads_rank_0_of_1s_rows_under_torchrun(monkeypatch, tmp_path):
    """The rows themselves: with RANK=1 of WORLD_SIZE=2 set, a twin edit dataset built without a rank reads
    the units of rank 0 of 1 (all of them), as NeMo's does; editstream's own class reads rank 1's half."""
    from editstream import ByteTokenizer, ImageTransform
    from editstream import UnifiedEditIterableDataset as EditstreamsOwn
    from editstream.nemo.interleave import UnifiedEditIterableDataset
    from editstream.sandbox.synth import write_synthetic_dataset
    from helpers import VAE, VIT

    write_synthetic_dataset(str(tmp_path), num_files=2, row_groups_per_file=2, rows_per_group=2, seed=3)
    args = ("edit", ImageTransform(**VAE), ByteTokenizer(), ImageTransform(**VIT), [str(tmp_path)], [2], None)
    alone = UnifiedEditIterableDataset(*args, 0, 1)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    ours, own = UnifiedEditIterableDataset(*args), EditstreamsOwn(*args)
    assert ours.data_paths_per_rank == alone.data_paths_per_rank and len(ours.data_paths_per_rank) == 4
    assert (own.local_rank, own.world_size, len(own.data_paths_per_rank)) == (1, 2, 2)


def test_torchvisions_interpolation_modes_resize_as_nemos():
    """``InterpolationMode.BICUBIC`` (and the other modes) are taken and resize PIL images and tensors to
    NeMo's pixels."""
    import torch
    from nemo_automodel.components.datasets.multimodal.transforms import MaxLongEdgeMinShortEdgeResize as Nemo
    from PIL import Image
    from torchvision.transforms import InterpolationMode

    from editstream.nemo.transforms import MaxLongEdgeMinShortEdgeResize

    generator = torch.Generator().manual_seed(0)
    pixels = torch.randint(0, 256, (3, 37, 53), dtype=torch.uint8, generator=generator)
    image = Image.fromarray(pixels.permute(1, 2, 0).numpy())
    limits = (64, 16, 8, 64 * 48)
    for mode in (None, InterpolationMode.BICUBIC, InterpolationMode.BILINEAR, InterpolationMode.NEAREST):
        ours, theirs = MaxLongEdgeMinShortEdgeResize(*limits, mode), Nemo(*limits, mode)
        assert list(ours(image).getdata()) == list(theirs(image).getdata()), mode
        assert torch.equal(ours(pixels), theirs(pixels)), mode
        assert torch.allclose(ours(pixels.float() / 255), theirs(pixels.float() / 255), atol=1e-6), mode
    with pytest.raises(ValueError, match="interpolation"):
        MaxLongEdgeMinShortEdgeResize(*limits, "sideways")


def test_a_subclass_change_format_override_is_called_where_nemo_calls_it(tmp_path):
    """A NeMo-style subclass that rewrites the conversation (here: drops the human text) changes the
    samples, in editstream's dataset as in NeMo's."""
    from nemo_automodel.components.datasets.multimodal.datasets import SftJSONLIterableDataset as Nemo
    from PIL import Image

    from editstream import ByteTokenizer, ImageTransform
    from editstream.nemo.datasets import SftJSONLIterableDataset
    from helpers import VIT

    media = tmp_path / "media"
    media.mkdir()
    lines = []
    for i in range(4):
        Image.new("RGB", (40 + 8 * i, 36), (30 * i, 90, 200)).save(media / f"{i}.jpg")
        turns = [{"from": "human", "value": f"<image>\nwhat is in picture {i}?"}, {"from": "gpt", "value": f"dots {i}"}]
        lines.append(json.dumps({"image": f"{i}.jpg", "conversations": turns}))
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n")
    made = {"jsonl": str(tmp_path / "data.jsonl"), "media": str(media)}

    def answers_only(elements: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [element for element in elements if element.get("has_loss", 1)]

    class OursAnswersOnly(SftJSONLIterableDataset):
        def change_format(self, data: Any, num_images: int) -> list[dict[str, Any]]:
            return answers_only(super().change_format(data, num_images))

    class NemosAnswersOnly(Nemo):
        def change_format(self, data: Any, num_images: int) -> list[dict[str, Any]]:
            return answers_only(super().change_format(data, num_images))

    args = ("sft", ImageTransform(**VIT), ByteTokenizer(), None, [made["jsonl"]], [made["media"]], [4])

    def texts(dataset: Any) -> list[Any]:  # the datasets repeat forever: one pass
        return [sample["text_ids_list"] for sample in itertools.islice(dataset, 4)]

    ours, theirs = texts(OursAnswersOnly(*args)), texts(NemosAnswersOnly(*args))
    plain = texts(SftJSONLIterableDataset(*args))
    assert ours == theirs and ours != plain


def test_log_drop_counts_and_logs_as_nemos(caplog):
    from nemo_automodel.components.datasets.multimodal.distributed_iterable import DistributedIterableDataset as Nemo

    from editstream.nemo import DistributedIterableDataset

    records = {}
    for cls in (Nemo, DistributedIterableDataset):
        caplog.clear()
        dataset = cls("d")
        with caplog.at_level(logging.WARNING):
            for _ in range(10):
                dataset._log_drop("bad_row", "row %s of %s", 3, "f.parquet", every=4)
        records[cls] = [(r.name, r.getMessage()) for r in caplog.records]
        assert dataset._drop_counters == {"bad_row": 10}
    nemo_messages = [message for _, message in records[Nemo]]
    assert [message for _, message in records[DistributedIterableDataset]] == nemo_messages
    assert len(nemo_messages) == 5  # drops 1, 2, 3, 4 and 8


def test_get_parquet_data_paths_keeps_nemos_listing_order(tmp_path):
    """NeMo takes ``os.listdir``'s order before cutting to ``num_sampled_data_paths``; so does the twin."""
    from nemo_automodel.components.datasets.multimodal.parquet_utils import get_parquet_data_paths as nemo_paths

    from editstream.nemo.parquet_utils import get_parquet_data_paths

    directory = tmp_path / "d"
    directory.mkdir()
    for name in ("c.parquet", "a.parquet", "d.parquet", "b.parquet", "notes.txt"):
        (directory / name).write_bytes(b"")
    listed = [name for name in os.listdir(directory) if name.endswith(".parquet")]
    for count in (3, 4, 6):
        ours = get_parquet_data_paths([str(directory)], [count])
        assert ours == nemo_paths([str(directory)], [count]), count
        assert [Path(path).name for path in ours] == (listed * 2)[:count]


def test_nemos_keyword_names_work():
    import random

    from nemo_automodel.components.datasets.multimodal import utils as nemo_utils
    from nemo_automodel.components.datasets.multimodal import video as nemo_video

    from editstream.nemo import utils, video

    random.seed(5)
    ours = utils.split_integer_exp_decay(S=9, ng_sample_decay=0.5)
    random.seed(5)
    assert ours == nemo_utils.split_integer_exp_decay(S=9, ng_sample_decay=0.5)
    frames = ["x_10.jpg", "x_2.jpg", "x_1.jpg", "cover.jpg"]
    assert video.sort_frames(frame_paths=frames) == nemo_video.sort_frames(frame_paths=frames)
    assert video.extract_frame_number(filename="a_12.jpg") == nemo_video.extract_frame_number(filename="a_12.jpg")
