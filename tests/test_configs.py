"""The YAML configs under examples/configs: one line switches the backend, batches stay equal."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from editstream import BagelDatasetConfig, ByteTokenizer, PackedDataset
from helpers import assert_batches_equal, synth_and_convert, take

CONFIGS = Path(__file__).resolve().parents[1] / "examples" / "configs"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synth_and_convert(
        tmp_path_factory.mktemp("configs"),
        num_files=3,
        row_groups_per_file=2,
        rows_per_group=4,
        seed=6,
        corrupt_fraction=0.1,
        max_side=128,
    )


def packer_from_yaml(backend_line: str, data: Path, tmp_path: Path) -> PackedDataset:
    """The example configs with only the group's ``backend:`` line changed (and the demo paths
    pointed at this test's data)."""
    text = (CONFIGS / "unified_edit.yaml").read_text()
    assert "  backend: webdataset" in text
    grouped = tmp_path / "grouped.yaml"
    grouped.write_text(text.replace("  backend: webdataset", backend_line))
    info = (CONFIGS / "dataset_info.yaml").read_text()
    assert "demo-out/edit-parquet\n" in info and "demo-out/edit-wds\n" in info
    info_file = tmp_path / "dataset_info.yaml"
    info_file.write_text(
        info.replace("demo-out/edit-parquet\n", f"{data / 'pq'}\n").replace("demo-out/edit-wds\n", f"{data / 'wds'}\n")
    )
    config = BagelDatasetConfig(
        grouped_datasets_path=str(grouped),
        dataset_info_path=str(info_file),
        expected_num_tokens=4096,
        max_num_tokens=5120,
        max_num_tokens_per_sample=4096,
        prefer_buffer_before=2048,
        max_buffer_size=8,
    )
    tok = ByteTokenizer()
    return config.build(
        tokenizer=tok, special_tokens=tok.special_token_ids(), rank=0, world_size=1, num_workers=1, global_seed=42
    )


def test_one_line_switches_the_backend(data, tmp_path):
    wds = packer_from_yaml("  backend: webdataset", data, tmp_path)
    pq = packer_from_yaml("  backend: parquet", data, tmp_path)
    assert wds.grouped_datasets[0].backend == "webdataset" and pq.grouped_datasets[0].backend == "parquet"
    assert wds.grouped_datasets[0].data_dir_list == [str(data / "wds")]
    assert pq.grouped_datasets[0].data_dir_list == [str(data / "pq")]
    assert_batches_equal(take(iter(pq), 4), take(iter(wds), 4))


def test_the_example_configs_parse():
    grouped = yaml.safe_load((CONFIGS / "unified_edit.yaml").read_text())
    info = yaml.safe_load((CONFIGS / "dataset_info.yaml").read_text())
    assert set(grouped) == set(info) == {"unified_edit"}
    assert grouped["unified_edit"]["dataset_names"] == list(info["unified_edit"])
