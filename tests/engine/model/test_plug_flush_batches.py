"""A plug flush hands its queues their batches one after another, when the trace shows each U.

``blk_mq_flush_plug_list`` with requests of several queues in the plug goes queue by queue
(``blk_mq_dispatch_plug_list``: ``trace_block_unplug`` with the batch's count, then
``blk_mq_try_issue_list_directly`` or ``blk_mq_insert_requests``), in the flushing thread's
own context. Buffered writeback through raid0 by ``sync`` and the flusher at once (6.1.0-57,
r0_d3_c64_writeback_18M, calibration; its first 23 ms in tests/data/fidelity): sync's
flush-on-add (``blk_add_rq_to_plug``, its 254,16 request past BLK_PLUG_FLUSH_SIZE) traced U
on 254,32 at 17.8 ms, on 254,16 at 19.2 ms and on 254,0 at 22.3 ms; meanwhile the flusher
slept (UT at 20.0 ms) and kblockd sent its 5760+384 to 254,0 at 20.3 ms, before sync's
4096+1664 (22.4 ms). Handing every batch over with the flush put sync's request first
(88.6% on the whole capture; 100% with each batch at its U).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from model_helpers import d_stream

from workers.events import ACT_ISSUE, ACT_UNPLUG_IO, dev_str
from workers.fidelity import score_capture
from workers.model.submit import Engine

DATA = Path(__file__).resolve().parents[2] / "data" / "fidelity"
HEAD = DATA / "6.1.0-57-amd64" / "r0_d3_c64_writeback_18M_head"
SYNC = 2627


def _predicted_and_real():
    from workers.fidelity import _with_md_sizes, _with_stripe_cache
    from workers.model import bios_from_table, preset_for_kernel, replay, stack_from_manifest
    from workers.traces import ingest
    from workers.traces.directory import directory_files

    files = directory_files(HEAD, [])
    ing = ingest(files, names=[Path(f).name for f in files])
    m = {k: getattr(ing.manifest, k) for k in ("kernel", "stack", "limits", "devices",
                                               "workload")}
    m = _with_stripe_cache(HEAD, _with_md_sizes(HEAD, m))
    stack = stack_from_manifest(m)
    work = str((m.get("workload") or {}).get("command") or "")
    bios = bios_from_table(ing.table, stack.top.dev, workload=work or None, stack=stack)
    return replay(bios, stack, preset_for_kernel(m["kernel"])), ing.table, bios


def _by_time(table, dev_name):
    rows = np.flatnonzero((table.action == ACT_ISSUE) &
                          np.array([dev_str(int(d)) == dev_name for d in table.dev]))
    rows = rows[np.argsort(table.time_ns[rows], kind="stable")]
    return [(int(table.sector[r]), int(table.nr_sectors[r])) for r in rows]


def test_the_trace_shows_sync_reaching_each_member_at_its_own_time():
    _, real, bios = _predicted_and_real()
    u = np.flatnonzero((real.action == ACT_UNPLUG_IO) & (real.pid == SYNC))
    assert [dev_str(int(real.dev[i])) for i in u] == ["254,32", "254,16", "254,0"]
    per = bios.meta["batch_unplugs"][SYNC]
    assert sorted(dev_str(d) for d in per) == ["254,0", "254,16", "254,32"]


def test_a_later_batch_goes_out_after_the_other_writers_request():
    pred, real, _ = _predicted_and_real()
    assert _by_time(real, "254,0") == [(5760, 384), (4096, 1664)]
    assert _by_time(pred, "254,0") == [(5760, 384), (4096, 1664)]
    # sync's next request (6128, its flush's trigger) waits until that flush is done
    d = [(dev, s, n) for dev, s, n in d_stream(pred)]
    assert d.index(("254,16", 6128, 8)) > d.index(("254,0", 4096, 1664))


def test_the_head_capture_scores():
    s = score_capture(HEAD)
    assert s.score is not None and s.score >= 0.963 - 0.0005, s.score


def test_a_batch_takes_the_first_u_between_the_threads_q_events():
    class _E:
        pass

    eng = _E()
    eng.batch_unplugs = {(5, 1): [10, 30, 50]}
    eng.q_times = {5: [0, 20, 40]}
    eng.now = 21
    # the U after the thread's latest Q (20) and before its next (40)
    assert Engine.traced_batch_time(eng, 5, 1) == 30  # type: ignore[arg-type]
    assert eng.batch_unplugs[(5, 1)] == [10, 50]
    assert Engine.traced_batch_time(eng, 5, 1) is None  # type: ignore[arg-type]
    assert Engine.traced_batch_time(eng, 5, 2) is None  # type: ignore[arg-type]
    eng.now = 45
    assert Engine.traced_batch_time(eng, 5, 1) == 50  # type: ignore[arg-type]
