"""The one iteration loop every dataset kind and backend (a row source) shares: units -> rows ->
``parse_row`` -> samples, with ``data_indexes``, resume status, drops and failure budgets."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any

from ..data.drops import FATAL, FailureBudget, error_text
from ..data.rows import BadSample, DropRow, Position, RowSource, close_rows
from ..data.units import PositionError, Unit
from ..format.columns import ColumnTypeError
from ..kinds import DatasetKind, kind_of_dataset
from .distributed import DistributedIterableDataset, WorkerStatus, current_worker_id
from .origins import ParseOrigin, PutPoint, RecreateError, TakePoint, Traced, gather_rows
from .pixels import share_one_storage
from .reasons import judge

logger = logging.getLogger("editstream")


def _unit_order(units: Sequence[Unit], start: int) -> Iterator[Unit]:
    """The units a stream reads, in order: from ``start`` to the end, then every pass from the first."""
    yield from units[start:]
    while True:
        yield from units


class SourceIterableDataset(DistributedIterableDataset):
    """A dataset whose rows come from a row source; subclasses define ``parse_row``."""

    source: RowSource
    unit_failure_budget: int = 16
    """Units in a row that may fail to read (after the source's retries) before the stream stops."""
    parser_failure_budget: int = 16
    """Rows in a row whose ``parse_row`` raised something other than a data error before the stream stops."""
    unit_noun = "units"  # what the error for a pass that yielded nothing calls a unit
    image_dtype = "float32"
    """With ``"uint8"`` the images of each sample ``iter(dataset)`` yields share one storage."""
    _take_point: TakePoint | None = None
    """Set by :meth:`iter_with_origins`: called before each parse, its result kept in ``_last_origin``."""
    _last_origin: ParseOrigin | None = None

    def parse_row(self, row: Any) -> dict[str, Any]:
        raise NotImplementedError

    @cached_property
    def kind(self) -> DatasetKind | None:
        """The registered kind this dataset class (or a base of it) reads; ``None`` for a class of its own."""
        return kind_of_dataset(type(self))

    @property
    def drop_counts(self) -> dict[str, int]:
        """Drops per reason in this process (bad rows, unreadable units, ``jsonl_parse`` ...)."""
        return self.drops.as_dict()

    def _budget(self, name: str, size: int, what: str) -> FailureBudget:
        budget = self.__dict__.get(name)
        if budget is None:
            budget = self.__dict__[name] = FailureBudget(self.dataset_name, size, what, self.drops)
        return budget

    def _parser_budget(self) -> FailureBudget:
        what = "rows in a row made parse_row raise an error that is not a data problem (a bug in the parser?)"
        return self._budget("_parser_failures", self.parser_failure_budget, what)

    def resume_point(self, worker_id: int) -> tuple[int, Position | None]:
        """The unit to start at and the position in it to resume after (``data_status = [unit, *position]``)."""
        status = self._get_worker_data_status(worker_id)
        if status is None:
            return 0, None
        if isinstance(status, int):
            raise ValueError(
                f"dataset {self.dataset_name!r}: data_status[{worker_id}] is {status!r}; this dataset resumes "
                f"from [unit, *row position], as saved by state_dict()"
            )
        return int(status[0]), tuple(status[1:])

    def sample_index(self, unit_position: int, position: Position) -> WorkerStatus:
        """A sample's ``data_indexes`` (and the worker's resume status): ``[unit_position, *position]``."""
        return [unit_position, *position]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        units, worker_id = self.get_data_paths_per_worker()
        start_unit, after = self.resume_point(worker_id)
        where = f"rank-{self.local_rank} worker-{worker_id} dataset-{self.dataset_name}"
        logger.info("%s: starting at unit %s after %s", where, start_unit, after)
        if units:  # the endless order of no units would never yield
            self.source.plan_units(_unit_order(units, start_unit))
        try:
            yield from self._stream(units, worker_id, start_unit, after)
        finally:
            self.source.plan_units(iter(()))  # a stream closed mid-way hands back what it read ahead

    def _stream(
        self, units: Sequence[Unit], worker_id: int, start_unit: int, after: Position | None
    ) -> Iterator[dict[str, Any]]:
        """The endless loop over this worker's units, from ``start_unit`` (after row ``after``) on."""
        while True:
            full_pass = start_unit == 0 and after is None
            yielded = 0
            for unit_position in range(start_unit, len(units)):
                for data in self._read_unit(units[unit_position], unit_position, after, worker_id):
                    yielded += 1
                    yield share_one_storage(data) if self.image_dtype == "uint8" else data
                after = None
            if full_pass and yielded == 0:
                raise self._empty_pass_error(worker_id, len(units))
            start_unit = 0
            logger.info("%s repeat in rank-%s worker-%s", self.dataset_name, self.local_rank, worker_id)

    def iter_with_origins(self, take_point: TakePoint) -> Traced:
        """The stream of ``iter(self)``, each sample with its origin; ``take_point()`` runs before each parse."""
        self._take_point = take_point
        samples = iter(self)
        try:
            for data in samples:
                yield data, self._last_origin
        finally:
            close_rows(samples)  # a stream closed mid-way hands back what it read ahead

    def sorted_units(self) -> list[Unit]:
        """Every unit of the dataset in sorted order: a unit's place here is its global id."""
        return sorted(self.data_paths or [])

    def iter_epoch_units(
        self, units: Sequence[Unit], order: Sequence[int], start: int, after: Position | None, take_point: TakePoint
    ) -> Traced:
        """One pass over ``units[i] for i in order[start:]`` (rows after ``after`` in the first), each sample
        with its origin; indexes start with the unit's global id, so they name the row on any rank."""
        self._take_point = take_point
        worker_id = current_worker_id()
        for k in range(start, len(order)):
            for data in self._read_unit(units[order[k]], order[k], after if k == start else None, worker_id):
                yield data, self._last_origin

    def _read_unit(
        self, unit: Unit, unit_position: int, after: Position | None, worker_id: int
    ) -> Iterator[dict[str, Any]]:
        """The samples of one unit after ``after``; its row stream is closed however reading ends."""
        rows = self.source.iter_unit_rows(unit, after)
        try:
            yield from self._parse_unit(unit, unit_position, rows, worker_id)
        finally:
            close_rows(rows)

    def _empty_pass_error(self, worker_id: int, count: int) -> RuntimeError:
        """The error for a whole pass that yielded nothing (the reference would loop forever), naming the
        drop counts and the parser's last error when it kept failing on something that is not bad data."""
        message = (
            f"dataset {self.dataset_name!r} rank {self.local_rank} worker {worker_id}: a whole pass over "
            f"{count} {self.unit_noun} gave no sample (drops so far: {self.drops.as_dict()}); "
            f"check the data directories"
        )
        parser = self._parser_budget()
        cause = parser.last_error if parser.in_a_row else None
        if cause is not None:
            message += f"; parse_row raised {error_text(cause)} at {parser.last_where}, "
            message += "which is not a data problem: a bug in the parser?"
        error = RuntimeError(message)
        error.__cause__ = cause
        return error

    def _parse_unit(
        self, unit: Unit, unit_position: int, rows: Iterator[tuple[Position, Any]], worker_id: int
    ) -> Iterator[dict[str, Any]]:
        """Parse the rows of one unit, dropping (and counting) bad rows and an unreadable rest."""
        budget = self._budget("_unit_failures", self.unit_failure_budget, "units in a row could not be read")
        while True:
            try:
                position, row = next(rows)
            except StopIteration:
                return
            except (*FATAL, ColumnTypeError, PositionError):
                raise
            except Exception as exc:  # noqa: BLE001 - the unit is unreadable from here on: counted, budgeted
                where = self.source.describe(unit)
                self.drops.record("unreadable_unit", where, exc)
                budget.failed(where, exc)
                return
            if isinstance(row, BadSample):
                where = {**self.source.describe(unit, position), **row.where}
                self.drops.record("bad_sample", where, row.error)
                if row.unreadable:
                    budget.failed(where, row.error)
                else:
                    budget.succeeded()
                continue
            budget.succeeded()
            point = None if self._take_point is None else self._take_point()
            data = self._parse(row, unit, position)
            if data is None:
                continue
            index = self._stamp(data, unit_position, position, worker_id)
            self._set_worker_resume_data_status(worker_id, index)
            if self._take_point is not None:
                self._last_origin = ParseOrigin(unit_position, position, point)
            yield data

    def _stamp(self, data: dict[str, Any], unit_position: int, position: Position, worker_id: int) -> WorkerStatus:
        index = self.sample_index(unit_position, position)
        data["data_indexes"] = {"data_indexes": index, "worker_id": worker_id, "dataset_name": self.dataset_name}
        return index

    def recreate_samples(
        self, origins: Sequence[ParseOrigin], units: Sequence[Unit] | None, put_point: PutPoint
    ) -> list[dict[str, Any]]:
        """The samples these origins were parsed into, bit for bit: each row read again (from ``units``,
        or this worker's) and parsed after ``put_point(origin.point)``; ``RecreateError`` when one cannot be."""
        if units is None:
            units, worker_id = self.get_data_paths_per_worker()
        else:
            worker_id = current_worker_id()
        rows = gather_rows(self.source, units, origins, self.dataset_name)
        samples = []
        for origin in origins:
            unit = units[origin.unit_position]
            put_point(origin.point)
            data = self._parse(rows[(origin.unit_position, tuple(origin.position))], unit, tuple(origin.position))
            if data is None:
                where = self.source.describe(unit, tuple(origin.position))
                raise RecreateError(f"dataset {self.dataset_name!r}: the buffered row at {where} no longer parses")
            self._stamp(data, origin.unit_position, tuple(origin.position), worker_id)
            samples.append(data)
        return samples

    def _parse(self, row: Any, unit: Unit, position: Position) -> dict[str, Any] | None:
        """The sample of one row, or ``None`` after counting why it was dropped."""
        try:
            data = self.parse_row(row)
        except SystemExit as exc:  # a parser that exits would end the worker without a word
            where = self.source.describe(unit, position)
            what = f"kind {self.kind.name}" if self.kind is not None else f"class {type(self).__name__}"
            raise RuntimeError(
                f"dataset {self.dataset_name!r} ({what}): parse_row raised SystemExit({exc.code!r}) on the row at "
                f"{where}; a parser must raise an error for a bad row, not exit"
            ) from exc
        except FATAL:
            raise
        except DropRow as drop:
            self._drop(drop.reason, row, drop.__cause__, unit, position)
            return None
        except Exception as exc:  # noqa: BLE001 - judged: bad data is dropped, a parser bug is budgeted
            self._drop("bad_row", row, exc, unit, position)
            return None
        if not data:
            self.drops.record("empty_sample", self.source.describe(unit, position))
            return None
        self._parser_budget().succeeded()
        return data

    def _drop(self, reason: str, row: Any, error: BaseException | None, unit: Unit, position: Position) -> None:
        """Count a dropped row; an error that is not a data problem also counts against the parser budget."""
        where = self.source.describe(unit, position)
        if error is None:
            self.drops.record(reason, where)
            return
        verdict = judge(self.kind, row, error)
        self.drops.record(reason, where, error, verdict.detail)
        if not verdict.data_problem:
            self._parser_budget().failed(where, error)
