"""sbitmap tag queues: wake_batch, per-queue vs global wake-up, seed003 preemption rules."""

from __future__ import annotations

import pytest

from workers.errors import ModelConfigError
from workers.model.sbitmap import SBQ_WAIT_QUEUES, TagQueue, calc_wake_batch, sbitmap_shift


def _full(q: TagQueue) -> list[int]:
    tags = []
    while (t := q.try_get()) is not None:
        tags.append(t)
    return tags


@pytest.mark.parametrize(("depth", "batch"), [(4, 1), (32, 4), (62, 7), (64, 8), (256, 8)])
def test_wake_batch_by_depth_matches_kernel_model_table(depth: int, batch: int) -> None:
    """kernel-model.md 4(d): wake_batch = clamp(depth / 8, 1, 8)."""
    assert calc_wake_batch(depth) == batch


def test_wake_batch_for_shared_tags_and_shallow_depth() -> None:
    """Shared tags (depth 64, 4 users) give 2; mq-deadline's async_depth leaves 64 at 8 (E4.2)."""
    assert calc_wake_batch(64, users=4) == 2
    assert calc_wake_batch(64, min_shallow_depth=48) == 8
    assert sbitmap_shift(64) == 4
    assert calc_wake_batch(64, min_shallow_depth=4) == 2  # 4 words x 4 usable bits


def test_e4_2_mq_deadline_queue_depth_32_has_64_sched_tags_batch_8() -> None:
    """E4.2: nr_requests = 2 x min(32, 128) = 64 scheduler tags, wake_batch 8."""
    q = TagQueue(2 * min(32, 128), min_shallow_depth=48)
    assert q.depth == 64 and q.wake_batch == 8


def test_e4_1_global_wakeup_wakes_four_after_the_fourth_completion() -> None:
    """E4.1: depth 32, 40 readers: 32 tags, 8 sleep; the 4th completion wakes 4 (6.2+)."""
    q = TagQueue(32, wakeup="global")
    tags = [q.get() for _ in range(32)]
    assert None not in tags
    for thread in range(32, 40):
        assert q.get() is None
        q.prepare_to_wait(thread)
    assert q.ws_active == 8
    assert q.waiters_per_queue() == [1] * SBQ_WAIT_QUEUES
    woken = [q.put(t) for t in tags[:4]]  # type: ignore[arg-type]
    assert woken[:3] == [[], [], []]
    assert woken[3] == [32, 33, 34, 35]  # from ws[wake_index] onward, one per queue
    assert q.free == 4 and q.wake_index == 4


def test_e4_1_freed_tags_can_be_taken_by_a_newcomer_before_the_woken() -> None:
    """E4.1: free tags sit unused until a batch and a new arrival may take them (barging)."""
    q = TagQueue(32, wakeup="global")
    tags = _full(q)
    for thread in range(32, 40):
        q.prepare_to_wait(thread)
    for t in tags[:3]:
        assert q.put(t) == []
    assert q.free == 3
    assert q.get() is not None  # tag_preempt=always: the newcomer ignores 8 sleepers
    assert q.stats.preempted == 1


def test_per_queue_wakeup_wakes_only_one_queue_per_batch() -> None:
    """<= 6.1: wait_cnt of one queue counts down; its reaching 0 wakes that queue only."""
    q = TagQueue(32, wakeup="per_queue")
    tags = _full(q)
    for thread in range(32, 40):
        q.prepare_to_wait(thread)
    woken = [w for t in tags[:8] for w in q.put(t)]
    assert woken == [32, 33]  # 4 completions per batch, one waiter in each queue
    assert q.wake_index == 2


def test_global_wakeup_counts_only_while_someone_waits() -> None:
    """completion_cnt does not advance when ws_active is 0 (early return)."""
    q = TagQueue(32, wakeup="global")
    tags = _full(q)
    for t in tags[:10]:
        q.put(t)
    assert q.completion_cnt == 0
    q.prepare_to_wait(99)
    assert q.get() is not None  # free tags: a newcomer takes one at once
    assert q.completion_cnt == 0


def test_finish_wait_unaccounts_woken_and_abandoned_waiters() -> None:
    """ws_active counts a woken thread until it runs; an abandoned wait leaves its queue."""
    q = TagQueue(4, wakeup="global")  # wake_batch 1
    tags = _full(q)
    q.prepare_to_wait(10)
    q.prepare_to_wait(11)
    assert q.put(tags[0]) == [10]
    assert q.ws_active == 2
    q.finish_wait(10)
    q.finish_wait(11)
    assert q.ws_active == 0 and q.waiters_per_queue() == [0] * 8
    assert all(not ws.waiters for ws in q.ws)
    with pytest.raises(ValueError):
        q.prepare_to_wait(12)
        q.prepare_to_wait(12)


def test_seed003_no_preemption_once_more_than_eight_wait() -> None:
    """seed003 patch 4: with ws_active > 8, a fresh bio does not take a free tag."""
    q = TagQueue(64, preempt="waiters_first", wakeup="per_queue")
    q.force_preemption = False
    tags = _full(q)
    for thread in range(100, 109):
        q.prepare_to_wait(thread)
    q._free.append(tags.pop())  # a tag frees without a wake-up batch
    assert q.get(preemption=False) is None
    assert q.stats.refused_preempt == 1
    assert q.get(preemption=True) is not None  # split piece / woken thread preempts


def test_seed003_forces_preemption_when_enough_tags_are_free() -> None:
    """seed003 patch 5: at a wake-up with >= 2 * wake_batch free tags, preemption is forced."""
    q = TagQueue(64, preempt="waiters_first", wakeup="per_queue")
    tags = _full(q)
    for thread in range(100, 120):
        q.prepare_to_wait(thread)
    for t in tags[:8]:
        q.put(t)
    assert q.force_preemption is False  # 8 free < 16 at the batch
    for t in tags[8:24]:
        q.put(t)
    assert q.force_preemption is True
    assert q.get(preemption=False) is not None


