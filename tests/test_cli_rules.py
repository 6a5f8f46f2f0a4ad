"""The command line's own rules, held everywhere (issue 17, case 8): a usage error exits 2; the
global flags work after the subcommand too, since every error's advice says "run with --debug";
a stdout closed by its reader ends quietly, as ``cat`` does; a hint names what fits the storage
and the command line (``--schema NAME``, never Python's ``schema=...``, never an option the
command does not take). Every test drives the real CLI in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import SRC_DIR, error_lines, run_cli, synth_and_convert


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """``edit/pq`` + ``edit/wds`` (a small edit dataset), ``cols/`` (parquet of no detectable kind)
    and ``cols-wds`` (its conversion with the catch-all kind), and a JSONL + media dataset ``vlm``."""
    root = tmp_path_factory.mktemp("rules")
    synth_and_convert(root / "edit", num_files=1, row_groups_per_file=2, rows_per_group=3, seed=5, max_side=48)
    (root / "cols").mkdir()
    pq.write_table(pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}), root / "cols" / "part-00000.parquet")
    write_synthetic_vlm_dataset(str(root / "vlm"), num_lines=6, video=False)
    return root


def assert_error(result: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    """Exit ``code``; one ``Error:`` line and at most one of advice; each needle in them."""
    lines = error_lines(result)
    assert result.returncode == code, (result.returncode, result.stderr)
    assert 1 <= len(lines) <= 2 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


# --------------------------------------------------------------------------- usage errors exit 2


@pytest.mark.parametrize("dst", ["edit/pq", "./edit/pq/", "edit/../edit/pq"])
def test_src_equal_to_dst_is_a_usage_error(data, dst):
    result = run_cli("convert", "edit/pq", dst, "--no-progress", cwd=data)
    assert_error(result, 2, "SRC and DST are the same place", "give DST a new or empty directory")
    assert sorted(p.name for p in (data / "edit" / "pq").iterdir()) == ["parquet_info.json", "part-00000.parquet"]


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["--rank", "3", "--world-size", "2"], {}, "rank 3 is not in a world of size 2 (--rank/--world-size)"),
        ([], {"RANK": "4", "WORLD_SIZE": "2"}, "rank 4 is not in a world of size 2"),
    ],
)
def test_a_rank_outside_the_world_is_a_usage_error(data, args, env, needle):
    result = run_cli("stream", "edit/wds", "--samples", "1", *args, env=env, cwd=data)
    assert_error(result, 2, needle, "give a rank from 0 to 1")


def test_media_dir_with_a_parquet_src_is_a_usage_error(data):
    result = run_cli("convert", "edit/pq", "out", "--media-dir", "m", "--no-progress", cwd=data)
    assert_error(result, 2, "--media-dir is for a JSONL SRC", "leave --media-dir out")
    assert not (data / "out").exists()


def test_a_jsonl_src_without_media_dir_is_a_usage_error(data):
    result = run_cli("convert", "vlm/data.jsonl", "out", "--no-progress", cwd=data)
    assert_error(result, 2, "need --media-dir DIR", "editstream convert vlm/data.jsonl out --media-dir DIR")
    assert not (data / "out").exists()


def test_undetectable_columns_name_the_option_not_the_python_keyword(data):
    result = run_cli("convert", "cols", "out", "--no-progress", cwd=data)
    assert_error(result, 2, "cannot tell the dataset kind of cols from its columns ['a', 'b']", "pass --schema NAME")
    assert "schema=" not in result.stderr
    assert "--schema generic converts the rows as they are" in result.stderr
    assert not (data / "out").exists()


def test_stream_never_suggests_a_schema_it_does_not_take(data):
    converted = run_cli("convert", "cols", "cols-wds", "--schema", "generic", "--no-progress", cwd=data)
    assert converted.returncode == 0, converted.stderr
    result = run_cli("stream", "cols-wds", "--schema", "unified_edit", cwd=data)
    assert_error(result, 2, "cols-wds holds generic data; stream reads unified_edit and t2i_pretrain")
    assert "--schema generic" not in result.stderr


def test_stream_reads_jsonl_media_data_with_its_media_dir(data):
    result = run_cli("stream", "vlm/data.jsonl", cwd=data)
    assert_error(result, 2, "is a JSONL file, and its image and video names need --media-dir DIR")
    result = run_cli("-q", "stream", "vlm/data.jsonl", "--media-dir", "vlm/media", "--samples", "4", cwd=data)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["schema"], summary["backend"], summary["samples"]) == ("vlm_sft", "parquet", 4)


# --------------------------------------------------------------------------- global flags after the subcommand


def test_debug_after_the_subcommand_shows_the_traceback(data):
    result = run_cli("stream", "edit/pq", "--backend", "webdataset", "--debug", cwd=data)
    assert result.returncode == 2, result.stderr
    assert "No such option" not in result.stderr
    assert "Traceback" in result.stderr and "UsageProblem" in result.stderr


def test_quiet_and_verbose_after_the_subcommand(data):
    quiet = run_cli("stream", "edit/pq", "--samples", "2", "-q", cwd=data)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    verbose = run_cli("stream", "edit/pq", "--samples", "2", "-v", cwd=data)
    assert verbose.returncode == 0, verbose.stderr
    assert "info: rank-0 worker-0 dataset-unified_edit: starting at unit 0" in verbose.stderr


def test_every_subcommand_lists_the_global_flags():
    for command in ("convert", "stream", "verify", "inspect", "preview", "synth"):
        help_text = run_cli(command, "-h").stdout
        assert "--debug" in help_text and "--quiet" in help_text and "--verbose" in help_text, command


# --------------------------------------------------------------------------- a closed stdout


PIPE_BYTES = 4096
"""The pipe's capacity in the closed-pipe test (the smallest Linux allows, set with F_SETPIPE_SZ)."""
LISTED_SAMPLES = 800
"""Keys ``inspect --list`` prints there: about 40 KB, far more than the one line read, the pipe's
capacity and Python's 8 KB stdout buffer together, so the writer is still writing when the reader leaves."""


