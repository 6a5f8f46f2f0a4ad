"""Training steps of NeMo Automodel's own BAGEL model class on editstream's batches, on the CPU
(``make test-nemo``'s venv), through examples/nemo_cpu_steps.py, which says why it is NeMo's model
class and loss rather than its recipe and lists the three CPU stand-ins it sets.

The losses must be finite and equal for NeMo's own loader, editstream's on the source data and
editstream's on the shards, and a checkpoint taken after two steps (model, optimizer, loader
state, resumed on the shards) must give the same next two losses.
"""

from __future__ import annotations

import math

import pytest

from helpers import ROOT, load_example
from test_nemo_judge import editstream_loader, loader_from, nemo_yaml, shards_yaml

pytestmark = pytest.mark.nemo_env

steps = load_example(ROOT / "examples" / "nemo_cpu_steps.py")


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo's three groups (source data and converted shards); these tests train on vlm_sft."""
    out = str(tmp_path_factory.mktemp("nemo-training") / "demo-out")
    load_example(ROOT / "examples" / "demo.py").prepare_data(out)
    return out


@pytest.fixture
def cpu():
    with steps.cpu_stand_ins():
        yield


def test_four_steps_give_the_same_losses_on_nemos_loader_and_on_both_editstream_backends(out, tmp_path, cpu):
    source = steps.sft_only(nemo_yaml(out, tmp_path))
    shards = steps.sft_only(shards_yaml(out, tmp_path, shard_only=False))
    nemos = steps.train(*steps.fresh(loader_from(source)), steps.STEPS)
    on_parquet = steps.train(*steps.fresh(editstream_loader(source)), steps.STEPS)
    on_shards = steps.train(*steps.fresh(editstream_loader(shards)), steps.STEPS)
    assert all(math.isfinite(loss) for loss in nemos) and abs(nemos[0] - math.log(steps.VOCAB)) < 1.0
    assert on_parquet == nemos and on_shards == nemos
    assert nemos[-1] < nemos[0]  # it learns


def test_a_checkpoint_after_two_steps_resumes_with_the_same_next_losses(out, tmp_path, cpu):
    source = steps.sft_only(nemo_yaml(out, tmp_path))
    whole = steps.train(*steps.fresh(editstream_loader(source)), steps.STEPS)
    on_shards = editstream_loader(steps.sft_only(shards_yaml(out, tmp_path, shard_only=False)))
    assert steps.resumed_losses(editstream_loader(source), on_shards, tmp_path / "step2.pt") == whole


def test_the_example_prints_equal_losses(tmp_path):
    assert steps.main(str(tmp_path)) == 0
