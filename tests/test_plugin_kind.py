"""The example plug-in kinds (examples/plugin_kind), installed with real pip, work end to end: the parquet
kind ``subject_driven`` from the CLI, the JSONL + media kind ``edit_pairs`` through ``open_data``,
``convert`` and its dataset on both backends.

The package is installed into a temporary directory (``pip install --target``) that only this
file's subprocesses see on their PYTHONPATH, so the rest of the suite never meets the kinds.
Nothing in editstream names them: everything below comes through the ``editstream.kinds`` entry point.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from typing import Any

import pytest

from helpers import ROOT, SRC_DIR, run_cli

KIND = "subject_driven"
EXAMPLE = ROOT / "examples" / "plugin_kind"


@pytest.fixture(scope="session")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PYTHONPATH with the example installed by pip (no deps: editstream is this checkout), built from a
    copy so setuptools' build/ and egg-info land in a temporary directory, not in the checkout."""
    target = tmp_path_factory.mktemp("plugin-site")
    source = tmp_path_factory.mktemp("plugin-src") / "plugin_kind"
    shutil.copytree(EXAMPLE, source)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
        + ["--target", str(target), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )
    return {"PYTHONPATH": os.pathsep.join([str(target), str(SRC_DIR)])}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``editstream ARGS`` with the plug-in installed; fails the test (with stderr) on a non-zero exit."""
    result = run_cli(*args, env=env)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def data(plugin_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A synthetic subject-driven parquet source with planted bad rows, converted with the kind detected."""
    root = tmp_path_factory.mktemp("subject")
    synth = cli(plugin_env, "synth", str(root / "pq"), "--schema", KIND, "--rows", "3", "--max-side", "64")
    synth_args = ("--seed", "4", "--corrupt-fraction", "0.25", "--no-progress")
    summary = json.loads(cli(plugin_env, "-q", "synth", str(root / "bad"), "--schema", KIND, *synth_args).stdout)
    converted = json.loads(cli(plugin_env, "convert", str(root / "pq"), str(root / "wds"), "--no-progress").stdout)
    return {"root": root, "synth": json.loads(synth.stdout), "bad": summary, "convert": converted}


