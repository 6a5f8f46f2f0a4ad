"""Adapters under hostile or broken input: places that overlap, YAML bombs, huge names, column types
that cannot work, bad UTF-8, NUL bytes, gaps in a session, filters built to exhaust the parser.

Each test reproduces one way an adaptation used to overwrite its source, hang, blow up its memory,
abort on one bad cell or finish with nothing; each now ends in one clear refusal before anything
is written, or in one counted, located drop with the rest adapted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from editstream.adapters import FilterError, MappingError, adapt, load_mapping, parse_filter, run_adapter
from editstream.conversion.config import PlacesOverlapError, check_apart, overlap
from editstream.format.safe_yaml import YamlBoundError, load_yaml
from helpers import error_lines, run_cli
from hub_shapes import IMAGE, hf_image, magicbrush, omniedit, png


def assert_refused(result: subprocess.CompletedProcess, code: int, *needles: str, longest: int = 600) -> None:
    """Exit ``code`` with one short ``Error:`` line (and at most one of advice) naming every needle."""
    lines = error_lines(result)
    assert result.returncode == code, (result.returncode, result.stderr[:2000])
    assert 1 <= len(lines) <= 2 and lines[0].startswith("Error: "), result.stderr[:2000]
    assert "Traceback" not in result.stderr and len(result.stderr) <= longest, result.stderr[:2000]
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (links followed) with its bytes, and every directory."""
    out: dict[str, bytes] = {}
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = b""
        for f in files:
            path = os.path.join(dirpath, f)
            out[os.path.relpath(path, root)] = Path(path).read_bytes()
    return out


def omni_copy(tmp_path: Path, where: Path) -> Path:
    """OmniEdit-shaped parquet copied (real files, no links) into ``where``."""
    hub, _ = omniedit(tmp_path / "hub")
    where.mkdir(parents=True)
    for f in sorted(hub.glob("*.parquet")):
        shutil.copyfile(f, where / f.name)
    shutil.rmtree(tmp_path / "hub")
    return where


# --------------------------------------------------------------------------- the overlap rule
def test_the_overlap_rule_resolves_local_paths_and_compares_s3_prefixes(tmp_path):
    (tmp_path / "data").mkdir()
    os.symlink(tmp_path / "data", tmp_path / "link")
    assert overlap(str(tmp_path / "data"), str(tmp_path / "link"))
    assert overlap(str(tmp_path / "data" / "x" / ".."), f"file://{tmp_path}/data/")
    assert overlap(str(tmp_path / "data"), str(tmp_path / "link" / "out"))  # nested, through the link
    assert overlap(str(tmp_path / "link" / "a" / "b"), str(tmp_path / "data"))  # the other way round
    assert not overlap(str(tmp_path / "data"), str(tmp_path / "data-parquet"))
    assert overlap("s3://b/src", "s3://b/src/")
    assert overlap("s3://b/src/", "s3://b//src/out")
    assert overlap("s3://b", "s3://b/src") and overlap("s3a://b/src", "s3://b/src/x")
    assert not overlap("s3://b/src", "s3://b/src2") and not overlap("s3://b/src", "s3://c/src")
    assert not overlap("s3://b/src", str(tmp_path / "b" / "src"))
    with pytest.raises(PlacesOverlapError, match=r"DST \(s3://b/src/out\) is inside SRC \(s3://b/src\)"):
        check_apart({"SRC": "s3://b/src", "DST": "s3://b/src/out"})
    with pytest.raises(PlacesOverlapError, match="SRC and staging are the same place"):
        check_apart({"SRC": "s3://b/p/", "staging": "s3://b/p", "DST": "s3://b/q"})


def test_plain_convert_refuses_a_dst_inside_src_and_a_src_inside_dst(tmp_path):
    src = omni_copy(tmp_path, tmp_path / "pq")
    before = tree(tmp_path)
    for dst in (src / "wds", tmp_path):
        result = run_cli("convert", str(src), str(dst), "--schema", "generic", "--no-progress")
        assert_refused(result, 2, "SRC", "DST", "inside")
    assert tree(tmp_path) == before
    from editstream.conversion import convert

    with pytest.raises(ValueError, match="inside"):
        convert(str(src), str(src / "wds"), progress=False)
    assert tree(tmp_path) == before


