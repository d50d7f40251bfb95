"""``analyze`` pairs events with one device's matcher at a time (memory at 100M events): its
pairs must be exactly the whole-table matcher's pairs of that device, in the same order."""

from __future__ import annotations

import numpy as np
import pytest

from workers.analyzers.common import MATCH_STAGES, StageMatcher, device_rows
from workers.traces.synth import all_actions_table, realistic_table


@pytest.mark.parametrize("make", [lambda: realistic_table(40_000, seed=4, devices=3),
                                  all_actions_table])
def test_device_matcher_equals_whole_table_matcher(make) -> None:
    table = make()
    # out of time order in places: the matcher orders by time itself
    table.time_ns[::7] -= 3
    whole = StageMatcher(table)
    devs = [int(d) for d in np.unique(table.dev)]
    assert len(devs) >= 2
    found = 0
    for d in devs:
        one = StageMatcher(table, rows=device_rows(table, d))
        assert one.rows.dtype == np.int32
        for a in MATCH_STAGES:
            for b in MATCH_STAGES:
                ra, rb = whole.pairs_for(a, b, d)
                oa, ob = one.pairs_for(a, b, d)
                assert np.array_equal(ra, oa) and np.array_equal(rb, ob), (d, a, b)
                found += len(ra)
    assert found > 20
