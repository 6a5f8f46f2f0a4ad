"""NeMo Automodel's BAGEL recipes calling :func:`install` on construction: a NeMo YAML's one-line opt-in
(``recipe: editstream.nemo.FinetuneRecipeForMultimodal``). Imports NeMo; runs ``main()`` as a script."""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a file: its directory (editstream/nemo/) must not shadow `datasets`, `utils`, ...
    _own = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = [entry for entry in sys.path if os.path.realpath(entry or os.curdir) != _own]

from typing import Any

from nemo_automodel.components.config._arg_parser import parse_args_and_load_config
from nemo_automodel.recipes.multimodal.finetune import FinetuneRecipeForMultimodal as NemoFinetuneRecipe
from nemo_automodel.recipes.multimodal.pretrain import PretrainRecipeForMultimodal as NemoPretrainRecipe

from editstream.nemo.dp_checkpoint import make_dp_aware
from editstream.nemo.hook import install  # absolute: NeMo's launcher runs this file as a script

__all__ = ["FinetuneRecipeForMultimodal", "PretrainRecipeForMultimodal", "main"]


class _ReadsThroughEditstream:
    """NeMo's BAGEL recipe, reading its data through editstream (``install()`` on construction) and restoring
    at a new DP size too (docs/nemo.md)."""

    checkpointer: Any

    def __init__(self, cfg: Any) -> None:
        install()
        super().__init__(cfg)  # type: ignore[call-arg]  # NeMo's recipe, next in the MRO

    def load_checkpoint(self, restore_from: str | None = None) -> None:
        make_dp_aware(self.checkpointer)
        super().load_checkpoint(restore_from)  # type: ignore[misc]


class FinetuneRecipeForMultimodal(_ReadsThroughEditstream, NemoFinetuneRecipe):  # type: ignore[misc]
    """NeMo's BAGEL fine-tuning recipe, reading its data through editstream."""


class PretrainRecipeForMultimodal(_ReadsThroughEditstream, NemoPretrainRecipe):  # type: ignore[misc]
    """NeMo's BAGEL pretraining recipe, reading its data through editstream."""


def recipe_class(recipe: Any) -> type:
    """The class of this module a YAML's ``recipe:`` value names (pretraining when it says so, else fine-tuning)."""
    target = recipe.get("_target_", "") if hasattr(recipe, "get") else recipe
    return PretrainRecipeForMultimodal if "PretrainRecipeForMultimodal" in str(target) else FinetuneRecipeForMultimodal


def main(config_path: str | None = None) -> None:
    """Run the recipe a YAML names (``-c config.yaml`` and overrides, as NeMo's recipe scripts take)."""
    cfg = parse_args_and_load_config(config_path)
    recipe = recipe_class(cfg.get("recipe", ""))(cfg)
    recipe.setup()
    recipe.run_train_validation_loop()


if __name__ == "__main__":
    # Run as a file this is module __main__, a copy of editstream.nemo.recipes: run the importable module's
    # main(), so that the recipe classes NeMo resolves by name are the ones that run.
    import importlib

    importlib.import_module("editstream.nemo.recipes").main()
