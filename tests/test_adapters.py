"""Source adapters: the six public edit datasets, built here in their published Hub schemas and
layouts (``hub_shapes``), adapted to BAGEL parquet and shards; mappings, filters, bad rows,
resume, determinism.
"""

from __future__ import annotations

import io
import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset
from editstream.adapters import (
    FilterError,
    MappingError,
    adapt,
    builtin_names,
    builtin_path,
    load_mapping,
    parse_filter,
    run_adapter,
)
from helpers import VAE, VIT
from hub_shapes import (
    DATASETS,
    IMAGE,
    OMNI_TASKS,
    Chain,
    anyedit,
    hf_image,
    hqedit,
    instructpix2pix,
    magicbrush,
    omniedit,
    png,
    ultraedit,
)


# --------------------------------------------------------------------------- reading the output
def output_files(root: Path) -> list[Path]:
    return sorted(root.glob("*.parquet"))


def chains_of(root: Path) -> list[Chain]:
    found = []
    for path in output_files(root):
        for row in pq.read_table(path).to_pylist():
            found.append((tuple(row["image_list"]), tuple(tuple(p) for p in row["instruction_list"])))
    return found


def assert_bagel_parquet(root: Path) -> None:
    """BAGEL's column types, and a parquet_info.json keyed by DST joined with each file name."""
    files = output_files(root)
    assert files
    info = json.loads((root / "parquet_info.json").read_text())
    assert set(info) == {os.path.join(os.path.abspath(root), f.name) for f in files}
    for f in files:
        meta = pq.ParquetFile(f).metadata
        assert info[os.path.join(os.path.abspath(root), f.name)] == {
            "num_row_groups": meta.num_row_groups,
            "num_rows": meta.num_rows,
        }
        schema = pq.read_schema(f)
        assert schema.field("image_list").type == pa.list_(pa.binary())
        assert schema.field("instruction_list").type == pa.list_(pa.list_(pa.string()))


def edit_dataset(root: Path, backend: str, num_used: int) -> UnifiedEditIterableDataset:
    ds = UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(**VAE),
        ByteTokenizer(),
        ImageTransform(**VIT),
        [str(root)],
        [num_used],
        None,
        local_rank=0,
        world_size=1,
        num_workers=0,
        backend=backend,
    )
    ds.set_epoch(42)
    return ds


def stream(ds: UnifiedEditIterableDataset, n: int) -> list[dict[str, Any]]:
    random.seed(0)
    it = iter(ds)
    return [next(it) for _ in range(n)]


