"""What a listing sees: symbolic links (the Hugging Face cache layout) count as what they point
at, a link that resolves to nothing is an error naming it, and plain paths are literal even when
their names hold glob or brace characters. Every case goes through the commands a user types
(``convert``, ``verify --source``, ``stream``) and through the datasets on both backends."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset
from editstream.sandbox.synth import write_synthetic_dataset
from helpers import (
    FOREIGN_SHARDS,
    VAE,
    VIT,
    assert_batches_equal,
    error_lines,
    first,
    run_cli,
    seed_global_rng,
    write_foreign_shards,
)

NUM_FILES, ROWS_PER_FILE = 3, 2
NUM_ROWS = NUM_FILES * ROWS_PER_FILE


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    """A parquet directory of 3 files x 1 row group x 2 rows (regular files)."""
    out = tmp_path_factory.mktemp("plain") / "data"
    write_synthetic_dataset(str(out), num_files=NUM_FILES, row_groups_per_file=1, rows_per_group=2, seed=7, max_side=48)
    (out / "parquet_info.json").unlink()  # it names the files by their original paths
    return out


def parquet_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".parquet"))


def hf_cache(plain: Path, root: Path, linked: list[str]) -> Path:
    """The Hugging Face cache layout: ``snapshots/<rev>/data/NAME`` as relative symlinks into
    ``blobs/<digest>`` for the names in ``linked``, regular copies for the others."""
    data = root / "snapshots" / "0123abcd" / "data"
    data.mkdir(parents=True)
    (root / "blobs").mkdir()
    for name in parquet_names(plain):
        if name in linked:
            blob = hashlib.sha256((plain / name).read_bytes()).hexdigest()
            shutil.copyfile(plain / name, root / "blobs" / blob)
            os.symlink(f"../../../blobs/{blob}", data / name)
        else:
            shutil.copyfile(plain / name, data / name)
    return data


def edit_dataset(data_dir: Path | str, backend: str) -> UnifiedEditIterableDataset:
    return UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(**VAE),
        ByteTokenizer(),
        ImageTransform(**VIT),
        [str(data_dir)],
        [NUM_FILES],
        None,
        num_workers=0,
        backend=backend,
    )


def one_pass(data_dir: Path | str, backend: str) -> list[dict]:
    """The first pass (every unit once) of a dataset over ``data_dir``, from seeded global RNGs."""
    ds = edit_dataset(data_dir, backend)
    ds.set_epoch(0)
    assert len(ds.data_paths) == NUM_FILES
    seed_global_rng(0)
    return first(iter(ds), NUM_ROWS)


def check_commands_and_datasets(src: Path, dst: Path, plain: Path) -> None:
    """``convert``, ``verify --source`` and ``stream`` see every row of ``src``, and both backends'
    datasets yield the samples of the same data in regular files."""
    converted = run_cli("-q", "convert", str(src), str(dst))
    assert converted.returncode == 0, converted.stderr
    summary = json.loads(converted.stdout)
    assert (summary["num_shards"], summary["num_rows"]) == (NUM_FILES, NUM_ROWS)
    verified = run_cli("-q", "verify", str(dst), "--source", str(src))
    assert verified.returncode == 0, verified.stderr
    assert f"{NUM_ROWS} source rows compared" in verified.stdout
    for data in (src, dst):
        streamed = run_cli("-q", "stream", str(data), "--samples", str(NUM_ROWS))
        assert streamed.returncode == 0, streamed.stderr
        assert json.loads(streamed.stdout)["units"] == NUM_FILES
    expected = one_pass(plain, "parquet")
    for data, backend in ((src, "parquet"), (dst, "webdataset")):
        assert_batches_equal(expected, one_pass(data, backend))


# --------------------------------------------------------------------------- symbolic links


@pytest.mark.parametrize("linked", ["all", "some"])
def test_a_hugging_face_cache_snapshot_lists_every_symlinked_file(plain, tmp_path, linked):
    names = parquet_names(plain)
    data = hf_cache(plain, tmp_path / "hub", names if linked == "all" else names[1:])
    assert any((data / n).is_symlink() for n in names)
    check_commands_and_datasets(data, tmp_path / "wds", plain)


def test_a_symlinked_data_directory_is_listed_like_its_target(plain, tmp_path):
    link = tmp_path / "linked-data"
    os.symlink(plain, link, target_is_directory=True)
    check_commands_and_datasets(link, tmp_path / "wds", plain)


def test_a_symlink_loop_among_the_sources_is_an_error_naming_it(plain, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(plain, data)
    os.symlink("loop.parquet", data / "loop.parquet")  # resolves to itself
    for args in (["convert", str(data), str(tmp_path / "wds")], ["stream", str(data), "--samples", "1"]):
        result = run_cli(*args, timeout=120)
        assert result.returncode == 1, result.stderr
        assert any("loop.parquet" in line and "symbolic link loop" in line for line in error_lines(result))
    with pytest.raises(FileNotFoundError, match=r"loop\.parquet is a symbolic link loop"):
        edit_dataset(data, "parquet").list_data_paths()


def test_a_dangling_symlink_is_an_error_naming_its_target(plain, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(plain, data)
    os.symlink("../blobs/gone", data / "part-00009.parquet")  # a half-downloaded cache
    result = run_cli("convert", str(data), str(tmp_path / "wds"))
    assert result.returncode == 1
    assert "part-00009.parquet is a symbolic link to ../blobs/gone, which does not exist" in result.stderr


def test_a_directory_that_is_a_symlink_loop_is_named_as_one(tmp_path):
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    with pytest.raises(FileNotFoundError, match=r"directory .*a is a symbolic link that does not resolve"):
        edit_dataset(tmp_path / "a", "parquet").list_data_paths()


# --------------------------------------------------------------------------- literal paths


def test_paths_with_glob_characters_are_literal(plain, tmp_path):
    src = tmp_path / "loc?al[1]"
    shutil.copytree(plain, src)
    (tmp_path / "locXal1").mkdir()  # what the pattern would match: never read
    check_commands_and_datasets(src, tmp_path / "q?dst", plain)
    inspected = run_cli("-q", "inspect", str(tmp_path / "q?dst"))
    assert inspected.returncode == 0, inspected.stderr


def test_brace_characters_in_a_root_are_literal(plain, tmp_path):
    check_commands_and_datasets(plain, tmp_path / "out{1,2}", plain)


def test_a_shard_directory_with_glob_characters_streams_its_own_shards(tmp_path):
    shards = tmp_path / "sh?rds[1]"
    write_foreign_shards(shards)
    decoy = tmp_path / "shXrds1"
    write_foreign_shards(decoy)
    (decoy / "extra-000000.tar").write_bytes((decoy / sorted(os.listdir(decoy))[0]).read_bytes())
    result = run_cli("-q", "stream", str(shards), "--samples", "3")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["foreign_shards"] is True
    assert summary["units"] == FOREIGN_SHARDS


def test_a_pattern_is_still_a_pattern_where_nothing_has_its_name(tmp_path):
    write_foreign_shards(tmp_path / "shards")
    result = run_cli("-q", "stream", str(tmp_path / "shards" / "*.tar"), "--samples", "3")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["foreign_shards"], summary["units"]) == (True, FOREIGN_SHARDS)
