"""md geometry a capture states outside its manifest: md-linear member sizes (linear_conf).

Known answers from the kernel rule: ``rdev->sectors`` of a v1.x superblock is its data_size
(``mdadm --examine``'s Avail Dev Size); ``linear_conf`` rounds it down to whole chunks when the
array has a chunk; ``which_dev`` moves to member i+1 at the running sum of the sizes.
"""

import numpy as np
from model_helpers import d_stream

from workers.events import RWBS_WRITE
from workers.fidelity import score_capture
from workers.model import (
    BioStream,
    bios_from_table,
    preset_for_kernel,
    replay,
    stack_from_manifest,
)
from workers.model.stack import md_member_sizes

EXAMINE = """/dev/vda:
          Magic : a92b4efc
     Raid Level : linear
 Avail Dev Size : 2093056 sectors (1022.00 MiB 1071.64 MB)
    Data Offset : 4096 sectors
"""


def test_avail_dev_size_is_each_members_size():
    assert md_member_sizes(EXAMINE, ["vda", "vdb"]) == (2093056, 2093056)


def test_unexamined_member_gets_what_the_array_size_leaves():
    assert md_member_sizes(EXAMINE, ["vda", "vdb"], array_sectors=2093056 + 1000) == \
        (2093056, 1000)


def test_chunk_rounding_of_linear_conf():
    assert md_member_sizes(EXAMINE, ["vda"], chunk_sectors=128) == (2093056 - 2093056 % 128,)


def test_no_size_named_gives_nothing():
    assert md_member_sizes("/dev/vda:\n  Raid Level : linear\n", ["vda"]) == ()


def test_linear_bios_cross_to_the_second_member_at_its_end_sector():
    """1 MiB reads from 2048000 on 2 x 2093056: 22 on vda (+4096 data offset), then vdb from 4096."""
    stack = stack_from_manifest({"stack": {"top": "9,0", "kind": "linear",
                                           "members": ["254,0", "254,16"],
                                           "data_offset_sectors": 4096,
                                           "sizes_sectors": [2093056, 2093056]}})
    n = 40
    bios = BioStream.from_arrays([2048000 + 2048 * i for i in range(n)], [2048] * n,
                                 plug=[-1 - i for i in range(n)])
    got = d_stream(replay(bios, stack, preset_for_kernel("6.1")))
    on_a = [(s, nr) for d, s, nr in got if d == "254,0"]
    on_b = [(s, nr) for d, s, nr in got if d == "254,16"]
    assert on_a == [(2048000 + 4096 + 2048 * i, 2048) for i in range(22)]
    assert on_b == [(4096 + 2048 * i, 2048) for i in range(18)]