def assert_same_stream(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x["data_indexes"] == y["data_indexes"]
        assert x["sequence_plan"] == y["sequence_plan"]
        assert x["text_ids_list"] == y["text_ids_list"]
        assert x["num_tokens"] == y["num_tokens"]
        assert len(x["image_tensor_list"]) == len(y["image_tensor_list"])
        for s, t in zip(x["image_tensor_list"], y["image_tensor_list"]):
            assert s.dtype == t.dtype == torch.float32 and torch.equal(s, t)


def assert_rows_accounted(summary: dict[str, Any]) -> None:
    """Every source row is in a chain, filtered out, or dropped with a record: none vanish silently."""
    assert summary["rows_in"] == summary["rows_used"] + summary["filtered_rows"] + summary["dropped_rows"]


# --------------------------------------------------------------------------- the built-in adapters
def test_the_six_datasets_have_built_in_adapters():
    media_layouts = {
        "gpt-image-edit",
        "sharegpt4o-edit",
        "sharegpt4o-t2i",
        "x2i",
        "seed-data-edit",
    }  # see test_adapters_media
    assert set(DATASETS) | {"hqedit-inverse"} | media_layouts == set(builtin_names())


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_builtin_adapter_yields_exact_chains_and_shards_stream_like_the_parquet(tmp_path, name):
    src, expected = DATASETS[name](tmp_path / "hub")
    dst = tmp_path / "wds"
    result = run_adapter(str(src), str(dst), name, rows_per_group=3, workers=1, progress=False)
    staged = tmp_path / "wds-parquet"
    assert_bagel_parquet(staged)
    assert Counter(chains_of(staged)) == Counter(expected)
    summary = result["adapt"]
    assert summary["chains_out"] == len(expected) and summary["dropped"] == 0
    assert summary["rows_in"] == sum(len(texts) for _, texts in expected)
    assert_rows_accounted(summary)
    assert result["convert"] is not None and (dst / "manifest.json").exists()
    n = len(output_files(staged))
    total = 2 * len(expected) + 3  # past the end, into the next pass
    assert_same_stream(
        stream(edit_dataset(staged, "parquet", n), total), stream(edit_dataset(dst, "webdataset", n), total)
    )


def test_magicbrush_keeps_one_img_id_and_its_turns_in_order(tmp_path):
    src, expected = magicbrush(tmp_path / "hub")
    adapt(str(src), str(tmp_path / "out"), "magicbrush", progress=False)
    rows = [r for f in output_files(tmp_path / "out") for r in pq.read_table(f).to_pylist()]
    assert len(rows) == len(expected)
    for row in rows:
        assert row["turn_index"] == list(range(1, len(row["turn_index"]) + 1))
        assert len(row["image_list"]) == len(row["turn_index"]) + 1
        assert isinstance(row["img_id"], str)
        assert all(p[0].startswith(f"session {(int(row['img_id']) - 100000) // 17} ") for p in row["instruction_list"])
    schema = pq.read_schema(output_files(tmp_path / "out")[0])
    assert schema.field("turn_index").type == pa.list_(pa.int32())


def test_hqedit_inverse_direction_is_an_option(tmp_path):
    src, expected = hqedit(tmp_path / "hub")
    adapt(str(src), str(tmp_path / "inv"), "hqedit-inverse", progress=False)
    inverse = Counter(((b, a), ((t[0][0].replace("blue", "red"),),)) for (a, b), t in expected)
    assert Counter(chains_of(tmp_path / "inv")) == inverse


def test_extras_keep_their_source_types(tmp_path):
    src, _ = ultraedit(tmp_path / "hub")
    adapt(str(src), str(tmp_path / "out"), "ultraedit", progress=False)
    schema = pq.read_schema(output_files(tmp_path / "out")[0])
    assert schema.names[:2] == ["image_list", "instruction_list"]
    assert schema.field("idx").type == pa.int64() and schema.field("ssim").type == pa.float64()
    assert [f.name for f in output_files(tmp_path / "out")] == [
        f"FreeForm_0-{k:05d}-of-00003.parquet" for k in range(3)
    ]


# --------------------------------------------------------------------------- mappings
def test_a_mapping_file_reproduces_a_builtin_adapter_byte_for_byte(tmp_path):
    src, _ = omniedit(tmp_path / "hub")
    adapt(str(src), str(tmp_path / "builtin"), "omniedit", rows_per_group=2, progress=False)
    mine = tmp_path / "my_omniedit.yaml"
    mine.write_text(
        "name: my-omniedit\n"
        "kind: unified_edit\n"
        "description: written by hand\n"
        "images: [src_img, edited_img]\n"
        "instructions:\n"
        "  - {column: edited_prompt_list, format: list}\n"
        "keep: [omni_edit_id, task, sc_score_1, sc_score_2, pq_score, o_score]\n"
    )
    as_json = tmp_path / "my_omniedit.json"
    as_json.write_text(json.dumps(load_mapping(builtin_path("omniedit")).to_dict()))
    for i, mapping in enumerate([mine, as_json]):
        out = tmp_path / f"mine{i}"
        adapt(str(src), str(out), str(mapping), rows_per_group=2, progress=False)
        assert [f.name for f in output_files(out)] == [f.name for f in output_files(tmp_path / "builtin")]
        for a, b in zip(output_files(out), output_files(tmp_path / "builtin")):
            assert a.read_bytes() == b.read_bytes()


def test_a_mapping_reads_instructions_from_a_json_string_and_a_path_column(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    rows, expected = [], []
    for i in range(5):
        a, b = png(4000 + i), png(4100 + i)
        (media / f"in{i}.png").write_bytes(a)
        prompts = [f"edit {i}", f"also edit {i}"] if i % 2 else f"only edit {i}"
        rows.append({"before": f"in{i}.png", "after": b, "prompt": json.dumps(prompts)})
        expected.append(((a, b), (tuple(prompts) if i % 2 else (prompts,),)))
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), src / "part.parquet", row_group_size=2)
    mapping = tmp_path / "m.yaml"
    mapping.write_text("kind: unified_edit\nimages: [before, after]\ninstructions: [{column: prompt, format: json}]\n")
    summary = adapt(str(src), str(tmp_path / "out"), str(mapping), media_dir=str(media), progress=False)
    assert summary["adapter"] == "m" and summary["chains_out"] == 5
    assert Counter(chains_of(tmp_path / "out")) == Counter(expected)


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("kind: unified_edit\nimages: [a]\ninstructions: [t]\n", "images", "('a',)"),
        ("kind: unified_edit\nimages: [a, b, c]\ninstructions: [t]\n", "instructions", "['t']"),
        ("kind: unified_edit\nimages: [a, b]\ninstructions: [{column: t, format: csv}]\n", "instructions", "'csv'"),
        ("kind: unified_edit\nimages: [a, b]\ninstructions: [t]\norder_by: n\n", "order_by", "'n'"),
        ("kind: unified_edit\nimages: [a, b]\ninstructions: [t]\nkeep: [image_list]\n", "keep", "['image_list']"),
        ("kind: unified_edit\nimages: [a, b]\ninstructions: [t]\nwhere: 'x >>= 1'\n", "where", "'x >>= 1'"),
        ("kind: no_such_kind\nimages: [a, b]\ninstructions: [t]\n", "kind", "'no_such_kind'"),
        ("kind: unified_edit\nimages: [a, b]\ninstructions: [t]\ncolumns: [x]\n", "columns", "['x']"),
    ],
)
def test_mapping_errors_name_the_file_the_key_and_the_value(tmp_path, text, key, value):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(MappingError) as err:
        load_mapping(path)
    message = str(err.value)
    assert message.startswith(f"{path}: key {key!r}") and value in message


