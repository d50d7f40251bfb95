"""Invariants of replay over a matrix of stacks, chunk sizes, disk counts, presets and workloads.

Every check maps the submitted application I/Os through the stack *independently* (the md
mapping formulas re-derived here, not :mod:`workers.model.stack`) and compares sector by
sector with the predicted D events of the member disks:

* every sector of every submitted bio reaches exactly the right member sector (raid5 writes:
  the data sector exactly once, plus parity sectors of the written rows only, and reads of
  the stripe cache only inside written rows);
* no request exceeds its device's limits (max_sectors, chunk boundary, logical block size),
  and without an elevator no more requests exist at once than driver tags (queue_depth);
* every D has its C on the same range, C not before D; every D's start sector was entered by a
  G/M/F/I no later; every G has its Q/A no later (Q <= G <= I <= D <= C);
* replaying twice gives the same table; the compiled engine gives the Python engine's table.

``INVARIANT_EXAMPLES=400`` runs the hypothesis tests over more random stacks and inputs.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workers.events import (
    ACT_BACKMERGE,
    ACT_COMPLETE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_REMAP,
    RWBS_WRITE,
    EventTable,
)
from workers.model import bios_from_workload, preset_for_kernel, replay, stack_from_spec
from workers.model.fast import eligible
from workers.model.replay import bio_by_bio
from workers.model.stack import Stack, all_limits

PRESETS = ("4.9", "5.15", "6.1", "6.6", "6.12", "6.17", "6.18", "7.2")

#: (spec, kind, disks, chunk sectors, member size sectors)
STACKS = (
    ("disk:device=nvme", "disk", 1, 0, 0),
    ("disk:max_sectors_kb=128,device=hdd", "disk", 1, 0, 0),
    ("disk:max_sectors_kb=512,max_segments=64,device=sata_ssd", "disk", 1, 0, 0),
    ("raid0:disks=2,chunk=64k,device=nvme", "raid0", 2, 128, 0),
    ("raid0:disks=3,chunk=512k,device=hdd", "raid0", 3, 1024, 0),
    ("raid0:disks=4,chunk=128k,max_sectors_kb=64,device=nvme", "raid0", 4, 256, 0),
    ("raid5:disks=3,chunk=64k,device=nvme", "raid5", 3, 128, 0),
    ("raid5:disks=4,chunk=512k,md_max_sectors_kb=1024,device=hdd", "raid5", 4, 1024, 0),
    ("raid5:disks=8,chunk=64k,device=sata_ssd", "raid5", 8, 128, 0),
    ("raid5:disks=5,chunk=32k,max_sectors_kb=128,device=nvme", "raid5", 5, 64, 0),
    ("linear:disks=2,size=5m,device=nvme", "linear", 2, 0, 10240),
    ("linear:disks=3,size=3m,max_sectors_kb=256,device=hdd", "linear", 3, 0, 6144),
)

WORKLOADS = (
    "dd:bs=4k,count=6", "dd:bs=64k,count=5,op=write", "dd:bs=128k,count=4",
    "dd:bs=1028k,count=3,op=write", "dd:bs=2m,count=2", "dd:bs=4480k,count=2,contig=all",
    "dd:bs=8m,count=1,op=write", "dd:bs=8m,count=1,contig=all",
    "fio:rw=randread,bs=4k,numjobs=3,size=4m,count=5",
    "fio:rw=randwrite,bs=64k,numjobs=2,size=4m,count=4,iodepth=2",
    "fio:rw=randwrite,bs=1m,numjobs=2,size=8m,count=2",
    "fio:rw=write,bs=256k,numjobs=2,size=4m,offset_increment=4m,count=3",
)


def _sectors(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Every sector of a set of ranges (with multiplicity)."""
    lens = np.asarray(lens, np.int64)
    if not len(lens):
        return np.zeros(0, np.int64)
    base = np.repeat(np.asarray(starts, np.int64) - np.concatenate([[0], np.cumsum(lens)[:-1]]),
                     lens)
    return base + np.arange(int(lens.sum()), dtype=np.int64)


