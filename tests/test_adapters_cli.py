"""``editstream convert SRC DST --from NAME`` / ``--mapping FILE`` and ``preview --from``, as a user runs
them: real subprocesses on parquet in the datasets' published Hub layouts (``hub_shapes``)."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import error_lines, run_cli
from hub_shapes import IMAGE, Chain, hf_image, magicbrush, omniedit, png


def assert_usage_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2 with one or two lines on stderr, the first ``Error: ...``, naming every needle; no traceback."""
    lines = error_lines(result)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert 1 <= len(lines) <= 2 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


def summary_of(result: subprocess.CompletedProcess) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def chains_in(root: Path) -> Counter[Chain]:
    found: Counter[Chain] = Counter()
    for path in sorted(root.glob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            found[(tuple(row["image_list"]), tuple(tuple(p) for p in row["instruction_list"]))] += 1
    return found


def test_from_magicbrush_to_parquet_and_to_shards_then_verify_and_stream(tmp_path):
    src, expected = magicbrush(tmp_path / "hub")
    pq_dst, wds_dst = tmp_path / "mb-pq", tmp_path / "mb-wds"
    done = summary_of(run_cli("convert", str(src), str(pq_dst), "--from", "magicbrush", "--to", "parquet"))
    assert done["convert"] is None and "drops" not in done["adapt"]
    assert (done["adapt"]["rows_in"], done["adapt"]["chains_out"]) == (13, len(expected))
    assert done["adapt"]["report"].endswith("adapt_report.json") and os.path.exists(done["adapt"]["report"])
    assert chains_in(pq_dst) == Counter(expected)  # a multiset; the order within each chain is exact
    info = json.loads((pq_dst / "parquet_info.json").read_text())
    files = sorted(pq_dst.glob("*.parquet"))
    assert info == {
        os.path.join(os.path.abspath(pq_dst), f.name): {
            "num_row_groups": pq.ParquetFile(f).metadata.num_row_groups,
            "num_rows": pq.ParquetFile(f).metadata.num_rows,
        }
        for f in files
    }

    shards = run_cli("convert", str(src), str(wds_dst), "--from", "magicbrush", "--workers", "1", "--no-progress")
    done = summary_of(shards)
    assert done["convert"]["num_samples"] == len(expected) and "drops" not in done["adapt"]
    assert chains_in(tmp_path / "mb-wds-parquet") == Counter(expected)  # the staged BAGEL parquet beside DST
    verified = run_cli("verify", str(wds_dst), "--source", str(tmp_path / "mb-wds-parquet"), "--no-progress")
    assert verified.returncode == 0 and "OK" in verified.stdout, verified.stdout + verified.stderr

    for root, backend in ((wds_dst, "webdataset"), (pq_dst, "parquet")):
        streamed = summary_of(run_cli("stream", str(root), "--samples", "10"))
        assert (streamed["backend"], streamed["samples"]) == (backend, 10)
        assert sum(streamed["drops"].values()) == 0


def test_where_keeps_only_the_matching_rows(tmp_path):
    src, expected = omniedit(tmp_path / "hub")
    dst = tmp_path / "out"
    done = summary_of(
        run_cli("convert", str(src), str(dst), "--from", "omniedit", "--to", "parquet", "--where", "o_score >= 8")
    )
    kept = [chain for i, chain in enumerate(expected) if i % 10 >= 8]
    assert chains_in(dst) == Counter(kept) and kept
    assert done["adapt"]["filtered_rows"] == len(expected) - len(kept)
    bad = run_cli("convert", str(src), str(tmp_path / "x"), "--from", "omniedit", "--where", "o_score >=")
    assert_usage_error(bad, "--where", "o_score >=")
    unknown = run_cli("convert", str(src), str(tmp_path / "x"), "--from", "omniedit", "--where", "clip > 1")
    assert_usage_error(unknown, "no column 'clip'")
    assert not (tmp_path / "x").exists() and not (tmp_path / "x-parquet").exists()


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("kind: unified_edit\nimages: [src_img]\ninstructions: [edited_prompt_list]\n", "images"),
        ("kind: unified_edit\nimages: [src_img, edited_img]\ninstructions: [x]\ncolour: red\n", "colour"),
        ("kind: unified_edit\nimages: [src_img, edited_img]\ninstructions: [edited_prompt_lst]\n", "edited_prompt_lst"),
    ],
)
def test_a_bad_mapping_file_is_a_usage_error_naming_the_file_and_key(tmp_path, text, key):
    src, _ = omniedit(tmp_path / "hub")
    mapping = tmp_path / "my-mapping.yaml"
    mapping.write_text(text)
    result = run_cli("convert", str(src), str(tmp_path / "out"), "--mapping", str(mapping))
    assert_usage_error(result, str(mapping), key)
    assert not (tmp_path / "out").exists()