def test_a_mapping_naming_a_column_the_source_lacks_fails_before_writing(tmp_path):
    src, _ = hqedit(tmp_path / "hub")
    path = tmp_path / "m.yaml"
    path.write_text("kind: unified_edit\nimages: [input_image, output_img]\ninstructions: [edit]\n")
    with pytest.raises(MappingError, match=r"has no column\(s\) \['output_img'\]"):
        adapt(str(src), str(tmp_path / "out"), str(path), progress=False)
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- bad rows
def test_bad_rows_are_dropped_and_counted_with_their_location(tmp_path):
    schema = pa.schema([("original_image", IMAGE), ("edit_prompt", pa.string()), ("edited_image", IMAGE)])
    media = tmp_path / "media"
    media.mkdir()
    (media / "on-disk.png").write_bytes(png(7))
    rows = [
        {"original_image": hf_image(png(1)), "edit_prompt": "ok", "edited_image": hf_image(png(2))},
        {"original_image": hf_image(None, None), "edit_prompt": "no bytes, no path", "edited_image": hf_image(png(3))},
        {
            "original_image": hf_image(None, "on-disk.png"),
            "edit_prompt": "from media",
            "edited_image": hf_image(png(4)),
        },
        {"original_image": hf_image(png(5)), "edit_prompt": "missing", "edited_image": hf_image(None, "gone.png")},
        {"original_image": hf_image(png(6)), "edit_prompt": None, "edited_image": hf_image(png(8))},
        {"original_image": hf_image(b"not an image"), "edit_prompt": "garbage", "edited_image": hf_image(png(9))},
        {"original_image": hf_image(None, "../escape.png"), "edit_prompt": "escape", "edited_image": hf_image(png(9))},
    ]
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), src / "train-00000-of-00001.parquet", row_group_size=3)
    mapping = tmp_path / "m.yaml"
    mapping.write_text("kind: unified_edit\nimages: [original_image, edited_image]\ninstructions: [edit_prompt]\n")
    summary = adapt(str(src), str(tmp_path / "out"), str(mapping), media_dir=str(media), progress=False)
    assert Counter(chains_of(tmp_path / "out")) == Counter(
        [((png(1), png(2)), (("ok",),)), ((png(7), png(4)), (("from media",),))]
    )
    where = {(d["row_group"], d["row"]): d["code"] for d in summary["drops"]}
    assert where == {
        (0, 1): "null_image",
        (1, 0): "media_missing",
        (1, 1): "bad_instruction",
        (1, 2): "kind_check",
        (2, 0): "media_outside",
    }
    assert all(d["file"] == "train-00000-of-00001.parquet" for d in summary["drops"])
    assert summary["dropped"] == 5 and summary["dropped_by_code"]["null_image"] == 1
    assert_rows_accounted(summary)
    report = json.loads((tmp_path / "out" / "adapt_report.json").read_text())
    assert report["drops"] == summary["drops"] and report["rows_in"] == 7 and report["chains_out"] == 2


