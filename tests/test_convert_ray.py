"""The converter on Ray (``engine="ray"``): the same bytes, resume and report as the local engine.

One local Ray instance (2 CPUs, no dashboard) serves the module; the CLI runs in subprocesses,
one starting its own Ray and one connecting to the module's instance by address.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import s3fs
import xxhash

ray = pytest.importorskip("ray")

from editstream.conversion import PROGRESS_DIR, ConvertConfig, convert, convert_shard, plan_conversion  # noqa: E402
from editstream.conversion.executors import RayExecutor, TaskError, make_executor  # noqa: E402
from editstream.format import manifest as mf  # noqa: E402
from editstream.sandbox.synth import write_synthetic_dataset  # noqa: E402

pytestmark = pytest.mark.ray

EDITSTREAM = Path(sys.executable).with_name("editstream")
QUIET_RAY_ENV = {"RAY_DISABLE_USAGE_STATS": "1"}


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def xxh3(path: Path) -> str:
    return xxhash.xxh3_128(path.read_bytes()).hexdigest()


def where_it_ran(x: int) -> tuple[int, int]:
    """A task for the executor tests: its argument and the id of the process that ran it."""
    return x, os.getpid()


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray instance for this module, shut down (with its worker processes) at the end."""
    saved = {k: os.environ.get(k) for k in QUIET_RAY_ENV}
    os.environ.update(QUIET_RAY_ENV)
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    # The helper tasks above live in this test module, which Ray workers cannot import.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        if started:
            ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ray") / "src"
    write_synthetic_dataset(
        str(out),
        schema="unified_edit",
        num_files=2,
        row_groups_per_file=3,
        rows_per_group=5,
        seed=7,
        corrupt_fraction=0.2,
        min_side=16,
        max_side=48,
    )
    return out


@pytest.fixture(scope="module")
def reference(src, tmp_path_factory) -> Path:
    """The default (local process pool) engine's output for ``src``."""
    out = tmp_path_factory.mktemp("ray") / "local"
    summary = convert(str(src), str(out), progress=False)
    # 2 files x 3 row groups; round(0.2 x 30 rows) = 6 planted bad rows, all reported (none dropped)
    assert (summary["num_shards"], summary["num_bad_rows"], summary["num_samples"]) == (6, 6, 30)
    return out


def test_ray_engine_writes_the_local_engines_bytes(ray_local, src, reference, tmp_path):
    out = tmp_path / "ray"
    summary = convert(str(src), str(out), engine="ray", progress=False)
    assert (summary["converted_shards"], summary["skipped_shards"]) == (6, 0)
    local_manifest = mf.Manifest.read(str(reference))
    ray_manifest = mf.Manifest.read(str(out))
    assert ray_manifest == local_manifest
    for shard in local_manifest.shards:
        assert xxh3(out / shard.path) == xxh3(reference / shard.path) == shard.xxh3_128
        assert (out / shard.path).read_bytes() == (reference / shard.path).read_bytes()
        assert (out / shard.idx_path).read_bytes() == (reference / shard.idx_path).read_bytes()
    assert (out / "manifest.json").read_bytes() == (reference / "manifest.json").read_bytes()
    assert json.loads((out / "report.json").read_bytes()) == json.loads((reference / "report.json").read_bytes())
    assert tree(out) == tree(reference)  # nothing else left behind either (no progress records)
    assert not (out / PROGRESS_DIR).exists()


def test_ray_workers_read_and_write_s3_themselves(ray_local, s3_bucket, reference):
    """S3 to S3 on Ray: credentials travel in the storage options; the shards equal the local engine's."""
    so = s3_bucket.storage_options
    s3_src, s3_dst = f"{s3_bucket.url}/src", f"{s3_bucket.url}/out"
    write_synthetic_dataset(
        s3_src,
        schema="unified_edit",
        num_files=2,
        row_groups_per_file=3,
        rows_per_group=5,
        seed=7,
        corrupt_fraction=0.2,
        min_side=16,
        max_side=48,
        storage_options=so,
    )
    summary = convert(s3_src, s3_dst, engine="ray", progress=False, storage_options=so)
    assert summary["converted_shards"] == 6
    fs = s3fs.S3FileSystem(**so)
    ray_manifest = mf.Manifest.read(s3_dst, so)
    assert [s.digest for s in ray_manifest.shards] == [s.digest for s in mf.Manifest.read(str(reference)).shards]
    for shard in ray_manifest.shards:
        assert fs.cat_file(f"{s3_dst}/{shard.path}") == (reference / shard.path).read_bytes()
        assert fs.cat_file(f"{s3_dst}/{shard.idx_path}") == (reference / shard.idx_path).read_bytes()
    assert not fs.exists(f"{s3_dst}/{PROGRESS_DIR}")