def test_a_closed_stdout_ends_quietly(tmp_path):
    """``inspect --list | head -1``: the reader closes the pipe after one line; nothing on stderr."""
    fcntl = pytest.importorskip("fcntl")
    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        pytest.skip("the pipe's capacity cannot be set on this platform")
    synth_and_convert(
        tmp_path, num_files=1, row_groups_per_file=2, rows_per_group=LISTED_SAMPLES // 2, min_side=8, max_side=8
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC_DIR), os.environ.get("PYTHONPATH", "")])}
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    writer = subprocess.Popen(
        [sys.executable, "-m", "editstream.cli", "inspect", "wds", "--list"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    os.close(write_end)
    first = b""
    with os.fdopen(read_end, "rb", buffering=0) as reader:  # one line, byte by byte, as `head -1` reads
        while not first.endswith(b"\n"):
            byte = reader.read(1)
            assert byte, "the listing ended before its first line"
            first += byte
    assert writer.stderr is not None
    stderr = writer.stderr.read().decode()
    code = writer.wait(timeout=120)
    assert first.startswith(b"part-00000-rg00000-r")
    assert stderr == ""
    assert code == 141  # 128 + SIGPIPE, what a shell reports for `cat` in the same place


# --------------------------------------------------------------------------- hints that fit the storage


def test_a_local_dst_without_permission_gets_a_file_hint(data, tmp_path):
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        dst = locked / "out"
    elif os.path.isdir("/sys/kernel"):
        dst = "/sys/editstream-test-out"  # root may write anywhere except a kernel file system
    else:
        pytest.skip("no directory this user may not write to")
    result = run_cli("convert", "edit/pq", str(dst), "--no-progress", cwd=data)
    assert_error(result, 1, f"permission denied: {dst}", "permissions on that path", "read-only")
    assert "bucket" not in result.stderr and "credentials" not in result.stderr


# --------------------------------------------------------------------------- DST a user cannot write


def test_a_dst_that_is_a_file_is_one_line_with_the_fix(data, tmp_path):
    dst = tmp_path / "taken"
    dst.write_text("mine")
    result = run_cli("convert", "edit/pq", str(dst), "--no-progress", cwd=data)
    assert_error(result, 1, f"{dst} is a file, not a directory", "give a new or empty directory")
    assert "Errno" not in result.stderr and dst.read_text() == "mine"
    result = run_cli("convert", "edit/pq", str(dst / "sub"), "--no-progress", cwd=data)
    assert_error(result, 1, "a part of this path is a file, not a directory")


def test_a_read_only_file_system_is_one_line_with_the_fix(tmp_path):
    """The error a read-only mount gives (EROFS, with the path), raised inside a failed shard as the
    converter raises it, becomes one line naming the path and the fix."""
    import errno

    from editstream.cli.errors import explain

    path = str(tmp_path / "ro" / "out")
    try:
        try:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        except OSError as cause:
            raise RuntimeError("shard part-00000-rg00000.tar failed") from cause
    except RuntimeError as exc:
        problem = explain(exc)
    assert problem.format_message() == (
        f"cannot write {path}: its file system is read-only\n  give a path on a writable file system"
    )


def test_stream_counts_samples_over_the_token_limit_and_names_the_first(data):
    result = run_cli("stream", "edit/pq", "--samples", "4", "--max-tokens-per-sample", "1", cwd=data)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["over_token_limit"] == 4
    assert "over --max-tokens-per-sample 1: a packer with that limit drops it" in result.stderr