ADAPTER_PLACES = [
    # (SRC, DST, extra arguments): the staging default DST-parquet, --staging, --to parquet, nesting
    ("OMNI-parquet", "OMNI", []),
    ("src", "out", ["--staging", "src"]),
    ("src", "out", ["--staging", "src/"]),
    ("src", "src", ["--to", "parquet"]),
    ("src", "src/../src/", ["--to", "parquet"]),
    ("src", "src/bagel", ["--to", "parquet"]),
    ("src", ".", ["--to", "parquet"]),
    ("src", "src/wds", []),
    ("src", "out", ["--staging", "src/stage"]),
    ("src", "out", ["--staging", "out/stage"]),
    ("src", "link", ["--to", "parquet"]),
]


@pytest.mark.parametrize(("src", "dst", "extra"), ADAPTER_PLACES)
def test_an_adaptation_whose_places_overlap_is_refused_before_anything_is_written(tmp_path, src, dst, extra):
    omni_copy(tmp_path, tmp_path / src)
    os.symlink(tmp_path / src, tmp_path / "link")
    before = tree(tmp_path)
    result = run_cli("convert", src, dst, "--from", "omniedit", "--no-progress", *extra, cwd=tmp_path)
    assert_refused(result, 2)
    assert "the same place" in result.stderr or "is inside" in result.stderr
    assert tree(tmp_path) == before
    with pytest.raises(PlacesOverlapError):
        run_adapter(
            str(tmp_path / src),
            str(tmp_path / dst),
            "omniedit",
            to="parquet" if "parquet" in extra else "webdataset",
            staging=str(tmp_path / extra[1]) if "--staging" in extra else None,
            progress=False,
        )
    assert tree(tmp_path) == before


S3_PLACES = [
    ("omni-parquet", "omni", []),
    ("src", "out", ["--staging", "{bucket}/src/"]),
    ("src", "src/", ["--to", "parquet"]),
    ("src", "src/bagel", ["--to", "parquet"]),
    ("src/", "src//wds", []),
    ("src/data", "src", ["--to", "parquet"]),
    ("src", "out", ["--staging", "{bucket}/out/stage"]),
]


@pytest.mark.parametrize(("src", "dst", "extra"), S3_PLACES)
def test_an_adaptation_on_s3_whose_places_overlap_is_refused_before_anything_is_written(
    tmp_path, s3_bucket, src, dst, extra
):
    import fsspec

    local = omni_copy(tmp_path, tmp_path / "omni")
    fs = fsspec.filesystem("s3", **s3_bucket.storage_options)
    for f in sorted(local.glob("*.parquet")):
        fs.pipe(f"{s3_bucket.name}/{src.strip('/')}/{f.name}", f.read_bytes())
    fs.invalidate_cache()
    before = sorted(fs.find(s3_bucket.name))
    extra = [e.format(bucket=s3_bucket.url) for e in extra]
    args = ["convert", f"{s3_bucket.url}/{src}", f"{s3_bucket.url}/{dst}", "--from", "omniedit", "--no-progress"]
    result = run_cli(*args, *extra, env={"AWS_ENDPOINT_URL": s3_bucket.endpoint}, timeout=120)
    assert_refused(result, 2, s3_bucket.url)
    assert "the same place" in result.stderr or "is inside" in result.stderr
    fs.invalidate_cache()
    assert sorted(fs.find(s3_bucket.name)) == before


# --------------------------------------------------------------------------- every refusal before the first write
def test_from_into_a_dst_holding_user_files_is_refused_before_the_staging_is_written(tmp_path):
    src = omni_copy(tmp_path, tmp_path / "src")
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "notes.txt").write_text("mine")
    result = run_cli("convert", str(src), str(dst), "--from", "omniedit", "--no-progress")
    assert_refused(result, 2, "notes.txt", "new or empty directory")
    assert not (tmp_path / "out-parquet").exists() and sorted(os.listdir(dst)) == ["notes.txt"]
    with pytest.raises(FileExistsError, match="notes.txt"):
        run_adapter(str(src), str(dst), "omniedit", progress=False)
    assert not (tmp_path / "out-parquet").exists()


