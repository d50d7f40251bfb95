"""Regression subset of the lab's fidelity matrix (tests/data/fidelity, a copy of some cells of
the lab's matrix directory with its index.json): each capture must keep at least the score the
model reached on it. Calibration cells (used to find mechanisms) and evaluation cells (only
reported) are checked apart, as ``python -m workers fidelity`` reports them.

Regenerate the full table: ``python -m workers fidelity CAPTURES`` (the lab's ``--out``).
"""

from pathlib import Path

import pytest

from workers.fidelity import score_all, summarize

DATA = Path(__file__).resolve().parents[2] / "data" / "fidelity"

#: kernel/case -> score reached (fraction); a regression below it fails
CALIBRATION = {
    "6.1.0-57-amd64/linear_d2_dd1M": 1.000,   # md-linear member sizes (linear_conf)
    "6.1.0-57-amd64/r0_d2_c64_dd1M": 1.000,   # unplugged dd bios
    # md_update_sb on first write and when clean; its flush sequences' steps in the order
    # kblockd was kicked for them (insertion, completions: was 0.993)
    "6.1.0-57-amd64/r1_d2_ddw1M": 1.000,
    # + scattered pages from the top X; md_update_sb's flush sequences side by side (EEVDF)
    "7.2.13+deb14-amd64/r1_d2_ddw1M": 1.000,
    # + a 255-page segment cut at the trace's X; side by side (EEVDF; was 0.986); the
    # later steps as their completions came (kblockd's kicks; was 0.996)
    "6.18.15+deb13-amd64/r1_d2_ddw1M": 1.000,
    "6.18.15+deb13-amd64/r0_d2_c64_dd1M": 1.000,  # __submit_bio's per-bio plug
    # ops_run_io's descending member loop (was 0.730: the cross-member order of each stripe);
    # md_update_sb's steps in kblockd's kick order (was 0.987)
    "6.1.0-57-amd64/r5_d4_c64_ddw192k_full": 1.000,
    # raid0_make_request maps a split bio's remainder first (319ff40a5427; was 0.958: the
    # cross-member order of blkid's chunk-crossing reads)
    "6.1.0-57-amd64/r0_d4_c64_blkdiscard": 1.000,
    # ext4 on raid0: lazyinit's write zeroes never merge (refused-merge evidence), empty
    # flushes to every member, jbd2's writes through md not md's own (was 0.899)
    "6.1.0-57-amd64/r0_d3_c128_fs_ddw512k": 0.985,
    # dm-crypt's 128 KiB request limit (0d815e3400e6, v6.11; was 0.000)
    "7.3.4+deb13-amd64/dmcrypt_dd256k": 1.000,
    # + __submit_bio's per-bio plug read from P/G/U with 128 KiB pieces (was 0.000)
    "6.12.117+deb13-amd64/dmcrypt_dd256k": 1.000,
    # dm-crypt's write thread: the pieces of a 256 KiB direct write in the plug sessions the
    # trace shows dmcrypt_write submitting them (merged when found together; was 0.708, 0.542)
    "7.3.4+deb13-amd64/dmcrypt_ddw256k": 1.000,
    "6.12.117+deb13-amd64/dmcrypt_ddw256k": 1.000,
    # loop with direct I/O: direct writes at the file's extents (loop_map), then ext4's jbd2
    # commit and sync's metadata writes as the trace shows them (was 0.480 as one disk)
    "7.3.4+deb13-amd64/loop_dio_ddw512k": 1.000,
    # loop without direct I/O: writeback's bios on the disk as the trace split them (was 0.544)
    "6.12.117+deb13-amd64/loop_buf_ddw512k": 1.000,
    # direct reads of what direct writes converted reach the disk (distribution; was 0.667)
    "6.12.117+deb13-amd64/loop_dio_ddwr256k": 1.000,
    # loop's worker (loop_queue_work) handles a split write's requests once the submitter
    # dispatched them all (probe capture; was 0.886: each piece's disk bio right after its D)
    "6.12.117+deb13-amd64/p_loop_dio_ddw1M": 1.000,
    # raid1 cuts bios at its 64 MiB barrier units (mkfs's and fstrim's discards), and
    # read_balance sees the members busy as the trace served them (a discard its own kind),
    # each head where its last completed read ended (probe capture, distribution; was 0.906)
    "6.12.117+deb13-amd64/p_r1_d2_fstrim": 1.000,
    # the dd buffer's memory runs read from the disk's max_segments splits (X: 992 = 124
    # pages in 62 segments; was 0.000)
    "6.12.117+deb13-amd64/seg62_disk_dd512k": 1.000,
    # no plug at all with 128 KiB pieces (was 0.508: replayed as direct issue by dd), and
    # kblockd's worker getting dd's CPU at a tick inside one read, read from its D (0.989)
    "7.3.4+deb13-amd64/q1_r5_d3_c128_dd512k": 1.000,
    # buffered writeback through raid5 by the flusher and sync at once: stripes on the plug of
    # the thread that took them, raid5d's handlings and plug sessions read from the trace,
    # stripe batches of full rows, a late block left for the next handling (was 0.694)
    "6.12.117+deb13-amd64/r5_d5_c128_writeback_24M": 0.905,
    # raid10 far copies at geo.stride, which calc_sectors derives from the members' data size
    # (md_examine.txt; was 0.511: every far copy at the wrong sector); md_update_sb's steps
    # in kblockd's kick order (was 0.998)
    "6.1.0-57-amd64/r10f2_d3_c64_ddw256k": 1.000,
    # raid1 read_balance starts from the trace's first read (udev's probe moved the first
    # member's head), and the scan keeps the sequential member (was 0.000: every read on vda)
    "7.2.13+deb14-amd64/r1_d2_dd1M": 1.000,
    # a discard marks a clean array dirty (md_write_start) before raid10 sends it; the update
    # that marks it clean again is its own md_update_sb, after the discard (was 0.893);
    # raid10_handle_discard: one discard per member, member 0 first (was 0.933); the
    # updates' flush steps in the order kblockd was kicked for them (was 0.952)
    "6.1.0-57-amd64/r10n2_d4_c64_blkdiscard": 1.000,
    # raid5d_runs: a row's reads after its writes are a later handling (handle_stripe_dirtying
    # writes only with nothing locked); the depth-1 replay's handling ranks were off by one
    # and rows of a chunk went out of order, their blocks unmerged (was 0.510; probe cell,
    # first 9 of 48 writes)
    "6.12.117+deb13-amd64/p_r5_d6_c128_ddw200k_head": 1.000,
    # buffered writeback through raid0 by sync and the flusher: each queue's batch of a plug
    # flush goes out at the trace's U of it (sync reached 254,0 after the flusher's request;
    # was 0.574; the cut leaves sync's last request in its plug, D'd after 23 ms in the trace)
    "6.1.0-57-amd64/r0_d3_c64_writeback_18M_head": 0.963,
    # raid1 read_balance seeded from the trace's first read: a member no read had reached
    # keeps head_position 0 (setup_conf), so blkdiscard's blkid probe reading the array's
    # start goes to the second member (is_sequential; was 0.647: probe cell)
    "6.18.15+deb13-amd64/p2_r1_d2_blkdiscard": 1.000,
    # every stack on the trace's clock: member reads complete at the trace's C, and one the
    # trace lacks after its device's traced D->C for that size (was 0.893 on the HDD model's
    # backlog of a rotational virtio disk)
    "6.17.13+deb13-amd64/r5_d6_c64_fio4M_qd4": 1.000,
    # a write's reconstruct-write reads go into the raid5d plug session the trace shows them
    # in, after the first rows' session was finished (was 0.453; probe-2 cell, lbs 4096, its
    # 25th and 26th writes)
    "7.3.4+deb13-amd64/p2_lbs4k_r5_d4_c64_ddw256k": 1.000,
    # kblockd's worker on the CPU dd left runs each member queue at its own D while dd merges
    # on into the queues it has not got to (probe2 cell; was 0.960: vdb's and vdd's requests
    # at 26752 sent out at vda's D, their last two pieces left alone); the queues in the order
    # of their D's (was 0.992: vda's two requests of the first read); a run between a G and
    # its I goes without that request (was 0.997: vdd's 42880)
    "7.3.4+deb13-amd64/p2_q1_r10n2_d4_c64_dd1M": 1.000,
    # dm-stripe maps a write-zeroes bio as one range per stripe (stripe_map_range), read from
    # the member remaps reaching past a chunk: mkfs.ext4's 64 MiB journal zeroing, one write
    # per member (probe cell trimmed to mkfs; was 0.465, the whole cell 0.921 -> 0.995)
    "6.1.0-57-amd64/p2_dmstripe_d3_c64_fstrim": 1.000,
    # a thread asleep in wbt's rq_qos_wait inside a member clone, before its request (UT
    # between the clone's Q and G): the clones after it meet the thread's next bios in a
    # fresh plug (sync's 5888+1168 on vdb and vdc; the flusher's 5880 there, oldest of its
    # queue, keeps 7056.. from merging). First 52 ms of the cell; was 0.946 (the whole cell
    # 0.972 -> 0.987)
    "6.12.117+deb13-amd64/r1_d3_writeback_24M": 0.988,
    # buffered writeback through raid5, cut to 95..135 ms (low in itself: stripes begun
    # before the cut): rows raid5d delayed in one pass ("raid5 rcw S N Q 1") read together
    # once activated, as the trace's next handlings show (was 0.650)
    "6.16.12+deb13-amd64/r5_d4_c128_writeback_24M_mid": 0.697,
}
EVALUATION = {
    "7.2.13+deb14-amd64/r10o2_d3_c64_dd256k": 1.000,
    "7.2.13+deb14-amd64/part_start63s_dd1M": 1.000,
    # loop reads of the fallocated file's unwritten extents: no disk I/O (was 0.715)
    "7.3.4+deb13-amd64/loop_dio_dd1M": 1.000,
    # 1 MiB reads cut after 62, 118 and 62 + 14 pages' segments (was 0.200)
    "6.12.117+deb13-amd64/seg62_disk_dd1M": 1.000,
    # dm-linear reads cut by the member disk (X on vda/vdb, 254 pages in 254 segments), traced
    # back to the top bio through A (was 0.000)
    "7.3.4+deb13-amd64/dmlinear_d2_dd1M": 1.000,
    # dm does not cut reads to its own limits (6.1's dm-crypt: max_segment_size 4096), only
    # abnormal I/O (dm_split_and_process_bio; was 0.000)
    "6.1.0-57-amd64/dmcrypt_dd1M": 1.000,
    # no plug at all (7.3 drops __submit_bio's per-bio plug): inserted into mq-deadline and
    # dispatched by kblockd once dd stops, the pieces of a read merged (was 0.186); + where
    # the worker got dd's CPU at a tick inside a read, read from its D (was 0.938)
    "7.3.4+deb13-amd64/q1_r5_d4_c64_dd1M": 1.000,
    # raid4's parity on the last disk (raid5_compute_sector's case 4; it rotated as raid5)
    "7.2.13+deb14-amd64/r4_d5_c128_dd1M": 1.000,
    # raid1 reads from the member the trace's first read went to (was 0.000)
    "7.2.13+deb14-amd64/r1_d3_dd256k": 1.000,
}
TOL = 0.0005  # the table's rounding (0.1 %) / 2


