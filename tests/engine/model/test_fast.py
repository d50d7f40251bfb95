"""The compiled engine equals the Python engine event for event."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workers.errors import ModelConfigError
from workers.events import RWBS_DISCARD, RWBS_READ, RWBS_SYNC, RWBS_WRITE
from workers.model import (
    BioStream,
    preset_for_kernel,
    replay,
    stack_from_manifest,
    stack_from_spec,
)
from workers.model.policy import CHOICES

COLUMNS = ("time_ns", "seq", "dev", "pid", "action", "rwbs", "sector", "nr_sectors", "aux",
           "aux2")

STACKS = ["disk:max_sectors_kb=512,device=nvme", "disk:max_sectors_kb=64,max_segments=16,"
          "device=hdd,queue_depth=2", "raid5:disks=4,chunk=512k,md_max_sectors_kb=1024,device=nvme",
          "raid5:disks=8,chunk=64k,device=hdd,layout=right-asymmetric,queue_depth=4",
          "raid0:disks=3,chunk=128k,device=sata_ssd", "raid0:disks=2,chunk=512k,device=nvme",
          "disk:device=hdd,scheduler=mq-deadline,queue_depth=2,max_sectors_kb=128",
          "raid5:disks=4,chunk=64k,device=hdd,scheduler=mq-deadline,queue_depth=1",
          "raid0:disks=2,chunk=64k,device=hdd,scheduler=mq-deadline,queue_depth=4"]


def _same(a, b):
    return len(a) == len(b) and all(np.array_equal(getattr(a, c), getattr(b, c))
                                    for c in COLUMNS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stack=st.sampled_from(STACKS),
       kernel=st.sampled_from(["4.9", "5.15", "6.1", "6.12.30", "6.17", "6.18", "7.2"]),
       order=st.sampled_from(CHOICES["plug_order"] + (None,)),
       cand=st.sampled_from(CHOICES["plug_merge_candidate"] + (None,)),
       nomerge=st.sampled_from(CHOICES["split_nomerge"]),
       bios=st.lists(st.tuples(st.integers(0, 40000), st.integers(1, 6000),
                               st.sampled_from([RWBS_READ, RWBS_WRITE | RWBS_SYNC]),
                               st.integers(1, 3), st.sampled_from([0, 4096])),
                     min_size=1, max_size=25),
       plug_every=st.integers(1, 6), depth=st.sampled_from([0, 1, 2]))
def test_fast_engine_equals_python_engine(stack, kernel, order, cand, nomerge, bios, plug_every,
                                          depth):
    """Random bios (reads/writes, several threads, plug groups, trace or sync mode) on disks,
    raid0 and raid5 (reads: raid5 writes go through the Python engine's stripe cache) under
    random policies give identical tables in both engines."""
    policy = preset_for_kernel(kernel).with_overrides(
        {k: v for k, v in (("plug_order", order), ("plug_merge_candidate", cand),
                           ("split_nomerge", nomerge)) if v is not None})
    s = stack_from_spec(stack)
    n = len(bios)
    raid5 = stack.startswith("raid5")  # raid5 writes (stripe cache) are Python only
    stream = BioStream.from_arrays([b[0] for b in bios], [b[1] for b in bios],
                                   rwbs=[RWBS_READ if raid5 else b[2] for b in bios], pid=[b[3] for b in bios],
                                   seg_bytes=[b[4] for b in bios],
                                   time_ns=np.arange(n) * 3000, plug=np.arange(n) // plug_every,
                                   depth=depth)
    slow = replay(stream, s, policy, engine="python")
    fast = replay(stream, s, policy, engine="fast")
    assert _same(slow, fast)


def test_fast_engine_refuses_out_of_scope_cases():
    """Discards and linear stacks stay on the Python engine; engine='fast' says so."""
    s = stack_from_spec("raid0:disks=2,chunk=512k,device=nvme")
    with pytest.raises(ModelConfigError):
        replay(BioStream.from_arrays([0], [4096], rwbs=RWBS_DISCARD), s,
               preset_for_kernel("6.1"), engine="fast")
    s2 = stack_from_manifest({"stack": {"top": "9,0", "kind": "linear",
                                        "members": ["8,0", "8,16"]}})
    with pytest.raises(ModelConfigError):
        replay(BioStream.from_arrays([0], [8]), s2, preset_for_kernel("6.1"), engine="fast")
    auto = replay(BioStream.from_arrays([0], [8]), s2, preset_for_kernel("6.1"))
    assert len(auto) > 0


def test_fast_engine_resumes_after_growing_its_buffers(monkeypatch):
    """Tiny initial pools and event buffer force the grow-and-resume path; results still equal
    the Python engine's."""
    from workers.model import fast

    monkeypatch.setattr(fast, "MIN_POOL", 1)
    monkeypatch.setattr(fast, "MIN_EVENTS", 1)
    monkeypatch.setattr(fast, "MAX_EVENTS_BUFFER", 1)
    s = stack_from_spec("raid5:disks=4,chunk=64k,device=hdd,queue_depth=1,scheduler=mq-deadline")
    n = 3000
    stream = BioStream.from_arrays(np.arange(n) * 512, 512, time_ns=np.arange(n) * 10,
                                   plug=np.arange(n) // 4)
    pol = preset_for_kernel("6.1")
    assert _same(replay(stream, s, pol, engine="python"), replay(stream, s, pol, engine="fast"))
