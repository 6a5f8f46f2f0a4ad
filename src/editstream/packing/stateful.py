"""editstream's StatefulDataLoader: torchdata's loader plus what elastic epochs need in the main process.

DataLoader workers run copies of the dataset made when an iteration starts, so the main process
is where the next epoch must be chosen and where a merged, layout-free state must be put: this
subclass starts the next elastic epoch on each new iteration after the first, hands a ``merge_states`` result to
the dataset (the workers' copies then take their streams from it), and takes a complete epoch's
state as "start the next one". For a dataset that is not elastic it is torchdata's loader as is.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .checkpoint.formats import MERGED_FORMAT
from .checkpoint.merge import saved_progress

ITERATOR_FINISHED = "_iterator_finished"
"""torchdata's key for a loader state taken after its iteration ended (the next one starts afresh)."""


@functools.cache
def stateful_loader_class() -> type[Any]:
    """The loader class ``BagelDataloaderConfig.build`` uses (torchdata is imported on first use)."""
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "BagelDataloaderConfig needs torchdata's StatefulDataLoader: pip install 'editstream[train]'"
        ) from exc

    class EditstreamDataLoader(StatefulDataLoader):  # type: ignore[misc]
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
            if isinstance(state_dict, Mapping) and state_dict.get("format") == MERGED_FORMAT:
                self.dataset.load_state_dict(state_dict)
                super().load_state_dict({})
                return
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
