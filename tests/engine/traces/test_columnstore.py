"""The column store holds an EventTable on disk and gives it back exactly, in chunks; the
stored table file it writes in chunks is byte for byte what EventTable.save writes."""

from __future__ import annotations

import io

import numpy as np
import pytest

from workers.events import COLUMNS, DeviceInfo, EventTable
from workers.traces.columnstore import ColumnStore, ColumnStoreWriter
from workers.traces.synth import realistic_table


def _table() -> EventTable:
    t = realistic_table(5000, seed=3, cpus=3)
    t.comms = [*t.comms, "fio", "kworker/1:2"]
    t.comm = (np.arange(len(t)) % len(t.comms)).astype(np.uint32)
    t.devices = {int(t.dev[0]): DeviceInfo(dev=int(t.dev[0]), name="sdx",
                                           limits={"max_sectors_kb": 512})}
    t.meta = {"format": "blktrace", "genesis_ns": 12345, "files": [{"name": "a"}]}
    return t


@pytest.mark.parametrize("rows", [1, 7, 1000, 100_000])
def test_chunks_give_the_table_back(tmp_path, rows):
    t = _table()
    store = ColumnStore.from_table(t, tmp_path / "s", rows=333)
    assert len(store) == len(t)
    chunks = list(store.chunks(rows=rows))
    assert all(len(c) <= rows for c in chunks)
    back = EventTable.concat(chunks)
    for name, _ in COLUMNS:
        assert np.array_equal(getattr(back, name), getattr(t, name)), name
        assert getattr(back, name).dtype == getattr(t, name).dtype
    assert back.comms == t.comms
    again = ColumnStore(tmp_path / "s")  # reopened from disk
    whole = again.to_table()
    assert whole.meta == t.meta and whole.comms == t.comms and whole.time_known
    assert {d: i.to_json() for d, i in whole.devices.items()} == {
        d: i.to_json() for d, i in t.devices.items()}
    assert np.array_equal(again.column("sector", 10, 20), t.sector[10:20])
    # the .npy files are ordinary numpy files
    assert np.array_equal(np.load(tmp_path / "s" / "time_ns.npy", mmap_mode="r"), t.time_ns)


def test_save_npz_is_byte_compatible_with_eventtable_save(tmp_path):
    t = _table()
    store = ColumnStore.from_table(t, tmp_path / "s")
    a, b = io.BytesIO(), io.BytesIO()
    t.save(a)
    store.save_npz(b, rows=777)  # several chunks per column
    assert a.getvalue() == b.getvalue()
    loaded = EventTable.load(io.BytesIO(b.getvalue()))
    for name, _ in COLUMNS:
        assert np.array_equal(getattr(loaded, name), getattr(t, name)), name


def test_empty_store_and_row_count_checks(tmp_path):
    store = ColumnStore.from_table(EventTable.empty(), tmp_path / "e")
    assert len(store) == 0 and [len(c) for c in store.chunks()] == [0]
    a, b = io.BytesIO(), io.BytesIO()
    EventTable.empty().save(a)
    store.save_npz(b)
    assert a.getvalue() == b.getvalue()
    w = ColumnStoreWriter(tmp_path / "w", 3)
    with pytest.raises(ValueError):
        w.append({n: np.zeros(4) for n, _ in COLUMNS})
    w.append({n: np.zeros(2) for n, _ in COLUMNS})
    with pytest.raises(ValueError):
        w.close(comms=["(null)"])  # 2 of 3 rows
    assert not (tmp_path / "w" / "table.json").exists()


def _same(a: EventTable, b: EventTable) -> None:
    for name, _ in COLUMNS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert getattr(a, name).dtype == getattr(b, name).dtype, name
    assert a.comms == b.comms and a.meta == b.meta and a.time_known == b.time_known
    assert {d: i.to_json() for d, i in a.devices.items()} == {
        d: i.to_json() for d, i in b.devices.items()}


@pytest.mark.parametrize("rows", [1, 999, 5000, 100_000])
def test_stored_table_reads_the_npz_in_chunks_as_load_reads_it(tmp_path, rows):
    """StoredTable (the comparison step's reader) gives EventTable.load's table back from the
    .npz member by member: whole, as chunks of any size, as its first rows, or some columns
    only (the others zero)."""
    from workers.traces.columnstore import StoredTable

    t = _table()
    path = tmp_path / "t.npz"
    t.save(path)
    loaded = EventTable.load(path)
    st = StoredTable(path)
    assert len(st) == len(t) == 5000
    _same(st.to_table(), loaded)
    chunks = list(st.chunks(rows=rows))
    assert [len(c) for c in chunks] == [min(rows, 5000 - i) for i in range(0, 5000, rows)]
    for i, c in zip(range(0, 5000, rows), chunks, strict=True):
        _same(c, loaded.take(np.arange(i, min(i + rows, 5000))))
    _same(st.head(1234), loaded.take(np.arange(1234)))
    part = next(iter(st.chunks(rows=rows, columns=["sector", "action"])))
    assert np.array_equal(part.sector, t.sector[:rows]) and not part.time_ns.any()
    assert len(st.head(0)) == 0 and len(st.head(10**9)) == 5000


def test_stored_table_of_an_empty_table_and_of_older_files(tmp_path):
    """An empty table gives one empty chunk; a file without some columns (an older table) reads
    them as zeros, as EventTable.load does; unequal columns are refused."""
    from workers.events import table_header, write_npz
    from workers.traces.columnstore import StoredTable

    EventTable.empty().save(tmp_path / "e.npz")
    st = StoredTable(tmp_path / "e.npz")
    assert len(st) == 0 and [len(c) for c in st.chunks()] == [0]
    t = _table()
    head = table_header(t.comms, t.devices, t.time_known, t.meta)
    write_npz(tmp_path / "old.npz", [("time_ns", t.time_ns), ("sector", t.sector),
                                     ("__header__", head)])
    _same(StoredTable(tmp_path / "old.npz").to_table(), EventTable.load(tmp_path / "old.npz"))
    write_npz(tmp_path / "bad.npz", [("time_ns", t.time_ns), ("sector", t.sector[:9]),
                                     ("__header__", head)])
    with pytest.raises(ValueError, match="different lengths"):
        StoredTable(tmp_path / "bad.npz")
