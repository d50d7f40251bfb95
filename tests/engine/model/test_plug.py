"""Plug and merge: worked examples E3.1-E3.3 across the plug policies."""

import pytest
from model_helpers import d_stream

from workers.events import ACT_BACKMERGE, ACT_GETRQ
from workers.model import BioStream, preset_for_kernel, replay, stack_from_spec
from workers.model.limits import QueueLimits
from workers.model.plug import F_NOMERGE, MERGE_BACK, MERGE_NONE, Bio, Request, attempt_bio_merge
from workers.model.split import OP_READ


def _one_plug(sectors, nrs, kernel_or_policy, spec="disk:max_sectors_kb=512,device=nvme"):
    stack = stack_from_spec(spec)
    policy = preset_for_kernel(kernel_or_policy) if isinstance(kernel_or_policy, str) \
        else kernel_or_policy
    bios = BioStream.from_arrays(sectors, nrs, plug=[0] * len(sectors))
    return replay(bios, stack, policy)


def test_e3_1_lifo_issues_tails_after_next_front():
    """E3.1 old (5.16-6.12): 0, 1024, 2056, 2048+8, 3080, 4112, 4104+8 ..."""
    t = _one_plug([0, 2056, 4112, 6168], [2056] * 4, "6.1")
    got = [(s, n) for _, s, n in d_stream(t)]
    assert got[:7] == [(0, 1024), (1024, 1024), (2056, 1024), (2048, 8), (3080, 1024),
                       (4112, 1024), (4104, 8)]


def test_e3_1_fifo_is_ascending_with_larger_batches():
    """E3.1 new (>= 6.13): after the first two, requests pile up and are issued FIFO."""
    t = _one_plug([0, 2056, 4112, 6168], [2056] * 4, "6.18")
    got = [(s, n) for _, s, n in d_stream(t)]
    assert got[:6] == [(0, 1024), (1024, 1024), (2048, 8), (2056, 1024), (3080, 1024), (4104, 8)]
    assert [s for s, _ in got] == sorted(s for s, _ in got)


@pytest.mark.parametrize("kernel,requests", [("5.15", 2), ("6.1", 3), ("6.12.30", 2),
                                             ("6.17", 3)])
def test_e3_2_plug_merge_candidate(kernel, requests):
    """E3.2: X0 0+8, Y0 1000+8, X1 8+8: scan merges (2), LIFO newest does not (3), FIFO head
    before the fix merges (2), tail after the fix does not (3)."""
    t = _one_plug([0, 1000, 8], [8, 8, 8], kernel)
    assert int((t.action == ACT_GETRQ).sum()) == requests
    assert int((t.action == ACT_BACKMERGE).sum()) == 3 - requests


def test_e3_2_mq_deadline_insert_merge_joins_x0_x1():
    """E3.2 with mq-deadline: the insert merge joins X0 and X1 even when the plug did not."""
    stack_spec = "disk:max_sectors_kb=512,device=hdd,scheduler=mq-deadline,queue_depth=1"
    # a busy device keeps the requests queued: a first request occupies the one tag
    t = _one_plug([50000, 0, 1000, 8], [8, 8, 8, 8], "6.1", stack_spec)
    got = [(s, n) for _, s, n in d_stream(t)]
    assert (0, 16) in got and len(got) == 3


def test_e3_3_size_cap_marks_request_nomerge():
    """E3.3: max_sectors 256: 0+128 and 128+128 merge into 0+256; 256+8 starts a new request."""
    t = _one_plug([0, 128, 256], [128, 128, 8], "6.18", "disk:max_sectors_kb=128,device=nvme")
    assert [(s, n) for _, s, n in d_stream(t)] == [(0, 256), (256, 8)]


def test_attempt_bio_merge_rules():
    """NOMERGE on either side, a different op and a full request all refuse the merge."""
    lim = QueueLimits(max_sectors=64)
    def bio(s, n, flags=0, op=OP_READ):
        return Bio(1, s, n, op, 1, flags, None, None, 0, 0, 1)
    rq = Request(bio(0, 32), 1, 1)
    assert attempt_bio_merge(rq, bio(32, 8, F_NOMERGE), 1, lim) == MERGE_NONE
    assert attempt_bio_merge(rq, bio(32, 8, op=1), 1, lim) == MERGE_NONE
    assert attempt_bio_merge(rq, bio(32, 32), 1, lim) == MERGE_BACK
    assert attempt_bio_merge(rq, bio(64, 8), 1, lim) == MERGE_NONE and rq.nomerge
