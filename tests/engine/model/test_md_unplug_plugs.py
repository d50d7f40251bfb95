"""Plug boundaries of a bio-based md top from its own U/UT events (``raid5_unplug``).

raid5 holds the stripe_heads a thread's writes touched on that thread's plug and releases them
in ``raid5_unplug``, which traces U (or UT from schedule) on the md device. A buffered writer's
flusher holds one plug across many pages, so its 4 KiB bios fill whole stripe rows before
raid5d sees them; with one plug per bio every row was handled half-filled, with reads
(6.1.0-57 r5_d4_c64_writeback_32M 44.3% -> 81.3%: the capture has no member reads but md's
own; 32 MiB written as full stripes, merged up to 920 sectors per member request).
"""

from __future__ import annotations

import numpy as np

from workers.events import (
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    EventTable,
    make_dev,
)
from workers.model import preset_for_kernel, replay
from workers.model.replay import bios_from_table
from workers.model.stack import stack_from_spec
from workers.model.trace_plugs import plugs_from_md_unplugs

MD = make_dev(9, 0)


def _table(rows: list[tuple[int, int, int, int]]) -> EventTable:
    """rows: (time, pid, action, sector) on md0, 4 KiB writes."""
    t, pid, act, sec = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    n = len(t)
    nr = np.where(act == ACT_QUEUE, 8, 0)
    table = EventTable.from_columns(time_ns=t, dev=np.full(n, MD), action=act, sector=sec,
                                    nr_sectors=nr, pid=pid, rwbs=np.full(n, RWBS_WRITE))
    table.meta["format"] = "blktrace"
    return table


def test_a_thread_s_bios_between_its_md_unplugs_share_a_plug():
    rows = [(0, 1, ACT_QUEUE, 0), (1, 2, ACT_QUEUE, 800), (2, 1, ACT_QUEUE, 8),
            (3, 1, ACT_UNPLUG_TIMER, 0), (4, 1, ACT_QUEUE, 16), (5, 2, ACT_QUEUE, 808),
            (6, 2, ACT_UNPLUG_IO, 0), (7, 2, ACT_QUEUE, 816), (8, 1, ACT_QUEUE, 24)]
    table = _table(rows)
    q = np.flatnonzero(table.action == ACT_QUEUE)
    plug = plugs_from_md_unplugs(table, q, MD)
    assert plug is not None
    p = plug.tolist()
    # Q order: 0 (pid 1), 800 (2), 8 (1), 16 (1), 808 (2), 816 (2), 24 (1)
    # pid 1: [0, 8] | [16, 24]; pid 2: [800, 808] | [816]
    assert p[0] == p[2] != p[3] == p[6]
    assert p[1] == p[4] != p[5]
    assert len(set(p)) == 4


def test_without_md_unplug_events_the_issue_state_decides():
    table = _table([(0, 1, ACT_QUEUE, 0), (1, 1, ACT_QUEUE, 8)])
    q = np.flatnonzero(table.action == ACT_QUEUE)
    assert plugs_from_md_unplugs(table, q, MD) is None


def test_a_flusher_plug_writes_full_stripes_without_reads():
    """192 KiB of 4 KiB writes (one full stripe of raid5 4 x 64k) under one md plug: no
    member reads; each bio alone (a U after every bio): every row is read first."""
    def member_reads(unplug_each: bool) -> int:
        rows = []
        for i in range(48):
            rows.append((2 * i, 1, ACT_QUEUE, 8 * i))
            if unplug_each or i == 47:
                rows.append((2 * i + 1, 1, ACT_UNPLUG_IO, 0))
        table = _table(rows)
        bios = bios_from_table(table, MD)
        stack = stack_from_spec("raid5:disks=4,chunk=64k")
        out = replay(bios, stack, preset_for_kernel("6.1"), engine="python")
        d = (out.action == ACT_ISSUE) & (out.dev != MD)
        return int(np.sum(d & ((out.rwbs & RWBS_READ) != 0) & ((out.rwbs & RWBS_WRITE) == 0)))
    assert member_reads(False) == 0
    assert member_reads(True) > 0


def _member_reads_of(units: list[list[int]], rwbs: int, gap_ns: int = 10**9) -> int:
    """Replay 4 KiB writes (array sectors) on raid5 4 x 64k, one md plug per inner list,
    ``gap_ns`` apart; count the member read requests."""
    rows = []
    t = 0
    for unit in units:
        for sec in unit:
            rows.append((t, 1, ACT_QUEUE, sec))
            t += 1
        rows.append((t, 1, ACT_UNPLUG_IO, 0))
        t += gap_ns
    table = _table(rows)
    table.rwbs[:] = rwbs
    bios = bios_from_table(table, MD)
    out = replay(bios, stack_from_spec("raid5:disks=4,chunk=64k"), preset_for_kernel("6.1"),
                 engine="python")
    d = (out.action == ACT_ISSUE) & (out.dev != MD)
    return int(np.sum(d & ((out.rwbs & RWBS_READ) != 0) & ((out.rwbs & RWBS_WRITE) == 0)))


#: chunks 0 and 1 of the first stripe set (16 rows, each missing chunk 2's block), then a
#: whole stripe set (chunks 3-5: 16 full rows, written at once), then chunk 2
HALF = [8 * i for i in range(32)]
FULL = [384 + 8 * i for i in range(48)]
REST = [256 + 8 * i for i in range(16)]


def test_a_half_filled_row_waits_while_full_stripes_are_written():
    """STRIPE_DELAYED: a plain write's half-filled rows wait on the delayed list while
    full-stripe writes are in flight (pending_full_writes), and the next plug fills them:
    written whole, no reads. A REQ_SYNC write is STRIPE_PREREAD_ACTIVE at once and reads."""
    assert _member_reads_of([HALF + FULL, REST], RWBS_WRITE, gap_ns=1000) == 0
    assert _member_reads_of([HALF + FULL, REST], RWBS_WRITE | RWBS_SYNC, gap_ns=1000) > 0


def test_a_delayed_row_is_read_once_no_full_write_is_in_flight():
    """raid5_activate_delayed + the hold list: with no full-stripe write in flight (the
    next plug comes a second later), the half-filled rows are read and written."""
    assert _member_reads_of([HALF + FULL, REST], RWBS_WRITE) > 0
    assert _member_reads_of([HALF], RWBS_WRITE) > 0