def test_seed003_wakes_by_required_tags() -> None:
    """seed003 patch 8: a waiter needing 8 tags covers a whole batch, so one thread wakes."""
    for wakeup in ("per_queue", "global"):
        q = TagQueue(64, preempt="waiters_first", wakeup=wakeup)
        tags = _full(q)
        q.hctx_wait_index = 0
        q.prepare_to_wait(1, nr_tags=8)
        for thread in range(2, 9):
            q.prepare_to_wait(thread, nr_tags=1)
        woken = [w for t in tags[:8] for w in q.put(t)]
        assert woken[0] == 1 and len(woken) == 1, wakeup
        old = TagQueue(64, preempt="always", wakeup=wakeup)
        tags = _full(old)
        for thread in range(1, 9):
            old.prepare_to_wait(thread, nr_tags=8)
        woken = [w for t in tags[:8] for w in old.put(t)]
        assert len(woken) >= 1
        if wakeup == "global":
            assert len(woken) == 8


def test_seed003_wake_index_moves_to_the_fullest_queue() -> None:
    """seed003 patch 3: after a batch, wake_index goes to the other queue with most waiters."""
    q = TagQueue(64, preempt="waiters_first", wakeup="per_queue")
    tags = _full(q)
    for thread in range(40):
        q.hctx_wait_index = 5 if thread < 30 else 0
        q.prepare_to_wait(thread)
    for t in tags[:8]:
        q.put(t)
    assert q.wake_index == 5


def test_seed003_rfc_wakes_every_wake_batch_minus_one_completions() -> None:
    """Known answer for the RFC's ``__sbq_wake_up`` returning true after a wake-up (patch 3).

    v5.18's ``sbitmap_queue_wake_up`` is ``while (__sbq_wake_up(sbq)) ;``, so the completion
    that woke a queue is counted once more on the queue ``sbq_update_wake_index`` picked next
    (8 -> 7). With 8 waiters per queue each needing a whole 1M write (8 tags), wake-ups come at
    completions 8, 15, 22, 29, 36 and wake one thread each (``get_wake_nr``): 8 tags wanted
    for every 7 freed. The v5.18 policy wakes 8 threads at 8, 16, 24, 32, 40.
    """
    q = TagQueue(64, preempt="waiters_first", wakeup="per_queue")
    assert q.wake_batch == 8
    tags = _full(q)
    for thread in range(64):
        q.prepare_to_wait(thread, nr_tags=8)  # bt_wait_ptr: round robin, 8 per queue
    wakes = [(i, woken) for i, t in enumerate(tags[:36], start=1) if (woken := q.put(t))]
    assert [i for i, _ in wakes] == [8, 15, 22, 29, 36]
    assert all(len(woken) == 1 for _, woken in wakes)
    assert q.ws[q.wake_index].wait_cnt == 7  # the next queue already counted the 36th

    old = TagQueue(64, preempt="always", wakeup="per_queue")
    tags = _full(old)
    for thread in range(64):
        old.prepare_to_wait(thread, nr_tags=8)
    wakes = [(i, woken) for i, t in enumerate(tags[:40], start=1) if (woken := old.put(t))]
    assert [i for i, _ in wakes] == [8, 16, 24, 32, 40]
    assert all(len(woken) == 8 for _, woken in wakes)


def test_seed003_rfc_woken_writer_finds_one_tag_short() -> None:
    """What the 7-for-8 wake-up does to a 1M write: 7 pieces go, the 8th sleeps at the tail.

    The woken thread takes every free tag (its pieces after the first carry REQ_PREEMPT,
    patch 6); the last one finds none and waits again with ``nr_tags`` 1 behind every other
    sleeper, which is what scatters the patched kernel's writes at 128-512 jobs.
    """
    q = TagQueue(64, preempt="waiters_first", wakeup="per_queue")
    tags = _full(q)
    for thread in range(64):
        q.prepare_to_wait(thread, nr_tags=8)
    for t in tags[:8]:
        q.put(t)  # first wake-up: thread 0, 8 tags free
    q.finish_wait(0)
    assert [q.get(preemption=True) for _ in range(8)].count(None) == 0
    woken = [w for t in tags[8:15] for w in q.put(t)]
    assert len(woken) == 1 and q.free == 7
    q.finish_wait(woken[0])
    got = [q.get(preemption=True) for _ in range(8)]
    assert got.count(None) == 1 and got[-1] is None
    assert q.prepare_to_wait(woken[0], nr_tags=1) >= 0 and q.ws_active == 63


def test_bad_policy_values_raise_typed_errors() -> None:
    """Unknown wakeup / preempt names and a zero depth are ModelConfigError."""
    with pytest.raises(ModelConfigError):
        TagQueue(32, wakeup="lazy")
    with pytest.raises(ModelConfigError):
        TagQueue(32, preempt="never")
    with pytest.raises(ModelConfigError):
        TagQueue(0)
    with pytest.raises(ModelConfigError):
        calc_wake_batch(0)


def test_tag_preempt_old_spelling_seed003_is_an_alias_of_waiters_first() -> None:
    """Stored comparisons may name ``tag_preempt=seed003``: it reads as ``waiters_first``."""
    from workers.model.policy import Policy

    assert Policy(tag_preempt="seed003").tag_preempt == "waiters_first"
    assert Policy().with_overrides("tag_preempt=seed003").tag_preempt == "waiters_first"
    assert TagQueue(8, preempt="waiters_first").preempt == "waiters_first"
