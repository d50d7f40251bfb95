"""Evidence the input trace carries beyond its Q events: a synchronous submitter (each I/O
queued after the previous one completed, C), the raid10 copy read_balance chose (A) and the
raid1 member the first read went to (A: read_balance's state before the trace)."""

from pathlib import Path

import numpy as np

from workers.events import (
    ACT_COMPLETE,
    ACT_GETRQ,
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_SPLIT,
    RWBS_READ,
    RWBS_WRITE,
    RWBS_WRITE_ZEROES,
    EventTable,
    make_dev,
    rwbs_from_text,
)
from workers.model import preset_for_kernel, replay, stack_from_manifest
from workers.model.plug import Bio, Request
from workers.model.replay import BioStream, bios_from_table, traced_service
from workers.model.split import OP_DISCARD, OP_READ, OP_WRITE
from workers.model.stack import stack_from_spec
from workers.model.submit import Engine
from workers.traces import ingest
from workers.traces.directory import directory_files

DATA = Path(__file__).resolve().parents[2] / "data" / "fidelity"


def _load(rel: str):
    path = DATA / rel
    files = directory_files(path, [])
    ing = ingest(files, names=[Path(f).name for f in files])
    m = {k: getattr(ing.manifest, k) for k in ("kernel", "stack", "limits", "devices",
                                               "workload")}
    return ing.table, stack_from_manifest(m)


def test_a_dd_trace_replays_one_io_at_a_time():
    """dd oflag=direct: every write is queued on md0 after the previous one completed."""
    table, stack = _load("6.1.0-57-amd64/r5_d4_c64_ddw192k_full")
    assert bios_from_table(table, stack.top.dev).depth == 1


def test_overlapping_ios_keep_the_recorded_times():
    """The same trace with the top device's completions moved after the last Q: the I/Os
    overlapped, so the replay keeps the trace's submission times (depth 0)."""
    table, stack = _load("6.1.0-57-amd64/r5_d4_c64_ddw192k_full")
    top_c = (table.action == ACT_COMPLETE) & (table.dev == stack.top.dev)
    late = table.time_ns.copy()
    late[top_c] = int(table.time_ns.max()) + 1
    table.time_ns = late
    assert bios_from_table(table, stack.top.dev).depth == 0


def _stream(sectors, nr, hint=None):
    n = len(sectors)
    z = np.zeros(n, np.int64)
    meta = {} if hint is None else {"mirror_reads": np.array(hint, dtype=np.int64)}
    return BioStream(time_ns=np.arange(n, dtype=np.int64) * 10_000_000,
                     sector=np.array(sectors, np.int64), nr_sectors=np.full(n, nr, np.int64),
                     rwbs=np.ones(n, np.int64), pid=np.ones(n, np.int64),
                     plug=np.arange(n, dtype=np.int64), seg_bytes=z, bio_pages=z, depth=1,
                     meta=meta)


def test_raid10_reads_take_the_copy_the_trace_shows():
    """raid10 n2 on 4 disks: chunk 2 (array sector 256) has copies on members 0 and 1.
    read_balance's rule alone keeps the first copy; the trace's A event says member 1."""
    stack = stack_from_spec("raid10:disks=4,chunk=64k,layout=n2")
    m = stack.top.members

    def issued(table, node):
        r = (table.action == ACT_ISSUE) & (table.dev == node.dev)
        return table.sector[r].tolist()

    plain = replay(_stream([0, 128, 256], 128), stack, preset_for_kernel("6.1"))
    assert issued(plain, m[0]) == [0, 128] and issued(plain, m[1]) == []
    hinted = replay(_stream([0, 128, 256], 128, hint=[[256], [m[1].dev]]), stack,
                    preset_for_kernel("6.1"))
    assert issued(hinted, m[0]) == [0] and issued(hinted, m[1]) == [128]


