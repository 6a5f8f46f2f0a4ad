"""Foreign WebDataset shards (written here by the stock ``webdataset.ShardWriter``, as img2dataset
writes them: ``KEY.jpg``, ``KEY.txt``, ``KEY.json``, no manifest) stream through the T2I dataset
by brace pattern: units are shards, ranks and DataLoader workers split them, a resume seeks
(through the ``.tar.idx`` or a header walk), locally and from S3, and the CLI streams them too.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import torch
from PIL import Image

from editstream import ByteTokenizer
from editstream.data.sources import foreign
from editstream.format.idx import encode_idx
from editstream.kinds.t2i_pretrain.dataset import T2IIterableDataset
from editstream.loader.transforms import ImageTransform
from helpers import FOREIGN_PER_SHARD as PER_SHARD
from helpers import FOREIGN_SHARDS as SHARDS
from helpers import VAE, check_state_contract, run_cli, take, torch_roundtrip, write_foreign_shards

stateful = pytest.importorskip("torchdata.stateful_dataloader")


def write_idx_by_tarfile(shard: str) -> None:
    """A ``.tar.idx`` made with the standard library, independently of editstream's header walk."""
    offsets, last = [], None
    with tarfile.open(shard) as tar:
        for info in tar:
            key = info.name.split(".", 1)[0]
            if key != last:
                offsets.append(info.offset)
                last = key
    end = Path(shard).stat().st_size  # an upper bound is enough for seeking; the reader stops at the marker
    Path(shard + ".idx").write_bytes(encode_idx(offsets, end))


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("foreign")
    write_foreign_shards(root / "a")
    return root / "a"


def make_dataset(pattern, *, rank=0, world=1, workers=0, storage_options=None, columns=None):
    extra = {} if columns is None else {"columns": columns}
    ds = T2IIterableDataset(
        "foreign",
        ImageTransform(**VAE),
        ByteTokenizer(),
        [pattern],
        [SHARDS],
        local_rank=rank,
        world_size=world,
        num_workers=max(workers, 1),
        backend="webdataset",
        storage_options=storage_options,
        **extra,
    )
    ds.set_epoch(11)
    return ds


def test_units_are_the_shards_of_the_pattern(shards):
    ds = make_dataset(str(shards / "shard-{000000..000007}.tar"))
    assert ds.data_paths == [str(shards / f"shard-{i:06d}.tar") for i in range(SHARDS)]
    assert sorted(ds.data_paths_per_rank) == ds.data_paths  # one rank: every shard, in seeded order
    assert ds.data_paths_per_rank != ds.data_paths  # ... shuffled


def test_rows_follow_the_default_img2dataset_columns(shards):
    source = foreign.ForeignTarSource(dataset_name="t", schema="t2i_pretrain", column_types={"image": "binary"})
    rows = [row for _, row in source.iter_unit_rows(str(shards / "shard-000000.tar"), None)]
    assert [json.loads(r["captions"]) for r in rows] == [{"caption": f"json caption {i}"} for i in range(PER_SHARD)]
    assert Image.open(io.BytesIO(rows[0]["image"])).format == "PNG"
    assert Image.open(io.BytesIO(rows[1]["image"])).format == "JPEG"


def test_txt_captions_without_json_and_a_custom_mapping(tmp_path):
    shard = write_foreign_shards(tmp_path / "nojson", with_json=False)[0]
    source = foreign.ForeignTarSource(dataset_name="t", schema="t2i_pretrain")
    assert [json.loads(r["captions"])["caption"] for _, r in source.iter_unit_rows(shard, None)][:2] == [
        "text 0",
        "text 1",
    ]
    only_jpg = foreign.ForeignTarSource(dataset_name="t", columns={"image": "jpg", "captions": "txt"})
    rows = [row for _, row in only_jpg.iter_unit_rows(shard, None)]
    assert isinstance(rows[0], foreign.BadSample) and "no jpg member for column 'image'" in str(rows[0].error)
    assert json.loads(rows[1]["captions"]) == {"caption": "text 1"}


