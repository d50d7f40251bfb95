"""blk-mq tag allocation with sbitmap wait queues (block/blk-mq-tag.c, lib/sbitmap.c).

One :class:`TagQueue` is the ``struct sbitmap_queue`` of one hardware queue's tag set (the
scheduler tags when an elevator is attached, the driver tags otherwise). It keeps the free
tags, the ``SBQ_WAIT_QUEUES`` = 8 wait queues and the wake-up bookkeeping, and is driven by the
discrete-event simulation in :mod:`workers.model.timing`: a submitting thread calls
:meth:`TagQueue.get` (``blk_mq_get_tag``'s first attempt), sleeps with
:meth:`TagQueue.prepare_to_wait` when it failed, and runs again after a waker picked it
(:meth:`TagQueue.put` returns the woken thread ids, ``sbitmap_queue_clear`` ->
``sbitmap_queue_wake_up``).

Two policy switches (kernel-model.md section 4 and 7):

``sbitmap_wakeup``
    ``per_queue`` (<= 6.1, ``__sbq_wake_up``): every completion decrements ``wait_cnt`` of the
    first *active* wait queue at or after ``wake_index`` (``sbq_wake_ptr``); when it reaches 0 it
    is reset to ``wake_batch``, ``wake_index`` advances and ``wake_batch`` waiters of *that one*
    queue are woken (fewer if it holds fewer). ``global`` (6.2+, 4f8126bb2308): completions add
    to ``completion_cnt``; each time it runs ``wake_batch`` ahead of ``wakeup_cnt``,
    ``__sbitmap_queue_wake_up`` wakes ``wake_batch`` waiters over the queues starting at
    ``wake_index``, advancing the index before each queue.

``tag_preempt``
    ``always``: ``__blk_mq_get_tag`` is tried before any wait, so a newcomer takes a freed tag
    even while hundreds of threads sleep (tag preemption). ``waiters_first`` (spelled
    ``seed003`` before; still accepted): waiters get freed tags before newcomers, as in Yu Kuai's RFC v2
    series (seed 003): no preemption once more than 8 threads wait (``preempt_tag``: patch 4)
    unless free tags reached ``2 * wake_batch`` at the last wake-up (patch 5), a thread that
    slept once or a split bio after the first piece always preempts (patches 4 and 6), a
    waiter records how many tags its bio still needs and a wake-up wakes only as many threads
    as cover ``wake_batch`` tags (``get_wake_nr``: patches 7 and 8), and with ``per_queue``
    the next queue to wake is the one with the most waiters (``sbq_update_wake_index``:
    patches 1-3). The rewritten ``__sbq_wake_up`` returns true after waking, so v5.18's
    ``sbitmap_queue_wake_up`` loop counts the same completion again on the next queue: a
    wake-up every ``wake_batch - 1`` completions for ``wake_batch`` tags of need, which splits
    the last piece off most 1M writes (:meth:`TagQueue._wake_per_queue`; the seed's patched
    column's decline).

Simplifications (documented in docs/model-timing.md): tags are a free list, not bit words
(which tag number a request gets does not change timing); the races the seed's patches 2-3
describe (two wakers resetting ``wake_index``) are not reproduced, only the resulting policy.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from workers.errors import ModelConfigError

#: SBQ_WAIT_QUEUES (include/linux/sbitmap.h).
SBQ_WAIT_QUEUES = 8
#: SBQ_WAKE_BATCH.
SBQ_WAKE_BATCH = 8

#: Bound on ``sbitmap_queue_wake_up``'s ``while (__sbq_wake_up(sbq))`` loop per completion.
#: With the RFC's rewrite and ``wake_batch`` 1 (a map under 16 tags) every call wakes and
#: returns true while woken threads still count in ``ws_active``: the kernel would spin; the
#: model stops after one call per wait queue. With ``wake_batch`` >= 2 the loop ends after
#: the second call (the next queue's ``wait_cnt`` goes from wake_batch to wake_batch - 1).
RFC_REWAKE_LIMIT = SBQ_WAIT_QUEUES

WAKEUPS = ("per_queue", "global")
PREEMPTS = ("always", "waiters_first")


def sbitmap_shift(depth: int) -> int:
    """Bits per word (as a shift) ``sbitmap_init_node`` picks: small maps spread over words.

    ``sbitmap_calculate_shift``: start at ilog2(BITS_PER_LONG) = 6 and, for depth >= 4, shrink
    while ``4 << shift > depth`` so that a small map uses at least four words.
    """
    shift = 6
    if depth >= 4:
        while shift > 0 and (4 << shift) > depth:
            shift -= 1
    return shift


def calc_wake_batch(depth: int, *, min_shallow_depth: int | None = None, users: int = 1) -> int:
    """``wake_batch`` of a tag map (``sbq_calc_wake_batch``, lib/sbitmap.c).

    Args:
        depth: tags in the map.
        min_shallow_depth: ``sbitmap_queue_min_shallow_depth`` (mq-deadline sets its
            async_depth); limits the usable bits per word. None = unlimited.
        users: active queues sharing the tag set
            (``sbitmap_queue_recalculate_wake_batch``: ceil(depth / users)).

    >>> [calc_wake_batch(d) for d in (4, 32, 62, 64, 256)]
    [1, 4, 7, 8, 8]
    """
    if depth <= 0:
        raise ModelConfigError(f"tag depth must be positive, not {depth}")
    if users > 1:
        depth = -(-depth // users)
        return max(1, min(depth // SBQ_WAIT_QUEUES, SBQ_WAKE_BATCH))
    shift = sbitmap_shift(depth)
    per_word = 1 << shift
    shallow = per_word if min_shallow_depth is None else min(per_word, min_shallow_depth)
    usable = (depth >> shift) * shallow + min(depth & (per_word - 1), shallow)
    return max(1, min(usable // SBQ_WAIT_QUEUES, SBQ_WAKE_BATCH))


@dataclass(slots=True)
class _WaitState:
    """``struct sbq_wait_state``: one wait queue (FIFO of exclusive waiters)."""

    waiters: deque[int] = field(default_factory=deque)
    wait_cnt: int = 0
    #: seed003 patch 1 ``waiters_cnt``: threads between prepare_to_wait and finish_wait.
    waiters_cnt: int = 0


@dataclass(slots=True)
class TagStats:
    """Counters the tests and the seed-003 table print."""

    gets: int = 0
    sleeps: int = 0
    wakeups: int = 0
    wake_calls: int = 0
    preempted: int = 0
    refused_preempt: int = 0
    max_ws_active: int = 0
    rescues: int = 0


class TagQueue:
    """A ``struct sbitmap_queue`` of ``depth`` tags with 8 wait queues.

    Thread ids are ints chosen by the caller. Every method is O(1) or O(8) except the
    ``waiters_first`` wake-up, which walks waiters until ``wake_batch`` tags are covered.
    """

    def __init__(self, depth: int, *, wakeup: str = "global", preempt: str = "always",
                 wake_batch: int | None = None, min_shallow_depth: int | None = None) -> None:
        if wakeup not in WAKEUPS:
            raise ModelConfigError(f"sbitmap_wakeup={wakeup!r}: expected per_queue | global")
        if preempt not in PREEMPTS:
            raise ModelConfigError(f"tag_preempt={preempt!r}: expected always | waiters_first")
        if depth <= 0:
            raise ModelConfigError(f"tag depth must be positive, not {depth}")
        self.depth = int(depth)
        self.wakeup = wakeup
        self.preempt = preempt
        self.wake_batch = int(wake_batch) if wake_batch else calc_wake_batch(
            depth, min_shallow_depth=min_shallow_depth)
        self._free: list[int] = list(range(self.depth - 1, -1, -1))
        self.ws = [_WaitState(wait_cnt=self.wake_batch) for _ in range(SBQ_WAIT_QUEUES)]
        self.wake_index = 0
        #: hctx->wait_index: bt_wait_ptr hands out wait queues round robin.
        self.hctx_wait_index = 0
        #: ws_active: threads between sbitmap_prepare_to_wait and sbitmap_finish_wait.
        self.ws_active = 0
        self.completion_cnt = 0
        self.wakeup_cnt = 0
        #: seed003 patch 5: sbq->force_tag_preemption (initialised true).
        self.force_preemption = True
        self._where: dict[int, int] = {}  # thread -> wait queue while accounted
        self._queued: set[int] = set()  # threads still on a wait list (not yet woken)
        self._nr_tags: dict[int, int] = {}  # thread -> tags its bio still needs (patch 7)
        self.stats = TagStats()

    # --- state --------------------------------------------------------------------------
    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def in_use(self) -> int:
        return self.depth - len(self._free)

    def waiters_per_queue(self) -> list[int]:
        """``waiters_cnt`` of each wait queue (the seed's debugfs dump)."""
        return [w.waiters_cnt for w in self.ws]

    def is_waiting(self, thread: int) -> bool:
        return thread in self._where

    # --- allocation ---------------------------------------------------------------------
    def may_preempt(self, preemption: bool) -> bool:
        """``preempt_tag`` (seed003 patch 4/5); always true under the old policy."""
        if self.preempt == "always":
            return True
        return preemption or self.ws_active <= SBQ_WAIT_QUEUES or self.force_preemption

    def try_get(self) -> int | None:
        """``__sbitmap_queue_get``: any free tag, ignoring waiters."""
        if not self._free:
            return None
        self.stats.gets += 1
        return self._free.pop()

    def get(self, preemption: bool = False) -> int | None:
        """One attempt of ``blk_mq_get_tag`` at this instant: a tag, or None (go to sleep).

        ``preemption`` is ``data->preemption`` of the seed003 series: set for split bios after
        the first piece (REQ_PREEMPT) and after the thread slept once.
        """
        if self.preempt != "always" and not self.may_preempt(preemption):
            if self._free:
                self.stats.refused_preempt += 1
            return None
        free = self._free
        if not free:
            return None
        stats = self.stats
        stats.gets += 1
        if self.ws_active:
            stats.preempted += 1
        return free.pop()

    def prepare_to_wait(self, thread: int, nr_tags: int = 1) -> int:
        """``bt_wait_ptr`` + ``sbitmap_prepare_to_wait``: queue the thread; returns the queue.

        ``nr_tags`` (seed003 patch 7, ``wait.nr_tags``) is how many tags the thread's bio
        still needs; only the ``waiters_first`` wake-up reads it.
        """
        if thread in self._where:
            raise ValueError(f"thread {thread} is already waiting")
        idx = self.hctx_wait_index
        self.hctx_wait_index = (idx + 1) % SBQ_WAIT_QUEUES
        ws = self.ws[idx]
        ws.waiters.append(thread)
        self._queued.add(thread)
        ws.waiters_cnt += 1
        self.ws_active += 1
        self._where[thread] = idx
        self._nr_tags[thread] = max(1, int(nr_tags))
        self.stats.sleeps += 1
        self.stats.max_ws_active = max(self.stats.max_ws_active, self.ws_active)
        return idx

    def finish_wait(self, thread: int) -> None:
        """``sbitmap_finish_wait``: the thread runs again and is no longer accounted.

        A woken thread was already removed from its queue by ``autoremove_wake_function``;
        ``ws_active`` still counted it until now.
        """
        idx = self._where.pop(thread, None)
        if idx is None:
            return
        ws = self.ws[idx]
        ws.waiters_cnt -= 1
        self.ws_active -= 1
        self._nr_tags.pop(thread, None)
        if thread in self._queued:  # gave up without a wake-up: leave the wait list
            self._queued.discard(thread)
            ws.waiters.remove(thread)

    # --- release and wake-up --------------------------------------------------------------
    def put(self, tag: int) -> list[int]:
        """``sbitmap_queue_clear``: free the tag, then ``sbitmap_queue_wake_up(sbq, 1)``.

        Returns the threads woken by this completion, in wake order.
        """
        self._free.append(tag)
        return self.wake_up(1)

    def wake_up(self, nr: int = 1) -> list[int]:
        if not self.ws_active:
            return []
        self.stats.wake_calls += 1
        woken: list[int] = []
        if self.wakeup == "global":
            self._wake_global(nr, woken)
        else:
            for _ in range(nr):
                # sbitmap_queue_wake_up (<= 6.0): ``while (__sbq_wake_up(sbq)) ;``. The RFC's
                # rewrite returns true after a wake-up, so the same completion is counted again
                # on the next queue (see _wake_per_queue); bounded here, see RFC_REWAKE_LIMIT.
                for _ in range(RFC_REWAKE_LIMIT):
                    if not self._wake_per_queue(woken):
                        break
        self.stats.wakeups += len(woken)
        return woken

    def wake_all(self) -> list[int]:
        """``sbitmap_queue_wake_all``: wake every waiter (the model's hang rescue)."""
        woken: list[int] = []
        for ws in self.ws:
            while ws.waiters:
                woken.append(ws.waiters.popleft())
        self._queued.clear()
        self.stats.wakeups += len(woken)
        return woken

    def _wake_nr(self, ws: _WaitState, nr: int) -> int:
        """How many threads of ``ws`` to wake for ``nr`` tags.

        ``always``: ``nr`` (wake_up_nr). ``waiters_first``: ``get_wake_nr`` (patch 8): walk the queue
        and stop at the thread whose remaining need covers what is left of ``nr``.
        """
        if self.preempt == "always":
            return nr
        count = 1
        left = nr
        for thread in ws.waiters:
            need = self._nr_tags.get(thread, 1)
            if left <= need:
                break
            count += 1
            left -= need
        return count

    def _wake_queue(self, ws: _WaitState, nr: int, woken: list[int]) -> int:
        n = 0
        waiters = ws.waiters
        queued = self._queued
        while n < nr and waiters:
            thread = waiters.popleft()
            queued.discard(thread)
            woken.append(thread)
            n += 1
        return n

    def _wake_global(self, nr: int, woken: list[int]) -> None:
        """``sbitmap_queue_wake_up`` / ``__sbitmap_queue_wake_up`` (6.2+)."""
        self.completion_cnt += nr
        while self.completion_cnt - self.wakeup_cnt >= self.wake_batch:
            self.wakeup_cnt += self.wake_batch
            if self.preempt == "waiters_first":
                self.force_preemption = self.free >= 2 * self.wake_batch
            left = self.wake_batch
            idx = self.wake_index
            for _ in range(SBQ_WAIT_QUEUES):
                ws = self.ws[idx]
                idx = (idx + 1) % SBQ_WAIT_QUEUES  # advance before checking the queue
                if not ws.waiters:
                    continue
                if self.preempt == "waiters_first":
                    # get_wake_nr: each woken thread covers the tags its bio still needs.
                    while left > 0 and ws.waiters:
                        thread = ws.waiters.popleft()
                        self._queued.discard(thread)
                        woken.append(thread)
                        left -= self._nr_tags.get(thread, 1)
                else:
                    left -= self._wake_queue(ws, left, woken)
                if left <= 0:
                    break
            self.wake_index = idx

    def _wake_per_queue(self, woken: list[int]) -> bool:
        """``__sbq_wake_up`` (<= 6.1), or the seed003 rewrite of it (patches 3, 5, 8).

        Returns what ``__sbq_wake_up`` returns: whether ``sbitmap_queue_wake_up`` calls it
        again. v5.18 returns true only when it lost the ``atomic_cmpxchg`` race on
        ``wait_cnt`` (never here: the model is sequential), false after its wake-up.

        The RFC's patch 3 ends with ``wake_up_nr(...); return true;``: after every wake-up
        the caller's loop runs ``__sbq_wake_up`` again for the *same* completion, which
        decrements ``wait_cnt`` of the queue ``sbq_update_wake_index`` just chose (8 -> 7).
        So, once threads wait, a wake-up comes every ``wake_batch - 1`` completions, while
        ``get_wake_nr`` (patch 8) wakes only the threads that cover ``wake_batch`` tags: a
        woken thread that needs all 8 tags of its 1M write finds 7 free, queues its last
        piece behind every other sleeper (``bt_wait_ptr``) and the write reaches the disk in
        two parts. Nothing is fitted: it follows from the posted code with wake_batch 8.
        """
        if not self.ws_active:
            return False
        if self.preempt == "waiters_first":
            idx = self.wake_index
            ws = self.ws[idx]
            ws.wait_cnt -= 1
            if ws.wait_cnt > 0:
                return False
            self._update_wake_index(idx)
            ws.wait_cnt = self.wake_batch
            self.force_preemption = self.free >= 2 * self.wake_batch
            if ws.waiters:
                self._wake_queue(ws, self._wake_nr(ws, self.wake_batch), woken)
            return True
        # sbq_wake_ptr: first queue with waiters from wake_index; it becomes wake_index.
        idx = self.wake_index
        for _ in range(SBQ_WAIT_QUEUES):
            if self.ws[idx].waiters:
                break
            idx = (idx + 1) % SBQ_WAIT_QUEUES
        else:
            return False
        self.wake_index = idx
        ws = self.ws[idx]
        ws.wait_cnt -= 1
        if ws.wait_cnt <= 0:
            ws.wait_cnt = self.wake_batch
            self.wake_index = (idx + 1) % SBQ_WAIT_QUEUES
            self._wake_queue(ws, self.wake_batch, woken)
        return False

    def _update_wake_index(self, old: int) -> None:
        """``sbq_update_wake_index`` (seed003 patch 3): the other queue with most waiters."""
        best, best_n = -1, 0
        for i, ws in enumerate(self.ws):
            if i == old:
                continue
            if ws.waiters_cnt > best_n:
                best, best_n = i, ws.waiters_cnt
        if best_n:
            self.wake_index = best