@pytest.fixture(scope="module")
def scores():
    got = score_all([DATA])
    return {f"{s.kernel}/{s.name}": s for s in got}


def test_every_regression_capture_is_scored(scores):
    assert set(scores) == set(CALIBRATION) | set(EVALUATION)
    assert all(s.error is None for s in scores.values()), \
        {k: s.error for k, s in scores.items() if s.error}


@pytest.mark.parametrize("key", sorted(CALIBRATION))
def test_calibration_cell_keeps_its_score(scores, key):
    s = scores[key]
    assert s.calibration
    assert s.score is not None and s.score >= CALIBRATION[key] - TOL, (key, s.score)


@pytest.mark.parametrize("key", sorted(EVALUATION))
def test_evaluation_cell_keeps_its_score(scores, key):
    s = scores[key]
    assert not s.calibration
    assert s.score is not None and s.score >= EVALUATION[key] - TOL, (key, s.score)


def test_calibration_and_held_out_are_summarized_apart(scores):
    cal = summarize([s for s in scores.values() if s.calibration])
    held = summarize([s for s in scores.values() if not s.calibration])
    assert (cal.count, held.count) == (len(CALIBRATION), len(EVALUATION))
    assert cal.mean is not None and cal.mean >= sum(CALIBRATION.values()) / len(CALIBRATION) - TOL
    assert held.mean is not None and held.mean >= sum(EVALUATION.values()) / len(EVALUATION) - TOL