def test_raid1_starts_from_the_member_the_traces_first_read_went_to():
    """raid1 on 2 disks, a sequential reader: with every head at 0 (a fresh array) the first
    member keeps the stream; where the trace's first read went to member 1 (udev's probe had
    moved member 0's head before the trace), the whole stream stays on member 1, and a what-if
    that takes the first idle member moves it back: only the start is seeded."""
    stack = stack_from_spec("raid1:disks=2")
    m = stack.top.members

    def issued(table, node):
        r = (table.action == ACT_ISSUE) & (table.dev == node.dev)
        return table.sector[r].tolist()

    reads = [0, 128, 256, 384]
    plain = replay(_stream(reads, 128), stack, preset_for_kernel("7.2"))
    assert len(issued(plain, m[0])) == 4 and issued(plain, m[1]) == []
    hint = [[0], [m[1].dev]]
    seeded = replay(_stream(reads, 128, hint=hint), stack, preset_for_kernel("7.2"))
    assert issued(seeded, m[0]) == [] and len(issued(seeded, m[1])) == 4
    idle = replay(_stream(reads, 128, hint=hint), stack,
                  preset_for_kernel("7.2").with_overrides("md_read_balance=first_idle"))
    assert len(issued(idle, m[0])) == 4


def test_raid1_members_no_read_reached_keep_their_head_at_zero():
    """The trace's first read (the array's end) went to member 0, as on a fresh array; member
    1 keeps ``head_position`` 0 from ``setup_conf``, so a later read of the array's start is
    sequential there (``is_sequential``) and goes to member 1, and the next one follows it
    (``next_seq_sect``); a read elsewhere goes back to the first idle member. blkdiscard's
    blkid probe of a new raid1 (6.18.15 and 7.3.4 p2_r1_d2_blkdiscard: its reads of sectors
    0, 8 and 16 on vdb). Were member 1's head taken as unknown, every read went to member 0."""
    stack = stack_from_spec("raid1:disks=2")
    m = stack.top.members

    def issued(table, node):
        r = (table.action == ACT_ISSUE) & (table.dev == node.dev)
        return table.sector[r].tolist()

    end = 2092928
    out = replay(_stream([end, 0, 8, 5000], 8, hint=[[end], [m[0].dev]]), stack,
                 preset_for_kernel("6.18"))
    off = stack.top.data_offset
    assert issued(out, m[1]) == [off + 0, off + 8]
    assert issued(out, m[0]) == [off + end, off + 5000]
    # a first read at 0 on member 1: member 0's head cannot have been at 0 (it would have
    # been sequential first), so it is taken as elsewhere, and the stream stays on member 1
    out = replay(_stream([0, 8, 5000], 8, hint=[[0], [m[1].dev]]), stack,
                 preset_for_kernel("6.18"))
    assert issued(out, m[0]) == [off + 5000] and issued(out, m[1]) == [off + 0, off + 8]


def _traced(rows: list[tuple[int, int, int, str, int, int, int]]) -> EventTable:
    """rows: (time, dev, action, rwbs text, sector, nr, pid)."""
    t, dev, act, rw, sec, nr, pid = zip(*rows, strict=True)
    table = EventTable.from_columns(time_ns=np.array(t), dev=np.array(dev), action=np.array(act),
                                    sector=np.array(sec), nr_sectors=np.array(nr),
                                    pid=np.array(pid),
                                    rwbs=np.array([rwbs_from_text(x) for x in rw]))
    table.meta["format"] = "blktrace"
    return table


def _md_read(t0: int, pid: int, sector: int, md: int, member: int, c_after: int) -> list:
    """A read of 8 sectors on md0 remapped to ``member``, which the trace shows done at
    ``t0 + c_after``."""
    return [(t0, md, ACT_QUEUE, "R", sector, 8, pid),
            (t0 + 1000, member, ACT_REMAP, "R", sector, 8, pid),
            (t0 + 2000, member, ACT_QUEUE, "R", sector, 8, pid),
            (t0 + 3000, member, ACT_GETRQ, "R", sector, 8, pid),
            (t0 + 4000, member, ACT_ISSUE, "R", sector, 8, pid),
            (t0 + c_after, member, ACT_COMPLETE, "R", sector, 8, 0),
            (t0 + c_after + 1000, md, ACT_COMPLETE, "R", sector, 8, 0)]


