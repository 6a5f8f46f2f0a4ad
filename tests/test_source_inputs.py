"""How sources are named and located: one source given twice is refused, a Hub cache with several snapshots
and no ``refs/main`` is refused with its snapshots listed, a metadata file that cannot be parsed is a located
drop, and a Hub download converted without ``--from`` names the adapter whose columns it has."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from editstream import ByteTokenizer, ImageTransform, SftJSONLIterableDataset, T2IIterableDataset
from editstream.adapters import resolve_mapping
from editstream.data.adapted.inplace import InPlace
from editstream.sandbox.synth import write_synthetic_dataset
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import VAE, error_lines, run_cli
from hub_shapes import hqedit, magicbrush, png, ultraedit
from published_layouts import as_hub_cache, x2i
from test_adapters_cli import chains_in


# --------------------------------------------------------------------------- one source given twice
@pytest.fixture(scope="module")
def t2i(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("twice") / "A"
    write_synthetic_dataset(str(root), schema="t2i_pretrain", num_files=2, row_groups_per_file=1, rows_per_group=3)
    return root


@pytest.mark.parametrize("again", ["A", "./A/", "ABS", "A//"])
def test_stream_refuses_one_source_given_twice_under_any_spelling(t2i: Path, again: str) -> None:
    second = str(t2i) if again == "ABS" else again
    done = run_cli("stream", "A", second, "--samples", "2", cwd=t2i.parent)
    assert done.returncode == 2, done.stderr
    message = " ".join(error_lines(done))
    assert f"names {t2i} twice" in message and "streamed twice" in message


def test_stream_of_two_sources_still_reads_both(t2i: Path, tmp_path: Path) -> None:
    other = tmp_path / "B"
    write_synthetic_dataset(str(other), schema="t2i_pretrain", num_files=1, row_groups_per_file=1, rows_per_group=3)
    done = run_cli("stream", str(t2i), str(other), "--samples", "2")
    assert done.returncode == 0, done.stderr
    assert '"units": 3' in done.stdout


def test_a_dataset_refuses_a_data_dir_listed_twice(t2i: Path) -> None:
    for second in (str(t2i) + "/", os.path.relpath(t2i)):
        with pytest.raises(ValueError, match=f"dataset 't2i_pretrain': data_dir_list names {t2i} twice"):
            T2IIterableDataset(
                "t2i_pretrain", ImageTransform(**VAE), ByteTokenizer(), [str(t2i), second], [2, 2], num_workers=0
            )


def test_a_jsonl_dataset_refuses_a_jsonl_with_its_media_listed_twice(tmp_path: Path) -> None:
    write_synthetic_vlm_dataset(str(tmp_path / "vlm"), num_lines=4, bad_rows=False)
    jsonl, media = str(tmp_path / "vlm" / "data.jsonl"), str(tmp_path / "vlm" / "media")

    def dataset(jsonls: list[str], dirs: list[str]) -> SftJSONLIterableDataset:
        transform = ImageTransform(**VAE)
        return SftJSONLIterableDataset(
            "vlm", transform, ByteTokenizer(), None, jsonls, dirs, [4] * len(jsonls), num_workers=0
        )

    with pytest.raises(ValueError, match="names .*data.jsonl .*media twice"):
        dataset([jsonl, jsonl], [media, media + "/"])
    assert dataset([jsonl, jsonl], [media, str(tmp_path / "vlm")])  # one JSONL, media found in two places


def test_spellings_of_one_place_agree_and_other_places_or_adapters_do_not() -> None:
    from editstream.data.units import repeated_sources

    assert repeated_sources(["s3://b/p", "s3://b/p/"]) == [("s3://b/p", "s3://b/p/")]
    assert repeated_sources(["s3://b/p", "s3a://b/p"]) == [("s3://b/p", "s3a://b/p")]
    assert repeated_sources(["s3://b/p", "s3://b/q", "s3://c/p"]) == []
    forward, inverse = resolve_mapping("hqedit"), resolve_mapping("hqedit-inverse")
    once = [InPlace("/d/hq", forward), InPlace("/d/hq", inverse), InPlace("/d/hq", forward, where="1 == 1")]
    assert repeated_sources(once) == []  # the same files read as other chains: not a repeat
    assert len(repeated_sources([InPlace("/d/hq", forward), InPlace("/d/hq/", forward)])) == 1


# --------------------------------------------------------------------------- a Hub cache's snapshots
def two_snapshots(cache: Path) -> tuple[str, str]:
    """A second snapshot beside the cache folder's one (its files linked as the Hub does), ``refs/main`` gone."""
    (cache / "refs" / "main").unlink(missing_ok=True)
    (first,) = sorted(p.name for p in (cache / "snapshots").iterdir())
    shutil.copytree(cache / "snapshots" / first, cache / "snapshots" / "0aa1bb2", symlinks=True)
    return first, "0aa1bb2"


