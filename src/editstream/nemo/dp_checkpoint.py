"""NeMo Automodel 0.7.0's Checkpointer made DP-aware on load, as NeMo's open PR #2730 proposes: a loader with
``load_state_dict_from_dp_rank_states`` is given every saved ``<name>_dp_rank_<r>.pt`` when the DP size
changed (a run that grows or shrinks between restarts); at an unchanged DP size NeMo's one-file load runs
as before. Imports NeMo; editstream's recipes call :func:`make_dp_aware` before they restore."""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from nemo_automodel.components.checkpoint.checkpointing import Checkpointer, load_torch_ckpt

logger = logging.getLogger(__name__)


def saved_dp_ranks(state_dir: str, state_name: str) -> list[int]:
    """The DP ranks whose ``<state_name>_dp_rank_<r>.pt`` a checkpoint's ``state_dir`` holds, in order."""
    pattern = re.compile(rf"{re.escape(state_name)}_dp_rank_(\d+)\.pt")
    names = os.listdir(state_dir) if os.path.isdir(state_dir) else []
    return sorted(int(m.group(1)) for m in map(pattern.fullmatch, names) if m is not None)


def dp_state_file(state_dir: str, state_name: str, dp_rank: int) -> str:
    """The path NeMo's Checkpointer saves DP rank ``dp_rank``'s ``state_name`` state at."""
    return os.path.join(state_dir, f"{state_name}_dp_rank_{dp_rank}.pt")


class DPAwareCheckpointer(Checkpointer):  # type: ignore[misc]
    """NeMo's ``Checkpointer`` whose DP-scoped states (the dataloader's) load at any DP size."""

    def load_on_dp_ranks(self, state: Any, state_name: str, path: str) -> None:
        """NeMo's one-file load when ``state`` says it is enough (or lacks the protocol); else every saved DP
        rank's state, loaded with the same ``weights_only`` NeMo uses, handed to the state at once."""
        take_all = getattr(state, "load_state_dict_from_dp_rank_states", None)
        state_dir = os.path.join(path, state_name)
        ranks = saved_dp_ranks(state_dir, state_name)
        if take_all is None or not ranks:
            super().load_on_dp_ranks(state, state_name, path)
            return
        weights_only = not self.config.allow_legacy_pickle_restore
        single = getattr(state, "can_load_single_dp_rank_state", None)
        if single is not None and self.dp_rank in ranks:
            own = load_torch_ckpt(dp_state_file(state_dir, state_name, self.dp_rank), weights_only=weights_only)
            if single(own, saved_dp_world_size=len(ranks)):
                state.load_state_dict(own)
                return
        files = {r: dp_state_file(state_dir, state_name, r) for r in ranks}
        take_all({r: load_torch_ckpt(file, weights_only=weights_only) for r, file in files.items()})

    def load_on_global_ranks(self, state: Any, state_name: str, path: str) -> None:
        """NeMo's per-rank load (the RNG's); a rank the checkpoint had no process for (the run grew) keeps the
        state it was seeded with, and says so, instead of failing on the missing file."""
        import torch.distributed as dist

        rank = dist.get_rank() if dist.is_initialized() else 0
        state_dir = os.path.join(path, state_name)
        own = (f"{state_name}_global_rank_{rank}.pt", f"{state_name}_dp_rank_{self.dp_rank}.pt")
        names = set(os.listdir(state_dir)) if os.path.isdir(state_dir) else set()
        if names and not names.intersection(own):
            saved = len([n for n in names if n.startswith(f"{state_name}_global_rank_")])
            logger.warning(
                "%s: the checkpoint at %s has the states of %d ranks, none for rank %d; it keeps its fresh seeding",
                state_name,
                state_dir,
                saved,
                rank,
            )
            return
        super().load_on_global_ranks(state, state_name, path)


def make_dp_aware(checkpointer: Any) -> Any:
    """Turn the ``Checkpointer`` NeMo's recipe built into a :class:`DPAwareCheckpointer` in place (None, another
    class, or one already DP-aware: left as it is)."""
    if type(checkpointer) is Checkpointer:
        checkpointer.__class__ = DPAwareCheckpointer
    return checkpointer
