"""The command line as a user meets it: every everyday mistake ends in one or two lines that say
what is wrong and how to fix it, with exit code 2 (the command line must change) or 1 (the data
or storage is the problem); --debug shows the traceback; -q and -v set how much is said.

Every test drives the real CLI in a subprocess (``run_cli``) on this checkout's code.
"""

from __future__ import annotations

import json
import shutil

import pytest

from editstream.format import manifest as mf
from editstream.format.detect import PROGRESS_DIR_NAME
from helpers import error_lines, run_cli, synth_and_convert


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Edit data (with bad rows) and T2I data, each as parquet (``pq``) and converted (``wds``)."""
    root = tmp_path_factory.mktemp("cli")
    synth_and_convert(
        root / "edit", num_files=2, row_groups_per_file=2, rows_per_group=6, seed=3, corrupt_fraction=0.3, max_side=48
    )
    synth_and_convert(
        root / "t2i", schema="t2i_pretrain", num_files=2, row_groups_per_file=2, rows_per_group=3, seed=4, max_side=48
    )
    return root


def assert_error(result, code: int, *needles: str) -> None:
    """Exit ``code``, one or two lines on stderr, the first starting ``Error:``, each needle present."""
    lines = error_lines(result)
    assert result.returncode == code, (result.returncode, result.stderr)
    assert 1 <= len(lines) <= 2 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


@pytest.mark.parametrize("command", [["convert", "nowhere", "out"], ["verify", "nowhere"], ["inspect", "nowhere"]])
def test_a_missing_path_is_named(data, command):
    assert_error(run_cli(*command, cwd=data), 1, "nowhere does not exist (relative to", "check the path")


def test_stream_of_a_missing_path(data):
    assert_error(run_cli("stream", "nowhere", cwd=data), 1, "DATA nowhere does not exist")


def test_a_parquet_file_given_for_its_directory(data):
    result = run_cli("convert", "edit/pq/part-00000.parquet", "out", cwd=data)
    assert_error(result, 2, "is a file", "give its directory: editstream convert edit/pq DST")


def test_convert_with_a_schema_the_columns_do_not_have(data):
    result = run_cli("convert", "edit/pq", "out", "--schema", "t2i", cwd=data)
    assert_error(result, 2, "--schema t2i_pretrain needs columns ['image', 'captions']", "pass --schema unified_edit")
    assert not (data / "out").exists()


@pytest.mark.parametrize("command", ["verify", "inspect"])
def test_a_shard_given_for_its_root(data, command):
    result = run_cli(command, "edit/wds/part-00000-rg00000.tar", cwd=data)
    assert_error(result, 2, "is one shard, not a converted dataset root", f"editstream {command} edit/wds")


def test_a_parquet_directory_given_to_verify(data):
    assert_error(
        run_cli("verify", "edit/pq", cwd=data), 2, "parquet data, not a converted", "editstream convert edit/pq"
    )


def test_shard_size_implies_the_size_layout(data, tmp_path):
    result = run_cli("convert", "edit/pq", str(tmp_path / "out"), "--shard-size", "20kB", "--no-progress", cwd=data)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["layout"] == "size"


def test_shard_size_with_the_rowgroup_layout_asked_for(data, tmp_path):
    result = run_cli("convert", "edit/pq", str(tmp_path / "o"), "--layout", "rowgroup", "--shard-size", "1MB", cwd=data)
    assert_error(result, 2, "--layout rowgroup makes one shard per row group", "use --layout size")


def test_a_size_that_is_not_a_size(data, tmp_path):
    result = run_cli("convert", "edit/pq", str(tmp_path / "o"), "--shard-size", "banana", cwd=data)
    assert_error(result, 2, "cannot read size 'banana'", "editstream convert -h")


@pytest.mark.slow
def test_stream_reads_the_schema_from_the_manifest(data):
    for spelling in ([], ["--schema", "t2i"], ["--schema", "t2i_pretrain"]):
        result = run_cli("stream", "t2i/wds", "--samples", "3", *spelling, cwd=data)
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        assert (summary["schema"], summary["backend"], summary["samples"]) == ("t2i_pretrain", "webdataset", 3)


@pytest.mark.parametrize(
    ("path", "schema", "holds", "source"),
    [
        ("t2i/wds", "unified_edit", "t2i_pretrain", "manifest.json"),
        ("edit/pq", "t2i", "unified_edit", "its columns"),
    ],
)
def test_stream_with_the_wrong_schema_fails_before_reading(data, path, schema, holds, source):
    result = run_cli("stream", path, "--schema", schema, cwd=data)
    assert_error(result, 2, f"holds {holds} data ({source})", f"pass --schema {holds} or leave --schema out")


def test_the_wrong_backend_names_the_right_one(data):
    result = run_cli("stream", "edit/pq", "--backend", "webdataset", cwd=data)
    assert_error(result, 2, "holds parquet files, not converted shards", "use --backend parquet")
    result = run_cli("stream", "edit/wds", "--backend", "parquet", cwd=data)
    assert_error(result, 2, "holds converted WebDataset shards", "use --backend webdataset")


@pytest.mark.slow
def test_auto_backend_reads_either(data):
    for path, backend in (("edit/pq", "parquet"), ("edit/wds", "webdataset")):
        result = run_cli("-q", "stream", path, "--samples", "4", cwd=data)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["backend"] == backend


def test_convert_refuses_a_dst_holding_other_files(data, tmp_path):
    dst = tmp_path / "mine"
    dst.mkdir()
    (dst / "notes.txt").write_text("keep me")
    result = run_cli("convert", "edit/pq", str(dst), "--no-progress", cwd=data)
    assert_error(result, 2, "holds files editstream did not write (notes.txt)", "--overwrite")
    assert sorted(p.name for p in dst.iterdir()) == ["notes.txt"]
    result = run_cli("convert", "edit/pq", str(dst), "--overwrite", "--no-progress", cwd=data)
    assert result.returncode == 0, result.stderr
    assert (dst / "notes.txt").read_text() == "keep me"
    assert (dst / "manifest.json").exists()


def test_a_new_source_into_an_unfinished_dst_leaves_no_orphans(data, tmp_path):
    """An interrupted conversion of one source, then another source into the same DST: only the
    new plan's shards are left, so globbing *.tar reads exactly what the manifest lists."""
    dst = tmp_path / "dst"
    first = run_cli("convert", "edit/pq", str(dst), "--samples-per-shard", "1", "--no-progress", cwd=data)
    assert first.returncode == 0, first.stderr
    (dst / "manifest.json").unlink()  # as if interrupted before the end
    (dst / PROGRESS_DIR_NAME).mkdir(exist_ok=True)
    assert len(list(dst.glob("*.tar"))) == 24
    second = run_cli("convert", "t2i/pq", str(dst), "--no-progress", cwd=data)
    assert second.returncode == 0, second.stderr
    listed = {s.path for s in mf.Manifest.read(str(dst)).shards}
    assert {p.name for p in dst.glob("*.tar")} == listed and len(listed) == 4
    assert "removed 48 shard and idx files of an earlier conversion" in second.stderr


