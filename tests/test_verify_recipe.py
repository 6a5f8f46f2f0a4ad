"""``editstream verify --recipe``: what a recipe's limits keep of each dataset, counted before training.

The count is checked against training itself: one exact (elastic) epoch of the same recipe's
loader over the same data yields exactly the samples the count says survive, its packer drops as
``oversize`` exactly the samples the count puts over a limit, and its datasets drop the rows the
count's drop log names, for the same reasons. The data make every row's sample independent of the
random draws (two-image edits, one phrasing, one caption), so the two passes see the same samples.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

from editstream import BagelDatasetConfig
from editstream.conversion import convert
from editstream.loader.pixels import sizes_only, transform_image
from editstream.loader.transforms import ImageTransform
from editstream.packing.recipe_count import count_recipe
from helpers import VAE, build_dataloader, pipeline_groups, run_cli

pytest.importorskip("torchdata.stateful_dataloader")

LIMITS = {"expected_num_tokens": 100, "max_num_tokens": 120, "max_num_tokens_per_sample": 140}
"""Between the smallest and the largest samples of the data: some fit, some fit no sequence
(over max_num_tokens only), some are over the per-sample limit."""


def image(rng: random.Random, fmt: str) -> bytes:
    size = (rng.randint(20, 150), rng.randint(20, 150))
    out = io.BytesIO()
    Image.new("RGB", size, (rng.randrange(256), 90, 30)).save(out, format=fmt)
    return out.getvalue()


def write_edit(root, rng):
    """2 files x 2 row groups x 6 rows; every 5th row's second image is garbage, every 7th has one image."""
    root.mkdir(parents=True)
    i = 0
    for f in range(2):
        rows = []
        for _ in range(12):
            images = [image(rng, "PNG"), image(rng, "JPEG")]
            if i % 5 == 3:
                images[1] = b"not an image at all"
            if i % 7 == 5:
                images = images[:1]
            rows.append({"image_list": images, "instruction_list": [[f"edit number {i} " * rng.randint(1, 4)]]})
            i += 1
        pq.write_table(pa.Table.from_pylist(rows), root / f"part-{f}.parquet", row_group_size=6)


def write_t2i(root, rng):
    """2 files x 1 row group x 5 rows; row 3 of each file has a caption that is not JSON."""
    root.mkdir(parents=True)
    for f in range(2):
        rows = [
            {"image": image(rng, "PNG"), "captions": "{oops" if r == 3 else json.dumps({"c": "a photo " * (r + 1)})}
            for r in range(5)
        ]
        pq.write_table(pa.Table.from_pylist(rows), root / f"t2i-{f}.parquet")


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    root = tmp_path_factory.mktemp("recipe")
    rng = random.Random(5)
    write_edit(root / "edit" / "pq", rng)
    write_t2i(root / "t2i" / "pq", rng)
    groups, info = pipeline_groups(root, "parquet")
    path = root / "recipe.yaml"
    section = {"grouped_datasets": groups, "dataset_info": info, **LIMITS, "elastic": True, "elastic_streams": 2}
    path.write_text(yaml.safe_dump({"dataset": section, "dataloader": {"num_workers": 0}}, sort_keys=False))
    return path, BagelDatasetConfig(**section)


def one_epoch(config):
    """An exact epoch of the recipe's loader: samples yielded per group, the packer's and the datasets' drops."""
    loader = build_dataloader(config, 0, 1, 0)
    yielded = {"unified_edit": 0, "t2i_pretrain": 0}
    for batch in loader:
        for index in batch.batch_data_indexes:
            yielded[index["dataset_name"]] += 1
    dropped = {name: d.drop_counts for name, d in zip(loader.dataset.group_names, loader.dataset.grouped_datasets)}
    return yielded, loader.dataset.drop_counts, dropped


def on_shards(config, root):
    """The recipe with every group on the webdataset backend, over the data converted to shards."""
    info = copy.deepcopy(dict(config.dataset_info))
    for group, entries in info.items():
        for entry in entries.values():
            convert(entry["data_dir"], str(root / group), workers=1, progress=False)
            entry["webdataset"] = {"data_dir": str(root / group)}
    groups = {g: {**args, "backend": "webdataset"} for g, args in config.grouped_datasets.items()}
    return dataclasses.replace(config, grouped_datasets=groups, dataset_info=info)


@pytest.mark.parametrize("backend", ["parquet", "webdataset"])
def test_the_count_is_what_an_epoch_of_training_yields_and_drops(recipe, backend, tmp_path):
    _, config = recipe
    if backend == "webdataset":
        config = on_shards(config, tmp_path)
    count = count_recipe(config)
    yielded, packer_drops, dataset_drops = one_epoch(config)
    by_group = {e.group: e for e in count.entries}
    assert {g: e.survive for g, e in by_group.items()} == yielded
    total = count.totals()
    assert packer_drops.get("oversize", 0) == sum(total["over"].values()) + total["malformed"]
    assert {g: e.dropped for g, e in by_group.items()} == dataset_drops
    # the data reach every outcome, so the comparison means something
    assert all(total["over"].values()) and total["survive"] > 0
    assert by_group["unified_edit"].dropped == {"bad_row": 8} and by_group["t2i_pretrain"].dropped == {"bad_row": 2}
    assert total["samples"] == total["survive"] + sum(total["over"].values()) == 24 - 8 + 10 - 2


def test_verify_recipe_prints_the_table_and_the_json(recipe):
    path, config = recipe
    table = run_cli("verify", "--recipe", str(path))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("limits: max_num_tokens_per_sample=140, max_num_tokens=120")
    assert "dropped rows: bad_row 8" in table.stdout
    assert lines[-2].split() == ["total", "24", "17", "4", "3", "0", "10"] and lines[2].startswith("unified_edit")
    as_json = run_cli("verify", "--recipe", str(path), "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == count_recipe(config).to_dict()


def test_a_recipe_and_a_dst_together_or_a_file_without_groups_is_a_usage_error(recipe, tmp_path):
    path, _ = recipe
    assert run_cli("verify", "x", "--recipe", str(path)).returncode == 2
    assert run_cli("verify", "--recipe", str(path), "--source", "x").returncode == 2
    other = tmp_path / "other.yaml"
    other.write_text("model: {}\n")
    result = run_cli("verify", "--recipe", str(other))
    assert result.returncode == 2 and "grouped_datasets" in result.stderr


def test_sizes_only_gives_the_shape_of_the_real_transform_without_decoding():
    transform = ImageTransform(**VAE)
    raw = io.BytesIO()
    Image.new("RGB", (301, 97), (1, 2, 3)).save(raw, format="PNG")
    from editstream.loader.pixels import load_image

    real, _ = transform_image(transform, load_image(raw.getvalue(), (transform,), False), "float32")
    with sizes_only():
        opened = load_image(raw.getvalue(), (transform,), False)
        sized, _ = transform_image(transform, opened, "float32")
    assert sized.shape == real.shape and sized.stride() == (0, 0, 0)
