"""dm-crypt's write thread read from a trace: which encrypted pieces it submitted together.

dm-crypt does not submit an encrypted write from the thread that wrote to it. ``crypt_map``
cuts the bio at the largest request it encrypts as one (``dm_accept_partial_bio``;
:meth:`workers.model.submit.Engine._dm_crypt_max_sectors`), kcryptd encrypts each piece (a
``dm_crypt_io``) on a CPU of its own, and ``kcryptd_crypt_write_io_submit`` puts each finished
clone into ``cc->write_tree`` (an rbtree sorted by sector) and wakes the ``dmcrypt_write``
thread. ``dmcrypt_write`` (drivers/md/dm-crypt.c) takes the whole tree and submits it in
sector order inside one ``blk_start_plug`` / ``blk_finish_plug``: pieces it found together
merge in that plug (P, Q, Q + M, U, one D), a piece finished alone goes out alone, in
whichever order encryption finished.

The trace shows where each plug session of the write thread began and ended: its REMAP (A)
events on the member (the clones, ``trace_block_bio_remap`` from ``submit_bio_noacct``) cut by
its U/UT (``blk_mq_flush_plug_list``) or D events (6.1 traces no U for a plug of one request).
:func:`crypt_write_sessions` reads them by order alone, never by time, and the replay submits
the pieces session by session (:meth:`workers.model.submit.Engine.crypt_queue`).
"""

from __future__ import annotations

import numpy as np

from workers.events import (
    ACT_ISSUE,
    ACT_PLUG,
    ACT_REMAP,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_WRITE,
    EventTable,
)
from workers.model.stack import Stack

#: One traced plug session of a write thread: its pid and the (sector, sectors) of the
#: pieces it submitted, in the order it submitted them.
CryptSession = tuple[int, list[tuple[int, int]]]


def crypt_write_sessions(table: EventTable, stack: Stack | None
                         ) -> dict[int, list[CryptSession]] | None:
    """Per member device of a dm-crypt top, the write thread's plug sessions in trace order.

    A session is a run of the thread's write REMAP events from the dm-crypt device onto the
    member, ended by the thread's next U, UT or D on that member (``dmcrypt_write``'s
    ``blk_finish_plug``) unless the thread's next event there is a P rather than a remap
    (``blk_add_rq_to_plug``'s flush at ``BLK_PLUG_FLUSH_SIZE``, which keeps the session).
    The write threads are the pids that remapped writes from the top onto the member. None
    when the top is not dm-crypt or the trace shows no such remap.
    """
    if stack is None or stack.top.approximates != "dm-crypt":
        return None
    top = stack.top.dev
    act = table.action
    out: dict[int, list[CryptSession]] = {}
    for member in stack.top.members:
        on = table.dev == member.dev
        a = on & (act == ACT_REMAP) & (table.aux2.astype(np.int64) == top) & \
            ((table.rwbs & RWBS_WRITE) != 0) & (table.nr_sectors > 0)
        if not bool(np.any(a)):
            continue
        pids = np.unique(table.pid[a])
        cut = on & ((act == ACT_UNPLUG_IO) | (act == ACT_UNPLUG_TIMER) | (act == ACT_ISSUE))
        plug = on & (act == ACT_PLUG)
        rows = np.flatnonzero((a | cut | plug) & np.isin(table.pid, pids))
        open_: dict[int, list[tuple[int, int]]] = {}
        cut_pending: set[int] = set()
        sessions: list[CryptSession] = []
        for i in rows.tolist():
            p = int(table.pid[i])
            if a[i]:
                if p in cut_pending:  # the plug was finished: this remap opens a new session
                    cut_pending.discard(p)
                    open_.pop(p, None)
                cur = open_.get(p)
                if cur is None:
                    cur = open_[p] = []
                    sessions.append((p, cur))
                cur.append((int(table.sector[i]), int(table.nr_sectors[i])))
            elif plug[i]:
                # A P straight after the thread's flush, before its next remap: the flush
                # was blk_add_rq_to_plug's (the plug's last request had reached
                # BLK_PLUG_FLUSH_SIZE; it flushes, traces P again and plugs the new request),
                # inside the same dmcrypt_write session, not its blk_finish_plug.
                cut_pending.discard(p)
            elif p in open_:
                cut_pending.add(p)
        if sessions:
            out[member.dev] = sessions
    return out or None


__all__ = ["CryptSession", "crypt_write_sessions"]
