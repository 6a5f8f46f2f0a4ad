"""A checkpoint's per-data-parallel-rank loader states handed over together (NeMo Automodel's proposed
``load_state_dict_from_dp_rank_states`` protocol): checked, then this rank's own loaded, or their merge, or
refused when the dataset cannot change its DP size."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .checkpoint.merge import merge_states
from .checkpoint.streams import StateError


def ordered_rank_states(rank_states: Mapping[int, Any]) -> list[Any]:
    """The states of DP ranks ``0..n-1`` in rank order, or a StateError naming the ranks that are missing."""
    if not isinstance(rank_states, Mapping) or not rank_states:
        raise StateError(
            "cannot resume: load_state_dict_from_dp_rank_states needs {dp_rank: state} for every saved DP rank, "
            f"got {'nothing' if not rank_states else type(rank_states).__name__}"
        )
    ranks = sorted(int(rank) for rank in rank_states)
    missing = sorted(set(range(ranks[-1] + 1)) - set(ranks))
    if missing or ranks[0] != 0:
        raise StateError(
            f"cannot resume: the checkpoint has the loader states of DP ranks {ranks} but not of {missing}; "
            "every saved DP rank's state is needed to continue the epoch"
        )
    by_rank = {int(rank): state for rank, state in rank_states.items()}
    return [by_rank[rank] for rank in ranks]


def refuse_new_dp_size(saved: int, new: int) -> StateError:
    """The one-line refusal of a non-elastic loader asked to resume at another DP size."""
    return StateError(
        f"cannot resume at a new data-parallel size: the checkpoint holds the loader states of {saved} DP ranks, "
        f"this run has {new}, and the dataset is not elastic (its rows would be read twice or skipped); resume on "
        f"{saved} DP ranks, or train with `elastic: true` in the dataset config to change the DP size between restarts"
    )


def load_dp_rank_states(loader: Any, rank_states: Mapping[int, Any], rank: int, dp_size: int, elastic: bool) -> None:
    """Resume ``loader`` (DP rank ``rank`` of ``dp_size``) from every saved DP rank's state: its own at an
    unchanged DP size, else (elastic datasets only) their ``merge_states``, of which it runs its share."""
    states = ordered_rank_states(rank_states)
    if len(states) == dp_size:
        loader.load_state_dict(states[rank])
    elif not elastic:
        raise refuse_new_dp_size(len(states), dp_size)
    else:
        loader.load_state_dict(merge_states(states))


class DPRankStates:
    """The DP-aware protocol for editstream's loader (mixed into it): NeMo's Checkpointer asks whether this
    rank's own file is enough, else hands it every saved DP rank's state."""

    dataset: Any

    def dp_layout(self) -> tuple[int, int]:
        """This loader's data-parallel rank and size (the dataset's ``local_rank`` / ``world_size``)."""
        return int(getattr(self.dataset, "local_rank", 0)), int(getattr(self.dataset, "world_size", 1))

    def can_load_single_dp_rank_state(self, state: Any, saved_dp_world_size: int) -> bool:
        """Whether this rank's own saved state is enough: the checkpoint was taken at this DP size."""
        return int(saved_dp_world_size) == self.dp_layout()[1]

    def load_state_dict_from_dp_rank_states(self, rank_states: Mapping[int, dict[str, Any]]) -> None:
        """Resume from every saved DP rank's state (:func:`load_dp_rank_states`)."""
        elastic = bool(getattr(self.dataset, "elastic", False))
        load_dp_rank_states(self, rank_states, *self.dp_layout(), elastic=elastic)
