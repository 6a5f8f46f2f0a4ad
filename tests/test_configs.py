"""examples/configs/bagel_recipe.yaml: a NeMo BAGEL recipe's dataset and dataloader sections, all
three groups, built with the NeMo entry points; flipping a group's backend line is the only
change between the source data and the converted shards, and the batches stay equal."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from editstream import BagelDataloaderConfig, BagelDatasetConfig, ByteTokenizer
from helpers import ROOT, assert_batches_equal, load_example

RECIPE = ROOT / "examples" / "configs" / "bagel_recipe.yaml"
demo = load_example(ROOT / "examples" / "demo.py")


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("recipe") / "demo-out")
    demo.prepare_data(out)
    return out


def recipe_with(out: str, flips: dict[str, str]) -> dict:
    """The example recipe pointed at ``out``, with some groups' ``backend: parquet`` lines flipped."""
    lines = RECIPE.read_text().replace("demo-out/", f"{out}/").splitlines()
    group = None
    for i, line in enumerate(lines):
        if line.startswith("    ") and not line.startswith("     ") and line.strip().endswith(":"):
            group = line.strip()[:-1]
        if line.strip().startswith("backend: parquet") and group in flips:
            lines[i] = line.replace("backend: parquet", f"backend: {flips[group]}")
    return yaml.safe_load("\n".join(lines))


def batches(recipe: dict, n: int = 4) -> list[dict]:
    tok = ByteTokenizer()
    built = BagelDataloaderConfig(BagelDatasetConfig(**recipe["dataset"]), **recipe["dataloader"]).build(
        tokenizer=tok,
        special_tokens=tok.special_token_ids(),
        rank=0,
        world_size=1,
        batch_size=1,
        global_seed=recipe["seed"],
    )
    out = []
    for batch in built.dataloader:
        out.append(batch.to_dict())
        if len(out) == n:
            return out
    raise AssertionError("the loader stopped")


def test_the_recipe_names_the_three_groups_and_a_backend_line_each():
    recipe = yaml.safe_load(RECIPE.read_text())
    groups = recipe["dataset"]["grouped_datasets"]
    assert set(groups) == set(recipe["dataset"]["dataset_info"]) == {"t2i_pretrain", "unified_edit", "vlm_sft"}
    assert all(args["backend"] == "parquet" for args in groups.values())
    assert RECIPE.read_text().count("backend: parquet") == 3
    assert set(recipe["dataloader"]) == {"num_workers", "pin_memory", "prefetch_factor"}


@pytest.mark.parametrize("group", ["t2i_pretrain", "unified_edit", "vlm_sft"])
def test_one_line_switches_one_group_and_the_batches_stay_equal(out, group):
    source = recipe_with(out, {})
    flipped = recipe_with(out, {group: "webdataset"})
    changed = [
        g
        for g in source["dataset"]["grouped_datasets"]
        if source["dataset"]["grouped_datasets"][g] != flipped["dataset"]["grouped_datasets"][g]
    ]
    assert changed == [group]
    assert_batches_equal(batches(source), batches(flipped))


def test_all_three_groups_on_shards_equal_all_three_on_the_source(out):
    flips = dict.fromkeys(["t2i_pretrain", "unified_edit", "vlm_sft"], "webdataset")
    on_shards = batches(recipe_with(out, flips), 6)
    assert {entry["dataset_name"] for b in on_shards for entry in b["batch_data_indexes"]} == {
        "t2i_pretrain",
        "unified_edit",
        "vlm_sft",
    }
    assert_batches_equal(batches(recipe_with(out, {}), 6), on_shards)


def test_the_demo_writes_what_the_recipe_names(out):
    recipe = recipe_with(out, {})
    for datasets in recipe["dataset"]["dataset_info"].values():
        for entry in datasets.values():
            assert (
                Path(entry["data_dir"]).exists() and (Path(entry["webdataset"]["data_dir"]) / "manifest.json").exists()
            )


@pytest.mark.parametrize("where", ["entry", "webdataset"])
def test_a_typo_inside_a_dataset_info_entry_is_an_error_naming_the_key_the_entry_and_the_group(where):
    """Issue 17 case 8: an unknown key in a dataset_info entry is refused, not ignored (the
    reference's descriptive num_files / num_total_samples are accepted)."""
    recipe = yaml.safe_load(RECIPE.read_text())
    entries = recipe["dataset"]["dataset_info"]["vlm_sft"]
    name = next(iter(entries))
    entry = entries[name]
    entry.update(num_files=1, num_total_samples=10)
    if where == "entry":
        entry["jsonl_paht"] = entry.pop("jsonl_path")
        expected = f"dataset_info['vlm_sft'][{name!r}]: unknown key(s) ['jsonl_paht'] in the entry of dataset {name!r}"
    else:
        entry["webdataset"]["data_dri"] = entry["webdataset"].pop("data_dir")
        expected = f"dataset_info['vlm_sft'][{name!r}]['webdataset']: unknown key(s) ['data_dri']"
    with pytest.raises(ValueError) as raised:
        batches(recipe)
    assert expected in str(raised.value) and "of group 'vlm_sft'" in str(raised.value)


def test_a_yaml_alias_bomb_as_a_recipe_file_is_refused_at_once(tmp_path):
    """The recipe's grouped_datasets_path is loaded with the same bound on alias expansion as a mapping."""
    from editstream import BagelDatasetConfig

    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = tmp_path / "groups.yaml"
    bomb.write_text("\n".join(levels) + "\n")
    config = BagelDatasetConfig(grouped_datasets_path=str(bomb), dataset_info={})
    with pytest.raises(ValueError, match="grouped_datasets_path") as err:
        config.resolved()
    assert len(str(err.value)) < 1000
