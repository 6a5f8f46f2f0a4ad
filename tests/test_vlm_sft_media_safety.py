"""vlm_sft media safety: names outside --media-dir are refused everywhere, and verify --source checks the media.

Issue 17 case 3: a JSONL line naming ``../../secret.png`` or an absolute path must not copy that
file into shards (convert), show it (preview) or train on it (the source backend) unless the
user opts out. Case 4: ``verify --source`` must notice media replaced or deleted after the
conversion, naming the file, since the two backends then no longer yield the same samples.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from editstream import ByteTokenizer, ImageTransform, SftJSONLIterableDataset, convert
from editstream.format import manifest as mf
from editstream.preview.collect import collect
from helpers import assert_batches_equal, first, run_cli

ANSWER = {"from": "gpt", "value": "a square"}


def _png(color: tuple[int, int, int], size: int = 20) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (size, size), color).save(out, format="PNG")
    return out.getvalue()


def _line(image: str) -> str:
    return json.dumps({"image": image, "conversations": [{"from": "human", "value": "<image> what?"}, ANSWER]}) + "\n"


@pytest.fixture
def hostile(tmp_path: Path) -> dict:
    """A media dir with two good images, and a JSONL that also names two files outside it: one
    by climbing out with ``..`` and one by an absolute path (both real PNGs, so an opted-in
    read trains on them)."""
    media = tmp_path / "data" / "media"
    (media / "img").mkdir(parents=True)
    good = {"img/a.png": _png((200, 10, 10)), "img/b.png": _png((10, 200, 10))}
    for name, data in good.items():
        (media / name).write_bytes(data)
    secret = tmp_path / "secret.png"  # media/../../secret.png
    secret.write_bytes(_png((1, 2, 3), 24))
    absolute = tmp_path / "elsewhere" / "hostname.png"
    absolute.parent.mkdir()
    absolute.write_bytes(_png((4, 5, 6), 28))
    jsonl = tmp_path / "data" / "data.jsonl"
    names = ["img/a.png", "../../secret.png", str(absolute), "img/b.png"]
    jsonl.write_text("".join(_line(n) for n in names))
    return {
        "jsonl": str(jsonl),
        "media": str(media),
        "outside": {2: secret.read_bytes(), 3: absolute.read_bytes()},
        "names": names,
        "tmp": tmp_path,
    }


def _shard_bytes(root: Path) -> bytes:
    return b"".join((root / s.path).read_bytes() for s in mf.Manifest.read(str(root)).shards)


def _dataset(jsonl: str | None, root: str, backend: str, **kw) -> SftJSONLIterableDataset:
    return SftJSONLIterableDataset(
        "vlm_sft",
        ImageTransform(max_image_size=32, min_image_size=16, image_stride=16),
        ByteTokenizer(),
        None,
        [jsonl] if jsonl else None,
        [root],
        [100],
        num_workers=0,
        backend=backend,
        **kw,
    )


def _take(ds: SftJSONLIterableDataset, n: int) -> list:
    random.seed(0)
    np.random.seed(0)
    return first(iter(ds), n)


def test_the_containment_rule_is_on_the_name():
    from editstream.format.sft import outside_media_dir

    inside = ["img/a.png", "a/../b.png", "./x.png", "clips/ok/", "..a/b.png", "a..b"]
    outside = ["../secret", "../../secret.txt", "/etc/hostname", "a/../../b", "..", "s3://bucket/x.png"]
    assert [n for n in inside if outside_media_dir(n)] == []
    assert [n for n in outside if not outside_media_dir(n)] == []


def test_convert_refuses_media_outside_the_media_dir_and_reports_the_lines(hostile):
    out = hostile["tmp"] / "out"
    cmd = ["convert", hostile["jsonl"], str(out), "--media-dir", hostile["media"], "--samples-per-shard", "2"]
    result = run_cli(*cmd, "--no-progress")
    assert result.returncode == 0, result.stderr
    assert "2 bad rows kept verbatim" in result.stderr
    report = json.loads((out / "report.json").read_text())
    by_line = {b["line"]: b for b in report["bad_rows"]}
    assert sorted(by_line) == [2, 3]
    for line in (2, 3):
        assert "outside the media directory: refused" in by_line[line]["reason"]
        assert hostile["names"][line - 1] in by_line[line]["reason"]
    shards = _shard_bytes(out)
    assert all(secret not in shards for secret in hostile["outside"].values())
    assert (hostile["tmp"] / "data" / "media" / "img" / "a.png").read_bytes() in shards
    assert run_cli("verify", str(out), "--source", hostile["jsonl"]).returncode == 0


def test_convert_reads_outside_media_only_when_the_user_opts_out(hostile):
    out = hostile["tmp"] / "out"
    cmd = ["convert", hostile["jsonl"], str(out), "--media-dir", hostile["media"], "--no-progress"]
    result = run_cli(*cmd, "--allow-outside-media-dir")
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "report.json").read_text())["bad_rows"] == []
    shards = _shard_bytes(out)
    assert all(secret in shards for secret in hostile["outside"].values())
    info = mf.Manifest.read(str(out)).extra["vlm_sft"]
    assert info["allow_outside_media_dir"] is True


def test_preview_does_not_read_media_outside_the_media_dir(hostile):
    records = collect(hostile["jsonl"], 4, media_dir=hostile["media"])
    assert [r.images for r in records[1:3]] == [[None], [None]]
    assert all(any("outside the media directory: refused" in t for t in r.texts) for r in records[1:3])
    assert records[0].images[0] is not None and not any("refused" in t for t in records[0].texts)
    allowed = collect(hostile["jsonl"], 4, media_dir=hostile["media"], allow_outside_media_dir=True)
    assert [r.images for r in allowed[1:3]] == [[hostile["outside"][2]], [hostile["outside"][3]]]
    page = hostile["tmp"] / "p.html"
    result = run_cli("preview", hostile["jsonl"], "--media-dir", hostile["media"], "-o", str(page))
    assert result.returncode == 0, result.stderr
    assert "outside the media directory: refused" in page.read_text()


def test_both_backends_drop_lines_naming_media_outside_and_count_them_with_their_place(hostile):
    out = hostile["tmp"] / "out"
    convert(hostile["jsonl"], str(out), media_dir=hostile["media"], progress=False)
    outcomes = []
    for ds in (_dataset(hostile["jsonl"], hostile["media"], "parquet"), _dataset(None, str(out), "webdataset")):
        samples = _take(ds, 4)  # two good lines a pass: the fourth sample comes after two whole passes
        lines = {d.location["line"] for d in ds.drops.recent if d.reason == "media_outside"}
        outcomes.append((ds.drop_counts.get("media_outside", 0) >= 2, lines, samples))
        assert all("outside the media directory" in d.error for d in ds.drops.recent), ds.drops.recent
    assert outcomes[0][:2] == outcomes[1][:2] == (True, {2, 3})
    assert_batches_equal(outcomes[0][2], outcomes[1][2])


def test_the_source_backend_reads_media_outside_when_the_dataset_opts_out(hostile):
    ds = _dataset(hostile["jsonl"], hostile["media"], "parquet", allow_outside_media_dir=True)
    _take(ds, 8)
    assert ds.drop_counts == {}
    out = hostile["tmp"] / "out"
    convert(hostile["jsonl"], str(out), media_dir=hostile["media"], progress=False, allow_outside_media_dir=True)
    converted = _dataset(None, str(out), "webdataset", allow_outside_media_dir=True)
    source = _dataset(hostile["jsonl"], hostile["media"], "parquet", allow_outside_media_dir=True)
    assert_batches_equal(_take(source, 8), _take(converted, 8))
    assert converted.drop_counts == {}


# --------------------------------------------------------------------------- verify --source


@pytest.fixture
def converted(tmp_path: Path) -> dict:
    """Two image lines and a frame-folder video line, converted with an absolute media dir."""
    media = tmp_path / "media"
    (media / "img").mkdir(parents=True)
    (media / "clips" / "c1").mkdir(parents=True)
    (media / "img" / "a.png").write_bytes(_png((200, 10, 10)))
    (media / "img" / "b.png").write_bytes(_png((10, 200, 10)))
    for i in range(1, 4):
        Image.new("RGB", (16, 16), (i * 60, 0, 0)).save(media / "clips" / "c1" / f"f_{i}.jpg")
    video = {"video": "clips/c1/", "conversations": [{"from": "human", "value": "<video> what?"}, ANSWER]}
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text(_line("img/a.png") + _line("img/b.png") + json.dumps(video) + "\n" + _line("img/late.png"))
    out = tmp_path / "out"
    convert(str(jsonl), str(out), media_dir=str(media), samples_per_shard=2, progress=False)
    return {"jsonl": str(jsonl), "media": media, "out": str(out)}


def test_verify_source_passes_while_the_media_is_unchanged(converted):
    result = run_cli("verify", converted["out"], "--source", converted["jsonl"])
    assert result.returncode == 0 and "OK" in result.stdout, result.stdout + result.stderr
    assert "4 source rows compared" in result.stdout


def test_verify_source_names_a_replaced_or_deleted_media_file(converted):
    media = converted["media"]
    (media / "img" / "b.png").write_bytes(_png((0, 0, 255)))
    (media / "clips" / "c1" / "f_2.jpg").unlink()
    (media / "img" / "late.png").write_bytes(_png((9, 9, 9)))  # missing at conversion, there now
    assert run_cli("verify", converted["out"]).returncode == 0  # the shards themselves are intact
    result = run_cli("verify", converted["out"], "--source", converted["jsonl"])
    assert result.returncode == 1, result.stdout + result.stderr
    problems = [line for line in result.stdout.splitlines() if line.startswith("  [source]")]
    assert len(problems) == 3, result.stdout
    text = "\n".join(problems)
    assert f"media 'img/b.png' ({media}/img/b.png) changed since the conversion" in text
    assert f"media 'clips/c1/f_2.jpg' ({media}/clips/c1/f_2.jpg) is gone since the conversion" in text
    assert "media 'img/late.png'" in text and "was missing at conversion and exists now" in text
    assert "img/a.png" not in text


def test_verify_source_names_a_deleted_image(converted):
    (converted["media"] / "img" / "a.png").unlink()
    result = run_cli("verify", converted["out"], "--source", converted["jsonl"], "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert [(p["kind"], p["shard"]) for p in report["problems"]] == [("source", "shard-000000.tar")]
    assert "'img/a.png'" in report["problems"][0]["detail"] and "gone" in report["problems"][0]["detail"]


def test_a_vlm_sft_root_relabelled_by_hand_fails_verify(converted):
    """Issue 17 case 8: the schema of a JSONL root changed to a parquet kind is refused, naming the record."""
    path = Path(converted["out"]) / mf.MANIFEST_NAME
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "schema": "generic"}))
    result = run_cli("verify", converted["out"])
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[schema] the manifest's schema is 'generic', but extra holds the record of a 'vlm_sft' conversion" in (
        result.stdout
    )


@pytest.fixture
def linked(hostile: dict) -> dict:
    """The hostile media dir plus ``img/link.png``, a symbolic link out of it to the secret image,
    and a frame folder ``clip/`` whose second frame is such a link; a JSONL naming both."""
    media = Path(hostile["media"])
    secret = hostile["tmp"] / "secret.png"
    (media / "img" / "link.png").symlink_to(secret)
    (media / "clip").mkdir()
    (media / "clip" / "f_1.png").write_bytes(_png((9, 9, 9)))
    (media / "clip" / "f_2.png").symlink_to(secret)
    jsonl = hostile["tmp"] / "data" / "linked.jsonl"
    jsonl.write_text(_line("img/a.png") + _line("img/link.png") + _line("img/b.png"))
    return {**hostile, "jsonl": str(jsonl), "secret": secret.read_bytes()}


def test_a_link_out_of_the_media_dir_is_refused_like_a_name_outside_it(linked):
    out = linked["tmp"] / "out-links"
    convert(linked["jsonl"], str(out), media_dir=linked["media"], progress=False)
    (bad,) = json.loads((out / "report.json").read_text())["bad_rows"]
    assert bad["line"] == 2 and "img/link.png" in bad["reason"] and "refused" in bad["reason"]
    assert linked["secret"] not in _shard_bytes(out)
    drops = []
    for ds in (_dataset(linked["jsonl"], linked["media"], "parquet"), _dataset(None, str(out), "webdataset")):
        _take(ds, 4)
        drops.append({d.location["line"] for d in ds.drops.recent if d.reason == "media_outside"})
    assert drops == [{2}, {2}]
    opted = linked["tmp"] / "out-opted"
    convert(linked["jsonl"], str(opted), media_dir=linked["media"], progress=False, allow_outside_media_dir=True)
    assert linked["secret"] in _shard_bytes(opted)


def test_a_frame_that_links_out_of_the_media_dir_is_not_read(linked):
    from editstream.data.rows import LineRow
    from editstream.data.sources.jsonl import DirectoryMedia

    line = json.dumps({"video": "clip/", "conversations": [{"from": "human", "value": "<video>"}, ANSWER]})
    stored, refused = LineRow(line, DirectoryMedia(linked["media"])).record()
    assert refused == ["clip/"] and "clip/" not in stored["media"]
    stored, _ = LineRow(line, DirectoryMedia(linked["media"], allow_outside=True)).record()
    assert stored["media"]["clip/"]["f_2.png"] == linked["secret"]
    from editstream.format.sft import MediaOutsideError
    from editstream.loader.video import FrameSampler

    with pytest.raises(MediaOutsideError, match="symbolic link"):  # the source backend's frame read
        DirectoryMedia(linked["media"]).frames("clip/", FrameSampler(max_num_frames=2, min_num_frames=1))


def test_a_media_dir_that_is_a_file_is_refused(hostile):
    archive = hostile["tmp"] / "media.tar.gz"
    archive.write_bytes(b"not a directory")
    out = hostile["tmp"] / "out"
    result = run_cli("convert", hostile["jsonl"], str(out), "--media-dir", str(archive), "--no-progress")
    assert result.returncode == 2 and "is a file, not a directory" in result.stderr
    with pytest.raises(NotADirectoryError, match="is a file"):
        convert(hostile["jsonl"], str(out), media_dir=str(archive), progress=False)
    assert not out.exists()
