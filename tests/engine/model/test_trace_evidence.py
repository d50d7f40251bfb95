"""Evidence the input trace carries beyond its Q events: a synchronous submitter (each I/O
queued after the previous one completed, C), the raid10 copy read_balance chose (A) and the
raid1 member the first read went to (A: read_balance's state before the trace)."""

from pathlib import Path

import numpy as np

from workers.events import ACT_COMPLETE, ACT_ISSUE
from workers.model import preset_for_kernel, replay, stack_from_manifest
from workers.model.replay import BioStream, bios_from_table
from workers.model.stack import stack_from_spec
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
