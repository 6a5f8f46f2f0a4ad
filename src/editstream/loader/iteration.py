"""The one iteration loop both backends share: units -> rows -> ``parse_row`` -> samples.

A *source* turns a unit into rows; a backend is nothing more than a source. Everything after
"rows" (parsing, ``data_indexes``, resume status, drop counting, the failure budget) lives
here, so the parquet and WebDataset backends cannot drift apart.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from ..format.columns import ColumnTypeError
from .distributed import DistributedIterableDataset
from .drops import FATAL, FailureBudget
from .reasons import drop_reason
from .units import Unit

logger = logging.getLogger("editstream")

Position = tuple
"""Where a row sits inside its unit: ``(row,)`` or ``(row_group, row)``."""


def empty_pass_error(dataset: DistributedIterableDataset, worker_id: int, count: int, what: str) -> RuntimeError:
    """The error a stream raises when a whole pass over its ``count`` units (or rows) yielded nothing.

    The reference would loop forever without yielding; every drop has been counted and logged
    with its location by then, so the error names the dataset, the worker and the drop counts.
    """
    return RuntimeError(
        f"dataset {dataset.dataset_name!r} rank {dataset.local_rank} worker {worker_id}: a whole pass over "
        f"{count} {what} gave no sample (drops so far: {dataset.drops.as_dict()}); check the data directories"
    )


class Row(dict):
    """A source row: a plain dict that also allows ``row.column`` like a pandas row does."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


class BadSample:
    """A row a source read but could not decode (a shard sample missing a member, say).

    Sources yield it in place of the row; the shared loop drops and counts it like a row
    whose ``parse_row`` raised, with the source's extra location (shard URL, key).
    """

    def __init__(self, error: BaseException, where: dict[str, Any]) -> None:
        self.error = error
        self.where = where


class RowSource(Protocol):
    """What a backend provides: list units, then stream rows of one unit."""

    def list_units(self, data_dir_list: Sequence[str], num_used_data: Sequence[int]) -> list[Unit]: ...

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, Any]]: ...

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]: ...

    # Optional: ``plan_units(units)`` is handed the units the stream will read, in order (an
    # endless iterator), before the first is read, so a source can read ahead across units;
    # a source without it may define ``prefetch(unit)``, called with the next unit each time.


def _unit_order(units: Sequence[Unit], start: int) -> Iterator[Unit]:
    """The units a stream reads, in order: from ``start`` to the end, then every pass from the first."""
    yield from units[start:]
    while True:
        yield from units


class SourceIterableDataset(DistributedIterableDataset):
    """A dataset whose rows come from a :class:`RowSource`; subclasses define ``parse_row``.

    Iteration: for each of this worker's units from the resume point, stream rows, parse each,
    stamp ``data_indexes = [unit_position, *row_position]``, record it as the resume status
    and yield. A row whose parse raises is dropped and counted; a unit that cannot be read is
    dropped (from the failing point) and counted. After the last unit the stream starts over.
    """

    source: RowSource
    schema_name: str | None = None
    """The schema whose row checks explain a dropped row in ``report.json``'s words (``format.rowproblems``)."""
    unit_failure_budget: int = 16
    """Units in a row that may fail to read (after the source's retries) before the stream stops."""
    _budget: FailureBudget | None = None

    def parse_row(self, row: dict) -> dict:
        raise NotImplementedError

    def _failure_budget(self) -> FailureBudget:
        if self._budget is None:
            self._budget = FailureBudget(self.dataset_name, self.unit_failure_budget)
        return self._budget

    def __iter__(self) -> Iterator[dict]:
        units, worker_id = self.get_data_paths_per_worker()
        status = self._get_worker_data_status(worker_id)
        if status is not None:
            start_unit, after = int(status[0]), tuple(status[1:])
        else:
            start_unit, after = 0, None
        logger.info(
            "rank-%s worker-%s dataset-%s: starting at unit %s after %s",
            self.local_rank,
            worker_id,
            self.dataset_name,
            start_unit,
            after,
        )
        plan_units = getattr(self.source, "plan_units", None)
        if plan_units is None or not units:
            yield from self._stream(units, worker_id, start_unit, after, getattr(self.source, "prefetch", None))
            return
        plan_units(_unit_order(units, start_unit))
        try:
            yield from self._stream(units, worker_id, start_unit, after, None)
        finally:
            plan_units(iter(()))  # a stream closed mid-way hands back what it read ahead

    def _stream(
        self, units: Sequence[Unit], worker_id: int, start_unit: int, after: Position | None, prefetch: Any
    ) -> Iterator[dict]:
        """The endless loop over this worker's units, from ``start_unit`` (after row ``after``) on."""
        while True:
            full_pass = start_unit == 0 and after is None
            yielded = 0
            for unit_position in range(start_unit, len(units)):
                unit = units[unit_position]
                if prefetch is not None and len(units) > 1:
                    prefetch(units[(unit_position + 1) % len(units)])
                rows = self.source.iter_unit_rows(unit, after)
                after = None
                try:
                    for data in self._parse_unit(unit, unit_position, rows, worker_id):
                        yielded += 1
                        yield data
                finally:
                    close = getattr(rows, "close", None)
                    if close is not None:
                        close()
            if full_pass and yielded == 0:
                raise empty_pass_error(self, worker_id, len(units), "units")
            start_unit = 0
            logger.info("%s repeat in rank-%s worker-%s", self.dataset_name, self.local_rank, worker_id)

    def _parse_unit(
        self, unit: Unit, unit_position: int, rows: Iterator[tuple[Position, dict]], worker_id: int
    ) -> Iterator[dict]:
        """Parse the rows of one unit, dropping (and counting) bad rows and an unreadable rest."""
        while True:
            try:
                position, row = next(rows)
            except StopIteration:
                return
            except (*FATAL, ColumnTypeError):
                raise
            except Exception as exc:  # noqa: BLE001 - the unit is unreadable from here on: counted, budgeted
                where = self.source.describe(unit)
                self.drops.record("unreadable_unit", where, exc)
                self._failure_budget().failed(where, exc)
                return
            self._failure_budget().succeeded()
            if isinstance(row, BadSample):
                self.drops.record("bad_sample", {**self.source.describe(unit, position), **row.where}, row.error)
                continue
            try:
                data = self.parse_row(row)
            except FATAL:
                raise
            except Exception as exc:  # noqa: BLE001 - any parse error drops the row (counted, located)
                detail = drop_reason(self.schema_name, row, exc)
                self.drops.record("bad_row", self.source.describe(unit, position), exc, detail)
                continue
            if not data:
                self.drops.record("empty_sample", self.source.describe(unit, position))
                continue
            index = [unit_position, *position]
            data["data_indexes"] = {"data_indexes": index, "worker_id": worker_id, "dataset_name": self.dataset_name}
            self._set_worker_resume_data_status(worker_id, index)
            yield data
