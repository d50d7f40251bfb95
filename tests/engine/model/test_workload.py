"""Workload descriptions, determinism and raid5 writes."""

import numpy as np
import pytest
from model_helpers import d_stream

from workers.errors import ModelConfigError
from workers.events import RWBS_WRITE
from workers.model import BioStream, bios_from_workload, preset_for_kernel, replay, stack_from_spec


def test_fio_workload_threads_ranges_and_seed():
    """fio: numjobs threads over offset_increment ranges; random offsets follow the seed."""
    a = bios_from_workload("fio:rw=randwrite,bs=1m,numjobs=4,size=64m,offset_increment=1g,"
                           "count=16", seed=3)
    b = bios_from_workload("fio:rw=randwrite,bs=1m,numjobs=4,size=64m,offset_increment=1g,"
                           "count=16", seed=3)
    c = bios_from_workload("fio:rw=randwrite,bs=1m,numjobs=4,size=64m,offset_increment=1g,"
                           "count=16", seed=4)
    assert sorted(set(a.pid.tolist())) == [1, 2, 3, 4] and len(a) == 64
    assert np.array_equal(a.sector, b.sector) and not np.array_equal(a.sector, c.sector)
    for j in range(4):
        s = a.sector[a.pid == j + 1]
        assert s.min() >= j * (1 << 21) and s.max() < j * (1 << 21) + (64 << 11)
        assert np.all(s % 2048 == 0)
    assert np.all(a.rwbs & RWBS_WRITE) and a.depth == 1 and a.app_io


@pytest.mark.parametrize("spec", ["dd:bs=0", "dd:bs=1m,count=x", "dd:bs=1m,colour=red",
                                  "fio:rw=sideways", "tar:bs=1m", "dd:bs=1m,contig=maybe",
                                  "dd:op=erase"])
def test_bad_workloads(spec):
    """Malformed workloads are ModelConfigError."""
    with pytest.raises(ModelConfigError):
        bios_from_workload(spec)


def test_replay_is_deterministic():
    """Two runs of the same input give identical tables (times included)."""
    stack = stack_from_spec("raid0:disks=3,chunk=64k,device=hdd,scheduler=mq-deadline")
    work = bios_from_workload("fio:rw=randread,bs=256k,numjobs=3,size=16m,count=20", seed=1)
    a = replay(work, stack, preset_for_kernel("6.6"))
    b = replay(work, stack, preset_for_kernel("6.6"))
    for col in ("time_ns", "dev", "action", "sector", "nr_sectors"):
        assert np.array_equal(getattr(a, col), getattr(b, col))


def test_raid5_write_goes_to_data_and_parity():
    """A chunk write reaches its data disk and the stripe's parity disk at the same offset
    (after md read the other two data chunks: reconstruct-write wins the 2:2 tie)."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k,device=nvme")
    t = replay(BioStream.from_arrays([0], [128], rwbs=RWBS_WRITE), stack,
               preset_for_kernel("6.18"))
    w = t.rwbs & RWBS_WRITE != 0
    assert sorted(d_stream(t.take(np.flatnonzero(w)))) == [("8,0", 0, 128), ("8,48", 0, 128)]
    assert sorted(d_stream(t.take(np.flatnonzero(~w)))) == [("8,16", 0, 128), ("8,32", 0, 128)]