def test_fidelity_reads_the_linear_sizes_from_the_capture(tmp_path):
    """A capture directory whose manifest lacks sizes_sectors: md_examine.txt supplies them."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "data" / "fidelity" / \
        "6.1.0-57-amd64" / "linear_d2_dd1M"
    if not src.is_dir():  # the regression subset holds it; see test_fidelity_regression
        import pytest
        pytest.skip("regression capture not present")
    s = score_capture(src)
    assert s.score is not None and s.score > 0.99


# --- memory layout from the top device's X events (bio_split_to_limits / bvec_split_segs) ---

def _trace_with_split(first: int, nr: int = 2048):
    """One 1 MiB write on md0 (Q) that the trace shows cut at ``first`` sectors (X)."""
    import numpy as np

    from workers.events import ACT_QUEUE, ACT_SPLIT, EventTable, make_dev

    top = make_dev(9, 0)
    table = EventTable.from_columns(
        time_ns=np.array([0, 1000], np.int64), dev=np.array([top, top], np.int64),
        action=np.array([ACT_QUEUE, ACT_SPLIT], np.int64), sector=np.array([0, 0], np.int64),
        nr_sectors=np.array([nr, first], np.int64), rwbs=np.array([RWBS_WRITE] * 2, np.int64),
        pid=np.array([7, 7], np.int64), aux=np.array([0, first], np.int64))
    return table, top


R1 = {"stack": {"top": "9,0", "kind": "raid1", "members": ["254,0", "254,16"]},
      "limits": {k: {"max_sectors_kb": "4096", "max_segments": "254"}
                 for k in ("9,0", "254,0", "254,16")}}


def test_a_cut_at_254_pages_replays_the_bio_as_scattered_pages():
    """max_sectors 8192, max_segments 254, a 2048-sector write cut at 2032 (= 254 x 4 KiB):
    not a size split, so pages were apart; members get 2032 + 16 like the top device."""
    table, top = _trace_with_split(2032)
    bios = bios_from_table(table, top)
    got = d_stream(replay(bios, stack_from_manifest(R1), preset_for_kernel("7.2")))
    assert [(s, n) for d, s, n in got if d == "254,0"] == [(0, 2032), (2032, 16)]


def test_no_split_in_the_trace_keeps_the_buffer_contiguous():
    table, top = _trace_with_split(2032)
    keep = table.action == table.action[0]  # the Q alone
    table = table.take(np.flatnonzero(keep))
    got = d_stream(replay(bios_from_table(table, top), stack_from_manifest(R1),
                          preset_for_kernel("7.2")))
    assert [(s, n) for d, s, n in got if d == "254,0"] == [(0, 2048)]


def test_a_cut_the_size_limits_explain_says_nothing_about_memory():
    """max_sectors_kb 512 cuts at 1024: the replay keeps seg_bytes 0 and splits by size."""
    lim = {k: {"max_sectors_kb": "512", "max_segments": "254"} for k in ("9,0", "254,0", "254,16")}
    man = {**R1, "limits": lim}
    table, top = _trace_with_split(1024)
    got = d_stream(replay(bios_from_table(table, top), stack_from_manifest(man),
                          preset_for_kernel("7.2")))
    assert [(s, n) for d, s, n in got if d == "254,0"] == [(0, 1024), (1024, 1024)]


# --- md's own superblock writes (md_write_start -> md_update_sb -> md_super_write) -------------

def test_flush_policy_of_a_superblock_write():
    """blk_flush_policy: write-back cache without FUA: flush, data (no F bits), flush; with FUA:
    flush, data with FUA; write-through: the data alone."""
    from workers.events import RWBS_FLUSH, RWBS_FUA, RWBS_META, RWBS_SYNC
    from workers.model.replay import flush_sequence

    rw = RWBS_WRITE | RWBS_SYNC | RWBS_META | RWBS_FLUSH | RWBS_FUA
    plain = RWBS_WRITE | RWBS_SYNC | RWBS_META
    assert flush_sequence(rw, True, False) == (True, plain, True)
    assert flush_sequence(rw, True, True) == (True, plain | RWBS_FUA, False)
    assert flush_sequence(rw, False, False) == (False, plain, False)


def _md_write_trace(n_writes: int, *, clean_again: bool):
    """Writes of 1 MiB on a 2-disk raid1 (Q on md0 at 0, 10, 20 ms ...); the superblock write
    at sector 8 shows on each member as Q FWFSM at 1 ms (mark dirty) and, with
    ``clean_again``, 200 ms after the last write (mark clean)."""
    from workers.events import (
        ACT_QUEUE,
        RWBS_FLUSH,
        RWBS_FUA,
        RWBS_META,
        RWBS_SYNC,
        EventTable,
        make_dev,
    )

    top, a, b = make_dev(9, 0), make_dev(254, 0), make_dev(254, 16)
    sb = RWBS_WRITE | RWBS_SYNC | RWBS_META | RWBS_FLUSH | RWBS_FUA
    rows = [(i * 10_000_000, top, i * 2048, 2048, RWBS_WRITE | RWBS_SYNC) for i in range(n_writes)]
    rows += [(1_000_000, d, 8, 1, sb) for d in (a, b)]
    if clean_again:
        rows += [((n_writes - 1) * 10_000_000 + 200_000_000, d, 8, 1, sb) for d in (a, b)]
    rows.sort(key=lambda r: r[0])
    col = lambda k: np.array([r[k] for r in rows], np.int64)  # noqa: E731
    table = EventTable.from_columns(time_ns=col(0), dev=col(1),
                                    action=np.full(len(rows), ACT_QUEUE, np.int64),
                                    sector=col(2), nr_sectors=col(3), rwbs=col(4),
                                    pid=np.full(len(rows), 7, np.int64))
    return table, top


R1_WB = {"stack": {"top": "9,0", "kind": "raid1", "members": ["254,0", "254,16"]},
         "limits": {k: {"write_cache": "write back", "fua": "0"} for k in ("254,0", "254,16")}}


def test_mark_dirty_goes_before_the_first_write_and_mark_clean_after_the_last():
    table, top = _md_write_trace(3, clean_again=True)
    got = d_stream(replay(bios_from_table(table, top), stack_from_manifest(R1_WB),
                          preset_for_kernel("6.1")))
    sb = [(0, 0), (8, 1), (0, 0)]
    data = [(i * 2048, 2048) for i in range(3)]
    for dev in ("254,0", "254,16"):
        assert [(s, n) for d, s, n in got if d == dev] == sb + data + sb


def test_write_through_members_get_the_superblock_without_flushes():
    table, top = _md_write_trace(2, clean_again=False)
    man = {**R1_WB, "limits": {k: {"write_cache": "write through"} for k in ("254,0", "254,16")}}
    got = d_stream(replay(bios_from_table(table, top), stack_from_manifest(man),
                          preset_for_kernel("6.1")))
    assert [(s, n) for d, s, n in got if d == "254,0"] == [(8, 1), (0, 2048), (2048, 2048)]


def test_a_segment_cut_no_page_layout_explains_is_replayed_where_the_trace_made_it():
    """2048 sectors cut at 2040 (255 pages in 254 segments: two pages were adjacent) on a
    bio-based md0: the front and the resubmitted remainder go down as the trace shows."""
    table, top = _trace_with_split(2040)
    got = d_stream(replay(bios_from_table(table, top), stack_from_manifest(R1),
                          preset_for_kernel("6.18")))
    assert [(s, n) for d, s, n in got if d == "254,16"] == [(0, 2040), (2040, 8)]


def test_a_cut_shorter_than_max_segments_pages_is_not_a_segment_cut():
    """A cut at 1000 sectors (125 pages < 254 segments) is no max_segments cut: ignored."""
    table, top = _trace_with_split(1000)
    got = d_stream(replay(bios_from_table(table, top), stack_from_manifest(R1),
                          preset_for_kernel("6.18")))
    assert [(s, n) for d, s, n in got if d == "254,16"] == [(0, 2048)]