def test_dry_run_prints_the_plan_and_writes_nothing(data, tmp_path):
    dst = tmp_path / "planned"
    result = run_cli("convert", "edit/pq", str(dst), "--dry-run", cwd=data)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert (plan["dry_run"], plan["source_files"], plan["row_groups"], plan["rows"], plan["shards"]) == (
        True,
        2,
        4,
        24,
        4,
    )
    assert plan["estimated_output_bytes"] > plan["source_bytes"] > 0
    assert plan["dst_state"] == "new or empty"
    assert not dst.exists()


def test_debug_shows_the_traceback(data):
    result = run_cli("--debug", "stream", "edit/pq", "--backend", "webdataset", cwd=data)
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "UsageProblem" in result.stderr


@pytest.mark.slow
def test_drop_lines_use_the_report_vocabulary_and_the_paths_given(data):
    report = json.loads((data / "edit" / "wds" / "report.json").read_text())
    reasons = {b["reason"] for b in report["bad_rows"]}
    for path, where in (("edit/pq", "file=edit/pq/part-"), ("edit/wds", "shard=edit/wds/part-")):
        result = run_cli("stream", path, "--samples", "40", cwd=data)
        assert result.returncode == 0, result.stderr
        lines = [line for line in result.stderr.splitlines() if "dropped" in line]
        assert lines, result.stderr
        for line in lines:
            assert where in line and "0x" not in line and "Cannot choose" not in line, line
            assert any(line.endswith(reason) for reason in reasons), (line, reasons)
        locations = [line.split(" at ", 1)[1] for line in lines]
        assert len(locations) == len(set(locations))  # each drop logged once
        summary = json.loads(result.stdout)
        assert summary["drops"]["bad_row"] >= len(lines)


def test_drops_in_dataloader_workers_reach_the_summary(data):
    result = run_cli("stream", "edit/pq", "--samples", "40", "--workers", "2", cwd=data)
    assert result.returncode == 0, result.stderr
    logged = [line for line in result.stderr.splitlines() if "dropped" in line]
    assert logged
    assert json.loads(result.stdout)["drops"]["bad_row"] >= len(logged)


