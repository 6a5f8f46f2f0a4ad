"""Every YAML a NeMo user would hand editstream's recipe, through NeMo Automodel 0.7.0's own typed parsing
(``load_yaml_config`` then ``RecipeConfig(...).bagel_dataloader``, as the recipe's ``setup()`` does): a
NeMo-style BAGEL YAML with only the ``recipe:`` line changed, editstream's example with its ``backend:``
lines and ``webdataset:`` sub-entries, ``elastic: true``, ``from:`` / ``mapping:`` entries; a key NeMo's
parser refuses gets one line naming it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import ROOT

pytestmark = pytest.mark.nemo_env
pytest.importorskip("nemo_automodel.recipes._typed_config")

import editstream.nemo  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "nemo_bagel_pretrain.yaml"
EXAMPLE = ROOT / "examples" / "configs" / "bagel_recipe.yaml"


def stock(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as NeMo's own BAGEL YAML has it: no editstream key (``backend:``, ``webdataset:``)."""
    config = copy.deepcopy(config)
    for group in config["dataset"]["grouped_datasets"].values():
        group.pop("backend", None)
    for entries in config["dataset"]["dataset_info"].values():
        for entry in entries.values():
            entry.pop("webdataset", None)
    return config


def parsed(config: dict[str, Any], tmp_path: Path) -> Any:
    from nemo_automodel.components.config.loader import load_yaml_config
    from nemo_automodel.recipes._typed_config import RecipeConfig

    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(config))
    return RecipeConfig(load_yaml_config(str(path))).bagel_dataloader


@pytest.fixture
def installed():
    editstream.nemo.install()  # what editstream's recipe does on construction, before setup() parses
    yield
    editstream.nemo.uninstall()


def variants() -> dict[str, dict[str, Any]]:
    fixture, example = yaml.safe_load(FIXTURE.read_text()), yaml.safe_load(EXAMPLE.read_text())
    elastic = copy.deepcopy(example)
    elastic["dataset"].update(elastic=True, elastic_streams=4)
    in_place = copy.deepcopy(example)
    in_place["dataset"]["dataset_info"]["t2i_pretrain"]["t2i"] = {"data_dir": "hub/t2i", "from": "some-published-set"}
    in_place["dataset"]["dataset_info"]["unified_edit"]["edit_data"] = {
        "data_dir": "hub/edit",
        "mapping": "edit-mapping.yaml",
        "where": "split == 'train'",
        "media_dir": "hub/edit/images",
    }
    return {
        "stock-nemo-yaml-recipe-line-changed": stock(fixture),
        "example": example,
        "example-elastic": elastic,
        "example-from-and-mapping": in_place,
    }


@pytest.mark.parametrize("name", sorted(variants()))
def test_each_yaml_passes_nemos_typed_parsing_in_editstreams_recipe(tmp_path, installed, name):
    config = variants()[name]
    loader_config = parsed(config, tmp_path)
    assert type(loader_config) is editstream.nemo.BagelDataloaderConfig
    dataset = loader_config.dataset_config
    assert dataset.grouped_datasets == config["dataset"]["grouped_datasets"]
    assert dataset.dataset_info == config["dataset"]["dataset_info"]
    assert dataset.elastic is bool(config["dataset"].get("elastic", False))


@pytest.mark.parametrize(
    ("edit", "installs", "message"),
    [
        ({"elastik": True}, True, r"^Unexpected BAGEL dataset config field\(s\): elastik$"),
        ({"elastic": True}, False, r"^Unexpected BAGEL dataset config field\(s\): elastic$"),
        ({"_target_": "editstream.nemo.BagelDatasetConfig"}, True, r"^BAGEL dataset config does not support _target_;"),
    ],
    ids=["misspelt-key", "editstream-key-under-nemos-own-recipe", "target"],
)
def test_a_refused_dataset_key_gets_one_line_naming_it(tmp_path, edit, installs, message):
    config = yaml.safe_load(EXAMPLE.read_text())
    config["dataset"].update(edit)
    if installs:
        editstream.nemo.install()
    try:
        with pytest.raises((TypeError, ValueError, ImportError), match=message) as refused:
            parsed(config, tmp_path)
    finally:
        editstream.nemo.uninstall()
    assert "\n" not in str(refused.value)
