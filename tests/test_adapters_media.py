"""Adapters over metadata + media: GPT-Image-Edit-1.5M, ShareGPT-4o-Image, X2I and SEED-Data-Edit built in
their published layouts (``published_layouts``: JSON / JSONL beside or inside real split archives),
adapted to exact chains, drops located, paths outside refused, roots found, S3, and shards that
stream like the adapted parquet."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from editstream.adapters import adapt, peek, run_adapter
from editstream.data.media import ArchiveMedia
from helpers import error_lines, run_cli
from published_layouts import as_hub_cache, gpt_image_edit, seed_data_edit, sharegpt4o, x2i
from test_adapters import assert_rows_accounted, assert_same_stream, chains_of, edit_dataset, output_files, stream


def test_gpt_image_edit_reads_metadata_and_images_inside_split_parts_and_locates_its_drops(tmp_path):
    root, expected, drops = gpt_image_edit(tmp_path / "GPT-Image-Edit-1.5M")
    dst = tmp_path / "wds"
    result = run_adapter(str(root), str(dst), "gpt-image-edit", rows_per_group=2, workers=1, progress=False)
    staged = tmp_path / "wds-parquet"
    assert chains_of(staged) == expected
    summary = result["adapt"]
    assert summary["dropped_by_code"] == {"media_missing": 1, "media_outside": 1}
    assert_rows_accounted(summary)
    located = {d["code"]: (d["file"], d["row"], d.get("column")) for d in summary["drops"]}
    assert located["media_missing"] == (*drops["missing"], "output")
    assert located["media_outside"] == (*drops["outside"], "input")
    report = json.loads((staged / "adapt_report.json").read_text())
    assert [d["code"] for d in report["drops"]] == [d["code"] for d in summary["drops"]]
    kept = pq.read_table(output_files(staged)[0]).column("task").to_pylist()
    assert kept == ["add"] * 4  # the ultraedit file comes first by name; its extra columns kept
    n = len(output_files(staged))
    total = 2 * len(expected) + 1
    assert_same_stream(
        stream(edit_dataset(staged, "parquet", n), total), stream(edit_dataset(dst, "webdataset", n), total)
    )


def test_archive_indexes_are_kept_beside_the_output_so_a_rerun_does_not_rescan(tmp_path, monkeypatch):
    root, expected, _ = gpt_image_edit(tmp_path / "gie")
    dst = tmp_path / "pq"
    adapt(str(root), str(dst), "gpt-image-edit", progress=False)
    assert sorted(p.name.split(".")[0] for p in (dst / "_editstream_media").glob("*.members.json")) == [
        "hqedit",
        "ultraedit",
    ]

    def no_rescan(self):
        raise AssertionError("an archive was scanned again")

    monkeypatch.setattr(ArchiveMedia, "_scan", no_rescan)
    again = adapt(str(root), str(dst), "gpt-image-edit", progress=False)
    assert again["resumed_files"] == 3 and chains_of(dst) == expected


def test_sharegpt4o_edit_and_its_text_to_image_part(tmp_path):
    root, expected, captioned = sharegpt4o(tmp_path / "ShareGPT-4o-Image")
    done = adapt(str(root), str(tmp_path / "edit"), "sharegpt4o-edit", progress=False)
    assert chains_of(tmp_path / "edit") == expected
    assert [(d["file"], d["row"], d["code"]) for d in done["drops"]] == [
        ("text_and_image_to_image.json", 3, "bad_image_list")
    ]
    adapt(str(root), str(tmp_path / "t2i"), "sharegpt4o-t2i", progress=False)
    rows = pq.read_table(output_files(tmp_path / "t2i")[0]).to_pylist()
    assert [(r["image"], r["captions"]) for r in rows] == captioned
    info = json.loads((tmp_path / "t2i" / "parquet_info.json").read_text())
    assert list(info.values()) == [{"num_row_groups": 1, "num_rows": 3}]


def test_x2i_jsonl_with_images_in_lettered_split_parts(tmp_path):
    root, expected = x2i(tmp_path / "X2I-mm-instruction")
    dst = tmp_path / "wds"
    run_adapter(str(root), str(dst), "x2i", rows_per_group=3, workers=1, progress=False)
    assert chains_of(tmp_path / "wds-parquet") == expected  # OmniGen's image placeholder cut out
    n = len(output_files(tmp_path / "wds-parquet"))
    total = 2 * len(expected) + 1
    a, b = edit_dataset(tmp_path / "wds-parquet", "parquet", n), edit_dataset(dst, "webdataset", n)
    assert_same_stream(stream(a, total), stream(b, total))


def test_seed_data_edit_makes_one_chain_per_conversation_with_its_turns_in_order(tmp_path):
    root, expected = seed_data_edit(tmp_path / "SEED-Data-Edit-Part2-3")
    dst = tmp_path / "wds"
    result = run_adapter(str(root), str(dst), "seed-data-edit", rows_per_group=2, workers=1, progress=False)
    assert chains_of(tmp_path / "wds-parquet") == expected
    assert [len(images) for images, _ in expected] == [4, 2, 6, 3, 5]
    assert result["adapt"]["dropped"] == 0 and result["convert"]["num_samples"] == 5
    n = len(output_files(tmp_path / "wds-parquet"))
    a, b = edit_dataset(tmp_path / "wds-parquet", "parquet", n), edit_dataset(dst, "webdataset", n)
    assert_same_stream(stream(a, 11), stream(b, 11))


def test_a_member_the_metadata_names_but_the_archive_lacks_is_a_located_drop(tmp_path):
    root, expected = seed_data_edit(tmp_path / "seed")
    notes = root / "multi_turn_editing" / "annotations" / "split_0002.jsonl"
    lines = notes.read_text().splitlines()
    broken = json.loads(lines[1])
    broken["edit_image_1"] = "20240407_586P_2211turns/Data/4/gone.jpg"
    notes.write_text("\n".join([lines[0], json.dumps(broken)]) + "\n")
    done = adapt(str(root), str(tmp_path / "out"), "seed-data-edit", progress=False)
    assert chains_of(tmp_path / "out") == expected[:4]
    (drop,) = done["drops"]
    where = ("multi_turn_editing/annotations/split_0002.jsonl", 0, 1, "edit_image_1", "media_missing")
    assert (drop["file"], drop["row_group"], drop["row"], drop["column"], drop["code"]) == where
    assert "gone.jpg" in drop["reason"]


def test_a_path_climbing_out_of_the_media_is_refused_even_when_the_file_exists(tmp_path):
    root, _ = x2i(tmp_path / "x2i")
    (tmp_path / "secret.png").write_bytes(b"not for the shards")
    notes = root / "pix2pix.jsonl"
    lines = notes.read_text().splitlines()
    first = json.loads(lines[0])
    first["output_image"] = "../secret.png"
    notes.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    done = adapt(str(root), str(tmp_path / "out"), "x2i", progress=False)
    assert [(d["file"], d["row"], d["code"]) for d in done["drops"]] == [("pix2pix.jsonl", 0, "media_outside")]
    assert b"not for the shards" not in b"".join(p.read_bytes() for p in output_files(tmp_path / "out"))


def test_convert_and_preview_accept_a_root_a_local_dir_and_a_cache_snapshot(tmp_path):
    root, expected = seed_data_edit(tmp_path / "seed")
    local_dir = tmp_path / "local-dir"
    shutil.copytree(root, local_dir)
    hidden = local_dir / ".cache" / "huggingface" / "download" / "multi_turn_editing" / "annotations"
    hidden.mkdir(parents=True)  # what `download --local-dir` leaves: a .metadata file per file
    (hidden / "split_0001.jsonl.metadata").write_text("3f2c1e0\netag\n1700000000.0\n")
    (hidden / "split_0009.jsonl").write_text("{not a line of the dataset\n")
    cache = as_hub_cache(root, tmp_path / "datasets--AILab-CVC--SEED-Data-Edit-Part2-3")
    for source in (root, local_dir, cache):
        dst = tmp_path / f"{source.name}-out"
        done = run_cli("convert", str(source), str(dst), "--from", "seed-data-edit", "--to", "parquet")
        assert done.returncode == 0, done.stderr
        assert "metadata multi_turn_editing/annotations/split_0001.jsonl" in done.stderr
        assert "media multi_turn_editing/images/multi_turn.tar.gz" in done.stderr
        assert chains_of(dst) == expected
    assert "is a Hub cache folder; reading its snapshot" in done.stderr
    page = tmp_path / "seed.html"
    shown = run_cli("preview", str(cache), "--from", "seed-data-edit", "-o", str(page), "-n", "3")
    assert shown.returncode == 0 and "(3 records)" in shown.stdout, shown.stderr
    assert "conversation 2 turn 5" in page.read_text()


def test_a_folder_without_the_files_names_what_it_looked_for_and_what_is_close(tmp_path):
    root, _ = x2i(tmp_path / "x2i")
    failed = run_cli("convert", str(root), str(tmp_path / "out"), "--from", "seed-data-edit", "--to", "parquet")
    message = " ".join(error_lines(failed))
    assert failed.returncode != 0 and "holds none of the files adapter 'seed-data-edit' reads" in message
    assert "multi_turn_editing/annotations/*.jsonl" in message and "pix2pix.jsonl" in message


def test_peek_reads_the_first_chains_in_place_also_from_a_cache_folder(tmp_path):
    root, expected = x2i(tmp_path / "x2i")
    hidden = root / ".cache" / "huggingface" / "download"
    hidden.mkdir(parents=True)
    (hidden / "a.jsonl").write_text("{not a line of the dataset\n")  # hidden: not metadata, though '*.jsonl'
    cache = as_hub_cache(root, tmp_path / "datasets--yzwang--X2I-mm-instruction")
    shown = list(peek(str(cache), "x2i", 3))
    assert [title for title, _ in shown] == [f"pix2pix.jsonl rg 0 row {k}" for k in range(3)]
    assert [tuple(row["image_list"]) for _, row in shown] == [images for images, _ in expected[:3]]


@pytest.mark.s3
def test_metadata_and_split_archive_parts_on_s3(s3_bucket, tmp_path):
    import fsspec

    root, expected = x2i(tmp_path / "x2i")
    fs = fsspec.filesystem("s3", **s3_bucket.storage_options)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        fs.put(str(path), f"{s3_bucket.url}/x2i/{path.relative_to(root)}")
    so = s3_bucket.storage_options
    done = adapt(f"{s3_bucket.url}/x2i", f"{s3_bucket.url}/out", "x2i", storage_options=so, progress=False)
    assert done["chains_out"] == len(expected) and done["dropped"] == 0
    local = tmp_path / "out"
    fs.get(f"{s3_bucket.url}/out/", str(local), recursive=True)
    assert chains_of(local) == expected


def test_a_mapping_file_reads_parquet_and_jsonl_metadata_with_images_in_a_zip(tmp_path):
    import zipfile

    import pyarrow as pa

    from hub_shapes import png

    root = tmp_path / "mine"
    (root / "meta").mkdir(parents=True)
    with zipfile.ZipFile(root / "pics.zip", "w") as zf:
        for k in range(6):
            zf.writestr(f"pics/{k}.png", png(900 + k))
    rows = [{"src": f"pics/{k}.png", "dst": f"pics/{k + 1}.png", "text": f"step {k}"} for k in (0, 2)]
    pq.write_table(pa.Table.from_pylist(rows), root / "meta" / "a.parquet")
    lines = [json.dumps({"src": "pics/4.png", "dst": "pics/5.png", "text": "step 4"}), "{not json"]
    (root / "meta" / "b.jsonl").write_text("\n".join([*lines, json.dumps(rows[0])]) + "\n")
    mapping = tmp_path / "m.yaml"
    mapping.write_text(
        "kind: unified_edit\nmetadata: [meta/*.parquet, meta/*.jsonl]\nmedia: [pics.zip]\n"
        "images: [src, dst]\ninstructions: [text]\n"
    )
    done = adapt(str(root), str(tmp_path / "out"), mapping, progress=False)
    step = {k: ((png(900 + k), png(901 + k)), ((f"step {k}",),)) for k in (0, 2, 4)}
    assert chains_of(tmp_path / "out") == [step[0], step[2], step[4], step[0]]
    assert [(d["file"], d["row"], d["code"]) for d in done["drops"]] == [("meta/b.jsonl", 1, "bad_json")]
    assert_rows_accounted(done)


def test_media_dir_may_be_an_archive_for_jsonl_metadata(tmp_path):
    from hub_shapes import png
    from published_layouts import tar_bytes

    root = tmp_path / "mine"
    root.mkdir()
    (tmp_path / "images.tar.gz").write_bytes(tar_bytes({f"./img/{k}.png": png(950 + k) for k in range(3)}))
    lines = [{"a": "img/0.png", "b": "img/1.png", "t": "one"}, {"a": "img/1.png", "b": "img/9.png", "t": "two"}]
    (root / "edits.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    mapping = tmp_path / "m.yaml"
    mapping.write_text("kind: unified_edit\nmetadata: ['*.jsonl']\nimages: [a, b]\ninstructions: [t]\n")
    media = str(tmp_path / "images.tar.gz")
    done = adapt(str(root), str(tmp_path / "out"), mapping, media_dir=media, progress=False)
    assert chains_of(tmp_path / "out") == [((png(950), png(951)), (("one",),))]
    assert [(d["file"], d["row"], d["column"], d["code"]) for d in done["drops"]] == [
        ("edits.jsonl", 1, "b", "media_missing")
    ]
