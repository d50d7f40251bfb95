"""Property tests: vectorized analyzers agree with plain-Python reference computations."""

from __future__ import annotations

import math

import numpy as np
from analyzer_helpers import stream
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.analyzers.common import StageMatcher
from workers.analyzers.seek import seek_histogram
from workers.analyzers.throughput import union_length
from workers.compare import matched_in_order
from workers.events import EventTable, make_dev

requests_st = st.lists(st.tuples(st.integers(0, 1 << 22), st.integers(1, 2048)),
                       min_size=0, max_size=60)


@settings(max_examples=150, deadline=None)
@given(requests_st)
def test_seek_histogram_matches_reference(reqs: list[tuple[int, int]]) -> None:
    """Counts per KB bucket equal a per-pair Python loop over the seed definition."""
    t = stream([s for s, _ in reqs], [n for _, n in reqs]) if reqs else EventTable.empty()
    h = seek_histogram(t, make_dev(8, 0))
    ref: dict[int, int] = {}
    zero = 0
    for (s0, n0), (s1, _) in zip(reqs, reqs[1:]):
        b = abs(s1 - (s0 + n0)) * 512
        zero += b == 0
        k = 0 if b < 1024 else int(math.floor(math.log2(b // 1024))) + 1
        ref[k] = ref.get(k, 0) + 1
    expected = tuple(ref.get(i, 0) for i in range(max(ref) + 1)) if ref else ()
    assert h.counts == expected
    assert h.cnt == max(len(reqs) - 1, 0) and h.zero_cnt == zero
    text = h.text().splitlines()
    assert len(text) == 3 + len(expected)
    if expected:
        assert max(ln.count("#") for ln in text[3:]) == 40


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 50)), max_size=40))
def test_union_length_matches_reference(iv: list[tuple[int, int]]) -> None:
    """Union length equals counting covered unit cells."""
    s = np.array([a for a, _ in iv], dtype=np.int64)
    e = np.array([a + w for a, w in iv], dtype=np.int64)
    covered = set()
    for a, w in iv:
        covered.update(range(a, a + w))
    assert union_length(s, e) == len(covered)


@settings(max_examples=100, deadline=None)
@given(st.permutations(list(range(12))))
def test_matched_in_order_is_lis_share(perm: list[int]) -> None:
    """In-order share equals the longest increasing subsequence by O(n^2) DP, over n."""
    obs = [(i * 8, 8) for i in range(12)]
    pred = [obs[i] for i in perm]
    pos = {r: i for i, r in enumerate(pred)}
    seq = [pos[r] for r in obs]
    best = [1] * len(seq)
    for i in range(len(seq)):
        for j in range(i):
            if seq[j] < seq[i]:
                best[i] = max(best[i], best[j] + 1)
    assert matched_in_order(obs, pred) == max(best) / len(obs)


def _matched_in_order_reference(observed: list[tuple[int, int]],
                                predicted: list[tuple[int, int]]) -> float:
    """The per-request definition: j-th observed copy -> j-th predicted copy, then LIS (DP)."""
    if not observed:
        return 1.0 if not predicted else 0.0
    pos: dict[tuple[int, int], list[int]] = {}
    for i, r in enumerate(predicted):
        pos.setdefault(r, []).append(i)
    used: dict[tuple[int, int], int] = {}
    seq = []
    for r in observed:
        j = used.get(r, 0)
        if j < len(pos.get(r, [])):
            seq.append(pos[r][j])
            used[r] = j + 1
    best = [1] * len(seq)
    for i in range(len(seq)):
        for j in range(i):
            if seq[j] < seq[i]:
                best[i] = max(best[i], best[j] + 1)
    return max(best, default=0) / len(observed)


small_reqs_st = st.lists(st.tuples(st.sampled_from([0, 8, 16, 24, 1 << 40]),
                                   st.sampled_from([8, 16])), max_size=30)


@settings(max_examples=200, deadline=None)
@given(small_reqs_st, small_reqs_st)
def test_matched_in_order_with_repeats_matches_reference(obs: list[tuple[int, int]],
                                                         pred: list[tuple[int, int]]) -> None:
    """Repeated requests (re-reads) pair copy by copy; tuples and arrays give the same share."""
    want = _matched_in_order_reference(obs, pred)
    assert matched_in_order(obs, pred) == want
    assert matched_in_order(np.array(obs, dtype=np.uint64).reshape(-1, 2),
                            np.array(pred, dtype=np.uint64).reshape(-1, 2)) == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 8, 16]), st.integers(0, 1000),
                          st.integers(1, 500)), min_size=1, max_size=25))
def test_d2c_pairs_match_reference(reqs: list[tuple[int, int, int]]) -> None:
    """D->C pairs: each C takes the latest earlier D of its sector, each D at most once."""
    times, acts, secs = [], [], []
    for sec, t, dt in reqs:
        times += [t, t + dt]
        acts += [7, 8]
        secs += [sec, sec]
    t = EventTable.from_columns(time_ns=times, action=acts, sector=secs,
                                nr_sectors=np.full(len(times), 8),
                                dev=np.full(len(times), make_dev(8, 0))).sorted_by_time()
    ra, rb = StageMatcher(t).pairs("D", "C")
    got = sorted(zip(ra.tolist(), rb.tolist()))
    # reference: walk events in time order, remember the latest D per sector and whether used
    order = np.lexsort((np.arange(len(t)), t.time_ns))
    latest: dict[int, int] = {}
    used: set[int] = set()
    ref = []
    for r in order:
        s = int(t.sector[r])
        if t.action[r] == 7:
            latest[s] = int(r)
        elif s in latest and latest[s] not in used:
            ref.append((latest[s], int(r)))
            used.add(latest[s])
    assert got == sorted(ref)
