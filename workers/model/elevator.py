"""Per-device dispatch: no scheduler, or an mq-deadline-like elevator (block/mq-deadline.c).

* ``none``: requests are issued in the order they arrive (direct issue / hctx dispatch list);
  when all ``queue_depth`` driver tags are busy they wait FIFO.
* ``mq-deadline``: requests are inserted (I event) into a per-direction sector-sorted tree and
  a FIFO with deadlines (read_expire 500 ms, write_expire 5 s). Dispatch (``dd_dispatch_request``)
  continues the current batch in sector order for up to ``fifo_batch`` (16) requests, prefers
  reads unless writes were starved ``writes_starved`` (2) times, and restarts from the oldest
  request when a deadline expired or the sweep ran out. Bios merge into queued requests
  (``dd_bio_merge``: back merge by end sector, front merge by start), inserted requests merge
  with a queued request they continue (``blk_mq_sched_try_insert_merge``).

Only queued (not dispatched) requests take part in merges.
"""

from __future__ import annotations

import bisect
from collections import deque

from workers.model.limits import QueueLimits
from workers.model.plug import (
    MERGE_NONE,
    Bio,
    Request,
    attempt_bio_merge,
    attempt_rq_merge,
)
from workers.model.split import OP_READ

READ_EXPIRE_NS = 500_000_000
WRITE_EXPIRE_NS = 5_000_000_000
FIFO_BATCH = 16
WRITES_STARVED = 2


class NoneQueue:
    """``none``: FIFO of requests waiting for a driver tag."""

    has_elevator = False

    def __init__(self, lim: QueueLimits) -> None:
        self.lim = lim
        self.q: deque[Request] = deque()

    def __len__(self) -> int:
        return len(self.q)

    def insert(self, rq: Request, t: int) -> bool:
        """Queue ``rq``; False means it was merged away (never for ``none``)."""
        self.q.append(rq)
        return True

    def try_bio_merge(self, bio: Bio, nsegs: int) -> tuple[Request, int] | None:
        return None

    def pop(self, t: int) -> Request | None:
        return self.q.popleft() if self.q else None

    def peek(self, t: int) -> Request | None:
        return self.q[0] if self.q else None