def test_a_parquet_dst_holding_someone_elses_file_is_refused_before_any_stale_file_is_removed(tmp_path):
    src, _ = magicbrush(tmp_path / "hub", n_sessions=12)
    dst = tmp_path / "out"
    adapt(str(src), str(dst), "magicbrush", rows_per_group=2, chains_per_file=5, progress=False)
    (dst / "zz-mine.parquet").write_bytes(b"PAR1")
    before = tree(dst)
    with pytest.raises(FileExistsError, match="zz-mine.parquet"):
        adapt(str(src), str(dst), "magicbrush", rows_per_group=2, chains_per_file=20, progress=False)
    assert tree(dst) == before


# --------------------------------------------------------------------------- YAML and huge values
BOMB = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
    f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
)


def test_a_yaml_alias_bomb_as_a_mapping_is_refused_at_once(tmp_path):
    assert 290 <= len(BOMB) <= 330
    src = omni_copy(tmp_path, tmp_path / "src")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    with pytest.raises(MappingError, match="expands") as err:
        load_mapping(bomb)
    assert len(str(err.value)) < 400
    result = run_cli("convert", str(src), str(tmp_path / "out"), "--mapping", str(bomb), timeout=60)
    assert_refused(result, 2, str(bomb), "expands")
    assert not (tmp_path / "out").exists() and not (tmp_path / "out-parquet").exists()


def test_the_bounded_yaml_loader_keeps_small_aliases_and_refuses_loops_and_depth():
    assert load_yaml("base: &b {x: 1}\nuse: *b\n", "t.yaml") == {"base": {"x": 1}, "use": {"x": 1}}
    assert load_yaml(b"", "t.yaml") is None
    with pytest.raises(YamlBoundError, match="t.yaml: .*expands"):
        load_yaml(BOMB, "t.yaml")
    with pytest.raises(YamlBoundError, match="refers to itself"):
        load_yaml("a: &a [1, *a]\n", "t.yaml")
    with pytest.raises(YamlBoundError, match="nested"):
        load_yaml("[" * 5000 + "]" * 5000, "t.yaml")
    with pytest.raises(YamlBoundError, match="expands"):
        load_yaml("k: " + "x" * 2000, "t.yaml", max_size=1000)


def test_a_five_megabyte_column_name_gives_a_short_error(tmp_path):
    src = omni_copy(tmp_path, tmp_path / "src")
    name = "c" * 5_000_000
    mapping = tmp_path / "huge.yaml"
    mapping.write_text(f"kind: unified_edit\nimages: [{name}, edited_img]\ninstructions: [edited_prompt_list]\n")
    result = run_cli("convert", str(src), str(tmp_path / "out"), "--mapping", str(mapping), timeout=120)
    assert_refused(result, 2, "has no column", "ccc", longest=1500)
    bad_key = tmp_path / "key.yaml"
    bad_key.write_text(f"{name}: 1\nimages: [a, b]\ninstructions: [t]\n")
    with pytest.raises(MappingError) as err:
        load_mapping(bad_key)
    assert len(str(err.value)) < 1000
    with pytest.raises(FilterError) as err:
        parse_filter(f"{name} ==")
    assert len(str(err.value)) < 400


# --------------------------------------------------------------------------- column types, empty results
def one_file(tmp_path: Path, schema: pa.Schema, rows: list[dict[str, Any]], name: str = "src") -> Path:
    src = tmp_path / name
    src.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), src / "train-00000-of-00001.parquet", row_group_size=2)
    return src


def mapping_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text("kind: unified_edit\n" + text)
    return path


