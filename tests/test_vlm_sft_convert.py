"""Converting a vlm_sft JSONL: standard shards, crash-safe resume, report.json, verify, the CLI."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import webdataset as wds
from PIL import Image

from editstream import ByteTokenizer, FrameSampler, ImageTransform, SftJSONLIterableDataset, convert
from editstream.conversion.records import PROGRESS_DIR
from editstream.conversion.verify import verify
from editstream.format import manifest as mf
from editstream.format.sft import SftInfo
from editstream.format.tarreader import iter_samples
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import assert_batches_equal, first, run_cli

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm_src")
    return write_synthetic_vlm_dataset(str(root / "set"), num_lines=30, seed=8, max_side=48)


def take(ds, n, seed=0):
    """The first ``n`` samples with the global generators seeded (frame choices draw from them)."""
    random.seed(seed)
    np.random.seed(seed)
    return first(iter(ds), n)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def loader(jsonl, root, backend, **kw):
    return SftJSONLIterableDataset(
        "vlm_sft",
        ImageTransform(max_image_size=48, min_image_size=32, image_stride=16),
        ByteTokenizer(),
        FrameSampler(max_num_frames=6, min_num_frames=3),
        [jsonl] if jsonl else None,
        [root],
        [1000],
        num_workers=0,
        backend=backend,
        **kw,
    )


def test_shards_are_standard_tar_and_webdataset_and_keep_every_line_verbatim(synth, tmp_path):
    out = tmp_path / "out"
    summary = convert(synth["jsonl"], str(out), media_dir=synth["media_dir"], samples_per_shard=8, progress=False)
    assert (summary["schema"], summary["num_shards"], summary["num_samples"]) == ("vlm_sft", 4, 30)
    m = mf.Manifest.read(str(out))
    info = SftInfo.from_manifest(m, str(out))
    assert info.media_dir == synth["media_dir"] and info.num_lines == 30
    assert (out / "lines.jsonl").read_bytes() == Path(synth["jsonl"]).read_bytes()
    with open(synth["jsonl"]) as f:
        lines = f.readlines()
    urls = [str(out / s.path) for s in m.shards]
    seen = []
    for sample in wds.WebDataset(urls, shardshuffle=False).decode("pil"):
        doc = sample["json"]
        seen.append(doc["line"])
        for name, ref in doc["media"].items():
            if isinstance(ref, dict) and "$bytes" in ref:
                value = sample[ref["$bytes"]]
                assert isinstance(value, Image.Image) or ref["$bytes"].endswith((".mp4", ".bin"))
            elif isinstance(ref, dict):  # a frame folder: its entries, in listing order
                assert name.endswith("/") and list(ref) == os.listdir(os.path.join(synth["media_dir"], name))
    assert seen == lines
    if synth["video"]:
        assert any(k.endswith(".mp4") for s in m.shards for k in _members(out / s.path))
    if shutil.which("tar") is None:
        pytest.skip("GNU tar not installed")
    for shard in m.shards:
        listed = subprocess.run(["tar", "-tf", str(out / shard.path)], check=True, capture_output=True, text=True)
        assert listed.stdout.split() == _members(out / shard.path)


def _members(path):
    with open(path, "rb") as f:
        return [f"{key}.{suffix}" for key, _, members in iter_samples(f) for suffix in members]


def test_report_lists_missing_media_and_bad_lines_and_verify_passes(synth, tmp_path):
    out = tmp_path / "out"
    convert(synth["jsonl"], str(out), media_dir=synth["media_dir"], progress=False)
    report = json.loads((out / "report.json").read_text())
    by_line = {b["line"]: b for b in report["bad_rows"]}
    for line, kind in synth["bad_lines"].items():
        if kind in ("missing_image", "bad_json", "blank", "undecodable_image"):
            assert by_line[line]["file"] == "data.jsonl" and not by_line[line]["dropped"], kind
    missing = [b for b in report["bad_rows"] if b.get("missing")]
    assert missing and all("missing media" in b["reason"] for b in missing)
    assert SftInfo.from_manifest(mf.Manifest.read(str(out)), str(out)).missing_media == len(missing)
    assert verify(str(out), source=synth["jsonl"]).ok
    (out / "lines.jsonl").write_bytes((out / "lines.jsonl").read_bytes() + b"\n")
    problems = verify(str(out)).problems
    assert [p.kind for p in problems] == ["lines"]


def test_rerun_keeps_finished_shards_and_a_crash_resumes_byte_identically(synth, tmp_path, monkeypatch):
    reference = tmp_path / "reference"
    convert(synth["jsonl"], str(reference), media_dir=synth["media_dir"], samples_per_shard=5, progress=False)
    again = convert(synth["jsonl"], str(reference), media_dir=synth["media_dir"], samples_per_shard=5, progress=False)
    assert again["already_done"] and again["converted_shards"] == 0

    import editstream.conversion.shard as conv

    real, calls = conv.encode_members, {"n": 0}

    def failing(row, key, schema_types=None):
        calls["n"] += 1
        if calls["n"] == 13:  # third line of the third shard
            raise KeyboardInterrupt
        return real(row, key, schema_types)

    out = tmp_path / "out"
    monkeypatch.setattr(conv, "encode_members", failing)
    with pytest.raises(KeyboardInterrupt):
        convert(synth["jsonl"], str(out), media_dir=synth["media_dir"], samples_per_shard=5, workers=1, progress=False)
    assert not (out / "manifest.json").exists() and (out / PROGRESS_DIR).is_dir()
    monkeypatch.setattr(conv, "encode_members", real)
    result = convert(synth["jsonl"], str(out), media_dir=synth["media_dir"], samples_per_shard=5, progress=False)
    assert (result["skipped_shards"], result["converted_shards"]) == (2, 4)
    assert tree(out) == tree(reference)


def test_a_changed_jsonl_needs_overwrite(synth, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(Path(synth["jsonl"]).parent, src)
    out = tmp_path / "out"
    convert(str(src / "data.jsonl"), str(out), media_dir=str(src / "media"), progress=False)
    with open(src / "data.jsonl", "a") as f:
        f.write('\n{"conversations": [{"from": "gpt", "value": "new"}]}\n')
    with pytest.raises(FileExistsError, match="overwrite"):
        convert(str(src / "data.jsonl"), str(out), media_dir=str(src / "media"), progress=False)
    result = convert(str(src / "data.jsonl"), str(out), media_dir=str(src / "media"), overwrite=True, progress=False)
    assert result["num_samples"] == 31 and verify(str(out)).ok  # the old last line gained its newline


def test_shard_layout_does_not_change_the_stream(synth, tmp_path):
    by_size = tmp_path / "by_size"
    result = convert(synth["jsonl"], str(by_size), media_dir=synth["media_dir"], shard_size=20_000, progress=False)
    m = mf.Manifest.read(str(by_size))
    assert result["num_shards"] > 1 and [s.rows[0].start for s in m.shards] == sorted(s.rows[0].start for s in m.shards)
    assert sum(s.num_samples for s in m.shards) == 30
    by_count = tmp_path / "by_count"
    convert(synth["jsonl"], str(by_count), media_dir=synth["media_dir"], samples_per_shard=3, progress=False)
    results = []
    for ds in (
        loader(synth["jsonl"], synth["media_dir"], "parquet"),
        loader(None, str(by_size), "webdataset", prefetch_samples=2),
        loader(None, str(by_count), "webdataset", prefetch_bytes=1),  # one sample in flight at a time
    ):
        ds.set_epoch(4)
        results.append(take(ds, 20, seed=1))
    assert_batches_equal(results[0], results[1])
    assert_batches_equal(results[0], results[2])


class OwnSampler:
    """A user's own frame sampler, not a FrameSampler: it answers the calls named in ``methods`` by delegation."""

    def __init__(self, *methods: str) -> None:
        inner = FrameSampler(max_num_frames=6, min_num_frames=3)
        for name in methods:
            setattr(self, name, getattr(inner, name))