def test_ray_resume_redoes_only_the_missing_shard(ray_local, src, reference, tmp_path):
    out = tmp_path / "resume"
    plan = plan_conversion(ConvertConfig(src=str(src), dst=str(out)))
    # A ray conversion that died after its shards and before its manifest: every shard and done record.
    ex = RayExecutor(2)
    try:
        done = {t.shard_path for t, _ in ex.map_unordered(convert_shard, plan.tasks)}
    finally:
        ex.close()
    assert done == {t.shard_path for t in plan.tasks} and not (out / "manifest.json").exists()
    assert len(list((out / PROGRESS_DIR).glob("*.json"))) == 6

    victim = plan.tasks[3].shard_path
    (out / victim).unlink()
    (out / PROGRESS_DIR / f"{victim}.json").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.tar") if p.name != victim}
    summary = convert(str(src), str(out), engine="ray", progress=False)
    assert (summary["converted_shards"], summary["skipped_shards"], summary["already_done"]) == (1, 5, False)
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.tar") if p.name != victim} == before
    assert tree(out) == tree(reference)

    # A finished conversion with one shard gone is repaired the same way; a complete one is left alone.
    (out / plan.tasks[0].shard_path).unlink()
    repaired = convert(str(src), str(out), engine="ray", progress=False)
    assert (repaired["converted_shards"], repaired["skipped_shards"]) == (1, 5)
    assert tree(out) == tree(reference)
    again = convert(str(src), str(out), engine="ray", progress=False)
    assert again["already_done"] and again["converted_shards"] == 0


def test_ray_task_failure_names_the_shard(ray_local, src, tmp_path):
    copy = tmp_path / "src"
    shutil.copytree(src, copy)
    plan = plan_conversion(ConvertConfig(src=str(copy), dst=str(tmp_path / "out")))
    (copy / "part-00001.parquet").unlink()
    ex = make_executor("ray", 2)
    assert isinstance(ex, RayExecutor)
    try:
        with pytest.raises(TaskError) as info:
            for _ in ex.map_unordered(convert_shard, plan.tasks):
                pass
    finally:
        ex.close()
    err = info.value
    assert err.task.part.source_file == "part-00001.parquet"
    assert err.task.shard_path in str(err) and "FileNotFoundError" in str(err)
    assert ray.is_initialized()  # Ray was already up, so the executor leaves it running


def test_ray_executor_runs_tasks_on_ray_workers_with_bounded_submissions(ray_local):
    pulled = 0

    def tasks():
        nonlocal pulled
        for i in range(9):
            pulled += 1
            yield i

    ex = RayExecutor(max_in_flight=2)
    seen: list[int] = []
    pids: set[int] = set()
    try:
        for task, (value, pid) in ex.map_unordered(where_it_ran, tasks()):
            assert value == task
            # Never more than two tasks submitted and not yet handed back.
            assert pulled <= len(seen) + 2
            seen.append(task)
            pids.add(pid)
    finally:
        ex.close()
    assert sorted(seen) == list(range(9)) and pulled == 9
    assert os.getpid() not in pids


def test_ray_engine_options_are_checked_before_any_work(monkeypatch, src, tmp_path):
    with pytest.raises(ValueError, match="ray_address"):
        convert(str(src), str(tmp_path / "a"), engine="local", ray_address="auto", progress=False)
    with pytest.raises(ValueError, match="engine"):
        convert(str(src), str(tmp_path / "b"), engine="spark", progress=False)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(ImportError, match=r"editstream\[ray\]"):
        convert(str(src), str(tmp_path / "c"), engine="ray", progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def _cli(args: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(QUIET_RAY_ENV)
    return subprocess.run([str(EDITSTREAM), *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.slow
@pytest.mark.skipif(not EDITSTREAM.exists(), reason="editstream console script not installed in this venv")
def test_cli_engine_ray_starts_its_own_ray(ray_local, src, reference, tmp_path):
    out = tmp_path / "cli"
    run = _cli(["convert", str(src), str(out), "--engine", "ray", "--workers", "2", "--no-progress"])
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert (summary["num_shards"], summary["converted_shards"]) == (6, 6)
    assert "Started a local Ray instance" in run.stderr
    assert tree(out) == tree(reference)


@pytest.mark.skipif(not EDITSTREAM.exists(), reason="editstream console script not installed in this venv")
def test_cli_ray_address_connects_to_a_running_cluster(ray_local, src, reference, tmp_path):
    out = tmp_path / "cli"
    run = _cli(["convert", str(src), str(out), "--engine", "ray", "--ray-address", ray_local, "--no-progress"])
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Connected to Ray cluster" in run.stderr and "Started a local Ray instance" not in run.stderr
    assert json.loads(run.stdout)["converted_shards"] == 6
    assert tree(out) == tree(reference)
    wrong = _cli(["convert", str(src), str(tmp_path / "x"), "--ray-address", ray_local])
    assert wrong.returncode != 0 and "engine='ray' only" in wrong.stderr
