"""raid5d's plug sessions for the reads of a write's handling (rmw/rcw), read from a trace.

A direct-I/O ``dd`` holds no plug md keeps: ``raid5_make_request`` adds a bio's rows one by
one and hands each to raid5d as it goes, and raid5d, on another CPU, takes what it finds. On
7.3 md cuts each write at the stripe width (chunk_sectors = io_opt, "md: align bio to
io_opt"), so a 256 KiB write to a 4 x 64k raid5 is one full stripe and a chunk of the next.
In 7.3.4 p2_lbs4k_r5_d4_c64_ddw256k (tests/data/fidelity, its 25th and 26th writes) raid5d
wrote the first two full rows of the 25th write (member 8192+16) and finished its plug
(``blk_finish_plug`` at the end of ``raid5d``); in its next session it read for the
reconstruct-write of the half-written stripe (members 1 and 0 at 8320, 16 rows) and wrote the
stripe's other 14 rows. The replay, on its own clock (dd waits for each write), cut raid5d's
plug only between full-stripe writes of different traced sessions: the reads went into the
first session's plug behind 8192+16, where each 4 KiB read met that write on its member first
(``blk_attempt_plug_merge``: the plug's newest request, then the oldest of its own queue) and
sixteen 8-sector reads went out where the trace has one 8320+128 (92.8% on the whole capture).
With the reads' traced sessions (``dirtying_read_plug_sessions``,
``Engine._traced_dirtying_plug``) the plug is finished before them: 100%.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workers.events import ACT_ISSUE, ACT_QUEUE, RWBS_WRITE, dev_str
from workers.fidelity import _with_md_sizes, _with_stripe_cache, score_capture
from workers.model import bios_from_table, preset_for_kernel, replay, stack_from_manifest
from workers.model.raid5d_reads import dirtying_read_plug_sessions, write_plug_sessions
from workers.model.stack import stack_from_spec
from workers.traces import ingest
from workers.traces.directory import directory_files

DATA = Path(__file__).resolve().parents[2] / "data" / "fidelity"
CELL = DATA / "7.3.4+deb13-amd64" / "p2_lbs4k_r5_d4_c64_ddw256k"
#: stripe rows (member sector - data_offset 4096): the 25th write's first full rows, the rest
#: of its full stripe, and the chunk of the next stripe it leaves half written
FIRST, REST, HALF = [4096, 4104], list(range(4112, 4224, 8)), list(range(4224, 4352, 8))


def _load():
    files = directory_files(CELL, [])
    ing = ingest(files, names=[Path(f).name for f in files])
    m = {k: getattr(ing.manifest, k) for k in ("kernel", "stack", "limits", "devices",
                                               "workload")}
    m = _with_stripe_cache(CELL, _with_md_sizes(CELL, m))
    stack = stack_from_manifest(m)
    work = str((m.get("workload") or {}).get("command") or "")
    bios = bios_from_table(ing.table, stack.top.dev, workload=work or None, stack=stack)
    return ing.table, stack, bios, m["kernel"]


def _d(table, dev_name):
    rows = np.flatnonzero((table.action == ACT_ISSUE) &
                          np.array([dev_str(int(d)) == dev_name for d in table.dev]))
    rows = rows[np.argsort(table.time_ns[rows], kind="stable")]
    return [(int(table.sector[r]), int(table.nr_sectors[r]), bool(table.rwbs[r] & RWBS_WRITE))
            for r in rows]


def test_the_trace_reads_the_half_stripe_in_the_session_after_the_first_rows():
    table, stack, bios, _ = _load()
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == stack.top.dev))
    writes = write_plug_sessions(table, q, stack)
    reads = dirtying_read_plug_sessions(table, q, stack)
    assert writes is not None and reads is not None
    first = {writes[r][0] for r in FIRST}
    rest = {writes[r][0] for r in REST}
    assert len(first) == len(rest) == 1 and first != rest
    # the reconstruct-write's reads share the session of the stripe's other rows
    assert {reads[r][0] for r in HALF} == rest
    assert bios.depth == 1 and bios.meta["raid5d_dirtying_read_sessions"] == reads


def test_no_stack_or_a_raid0_top_gives_none():
    table, stack, _, _ = _load()
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == stack.top.dev))
    assert dirtying_read_plug_sessions(table, q, None) is None
    assert dirtying_read_plug_sessions(table, q, stack_from_spec("raid0:disks=4,chunk=64k")) \
        is None


def test_the_reads_go_out_merged_after_the_first_rows_write():
    table, stack, bios, kernel = _load()
    pred = replay(bios, stack, preset_for_kernel(kernel))
    for dev in ("254,0", "254,16"):
        got = _d(pred, dev)
        assert got == _d(table, dev), dev
        # 8192+16 written alone, then the stripe's reads as one request, then its rows
        assert got[:3] == [(8192, 16, True), (8320, 128, False), (8208, 112, True)], dev


def test_the_cell_scores():
    s = score_capture(CELL)
    assert s.score is not None and s.score >= 1.0 - 0.0005, s.score