def test_a_mapping_file_converts_like_the_builtin(tmp_path):
    src, expected = omniedit(tmp_path / "hub")
    mapping = tmp_path / "omni.json"
    rule = {"column": "edited_prompt_list", "format": "list"}
    data = {"kind": "unified_edit", "images": ["src_img", "edited_img"], "instructions": [rule]}
    mapping.write_text(json.dumps(data))
    summary_of(run_cli("convert", str(src), str(tmp_path / "out"), "--mapping", str(mapping), "--to", "parquet"))
    assert chains_in(tmp_path / "out") == Counter(expected)


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (["--schema", "unified_edit"], ["--schema", "--from/--mapping"]),
        (["--parquet-info", "info.json"], ["--parquet-info"]),
        (["--mapping", "m.yaml"], ["--from and --mapping"]),
        (["--to", "parquet", "--workers", "2", "--digest", "sha256"], ["--digest applies", "--to webdataset only"]),
        (["--to", "parquet", "--staging", "s"], ["--staging"]),
    ],
)
def test_options_that_do_not_fit_an_adaptation_are_usage_errors(tmp_path, extra, needles):
    src, _ = magicbrush(tmp_path / "hub")
    result = run_cli("convert", str(src), str(tmp_path / "out"), "--from", "magicbrush", *extra)
    assert_usage_error(result, *needles)
    assert not (tmp_path / "out").exists()


def test_adapter_options_without_an_adapter_are_usage_errors(tmp_path):
    src, _ = magicbrush(tmp_path / "hub")
    result = run_cli("convert", str(src), str(tmp_path / "out"), "--to", "parquet", "--split", "train")
    assert_usage_error(result, "--to, --split", "--from NAME")


def test_an_unknown_adapter_name_lists_the_builtins(tmp_path):
    result = run_cli("convert", str(tmp_path), str(tmp_path / "out"), "--from", "magicbrus")
    assert_usage_error(result, "'magicbrus' is not one of", "'magicbrush'", "'omniedit'")


def test_drops_are_counted_on_stderr_and_listed_in_the_report_and_media_dir_resolves_paths(tmp_path):
    schema = pa.schema([("original_image", IMAGE), ("edit_prompt", pa.string()), ("edited_image", IMAGE)])
    media = tmp_path / "media"
    media.mkdir()
    (media / "a.png").write_bytes(png(1))
    rows = [
        {"original_image": hf_image(None, "a.png"), "edit_prompt": "from disk", "edited_image": hf_image(png(2))},
        {"original_image": hf_image(None, None), "edit_prompt": "no image", "edited_image": hf_image(png(3))},
    ]
    src = tmp_path / "data"
    src.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), src / "train-00000-of-00001.parquet")
    mapping = tmp_path / "m.yaml"
    mapping.write_text("kind: unified_edit\nimages: [original_image, edited_image]\ninstructions: [edit_prompt]\n")
    dst = tmp_path / "out"
    args = ["convert", str(src), str(dst), "--mapping", str(mapping), "--to", "parquet", "--media-dir", str(media)]
    result = run_cli(*args)
    done = summary_of(result)
    assert (done["adapt"]["chains_out"], done["adapt"]["dropped_by_code"]) == (1, {"null_image": 1})
    assert chains_in(dst) == Counter({((png(1), png(2)), (("from disk",),)): 1})
    assert f"1 source row dropped (null_image: 1); each is listed in {dst}/adapt_report.json" in result.stderr
    report = json.loads((dst / "adapt_report.json").read_text())
    assert [(d["file"], d["row"], d["code"]) for d in report["drops"]] == [
        ("train-00000-of-00001.parquet", 1, "null_image")
    ]


