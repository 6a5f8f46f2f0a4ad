"""Read-ahead of planned byte ranges: ``ceil(fetch / consume) + 2`` retried ranged block requests in flight
(an object store answers after 20-100 ms), each held against the process's I/O budget until consumed (one
always fits when nothing is held). Opening a range abandons the planned ones before it; a short block ends it."""

from __future__ import annotations

import math
import os
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from typing import Any

from . import service, storage
from .ranged import SequentialReader, open_local_range, read_range
from .retry import RetryPolicy
from .storage import StorageOptions

MAX_PLANNED_RANGES = 256
"""Ranges taken from the plan ahead of the consumer at most (each holds a few numbers)."""
MAX_SEARCH = 64
"""Planned ranges looked through for a range the consumer opens (a resume that skips row groups)."""
_EWMA = 0.3


@dataclass
class _Block:
    start: int
    end: int
    future: Future[tuple[bytes, float]]
    released: bool = False


@dataclass
class _Range:
    url: str
    start: int
    end: int
    next: int
    """Offset of the next block to request."""
    blocks: deque[_Block] = field(default_factory=deque)


class ReadAhead:
    """Ranged block reads of planned ranges, several in flight; see the module docstring."""

    def __init__(
        self,
        *,
        storage_options: StorageOptions | None = None,
        retry: RetryPolicy | None = None,
        block_size: int = 4 << 20,
        budget: service.ByteBudget | None = None,
        cap: int | None = None,
        max_in_flight: int = 16,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``budget``: the process's I/O budget unless given; ``cap``: the most this read-ahead holds of it;
        ``clock`` times fetches and the consumer's pace (tests drive the depth with a fake one)."""
        if block_size <= 0:
            raise ValueError(f"block_size must be > 0, got {block_size}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.storage_options = storage_options
        self.retry = retry or RetryPolicy()
        self.block_size = block_size
        self.account = service.ByteBudget(cap, service.budget() if budget is None else budget)
        """This read-ahead's budget inside the shared one (``limit``: what it may hold; ``peak``: the most it held)."""
        self.max_in_flight = max_in_flight
        self._clock = clock
        self._plan: Iterator[tuple[str, int, int]] = iter(())
        self._ranges: deque[_Range] = deque()
        self._held = 0  # blocks requested and not yet released by the consumer
        self._fetch_s: float | None = None
        self._consume_s: float | None = None
        self._last_handed: float | None = None
        self.requests = 0
        self.max_held = 0
        # Bytes still counted when this read-ahead is dropped (a stream abandoned mid-way) go back
        # to the shared budget, so they never starve the process's other readers.
        weakref.finalize(self, self.account.give_all)

    def plan(self, ranges: Iterable[tuple[str, int, int]]) -> None:
        """Forget what was planned (cancelling its requests) and read ahead along ``ranges``:
        ``(url, start, end)`` in the order the consumer will open them (may be endless)."""
        self._abandon(len(self._ranges))
        self._plan = iter(ranges)

    def open(self, url: str, start: int, end: int) -> RangeReader:
        """A reader of bytes ``[start, end)`` of ``url`` (see the module docstring for the order rule)."""
        found = next((i for i, r in enumerate(self._ranges) if r.url == url), None)
        if found is None:
            found = self._materialize(until=url)
        if found is not None:
            self._abandon(found)
            front = self._ranges[0]
            if (front.start, front.end) != (start, end):
                self._abandon_blocks(front)
                front.start = front.next = start
                front.end = end
        else:
            self._ranges.appendleft(_Range(url, start, end, start))
        return RangeReader(self, self._ranges[0])

    def _next_block(self, r: _Range) -> tuple[_Block, bytes] | None:
        """The next block of range ``r`` (requesting it now if it is not in flight), with its bytes."""
        now = self._clock()
        self._fill()
        if not r.blocks:
            if r.next >= r.end:
                return None
            self._submit(r, force=True)
        block = r.blocks.popleft()
        data, seconds = block.future.result()
        self._fetch_s = seconds if self._fetch_s is None else (1 - _EWMA) * self._fetch_s + _EWMA * seconds
        if self._last_handed is not None:
            busy = max(0.0, now - self._last_handed)
            self._consume_s = busy if self._consume_s is None else (1 - _EWMA) * self._consume_s + _EWMA * busy
        self._last_handed = self._clock()
        if len(data) < block.end - block.start:
            self._abandon_blocks(r)  # a short block is the end of the object: the rest is not there
            r.next = r.end
        self._fill()
        return block, data

    def release(self, block: _Block) -> None:
        """The consumer has moved past ``block``: its bytes no longer count."""
        if not block.released:
            block.released = True
            self._held -= 1
            self.account.give(block.end - block.start)

    def finished(self, r: _Range) -> None:
        """The consumer closed range ``r``: drop it and whatever of it is still in flight."""
        if self._ranges and self._ranges[0] is r:
            self._abandon(1)
        else:
            self._abandon_blocks(r)

    def depth(self) -> int:
        """Blocks to keep requested ahead: the observed fetch time over the consumer's pace."""
        cap = min(self.max_in_flight, max(1, self.account.limit // self.block_size))
        if self._fetch_s is None or self._consume_s is None:
            return min(cap, 2)
        want = math.ceil(self._fetch_s / max(self._consume_s, 1e-4)) + 2
        return max(min(cap, 2), min(cap, want))

    def _fill(self) -> None:
        """Request blocks along the plan, in order, up to :meth:`depth` and the budget."""
        depth = self.depth()
        i = 0
        while self._held < depth:
            while i < len(self._ranges) and self._ranges[i].next >= self._ranges[i].end:
                i += 1
            if i >= len(self._ranges):
                if self._materialize() is None:
                    return
                continue
            if not self._submit(self._ranges[i], force=False):
                return

    def _materialize(self, until: str | None = None) -> int | None:
        """Take ranges from the plan: one (returns its index), or, with ``until``, up to
        ``MAX_SEARCH`` until one of that URL (its index, or ``None`` when none came)."""
        for _ in range(MAX_SEARCH if until is not None else 1):
            if len(self._ranges) >= MAX_PLANNED_RANGES:
                return None
            try:
                url, start, end = next(self._plan)
            except StopIteration:
                return None
            self._ranges.append(_Range(url, start, end, start))
            if until is None or url == until:
                return len(self._ranges) - 1
        return None

    def _submit(self, r: _Range, *, force: bool) -> bool:
        a = r.next
        b = min(r.end, a + self.block_size)
        if not self.account.take(b - a, force=force or self._held == 0):
            return False
        r.next = b
        self._held += 1
        self.max_held = max(self.max_held, self._held)
        self.requests += 1
        r.blocks.append(_Block(a, b, service.pool().submit(self._fetch, r.url, a, b)))
        return True

    def _fetch(self, url: str, a: int, b: int) -> tuple[bytes, float]:
        t0 = self._clock()
        data = read_range(url, a, b, storage_options=self.storage_options, retry=self.retry)
        return data, self._clock() - t0

    def _abandon(self, count: int) -> None:
        """Drop the first ``count`` planned ranges and their requests."""
        for _ in range(min(count, len(self._ranges))):
            self._abandon_blocks(self._ranges.popleft())

    def _abandon_blocks(self, r: _Range) -> None:
        """Drop the requested, unread blocks of ``r``; its next request is again its first unread byte."""
        while r.blocks:
            block = r.blocks.pop()
            r.next = block.start
            if block.future.cancel() or block.future.done():
                self.release(block)
            else:  # running: its bytes count until they arrive, then go (the callback keeps no ref to self)
                block.released = True
                self._held -= 1
                block.future.add_done_callback(partial(_give_back, self.account, block.end - block.start))


def _give_back(account: service.ByteBudget, n: int, _done: object) -> None:
    account.give(n)


class RangeReader(SequentialReader):
    """Sequential ``read(n)`` over one range of a :class:`ReadAhead`; a read inside the current block is one copy."""

    def __init__(self, owner: ReadAhead, r: _Range) -> None:
        self._owner = owner
        self._range = r
        self._pos = r.start
        self._buf = memoryview(b"")
        self._block: _Block | None = None
        self._eof = False

    def _refill(self) -> bool:
        """Make the range's next block the current one; ``False`` at the end of the range."""
        if self._eof:
            return False
        self._release()
        got = self._owner._next_block(self._range)
        if got is None:
            self._eof = True
            return False
        self._block, data = got
        self._eof = len(data) < self._block.end - self._block.start
        self._buf = memoryview(data)
        return bool(data)

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all remaining when ``n < 0``); fewer only at the end."""
        if 0 <= n <= len(self._buf):  # served from the current block: one copy
            view = self._buf[:n]
            self._buf = self._buf[n:]
            self._pos += n
            return bytes(view)
        out = bytearray()
        while n < 0 or len(out) < n:
            if not self._buf and not self._refill():
                break
            take = len(self._buf) if n < 0 else min(n - len(out), len(self._buf))
            out += self._buf[:take]
            self._buf = self._buf[take:]
            self._pos += take
        return bytes(out)

    def _release(self) -> None:
        if self._block is not None:
            self._owner.release(self._block)
            self._block = None

    def close(self) -> None:
        self._release()
        self._buf = memoryview(b"")
        self._owner.finished(self._range)


@dataclass(eq=False)
class SourceReads:
    """How one row source reads its shards' byte ranges: local ones straight from their files, remote ones
    through this process's :class:`ReadAhead` (made on first use in each process, never pickled)."""

    dataset_name: str
    _: KW_ONLY
    storage_options: StorageOptions | None
    retry: RetryPolicy
    block_size: int
    prefetch: bool
    readahead_bytes: int | None
    """The most this source's read-ahead holds of the process's I/O budget; ``None``: no cap of its own."""
    _readahead: ReadAhead | None = field(default=None, init=False, repr=False)
    _pid: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.readahead_bytes is not None and self.readahead_bytes <= 0:
            raise ValueError(f"dataset {self.dataset_name!r}: readahead_bytes must be > 0, got {self.readahead_bytes}")

    def readahead(self) -> ReadAhead:
        """This process's read-ahead: one block in flight per I/O pool thread (one without ``prefetch``)."""
        if self._readahead is None or self._pid != os.getpid():
            self._readahead = ReadAhead(
                storage_options=self.storage_options,
                retry=self.retry,
                block_size=self.block_size,
                cap=self.readahead_bytes,
                max_in_flight=service.config().threads if self.prefetch else 1,
            )
            self._pid = os.getpid()
        return self._readahead

    def plan(self, ranges: Iterable[tuple[str, int, int]]) -> None:
        """Read ``(url, start, end)`` ahead in this order (nothing without ``prefetch``)."""
        if self.prefetch:
            self.readahead().plan(ranges)

    def open(self, url: str, start: int, end: int) -> Any:
        """A sequential reader of bytes ``[start, end)`` of ``url``."""
        if storage.is_local(url):
            return open_local_range(storage.local_path(url), start, end)
        return self.readahead().open(url, start, end)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_readahead": None, "_pid": None, "_io": service.carry()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        service.adopt(state.pop("_io", None))
        self.__dict__.update(state)
