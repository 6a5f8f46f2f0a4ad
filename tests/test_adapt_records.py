"""What an adaptation's done records vouch for and whose DST it writes into, through ``convert --from`` /
``--mapping`` as a user runs it: a media file or metadata file changed since a run is adapted (and
converted) again, never kept; a DST holding another conversion is refused before a byte of it changes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from editstream.data.identity import file_identity
from helpers import error_lines, run_cli
from hub_shapes import magicbrush, png
from published_layouts import tar_bytes

MAPPING = "kind: unified_edit\nmetadata: ['*.jsonl']\nimages: [a, b]\ninstructions: [t]\nmedia: [{media}]\n"
LINES = [{"a": "img/0.png", "b": "img/1.png", "t": "one"}, {"a": "img/1.png", "b": "img/2.png", "t": "two"}]


def _dataset(root: Path, media: str, seed: int) -> tuple[Path, Path]:
    """``root/edits.jsonl`` naming ``img/{0,1,2}.png``, held in ``root/images.tar`` or the folder ``root/img``;
    and a mapping file reading them."""
    root.mkdir(parents=True)
    (root / "edits.jsonl").write_text("".join(json.dumps(line) + "\n" for line in LINES))
    _write_media(root, media, seed)
    mapping = root.parent / f"{root.name}.yaml"
    mapping.write_text(MAPPING.format(media="images.tar" if media == "archive" else "img"))
    return root, mapping


def _images(seed: int) -> dict[str, bytes]:
    return {f"img/{k}.png": png(seed + k) for k in range(3)}


def _write_media(root: Path, media: str, seed: int) -> None:
    if media == "archive":
        (root / "images.tar").write_bytes(tar_bytes(_images(seed), gz=False))
        return
    for name, data in _images(seed).items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_bytes(data)


def _overwrite_in_place(path: Path, data: bytes) -> None:
    """``data`` written over ``path`` without truncating or replacing it: same size, same inode."""
    assert len(data) == path.stat().st_size
    with open(path, "r+b") as f:
        f.write(data)


def _same_size_png(seed: int) -> bytes:
    """Another image whose PNG has the size of ``png(seed)``."""
    return next(png(k) for k in range(seed + 1, seed + 500) if len(png(k)) == len(png(seed)))


def _staged_images(staging: Path) -> list[list[bytes]]:
    return [row["image_list"] for f in sorted(staging.glob("*.parquet")) for row in pq.read_table(f).to_pylist()]


def _shard_images(dst: Path) -> list[list[bytes]]:
    import editstream

    return [list(r.row["image_list"]) for r in editstream.iter_rows(str(dst))]


def _ok(result):
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# --------------------------------------------------------------------------- a changed source is redone
@pytest.mark.parametrize("media", ["archive", "folder"])
def test_media_changed_in_place_with_the_same_size_is_adapted_and_converted_again(tmp_path, media):
    root, mapping = _dataset(tmp_path / "mine", media, seed=10)
    dst = tmp_path / "wds"
    args = ("convert", str(root), str(dst), "--mapping", str(mapping), "--workers", "1", "--no-progress")
    _ok(run_cli(*args))
    assert _shard_images(dst)[0][0] == png(10)
    changed = root / ("images.tar" if media == "archive" else "img/0.png")
    before = file_identity(str(changed))
    if media == "archive":  # other images under the same names, same tar size (blocks of 512 bytes)
        _overwrite_in_place(changed, tar_bytes(_images(20), gz=False))
    else:
        _overwrite_in_place(changed, _same_size_png(10))  # one colour for another: the same PNG size
    after = file_identity(str(changed))
    assert after["size"] == before["size"] and after["inode"] == before["inode"]
    assert after["mtime_ns"] != before["mtime_ns"]
    result = run_cli(*args)
    again = _ok(result)
    assert again["adapt"]["resumed_files"] == 0
    assert again["convert"]["already_done"] is False and again["convert"]["converted_shards"] == 1
    assert changed.name in result.stderr and "adapting edits.parquet again" in result.stderr
    new = png(20) if media == "archive" else _same_size_png(10)
    assert _staged_images(tmp_path / "wds-parquet")[0] == [new, png(21) if media == "archive" else png(11)]
    assert _shard_images(dst) == _staged_images(tmp_path / "wds-parquet")  # the shards hold the new bytes
    third = _ok(run_cli(*args))  # and then it is done again
    assert third["adapt"]["resumed_files"] == 1 and third["convert"]["already_done"] is True


def test_a_media_file_that_appears_where_it_was_missing_is_adapted_again(tmp_path):
    root, mapping = _dataset(tmp_path / "mine", "folder", seed=10)
    (root / "img" / "2.png").unlink()
    out = tmp_path / "pq"
    args = ("convert", str(root), str(out), "--mapping", str(mapping), "--to", "parquet", "--no-progress")
    assert _ok(run_cli(*args))["adapt"]["dropped_by_code"] == {"media_missing": 1}
    (root / "img" / "2.png").write_bytes(png(12))
    again = _ok(run_cli(*args))["adapt"]
    assert again["dropped"] == 0 and again["resumed_files"] == 0 and len(_staged_images(out)) == 2


def test_metadata_changed_in_place_with_the_same_size_is_adapted_again(tmp_path):
    root, mapping = _dataset(tmp_path / "mine", "archive", seed=10)
    out = tmp_path / "pq"
    args = ("convert", str(root), str(out), "--mapping", str(mapping), "--to", "parquet", "--no-progress")
    _ok(run_cli(*args))
    meta = root / "edits.jsonl"
    _overwrite_in_place(meta, meta.read_bytes().replace(b'"one"', b'"uno"'))
    result = run_cli(*args)
    assert _ok(result)["adapt"]["resumed_files"] == 0 and "edits.jsonl" in result.stderr
    texts = [row["instruction_list"] for row in pq.read_table(out / "edits.parquet").to_pylist()]
    assert texts == [[["uno"]], [["two"]]]


# --------------------------------------------------------------------------- another conversion in DST
def _tree(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with the sha256 of its bytes (folders: ``dir``)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root)] = "dir"
        for name in files:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return found


def _refused(result, *needles: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = error_lines(result)
    assert lines[0].startswith("Error: ") and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


@pytest.mark.parametrize("target", ["parquet", "webdataset"])
@pytest.mark.parametrize("other", ["source", "mapping"])
def test_a_dst_holding_another_adaptation_is_refused_before_anything_is_written(tmp_path, target, other):
    first, _ = magicbrush(tmp_path / "a", n_sessions=4)
    second, _ = magicbrush(tmp_path / "b", n_sessions=6) if other == "source" else (first, None)
    adapter = ["--from", "magicbrush"]
    if other == "mapping":  # the built-in mapping keeping one column fewer
        from editstream.adapters import builtin_path

        text = builtin_path("magicbrush").read_text()
        mine = tmp_path / "mine.yaml"
        mine.write_text(text.replace("keep: [img_id, turn_index]", "keep: [img_id]"))
        assert mine.read_text() != text
        again = ["--mapping", str(mine)]
    else:
        again = adapter
    dst = tmp_path / "out"
    common = ["--to", target, "--no-progress", "--workers", "1"]
    _ok(run_cli("convert", str(first), str(dst), *adapter, *common))
    places = [dst] + ([tmp_path / "out-parquet"] if target == "webdataset" else [])
    before = [_tree(p) for p in places]
    result = run_cli("convert", str(second), str(dst), *again, *common)
    _refused(result, str(dst), str(first), "--overwrite")
    assert [_tree(p) for p in places] == before  # not a file of DST (or its staging) changed
    replaced = _ok(run_cli("convert", str(second), str(dst), *again, *common, "--overwrite"))
    assert replaced["adapt"]["resumed_files"] == 0
    if target == "webdataset":
        assert replaced["convert"]["already_done"] is False
        assert _shard_images(dst) == _staged_images(tmp_path / "out-parquet")
    resumed = _ok(run_cli("convert", str(second), str(dst), *again, *common))  # the same run resumes as ever
    assert resumed["adapt"]["resumed_files"] == replaced["adapt"]["files_out"]


def test_adapting_into_a_dst_holding_shards_of_another_source_is_refused_before_staging(tmp_path):
    first, _ = magicbrush(tmp_path / "a", n_sessions=4)
    dst = tmp_path / "out"
    _ok(run_cli("convert", str(first), str(tmp_path / "pq"), "--from", "magicbrush", "--to", "parquet"))
    _ok(run_cli("convert", str(tmp_path / "pq"), str(dst), "--workers", "1", "--no-progress"))
    before = _tree(dst)
    result = run_cli("convert", str(first), str(dst), "--from", "magicbrush", "--workers", "1", "--no-progress")
    _refused(result, str(dst), str(tmp_path / "pq"), "--overwrite")
    assert _tree(dst) == before and not (tmp_path / "out-parquet").exists()
    # into a DST of shards, --to parquet is refused too
    result = run_cli("convert", str(first), str(dst), "--from", "magicbrush", "--to", "parquet")
    _refused(result, str(dst), "--overwrite")
    assert _tree(dst) == before