@pytest.mark.slow
def test_quiet_and_verbose(data):
    quiet = run_cli("-q", "stream", "edit/pq", "--samples", "40", cwd=data)
    assert quiet.returncode == 0 and quiet.stderr == ""
    verbose = run_cli("-v", "stream", "edit/pq", "--samples", "4", cwd=data)
    assert (
        verbose.returncode == 0 and "info: rank-0 worker-0 dataset-unified_edit: starting at unit 0" in verbose.stderr
    )


def test_inspect_lists_keys_and_extracts_a_sample(data, tmp_path):
    listing = run_cli("inspect", "edit/wds", "--list", cwd=data)
    assert listing.returncode == 0, listing.stderr
    keys = [line.split("\t") for line in listing.stdout.splitlines()]
    m = mf.Manifest.read(str(data / "edit" / "wds"))
    assert len(keys) == m.num_samples and keys[0] == ["part-00000-rg00000-r0000000", "part-00000-rg00000.tar"]
    out = tmp_path / "sample"
    extract = run_cli("inspect", "edit/wds", "--extract", keys[7][0], str(out), cwd=data)
    assert extract.returncode == 0, extract.stderr
    written = sorted(p.name for p in out.iterdir())
    assert f"{keys[7][0]}.json" in written and any(".image_list.0." in name for name in written)
    missing = run_cli("inspect", "edit/wds", "--extract", "no-such-key", str(out), cwd=data)
    assert_error(missing, 1, "no sample with key 'no-such-key'", "--list")


def test_progress_is_plain_lines_off_a_terminal(data, tmp_path):
    result = run_cli(
        "convert", "edit/pq", str(tmp_path / "p"), "--workers", "1", cwd=data, env={"EDITSTREAM_PROGRESS_SECONDS": "0"}
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("convert: ")]
    assert lines[-1].startswith("convert: 4/4 shards (100%)") and "\r" not in result.stderr
    assert len(lines) >= 4
    for command in (["verify", str(tmp_path / "p")], ["inspect", str(tmp_path / "p")]):
        checked = run_cli(*command, cwd=data)
        assert checked.returncode == 0 and f"{command[0]}: " in checked.stderr, checked.stderr
    none = run_cli("convert", "edit/pq", str(tmp_path / "q"), "--no-progress", cwd=data)
    assert none.returncode == 0 and "convert: " not in none.stderr


def test_progress_bar_on_a_terminal(tmp_path):
    import fcntl
    import os
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal 120 wide
    try:
        result = run_cli(
            "synth", str(tmp_path / "s"), "--files", "1", "--row-groups", "1", "--rows", "4", stderr=follower
        )
        os.close(follower)
        follower = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert result.returncode == 0
    assert b"synth: 100%" in drawn and b"\r" in drawn


def test_a_partial_dst_says_how_far_it_got(data, tmp_path):
    dst = tmp_path / "half"
    done = run_cli("convert", "edit/pq", str(dst), "--no-progress", cwd=data)
    assert done.returncode == 0
    (dst / "manifest.json").unlink()
    records = dst / PROGRESS_DIR_NAME
    records.mkdir()
    (records / "_plan").write_text(json.dumps({"num_shards": 4, "src": str(data / "edit" / "pq")}))
    for name in ("part-00000-rg00000.tar", "part-00000-rg00001.tar"):
        (records / f"{name}.json").write_text("{}")
    for command in ("verify", "inspect"):
        result = run_cli(command, str(dst))
        assert_error(result, 1, "is an unfinished conversion (2/4 shards done", "re-run `editstream convert")
    shutil.rmtree(dst)


@pytest.mark.slow
def test_ctrl_c_exits_130_and_says_a_rerun_resumes(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from editstream.sandbox.synth import write_synthetic_dataset
    from helpers import SRC_DIR, paused_convert_command

    src, dst = tmp_path / "src", tmp_path / "dst"
    write_synthetic_dataset(str(src), num_files=1, row_groups_per_file=4, rows_per_group=100, max_side=48, seed=5)
    options = [str(src), str(dst), "--samples-per-shard", "1", "--workers", "1", "--no-progress"]
    command = [sys.executable, "-m", "editstream.cli", "convert", *options]
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR)}
    proc = subprocess.Popen(
        paused_convert_command(5, *options),  # Ctrl-C lands inside the 6th shard, 5 finished
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a shell may start us ignoring it
    )
    try:
        paused = proc.stdout.readline() if proc.stdout else ""
        assert paused == "paused\n", proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted; re-run the same command to resume"
    assert not (dst / "manifest.json").exists()
    partial = run_cli("verify", str(dst))
    assert_error(partial, 1, "is an unfinished conversion (", "/400 shards done", f"editstream convert {src} {dst}")
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["skipped_shards"] == 5 and summary["num_shards"] == 400


