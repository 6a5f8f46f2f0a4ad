"""The YAML configs under examples/configs: one line switches the backend, batches stay equal."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from editstream import ByteTokenizer, DataConfig, PackedDataset
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


def packer_from_yaml(backend_line: str, data_dir: str) -> PackedDataset:
    text = (CONFIGS / "unified_edit.yaml").read_text()
    assert "  backend: webdataset" in text
    grouped = yaml.safe_load(text.replace("  backend: webdataset", backend_line))
    info = yaml.safe_load((CONFIGS / "dataset_info.yaml").read_text())
    info["unified_edit"]["synthetic_edit"]["data_dir"] = data_dir
    tok = ByteTokenizer()
    packer = PackedDataset(
        DataConfig(grouped),
        tok,
        tok.special_token_ids(),
        local_rank=0,
        world_size=1,
        num_workers=1,
        expected_num_tokens=4096,
        max_num_tokens=5120,
        max_num_tokens_per_sample=4096,
        prefer_buffer_before=2048,
        max_buffer_size=8,
        dataset_info=info,
    )
    packer.set_epoch(42)
    return packer


def test_one_line_switches_the_backend(data):
    wds = packer_from_yaml("  backend: webdataset", str(data / "wds"))
    pq = packer_from_yaml("  backend: parquet", str(data / "pq"))
    assert wds.grouped_datasets[0].backend == "webdataset" and pq.grouped_datasets[0].backend == "parquet"
    assert_batches_equal(take(iter(pq), 4), take(iter(wds), 4))