@pytest.mark.parametrize(
    ("column", "arrow_type", "images", "needle"),
    [
        ("b", pa.null(), "[a, b]", "'b' is null"),
        ("b", pa.list_(pa.binary()), "[a, b]", "'b' is list<"),
        ("t", pa.int64(), "[a, b]", "'t' is int64"),
    ],
)
def test_columns_whose_type_cannot_work_are_refused_before_any_row_is_read(
    tmp_path, column, arrow_type, images, needle
):
    fields = {"a": IMAGE, "b": IMAGE, "t": pa.string()}
    fields[column] = arrow_type
    rows = [{"a": hf_image(png(i)), "b": None if column == "b" else hf_image(png(i + 1)), "t": "e"} for i in range(3)]
    if column == "t":
        for i, row in enumerate(rows):
            row["t"] = i
    src = one_file(tmp_path, pa.schema(list(fields.items())), rows)
    mapping = mapping_file(tmp_path, f"images: {images}\ninstructions: [t]\n")
    with pytest.raises(MappingError, match=needle):
        adapt(str(src), str(tmp_path / "out"), str(mapping), progress=False)
    result = run_cli("convert", str(src), str(tmp_path / "wds"), "--mapping", str(mapping), "--no-progress")
    assert_refused(result, 2, needle)
    assert not (tmp_path / "out").exists() and not (tmp_path / "wds").exists()
    assert not (tmp_path / "wds-parquet").exists()


def test_zero_row_files_are_refused_before_writing(tmp_path):
    src = one_file(tmp_path, pa.schema([("a", IMAGE), ("b", IMAGE), ("t", pa.string())]), [])
    mapping = mapping_file(tmp_path, "images: [a, b]\ninstructions: [t]\n")
    result = run_cli("convert", str(src), str(tmp_path / "out"), "--mapping", str(mapping), "--to", "parquet")
    assert_refused(result, 1, "0 rows")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("target", ["parquet", "webdataset"])
def test_when_every_row_is_dropped_the_run_fails_naming_the_reasons_and_the_report(tmp_path, target):
    rows = [{"a": hf_image(None, f"{i}.png"), "b": hf_image(png(i)), "t": "e"} for i in range(5)]
    src = one_file(tmp_path, pa.schema([("a", IMAGE), ("b", IMAGE), ("t", pa.string())]), rows)
    mapping = mapping_file(tmp_path, "images: [a, b]\ninstructions: [t]\n")
    dst = tmp_path / "out"
    result = run_cli("convert", str(src), str(dst), "--mapping", str(mapping), "--to", target, "--no-progress")
    report = (dst if target == "parquet" else tmp_path / "out-parquet") / "adapt_report.json"
    assert_refused(result, 1, "all 5 rows dropped (no_media_dir: 5", str(report), longest=800)
    assert json.loads(report.read_text())["dropped_rows"] == 5
    assert "no *.parquet" not in result.stderr
    if target == "webdataset":
        assert not (dst / "manifest.json").exists()


def test_a_binary_instruction_column_of_utf8_text_adapts(tmp_path):
    rows = [{"a": hf_image(png(i)), "b": hf_image(png(i + 9)), "t": f"edit {i}".encode()} for i in range(3)]
    src = one_file(tmp_path, pa.schema([("a", IMAGE), ("b", IMAGE), ("t", pa.binary())]), rows)
    mapping = mapping_file(tmp_path, "images: [a, b]\ninstructions: [t]\n")
    summary = adapt(str(src), str(tmp_path / "out"), str(mapping), progress=False)
    assert summary["chains_out"] == 3
    table = pq.read_table(tmp_path / "out" / "train-00000-of-00001.parquet")
    assert table.column("instruction_list").to_pylist() == [[["edit 0"]], [["edit 1"]], [["edit 2"]]]


# --------------------------------------------------------------------------- one bad value is one bad row
def test_an_image_path_holding_a_nul_byte_is_one_dropped_row(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    (media / "ok.png").write_bytes(png(1))
    rows = [{"a": hf_image(None, "ok.png"), "b": hf_image(png(i + 2)), "t": f"e{i}"} for i in range(4)]
    rows[2]["a"] = hf_image(None, "bad\0.png")
    src = one_file(tmp_path, pa.schema([("a", IMAGE), ("b", IMAGE), ("t", pa.string())]), rows)
    mapping = mapping_file(tmp_path, "images: [a, b]\ninstructions: [t]\n")
    summary = adapt(str(src), str(tmp_path / "out"), str(mapping), media_dir=str(media), progress=False)
    assert summary["chains_out"] == 3
    (drop,) = summary["drops"]
    assert (drop["file"], drop["row_group"], drop["row"], drop["column"]) == ("train-00000-of-00001.parquet", 1, 0, "a")


def bad_utf8_strings(values: list[bytes]) -> pa.Array:
    """A string array holding exactly these bytes, valid UTF-8 or not (as a broken writer leaves them)."""
    raw = pa.array(values, pa.binary())
    return pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())


