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
from workers.model.replay import bio_by_bio

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
       plug_every=st.integers(1, 6), depth=st.sampled_from([0, 1, 2]), grouped=st.booleans())
def test_fast_engine_equals_python_engine(stack, kernel, order, cand, nomerge, bios, plug_every,
                                          depth, grouped):
    """Random bios (reads/writes, several threads, plug groups, trace or sync mode) on disks,
    raid0 and raid5 (reads: raid5 writes go through the Python engine's stripe cache) under
    random policies give identical tables in both engines."""
    policy = preset_for_kernel(kernel).with_overrides(
        {k: v for k, v in (("plug_order", order), ("plug_merge_candidate", cand),
                           ("split_nomerge", nomerge)) if v is not None})
    s = stack_from_spec(stack)
    n = len(bios)
    raid5 = stack.startswith("raid5")  # raid5 writes (stripe cache) are Python only
    # grouped: each plug group is one thread's (no two threads' plugs overlap in time)
    pid = [bios[i - i % plug_every][3] if grouped else b[3] for i, b in enumerate(bios)]
    stream = BioStream.from_arrays([b[0] for b in bios], [b[1] for b in bios],
                                   rwbs=[RWBS_READ if raid5 else b[2] for b in bios], pid=pid,
                                   seg_bytes=[b[4] for b in bios],
                                   time_ns=np.arange(n) * 3000, plug=np.arange(n) // plug_every,
                                   depth=depth)
    slow = replay(stream, s, policy, engine="python")
    if bio_by_bio(stream.pid, stream.plug, depth, s):
        # threads whose plugs overlap in time are submitted bio by bio: Python only
        with pytest.raises(ModelConfigError):
            replay(stream, s, policy, engine="fast")
        return
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


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["set", "get", "del"]), st.integers(0, 1),
                              st.integers(0, 2), st.integers(0, 1), st.integers(0, 40),
                              st.integers(0, 5)), max_size=300))
def test_elevator_hash_map_behaves_as_the_python_dicts(ops):
    """The compiled engine's by_end / by_start tables (array hash maps, keys (node, op, sector))
    answer like DeadlineQueue's dicts under random set / get / delete-if-mapped-to sequences,
    across growth (tables start at 4 slots and double when half full). Keys are few and
    sectors small so probe runs collide and wrap around the table end."""
    from workers.model import fast

    hk, hv, hc = fast.new_hash(4)
    twin: list[dict[tuple[int, int, int], int]] = [{}, {}]
    for what, m, node, op, sec, rq in ops:
        key = (node, op, sec)
        if what == "set":
            if 2 * (max(hc[:fast.NMAPS]) + 1) > hv.shape[1]:
                hk, hv, hc = fast.grow_hash(hk, hv, hc)
            fast._hash_set(hk, hv, hc, m, node, op, sec, rq)
            twin[m][key] = rq
        elif what == "get":
            assert fast._hash_get(hk, hv, hc, m, node, op, sec) == twin[m].get(key, -1)
        else:
            fast._hash_del_if(hk, hv, hc, m, node, op, sec, rq)
            if twin[m].get(key) == rq:
                del twin[m][key]
        for mm in range(fast.NMAPS):
            assert hc[mm] == len(twin[mm])
    for mm in range(fast.NMAPS):
        for (node, op, sec), rq in twin[mm].items():
            assert fast._hash_get(hk, hv, hc, mm, node, op, sec) == rq


def test_elevator_hash_map_deletes_inside_a_probe_run():
    """Keys sharing a home slot (the last one, so the run wraps around to slot 0) and a key of
    home 0 in one probe run: deleting any one must leave the others reachable (the backward
    shift), and deleting a key mapped to another request must keep it."""
    from workers.model import fast

    hk, hv, hc = fast.new_hash(16)
    homes: dict[int, list[int]] = {}
    for sec in range(2000):
        homes.setdefault(fast._hash_home(hc, 0, 0, sec), []).append(sec)
    # slot 15: a home-15 key; slot 0: a home-0 key (stays when the hole is at 15); slots 1, 2:
    # two more home-15 keys (wrapped around, they move back)
    keys = homes[15][:1] + homes[0][:1] + homes[15][1:3]
    for drop in range(len(keys)):
        hk, hv, hc = fast.new_hash(16)
        for rq, sec in enumerate(keys):
            fast._hash_set(hk, hv, hc, fast.MAP_BYEND, 0, 0, sec, rq)
        assert hv[fast.MAP_BYEND, 15] and hv[fast.MAP_BYEND, 0] and hv[fast.MAP_BYEND, 1]
        fast._hash_del_if(hk, hv, hc, fast.MAP_BYEND, 0, 0, keys[drop], drop + 100)
        assert hc[fast.MAP_BYEND] == len(keys)
        fast._hash_del_if(hk, hv, hc, fast.MAP_BYEND, 0, 0, keys[drop], drop)
        assert hc[fast.MAP_BYEND] == len(keys) - 1
        for rq, sec in enumerate(keys):
            want = -1 if rq == drop else rq
            assert fast._hash_get(hk, hv, hc, fast.MAP_BYEND, 0, 0, sec) == want
            assert fast._hash_get(hk, hv, hc, fast.MAP_BYSTART, 0, 0, sec) == -1


