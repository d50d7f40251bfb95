"""The chunked analysis (workers/analyzers/stream.py): ``analyze_chunks`` over any cut of a
table into time-ordered chunks returns exactly ``analyze`` of the table (the whole results
JSON), its pairing is StageMatcher's, and its memory follows the chunk, not the table."""

from __future__ import annotations

import glob
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from workers.analyzers import AnalyzeConfig, analyze
from workers.analyzers.common import MATCH_STAGES, StageMatcher, device_rows
from workers.analyzers.config import LINEAGE_LIMIT
from workers.analyzers.latency import latencies
from workers.analyzers.lineage import lineage
from workers.analyzers.occupancy import occupancy
from workers.analyzers.stream import KeyedEvents, PairStream, analyze_chunks, table_chunks
from workers.analyzers.throughput import iostat_row
from workers.events import ACTION_CODES, DeviceInfo, EventTable, make_dev
from workers.traces import ingest
from workers.traces.synth import all_actions_table, realistic_table

DATA = Path(__file__).resolve().parents[2] / "data"


def _chunked(table: EventTable, rows: int):
    """Chunks of ``rows`` rows of the table in time order (as the merged table is: a parsed
    text file may hold lines out of order; ``analyze`` orders them the same way)."""
    t = table.time_ns
    if table.time_known and len(t) > 1 and not bool(np.all(t[1:] >= t[:-1])):
        table = table.take(np.argsort(t, kind="stable"))
    return lambda: table_chunks(table, rows)


def _same(table: EventTable, rows: int, config: AnalyzeConfig | None = None) -> None:
    want = json.dumps(analyze(table, config=config), sort_keys=True)
    got = json.dumps(analyze_chunks(_chunked(table, rows), config=config), sort_keys=True)
    assert got == want, f"{rows}-row chunks differ"


def _with_flushes(table: EventTable, every: int = 37) -> EventTable:
    """Zero-length (flush) requests at Q and D among the rows."""
    t = table.take(np.arange(len(table)))
    rows = np.arange(0, len(t), every)
    t.nr_sectors[rows[::2]] = 0
    t.action[rows[1::2]] = ACTION_CODES["Q"]
    t.nr_sectors[rows[1::2]] = 0
    return t


def _late_device(table: EventTable) -> EventTable:
    """A device that appears only in the last tenth of the trace."""
    t = table.take(np.arange(len(table)))
    late = np.arange(len(t)) > 9 * len(t) // 10
    t.dev[late & (t.dev == t.dev[0])] = make_dev(8, 64)
    return t


def _ties(table: EventTable) -> EventTable:
    """Times rounded to 20 us: many events share an instant (chunk edges fall inside)."""
    t = table.take(np.arange(len(table)))
    t.time_ns[:] = t.time_ns // 20_000 * 20_000
    return t


def _untimed(table: EventTable) -> EventTable:
    return EventTable(table.columns(), comms=table.comms, devices=table.devices,
                      time_known=False, meta=table.meta)


def _manifest_devices(table: EventTable) -> EventTable:
    """Names and limits from a manifest, and a device named there that has no events."""
    devices = {make_dev(8, 0): DeviceInfo(make_dev(8, 0), "sda", {"max_sectors_kb": 512}),
               make_dev(8, 16): DeviceInfo(make_dev(8, 16), "sdb", {"chunk_kb": 64}),
               make_dev(8, 96): DeviceInfo(make_dev(8, 96), "sdg")}
    return EventTable(table.columns(), comms=table.comms, devices=devices,
                      time_known=table.time_known, meta=table.meta)


def _ingest(*patterns: str) -> EventTable:
    files = sorted(f for p in patterns for f in glob.glob(str(DATA / p)))
    assert files, patterns
    return ingest(files).table


