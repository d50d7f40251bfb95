"""EventTable: the one table every parser, the model and every analyzer share."""

import io

import numpy as np
import pytest

from workers.events import (
    ACT_ISSUE,
    ACT_QUEUE,
    BYTES_PER_EVENT,
    NULL_COMM,
    RWBS_READ,
    RWBS_WRITE,
    EventTable,
    dev_str,
    make_dev,
    parse_dev,
    rwbs_from_text,
    rwbs_to_text,
)

SDA = make_dev(8, 0)
SDB = make_dev(8, 16)


def test_dev_t_uses_twenty_minor_bits():
    """major << 20 | minor, as the kernel's MKDEV, round-trips through the text spelling."""
    assert make_dev(8, 16) == (8 << 20) | 16
    assert dev_str(make_dev(259, 3)) == "259,3"
    assert parse_dev("254,112") == make_dev(254, 112)
    assert parse_dev("9:0") == make_dev(9, 0)


@pytest.mark.parametrize("text", ["xyz", "8", "8,0,1", "8,-1", "a,b", "4096,0", "8,1048576"])
def test_parse_dev_refuses_what_is_not_a_dev_t(text: str) -> None:
    """Malformed or out-of-range MAJOR,MINOR is a ValueError naming the text, never masked."""
    with pytest.raises(ValueError, match="bad device"):
        parse_dev(text)


def test_table_stays_under_64_bytes_per_event():
    """The issue's memory budget: at most 64 bytes per event, no per-event objects."""
    t = EventTable.from_columns(sector=np.arange(1000, dtype=np.uint64))
    assert BYTES_PER_EVENT <= 64
    assert t.nbytes == 1000 * BYTES_PER_EVENT


def test_missing_columns_are_zero_filled_and_lengths_checked():
    """Columns not given are zeros; columns of different lengths are refused."""
    t = EventTable.from_columns(sector=[1, 2], nr_sectors=[8, 8])
    assert t.pid.tolist() == [0, 0]
    with pytest.raises(ValueError, match="rows"):
        EventTable.from_columns(sector=[1, 2], nr_sectors=[8])
    with pytest.raises(ValueError, match="unknown"):
        EventTable({"bogus": [1]})


def test_stage_falls_back_from_d_to_i_g_q():
    """A device with no D events is analyzed at the next stage, and the stage is named."""
    t = EventTable.from_columns(
        dev=[SDA, SDA, SDB, SDB],
        action=[ACT_QUEUE, ACT_ISSUE, ACT_QUEUE, ACT_QUEUE],
        sector=[0, 0, 8, 16],
    )
    assert t.stage(SDA)[0] == "D"
    stage, rows = t.stage(SDB)
    assert stage == "Q" and rows.tolist() == [2, 3]
    assert t.stage(SDB, "D")[1].size == 0
    assert t.stage(make_dev(1, 1)) == (None, pytest.approx(np.empty(0)))


def test_npz_round_trip_keeps_columns_comms_and_devices():
    """A parsed table is stored once as .npz and loaded unchanged for every analysis."""
    t = EventTable({"sector": [5, 6], "comm": [1, 2], "dev": [SDA, SDA]},
                   comms=[NULL_COMM, "dd", "kworker/0:1"], meta={"kernel": "6.1"})
    buf = io.BytesIO()
    t.save(buf)
    buf.seek(0)
    back = EventTable.load(buf)
    for name, col in t.columns().items():
        assert np.array_equal(getattr(back, name), col), name
        assert getattr(back, name).dtype == col.dtype
    assert [back.comm_of(i) for i in range(2)] == ["dd", "kworker/0:1"]
    assert back.meta == {"kernel": "6.1"}


def test_npz_is_written_in_chunks_and_old_files_still_load(monkeypatch):
    """``save`` writes the columns in slices (deflate level 1) and ``np.load`` reads them; a
    file written the old way (``np.savez_compressed``) loads the same."""
    import json

    import workers.events as events
    from workers.traces.synth import realistic_table

    monkeypatch.setattr(events, "NPZ_CHUNK_BYTES", 4096)  # many slices per column
    t = realistic_table(20_000, seed=5)
    new = io.BytesIO()
    t.save(new)
    old = io.BytesIO()
    header = {"version": 1, "comms": t.comms, "devices": [], "time_known": True,
              "meta": t.meta}
    np.savez_compressed(old, **t.columns(),
                        __header__=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
    for buf in (new, old):
        buf.seek(0)
        back = EventTable.load(buf)
        for name, col in t.columns().items():
            assert getattr(back, name).dtype == col.dtype
            assert np.array_equal(getattr(back, name), col), name
        assert back.comms == t.comms
    new.seek(0)
    with np.load(new) as npz:
        assert sorted(npz.files) == sorted([*t.columns(), "__header__"])


def test_concat_remaps_comm_indices():
    """Two tables with their own string tables merge into one consistent table."""
    a = EventTable({"comm": [1]}, comms=[NULL_COMM, "dd"])
    b = EventTable({"comm": [1, 0]}, comms=[NULL_COMM, "fio"])
    merged = EventTable.concat([a, b])
    assert [merged.comm_of(i) for i in range(3)] == ["dd", "fio", NULL_COMM]


def test_sorted_by_time_is_blkparse_merge_order():
    """Rows from several CPU files merge by (time, device, cpu, sequence)."""
    t = EventTable.from_columns(time_ns=[5, 1, 5, 1], cpu=[1, 0, 0, 1], seq=[9, 1, 2, 1],
                                sector=[10, 20, 30, 40])
    assert t.sorted_by_time().sector.tolist() == [20, 40, 30, 10]


@pytest.mark.parametrize("text", ["R", "W", "WS", "RA", "RM", "WSM", "WFS", "FWS", "D", "N", "FWFS"])
def test_rwbs_round_trips_blkparse_spellings(text):
    """Every RWBS spelling blkparse prints maps to bits and back unchanged."""
    assert rwbs_to_text(rwbs_from_text(text)) == text


def test_rwbs_direction_bits():
    """Direction letters set the read/write bits analyzers split on."""
    assert rwbs_from_text("RS") & RWBS_READ
    assert rwbs_from_text("WS") & RWBS_WRITE
    with pytest.raises(ValueError):
        rwbs_from_text("RQ")