def test_fast_engine_grows_the_elevator_tables_mid_run(monkeypatch):
    """Thousands of unmergeable requests queued in mq-deadline (nr_requests 4096, one driver
    tag, an HDD) fill the by_end / by_start tables past half and the sorted lists (started
    narrow here): the engine returns to Python, which rehashes the tables into larger ones and
    widens the lists, and the result still equals the Python engine's."""
    from workers.model import fast

    grown = []
    widened = []
    real_grow, real_new, real_widen = fast.grow_hash, fast._new_elevator, fast._grow_elevator

    def counting_grow(hk, hv, hc):
        grown.append(int(hc[:fast.NMAPS].max()))
        return real_grow(hk, hv, hc)

    def narrow_elevator(nn, cap, margin_pool):
        return real_new(nn, margin_pool + 1, margin_pool)

    def counting_widen(e):
        widened.append(e[0].shape[1])
        return real_widen(e)

    monkeypatch.setattr(fast, "grow_hash", counting_grow)
    monkeypatch.setattr(fast, "_new_elevator", narrow_elevator)
    monkeypatch.setattr(fast, "_grow_elevator", counting_widen)
    monkeypatch.setattr(fast, "MIN_HASH_SLOTS", 1)
    monkeypatch.setattr(fast, "HASH_SLOTS_PER_MARGIN", 1)
    s = stack_from_spec("disk:device=hdd,queue_depth=1,scheduler=mq-deadline,nr_requests=4096")
    n = 3000
    rng = np.random.default_rng(1)
    stream = BioStream.from_arrays(rng.integers(0, 1 << 20, n) * 64, 8,
                                   time_ns=np.arange(n) * 10, plug=np.arange(n))
    pol = preset_for_kernel("6.1")
    fast_table = replay(stream, s, pol, engine="fast")
    assert max(grown) > 0  # a table holding entries was rehashed
    assert len(widened) > 1  # the sorted lists were widened while holding requests
    assert _same(replay(stream, s, pol, engine="python"), fast_table)


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 50), st.sampled_from([8 << 20, 8 << 20 | 16, 9 << 20, 253 << 20 | 3]),
                               st.integers(0, 3), st.integers(0, 300), st.integers(-2, 70000)),
                     max_size=60),
       cuts=st.lists(st.integers(0, 60), max_size=3), stack_devs=st.sampled_from(
           [[], [8 << 20], [9 << 20, 8 << 20, 8 << 20 | 16]]))
def test_compiled_event_columns_equal_the_numpy_twin(rows, cuts, stack_devs):
    """The compiled table assembly (the engine's column chunks sorted by time in place, seq
    per device) gives the numpy twin's columns, dtypes included: times out of order and tied,
    devices inside and outside the stack, pid 0, values that wrap in narrow columns (cast
    once, into the chunk's dtypes, as the engine writes them)."""
    from workers.model.evbuf import rows_to_chunk
    from workers.model.replay import event_columns, event_columns_numpy

    n = len(rows)
    cols = np.zeros((9, n), dtype=np.int64)
    for j, (t, dev, pid, act, val) in enumerate(rows):
        cols[:, j] = [t, dev, pid, act, val, val * 7, val, val - 5, val % 9]
    bounds = sorted({0, n, *(min(c, n) for c in cuts)})
    spans = [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)] or [(0, 0)]
    want = event_columns_numpy([rows_to_chunk(cols[:, a:b]) for a, b in spans], stack_devs)
    got = event_columns([rows_to_chunk(cols[:, a:b]) for a, b in spans], stack_devs)
    assert set(want) == set(got)
    for k in want:
        assert got[k].dtype == want[k].dtype, k
        assert np.array_equal(got[k], want[k]), k


@settings(max_examples=40, deadline=None)
@given(perm=st.integers(0, 200).flatmap(lambda n: st.permutations(list(range(n)))))
def test_rows_permuted_in_place_as_numpy_indexing_would(perm):
    """_permute_rows (the in-place reordering of the event columns) moves every field's rows
    as ``column[order]`` does, for any permutation (long cycles, fixed points, reversal)."""
    from workers.model.evbuf import rows_to_chunk
    from workers.model.replay import _permute_rows

    n = len(perm)
    order = np.array(perm, dtype=np.int64)
    rows = np.arange(9 * n, dtype=np.int64).reshape(9, n) * 977 + 3
    chunk = rows_to_chunk(rows)
    want = [a[order] for a in chunk]
    _permute_rows(order.copy(), chunk)
    for w, g in zip(want, chunk, strict=True):
        assert np.array_equal(w, g)