def test_the_cli_reference_matches_the_commands():
    """docs/cli.md is the commands' own --help; regenerate it with `make cli-doc` after changing an option."""
    from editstream.cli.helpdoc import render
    from helpers import ROOT

    assert (ROOT / "docs" / "cli.md").read_text() == render()


def test_a_dataset_on_a_root_of_another_schema_says_which_before_reading(data):
    """The datasets read the schema from the manifest too: the error names it and the dataset to use."""
    from editstream import ByteTokenizer
    from editstream.format.columns import ColumnTypeError
    from editstream.kinds.unified_edit.dataset import UnifiedEditIterableDataset
    from editstream.loader.transforms import ImageTransform
    from helpers import VAE

    t = ImageTransform(**VAE)
    ds = UnifiedEditIterableDataset("e", t, ByteTokenizer(), t, [str(data / "t2i" / "wds")], [2], backend="webdataset")
    with pytest.raises(
        ColumnTypeError,
        match=r"holds t2i_pretrain data \(manifest.json\), not unified_edit; read it with T2IIterableDataset",
    ):
        ds.set_epoch(0)


def test_a_held_lock_names_break_lock_which_takes_it_over(data, tmp_path):
    """A lock left by a conversion on another machine stops ``convert`` with a pointer to
    ``--break-lock``; given, the run takes the lock over and writes the digest asked for."""
    import time

    from editstream.conversion.lock import LOCK_NAME

    dst = tmp_path / "locked"
    dst.mkdir()
    holder = {"host": "other-node", "pid": 1, "token": "x", "started": time.time(), "heartbeat": time.time()}
    (dst / LOCK_NAME).write_text(json.dumps(holder))
    result = run_cli("convert", "edit/pq", str(dst), "--no-progress", cwd=data)
    assert_error(result, 1, "host other-node, pid 1", "--break-lock")
    result = run_cli("convert", "edit/pq", str(dst), "--no-progress", "--break-lock", "--digest", "sha256", cwd=data)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((dst / "manifest.json").read_text())
    assert manifest["digest"] == "sha256" and all(len(s["sha256"]) == 64 for s in manifest["shards"])
    assert not (dst / LOCK_NAME).exists()


def test_an_error_inside_a_dataloader_worker_is_one_line(data):
    """torch re-raises a worker's error with the worker's traceback in its message; the CLI shows
    the original message only."""
    result = run_cli("-q", "stream", "t2i/wds", "--workers", "5", "--samples", "2", cwd=data)
    assert_error(result, 1, "rank 0 has 2 units for 5 DataLoader workers", "use fewer workers")
    assert "Original Traceback" not in result.stderr and "ValueError" not in result.stderr


NO_AWS_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": None,
    "AWS_SECRET_ACCESS_KEY": None,
    "AWS_SESSION_TOKEN": None,
    "AWS_SECURITY_TOKEN": None,
    "AWS_PROFILE": None,
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_EC2_METADATA_DISABLED": "true",  # no instance-metadata lookup on a machine without one
}


@pytest.mark.parametrize("command", [("stream",), ("verify",), ("inspect",)])
def test_s3_without_credentials_names_the_ways_to_give_them(s3_bucket, command):
    env = {**NO_AWS_CREDENTIALS, "AWS_ENDPOINT_URL": s3_bucket.endpoint}
    result = run_cli(*command, f"{s3_bucket.url}/shards", env=env, timeout=120)
    assert_error(result, 1, "no usable AWS credentials", "AWS_ACCESS_KEY_ID")


def test_a_missing_bucket_is_named(s3_bucket, data, tmp_path):
    env = {"AWS_ENDPOINT_URL": s3_bucket.endpoint}
    missing = f"{s3_bucket.name}-missing"
    result = run_cli("stream", f"s3://{missing}/shards", env=env, timeout=120)
    assert result.returncode == 1, result.stderr
    assert_error(result, 1, "does not exist")
    assert missing in result.stderr
    result = run_cli("convert", "edit/pq", f"s3://{missing}/out", "--no-progress", env=env, cwd=data, timeout=120)
    assert_error(result, 1, "does not exist")
    assert missing in result.stderr
