"""dm-crypt's write thread: encrypted pieces go out in ``dmcrypt_write``'s plug sessions.

``kcryptd_crypt_write_io_submit`` (drivers/md/dm-crypt.c) puts each encrypted clone into
``cc->write_tree`` (sorted by sector) and wakes ``dmcrypt_write``, which submits the whole tree
in sector order under one ``blk_start_plug`` / ``blk_finish_plug``. Since v6.11 a 256 KiB write
is two 128 KiB pieces encrypted in parallel: when both were in the tree they merge in that plug
(one D of 512 sectors), else each goes alone, in the order encryption finished (the 7.3.4
capture dmcrypt_ddw256k: D 512+512, then D 1280+256 before D 1024+256). The replay reads the
sessions from the member's traced REMAP/U/D events of the write thread, by order alone
(:func:`workers.model.crypt_write.crypt_write_sessions`).
"""

from __future__ import annotations

import numpy as np
from model_helpers import d_stream

from workers.events import (
    ACT_BACKMERGE,
    ACT_COMPLETE,
    ACT_GETRQ,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_UNPLUG_IO,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    EventTable,
)
from workers.model import BioStream, bios_from_table, preset_for_kernel, replay, stack_from_spec
from workers.model.crypt_write import crypt_write_sessions

SPEC = "dm-crypt:disks=1,max_sectors_kb=4096,max_segments=1024"
W = RWBS_WRITE | RWBS_SYNC
DD, KCRYPT = 9, 5  # the writer's pid, dmcrypt_write's


def _table(rows: list[tuple[int, int, int, int, int, int]]) -> EventTable:
    """A blktrace-format table of ``(dev, pid, action, sector, nr, aux2)`` rows in that order
    (timestamps only keep the rows in order; P and U carry no direction)."""
    dev, pid, act, sec, nr, aux2 = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    n = len(dev)
    rw = np.where((act == ACT_PLUG) | (act == ACT_UNPLUG_IO), 0, W)
    table = EventTable.from_columns(time_ns=np.arange(n, dtype=np.int64) * 1000, dev=dev,
                                    action=act, sector=sec, nr_sectors=nr, pid=pid, rwbs=rw,
                                    aux2=aux2)
    table.meta["format"] = "blktrace"
    return table


def _trace(top: int, member: int) -> EventTable:
    """dd writes 0+512 and 512+512; the thread found 0 and 256 together, then 768 alone
    before 512 alone (timestamps only keep the rows in order)."""
    rows: list[tuple[int, int, int, int, int, int]] = []  # dev, pid, action, sector, nr, aux2

    def piece(sector: int, merged: bool = False) -> None:
        rows.append((member, KCRYPT, ACT_REMAP, sector, 256, top))
        rows.append((member, KCRYPT, ACT_QUEUE, sector, 256, 0))
        if merged:
            rows.append((member, KCRYPT, ACT_BACKMERGE, sector, 256, 0))
        else:
            rows.append((member, KCRYPT, ACT_GETRQ, sector, 256, 0))
            rows.append((member, KCRYPT, ACT_PLUG, 0, 0, 0))

    def issue(sector: int, nr: int) -> None:
        rows.append((member, KCRYPT, ACT_UNPLUG_IO, 0, 0, 0))
        rows.append((member, KCRYPT, ACT_ISSUE, sector, nr, 0))
        rows.append((member, 0, ACT_COMPLETE, sector, nr, 0))

    rows.append((top, DD, ACT_QUEUE, 0, 512, 0))
    piece(0)
    piece(256, merged=True)
    issue(0, 512)
    rows.append((top, 0, ACT_COMPLETE, 0, 512, 0))
    rows.append((top, DD, ACT_QUEUE, 512, 512, 0))
    piece(768)
    issue(768, 256)
    piece(512)
    issue(512, 256)
    rows.append((top, 0, ACT_COMPLETE, 512, 512, 0))
    return _table(rows)


def test_sessions_are_read_by_order():
    """The write thread's REMAPs cut by its U/D are its sessions, in trace order."""
    stack = stack_from_spec(SPEC)
    top, member = stack.top.dev, stack.top.members[0].dev
    sessions = crypt_write_sessions(_trace(top, member), stack)
    assert sessions == {member: [(KCRYPT, [(0, 256), (256, 256)]), (KCRYPT, [(768, 256)]),
                                 (KCRYPT, [(512, 256)])]}