def test_without_a_media_dir_a_path_only_image_is_a_counted_drop(tmp_path):
    schema = pa.schema([("a", IMAGE), ("t", pa.string()), ("b", IMAGE)])
    src = tmp_path / "src"
    src.mkdir()
    rows = [
        {"a": hf_image(None, "x.png"), "t": "e", "b": hf_image(png(1))},
        {"a": hf_image(png(2)), "t": "e", "b": hf_image(png(3))},
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), src / "d.parquet")
    mapping = tmp_path / "m.yaml"
    mapping.write_text("kind: unified_edit\nimages: [a, b]\ninstructions: [t]\n")
    summary = adapt(str(src), str(tmp_path / "out"), str(mapping), progress=False)
    assert summary["chains_out"] == 1 and [d["code"] for d in summary["drops"]] == ["no_media_dir"]


def test_a_magicbrush_session_with_a_bad_turn_is_dropped_whole(tmp_path):
    src, expected = magicbrush(tmp_path / "hub")
    # rewrite one file so one turn of a multi-turn session loses its target image
    victim = sorted(src.glob("*.parquet"))[1]
    table = pq.read_table(victim)
    rows = table.to_pylist()
    bad = next(i for i, r in enumerate(rows) if r["img_id"] == f"{100000 + 2 * 17}")
    rows[bad]["target_img"] = hf_image(None, None)
    victim.unlink()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), victim, row_group_size=2)
    summary = adapt(str(src), str(tmp_path / "out"), "magicbrush", progress=False)
    session = expected[2]
    assert Counter(chains_of(tmp_path / "out")) == Counter(c for c in expected if c != session)
    (drop,) = summary["drops"]
    assert drop["file"] == victim.name and (drop["row_group"], drop["row"]) == (bad // 2, bad % 2)
    assert drop["group"] == [f"{100000 + 2 * 17}"] and drop["rows"] == len(session[1]) and drop["code"] == "null_image"
    assert summary["rows_in"] == sum(len(t) for _, t in expected)
    assert_rows_accounted(summary)


# --------------------------------------------------------------------------- the filter
def test_the_filter_keeps_exactly_the_matching_rows(tmp_path):
    src, expected = omniedit(tmp_path / "hub")
    where = "o_score >= 5 and (task == 'add' or task = \"swap\") and not sc_score_1 < 6"
    summary = adapt(str(src), str(tmp_path / "out"), "omniedit", where=where, progress=False)
    keep = [i for i in range(len(expected)) if i % 10 >= 5 and OMNI_TASKS[i % 4] in ("add", "swap") and i % 10 >= 6]
    assert Counter(chains_of(tmp_path / "out")) == Counter(expected[i] for i in keep)
    assert summary["filtered_rows"] == len(expected) - len(keep) and summary["dropped"] == 0
    assert_rows_accounted(summary)
    kept = [r for f in output_files(tmp_path / "out") for r in pq.read_table(f).to_pylist()]
    assert all(r["o_score"] >= 5 and r["task"] in ("add", "swap") for r in kept)


def test_a_session_is_kept_only_when_all_its_turns_pass_the_filter(tmp_path):
    src, expected = magicbrush(tmp_path / "hub")
    summary = adapt(str(src), str(tmp_path / "out"), "magicbrush", where="turn_index <= 2", progress=False)
    assert Counter(chains_of(tmp_path / "out")) == Counter(c for c in expected if len(c[1]) <= 2)
    assert summary["filtered_rows"] == sum(len(c[1]) for c in expected if len(c[1]) > 2)
    assert_rows_accounted(summary)


def test_filter_parser():
    f = parse_filter("a >= 1.5 or b == 'x y' and not c != null")
    assert f.columns == ("a", "b", "c")
    assert f({"a": 2, "b": "z", "c": 1}) and f({"a": None, "b": "x y", "c": None})
    assert not f({"a": 1, "b": "x y", "c": 3}) and not f({"a": None, "b": None, "c": None})
    assert parse_filter("(a == 1 or a == 2) and b > -3e0")({"a": 2, "b": 0})
    for text in ["", "a >", "a == b", "__import__('os') == 1", "a == 1 or", "a < null", "(a == 1", "a == 1 b == 2"]:
        with pytest.raises(FilterError):
            parse_filter(text)


def test_a_filter_that_does_not_fit_the_source_fails_before_writing(tmp_path):
    src, _ = omniedit(tmp_path / "hub")
    with pytest.raises(FilterError, match="'task' .* cannot compare with 3"):
        adapt(str(src), str(tmp_path / "out"), "omniedit", where="task == 3", progress=False)
    with pytest.raises(FilterError, match="no column 'o_scor'"):
        adapt(str(src), str(tmp_path / "out"), "omniedit", where="o_scor > 3", progress=False)
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- determinism, resume, DST
def _bytes_of(root: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in output_files(root)} | {"info": (root / "parquet_info.json").read_bytes()}


def test_same_input_gives_byte_identical_output_and_a_rerun_resumes(tmp_path):
    src, _ = magicbrush(tmp_path / "hub", n_sessions=12)
    first = tmp_path / "a"
    adapt(str(src), str(first), "magicbrush", rows_per_group=2, chains_per_file=5, progress=False)
    assert [f.name for f in output_files(first)] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    before = _bytes_of(first)
    again = adapt(str(src), str(first), "magicbrush", rows_per_group=2, chains_per_file=5, progress=False)
    assert again["resumed_files"] == 3 and _bytes_of(first) == before
    # a torn file and a lost file are redone; the intact one is kept
    (first / "part-00000.parquet").write_bytes(before["part-00000.parquet"][:100])
    (first / "part-00002.parquet").unlink()
    resumed = adapt(str(src), str(first), "magicbrush", rows_per_group=2, chains_per_file=5, progress=False)
    assert resumed["resumed_files"] == 1 and _bytes_of(first) == before
    # a different layout replaces the earlier plan's files instead of mixing with them
    other = adapt(str(src), str(first), "magicbrush", rows_per_group=2, chains_per_file=20, progress=False)
    assert other["resumed_files"] == 0 and [f.name for f in output_files(first)] == ["part-00000.parquet"]
    assert Counter(chains_of(first)) == Counter(chains_of_bytes(before))


def chains_of_bytes(files: dict[str, bytes]) -> list[Chain]:
    found = []
    for name, data in files.items():
        if name.endswith(".parquet"):
            for row in pq.read_table(io.BytesIO(data)).to_pylist():
                found.append((tuple(row["image_list"]), tuple(tuple(p) for p in row["instruction_list"])))
    return found


def test_a_dst_holding_someone_elses_parquet_is_refused(tmp_path):
    src, _ = hqedit(tmp_path / "hub")
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "mine.parquet").write_bytes(b"PAR1")
    with pytest.raises(FileExistsError, match="mine.parquet"):
        adapt(str(src), str(dst), "hqedit", progress=False)
    assert (dst / "mine.parquet").read_bytes() == b"PAR1"


