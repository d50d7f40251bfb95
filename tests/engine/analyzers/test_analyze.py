"""analyze(): the results dict layout shared with the web and compare."""

from __future__ import annotations

import json

import pytest
from analyzer_helpers import stream

from workers.analyzers import AnalyzeConfig, analyze
from workers.events import EventTable, make_dev


def test_analyze_layout_and_json() -> None:
    """Every device gets name, stage, events, seek and sizes; the dict is JSON."""
    t = EventTable.concat([stream([0, 8, 16], 8), stream([100], 8, dev=make_dev(8, 16),
                                                         action="Q")])
    res = json.loads(json.dumps(analyze(t, summaries={"iostat": [{"Device": "sda"}]})))
    assert res["version"] == 1
    assert set(res["devices"]) == {"8,0", "8,16"}
    d = res["devices"]["8,0"]
    assert d["stage"] == "D" and d["events"] == 3 and d["seek"]["zero_cnt"] == 2
    assert d["sizes"]["count"] == 3
    q = res["devices"]["8,16"]
    assert q["stage"] == "Q" and q["fallback"] and "no D events" in q["stage_note"]
    assert res["summaries"]["iostat"][0]["Device"] == "sda"


def test_analyze_device_filter_and_stage() -> None:
    """config.devices restricts devices; config.stage picks the stage."""
    t = EventTable.concat([stream([0, 8], 8), stream([0, 8], 8, action="Q")])
    res = analyze(t, config=AnalyzeConfig(stage="Q", devices=("8,0",)))
    assert res["devices"]["8,0"]["stage"] == "Q"
    assert analyze(t, config=AnalyzeConfig(devices=("8,16",)))["devices"] == {}
    with pytest.raises(ValueError):
        AnalyzeConfig(stage="Z")


def test_analyze_empty_table() -> None:
    """An empty table gives no devices and no error."""
    res = analyze(EventTable.empty())
    assert res["devices"] == {} and res["events"] == 0


def test_results_are_strict_json_for_edge_cases() -> None:
    """Empty, single-request, flush-only and unsorted tables give strict JSON (no NaN/inf)."""
    from analyzer_helpers import requests

    from workers.compare import compare

    cases = [
        EventTable.empty(),
        stream([100], 8),
        stream([0, 0], 0),  # flushes only
        requests([(0, 8, "R", {"Q": 5000, "D": 9000, "C": 1000})]),  # C before D: unsorted
        EventTable.concat([stream([0, 8, 16], 8), stream([4], 8, action="C")]),
    ]
    results = [analyze(t) for t in cases]
    for r in results:
        json.dumps(r, allow_nan=False)
    json.dumps(compare(results[:2], results[2:]), allow_nan=False)
    json.dumps(compare([results[1]], [results[1]]), allow_nan=False)


def test_table_without_timestamps_has_no_rates_or_latencies() -> None:
    """time_known False: seek and sizes as usual, no rates, no latencies, LBA by order."""
    from analyzer_helpers import requests

    t = requests([(0, 8, "R", {"D": 0, "C": 1}), (100, 8, "R", {"D": 2, "C": 3})])
    t.time_known = False
    d = analyze(t)["devices"]["8,0"]
    assert d["seek"]["cnt"] == 1 and d["sizes"]["count"] == 2
    assert d["throughput"]["iostat"]["r/s"] is None and d["throughput"]["read_mbps"] == []
    assert d["throughput"]["iostat"]["note"] == "no timestamps"
    assert d["throughput"]["mb_per_s"] is None and d["throughput"]["iops"] is None
    assert d["latency"]["D2C"]["count"] == 0
    assert d["lba"]["x"] == "order" and d["lba"]["t_s"] == [0, 1]
