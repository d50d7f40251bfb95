"""Latency pairs by (device, sector), btt-style."""

from __future__ import annotations

import numpy as np
from analyzer_helpers import requests

from workers.analyzers import analyze
from workers.analyzers.common import StageMatcher
from workers.analyzers.latency import distribution, latencies
from workers.events import DeviceInfo, EventTable, make_dev

US = 1000
SDA = make_dev(8, 0)


def test_stage_latencies_by_hand() -> None:
    """Two requests: Q2G, G2I, I2D, D2C and Q2C are the differences of their stage times."""
    t = requests([
        (0, 8, "R", {"Q": 0, "G": 1 * US, "I": 3 * US, "D": 7 * US, "C": 107 * US}),
        (64, 8, "R", {"Q": 2 * US, "G": 4 * US, "I": 5 * US, "D": 9 * US, "C": 309 * US}),
    ])
    lat = latencies(t, SDA, StageMatcher(t), (50.0, 99.0))
    assert lat["Q2G"]["count"] == 2 and lat["Q2G"]["max_ns"] == 2 * US
    assert lat["G2I"]["mean_ns"] == 1.5 * US
    assert lat["I2D"]["min_ns"] == 4 * US
    assert lat["D2C"]["percentiles_ns"] == {"p50": 100 * US, "p99": 300 * US}
    assert lat["Q2C"]["max_ns"] == 307 * US


def test_same_sector_reused_pairs_nearest_earlier() -> None:
    """A sector written twice: each C pairs with the D just before it, not the first D."""
    t = requests([(0, 8, "W", {"D": 0, "C": 10 * US}), (0, 8, "W", {"D": 20 * US, "C": 25 * US})])
    lat = latencies(t, SDA, StageMatcher(t), (50.0,))
    assert lat["D2C"]["count"] == 2 and lat["D2C"]["max_ns"] == 10 * US
    assert lat["D2C"]["min_ns"] == 5 * US


def test_unmatched_and_other_devices() -> None:
    """A C with no D is skipped; events of another device never pair."""
    a = requests([(0, 8, "R", {"C": 5 * US})])
    b = requests([(0, 8, "R", {"D": 0})], dev=make_dev(8, 16))
    t = EventTable.concat([a, b]).sorted_by_time()
    lat = latencies(t, SDA, StageMatcher(t), (50.0,))
    assert lat["D2C"]["count"] == 0 and lat["D2C"]["percentiles_ns"] == {}


def test_unsorted_input_pairs_in_time_order() -> None:
    """Rows out of time order still pair by time."""
    t = requests([(0, 8, "R", {"D": 0, "C": 10 * US})])
    rev = t.take(np.array([1, 0]))
    lat = latencies(rev, SDA, StageMatcher(rev), (50.0,))
    assert lat["D2C"]["count"] == 1 and lat["D2C"]["max_ns"] == 10 * US


def test_distribution_histogram_buckets() -> None:
    """log2 microsecond buckets: 0.5 us -> [0,1), 1 us -> [1,2), 3 us -> [2,4)."""
    d = distribution(np.array([500, 1000, 3000], dtype=np.int64), (50.0,))
    assert d["counts"] == [1, 1, 1] and d["edges_us"] == [0, 1, 2, 4]


def test_empty_device_known_answer() -> None:
    """A device named by the manifest but without events: every pair has count 0, no
    percentiles and null (never 0) mean/min/max, with the same keys as a device with pairs."""
    t = requests([(0, 8, "R", {"D": 0, "C": 10 * US})])
    sdb = make_dev(8, 16)
    t.devices[sdb] = DeviceInfo(sdb, name="sdb")
    res = analyze(t)
    lat = res["devices"]["8,16"]["latency"]
    assert set(lat) == {"Q2G", "G2I", "I2D", "D2C", "Q2C"}
    for d in lat.values():
        assert d == {"count": 0, "mean_ns": None, "max_ns": None, "min_ns": None,
                     "percentiles_ns": {}, "edges_us": [0], "counts": []}
    assert set(lat["D2C"]) == set(res["devices"]["8,0"]["latency"]["D2C"])


def test_single_request_known_answer() -> None:
    """One request through Q, G, I, D, C: each pair has count 1 and every percentile, the mean,
    min and max equal its one difference; the histogram has one count in the right bucket."""
    t = requests([(2048, 8, "W", {"Q": 0, "G": 1 * US, "I": 3 * US, "D": 7 * US,
                                  "C": 107 * US})])
    lat = analyze(t)["devices"]["8,0"]["latency"]
    want = {"Q2G": 1 * US, "G2I": 2 * US, "I2D": 4 * US, "D2C": 100 * US, "Q2C": 107 * US}
    for pair, ns in want.items():
        d = lat[pair]
        assert d["count"] == 1 and d["mean_ns"] == ns and d["min_ns"] == ns == d["max_ns"]
        assert d["percentiles_ns"] == {"p50": ns, "p90": ns, "p99": ns}
        assert sum(d["counts"]) == 1
        k = len(d["counts"]) - 1  # the only count is in the last bucket
        assert d["counts"][k] == 1 and d["edges_us"][k] <= ns // US < d["edges_us"][k + 1]


def test_p90_of_ten_requests() -> None:
    """D2C of 10, 20, ... 100 us: p50 = 50 us, p90 = 90 us, p99 = 100 us (observed values,
    inverted CDF), whatever order the completions arrive in."""
    d2c = [30, 100, 10, 70, 50, 90, 20, 60, 80, 40]
    t = requests([(i * 64, 8, "R", {"D": i * US, "C": i * US + v * US})
                  for i, v in enumerate(d2c)])
    res = analyze(t)["devices"]["8,0"]["latency"]["D2C"]
    assert res["count"] == 10
    assert res["percentiles_ns"] == {"p50": 50 * US, "p90": 90 * US, "p99": 100 * US}
    assert res["mean_ns"] == 55 * US and res["min_ns"] == 10 * US and res["max_ns"] == 100 * US
    lat = latencies(t, SDA, StageMatcher(t), (90.0, 95.0))
    assert lat["D2C"]["percentiles_ns"] == {"p90": 90 * US, "p95": 100 * US}
