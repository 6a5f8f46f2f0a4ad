"""Four training steps of NeMo Automodel's own BAGEL model class on editstream's batches, on the CPU.

NeMo's recipe has no CPU path, so this runs the closest honest equivalent: NeMo's
``BagelForUnifiedMultimodal`` (stage 1, a tiny random model built from a config) and its
cross-entropy, on the vlm_sft group of a NeMo pretraining YAML, from NeMo's own loader, from
editstream's loader on the source data and from editstream's loader on the converted shards,
then once more resumed from a checkpoint taken after two steps. It needs NeMo Automodel with
torchvision (``make test-nemo`` builds such a venv)::

    .venv-nemo/bin/python examples/nemo_cpu_steps.py [WORK_DIR]

The CPU stand-ins (:func:`cpu_stand_ins`) replace three CUDA assumptions of NeMo's BAGEL code
for the run only: SigLIP's ``flash_attn_varlen_func`` (per-image SDPA), the packed Qwen2
attention's CUDA-only SDPA kernel choice, and autocast on "cuda" (bf16 autocast on the CPU).
"""

from __future__ import annotations

import contextlib
import math
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import yaml

VOCAB = 512
STEPS = 4


def _varlen_sdpa(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, *args: Any, **kwargs: Any) -> Any:
    """flash_attn_varlen_func's result for the packed ViT: each image's tokens attend to their own."""
    bounds = cu_seqlens_q.tolist()
    parts = [
        F.scaled_dot_product_attention(*(t[a:b].transpose(0, 1).float() for t in (q, k, v))).transpose(0, 1)
        for a, b in zip(bounds[:-1], bounds[1:])
    ]
    return torch.cat(parts)


@contextlib.contextmanager
def cpu_stand_ins() -> Iterator[None]:
    """NeMo's BAGEL attention made to run on the CPU, for the duration of the block."""
    from nemo_automodel.components.models.bagel import modeling_qwen2_packed, modeling_siglip_navit

    saved = modeling_siglip_navit._flash_attn_varlen, modeling_qwen2_packed.sdpa_kernel
    modeling_siglip_navit._flash_attn_varlen = _varlen_sdpa
    modeling_qwen2_packed.sdpa_kernel = lambda backends: contextlib.nullcontext()
    try:
        yield
    finally:
        modeling_siglip_navit._flash_attn_varlen, modeling_qwen2_packed.sdpa_kernel = saved


def tiny_bagel() -> Any:
    """NeMo's BAGEL model class, stage 1 (Qwen2 hidden 64 x 2 layers, SigLIP hidden 32 x 3 layers), seeded."""
    from nemo_automodel.components.models.bagel.configuration import BagelConfig
    from nemo_automodel.components.models.bagel.model import BagelForUnifiedMultimodal

    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3, "num_attention_heads": 2}
    text = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
    config = BagelConfig(
        vision_config={**vision, "patch_size": 14, "image_size": 980, "num_channels": 3},  # 70 x 70 positions
        text_config={
            **text,
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
    """A recipe YAML cut to its vlm_sft group (stage 1 has no VAE for the edit and t2i groups)."""
    config = yaml.safe_load(path.read_text())
    for group in [g for g in config["dataset"]["grouped_datasets"] if g != "vlm_sft"]:
        config["dataset"]["grouped_datasets"].pop(group)
        config["dataset"]["dataset_info"].pop(group)
    config["dataset"]["use_flex"] = False
    path.write_text(yaml.safe_dump(config))
    return path


def train(model: Any, optimizer: Any, batches: Iterator[Any], steps: int) -> list[float]:
    """``steps`` optimizer steps on the mean per-token cross-entropy NeMo's model returns."""
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


def fresh(loader: Any) -> tuple[Any, Any, Iterator[Any]]:
    """A newly initialised model (always the same weights), its AdamW, and the loader's batches."""
    model = tiny_bagel()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3), iter(loader)


def resumed_losses(loader: Any, resumed_loader: Any, path: Path) -> list[float]:
    """Two steps, a checkpoint (model, optimizer, loader) through ``torch.save``, then two steps
    from it on ``resumed_loader``."""
    model, optimizer, batches = fresh(loader)
    head = train(model, optimizer, batches, 2)
    torch.save({"model": model.state_dict(), "optim": optimizer.state_dict(), "data": loader.state_dict()}, path)
    saved = torch.load(path, weights_only=False)
    resumed_loader.load_state_dict(saved["data"])
    model, optimizer, batches = fresh(resumed_loader)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optim"])
    return head + train(model, optimizer, batches, STEPS - 2)


def main(work: str | None = None) -> int:
    root = Path(work or tempfile.mkdtemp(prefix="nemo-cpu-steps-"))
    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo / "tests"))
    from helpers import load_example
    from test_nemo_judge import editstream_loader, loader_from, nemo_yaml, shards_yaml

    out = str(root / "demo-out")
    load_example(repo / "examples" / "demo.py").prepare_data(out)
    source, shards = sft_only(nemo_yaml(out, root)), sft_only(shards_yaml(out, root, shard_only=False))
    with cpu_stand_ins():
        runs = {
            "NeMo's loader (source data)": train(*fresh(loader_from(source)), STEPS),
            "editstream, parquet": train(*fresh(editstream_loader(source)), STEPS),
            "editstream, shards": train(*fresh(editstream_loader(shards)), STEPS),
            "editstream, resumed after step 2 on the shards": resumed_losses(
                editstream_loader(source), editstream_loader(shards), root / "step2.pt"
            ),
        }
    for name, losses in runs.items():
        print(f"{name:48s} " + "  ".join(f"{loss:.6f}" for loss in losses))
    same = len({tuple(losses) for losses in runs.values()}) == 1
    finite = all(math.isfinite(loss) for losses in runs.values() for loss in losses)
    print(f"every run gives the same losses: {'YES' if same else 'NO'}; all finite: {'YES' if finite else 'NO'}")
    return 0 if same and finite else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else None))
