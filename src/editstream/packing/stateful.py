"""editstream's StatefulDataLoader: torchdata's, plus what elastic epochs need in the main process (workers
iterate copies): the next epoch per new iteration, a ``merge_states`` result handed to the dataset, and every saved
data-parallel rank's state taken at once (NeMo Automodel's proposed DP-aware protocol) to resume at a new DP size."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .checkpoint.formats import MERGED_FORMATS
from .checkpoint.merge import saved_progress
from .checkpoint.streams import StateError
from .dp_ranks import DPRankStates

ITERATOR_FINISHED = "_iterator_finished"
"""torchdata's key for a loader state taken after its iteration ended (the next one starts afresh)."""


def saved_workers(state: Mapping[str, Any]) -> int | None:
    """The ``num_workers`` a torchdata loader state was taken with (None: not such a state)."""
    if "_num_yielded" in state:
        return 0
    snapshot = state.get("_snapshot")
    main = snapshot.get("_main_snapshot") if isinstance(snapshot, Mapping) else None
    workers = main.get("_num_workers") if isinstance(main, Mapping) else None
    return workers if isinstance(workers, int) else None


def check_loader_state(state: Any, num_workers: int) -> None:
    """Refuse a loader state an elastic loader cannot resume from: empty, or taken with other ``num_workers``."""
    if not isinstance(state, Mapping) or not state:
        raise StateError(
            f"cannot resume: the loader was given {'an empty state' if state == {} else type(state).__name__}; "
            "pass what dataloader.state_dict() returned, or editstream.merge_states([...]) of every rank's"
        )
    workers = saved_workers(state)
    if workers is None:
        raise StateError("cannot resume: the state is neither a StatefulDataLoader state nor a merged elastic state")
    if workers != num_workers:
        raise StateError(
            f"cannot resume: this loader state was saved with num_workers={workers}, this loader has "
            f"num_workers={num_workers}; when the layout changes load editstream.merge_states([...every rank's "
            "state...]) instead"
        )


@functools.cache
def stateful_loader_class() -> type[Any]:
    """The loader class ``BagelDataloaderConfig.build`` uses (torchdata is imported on first use)."""
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "BagelDataloaderConfig needs torchdata's StatefulDataLoader: pip install 'editstream[train]'"
        ) from exc

    class EditstreamDataLoader(DPRankStates, StatefulDataLoader):  # type: ignore[misc]
        """torchdata's ``StatefulDataLoader``; with an elastic dataset, also epoch-aware and merge-aware."""

        _resume_next = True

        def _elastic(self) -> bool:
            return bool(getattr(self.dataset, "elastic", False))

        def __iter__(self) -> Any:
            # Workers iterate copies of the dataset, so the next epoch is chosen here; without
            # workers the dataset itself moves to the next epoch when iterated again.
            if self._elastic() and self.num_workers > 0 and not self._resume_next:
                self.dataset.start_epoch(self.dataset.epoch + 1)
            self._resume_next = False
            return super().__iter__()

        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            if not self._elastic():
                super().load_state_dict(state_dict)
                return
            self._resume_next = True
            if isinstance(state_dict, Mapping) and state_dict.get("format") in MERGED_FORMATS:
                self.dataset.load_state_dict(state_dict)
                super().load_state_dict({})
                return
            check_loader_state(state_dict, self.num_workers)
            progress = saved_progress(state_dict)
            finished = isinstance(state_dict, Mapping) and bool(state_dict.get(ITERATOR_FINISHED))
            if progress is not None and (finished or progress[1]):
                self.dataset.start_epoch(progress[0] + 1)
                super().load_state_dict({})
                return
            if progress is not None:
                self.dataset.epoch = progress[0]
            super().load_state_dict(state_dict)

    return EditstreamDataLoader
