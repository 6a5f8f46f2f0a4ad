"""Training steps of NeMo Automodel's own BAGEL model class on editstream's batches, on the CPU
(``make test-nemo``'s venv).

NeMo's recipe has no CPU path: its launcher stops at "Cuda is not available", its SigLIP tower
calls ``flash_attn_varlen_func``, its packed Qwen2 attention pins the CUDA-only efficient SDPA
kernel, and it autocasts on "cuda". So this is the closest honest equivalent: NeMo's
``BagelForUnifiedMultimodal`` (stage 1: Qwen2 hidden 64 x 2 layers, SigLIP hidden 32 x 3 layers,
random weights from a config) and its cross-entropy output, trained for four steps on the
vlm_sft group of the pretraining YAML, with three CPU stand-ins set here and nowhere else: the
varlen attention as per-image SDPA, the SDPA kernel left to PyTorch, bf16 autocast on the CPU.
The losses must be finite and equal for NeMo's own loader, editstream's on the source data and
editstream's on the shards, and a checkpoint taken after two steps (model, optimizer, loader
state) must give the same next two losses.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
import yaml

from helpers import ROOT, load_example
from test_nemo_judge import editstream_loader, loader_from, nemo_yaml, shards_yaml

pytestmark = pytest.mark.nemo_env

STEPS = 4
VOCAB = 512


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo's three groups (source data and converted shards); these tests train on vlm_sft."""
    out = str(tmp_path_factory.mktemp("nemo-training") / "demo-out")
    load_example(ROOT / "examples" / "demo.py").prepare_data(out)
    return out


def _varlen_sdpa(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False):
    """flash_attn_varlen_func's result for the packed ViT: each image's tokens attend to their own."""
    bounds = cu_seqlens_q.tolist()
    parts = [
        F.scaled_dot_product_attention(*(t[a:b].transpose(0, 1).float() for t in (q, k, v))).transpose(0, 1)
        for a, b in zip(bounds[:-1], bounds[1:])
    ]
    return torch.cat(parts)


@pytest.fixture(scope="module")
def cpu_stand_ins():
    from nemo_automodel.components.models.bagel import modeling_qwen2_packed, modeling_siglip_navit

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(modeling_siglip_navit, "_flash_attn_varlen", _varlen_sdpa)
        patch.setattr(modeling_qwen2_packed, "sdpa_kernel", lambda backends: contextlib.nullcontext())
        yield


def tiny_bagel() -> Any:
    """NeMo's BAGEL model class, stage 1, a few hundred thousand random weights (seeded)."""
    from nemo_automodel.components.models.bagel.configuration import BagelConfig
    from nemo_automodel.components.models.bagel.model import BagelForUnifiedMultimodal

    config = BagelConfig(
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 3,
            "num_attention_heads": 2,
            "patch_size": 14,
            "image_size": 980,  # 70 x 70 patch positions, the YAML's max_num_patch_per_side
            "num_channels": 3,
        },
        text_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": VOCAB,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
            "pad_token_id": 0,
        },
        visual_und=True,
        visual_gen=False,
        vit_max_num_patch_per_side=70,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    return BagelForUnifiedMultimodal(config)


def sft_only(path: Path) -> Path:
    """The YAML with only its vlm_sft group (stage 1 has no VAE for the edit and t2i groups)."""
    config = yaml.safe_load(path.read_text())
    for group in ("t2i_pretrain", "unified_edit"):
        config["dataset"]["grouped_datasets"].pop(group)
        config["dataset"]["dataset_info"].pop(group)
    config["dataset"]["use_flex"] = False
    path.write_text(yaml.safe_dump(config))
    return path


def train(model: Any, optimizer: Any, batches: Any, steps: int) -> list[float]:
    """``steps`` optimizer steps on the mean per-token cross-entropy of NeMo's model."""
    names = model.forward.__code__.co_varnames[1 : model.forward.__code__.co_argcount]
    losses = []
    for _ in range(steps):
        batch = next(batches).to_dict()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(**{name: batch[name] for name in names if name in batch})["ce"].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses


def fresh(loader: Any) -> tuple[Any, Any, Any]:
    model = tiny_bagel()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3), iter(loader)


def test_four_steps_give_the_same_losses_on_nemos_loader_and_on_both_editstream_backends(out, tmp_path, cpu_stand_ins):
    source = sft_only(nemo_yaml(out, tmp_path))
    shards = sft_only(shards_yaml(out, tmp_path, shard_only=False))
    nemos = train(*fresh(loader_from(source)), STEPS)
    on_parquet = train(*fresh(editstream_loader(source)), STEPS)
    on_shards = train(*fresh(editstream_loader(shards)), STEPS)
    assert all(math.isfinite(loss) for loss in nemos) and abs(nemos[0] - math.log(VOCAB)) < 1.0
    assert on_parquet == nemos and on_shards == nemos
    assert nemos[-1] < nemos[0]  # it learns


def test_a_checkpoint_after_two_steps_resumes_with_the_same_next_losses(out, tmp_path, cpu_stand_ins):
    source = sft_only(nemo_yaml(out, tmp_path))
    whole = train(*fresh(editstream_loader(source)), STEPS)
    loader = editstream_loader(source)
    model, optimizer, batches = fresh(loader)
    head = train(model, optimizer, batches, 2)
    saved = {"model": model.state_dict(), "optim": optimizer.state_dict(), "data": loader.state_dict()}
    path = tmp_path / "step2.pt"
    torch.save(saved, path)
    saved = torch.load(path, weights_only=False)
    resumed_loader = editstream_loader(sft_only(shards_yaml(out, tmp_path, shard_only=False)))
    resumed_loader.load_state_dict(saved["data"])  # a checkpoint from parquet resumes on the shards
    model, optimizer, batches = fresh(resumed_loader)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optim"])
    assert head + train(model, optimizer, batches, STEPS - 2) == whole