#: md0 raid1 over vda and vdb, rotational members (the disk model an HDD)
_RAID1_MANIFEST = {"kernel": "6.12.117+deb13-amd64",
                   "stack": {"top": "9,0", "kind": "raid1", "members": ["254,0", "254,16"]},
                   "limits": {d: {"rotational": 1, "scheduler": "none", "max_sectors_kb": 1280}
                              for d in ("9,0", "254,0", "254,16")},
                   "devices": {"md0": "9,0", "vda": "254,0", "vdb": "254,16"}}


def test_raid1_read_balance_sees_the_members_busy_as_the_trace_served_them():
    """raid1 on the trace's clock: a member request the trace shows completes at its traced
    C, so ``read_balance``'s ``nr_pending`` is the kernel's. Two readers: vda served the first
    read in 0.1 ms (a virtio disk under emulation), so at the second read both members are
    idle and ``choose_best_rdev`` takes the first idle one, vda, as the trace did; served by
    the rotational disk model (several ms), vda was still busy and the read went to vdb
    (6.12.117 p_r1_d2_fstrim: mkfs's reads of the backup superblocks)."""
    md, vda, vdb = make_dev(9, 0), make_dev(254, 0), make_dev(254, 16)
    manifest = _RAID1_MANIFEST
    stack = stack_from_manifest(manifest)
    table = _traced(_md_read(0, 2, 1000, md, vda, 100_000)
                    + _md_read(500_000, 1, 500000, md, vda, 600_000))
    bios = bios_from_table(table, md, stack=stack)
    assert bios.depth == 0
    out = replay(bios, stack, preset_for_kernel(manifest["kernel"]))
    d = out.action == ACT_ISSUE
    assert list(zip(out.dev[d].tolist(), out.sector[d].tolist(), strict=True)) == [
        (vda, 1000), (vda, 500000)]
    c = (out.action == ACT_COMPLETE) & (out.dev == vda)
    assert out.time_ns[c].tolist() == [100_000, 1_100_000]
    assert vdb not in out.dev[d].tolist()


def test_raid1_read_balance_sees_a_member_s_head_where_its_last_read_ended():
    """``update_head_pos`` runs when a read completes (``raid1_end_read_request``), not when
    it is submitted: with both members busy and no sequential member, ``choose_best_rdev``
    takes the member whose last *completed* read ended nearest. vda finished 0+8 and is
    reading 100000; vdb finished 300000+8 and is reading 10000; a read of 40000 goes to vda
    (head 8), not to vdb, whose read in flight will leave its head at 10008 (7.3.4
    p_r1_d2_fstrim: mount's metadata reads)."""
    md, vda, vdb = make_dev(9, 0), make_dev(254, 0), make_dev(254, 16)
    manifest = _RAID1_MANIFEST
    stack = stack_from_manifest(manifest)
    table = _traced(_md_read(0, 1, 0, md, vda, 50_000)
                    + _md_read(100_000, 1, 100000, md, vda, 10_000_000)
                    + _md_read(200_000, 2, 300000, md, vdb, 200_000)
                    + _md_read(500_000, 2, 10000, md, vdb, 10_000_000)
                    + _md_read(600_000, 3, 40000, md, vda, 100_000))
    out = replay(bios_from_table(table, md, stack=stack), stack,
                 preset_for_kernel(manifest["kernel"]))
    d = out.action == ACT_ISSUE
    assert sorted(zip(out.time_ns[d].tolist(), out.dev[d].tolist(), out.sector[d].tolist(),
                      strict=True))[-1][1:] == (vda, 40000)
    assert [s for dv, s in zip(out.dev[d].tolist(), out.sector[d].tolist(), strict=True)
            if dv == vdb] == [300000, 10000]