def test_the_example_builds_on_editstream_plugin_alone():
    """A plug-in author needs one editstream module: the example imports nothing else of editstream."""
    imported = set()
    for path in sorted((EXAMPLE / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level:
                imported.add(node.module or "")
    assert {name for name in imported if name.split(".")[0] == "editstream"} == {"editstream.plugin"}


def test_the_kind_is_offered_only_where_the_package_is_installed(plugin_env):
    for command in ("synth", "convert", "stream"):
        assert KIND in cli(plugin_env, command, "--help").stdout
    assert KIND not in run_cli("synth", "--help").stdout


def test_synth_writes_the_kind_and_plants_its_bad_rows(data):
    summary, bad = data["synth"], data["bad"]
    assert summary["schema"] == KIND and summary["num_rows"] == 2 * 2 * 3
    assert [os.path.basename(f) for f in summary["files"]] == ["part-00000.parquet", "part-00001.parquet"]
    assert bad["num_rows"] == 32 and len(bad["corrupt_rows"]) == 8
    assert {r["kind"] for r in bad["corrupt_rows"]} == {"garbage_target", "no_references", "empty_prompt"}


def test_convert_detects_the_kind_and_verify_checks_every_row(data, plugin_env):
    root = data["root"]
    assert data["convert"]["schema"] == KIND
    manifest = json.loads((root / "wds" / "manifest.json").read_text())
    assert manifest["schema"] == KIND and sum(s["num_samples"] for s in manifest["shards"]) == 12
    report = cli(plugin_env, "verify", str(root / "wds"), "--source", str(root / "pq"), "--json", "--no-progress")
    assert json.loads(report.stdout)["ok"] is True


def test_convert_by_alias_reports_the_planted_bad_rows(data, plugin_env):
    root = data["root"]
    dst = root / "bad-wds"
    summary = json.loads(cli(plugin_env, "convert", str(root / "bad"), str(dst), "--schema", "subject").stdout)
    assert summary["schema"] == KIND
    report = json.loads((dst / "report.json").read_text())
    planted = {(os.path.basename(r["file"]), r["row_group"], r["row"]) for r in data["bad"]["corrupt_rows"]}
    assert {(r["file"], r["row_group"], r["row"]) for r in report["bad_rows"]} == planted
    assert {r["fails"] for r in report["bad_rows"]} == {"always"}
    bad_schema = run_cli("convert", str(root / "bad"), str(root / "other"), "--schema", "t2i", env=plugin_env)
    assert bad_schema.returncode == 2 and f"pass --schema {KIND}" in bad_schema.stderr


def test_inspect_shows_the_kind_and_its_images(data, plugin_env):
    info = json.loads(cli(plugin_env, "inspect", str(data["root"] / "wds"), "--no-progress").stdout)
    assert info["schema"] == KIND and info["samples"] == 12
    assert min(int(n) for n in info["images_per_sample"]) >= 2  # at least one reference and the target


@pytest.mark.parametrize("source", ["pq", "wds"])
def test_preview_draws_references_prompt_and_target(data, plugin_env, source):
    out = data["root"] / f"preview-{source}.html"
    cli(plugin_env, "preview", str(data["root"] / source), "-o", str(out), "-n", "5")
    page = out.read_text()
    assert page.count(f'<section class="record {KIND}">') == 5
    assert page.count('class="edit">the subject in ') == 5  # the prompt sits before the target image


def test_stream_gives_the_same_samples_and_tokens_on_both_backends(data, plugin_env):
    runs = {}
    for source in ("pq", "wds"):
        out = cli(plugin_env, "stream", str(data["root"] / source), "--samples", "12", "--seed", "3").stdout
        runs[source] = json.loads(out)
    assert runs["pq"]["backend"] == "parquet" and runs["wds"]["backend"] == "webdataset"
    for summary in runs.values():
        assert summary["schema"] == KIND and summary["samples"] == 12
    assert runs["pq"]["tokens"] == runs["wds"]["tokens"] > 0


def run_python(env: dict[str, str], code: str) -> Any:
    """Run ``code`` with the plug-in installed; it prints one JSON value, returned here."""
    full = {**os.environ, **env}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_dataset_class_yields_identical_samples_on_both_backends(data, plugin_env):
    samples = run_python(
        plugin_env,
        f"""
        import json, random
        from editstream import ByteTokenizer, ImageTransform
        from editstream.kinds import get_kind

        cls = get_kind("subject").dataset_class()
        out = {{}}
        for backend, sub in (("parquet", "pq"), ("webdataset", "wds")):
            ds = cls("{KIND}", ImageTransform(64, 32, 16), ByteTokenizer(), ImageTransform(56, 28, 14),
                     [{str(data["root"])!r} + "/" + sub], [2], num_workers=1, backend=backend)
            ds.set_epoch(5)
            random.seed(5)
            it = iter(ds)
            out[backend] = [
                [s["data_indexes"]["data_indexes"], s["text_ids_list"], s["num_tokens"],
                 [item["type"] + str(item["loss"]) for item in s["sequence_plan"]],
                 [float(t.sum()) for t in s["image_tensor_list"]]]
                for s in (next(it) for _ in range(12))
            ]
        print(json.dumps(out))
        """,
    )
    assert samples["parquet"] == samples["webdataset"]
    for _, _, _, plan, _ in samples["parquet"]:
        assert plan[-2:] == ["text0", "vae_image1"]  # the prompt, then the target with the loss
        assert plan[:2] == ["vae_image0", "vit_image0"]  # a reference image: conditioning only


def first_packed_batch(env: dict[str, str], kind: str, data_dir: str, num_used: int) -> list[Any]:
    """A recipe group named after ``kind`` (with a ViT transform) over the converted ``data_dir``, packed by
    ``make_bagel_multimodal_dataset``: the dataset names of its first batch, and whether it holds ViT tokens."""
    return run_python(
        env,
        f"""
        import json
        from editstream import ByteTokenizer, make_bagel_multimodal_dataset

        tokenizer = ByteTokenizer()
        group = {{"dataset_names": ["entry"], "weight": 1.0, "num_used_data": [{num_used}], "backend": "webdataset",
                  "image_transform_args": dict(max_image_size=64, min_image_size=32, image_stride=16),
                  "vit_image_transform_args": dict(max_image_size=56, min_image_size=28, image_stride=14)}}
        packer = make_bagel_multimodal_dataset(
            tokenizer=tokenizer, special_tokens=tokenizer.special_token_ids(),
            grouped_datasets={{"{kind}": group}},
            dataset_info={{"{kind}": {{"entry": {{"data_dir": {data_dir!r}}}}}}},
            local_rank=0, world_size=1, num_workers=0, expected_num_tokens=2048, max_num_tokens=2304,
            max_num_tokens_per_sample=2048, prefer_buffer_before=1024, max_buffer_size=4, data_seed=1,
        )
        packer.set_epoch(1)
        batch = next(iter(packer))
        print(json.dumps([sorted({{d["dataset_name"] for d in batch["batch_data_indexes"]}}),
                          "packed_vit_tokens" in batch]))
        """,
    )


def test_a_recipe_group_named_after_the_kind_packs_its_samples(data, plugin_env):
    assert first_packed_batch(plugin_env, KIND, str(data["root"] / "wds"), 2) == [[KIND], True]


# --------------------------------------------------------------------------- the JSONL + media kind

PAIRS = "edit_pairs"


@pytest.fixture(scope="module")
def pairs(plugin_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A JSONL of 10 edit pairs and their images, written by the kind's synth function (3 bad lines planted),
    converted with ``editstream.convert`` (the kind named: JSONL files are the VLM kind's unless told)."""
    root = tmp_path_factory.mktemp("pairs")
    args = ("--files", "1", "--row-groups", "1", "--rows", "10", "--max-side", "64", "--corrupt-fraction", "0.3")
    synth = json.loads(cli(plugin_env, "-q", "synth", str(root / "src"), "--schema", "pairs", *args).stdout)
    convert = f"""
        import json, editstream
        summary = editstream.convert({synth["jsonl"]!r}, {str(root / "wds")!r}, schema="pairs",
                                     media_dir={synth["media_dir"]!r}, progress=False)
        print(json.dumps(summary["schema"]))
        """
    return {"root": root, "synth": synth, "schema": run_python(plugin_env, convert)}


def test_synth_writes_a_jsonl_its_images_and_the_planted_bad_lines(pairs):
    synth, root = pairs["synth"], pairs["root"]
    assert synth["schema"] == PAIRS and synth["num_lines"] == 10
    lines = [json.loads(line) for line in (root / "src" / "data.jsonl").read_text().splitlines()]
    assert len(lines) == 10 and all(len(line["image"]) == 2 for line in lines)
    assert sorted(synth["bad_lines"].values()) == ["garbage_before", "missing_after", "no_instruction"]
    written = {str(p.relative_to(root / "src" / "media")) for p in (root / "src" / "media").rglob("*.*")}
    named = {name for line in lines for name in line["image"]}
    assert written < named and len(named - written) == 1  # every image named, but the one planted missing


def test_convert_records_the_kind_and_reports_each_planted_line(pairs):
    root = pairs["root"]
    assert pairs["schema"] == PAIRS
    manifest = json.loads((root / "wds" / "manifest.json").read_text())
    assert manifest["schema"] == PAIRS and manifest["extra"][PAIRS]["num_lines"] == 10
    report = json.loads((root / "wds" / "report.json").read_text())
    found = {r["line"]: r["reason"] for r in report["bad_rows"]}
    planted = {int(line): kind for line, kind in pairs["synth"]["bad_lines"].items()}
    assert sorted(found) == sorted(planted)
    said = {
        "garbage_before": "_before.",
        "missing_after": "missing media 'pairs/",
        "no_instruction": "instruction is ''",
    }
    assert all(said[kind] in found[line] for line, kind in planted.items()), found


def test_open_data_reads_the_same_rows_and_samples_on_both_backends(pairs, plugin_env):
    """The JSONL and its media (parquet backend, the kind named) and the converted root (webdataset backend, the
    kind read from its manifest): the same raw rows, and the kind's dataset yields the same samples."""
    synth = pairs["synth"]
    found = run_python(
        plugin_env,
        f"""
        import hashlib, itertools, json, editstream
        from editstream import ByteTokenizer, ImageTransform

        def digest(blob):
            return None if blob is None else hashlib.sha256(blob).hexdigest()

        out = {{}}
        for path, given in (({synth["jsonl"]!r}, dict(kind="pairs", media_dir={synth["media_dir"]!r})),
                            ({str(pairs["root"] / "wds")!r}, {{}})):
            handle = editstream.open_data(path, **given)
            rows = [r.row.record()[0] for r in editstream.iter_rows(path, **given)]
            cls = handle.kind.dataset_class()
            ds = cls(handle.kind.name, ImageTransform(64, 32, 16), ByteTokenizer(), num_workers=1,
                     **handle.dataset_arguments())
            units, _ = ds.get_data_paths_per_worker()
            samples = [
                [json.loads(units[s["data_indexes"]["data_indexes"]].line)["id"], s["text_ids_list"], s["num_tokens"],
                 [item["type"] + str(item["loss"]) for item in s["sequence_plan"]],
                 [float(t.sum()) for t in s["image_tensor_list"]]]
                for s in itertools.islice(ds, 7)
            ]
            out[str(handle.backend)] = {{
                "kind": handle.kind.name, "class": cls.__name__, "drops": ds.drop_counts, "samples": samples,
                "order": [json.loads(unit.line)["id"] for unit in units],
                "rows": [[r["line"], {{name: digest(blob) for name, blob in r["media"].items()}}] for r in rows],
            }}
        print(json.dumps(out))
        """,
    )
    source, converted = found["parquet"], found["webdataset"]
    assert source["kind"] == converted["kind"] == PAIRS and source["class"] == "EditPairsIterableDataset"
    assert source["rows"] == converted["rows"] and len(source["rows"]) == 10
    assert [None in media.values() for _, media in source["rows"]].count(True) == 1  # the planted missing image
    assert source["samples"] == converted["samples"]
    planted = {f"line-{int(line) - 1:05d}": kind for line, kind in synth["bad_lines"].items()}
    order = source["order"]
    assert order == converted["order"] and sorted(order) == [f"line-{i:05d}" for i in range(10)]
    assert [s[0] for s in source["samples"]] == [i for i in order if i not in planted]  # each bad line dropped
    for _, _, tokens, plan, _ in source["samples"]:
        assert plan == ["vae_image0", "text0", "vae_image1"] and tokens > 0  # before, instruction, after (the loss)
    last = order.index(source["samples"][-1][0])  # the drops counted by the last sample: the bad lines before it
    reason = {"garbage_before": "jsonl_parse", "missing_after": "jsonl_parse", "no_instruction": "bad_row"}
    expected = Counter(reason[planted[i]] for i in order[:last] if i in planted)
    assert source["drops"] == converted["drops"] == dict(expected)


def test_stream_and_a_recipe_group_read_the_jsonl_kind(pairs, plugin_env):
    synth, root = pairs["synth"], pairs["root"]
    given = ("--samples", "7", "--seed", "1")
    on_source = cli(plugin_env, "stream", synth["jsonl"], "--schema", PAIRS, "--media-dir", synth["media_dir"], *given)
    on_shards = json.loads(cli(plugin_env, "stream", str(root / "wds"), *given).stdout)
    assert json.loads(on_source.stdout)["tokens"] == on_shards["tokens"] > 0 and on_shards["schema"] == PAIRS
    packed = first_packed_batch(plugin_env, PAIRS, str(root / "wds"), 10)
    assert packed == [[PAIRS], True]  # the group's ViT transform makes the image before a ViT item too
