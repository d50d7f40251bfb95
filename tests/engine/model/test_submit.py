"""Engine (workers.model.submit): tag allocation limits and the sleep of blk_mq_get_tag."""

import numpy as np
import pytest

from workers.events import (
    ACT_COMPLETE,
    ACT_GETRQ,
    ACT_ISSUE,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    EventTable,
    make_dev,
)
from workers.model import BioStream, preset_for_kernel, replay, stack_from_spec

COLUMNS = ("time_ns", "seq", "dev", "pid", "action", "rwbs", "sector", "nr_sectors", "aux",
           "aux2")


def max_allocated(table: EventTable, dev: int) -> int:
    """Most requests holding a tag at once: G takes one, C frees it (no insert merges)."""
    on = table.dev == dev
    step = np.where(table.action[on] == ACT_GETRQ, 1,
                    np.where(table.action[on] == ACT_COMPLETE, -1, 0))
    return int(np.max(np.cumsum(step), initial=0))


def _scattered_plug(n: int, *, pid: int = 1) -> BioStream:
    """One plug of ``n`` non-contiguous 64k reads (no merges possible)."""
    return BioStream.from_arrays(np.arange(n) * 1024, 128, rwbs=RWBS_READ, pid=pid,
                                 plug=np.zeros(n), time_ns=np.zeros(n))


@pytest.mark.parametrize("engine", ["python", "fast"])
def test_driver_tags_bound_requests_without_elevator(engine):
    """Scheduler none, queue_depth 2: a plug of 8 requests never holds more than 2 tags; the
    third G sleeps, the plug is flushed from schedule (UT with the depth, 2 then 1 each) and the requests are
    dispatched as tags come back. Both engines give the same table (the compiled one hands
    over)."""
    stack = stack_from_spec("disk:device=nvme,queue_depth=2,nr_requests=2")
    policy = preset_for_kernel("6.1")
    table = replay(_scattered_plug(8), stack, policy, engine=engine)
    dev = stack.top.dev
    assert max_allocated(table, dev) == 2
    assert int(np.sum((table.action == ACT_ISSUE) & (table.dev == dev))) == 8
    ut = (table.action == ACT_UNPLUG_TIMER) & (table.dev == dev)
    # the first sleep flushes the two plugged requests, each later one the one taken since
    assert table.aux[ut].tolist() == [2, 1, 1, 1, 1, 1]
    ref = replay(_scattered_plug(8), stack, policy, engine="python")
    assert all(np.array_equal(getattr(table, c), getattr(ref, c)) for c in COLUMNS)


def test_scheduler_tags_bound_requests_with_mq_deadline():
    """mq-deadline, nr_requests 4, queue_depth 1: at most 4 requests exist at once, although
    only one is ever on the device."""
    stack = stack_from_spec("disk:device=hdd,scheduler=mq-deadline,queue_depth=1,nr_requests=4")
    table = replay(_scattered_plug(12), stack, preset_for_kernel("6.6"), engine="python")
    dev = stack.top.dev
    assert max_allocated(table, dev) == 4
    on = table.dev == dev
    d = np.where(table.action[on] == ACT_ISSUE, 1,
                 np.where(table.action[on] == ACT_COMPLETE, -1, 0))
    assert int(np.max(np.cumsum(d))) == 1


def test_without_tag_pressure_no_sleep_and_one_unplug():
    """With enough tags the plug is flushed once at the end (one U of depth 8 on 6.12+'s
    direct path) and no UT appears."""
    stack = stack_from_spec("disk:device=nvme,queue_depth=64,nr_requests=64")
    table = replay(_scattered_plug(8), stack, preset_for_kernel("6.12"), engine="python")
    u = table.action == ACT_UNPLUG_IO
    assert u.sum() == 1 and int(table.aux[u][0]) == 8
    assert not np.any(table.action == ACT_UNPLUG_TIMER)


def test_direct_issue_has_no_unplug_event_between_5_16_and_6_11():
    """6.1 (unplug_trace=not_direct): the single-queue direct path traces no U; an elevator
    makes the flush go through blk_mq_dispatch_plug_list, which does."""
    none = replay(_scattered_plug(4), stack_from_spec("disk:device=nvme"),
                  preset_for_kernel("6.1"), engine="python")
    assert not np.any(none.action == ACT_UNPLUG_IO)
    dl = replay(_scattered_plug(4), stack_from_spec("disk:device=hdd,scheduler=mq-deadline"),
                preset_for_kernel("6.1"), engine="python")
    u = dl.action == ACT_UNPLUG_IO
    assert u.sum() == 1 and int(dl.aux[u][0]) == 4