def test_a_users_own_sampler_reads_converted_frame_folders_or_is_refused_when_built(synth, tmp_path):
    out = tmp_path / "out"
    convert(synth["jsonl"], str(out), media_dir=synth["media_dir"], samples_per_shard=10, progress=False)
    assert re.search(r'"video": *"[^"]*/"', Path(synth["jsonl"]).read_text())  # the set has frame folders to read
    own = OwnSampler("sample_folder_bytes", "sample_video")
    assert_batches_equal(take(loader(None, str(out), "webdataset"), 20), take(loader_with(own, out), 20))
    with pytest.raises(TypeError, match=r"'vlm_sft'.*sample_folder_bytes\(\).*OwnSampler"):
        loader_with(OwnSampler("sample_folder_frames", "sample_video"), out)


def loader_with(sampler, root):
    return SftJSONLIterableDataset(
        "vlm_sft",
        ImageTransform(max_image_size=48, min_image_size=32, image_stride=16),
        ByteTokenizer(),
        sampler,
        None,
        [str(root)],
        [1000],
        num_workers=0,
        backend="webdataset",
    )


def test_the_media_dir_string_is_recorded_as_given(synth, tmp_path, monkeypatch):
    src = tmp_path / "src"
    shutil.copytree(Path(synth["jsonl"]).parent, src)
    monkeypatch.chdir(src)
    convert("data.jsonl", str(tmp_path / "out"), media_dir="media", samples_per_shard=10, progress=False)
    info = SftInfo.from_manifest(mf.Manifest.read(str(tmp_path / "out")), "out")
    assert info.media_dir == "media"
    source = loader("data.jsonl", "media", "parquet")
    converted = loader(None, str(tmp_path / "out"), "webdataset")
    assert source.data_paths_per_rank == converted.data_paths_per_rank
    assert_batches_equal(take(source, 12), take(converted, 12))