def test_invalid_utf8_in_a_string_column_is_one_dropped_row_located_by_column(tmp_path):
    n = 5
    texts = [f"edit {i}".encode() for i in range(n)]
    texts[3] = b"edit \xff\xfe"
    keep = [f"id-{i}".encode() for i in range(n)]
    keep[1] = b"id-\xc3"
    table = pa.table(
        {
            "a": pa.array([hf_image(png(i)) for i in range(n)], IMAGE),
            "b": pa.array([hf_image(png(i + 10)) for i in range(n)], IMAGE),
            "t": bad_utf8_strings(texts),
            "k": bad_utf8_strings(keep),
        }
    )
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(table, src / "train-00000-of-00001.parquet", row_group_size=2)
    mapping = mapping_file(tmp_path, "images: [a, b]\ninstructions: [t]\nkeep: [k]\n")
    summary = adapt(str(src), str(tmp_path / "out"), str(mapping), progress=False)
    assert summary["chains_out"] == 3 and summary["dropped_by_code"] == {"bad_utf8": 2}
    located = sorted((d["row_group"], d["row"], d["column"]) for d in summary["drops"])
    assert located == [(0, 1, "k"), (1, 1, "t")]
    assert all("UTF-8" in d["reason"] for d in summary["drops"])


def test_invalid_utf8_in_a_grouped_source_drops_its_row_or_its_session(tmp_path):
    # sessions s0, s1, s2 of two turns each; s1's second turn has a tag that is not UTF-8 (its
    # session is dropped whole), and one more row's session key is not UTF-8 (dropped alone)
    keys = [b"s0", b"s0", b"s1", b"s1", b"s2", b"s2", b"s\xff"]
    tags = [b"ok", b"ok", b"ok", b"\xe9t\xe9", b"ok", b"ok", b"ok"]
    table = pa.table(
        {
            "k": bad_utf8_strings(keys),
            "n": [1, 2, 1, 2, 1, 2, 1],
            "a": pa.array([hf_image(png(i)) for i in range(7)], IMAGE),
            "b": pa.array([hf_image(png(i + 10)) for i in range(7)], IMAGE),
            "t": [f"e{i}" for i in range(7)],
            "tag": bad_utf8_strings(tags),
        }
    )
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(table, src / "train-00000-of-00001.parquet", row_group_size=4)
    text = "images: [a, b]\ninstructions: [t]\ngroup_by: [k]\norder_by: n\nwhere: \"tag != 'no'\"\n"
    summary = adapt(str(src), str(tmp_path / "out"), str(mapping_file(tmp_path, text)), progress=False)
    assert summary["chains_out"] == 2 and summary["dropped_rows"] == 3
    located = sorted((d["row_group"], d["row"], d["column"], d["rows"]) for d in summary["drops"])
    assert located == [(0, 3, "tag", 2), (1, 2, "k", 1)]


def test_a_latin1_binary_instruction_is_one_dropped_row(tmp_path):
    texts = [b"make it blue", "rendre plus foncé".encode("latin-1"), b"add a hat"]
    rows = [{"a": hf_image(png(i)), "b": hf_image(png(i + 5)), "t": t} for i, t in enumerate(texts)]
    src = one_file(tmp_path, pa.schema([("a", IMAGE), ("b", IMAGE), ("t", pa.binary())]), rows)
    mapping = mapping_file(tmp_path, "images: [a, b]\ninstructions: [t]\n")
    summary = adapt(str(src), str(tmp_path / "out"), str(mapping), progress=False)
    assert summary["chains_out"] == 2
    (drop,) = summary["drops"]
    assert (drop["row_group"], drop["row"], drop["column"], drop["code"]) == (0, 1, "t", "bad_utf8")