def test_split_selects_files_by_name(tmp_path):
    src, expected = hqedit(tmp_path / "hub")
    with pytest.raises(FileNotFoundError, match="dev-"):
        adapt(str(src), str(tmp_path / "out"), "hqedit", split="dev", progress=False)
    summary = adapt(str(src), str(tmp_path / "out"), "hqedit", split="train", progress=False)
    assert summary["chains_out"] == len(expected)


def test_to_parquet_writes_the_bagel_parquet_into_dst(tmp_path):
    src, expected = anyedit(tmp_path / "hub")
    result = run_adapter(str(src), str(tmp_path / "pq"), "anyedit", to="parquet", where="edit_type != 'visual_sketch'")
    assert result["convert"] is None
    assert_bagel_parquet(tmp_path / "pq")
    assert Counter(chains_of(tmp_path / "pq")) == Counter(c for i, c in enumerate(expected) if i % 3 != 2)
    with pytest.raises(ValueError, match="to must be one of"):
        run_adapter(str(src), str(tmp_path / "x"), "anyedit", to="tar")


def test_an_interrupted_run_leaves_no_partial_file_and_resumes_to_the_same_bytes(tmp_path):
    src, _ = instructpix2pix(tmp_path / "hub", n=12)
    clean = tmp_path / "clean"
    adapt(str(src), str(clean), "instructpix2pix", progress=False)
    second = sorted(src.glob("*.parquet"))[1]
    good = second.read_bytes()
    offset = pq.ParquetFile(second).metadata.row_group(1).column(1).data_page_offset
    second.unlink()  # the symlink; the corrupted copy stands in its place
    second.write_bytes(good[:offset] + b"\xff" * 64 + good[offset + 64 :])
    out = tmp_path / "out"
    with pytest.raises(OSError, match=f"row group 1 of .*{second.name}"):
        adapt(str(src), str(out), "instructpix2pix", progress=False)
    made = [f.name for f in out.iterdir() if f.is_file() and not f.name.startswith("_editstream")]  # not its note
    assert made == [sorted(src.glob("*.parquet"))[0].name]
    second.write_bytes(good)
    resumed = adapt(str(src), str(out), "instructpix2pix", progress=False)
    assert resumed["resumed_files"] == 1
    assert _bytes_of(out) == _bytes_of(clean) | {"info": _bytes_of(out)["info"]}
    info = json.loads((out / "parquet_info.json").read_text())
    assert list(info.values()) == list(json.loads((clean / "parquet_info.json").read_text()).values())