def test_missing_folders_subdirectories_and_directories_named_as_images_drop_alike(tmp_path):
    media = tmp_path / "media"
    (media / "clips" / "withdir" / "sub").mkdir(parents=True)
    (media / "clips" / "ok").mkdir(parents=True)
    for i in range(1, 6):
        for clip in ("withdir", "ok"):
            Image.new("RGB", (16, 16), (i * 40, 0, 0)).save(media / "clips" / clip / f"f_{i}.jpg")
    (media / "adir").mkdir()
    answer = {"from": "gpt", "value": "yes"}
    rows = [
        {"video": "clips/missing/", "conversations": [{"from": "human", "value": "<video>"}, answer]},
        {"video": "clips/withdir/", "conversations": [{"from": "human", "value": "<video>"}, answer]},
        {"image": "adir", "conversations": [{"from": "human", "value": "<image>"}, answer]},
        {"image": "clips/ok/", "conversations": [{"from": "human", "value": "<image>"}, answer]},
        {"video": "clips/ok/", "conversations": [{"from": "human", "value": "<video> what?"}, answer]},
    ]
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    convert(str(jsonl), str(tmp_path / "out"), media_dir=str(media), progress=False)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {b["line"]: b["missing"] for b in report["bad_rows"]} == {
        1: ["clips/missing/"],
        2: ["clips/withdir/sub"],
        3: ["adir"],
        4: ["clips/ok/"],
    }
    outcomes = []
    for ds in (loader(str(jsonl), str(media), "parquet"), loader(None, str(tmp_path / "out"), "webdataset")):
        samples = take(ds, 2)  # one good row per pass: the second sample comes after a whole pass
        outcomes.append((set(ds.drop_counts), {d.location["line"] for d in ds.drops.recent}, samples))
    assert outcomes[0][:2] == outcomes[1][:2] == ({"jsonl_parse"}, {1, 2, 3, 4})
    assert_batches_equal(outcomes[0][2], outcomes[1][2])


def test_bad_arguments_are_clear(synth, tmp_path):
    with pytest.raises(ValueError, match="media_dir"):
        convert(synth["jsonl"], str(tmp_path / "a"), progress=False)
    with pytest.raises(ValueError, match="vlm_sft"):
        convert(synth["jsonl"], str(tmp_path / "b"), schema="t2i", media_dir="m", progress=False)
    with pytest.raises(ValueError, match="drop_bad_rows"):
        convert(synth["jsonl"], str(tmp_path / "c"), media_dir="m", drop_bad_rows=True, progress=False)
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        convert(str(tmp_path / "nope.jsonl"), str(tmp_path / "d"), media_dir="m", progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "d").exists()