def test_the_traces_service_keeps_discards_apart_from_writes_and_reads():
    """A blktrace discard is ``D`` without ``W``: ``traced_service`` keys it as its own kind,
    and a discard the replay issues takes the trace's discard of that range, not the write of
    the same range after it (7.3.4 p_r1_d2_fstrim: mkfs's discard of block 0 at 9 ms took the
    C of the superblock write at 288 ms, and each later write of block 0 the next one's).
    """
    from workers.model.replay import traced_service

    md, vda, vdb = make_dev(9, 0), make_dev(254, 0), make_dev(254, 16)
    manifest = _RAID1_MANIFEST
    stack = stack_from_manifest(manifest)
    rows = []
    for t0, rw, pid, c_after in ((0, "DS", 1, 400_000), (1_000_000, "WS", 2, 100_000)):
        rows.append((t0, md, ACT_QUEUE, rw, 0, 8, pid))
        for m in (vda, vdb):
            rows += [(t0 + 1000, m, ACT_REMAP, rw, 0, 8, pid),
                     (t0 + 2000, m, ACT_QUEUE, rw, 0, 8, pid),
                     (t0 + 3000, m, ACT_GETRQ, rw, 0, 8, pid),
                     (t0 + 4000, m, ACT_ISSUE, rw, 0, 8, pid),
                     (t0 + c_after, m, ACT_COMPLETE, rw, 0, 8, 0)]
        rows.append((t0 + c_after + 1000, md, ACT_COMPLETE, rw, 0, 8, 0))
    table = _traced(sorted(rows, key=lambda r: r[0]))
    served = traced_service(table, 0)
    assert sorted(served[3].tolist()) == [1, 1, 2, 2]  # kind: 2 discard, 1 write
    bios = bios_from_table(table, md, stack=stack)
    assert bios.depth == 0
    out = replay(bios, stack, preset_for_kernel(manifest["kernel"]))
    c = (out.action == ACT_COMPLETE) & (out.dev == vda)
    assert out.time_ns[c].tolist() == [400_000, 1_100_000]


def _dm_stripe(chunk_sectors: int):
    """dm-stripe over three virtio disks, 64 KiB chunk, the top's chunk_sectors as given."""
    lim = {"max_sectors_kb": 1280, "write_zeroes_max_bytes": 2147483136,
           "scheduler": "none", "chunk_sectors": 0}
    manifest = {"kernel": "6.1.0-57-amd64",
                "stack": {"top": "252,0", "kind": "dm-stripe", "chunk_kb": 64, "stripes": 3,
                          "members": ["254,0", "254,16", "254,32"]},
                "limits": {"252,0": {**lim, "chunk_sectors": chunk_sectors},
                           **{d: lim for d in ("254,0", "254,16", "254,32")}},
                "devices": {"dm-0": "252,0", "vda": "254,0", "vdb": "254,16",
                            "vdc": "254,32"}}
    return stack_from_manifest(manifest)


def _zeroout(stack, ranges):
    """mkfs.ext4's journal zeroing (BLKZEROOUT, 64 MiB at 2883584) on dm-0, traced as W,
    with the member remaps (A from the bio's start) ``ranges`` = [(member, sector, nr)]."""
    top = stack.top.dev
    start, nr = 2883584, 131072
    rows = [(0, top, ACT_QUEUE, "WS", start, nr, 7, 0, 0)]
    for k, (m, s, n) in enumerate(ranges):
        rows += [(1000 + k, m, ACT_REMAP, "WS", s, n, 7, start, top),
                 (2000 + k, m, ACT_QUEUE, "WS", s, n, 7, 0, 0)]
    t, dev, act, rw, sec, nrs, pid, aux, aux2 = zip(*rows, strict=True)
    table = EventTable.from_columns(
        time_ns=np.array(t), dev=np.array(dev), action=np.array(act), sector=np.array(sec),
        nr_sectors=np.array(nrs), pid=np.array(pid), aux=np.array(aux), aux2=np.array(aux2),
        rwbs=np.array([rwbs_from_text(x) for x in rw]))
    table.meta["format"] = "blktrace"
    return table