# --- raid5 writes through the stripe cache -------------------------------------------------
def _raid5_write(disks: int, sector: int, nr: int, kernel: str = "6.6"):
    stack = stack_from_spec(f"raid5:disks={disks},chunk=64k,device=nvme")
    bios = BioStream.from_arrays([sector], [nr], rwbs=RWBS_WRITE | RWBS_SYNC)
    return replay(bios, stack, preset_for_kernel(kernel), engine="python")


def _member_io(table: EventTable, write: bool) -> list[tuple[str, int, int]]:
    from workers.events import dev_str

    m = (table.action == ACT_ISSUE) & (((table.rwbs & RWBS_WRITE) != 0) == write)
    return sorted((dev_str(int(d)), int(s), int(n))
                  for d, s, n in zip(table.dev[m], table.sector[m], table.nr_sectors[m],
                                     strict=True))


def test_raid5_full_stripe_write_reads_nothing():
    """handle_stripe_dirtying: every data block of the rows is overwritten (rcw = 0), so md
    writes the three data chunks and the parity without reading."""
    t = _raid5_write(4, 0, 384)
    assert _member_io(t, write=False) == []
    assert _member_io(t, write=True) == [("8,0", 0, 128), ("8,16", 0, 128), ("8,32", 0, 128),
                                         ("8,48", 0, 128)]


def test_raid5_small_write_on_a_wide_array_is_read_modify_write():
    """8 disks (7 data): one chunk written needs 2 reads for rmw (old data, old parity) against
    6 for rcw, so md reads the data block and the parity and writes both back."""
    t = _raid5_write(8, 0, 128)
    # stripe 0: parity on member 7 (left-symmetric: D - 0 mod 8), chunk 0 on member 0
    assert _member_io(t, write=False) == [("8,0", 0, 128), ("8,112", 0, 128)]
    assert _member_io(t, write=True) == [("8,0", 0, 128), ("8,112", 0, 128)]


def test_raid5_two_of_three_chunks_is_reconstruct_write():
    """4 disks: two of three data chunks written: rcw reads the one other data chunk (1 read)
    instead of rmw's 3, then writes the two chunks and the parity."""
    t = _raid5_write(4, 0, 256)
    assert _member_io(t, write=False) == [("8,32", 0, 128)]
    assert _member_io(t, write=True) == [("8,0", 0, 128), ("8,16", 0, 128), ("8,48", 0, 128)]


def test_raid5_partial_block_is_not_an_overwrite():
    """A 2 KiB write covers half a 4 KiB block: not R5_OVERWRITE, so on 4 disks rcw would
    read all three data blocks (the written one too) against rmw's 2 (data block + parity):
    read-modify-write, where a whole-chunk write would be a 2:2 tie going to rcw. md writes
    whole 4 KiB blocks."""
    t = _raid5_write(4, 0, 4)
    assert _member_io(t, write=False) == [("8,0", 0, 8), ("8,48", 0, 8)]
    assert _member_io(t, write=True) == [("8,0", 0, 8), ("8,48", 0, 8)]


def test_raid5_writes_follow_their_reads_and_the_md_bio_completes_last():
    """Every member write is issued after the reads of the stripe completed, and md0's C of
    the bio comes after the last member write completed."""
    t = _raid5_write(8, 0, 128)
    is_w = (t.rwbs & RWBS_WRITE) != 0
    member = t.dev != make_dev(9, 0)
    last_read_c = t.time_ns[(t.action == ACT_COMPLETE) & ~is_w & member].max()
    first_write_d = t.time_ns[(t.action == ACT_ISSUE) & is_w & member].min()
    assert first_write_d >= last_read_c
    md_c = t.time_ns[(t.action == ACT_COMPLETE) & (t.dev == make_dev(9, 0))]
    assert len(md_c) == 1
    assert md_c[0] >= t.time_ns[(t.action == ACT_COMPLETE) & is_w & member].max()