def test_replay_follows_the_write_threads_sessions():
    """Without the write thread the pieces go down in sector order, never merged:
    0+256, 256+256, 512+256, 768+256."""
    stack = stack_from_spec(SPEC)
    top, member = stack.top.dev, stack.top.members[0].dev
    bios = bios_from_table(_trace(top, member), top, stack=stack)
    assert "crypt_write_sessions" in bios.meta
    pred = replay(bios, stack, preset_for_kernel("7.3.4"), engine="python")
    assert [(s, n) for _, s, n in d_stream(pred, member)] == [(0, 512), (768, 256), (512, 256)]
    assert int(np.sum((pred.action == ACT_BACKMERGE) & (pred.dev == member))) == 1
    # the clones are the write thread's: remapped and queued by it
    a = (pred.action == ACT_REMAP) & (pred.dev == member)
    assert set(pred.pid[a].tolist()) == {KCRYPT}


def test_without_evidence_the_pieces_found_together_merge():
    """A write with no trace behind it: both 128 KiB pieces are in the tree when the thread
    runs (sector order, one plug), so they merge; reads do not go through the thread."""
    stack = stack_from_spec(SPEC)
    member = stack.top.members[0].dev
    w = replay(BioStream.from_arrays([0, 512], [512, 512], rwbs=W, plug=[-1, -2]), stack,
               preset_for_kernel("7.3.4"), engine="python")
    assert [(s, n) for _, s, n in d_stream(w, member)] == [(0, 512), (512, 512)]
    r = replay(BioStream.from_arrays([0], [512], rwbs=RWBS_READ, plug=[-1]), stack,
               preset_for_kernel("7.3.4"), engine="python")
    assert [(s, n) for _, s, n in d_stream(r, member)] == [(0, 256), (256, 256)]


def _trace_with_flush_inside(top: int, member: int) -> EventTable:
    """dd writes 0+1024 (four 128 KiB pieces). The thread first finds 256 alone; then 0, 512
    and 768 together: 0 gets a request and plugs (G, P), 512 gets one (G) and
    ``blk_add_rq_to_plug`` flushes the plug because its last request (0) is already 128 KiB
    (U, D 0+256, P again), then 768 back-merges into 512 (M) and the session ends (U, D 512+512).
    The shape of the 6.17.13 capture dmcrypt_ddw512k at sectors 10240-11008."""
    rows: list[tuple[int, int, int, int, int, int]] = []  # dev, pid, action, sector, nr, aux2

    def ev(act: int, sector: int = 0, nr: int = 0, pid: int = KCRYPT, aux2: int = 0) -> None:
        rows.append((member, pid, act, sector, nr, aux2))

    rows.append((top, DD, ACT_QUEUE, 0, 1024, 0))
    ev(ACT_REMAP, 256, 256, aux2=top), ev(ACT_QUEUE, 256, 256), ev(ACT_GETRQ, 256, 256)
    ev(ACT_PLUG), ev(ACT_UNPLUG_IO), ev(ACT_ISSUE, 256, 256)
    ev(ACT_REMAP, 0, 256, aux2=top), ev(ACT_QUEUE, 0, 256), ev(ACT_GETRQ, 0, 256), ev(ACT_PLUG)
    ev(ACT_REMAP, 512, 256, aux2=top), ev(ACT_QUEUE, 512, 256), ev(ACT_GETRQ, 512, 256)
    ev(ACT_UNPLUG_IO), ev(ACT_ISSUE, 0, 256), ev(ACT_PLUG)  # blk_add_rq_to_plug's flush
    ev(ACT_REMAP, 768, 256, aux2=top), ev(ACT_QUEUE, 768, 256), ev(ACT_BACKMERGE, 768, 256)
    ev(ACT_UNPLUG_IO), ev(ACT_ISSUE, 512, 512)
    for s, n in ((256, 256), (0, 256), (512, 512)):
        ev(ACT_COMPLETE, s, n, pid=0)
    rows.append((top, 0, ACT_COMPLETE, 0, 1024, 0))
    return _table(rows)


def test_a_flush_inside_the_session_does_not_end_it():
    """The U that ``blk_add_rq_to_plug`` makes when the plug's last request has reached
    BLK_PLUG_FLUSH_SIZE is followed by the thread's P, not by a remap: the session goes on
    (read as one session 0, 512, 768; as two, 768 could not merge into 512's request)."""
    stack = stack_from_spec(SPEC)
    top, member = stack.top.dev, stack.top.members[0].dev
    table = _trace_with_flush_inside(top, member)
    assert crypt_write_sessions(table, stack) == {
        member: [(KCRYPT, [(256, 256)]), (KCRYPT, [(0, 256), (512, 256), (768, 256)])]}
    pred = replay(bios_from_table(table, top, stack=stack), stack, preset_for_kernel("6.17.13"),
                  engine="python")
    assert [(s, n) for _, s, n in d_stream(pred, member)] == [(256, 256), (0, 256), (512, 512)]