def test_a_magicbrush_session_with_a_gap_in_its_turns_is_a_bad_session(tmp_path):
    src, expected = magicbrush(tmp_path / "hub")
    session = f"{100000 + 2 * 17}"  # turns 1, 2, 3, scattered over the files
    for victim in sorted(src.glob("*.parquet")):
        table = pq.read_table(victim)
        rows = table.to_pylist()
        if not any(r["img_id"] == session and r["turn_index"] == 2 for r in rows):
            continue
        for row in rows:
            if row["img_id"] == session and row["turn_index"] == 2:
                row["turn_index"] = 4  # turns 1, 3, 4: a gap
        victim.unlink()
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), victim, row_group_size=2)
    summary = adapt(str(src), str(tmp_path / "out"), "magicbrush", progress=False)
    (drop,) = summary["drops"]
    assert drop["code"] == "bad_order" and drop["group"] == [session] and "gap" in drop["reason"]
    assert drop["rows"] == 3 and summary["chains_out"] == len(expected) - 1


# --------------------------------------------------------------------------- filters built to exhaust the parser
def test_deeply_nested_filters_are_refused_with_one_line():
    with pytest.raises(FilterError, match="nested more than") as err:
        parse_filter("(" * 3000 + "a == 1" + ")" * 3000)
    assert len(str(err.value)) < 300
    with pytest.raises(FilterError, match="nested more than"):
        parse_filter("not " * 3000 + "a == 1")
    assert parse_filter("(" * 50 + "a == 1" + ")" * 50)({"a": 1})


def test_a_flat_or_of_two_thousand_comparisons_parses_and_evaluates():
    text = " or ".join(f"a == {i}" for i in range(2000))
    f = parse_filter(text)
    assert f.columns == ("a",) and f({"a": 1999}) and not f({"a": 2000})
    both = parse_filter(" and ".join(f"a != {i}" for i in range(2000)))
    assert both({"a": -1}) and not both({"a": 1000})


def _calls_to_parse(text):
    """Python function calls made while parsing ``text``: a count, not a clock, so a busy machine cannot change it."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        parse_filter(text)
    finally:
        sys.setprofile(None)
    return calls


def test_filter_parsing_is_linear_and_bounded_in_size():
    unit = "o_score == 1234 or "
    parse_filter(unit * (690_000 // len(unit)) + "o_score == 1")  # quadratic before: 10 to 35 s
    small, big = (_calls_to_parse(unit * n + "o_score == 1") for n in (1_000, 4_000))
    assert big < 5 * small  # 4x the text, about 4x the work (quadratic would be about 16x)
    with pytest.raises(FilterError, match="longer than"):
        parse_filter(unit * 60_000 + "a == 1")


def test_a_cli_filter_too_deep_is_a_usage_error(tmp_path):
    src = omni_copy(tmp_path, tmp_path / "src")
    where = "(" * 3000 + "o_score > 1" + ")" * 3000
    result = run_cli("convert", str(src), str(tmp_path / "out"), "--from", "omniedit", "--where", where)
    assert_refused(result, 2, "--where", "nested more than")
    flat = " or ".join(f"o_score == {i}" for i in range(2000))
    done = run_cli("convert", str(src), str(tmp_path / "out"), "--from", "omniedit", "--to", "parquet", "--where", flat)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_dictionary_encoded_string_column_filters(tmp_path):
    n = 4
    table = pa.table(
        {
            "a": pa.array([hf_image(png(i)) for i in range(n)], IMAGE),
            "b": pa.array([hf_image(png(i + 10)) for i in range(n)], IMAGE),
            "t": [f"e{i}" for i in range(n)],
            "task": pa.array(["add", "swap", "add", "style"]).dictionary_encode(),
        }
    )
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(table, src / "train-00000-of-00001.parquet")
    mapping = mapping_file(tmp_path, "images: [a, b]\ninstructions: [t]\n")
    summary = adapt(str(src), str(tmp_path / "out"), str(mapping), where="task == 'add'", progress=False)
    assert summary["chains_out"] == 2 and summary["filtered_rows"] == 2
