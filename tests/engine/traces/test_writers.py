"""Writers: EventTable -> blktrace binary / blkparse text, read back by our parsers."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workers.events import (
    ACT_COMPLETE,
    ACT_MESSAGE,
    ACT_REMAP,
    ACT_REQUEUE,
    ACT_SPLIT,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    EventTable,
    make_dev,
    rwbs_from_text,
)
from workers.traces.blkparse_text import parse_blkparse_text
from workers.traces.blktrace_bin import merge_raw, parse_blktrace_bytes
from workers.traces.writers import encode_blktrace, write_blkparse

ACTIONS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
RWBS = ["R", "W", "WS", "FWS", "FWFSM", "D", "RA", "RM", "RS", "WFS", "N"]


@st.composite
def tables(draw: st.DrawFn) -> EventTable:
    """Random valid tables: time-ordered, per-(dev, cpu) sequences, one comm per pid."""
    n = draw(st.integers(1, 40))
    devs = [make_dev(8, 0), make_dev(259, 3), make_dev(4095, 1048575)]
    pids = draw(st.lists(st.integers(1, 2**31), min_size=1, max_size=4, unique=True))
    comm_of = {p: f"task-{i} x" for i, p in enumerate(pids)}
    rows = []
    t = draw(st.integers(0, 10**12))
    for _ in range(n):
        t += draw(st.integers(1, 10**9))
        act = draw(st.sampled_from(ACTIONS))
        pid = draw(st.sampled_from([0, *pids]))
        nr = draw(st.integers(0, 2**22))
        rw = draw(st.sampled_from(RWBS))
        bits = rwbs_from_text(rw)
        if nr == 0 and rw in ("R", "RA", "RM", "RS"):
            bits = rwbs_from_text("N")  # blkparse prints N for zero-length reads
        if nr and rw == "N":
            bits = rwbs_from_text("R")
        rows.append(dict(
            time_ns=t, dev=draw(st.sampled_from(devs)), cpu=draw(st.integers(0, 3)), pid=pid,
            action=act, rwbs=bits, sector=draw(st.integers(0, 2**63)), nr_sectors=nr,
            aux=(draw(st.integers(0, 2**64 - 1)) if act == ACT_SPLIT else
                 draw(st.integers(0, 2**32 - 1)) if act in (ACT_UNPLUG_IO, ACT_UNPLUG_TIMER)
                 else draw(st.integers(0, 2**64 - 1)) if act == ACT_REMAP else 0),
            aux2=draw(st.sampled_from(devs)) if act == ACT_REMAP else 0,
            error=draw(st.integers(-32768, 32767)) if act in (ACT_COMPLETE, ACT_REQUEUE) else 0,
            comm=pids.index(pid) + 1 if pid else 0))
    cols = {k: [r[k] for r in rows] for k in rows[0]}
    table = EventTable(cols, comms=["(null)", *comm_of.values()])
    seq = np.zeros(n, dtype=np.uint32)
    counters: dict[tuple[int, int], int] = {}
    for i in range(n):
        key = (int(table.dev[i]), int(table.cpu[i]))
        counters[key] = counters.get(key, 0) + 1
        seq[i] = counters[key]
    table.seq = seq
    return table


def _comm_strings(t: EventTable) -> list[str]:
    return [t.comms[i] for i in t.comm]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.booleans())
def test_binary_roundtrip(table: EventTable, big_endian: bool) -> None:
    """parse(encode(t)) == t in every column, times relative to the first event."""
    back = merge_raw([parse_blktrace_bytes(encode_blktrace(table, big_endian=big_endian))])
    expect_time = table.time_ns - table.time_ns.min()
    np.testing.assert_array_equal(back.time_ns, expect_time)
    for col in ("seq", "dev", "cpu", "pid", "action", "rwbs", "sector", "nr_sectors", "aux",
                "aux2", "error"):
        np.testing.assert_array_equal(getattr(back, col), getattr(table, col), err_msg=col)
    assert _comm_strings(back) == _comm_strings(table)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_text_roundtrip(table: EventTable) -> None:
    """write_blkparse then the text parser gives the printed fields back."""
    out = io.StringIO()
    write_blkparse(table, out)
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "t.txt"
        p.write_text(out.getvalue())
        back = parse_blkparse_text(p)
    assert len(back) == len(table)
    for col in ("time_ns", "seq", "dev", "cpu", "pid", "action", "rwbs", "aux2"):
        np.testing.assert_array_equal(getattr(back, col), getattr(table, col), err_msg=col)
    # X prints "sector / new", P and U/UT print no request at all
    printed_size = ~np.isin(table.action, [ACT_SPLIT, 9, ACT_UNPLUG_IO, ACT_UNPLUG_TIMER])
    np.testing.assert_array_equal(back.nr_sectors[printed_size], table.nr_sectors[printed_size])
    always = np.isin(table.action, [ACT_COMPLETE, ACT_REQUEUE, ACT_SPLIT, ACT_REMAP])
    queue_family = np.isin(table.action, [1, 2, 3, 4, 5, 7, 12, 14])
    shown = always | (queue_family & (table.nr_sectors > 0))
    np.testing.assert_array_equal(back.sector[shown], table.sector[shown])
    np.testing.assert_array_equal(back.aux[always], table.aux[always])
    errs = np.isin(table.action, [ACT_COMPLETE, ACT_REQUEUE])
    np.testing.assert_array_equal(back.error[errs], table.error[errs])


def test_message_rows_roundtrip() -> None:
    """Message rows become BLK_TN_MESSAGE notes and come back with their text."""
    t = EventTable({"time_ns": [0, 10], "action": [ACT_MESSAGE, 1], "dev": [make_dev(8, 0)] * 2,
                    "rwbs": [8, 1], "nr_sectors": [0, 8], "seq": [0, 1], "pid": [0, 5],
                    "comm": [1, 2]}, comms=["(null)", "odd len", "fio"])
    back = merge_raw([parse_blktrace_bytes(encode_blktrace(t))])
    assert _comm_strings(back) == ["odd len", "fio"]
    assert back.action.tolist() == [ACT_MESSAGE, 1]