def test_dm_stripe_write_zeroes_reach_each_member_as_one_range():
    """A write-zeroes bio on dm-stripe is abnormal I/O: one clone per stripe
    (``num_write_zeroes_bios``), each cut to its stripe's part of the range by
    ``stripe_map_range`` and traced (A) from the bio's start. A v1 trace shows it as a plain
    W, but a remap reaching past the chunk of its source sector is no write's (a write's
    clone ends at the chunk, ``max_io_len``): the replay takes the bio as a write-zeroes and
    each member gets one request, as 6.1.0-57's mkfs.ext4 journal zeroing shows (vda
    961280+43648, vdb and vdc 961152+43776 and +43648), not 128-sector pieces merged up to
    max_sectors (2560)."""
    stack = _dm_stripe(0)
    vda, vdb, vdc = (m.dev for m in stack.top.members)
    want = [(vda, 961280, 43648), (vdb, 961152, 43776), (vdc, 961152, 43648)]
    bios = bios_from_table(_zeroout(stack, want), stack.top.dev, stack=stack)
    assert bios.meta["write_zeroes"].tolist() == [True]
    out = replay(bios, stack, preset_for_kernel("6.1.0-57-amd64"))
    d = out.action == ACT_ISSUE
    got = sorted(zip(out.dev[d].tolist(), out.sector[d].tolist(), out.nr_sectors[d].tolist(),
                     strict=True))
    assert got == sorted(want)
    assert not bool(np.any((out.action == ACT_SPLIT) & (out.dev == stack.top.dev)))


def test_dm_stripe_write_zeroes_cut_at_every_chunk_from_6_17():
    """From 6.17 dm-stripe sets its queue's chunk_sectors (5fb9d4341b78) and
    ``bio_split_write_zeroes`` honours it (60dc5ea6bcfd, 6.13): dm's ``bio_split_to_limits``
    cuts the write-zeroes at every chunk (X on the top, 6.18.15's capture), each piece reaches
    one member whole, and write-zeroes requests never merge (``rq_mergeable``). Without the
    chunk cut in the policy (``write_zeroes_chunk=off``) the same limits leave one range per
    member. No remap crosses a chunk, so the trace carries no evidence here; the op is taken
    from the bio stream (a v2 trace's WZ)."""
    stack = _dm_stripe(128)
    start, nr = 2883584, 131072
    bios = BioStream.from_arrays([start], [nr], rwbs=RWBS_WRITE_ZEROES, pid=7)
    out = replay(bios, stack, preset_for_kernel("6.18.15+deb13-amd64"))
    top_x = (out.action == ACT_SPLIT) & (out.dev == stack.top.dev)
    assert int(top_x.sum()) == nr // 128 - 1
    d = out.action == ACT_ISSUE
    assert set(out.nr_sectors[d].tolist()) == {128} and int(d.sum()) == nr // 128
    out = replay(bios, stack, preset_for_kernel("6.18.15+deb13-amd64").with_overrides(
        "write_zeroes_chunk=off"))
    d = out.action == ACT_ISSUE
    assert sorted(out.nr_sectors[d].tolist()) == [43648, 43648, 43776]


# --- the trace's clock on every stack (Engine.traced_completion / untraced_completion) ---

def _rq(dev: int, sector: int, nr: int, op: int) -> Request:
    return Request(Bio(dev, sector, nr, op, RWBS_READ if op == OP_READ else RWBS_WRITE,
                       0, None, None, 0, 0, 50), 1, sector)