def _expected(kind: str, n: int, chunk: int, size: int, sec: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(member, member sector) of each top sector, and for raid5 the parity (member, sector).

    Re-derived from drivers/md: raid0 ``map_sector`` (one zone), raid5 ``raid5_compute_sector``
    (left-symmetric: pd = D - stripe mod n, disk = (pd + 1 + dd_idx) mod n), md-linear.
    """
    if kind == "disk":
        z = np.zeros_like(sec)
        return z, sec, z - 1, z - 1
    if kind == "linear":
        idx = sec // size
        assert np.all(idx < n), "workload beyond the linear array"
        return idx, sec - idx * size, idx * 0 - 1, idx * 0 - 1
    cno = sec // chunk
    off = sec % chunk
    if kind == "raid0":
        return cno % n, (cno // n) * chunk + off, cno * 0 - 1, cno * 0 - 1
    dd = n - 1
    stripe = cno // dd
    pd = dd - stripe % n
    disk = (pd + 1 + cno % dd) % n
    msec = stripe * chunk + off
    return disk, msec, pd, msec


def check_invariants(table: EventTable, stack: Stack, policy, kind: str, n: int, chunk: int,
                     size: int, app_sec: np.ndarray, app_nr: np.ndarray,
                     app_write: np.ndarray) -> None:
    """Assert every invariant of the module docstring on one predicted table."""
    members = [m.dev for m in stack.top.members] if kind != "disk" else [stack.top.dev]
    limits = all_limits(stack, policy)
    act, dev = table.action, table.dev
    rows = np.zeros(0, np.int64)
    if kind == "raid5" and app_write.any():
        # member rows (4 KiB stripe_heads) that carry written data: md may read them
        # (read-modify-write or reconstruct-write) on any member
        wsec = _sectors(app_sec[app_write], app_nr[app_write])
        rows = np.unique(_expected(kind, n, chunk, size, wsec)[1] // 8)
    for write in (True, False):
        sel = app_write == write
        sec = _sectors(app_sec[sel], app_nr[sel])
        mem, msec, pmem, psec = _expected(kind, n, chunk, size, sec)
        for i, d in enumerate(members):
            m = (act == ACT_ISSUE) & (dev == d) & (((table.rwbs & RWBS_WRITE) != 0) == write)
            got = np.sort(_sectors(table.sector[m], table.nr_sectors[m]))
            want = np.sort(msec[mem == i])
            if kind == "raid5" and write:
                # data sectors exactly once; the rest are parity sectors of written rows
                pw = np.unique(psec[pmem == i])
                rest = _multiset_minus(got, want)
                assert np.all(np.isin(rest, pw)), f"{d}: stray write sectors"
                assert np.all(np.isin(pw, got)), f"{d}: parity of a written row missing"
                assert len(_multiset_minus(want, got)) == 0, f"{d}: data sectors missing"
            elif kind == "raid5" and len(rows):
                rest = _multiset_minus(got, want)
                assert len(_multiset_minus(want, got)) == 0, f"{d}: read sectors missing"
                assert np.all(np.isin(rest // 8, rows)), f"{d}: reads outside written rows"
            else:
                assert np.array_equal(got, want), \
                    f"dev {d} {'W' if write else 'R'}: {len(got)} sectors, want {len(want)}"
    for d in members:
        lim = limits[d]
        m = (act == ACT_ISSUE) & (dev == d)
        s, nr = table.sector[m], table.nr_sectors[m]
        assert np.all(nr <= lim.max_sectors), f"{d}: request above max_sectors"
        assert np.all(nr > 0)
        assert np.all(s % lim.lbs_sectors == 0) and np.all(nr % lim.lbs_sectors == 0)
        if lim.chunk_sectors:
            assert np.all(s // lim.chunk_sectors == (s + nr - 1) // lim.chunk_sectors)
        _check_pairs_and_times(table, d)
        if not lim.has_elevator:
            # a driver tag per request from G to C (no insert merges without an elevator)
            on = dev == d
            step = np.where(act[on] == ACT_GETRQ, 1, np.where(act[on] == ACT_COMPLETE, -1, 0))
            assert int(np.max(np.cumsum(step), initial=0)) <= lim.queue_depth, \
                f"{d}: more requests than driver tags"


def _multiset_minus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elements of sorted ``a`` left after removing one occurrence per element of ``b``."""
    ua, ca = np.unique(a, return_counts=True)
    ub, cb = np.unique(b, return_counts=True)
    pos = np.searchsorted(ub, ua)
    pos = np.minimum(pos, max(len(ub) - 1, 0))
    sub = np.where((len(ub) > 0) & (ub[pos] == ua) if len(ub) else False, cb[pos] if len(ub)
                   else 0, 0)
    left = ca - sub
    return np.repeat(ua, np.maximum(left, 0))


def _check_pairs_and_times(table: EventTable, d: int) -> None:
    """D/C pairing per range and the Q <= G <= I <= D <= C order on one device."""
    act, dev, t = table.action, table.dev, table.time_ns
    on = dev == d
    dm, cm = on & (act == ACT_ISSUE), on & (act == ACT_COMPLETE)
    assert dm.sum() == cm.sum(), f"{d}: {dm.sum()} D vs {cm.sum()} C"
    key_d = table.sector[dm] * (1 << 24) + table.nr_sectors[dm]
    key_c = table.sector[cm] * (1 << 24) + table.nr_sectors[cm]
    od = np.lexsort((t[dm], key_d))
    oc = np.lexsort((t[cm], key_c))
    assert np.array_equal(key_d[od], key_c[oc]), f"{d}: D and C ranges differ"
    assert np.all(t[cm][oc] >= t[dm][od]), f"{d}: a C before its D"
    # every D's start was entered (G, M, F or I) no later than the D
    enter = on & np.isin(act, [ACT_GETRQ, ACT_BACKMERGE, ACT_FRONTMERGE, ACT_INSERT])
    first_enter: dict[int, int] = {}
    for s_, t_ in zip(table.sector[enter].tolist(), t[enter].tolist(), strict=True):
        first_enter.setdefault(s_, t_)
    for s_, t_ in zip(table.sector[dm].tolist(), t[dm].tolist(), strict=True):
        assert s_ in first_enter and first_enter[s_] <= t_, f"{d}: D at {s_} without a G"
    # every G has its Q (or remap A) no later
    qa = on & np.isin(act, [ACT_QUEUE, ACT_REMAP])
    q_sectors = table.sector[qa]
    q_ends = q_sectors + table.nr_sectors[qa]
    q_t = t[qa]
    g = on & (act == ACT_GETRQ)
    for s_, t_ in zip(table.sector[g].tolist(), t[g].tolist(), strict=True):
        ok = (q_sectors <= s_) & (q_ends > s_) & (q_t <= t_)
        assert ok.any(), f"{d}: G at {s_} without an earlier Q"


def _run(spec: str, kind: str, n: int, chunk: int, size: int, kernel: str, workload: str,
         seed: int = 0) -> None:
    stack = stack_from_spec(spec)
    policy = preset_for_kernel(kernel)
    bios = bios_from_workload(workload, seed=seed)
    table = replay(bios, stack, policy, engine="python")
    write = (bios.rwbs & RWBS_WRITE) != 0
    check_invariants(table, stack, policy, kind, n, chunk, size, bios.sector, bios.nr_sectors,
                     write)
    again = replay(bios, stack, policy, engine="python")
    assert _same(table, again), "replay is not deterministic"
    if eligible(bios.rwbs, stack, all_limits(stack, policy)):
        fast = replay(bios, stack, policy, engine="fast")
        assert _same(table, fast), "compiled engine differs from the Python engine"


COLUMNS = ("time_ns", "seq", "dev", "pid", "action", "rwbs", "sector", "nr_sectors", "aux",
           "aux2")


def _same(a: EventTable, b: EventTable) -> bool:
    return len(a) == len(b) and all(np.array_equal(getattr(a, c), getattr(b, c))
                                    for c in COLUMNS)


@pytest.mark.parametrize("kernel", PRESETS)
@pytest.mark.parametrize("stack", STACKS, ids=[s[0].split(",device")[0] for s in STACKS])
def test_replay_invariants_matrix(stack, kernel):
    """Each stack x preset, with workloads rotating over dd 4k..8M reads/writes and fio
    random: bytes reach the right member sectors, limits hold, D/C pair, times are ordered,
    replay is deterministic and both engines agree."""
    spec, kind, n, chunk, size = stack
    k = PRESETS.index(kernel) + STACKS.index(stack)
    for j in range(4):
        workload = WORKLOADS[(k * 4 + j) % len(WORKLOADS)]
        _run(spec, kind, n, chunk, size, kernel, workload)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stack=st.sampled_from(STACKS), kernel=st.sampled_from(PRESETS),
       bs_kb=st.sampled_from([4, 8, 60, 64, 100, 128, 256, 512, 1024, 1028, 2048, 4480, 8192]),
       op=st.sampled_from(["read", "write"]), contig=st.sampled_from(["all", "none"]),
       count=st.integers(1, 3), skip=st.integers(0, 5))