@pytest.mark.parametrize("with_idx", [False, True])
def test_a_resume_seeks_with_or_without_an_idx(tmp_path, monkeypatch, with_idx):
    shard = write_foreign_shards(tmp_path / "s")[3]
    if with_idx:
        write_idx_by_tarfile(shard)
        monkeypatch.setattr(foreign, "scan_offsets", lambda *a, **k: pytest.fail("the idx should be used"))
    source = foreign.ForeignTarSource(dataset_name="t", schema="t2i_pretrain")
    full = [(pos, row["__key__"]) for pos, row in source.iter_unit_rows(shard, None)]
    assert [key for _, key in full] == [f"{i:09d}" for i in range(15, 20)]
    assert [(pos, row["__key__"]) for pos, row in source.iter_unit_rows(shard, (1,))] == full[2:]
    assert list(source.iter_unit_rows(shard, (4,))) == []


def test_two_ranks_and_two_workers_read_every_sample_once(shards):
    pattern = str(shards / "shard-{000000..000007}.tar")
    seen = []
    for rank in (0, 1):
        ds = make_dataset(pattern, rank=rank, world=2, workers=2)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
        per_rank = SHARDS // 2 * PER_SHARD
        for sample in take(iter(loader), per_rank):
            index = sample["data_indexes"]
            unit = ds.worker_units(index["worker_id"], 2)[index["data_indexes"][0]]
            seen.append((unit, index["data_indexes"][1]))
    assert sorted(seen) == [(str(shards / f"shard-{s:06d}.tar"), i) for s in range(SHARDS) for i in range(PER_SHARD)]


@pytest.mark.parametrize("with_idx", [False, True])
def test_two_workers_resume_exactly(tmp_path, with_idx):
    paths = write_foreign_shards(tmp_path / "r")
    if with_idx:
        for path in paths:
            write_idx_by_tarfile(path)
    pattern = str(tmp_path / "r" / "*.tar")

    def make():
        return stateful.StatefulDataLoader(
            make_dataset(pattern, rank=1, world=2, workers=2), batch_size=None, num_workers=2
        )

    check_state_contract(make, 7, 6, roundtrips=(torch_roundtrip,), owns_global_rng=False)


def test_foreign_shards_from_s3(shards, s3_bucket):
    import s3fs

    fs = s3fs.S3FileSystem(**s3_bucket.storage_options)
    for path in sorted(shards.glob("*.tar")):
        fs.put(str(path), f"{s3_bucket.name}/img2dataset/{path.name}")
    so = s3_bucket.storage_options
    remote = make_dataset(
        f"{s3_bucket.url}/img2dataset/shard-{{000000..000007}}.tar", rank=1, world=2, storage_options=so
    )
    local = make_dataset(str(shards / "shard-{000000..000007}.tar"), rank=1, world=2)
    got, want = take(iter(remote), 12), take(iter(local), 12)
    assert [g["data_indexes"]["data_indexes"] for g in got] == [w["data_indexes"]["data_indexes"] for w in want]
    for g, w in zip(got, want):
        assert torch.equal(g["image_tensor_list"][0], w["image_tensor_list"][0])
    state = remote.state_dict()
    resumed = make_dataset(f"{s3_bucket.url}/img2dataset/*.tar", rank=1, world=2, storage_options=so)
    resumed.load_state_dict(state)
    assert [s["data_indexes"]["data_indexes"] for s in take(iter(resumed), 4)] == [
        w["data_indexes"]["data_indexes"] for w in take(iter(local), 16)[12:]
    ]


@pytest.mark.slow
def test_the_cli_streams_foreign_shards_by_pattern_and_directory(shards):
    for data in (str(shards / "shard-{000000..000007}.tar"), str(shards)):
        result = run_cli("stream", data, "--samples", "12", "--workers", "2")
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        assert (summary["schema"], summary["foreign_shards"], summary["units"], summary["samples"]) == (
            "t2i_pretrain",
            True,
            SHARDS,
            12,
        )
        assert summary["drops"] == {}