def test_an_output_that_a_new_filter_empties_leaves_no_stale_file(tmp_path):
    src, expected = anyedit(tmp_path / "hub")
    out = tmp_path / "out"
    adapt(str(src), str(out), "anyedit", progress=False)
    assert len(output_files(out)) == 2
    summary = adapt(str(src), str(out), "anyedit", where="image_id == 'any-1'", progress=False)
    assert summary["files_out"] == 1 and [f.name for f in output_files(out)] == ["train-00000-of-00002.parquet"]
    assert chains_of(out) == [expected[1]]
    assert list(json.loads((out / "parquet_info.json").read_text())) == [str(output_files(out)[0])]


def test_adapting_from_and_to_s3_gives_the_local_bytes(tmp_path, s3_bucket):
    import fsspec

    src, _ = magicbrush(tmp_path / "hub")
    local = tmp_path / "local"
    adapt(str(src), str(local), "magicbrush", rows_per_group=2, progress=False)
    fs = fsspec.filesystem("s3", **s3_bucket.storage_options)
    for f in sorted(src.glob("*.parquet")):
        fs.pipe(f"{s3_bucket.name}/hub/data/{f.name}", f.read_bytes())
    dst = f"{s3_bucket.url}/bagel"
    so = s3_bucket.storage_options
    summary = adapt(
        f"{s3_bucket.url}/hub/data", dst, "magicbrush", rows_per_group=2, storage_options=so, progress=False
    )
    assert summary["chains_out"] == len(chains_of(local))
    for f in output_files(local):
        assert fs.cat_file(f"{s3_bucket.name}/bagel/{f.name}") == f.read_bytes()
    info = json.loads(fs.cat_file(f"{s3_bucket.name}/bagel/parquet_info.json"))
    assert sorted(info) == [f"{dst}/{f.name}" for f in output_files(local)]
    again = adapt(f"{s3_bucket.url}/hub/data", dst, "magicbrush", rows_per_group=2, storage_options=so, progress=False)
    assert again["resumed_files"] == len(output_files(local))