def test_a_dst_holding_other_parquet_is_a_usage_error(tmp_path):
    src, _ = omniedit(tmp_path / "hub")
    dst = tmp_path / "out"
    dst.mkdir()
    pq.write_table(pa.table({"x": [1]}), dst / "mine.parquet")
    result = run_cli("convert", str(src), str(dst), "--from", "omniedit", "--to", "parquet")
    assert_usage_error(result, "mine.parquet", "new or empty directory")
    assert (dst / "mine.parquet").exists()


def test_preview_from_shows_the_chains_of_the_hub_layout_without_converting(tmp_path):
    src, expected = magicbrush(tmp_path / "hub")
    page = tmp_path / "mb.html"
    result = run_cli("preview", str(src), "--from", "magicbrush", "-o", str(page), "-n", "50")
    assert result.returncode == 0, result.stderr
    assert f"wrote {page} ({len(expected)} records)" in result.stdout
    html = page.read_text()
    assert "via magicbrush" in html and "img_id=" in html
    for _, texts in expected:  # every session, its turns in turn order
        positions = [html.index(t[0]) for t in texts]
        assert positions == sorted(positions)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hub", "mb.html"]  # nothing converted or staged
    sheet = run_cli("preview", str(src), "--from", "magicbrush", "-o", str(tmp_path / "mb.png"), "-n", "3")
    assert sheet.returncode == 0 and "(3 records)" in sheet.stdout
    assert (tmp_path / "mb.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_preview_from_an_ungrouped_adapter_filters_and_shows_drops(tmp_path):
    src, _ = omniedit(tmp_path / "hub")
    page = tmp_path / "omni.html"
    result = run_cli("preview", str(src), "--from", "omniedit", "--where", "task == 'swap'", "-o", str(page))
    assert result.returncode == 0 and "(3 records)" in result.stdout, result.stderr
    html = page.read_text()
    assert all(f"edit {i} phrasing 0" in html for i in (2, 6, 10)) and "edit 1 phrasing 0" not in html
    mapping = tmp_path / "m.yaml"  # the task column is no JSON: every row is one the adapter drops
    rule = "instructions: [{column: task, format: json}]\n"
    mapping.write_text("kind: unified_edit\nimages: [src_img, edited_img]\n" + rule)
    dropped = run_cli("preview", str(src), "--mapping", str(mapping), "-n", "2", "-o", str(page))
    assert dropped.returncode == 0 and "(2 records)" in dropped.stdout, dropped.stderr
    assert page.read_text().count("(dropped by the adapter: task is not valid JSON") == 2
    bad = run_cli("preview", str(src), "--from", "omniedit", "--where", "nope == 1", "-o", str(page))
    assert_usage_error(bad, "no column 'nope'")
    stray = run_cli("preview", str(src), "--where", "task == 'swap'", "-o", str(page))
    assert_usage_error(stray, "--where", "--from")


def test_a_repository_root_or_a_cache_folder_is_found_and_what_was_picked_is_said(tmp_path):
    """``--local-dir`` downloads and Hub cache folders hold their parquet under ``data/`` and
    ``snapshots/<rev>/data``: given the root, editstream reads there and says so."""
    data, expected = magicbrush(tmp_path / "datasets--osunlp--MagicBrush")
    cache = data.parent.parent.parent  # the cache folder: snapshots/<rev>/data below it
    local_dir = tmp_path / "local-dir"
    local_dir.mkdir()
    (local_dir / "data").symlink_to(data)  # as `huggingface-cli download --local-dir` lays it out
    (local_dir / "README.md").write_text("a dataset card\n")
    for root in (cache, local_dir):
        dst = tmp_path / f"{root.name}-pq"
        done = run_cli("convert", str(root), str(dst), "--from", "magicbrush", "--to", "parquet")
        assert done.returncode == 0, done.stderr
        assert "holds no parquet files itself; reading" in done.stderr and "/data" in done.stderr
        assert chains_in(dst) == Counter(expected)
    shown = run_cli("preview", str(cache), "--from", "magicbrush", "-o", str(tmp_path / "mb.html"), "-n", "3")
    assert shown.returncode == 0, shown.stderr


def test_a_folder_without_the_dataset_names_where_it_looked(tmp_path):
    empty = tmp_path / "not-a-dataset"
    (empty / "data").mkdir(parents=True)
    failed = run_cli("convert", str(empty), str(tmp_path / "out"), "--from", "magicbrush", "--to", "parquet")
    assert failed.returncode != 0
    message = " ".join(error_lines(failed))
    assert "holds no parquet files" in message and "looked in" in message and str(empty / "data") in message