SMALL = {
    "all_actions": all_actions_table,
    "realistic_4dev": lambda: realistic_table(700, seed=2, cpus=3, devices=4),
    "flushes_ties": lambda: _ties(_with_flushes(realistic_table(600, seed=4))),
    "untimed": lambda: _untimed(realistic_table(500, seed=6, devices=3)),
    "seed001_ftrace": lambda: _ingest("seeds/001_ftrace_excerpt.txt"),
    "manifest_devices": lambda: _manifest_devices(realistic_table(400, seed=17, devices=2)),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_one_row_chunks_equal_the_whole_table(name: str) -> None:
    """Chunks of 1 and 7 rows: every carry (previous request, pending pairs, sandwiched
    neighbours, LBA slices, sweep instants) crosses a chunk edge."""
    table = SMALL[name]()
    for rows in (1, 7):
        _same(table, rows)
    _same(table, 7, AnalyzeConfig(stage="Q", first_n=2, lba_max_points=5, time_bins=9))


LARGER = {
    "realistic_3dev_4cpu": lambda: realistic_table(40_000, seed=3, cpus=4, devices=3),
    "late_device": lambda: _late_device(realistic_table(20_000, seed=8, devices=2)),
    "ties_flushes": lambda: _ties(_with_flushes(realistic_table(20_000, seed=9))),
    "untimed": lambda: _untimed(realistic_table(15_000, seed=10)),
    "lab_raid5": lambda: _ingest("lab/guest_output/cases/raid5_dd_1/*.blktrace.*"),
    "lab_raid10": lambda: _ingest(
        "lab/matrix/evaluation/7.3.4+deb13-amd64/r10f2_d4_c128_dd512k/*.blktrace.*"),
    "k61_vda": lambda: _ingest("traces/k61_vda.blktrace.*.xz"),
    "takeoverjp": lambda: _ingest("traces/takeoverjp.blktrace.xz"),
    "ftrace": lambda: _ingest("traces/ftrace_linux6.18.txt"),
    "seed000_g": lambda: _ingest("seeds/seed000_g_stage.txt"),
}

CONFIGS = (
    AnalyzeConfig(),
    AnalyzeConfig(stage="G", first_n=0, lba_max_points=1),
    AnalyzeConfig(stage="C", devices=("8,0", "8,16", "253,0"), lba_max_points=64,
                  time_bins=13, percentiles=(1.0, 50.0, 99.9), max_sectors=1024,
                  chunk_sectors=128),
)


@pytest.mark.parametrize("name", sorted(LARGER))
def test_chunked_analysis_equals_the_whole_table(name: str) -> None:
    """Several chunk sizes (one larger than the table) and configurations."""
    table = LARGER[name]()
    for rows in (97, 4096, len(table) + 5):
        _same(table, rows)
    for config in CONFIGS[1:]:
        _same(table, 1000, config)


def test_lineage_limit_reached_inside_a_chunk() -> None:
    """More issues than LINEAGE_LIMIT: the records stop at the same issue and the pairs of
    the last ones (their C in a later chunk) are found."""
    table = realistic_table(150_000, seed=12, devices=2)
    assert int(np.count_nonzero(table.action == ACTION_CODES["D"])) > LINEAGE_LIMIT
    _same(table, 30_001)


def test_pairing_is_stage_matchers() -> None:
    """The sections that pair events (latencies, iostat, occupancy, lineage) equal the
    whole-table StageMatcher's, with chunks cut through unfinished requests."""
    table = _ties(realistic_table(9000, seed=13, cpus=4, devices=2))
    res = analyze_chunks(_chunked(table, 333))
    matcher = StageMatcher(table)
    t0, bin_ns, nbins = res["t0_ns"], res["bin_ns"], res["nbins"]
    for d in table.device_ids():
        key = f"{d >> 20},{d & 0xFFFFF}"
        got = res["devices"][key]
        assert got["latency"] == latencies(table, d, matcher, (50.0, 90.0, 99.0))
        assert got["occupancy"] == occupancy(table, d, matcher, t0, bin_ns, nbins)
        assert got["throughput"]["iostat"] == iostat_row(table, d, matcher, res["span_ns"],
                                                         dev_rows=device_rows(table, d))
    assert res["lineage"] == lineage(table, matcher, limit=LINEAGE_LIMIT)


def test_pair_stream_carries_only_takeable_events() -> None:
    """An A followed by its B is not carried; a superseded A is dropped; the last A of a
    key without a B waits (and is taken by the first B chunks later)."""
    ps = PairStream("D", "C")
    d, c = MATCH_STAGES.index("D"), MATCH_STAGES.index("C")

    def ev(*events):  # (key, letter, time, ordinal, row), already in key order
        cols = list(zip(*events)) or [(), (), (), (), ()]
        return KeyedEvents(np.array(cols[0], np.uint64), np.zeros(len(events), np.int64),
                           np.array(cols[1], np.uint8), np.array(cols[2], np.int64),
                           np.array(cols[3], np.int64), np.array(cols[4], np.int64))

    # chunk 1: D then C of key 1; two Ds of key 2, the first superseded by the second
    p = ps.step(ev((1, d, 10, 0, 0), (1, c, 11, 0, 1), (2, d, 12, 1, 2), (2, d, 13, 2, 3)))
    assert p.time_a.tolist() == [10] and p.time_b.tolist() == [11]
    assert ps.time.tolist() == [13]  # only the later D of key 2 waits
    p = ps.step(ev())
    assert len(p.time_a) == 0 and ps.time.tolist() == [13]
    p = ps.step(ev((2, c, 20, 1, 0), (2, c, 21, 2, 1)))  # two Cs: the first takes it
    assert p.time_a.tolist() == [13] and p.time_b.tolist() == [20] and p.ord_a.tolist() == [2]
    assert p.row_b.tolist() == [0] and len(ps.time) == 0


def test_chunks_out_of_time_order_are_refused() -> None:
    table = realistic_table(2000, seed=14)
    chunks = list(table_chunks(table, 500))
    with pytest.raises(ValueError, match="time order"):
        analyze_chunks(lambda: iter(chunks[::-1]))


def test_no_chunks_is_the_empty_table() -> None:
    want = json.dumps(analyze(EventTable.empty()), sort_keys=True)
    assert json.dumps(analyze_chunks(lambda: iter(())), sort_keys=True) == want


def test_memory_follows_the_chunk_not_the_table() -> None:
    """Peak traced memory of analyze_chunks over a 2M-event, 2-device table in 200k-row chunks.

    The table is built before tracing starts (a column store holds it on disk) and handed out
    as views, so the chunks cost nothing here: what is measured is the analysis.

    Per chunk row (pass 2, the largest): the matcher's inputs per stage letter (rows, key,
    time, ordinal, high device bits: 40 bytes for each of the 10/13 rows with a Q/G/I/D/C
    event, 31 bytes a chunk row), the device index and completion starts (16 bytes), and one
    stage pair's combined arrays at a time (~120 bytes for each of its events, the largest
    pairs 4/13 of the rows: 37 bytes a chunk row): ~85 bytes a chunk row, 17 MB for 200k rows
    (measured: 28.7, 37.0, 54.4 MB peaks for 100k, 200k, 400k-row chunks of this table).
    Independent of the table's length: the lineage pairs and rows of LINEAGE_LIMIT issues
    (~8 MB), the accumulators (LBA candidates, squashed value -> count maps: a few MB).
    Growing with it: two bits per paired event (~0.3 MB here) and the value -> count maps
    (realistic_table's latencies and seeks repeat: 1.0 -> 2.0M events adds ~1.4 MB).
    So ~35 MB; the bound, 48 MB, fails as soon as any pass holds one int64 per event
    (16 MB) or the chunk size doubles, while the table alone is 2M x 55 bytes = 110 MB.
    """
    table = realistic_table(2_000_000, seed=15, cpus=4, devices=2)
    tracemalloc.start()
    try:
        res = analyze_chunks(_chunked(table, 200_000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res["events"] == len(table)
    assert peak < 48 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"


def test_value_counts_of_batches_equal_numpy_unique() -> None:
    """Batches squashed, kept raw (mostly distinct), 32-bit and full 64-bit values alike."""
    from workers.analyzers.common import ValueCounts

    rng = np.random.default_rng(16)
    cases = (rng.integers(0, 1 << 40, 300_000), rng.integers(-5, 5, 200_000),
             rng.integers(0, 1000, 500_000), np.array([2**63 - 1, -2**63, 0, 7, 7]))
    for values in cases:
        vc = ValueCounts()
        for part in np.array_split(values, 7):
            vc.add(part)
        got_v, got_c = vc.finish()
        want_v, want_c = np.unique(values, return_counts=True)
        assert got_v.tolist() == want_v.tolist() and got_c.tolist() == want_c.tolist()
        assert vc.total == len(values)


def test_column_store_chunks_equal_the_whole_table(tmp_path) -> None:
    """The chunks a column store on disk hands out (workers.traces.columnstore: copies of
    the comms, devices and meta per chunk) meet the preconditions: the same results."""
    from workers.traces.columnstore import ColumnStore

    table = _manifest_devices(_ties(realistic_table(30_000, seed=18, cpus=4, devices=2)))
    store = ColumnStore.from_table(table, tmp_path / "store")
    want = json.dumps(analyze(table), sort_keys=True)
    for rows in (4_999, 1 << 22):
        got = analyze_chunks(lambda rows=rows: store.chunks(rows))
        assert json.dumps(got, sort_keys=True) == want
