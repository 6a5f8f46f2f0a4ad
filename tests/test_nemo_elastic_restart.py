"""Training on NeMo Automodel's BAGEL model, stopped on 2 ranks and restarted on 1, 2 and 3 (torchrun, gloo).

Each leg is tests/fixtures/nemo_elastic_rank.py: the loader NeMo's recipe builds from its YAML with
editstream's ``recipe:`` switch, NeMo's tiny random BAGEL model and its loss, gradients averaged over the
ranks, the dataloader saved and loaded through NeMo's own ``Checkpointer`` as its recipe does (DP-aware the
way editstream's recipe makes it). With ``elastic: true`` every row of the epoch is trained on exactly once
across the two legs at any new DP size, the losses are finite, and at an unchanged DP size the resumed losses
are the uninterrupted run's. With ``elastic: false`` a new DP size is refused in one line, before a step.
"""

from __future__ import annotations

import collections
import json
import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import ROOT, load_example

pytestmark = [pytest.mark.nemo_env, pytest.mark.torchrun, pytest.mark.slow]
pytest.importorskip("nemo_automodel.components.checkpoint.checkpointing")
pytest.importorskip("nemo_automodel.components.models.bagel.model")

from test_nemo_judge import shards_yaml  # noqa: E402

RANK_SCRIPT = Path(__file__).resolve().parent / "fixtures" / "nemo_elastic_rank.py"
SAVE_AFTER = 2
HANG_GUARD = 900  # seconds: a leg that hangs (a rank waiting on a dead peer) fails instead of stalling CI


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("nemo-elastic") / "demo-out")
    load_example(ROOT / "examples" / "demo.py").prepare_data(out)
    return out


def recipe_yaml(out: str, work: Path, elastic: bool) -> Path:
    """The recipe YAML on the shards, cut to the vlm_sft group (stage 1), with ``elastic`` set."""
    steps = load_example(ROOT / "examples" / "nemo_cpu_steps.py")
    path = steps.sft_only(shards_yaml(out, work, shard_only=False))
    config = yaml.safe_load(path.read_text())
    config["dataset"].update({"elastic": elastic, "expected_num_tokens": 600, "max_buffer_size": 4})
    if elastic:
        config["dataset"]["elastic_streams"] = 6
    target = work / f"recipe-{'elastic' if elastic else 'plain'}.yaml"
    target.write_text(yaml.safe_dump(config))
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def leg(config: Path, work: Path, name: str, nproc: int, *extra: str) -> list[dict]:
    """One torchrun leg; each rank's result."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(RANK_SCRIPT),
        str(config),
        str(work),
        name,
        *extra,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD, cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((work / f"{name}-rank{r}.json").read_text()) for r in range(nproc)]


def trained_rows(results: list[dict], after: int = 0) -> collections.Counter:
    """How often each row was trained on, over the ranks' steps from step ``after`` on."""
    counted: collections.Counter = collections.Counter()
    for result in results:
        for rows in result["rows"][after:]:
            for name, indexes in rows or []:
                counted[(name, tuple(indexes) if isinstance(indexes, list) else indexes)] += 1
    return counted


@pytest.fixture(scope="module")
def first(out: str, tmp_path_factory: pytest.TempPathFactory):
    """2 ranks: a checkpoint after SAVE_AFTER steps, then on to the end of the epoch (the uninterrupted run)."""
    work = tmp_path_factory.mktemp("elastic-legs")
    config = recipe_yaml(out, work, elastic=True)
    return work, config, leg(config, work, "first", 2, "--save-after", str(SAVE_AFTER))


def test_the_uninterrupted_run_trains_on_every_row_once_with_finite_losses(first):
    _, _, results = first
    assert all(r["error"] is None and r["saved_after"] == SAVE_AFTER for r in results)
    counted = trained_rows(results)
    assert counted and set(counted.values()) == {1}
    assert all(math.isfinite(loss) for r in results for loss in r["losses"] if loss is not None)
    assert len(results[0]["losses"]) > SAVE_AFTER + 1  # the checkpoint is mid-epoch


@pytest.mark.parametrize("ranks", [1, 3], ids=["shrink-to-1", "grow-to-3"])
def test_a_restart_at_a_new_dp_size_trains_on_the_rest_of_the_epoch_once(first, ranks):
    work, config, results = first
    epoch = trained_rows(results)
    before = trained_rows(results, after=0) - trained_rows(results, after=SAVE_AFTER)
    resumed = leg(config, work, f"resume-{ranks}", ranks, "--resume-from", str(work / "first-ckpt"))
    assert all(r["error"] is None for r in resumed), [r["error"] for r in resumed]
    after = trained_rows(resumed)
    assert before + after == epoch  # every row of the epoch once across the two legs
    assert set((before + after).values()) == {1} and sum(after.values()) > 0
    assert all(math.isfinite(loss) for r in resumed for loss in r["losses"] if loss is not None)


def test_at_an_unchanged_dp_size_the_resumed_losses_are_the_uninterrupted_runs(first):
    work, config, results = first
    resumed = leg(config, work, "resume-2", 2, "--resume-from", str(work / "first-ckpt"))
    for rank, (whole, rest) in enumerate(zip(results, resumed)):
        assert rest["error"] is None, rest["error"]
        assert rest["rows"] == whole["rows"][SAVE_AFTER:], f"rank {rank}"
        assert rest["losses"] == whole["losses"][SAVE_AFTER:], f"rank {rank}"


def test_without_elastic_a_new_dp_size_is_refused_in_one_line_before_a_step(out, tmp_path):
    config = recipe_yaml(out, tmp_path, elastic=False)
    leg(config, tmp_path, "plain", 2, "--save-after", "1", "--stop-after-save")
    (refused,) = leg(config, tmp_path, "plain-resume-1", 1, "--resume-from", str(tmp_path / "plain-ckpt"))
    assert refused["error"] is not None and "\n" not in refused["error"]
    assert "loader states of 2 DP ranks, this run has 1" in refused["error"] and "elastic: true" in refused["error"]
    assert refused["losses"] == [] and refused["rows"] == []  # nothing trained on