def test_replay_invariants_random_dd(stack, kernel, bs_kb, op, contig, count, skip):
    """Random dd sizes, offsets, directions and buffer contiguity keep every invariant."""
    spec, kind, n, chunk, size = stack
    if kind == "linear" and (skip + count) * bs_kb * 2 > n * size:
        count, skip = 1, 0
        bs_kb = min(bs_kb, n * size // 2)
    _run(spec, kind, n, chunk, size, kernel,
         f"dd:bs={bs_kb}k,count={count},skip={skip},op={op},contig={contig}")


@st.composite
def _stacks(draw):
    kind = draw(st.sampled_from(["disk", "raid0", "raid5", "linear"]))
    device = draw(st.sampled_from(["nvme", "hdd", "sata_ssd"]))
    parts = [f"device={device}"]
    ms = draw(st.sampled_from([None, 4, 64, 124, 128, 256, 512, 1024, 1280, 4096]))
    if ms is not None:
        parts.append(f"max_sectors_kb={ms}")
    segs = draw(st.sampled_from([None, 16, 128]))
    if segs is not None:
        parts.append(f"max_segments={segs}")
    sched = draw(st.sampled_from([None, "none", "mq-deadline"]))
    if sched is not None:
        parts.append(f"scheduler={sched}")
    qd = draw(st.sampled_from([None, 1, 4]))
    if qd is not None:
        parts.append(f"queue_depth={qd}")
    if kind == "disk":
        return f"disk:{','.join(parts)}", kind, 1, 0, 0
    n = draw(st.integers(3 if kind == "raid5" else 2, 8))
    chunk_kb = draw(st.sampled_from([4, 16, 32, 64, 128, 256, 512, 1024]))
    if kind == "linear":
        size = draw(st.sampled_from([2048, 4096, 20480]))
        return f"linear:disks={n},size={size // 2}k,{','.join(parts)}", kind, n, 0, size
    md = draw(st.sampled_from([None, 128, 1024, 4096]))
    if md is not None:
        parts.append(f"md_max_sectors_kb={md}")
    return (f"{kind}:disks={n},chunk={chunk_kb}k,{','.join(parts)}", kind, n, chunk_kb * 2, 0)


@settings(max_examples=int(os.environ.get("INVARIANT_EXAMPLES", "80")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(stack=_stacks(), kernel=st.sampled_from(PRESETS),
       rw=st.sampled_from(["read", "write", "randread", "randwrite"]),
       bs_kb=st.sampled_from([4, 16, 64, 128, 512, 1024, 1028, 2048, 4480]),
       numjobs=st.integers(1, 4), iodepth=st.integers(1, 3), count=st.integers(1, 4),
       contig=st.sampled_from(["all", "none"]), seed=st.integers(0, 3))
def test_replay_invariants_random_stacks_and_fio(stack, kernel, rw, bs_kb, numjobs, iodepth,
                                                 count, contig, seed):
    """Random stacks (disk counts, chunks, limits, scheduler, tags) under fio-like jobs keep
    every invariant."""
    spec, kind, n, chunk, size = stack
    span = 16 << 10 if kind != "linear" else n * size // 2 // numjobs
    bs_kb = min(bs_kb, span)
    bs_kb -= bs_kb % 4
    span -= span % bs_kb
    inc = f",offset_increment={span}k" if rw in ("read", "write") else ""
    if rw.startswith("rand") and kind == "linear":
        numjobs = 1
        span = n * size // 2 - (n * size // 2) % bs_kb
    _run(spec, kind, n, chunk, size, kernel,
         f"fio:rw={rw},bs={bs_kb}k,numjobs={numjobs},size={span}k,count={count},"
         f"iodepth={iodepth},contig={contig}{inc}", seed=seed)


@settings(max_examples=int(os.environ.get("INVARIANT_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(stack=_stacks(), kernel=st.sampled_from(PRESETS),
       bios=st.lists(st.tuples(st.integers(0, 30000), st.integers(1, 5000),
                               st.booleans(), st.integers(1, 3)), min_size=1, max_size=20),
       plug_every=st.integers(1, 5), depth=st.sampled_from([0, 1, 2]))
def test_replay_invariants_trace_bios(stack, kernel, bios, plug_every, depth):
    """Trace-mode input (arbitrary sector and length, several threads, plug groups, replay at
    recorded times or synchronous) keeps every invariant; raid5 writes of partial 4 KiB
    blocks write whole blocks, so there written sectors may cover the rest of their rows."""
    from workers.events import RWBS_READ, RWBS_SYNC
    from workers.model import BioStream

    spec, kind, n, chunk, size = stack
    if kind == "linear":
        cap = n * size
        bios = [(s % (cap - 1), min(nr, cap - s % (cap - 1)), w, p) for s, nr, w, p in bios]
    rwbs = [RWBS_WRITE | RWBS_SYNC if b[2] else RWBS_READ for b in bios]
    m = len(bios)
    stream = BioStream.from_arrays([b[0] for b in bios], [b[1] for b in bios], rwbs=rwbs,
                                   pid=[b[3] for b in bios], time_ns=np.arange(m) * 5000,
                                   plug=np.arange(m) // plug_every, depth=depth)
    s = stack_from_spec(spec)
    policy = preset_for_kernel(kernel)
    table = replay(stream, s, policy, engine="python")
    write = (stream.rwbs & RWBS_WRITE) != 0
    if kind == "raid5" and write.any():
        # whole-block writes: widen every write to its 4 KiB rows before checking
        ws, wn = stream.sector[write], stream.nr_sectors[write]
        lo = ws - ws % 8
        hi = ws + wn + (-(ws + wn)) % 8
        sec = np.concatenate([stream.sector[~write], lo])
        nr = np.concatenate([stream.nr_sectors[~write], hi - lo])
        wr = np.concatenate([np.zeros((~write).sum(), bool), np.ones(write.sum(), bool)])
        # overlapping widened writes of one row would be written twice: keep distinct rows
        check_invariants_rows(table, s, policy, n, chunk, sec, nr, wr)
    else:
        check_invariants(table, s, policy, kind, n, chunk, size, stream.sector,
                         stream.nr_sectors, write)
    assert _same(table, replay(stream, s, policy, engine="python"))
    # threads whose plugs overlap in time submit bio by bio: the Python engine only
    if eligible(stream.rwbs, s, all_limits(s, policy)) and \
            not bio_by_bio(stream.pid, stream.plug, depth, s):
        assert _same(table, replay(stream, s, policy, engine="fast"))


def check_invariants_rows(table: EventTable, stack: Stack, policy, n: int, chunk: int,
                          sec: np.ndarray, nr: np.ndarray, write: np.ndarray) -> None:
    """raid5 with whole-block writes: member writes cover exactly the written rows' data
    blocks (each at least once) plus parity of those rows; reads stay inside requested or
    written rows; limits, pairing and time order hold."""
    members = [m.dev for m in stack.top.members]
    wsec = _sectors(sec[write], nr[write])
    wmem, wmsec, wpm, wps = _expected("raid5", n, chunk, 0, wsec)
    rsec = _sectors(sec[~write], nr[~write])
    rmem, rmsec, _, _ = _expected("raid5", n, chunk, 0, rsec)
    rows = np.unique(wmsec // 8)
    for i, d in enumerate(members):
        on = (table.action == ACT_ISSUE) & (table.dev == d)
        w = on & ((table.rwbs & RWBS_WRITE) != 0)
        got_w = _sectors(table.sector[w], table.nr_sectors[w])
        want_w = np.unique(np.concatenate([wmsec[wmem == i], wps[wpm == i]]))
        assert np.array_equal(np.unique(got_w), want_w), f"{d}: written sectors differ"
        r = on & ((table.rwbs & RWBS_WRITE) == 0)
        got_r = _sectors(table.sector[r], table.nr_sectors[r])
        want_r = rmsec[rmem == i]
        assert len(_multiset_minus(np.sort(want_r), np.sort(got_r))) == 0, f"{d}: reads missing"
        extra = _multiset_minus(np.sort(got_r), np.sort(want_r))
        assert np.all(np.isin(extra // 8, rows)), f"{d}: reads outside written rows"
        lim = all_limits(stack, policy)[d]
        assert np.all(table.nr_sectors[on] <= lim.max_sectors)
        _check_pairs_and_times(table, d)


def test_overlapping_raid5_writes_are_never_folded_into_one():
    """Two async 1028k random writes of raid5 3 x 4k whose rows overlap: the second write of
    a row still reading for the first (or waiting on a plug) must not be OR-ed into it
    (``add_stripe_bio`` refuses the overlap, R5_Overlap): every data sector is written as
    often as the workload wrote it (was "data sectors missing")."""
    _run("raid5:disks=3,chunk=4k,device=nvme", "raid5", 3, 8, 0, "4.9",
         "fio:rw=randwrite,bs=1028k,numjobs=1,size=15420k,count=2,iodepth=2,contig=all",
         seed=1)