class DeadlineQueue:
    """mq-deadline-like elevator (see the module docstring)."""

    has_elevator = True

    def __init__(self, lim: QueueLimits) -> None:
        self.lim = lim
        # per direction (0 read, 1 write): sorted keys (sector, rid) and the requests
        self.keys: list[list[tuple[int, int]]] = [[], []]
        self.rqs: list[dict[int, Request]] = [{}, {}]
        self.fifo: list[deque[Request]] = [deque(), deque()]
        self.by_end: dict[tuple[int, int], Request] = {}
        self.by_start: dict[tuple[int, int], Request] = {}
        self.next_pos = [-1, -1]
        self.batching = 0
        self.last_dir = 0
        self.starved = 0
        self.n = 0

    def __len__(self) -> int:
        return self.n

    @staticmethod
    def _dir(rq: Request) -> int:
        return 0 if rq.op == OP_READ else 1

    def _add(self, rq: Request) -> None:
        d = self._dir(rq)
        bisect.insort(self.keys[d], (rq.sector, rq.rid))
        self.rqs[d][rq.rid] = rq
        self.fifo[d].append(rq)
        self.by_end[(rq.op, rq.end)] = rq
        self.by_start[(rq.op, rq.sector)] = rq
        self.n += 1

    def _remove(self, rq: Request, old_sector: int | None = None, old_end: int | None = None
                ) -> None:
        d = self._dir(rq)
        sec = rq.sector if old_sector is None else old_sector
        end = rq.end if old_end is None else old_end
        i = bisect.bisect_left(self.keys[d], (sec, rq.rid))
        if i < len(self.keys[d]) and self.keys[d][i] == (sec, rq.rid):
            self.keys[d].pop(i)
        self.rqs[d].pop(rq.rid, None)
        if self.by_end.get((rq.op, end)) is rq:
            del self.by_end[(rq.op, end)]
        if self.by_start.get((rq.op, sec)) is rq:
            del self.by_start[(rq.op, sec)]
        self.n -= 1

    def insert(self, rq: Request, t: int) -> bool:
        """Insert with insert-merge; False when ``rq`` was merged into a queued request."""
        prev = self.by_end.get((rq.op, rq.sector))
        if prev is not None and not prev.nomerge:
            old_s, old_e = prev.sector, prev.end
            if attempt_rq_merge(prev, rq, self.lim):
                self._remove(prev, old_s, old_e)
                self._add_keep_fifo(prev)
                return False
        rq.t_insert = t
        self._add(rq)
        return True

    def _add_keep_fifo(self, rq: Request) -> None:
        d = self._dir(rq)
        bisect.insort(self.keys[d], (rq.sector, rq.rid))
        self.rqs[d][rq.rid] = rq
        self.by_end[(rq.op, rq.end)] = rq
        self.by_start[(rq.op, rq.sector)] = rq
        self.n += 1

    def try_bio_merge(self, bio: Bio, nsegs: int) -> tuple[Request, int] | None:
        """``dd_bio_merge``: back merge into the request ending at the bio, else front."""
        for key in ((bio.op, bio.sector), ):
            rq = self.by_end.get(key)
            if rq is not None:
                old_s, old_e = rq.sector, rq.end
                kind = attempt_bio_merge(rq, bio, nsegs, self.lim)
                if kind != MERGE_NONE:
                    self._remove(rq, old_s, old_e)
                    self._add_keep_fifo(rq)
                    return rq, kind
        rq = self.by_start.get((bio.op, bio.sector + bio.nr))
        if rq is not None:
            old_s, old_e = rq.sector, rq.end
            kind = attempt_bio_merge(rq, bio, nsegs, self.lim)
            if kind != MERGE_NONE:
                self._remove(rq, old_s, old_e)
                self._add_keep_fifo(rq)
                return rq, kind
        return None

    def _fifo_head(self, d: int) -> Request | None:
        f = self.fifo[d]
        while f and f[0].rid not in self.rqs[d]:
            f.popleft()
        return f[0] if f else None

    def _expired(self, d: int, t: int) -> bool:
        head = self._fifo_head(d)
        if head is None:
            return False
        return t - head.t_insert >= (READ_EXPIRE_NS if d == 0 else WRITE_EXPIRE_NS)

    def _next_in_sweep(self, d: int) -> Request | None:
        pos = self.next_pos[d]
        if pos < 0:
            return None
        keys = self.keys[d]
        i = bisect.bisect_left(keys, (pos, -1))
        if i >= len(keys):
            return None
        return self.rqs[d][keys[i][1]]

    def _choose(self, t: int) -> tuple[Request, int, bool] | None:
        """``dd_dispatch_request``'s choice: (request, direction, starts a new batch)."""
        if self.n == 0:
            return None
        d = self.last_dir
        rq = self._next_in_sweep(d) if self.rqs[d] else None
        if rq is not None and self.batching < FIFO_BATCH:
            return rq, d, False
        reads, writes = bool(self.rqs[0]), bool(self.rqs[1])
        d = 0 if reads and (not writes or self.starved < WRITES_STARVED) else 1
        nxt = self._next_in_sweep(d)
        if self._expired(d, t) or nxt is None:
            nxt = self._fifo_head(d)
        assert nxt is not None
        return nxt, d, True

    def peek(self, t: int) -> Request | None:
        c = self._choose(t)
        return c[0] if c else None

    def pop(self, t: int) -> Request | None:
        c = self._choose(t)
        if c is None:
            return None
        rq, d, new_batch = c
        if new_batch:
            if d == 0:
                self.starved = self.starved + 1 if self.rqs[1] else self.starved
            else:
                self.starved = 0
            self.batching = 0
            self.last_dir = d
        return self._take(rq, d)

    def _take(self, rq: Request, d: int) -> Request:
        self._remove(rq)
        self.batching += 1
        self.next_pos[d] = rq.end
        return rq


def make_queue(lim: QueueLimits) -> NoneQueue | DeadlineQueue:
    """The dispatch queue of a device: ``none`` or (any other scheduler) mq-deadline-like."""
    return DeadlineQueue(lim) if lim.has_elevator else NoneQueue(lim)