def test_a_hub_cache_with_two_snapshots_and_no_refs_main_is_refused_listing_them(tmp_path: Path) -> None:
    data, expected = magicbrush(tmp_path / "datasets--osunlp--MagicBrush")
    cache = data.parent.parent.parent
    first, second = two_snapshots(cache)
    dst = tmp_path / "out"
    refused = run_cli("convert", str(cache), str(dst), "--from", "magicbrush", "--to", "parquet")
    assert refused.returncode == 2, refused.stderr
    message = " ".join(error_lines(refused))
    assert "2 snapshots" in message and first in message and second in message and "refs/main" in message
    assert f"pass the snapshot folder itself, e.g. {cache / 'snapshots' / second}" in message
    assert not dst.exists()  # refused before anything is written
    streamed = run_cli("stream", str(cache), "--from", "magicbrush", "--samples", "2")
    assert streamed.returncode == 2 and "2 snapshots" in streamed.stderr
    chosen = run_cli("convert", str(cache / "snapshots" / first), str(dst), "--from", "magicbrush", "--to", "parquet")
    assert chosen.returncode == 0, chosen.stderr
    assert chains_in(dst) == Counter(expected)
    (cache / "refs").mkdir(exist_ok=True)
    (cache / "refs" / "main").write_text(first)  # refs/main names the one: read as before
    named = run_cli("convert", str(cache), str(tmp_path / "out2"), "--from", "magicbrush", "--to", "parquet")
    assert named.returncode == 0, named.stderr
    assert f"reading {cache / 'snapshots' / first / 'data'}" in named.stderr


def test_a_metadata_hub_cache_with_two_snapshots_is_refused_too(tmp_path: Path) -> None:
    root, _ = x2i(tmp_path / "x2i")
    cache = as_hub_cache(root, tmp_path / "datasets--yzwang--X2I-mm-instruction")
    first, second = two_snapshots(cache)
    refused = run_cli("convert", str(cache), str(tmp_path / "out"), "--from", "x2i", "--to", "parquet")
    assert refused.returncode == 2, refused.stderr
    assert f"2 snapshots ({second}, {first})" in " ".join(error_lines(refused))


# --------------------------------------------------------------------------- metadata that cannot be parsed
DEEP = 100_000
MAPPING = """name: folder-edits
metadata: ["meta/*.json*"]
media: ["images"]
images: [input, output]
instructions:
  - column: instruction
    format: string
"""