def test_the_cli_converts_verifies_and_the_loader_reads_it(synth, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = tmp_path / "cli_out"
    cli = [sys.executable, "-m", "editstream.cli"]
    cmd = [*cli, "convert", synth["jsonl"], str(out), "--media-dir", synth["media_dir"], "--samples-per-shard", "12"]
    run = subprocess.run([*cmd, "--no-progress"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert (summary["schema"], summary["num_samples"], summary["num_shards"]) == ("vlm_sft", 30, 3)
    assert "bad rows kept verbatim" in run.stderr
    check = subprocess.run(
        [sys.executable, "-m", "editstream.cli", "verify", str(out), "--source", synth["jsonl"]],
        capture_output=True,
        text=True,
        env=env,
    )
    assert check.returncode == 0 and "OK" in check.stdout, check.stdout + check.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "editstream.cli", "convert", synth["jsonl"], str(tmp_path / "x"), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode != 0 and "--media-dir" in bad.stderr and "Traceback" not in bad.stderr
    source = loader(synth["jsonl"], synth["media_dir"], "parquet")
    assert_batches_equal(take(source, 10), take(loader(None, str(out), "webdataset"), 10))


def test_a_vlm_sft_root_is_refused_by_the_row_group_datasets(synth, tmp_path):
    from editstream import UnifiedEditIterableDataset

    out = tmp_path / "out"
    convert(synth["jsonl"], str(out), media_dir=synth["media_dir"], progress=False)
    transform = ImageTransform(max_image_size=48, min_image_size=32, image_stride=16)
    ds = UnifiedEditIterableDataset(
        "unified_edit", transform, ByteTokenizer(), transform, [str(out)], [1], None, backend="webdataset"
    )
    with pytest.raises(mf.ManifestError, match="vlm_sft conversion"):
        ds.set_epoch(0)


def test_the_cli_refuses_a_table_kind_for_a_jsonl_source_before_writing(synth, tmp_path):
    """Whether a kind reads a JSONL file is the kind's data shape's answer, not a test of the file's suffix."""
    out = tmp_path / "out"
    run = run_cli("convert", synth["jsonl"], str(out), "--schema", "unified_edit", "--media-dir", synth["media_dir"])
    assert run.returncode == 2, run.stderr
    assert "is a JSONL file" in run.stderr and "--schema unified_edit needs a parquet directory" in run.stderr
    assert not out.exists()


def test_lines_that_are_not_conversation_records_are_bad_rows_at_conversion(tmp_path):
    """Metadata of another dataset given as vlm_sft (no conversations) is reported line by line when
    converted, instead of converting cleanly and being dropped, every line, in training."""
    media = tmp_path / "media"
    media.mkdir()
    lines = [
        {"image": "a.png", "caption": "a cat"},  # another dataset's metadata
        {"image": "a.png", "conversations": [{"from": "human", "value": "<image> hi"}]},  # nothing to learn
        {"image": "a.png", "conversations": ["hi"]},
        [1, 2],
    ]
    jsonl = tmp_path / "meta.jsonl"
    jsonl.write_text("".join(json.dumps(item) + "\n" for item in lines))
    result = run_cli("convert", str(jsonl), str(tmp_path / "out"), "--media-dir", str(media), "--no-progress")
    assert result.returncode == 0, result.stderr
    assert "4 bad rows kept verbatim" in result.stderr
    reasons = [b["reason"] for b in json.loads((tmp_path / "out" / "report.json").read_text())["bad_rows"]]
    assert reasons == [
        "line has no conversations list (a vlm_sft line is {image or video, conversations})",
        "no gpt turn: nothing to learn from (the loader drops the line as no_loss_labels)",
        "conversation turn 0 is not a {from, value} pair of texts",
        "line is a JSON list, not an object",
    ]
