"""The requests a trace shows that no queued top bio explains: a file system's and md's own.

Below a stacked top device the trace carries requests the replay has no bio for: ext4/jbd2
metadata and journal writes remapped onto the members, md's superblock writes, a file system's
own requests on the disk under a loop file (outside the file's extents). They are input, not
prediction: these functions find their rows, fold the merges the trace shows
(``bio_attempt_back_merge``), cut them where the trace split them (X) and date them, so that
the replay (:mod:`workers.model.replay`, ``md_metadata_rows`` / ``loop_fs_rows``) can place
them between the predicted requests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from workers.events import (
    ACT_BACKMERGE,
    ACT_COMPLETE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_REQUEUE,
    ACT_SPLIT,
    COLUMNS,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_META,
    RWBS_WRITE,
    EventTable,
)
from workers.model.stack import Stack, raid0_unmap
from workers.traces.filefrag import FileExtent


def metadata_write_rows(table: EventTable, top_dev: int, *, per_request: bool = False
                         ) -> npt.NDArray[np.intp]:
    """Rows of metadata writes (REQ_META) queued on devices below ``top_dev``: their Q, or on
    a device whose trace shows no such Q (7.x traces md's flush-sequenced superblock write
    from its insertion on: a v1 trace of 6.19+ drops every REQ_FUA bio event, see
    :func:`untraced_fua_writes`), their I. ``per_request``: the I of every request whose trace
    shows no Q of its own (under a loop device: jbd2's flush-sequenced commit block among its
    traced log-block writes).

    Only writes the replay does not send down itself: md's own (``md_super_write`` submits
    straight to the member: no remap), and clones of top bios the trace shows no Q for. A
    file system's metadata written through the array (ext4's journal and bitmaps, REQ_META
    from jbd2 or the flusher) reaches the members as remapped clones (A, then Q) of
    top-device bios, which the replay already sends down; those rows (and the I of their
    requests) are left out.
    """
    act = table.action
    base = (table.dev != top_dev) & ((table.rwbs & RWBS_META) != 0) & \
        ((table.rwbs & RWBS_WRITE) != 0) & (table.nr_sectors > 0)
    remap = np.flatnonzero((act == ACT_REMAP) & (table.dev != top_dev) & (table.nr_sectors > 0)
                           & (table.aux2 == top_dev))
    topq = np.flatnonzero((act == ACT_QUEUE) & (table.dev == top_dev) & (table.nr_sectors > 0))
    if len(remap) and len(topq):
        # only clones of bios the top device's Q events show (the replay's input): a member
        # write whose top bio the trace lacks (7.x traces no md0 Q for some of jbd2's
        # REQ_PREFLUSH|REQ_FUA writes) is replayed from the member's own events
        start = table.sector[topq].astype(np.int64)
        order = np.argsort(start, kind="stable")
        start = start[order]
        reach = np.maximum.accumulate(start + table.nr_sectors[topq].astype(np.int64)[order])
        src = table.aux[remap].astype(np.int64)
        k = np.searchsorted(start, src, side="right") - 1
        shown = (k >= 0) & (reach[np.maximum(k, 0)] > src)
        key = table.dev.astype(np.int64) * (1 << 44) + table.sector.astype(np.int64)
        base &= ~np.isin(key, key[remap[shown]])
    q = np.flatnonzero(base & (act == ACT_QUEUE))
    if per_request:
        i = np.flatnonzero(base & (act == ACT_INSERT))
        key = (table.dev.astype(np.int64) << 40) + table.sector.astype(np.int64)
        return np.sort(np.r_[q, i[~np.isin(key[i], key[q])]])
    im = base & (act == ACT_INSERT)
    if bool(np.any(im)):
        im &= ~np.isin(table.dev, np.unique(table.dev[q]))
    return np.sort(np.r_[q, np.flatnonzero(im)])


def fs_own_rows(table: EventTable, dev: int, extents: Sequence[FileExtent], *,
                 writes_in_file: bool = False) -> npt.NDArray[np.intp]:
    """Requests (Q, or I with no Q of its own) and bare flushes (Q of 0 sectors with
    REQ_PREFLUSH) on ``dev``, the disk under a loop device's file, that touch none of the
    file's blocks: the file system's own I/O (journal, inode tables, extent tree reads),
    not the loop device's. ``writes_in_file``: writes to the file's blocks too (through the
    page cache, writeback's)."""
    act = table.action
    on = table.dev == dev
    write = (table.rwbs & RWBS_WRITE) != 0
    flush = on & write & (act == ACT_QUEUE) & (table.nr_sectors == 0) & \
        ((table.rwbs & RWBS_FLUSH) != 0)
    data = on & (table.nr_sectors > 0)
    q = np.flatnonzero(data & (act == ACT_QUEUE))
    i = np.flatnonzero(data & (act == ACT_INSERT))
    if len(i) and len(q):  # an I inside a traced Q's range is a piece of it (a split's)
        qs = table.sector[q].astype(np.int64)
        qe = qs + table.nr_sectors[q].astype(np.int64)
        o = np.argsort(qs, kind="stable")
        qs, qe = qs[o], np.maximum.accumulate(qe[o])
        k = np.searchsorted(qs, table.sector[i].astype(np.int64), side="right") - 1
        i = i[~((k >= 0) & (qe[np.maximum(k, 0)] > table.sector[i].astype(np.int64)))]
    rows = np.r_[q, i]
    if len(rows) and extents:
        by_disk = sorted(extents, key=lambda e: e.physical)
        start = np.array([e.physical for e in by_disk], dtype=np.int64)
        end = start + np.array([e.sectors for e in by_disk], dtype=np.int64)
        s0 = table.sector[rows].astype(np.int64)
        s1 = s0 + table.nr_sectors[rows].astype(np.int64)
        k = np.searchsorted(start, s1, side="left") - 1  # last extent starting before s1
        touches = (k >= 0) & (end[np.maximum(k, 0)] > s0)
        if writes_in_file:
            touches &= ~write[rows]
        rows = rows[~touches]
    return np.sort(np.r_[rows, np.flatnonzero(flush)])


def split_as_traced(table: EventTable, mm: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Requests ``[time, dev, sector, nr, rwbs, before, row]`` of a file system's own bios cut
    where the trace shows their device split them (X of the same device inside the bio's
    range, after its Q: ``bio_split_to_limits`` at the queue's limits and the pages' layout,
    which a page cache writeback bio's is not known otherwise); a row ``first`` (1 for the
    piece that carries the bio's Q) is appended."""
    x = np.flatnonzero(table.action == ACT_SPLIT)
    cols: list[list[int]] = []
    for j in range(mm.shape[1]):
        t, dev, sec, nr, rw, before, row = (int(v) for v in mm[:, j])
        cuts: list[int] = []
        if len(x) and nr > 0 and table.action[row] == ACT_QUEUE:
            c = x[(x > row) & (table.dev[x] == dev)]
            pts = table.aux[c].astype(np.int64)
            cuts = sorted({int(p) for p in pts if sec < p < sec + nr})
        edges = [sec, *cuts, sec + nr]
        for k in range(len(edges) - 1):
            cols.append([t, dev, edges[k], edges[k + 1] - edges[k], rw, before, row,
                         int(k == 0)])
    return np.array(cols, dtype=np.int64).T.reshape(8, -1)


def merged_rows(table: EventTable, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    """Which of the Q ``rows`` the trace shows back-merged into the request before them (an M
    of the same device, sector and size right after the Q, ``blk_attempt_plug_merge`` /
    ``bio_attempt_back_merge``): such a bio is not a request of its own."""
    out = np.zeros(len(rows), dtype=bool)
    m = np.flatnonzero(table.action == ACT_BACKMERGE)
    if not len(m) or not len(rows):
        return out
    for j, r in enumerate(rows.tolist()):
        if table.action[r] != ACT_QUEUE:
            continue
        c = m[(m > r) & (table.dev[m] == table.dev[r]) & (table.sector[m] == table.sector[r])
              & (table.nr_sectors[m] == table.nr_sectors[r])]
        out[j] = bool(len(c))
    return out


def fold_merged(mm: npt.NDArray[np.int64], merged: npt.NDArray[np.bool_]
                 ) -> npt.NDArray[np.int64]:
    """Metadata writes ``[time, dev, sector, nr, rwbs]`` (columns in trace order) with each
    write the trace shows back-merged added to the one it merged into (the latest earlier
    write on the same device ending where it starts); one the rows do not hold stays."""
    if not bool(np.any(merged)):
        return mm
    keep = np.ones(mm.shape[1], dtype=bool)
    out = mm.copy()
    for j in np.flatnonzero(merged).tolist():
        for k in range(j - 1, -1, -1):
            if keep[k] and out[1, k] == out[1, j] and out[2, k] + out[3, k] == out[2, j]:
                out[3, k] += out[3, j]
                keep[j] = False
                break
    return out[:, keep]


def dispatch_time_of(table: EventTable, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    """When each metadata write was dispatched (its data D on the same device, sector and size
    nearest in time; the Q's time where the trace shows no such D). md submits the superblock
    writes of one update to the members one after the other, but each waits in its member's
    flush sequence, so the dispatch order, not the Q order, is what the members show."""
    t = table.time_ns.astype(np.int64)
    out = t[rows].copy()
    d = np.flatnonzero((table.action == ACT_ISSUE) & ((table.rwbs & RWBS_META) != 0))
    for j, r in enumerate(rows.tolist()):
        c = d[(table.dev[d] == table.dev[r]) & (table.sector[d] == table.sector[r]) &
              (table.nr_sectors[d] == table.nr_sectors[r])]
        if len(c):
            out[j] = int(t[c[np.argmin(np.abs(t[c] - t[r]))]])
    return out



def flush_kick_times(table: EventTable, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    """When kblockd was asked to run each step of each flush-sequenced write in ``rows`` (md's
    superblock writes: their Q, or their I), as columns ``[insert, pre-flush done, data done]``
    (trace ns; -1 where the trace does not show it).

    ``blk_insert_flush`` queues a REQ_PREFLUSH | REQ_FUA write's steps on its queue's requeue
    list and each step kicks the queue's ``requeue_work`` on kblockd
    (``blk_flush_queue_rq`` / ``blk_kick_flush`` -> ``blk_mq_add_to_requeue_list`` ->
    ``blk_mq_kick_requeue_list``): the pre-flush when the request is inserted (just after its
    G: the request exists before ``blk_mq_submit_bio`` hands it to the flush machinery), the
    data when the pre-flush completes (``flush_end_io`` -> ``blk_flush_complete_seq``), the
    post-flush when the data completes (``mq_flush_data_end_io``). The completions are the
    device's service, which under emulation is the host's (see :func:`traced_service`
    in :mod:`workers.model.replay`): the trace's C. The data request is the D of the same
    device, sector and size nearest after the insertion; the pre-flush's completion is the
    last flush completion on its device between the insertion and that D, the data's the
    first C of the request after it.
    """
    t = table.time_ns.astype(np.int64)
    act = table.action
    dev = table.dev.astype(np.int64)
    sec = table.sector.astype(np.int64)
    nr = table.nr_sectors.astype(np.int64)
    out = np.full((3, len(rows)), -1, dtype=np.int64)
    flush = (nr == 0) & ((table.rwbs & RWBS_FLUSH) != 0)
    devs = np.unique(dev[rows]) if len(rows) else np.zeros(0, np.int64)
    on = np.isin(dev, devs)
    g = np.flatnonzero(on & (act == ACT_GETRQ) & (nr > 0))
    fc = np.flatnonzero(on & (act == ACT_COMPLETE) & flush)
    write = (table.rwbs & RWBS_WRITE) != 0
    d = np.flatnonzero(on & write & (act == ACT_ISSUE) & (nr > 0))
    c = np.flatnonzero(on & write & (act == ACT_COMPLETE) & (nr > 0))
    for j, r in enumerate(np.asarray(rows).tolist()):
        key = (dev[g] == dev[r]) & (sec[g] == sec[r]) & (nr[g] == nr[r]) & (t[g] >= t[r])
        ins = int(t[g[key]].min()) if act[r] == ACT_QUEUE and bool(np.any(key)) else int(t[r])
        out[0, j] = ins
        key = (dev[d] == dev[r]) & (sec[d] == sec[r]) & (nr[d] == nr[r]) & (t[d] >= ins)
        if not bool(np.any(key)):
            continue
        td = int(t[d[key]].min())
        pre = fc[(dev[fc] == dev[r]) & (t[fc] >= ins) & (t[fc] <= td)]
        if len(pre):
            out[1, j] = int(t[pre].max())
        key = (dev[c] == dev[r]) & (sec[c] == sec[r]) & (nr[c] == nr[r]) & (t[c] >= td)
        if bool(np.any(key)):
            out[2, j] = int(t[c[key]].min())
    return out


#: events of a traced bio or request at a sector (its Q or A, the request made, front-merged
#: or put back for another dispatch): a D with none of them since the last D or C at its
#: device and sector had no traced bio
_RQ_BIRTH = (ACT_QUEUE, ACT_REMAP, ACT_GETRQ, ACT_INSERT, ACT_FRONTMERGE, ACT_REQUEUE)


def untraced_fua_writes(table: EventTable, stack: Stack) -> npt.NDArray[np.int64]:
    """Top-device writes with REQ_FUA that the trace has no bio event for, as
    ``[time, pid, top sector, sectors, rwbs, comm]`` columns (time: just before their first
    event; pid and comm: their D's).

    From f9ee38bbf70f ("blktrace: add block trace commands for zone operations", 6.19)
    ``__blk_add_trace`` drops an event for a v1 trace (``blktrace`` < 1.4: BLKTRACESETUP)
    when ``(what >> BLK_TC_SHIFT) > BLK_TC_END_V1``; BLK_TC_FUA is 1 << 15, BLK_TC_END_V1
    itself, so every bio event of a REQ_FUA write (Q, A, G on every device: with W set it
    exceeds the bound) goes, and so does the top device's C. What the trace keeps is the
    request a disk without FUA makes of it: ``blk_insert_flush`` clears REQ_FUA from the
    request (and REQ_PREFLUSH, which md_flush_request cleared already), so its D and C are
    traced (W S M), followed by the post-flush (FN). jbd2's commit block (REQ_PREFLUSH |
    REQ_FUA), ext4's superblock (REQ_FUA) and jbd2's superblock through md raid0 show as a
    member D with no G, I or Q. A REQ_PREFLUSH among them leaves md_flush_request's empty
    flush bios (no REQ_FUA: traced) on the members, Q of 0 sectors by the submitter, with no
    empty flush on the top device above them.

    Such a D (a write with none of :data:`_RQ_BIRTH` at its device and sector since that
    sector's last D or C: no Q, A, G, I, F or R) on the top disk, or on a raid0 member (mapped back with
    :func:`raid0_unmap`), is taken as the bio the trace lost: REQ_FUA, the D's flags, and
    REQ_PREFLUSH where the submitter's member flushes above have no top flush. On raid1 one
    such bio is a D on every member at the same sector (``raid1_write_request`` clones it to
    each, less ``data_offset``): the first member's D is the bio, the other members' Ds of
    that sector and size after it are its clones (7.3.4 p_r1_d2_fstrim: jbd2's commit blocks,
    the members' flushes Q FW by jbd2, then D WSM on vda and vdb, then their post-flushes).
    Other stacks (raid10 copies, parity) are left as they are.
    """
    out = np.zeros((6, 0), np.int64)
    top = stack.top
    if top.kind not in ("disk", "raid0", "raid1") or not table.time_known or not len(table):
        return out
    member_of = {top.dev: -1} if top.kind == "disk" else \
        {m.dev: i for i, m in enumerate(top.members) if m.kind == "disk"}
    devs = np.fromiter(member_of, np.int64)
    act = table.action
    on = np.isin(table.dev, devs)
    rel = np.flatnonzero(on & ((np.isin(act, _RQ_BIRTH) & (table.nr_sectors > 0)) |
                               (act == ACT_ISSUE) | (act == ACT_COMPLETE)))
    if not bool(np.any(act[rel] == ACT_ISSUE)):
        return out
    t = table.time_ns.astype(np.int64)
    key = table.dev[rel].astype(np.int64) * (1 << 44) + table.sector[rel].astype(np.int64)
    order = np.lexsort((t[rel], key))
    # per device and sector in time order, a D whose previous event there is not one of
    # _RQ_BIRTH (it is a D or a C, or there is none) had no bio event: columnar, one pass
    srow, skey = rel[order], key[order]
    sact = act[srow]
    born = np.zeros(len(srow), bool)
    born[1:] = (skey[1:] == skey[:-1]) & np.isin(sact[:-1], _RQ_BIRTH)
    orphan = (sact == ACT_ISSUE) & ~born & (table.nr_sectors[srow] > 0) & \
        ((table.rwbs[srow] & RWBS_WRITE) != 0)
    orphans = srow[orphan]
    if not len(orphans):
        return out
    # md_flush_request's empty flushes on the members with no top flush above them: each
    # top flush explains, on every member, the first member flush of its submitter at or
    # after it (per submitter and member in time order, two pointers)
    top_flush = np.flatnonzero((act == ACT_QUEUE) & (table.dev == top.dev) &
                               (table.nr_sectors == 0) & ((table.rwbs & RWBS_FLUSH) != 0))
    mflush = np.flatnonzero((act == ACT_QUEUE) & on & (table.dev != top.dev) &
                            (table.nr_sectors == 0) & ((table.rwbs & RWBS_FLUSH) != 0))
    unexplained = np.ones(len(mflush), bool)
    by_group: dict[tuple[int, int], list[int]] = {}
    for j in np.argsort(t[mflush], kind="stable").tolist():
        by_group.setdefault((int(table.pid[mflush[j]]), int(table.dev[mflush[j]])),
                            []).append(j)
    next_of = dict.fromkeys(by_group, 0)
    for f in top_flush[np.argsort(t[top_flush], kind="stable")].tolist():
        for dev in devs.tolist():
            g = (int(table.pid[f]), dev)
            js = by_group.get(g)
            if not js:
                continue
            k = next_of[g]
            while k < len(js) and t[mflush[js[k]]] < t[f]:
                k += 1  # before this top flush: not its own; stays unexplained
            if k < len(js):
                unexplained[js[k]] = False
                k += 1
            next_of[g] = k
    spare = mflush[unexplained]
    # each submitter's spare member flushes in time order: an orphan takes those at or
    # before its D that no earlier orphan took
    spare_by_pid: dict[int, list[int]] = {}
    for r in spare[np.argsort(t[spare], kind="stable")].tolist():
        spare_by_pid.setdefault(int(table.pid[r]), []).append(r)
    spare_next = dict.fromkeys(spare_by_pid, 0)
    sizes = [top.member_size(i) for i in range(len(top.members))] if top.kind == "raid0" \
        else []
    rows: list[tuple[int, int, int, int, int, int]] = []
    #: raid1: (top sector, sectors) -> the members whose clone of the last such bio was seen
    clones: dict[tuple[int, int], set[int]] = {}
    for r in orphans[np.argsort(t[orphans], kind="stable")].tolist():
        idx = member_of[int(table.dev[r])]
        sector: int | None = int(table.sector[r])
        if idx >= 0 and top.kind == "raid1":
            sector = int(table.sector[r]) - top.data_offset
            if sector < 0:
                continue
            seen = clones.get((sector, int(table.nr_sectors[r])))
            if seen is not None and idx not in seen:
                seen.add(idx)  # another member's clone of the bio already taken
                continue
            clones[(sector, int(table.nr_sectors[r]))] = {idx}
        elif idx >= 0:
            msec = int(table.sector[r]) - top.data_offset
            sector = raid0_unmap(idx, msec, top.chunk_sectors, sizes,
                                 top.layout or "orig") if msec >= 0 else None
        if sector is None:
            continue
        rw = int(table.rwbs[r]) | RWBS_FUA
        first = int(t[r])
        pid = int(table.pid[r])
        mine = spare_by_pid.get(pid, [])
        k0 = k = spare_next.get(pid, 0)
        while k < len(mine) and t[mine[k]] <= first:
            k += 1
        if k > k0:
            rw |= RWBS_FLUSH
            first = int(t[mine[k0]])
            spare_next[pid] = k
        rows.append((first - 1, int(table.pid[r]), sector, int(table.nr_sectors[r]), rw,
                     int(table.comm[r])))
    if not rows:
        return out
    return np.asarray(rows, np.int64).T


def with_untraced_writes(table: EventTable, top_dev: int, writes: npt.NDArray[np.int64]
                         ) -> EventTable:
    """``table`` with a Q on ``top_dev`` for each of :func:`untraced_fua_writes` (the event
    the trace dropped), in time order."""
    if not writes.shape[1]:
        return table
    k = writes.shape[1]
    new = {n: np.zeros(k, dtype=dt) for n, dt in COLUMNS}
    new["time_ns"] = writes[0]
    new["pid"] = writes[1]
    new["sector"] = writes[2]
    new["nr_sectors"] = writes[3]
    new["rwbs"] = writes[4]
    new["comm"] = writes[5]
    new["dev"] = np.full(k, top_dev)
    new["action"] = np.full(k, ACT_QUEUE)
    at = np.searchsorted(table.time_ns.astype(np.int64), writes[0], side="left")
    cols = {n: np.insert(getattr(table, n), at, new[n].astype(getattr(table, n).dtype))
            for n, _ in COLUMNS}
    return EventTable(cols, comms=table.comms, devices=table.devices,
                      time_known=table.time_known, meta=table.meta)