def metadata_with_bad_files(root: Path) -> None:
    """Four metadata files over one image folder: a good JSON list (3 edits), a JSON list nested ``DEEP`` deep,
    a JSON list that is not UTF-8, and a JSONL (4 lines) whose second line is nested ``DEEP`` deep and whose
    third is not UTF-8."""
    (root / "images").mkdir(parents=True)
    (root / "meta").mkdir()

    def entry(k: int) -> str:
        (root / "images" / f"{k}a.png").write_bytes(png(k))
        (root / "images" / f"{k}b.png").write_bytes(png(100 + k))
        return json.dumps({"input": f"images/{k}a.png", "output": f"images/{k}b.png", "instruction": f"edit {k}"})

    (root / "meta" / "a.json").write_text(f"[{', '.join(entry(k) for k in range(3))}]")
    (root / "meta" / "b.json").write_text("[" * DEEP + "]" * DEEP)
    (root / "meta" / "c.json").write_bytes(f"[{entry(3)}]".replace("edit", "\udcff").encode(errors="surrogateescape"))
    lines = [entry(k).encode() for k in range(4, 8)]
    lines[1] = b'{"input": ' + b"[" * DEEP + b"]" * DEEP + b"}"
    lines[2] = lines[2].replace(b"edit", b"\xff\xfe")
    (root / "meta" / "d.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def test_metadata_nested_too_deep_or_not_utf8_is_a_located_drop_and_the_rest_converts(tmp_path: Path) -> None:
    metadata_with_bad_files(tmp_path / "ds")
    (tmp_path / "m.yaml").write_text(MAPPING)
    dst = tmp_path / "out"
    done = run_cli("convert", str(tmp_path / "ds"), str(dst), "--mapping", str(tmp_path / "m.yaml"), "--to", "parquet")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)["adapt"]
    assert (summary["chains_out"], summary["dropped_by_code"]) == (5, {"bad_json": 4})
    report = json.loads((dst / "adapt_report.json").read_text())
    located = {(d["file"], d["row"]): d["reason"] for d in report["drops"]}
    assert sorted(located) == [("meta/b.json", 0), ("meta/c.json", 0), ("meta/d.jsonl", 1), ("meta/d.jsonl", 2)]
    assert "nested deeper" in located[("meta/b.json", 0)] and "utf-8" in located[("meta/c.json", 0)]
    assert "line 2" in located[("meta/d.jsonl", 1)] and "nested deeper" in located[("meta/d.jsonl", 1)]
    assert "line 3" in located[("meta/d.jsonl", 2)] and "utf-8" in located[("meta/d.jsonl", 2)]
    assert sorted(texts[0][0] for _, texts in chains_in(dst)) == ["edit 0", "edit 1", "edit 2", "edit 4", "edit 7"]


# --------------------------------------------------------------------------- --from forgotten
@pytest.mark.parametrize("given", ["cache", "snapshot", "data"])
def test_a_hub_download_converted_without_from_names_the_adapter_that_fits(tmp_path: Path, given: str) -> None:
    data, expected = hqedit(tmp_path / "datasets--UCSC-VLAA--HQ-Edit")
    src = {"cache": data.parent.parent.parent, "snapshot": data.parent, "data": data}[given]
    dst = tmp_path / "out"
    refused = run_cli("convert", str(src), str(dst))
    assert refused.returncode == 2, refused.stderr
    message = " ".join(error_lines(refused))
    assert f"editstream convert {src} {dst} --from hqedit" in message and "also fits: hqedit-inverse" in message
    assert "--schema generic" not in message and "reading" not in refused.stderr
    assert not dst.exists()
    wrong = run_cli("convert", str(data), str(dst), "--schema", "unified_edit")
    assert wrong.returncode == 2 and "--from hqedit" in " ".join(error_lines(wrong))
    followed = run_cli("convert", str(src), str(dst), "--from", "hqedit", "--to", "parquet")
    assert followed.returncode == 0, followed.stderr
    assert chains_in(dst) == Counter(expected)


@pytest.mark.parametrize(("shape", "name"), [(ultraedit, "ultraedit"), (magicbrush, "magicbrush")])
def test_each_published_schema_names_its_own_adapter(tmp_path: Path, shape, name: str) -> None:
    data, _ = shape(tmp_path / "hub")
    refused = run_cli("convert", str(data), str(tmp_path / "out"))
    message = " ".join(error_lines(refused))
    assert f"--from {name}" in message and "also fits" not in message, refused.stderr


def test_columns_no_adapter_reads_still_get_the_schema_advice(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "odd").mkdir()
    pq.write_table(pa.table({"picture": [b"x"], "words": ["y"]}), tmp_path / "odd" / "part-0.parquet")
    refused = run_cli("convert", str(tmp_path / "odd"), str(tmp_path / "out"))
    assert refused.returncode == 2
    message = " ".join(error_lines(refused))
    assert "--schema generic converts the rows as they are" in message and "--from" not in message
