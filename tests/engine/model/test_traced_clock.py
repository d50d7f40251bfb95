"""The replay on the trace's clock: every stack's member requests complete when the trace
shows them served, and a request the trace does not have after the D->C time the trace shows
for its device, kind and size (``Engine.untraced_completion``), not after a disk model's
backlog (an HDD for a virtio disk that says it is rotational)."""

from __future__ import annotations

import numpy as np

from workers.events import (
    ACT_COMPLETE,
    ACT_ISSUE,
    RWBS_READ,
    RWBS_WRITE,
    EventTable,
    rwbs_from_text,
)
from workers.model import preset_for_kernel
from workers.model.plug import Bio, Request
from workers.model.replay import traced_service
from workers.model.split import OP_READ, OP_WRITE
from workers.model.stack import stack_from_spec
from workers.model.submit import Engine


def _traced(rows: list[tuple[int, int, int, str, int, int, int]]) -> EventTable:
    """rows: (time, dev, action, rwbs text, sector, nr, pid)."""
    t, dev, act, rw, sec, nr, pid = zip(*rows, strict=True)
    table = EventTable.from_columns(time_ns=np.array(t), dev=np.array(dev), action=np.array(act),
                                    sector=np.array(sec), nr_sectors=np.array(nr),
                                    pid=np.array(pid),
                                    rwbs=np.array([rwbs_from_text(x) for x in rw]))
    table.meta["format"] = "blktrace"
    return table


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
    from workers.model.split import OP_DISCARD
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