def test_a_request_the_trace_lacks_takes_the_traced_latency_of_its_size_and_kind():
    """vda served 128-sector reads in 2.5 ms, 512-sector reads in 3.1 ms and a write in
    0.4 ms; a read of 384 sectors the trace never saw completes 3.1 ms after its D (the
    nearest size, 512), a 128-sector read 2.5 ms after, a write 0.4 ms after; a discard (no
    discard in the trace) is left to the disk model."""
    stack = stack_from_spec("disk")
    vda = stack.top.dev
    rows = []
    for k, (sec, nr, rw, dc) in enumerate([(0, 128, "R", 2_500_000), (1000, 128, "R", 2_400_000),
                                           (2000, 128, "R", 2_600_000),
                                           (5000, 512, "R", 3_100_000),
                                           (9000, 8, "W", 400_000)]):
        t0 = k * 10_000_000
        rows += [(t0, vda, ACT_ISSUE, rw, sec, nr, 1), (t0 + dc, vda, ACT_COMPLETE, rw, sec, nr, 0)]
    eng = Engine(stack, preset_for_kernel("6.17"))
    eng.set_traced_service(traced_service(_traced(rows), 0))
    t = 100_000_000
    assert eng.untraced_completion(vda, _rq(vda, 70000, 384, OP_READ), t) == t + 3_100_000
    assert eng.untraced_completion(vda, _rq(vda, 70000, 128, OP_READ), t) == t + 2_500_000
    assert eng.untraced_completion(vda, _rq(vda, 70000, 64, OP_WRITE), t) == t + 400_000
    assert eng.untraced_completion(vda, _rq(vda, 70000, 64, OP_DISCARD), t) is None


def test_a_replay_keeps_the_trace_s_clock_on_a_plain_disk():
    """A single rotational disk, two reads the trace shows served in 0.1 ms each: the
    replay completes them at the trace's C (every stack now, not only raid5/raid1), where
    the HDD model would have taken milliseconds."""
    from workers.events import ACT_QUEUE
    from workers.model import replay
    from workers.model.replay import bios_from_table
    from workers.model.stack import stack_from_manifest

    manifest = {"kernel": "6.17.13+deb13-amd64",
                "stack": {"top": "254,0", "kind": "disk"},
                "limits": {"254,0": {"rotational": 1, "scheduler": "none",
                                     "max_sectors_kb": 1280}},
                "devices": {"vda": "254,0"}}
    stack = stack_from_manifest(manifest)
    vda = stack.top.dev
    rows = []
    for k, sec in enumerate((0, 500_000)):
        t0 = k * 1_000_000
        rows += [(t0, vda, ACT_QUEUE, "R", sec, 8, 1), (t0 + 1000, vda, ACT_ISSUE, "R", sec, 8, 1),
                 (t0 + 101_000, vda, ACT_COMPLETE, "R", sec, 8, 0)]
    table = _traced(rows)
    out = replay(bios_from_table(table, vda, stack=stack), stack,
                 preset_for_kernel(manifest["kernel"]))
    d = np.flatnonzero((out.action == ACT_ISSUE) & (out.dev == vda))
    c = np.flatnonzero((out.action == ACT_COMPLETE) & (out.dev == vda))
    assert len(d) == 2 and len(c) == 2
    assert out.time_ns[c].tolist() == [101_000, 1_101_000]


def test_the_trace_s_service_is_read_only_where_the_python_engine_replays():
    """``traced_service`` is a Python pass over every D and C: a plain disk's trace of
    FAST_MIN_BIOS bios or more (the compiled engine's, which has no use for it) skips it; a
    smaller one carries it."""
    from workers.model.replay import FAST_MIN_BIOS
    from workers.model.stack import stack_from_manifest

    manifest = {"kernel": "6.17.13+deb13-amd64", "stack": {"top": "254,0", "kind": "disk"},
                "limits": {"254,0": {"rotational": 0, "scheduler": "none",
                                     "max_sectors_kb": 1280}},
                "devices": {"vda": "254,0"}}
    stack = stack_from_manifest(manifest)
    vda = stack.top.dev

    def table(n: int) -> EventTable:
        rows = []
        for k in range(n):
            t0 = k * 100_000
            rows += [(t0, vda, ACT_QUEUE, "R", 8 * k, 8, 1),
                     (t0 + 1000, vda, ACT_ISSUE, "R", 8 * k, 8, 1),
                     (t0 + 50_000, vda, ACT_COMPLETE, "R", 8 * k, 8, 0)]
        return _traced(rows)

    assert "traced_service" in bios_from_table(table(10), vda, stack=stack).meta
    assert "traced_service" not in bios_from_table(table(FAST_MIN_BIOS), vda,
                                                   stack=stack).meta
