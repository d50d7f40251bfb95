"""Timing: dispatch_times (single stream) and simulate_jobs (threads, tags, elevator, device)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from workers.errors import ModelConfigError
from workers.events import (
    ACT_COMPLETE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_SLEEPRQ,
    ACT_SPLIT,
    EventTable,
)
from workers.model.device import PRESETS, DeviceModel, HDDModel, device_from_spec
from workers.model.limits import QueueLimits
from workers.model.timing import (
    DeviceServer,
    FioJobs,
    JobsResult,
    dispatch_times,
    format_numjobs_table,
    seed003_limits,
    simulate_jobs,
)


def test_dispatch_times_respects_ready_order_and_queue_depth() -> None:
    """D >= ready, D non-decreasing, C > D, and request i waits for C of i - queue_depth."""
    rng = np.random.default_rng(1)
    n = 500
    ready = np.sort(rng.integers(0, 50_000_000, n))
    sector = rng.integers(0, 10**9, n)
    d, c = dispatch_times(ready, sector, np.full(n, 256), "hdd", 4, is_write=True)
    assert (d >= ready).all()
    assert (np.diff(d) >= 0).all()
    assert (c > d).all()
    assert (d[4:] >= c[:-4]).all()
    assert (np.diff(c) >= 0).all()


def test_dispatch_times_sequential_hdd_stream_runs_at_media_rate() -> None:
    """Contiguous requests queued at once finish at the media rate (no seeks after the first)."""
    hdd = HDDModel()
    n = 200
    sector = np.arange(n) * 256
    _, c = dispatch_times(np.zeros(n), sector, np.full(n, 256), hdd, 32, head=0)
    per_req = (c[-1] - c[0]) / (n - 1)
    expected = 256 * 512 / hdd.media_rate_bps * 1e9 + hdd.command_overhead_ns
    assert per_req == pytest.approx(expected, rel=0.01)


def test_dispatch_times_ssd_overlaps_small_commands_up_to_its_units() -> None:
    """Many 4K reads on NVMe: IOPS ~ units / overhead at depth, ~ 1 / overhead at depth 1."""
    nvme = PRESETS["nvme"]
    n = 4000
    s = np.arange(n) * 8
    _, c_deep = dispatch_times(np.zeros(n), s, np.full(n, 8), nvme, 256)
    _, c_qd1 = dispatch_times(np.zeros(n), s, np.full(n, 8), nvme, 1)
    iops_deep = n / (c_deep[-1] / 1e9)
    iops_qd1 = n / (c_qd1[-1] / 1e9)
    assert iops_qd1 == pytest.approx(1e9 / nvme.service_ns(0, 8, False, False, -1), rel=0.02)
    assert iops_deep > 30 * iops_qd1


def test_dispatch_times_sata_discards_are_serialised() -> None:
    """Non-queued TRIM: N discards take N / discard_ops_per_s whatever the queue depth."""
    sata = PRESETS["sata_ssd"]
    n = 100
    _, c = dispatch_times(np.zeros(n), np.arange(n) * 1024, np.full(n, 1024), sata, 32,
                          is_discard=True)
    assert c[-1] / 1e9 == pytest.approx(n / sata.discard_ops_per_s, rel=0.02)


def test_device_server_matches_dispatch_times() -> None:
    """The incremental server gives the same completions as the compiled kernel."""
    rng = np.random.default_rng(7)
    n = 300
    ready = np.sort(rng.integers(0, 10**8, n))
    sector = rng.integers(0, 10**8, n)
    nr = rng.integers(8, 2048, n)
    for name in ("hdd", "nvme"):
        model = PRESETS[name]
        d, c = dispatch_times(ready, sector, nr, model, 10**6, is_write=True)
        server = DeviceServer(model)
        got = [server.submit(int(t), int(s), int(k), True) for t, s, k in zip(d, sector, nr)]
        assert np.array_equal(np.asarray(got), c), name


def test_dispatch_times_rejects_bad_arguments() -> None:
    """A zero queue depth or misaligned arrays are errors, an unknown device a typed one."""
    with pytest.raises(ModelConfigError):
        dispatch_times([0], [0], [8], "hdd", 0)
    with pytest.raises(ModelConfigError):
        dispatch_times([0], [0], [8], "tape", 1)
    with pytest.raises(ValueError):
        dispatch_times([0, 1], [0], [8], "hdd", 1)


def _per_request_stages(table: EventTable) -> dict[int, dict[int, list[int]]]:
    out: dict[int, dict[int, list[int]]] = {}
    for t, a, s in zip(table.time_ns.tolist(), table.action.tolist(), table.sector.tolist()):
        out.setdefault(s, {}).setdefault(a, []).append(t)
    return out


def test_simulate_jobs_emits_a_parser_shaped_table_in_causal_order() -> None:
    """Every request has G <= I <= D <= C; each 1M bio has one Q and 7 X at 128K limits."""
    res = simulate_jobs(FioJobs(bs=1 << 20, numjobs=64, runtime_ns=1_500_000_000, seed=3),
                        limits=seed003_limits(), device="hdd", wakeup="global",
                        preempt="always")
    t = res.table
    assert len(t) > 0 and t.time_known
    assert (np.diff(t.time_ns) >= 0).all()
    counts = t.action_counts()
    assert counts["Q"] * 7 >= counts["X"] >= (counts["Q"] - 64) * 7
    assert counts["G"] == counts["I"]
    assert counts["S"] > 0  # 64 jobs x 8 pieces > 64 scheduler tags
    stages = _per_request_stages(t)
    checked = 0
    for acts in stages.values():
        if ACT_COMPLETE in acts and ACT_GETRQ in acts:
            g, i, d, c = (acts[a][0] for a in (ACT_GETRQ, ACT_INSERT, ACT_ISSUE, ACT_COMPLETE))
            assert g <= i <= d < c
            checked += 1
    assert checked > 100
    assert set(np.unique(t.action).tolist()) <= {ACT_QUEUE, ACT_SPLIT, ACT_GETRQ, ACT_SLEEPRQ,
                                                  ACT_INSERT, ACT_ISSUE, ACT_COMPLETE}
    assert (t.nr_sectors[t.action == ACT_ISSUE] <= 256).all()
    assert t.devices[int(t.dev[0])].limits["max_sectors_kb"] == 128


def test_simulate_jobs_never_exceeds_tag_or_device_depth() -> None:
    """At most nr_requests requests between G and C, at most queue_depth between D and C."""
    lim = seed003_limits()
    res = simulate_jobs(FioJobs(bs=1 << 20, numjobs=128, runtime_ns=1_000_000_000),
                        limits=lim, device="hdd")
    t = res.table
    act = t.action
    delta_tags = np.where(act == ACT_GETRQ, 1, 0) - np.where(act == ACT_COMPLETE, 1, 0)
    delta_dev = np.where(act == ACT_ISSUE, 1, 0) - np.where(act == ACT_COMPLETE, 1, 0)
    # completions sort before issues at equal times in the table only if earlier; use maxima
    assert np.cumsum(delta_tags).max() <= lim.nr_requests
    assert np.cumsum(delta_dev).max() <= lim.queue_depth
    assert np.cumsum(delta_tags).max() == lim.nr_requests  # contention reached the tag depth


def test_simulate_jobs_is_deterministic_for_a_seed() -> None:
    """Same seed, same events; another seed, other offsets."""
    jobs = FioJobs(bs=1 << 20, numjobs=16, runtime_ns=500_000_000, seed=5)
    a = simulate_jobs(jobs, limits=seed003_limits(), device="hdd")
    b = simulate_jobs(jobs, limits=seed003_limits(), device="hdd")
    assert np.array_equal(a.table.time_ns, b.table.time_ns)
    assert np.array_equal(a.table.sector, b.table.sector)
    c = simulate_jobs(FioJobs(bs=1 << 20, numjobs=16, runtime_ns=500_000_000, seed=6),
                      limits=seed003_limits(), device="hdd")
    assert not np.array_equal(a.table.sector[:50], c.table.sector[:50])


def test_simulate_jobs_without_scheduler_issues_directly_on_driver_tags() -> None:
    """scheduler none: threads sleep on queue_depth driver tags; no more than that in flight."""
    lim = QueueLimits(max_sectors=256, queue_depth=8, nr_requests=8, scheduler="none",
                      rotational=0)
    res = simulate_jobs(FioJobs(rw="randread", bs=1 << 20, numjobs=8, runtime_ns=200_000_000),
                        limits=lim, device="sata_ssd")
    t = res.table
    delta = np.where(t.action == ACT_GETRQ, 1, 0) - np.where(t.action == ACT_COMPLETE, 1, 0)
    assert np.cumsum(delta).max() <= 8
    assert res.tag_stats["sleeps"] > 0
    assert 100 < res.mib_s < 560


def test_simulate_jobs_sequential_count_mode_measures_until_the_last_completion() -> None:
    """rw=write with count: every job does exactly count I/Os, sequentially in its region."""
    res = simulate_jobs(FioJobs(rw="write", bs=1 << 20, numjobs=2, runtime_ns=0, count=5),
                        limits=seed003_limits(), device="hdd")
    assert res.ios_done == 10
    q = res.table.sector[res.table.action == ACT_QUEUE]
    assert len(q) == 10
    first_job = sorted(int(s) for s in q if s < (1 << 30) >> 9)
    assert np.all(np.diff(first_job) == 2048)
    assert res.window_ns > 0 and res.mib_s > 0


def test_fio_jobs_validation() -> None:
    """Bad rw, bs, numjobs and windows raise ModelConfigError."""
    for kw in ({"rw": "trim"}, {"bs": 1000}, {"numjobs": 0}, {"runtime_ns": 0},
               {"ramp_ns": 5, "runtime_ns": 5}):
        with pytest.raises(ModelConfigError):
            FioJobs(**kw)  # type: ignore[arg-type]


def test_format_numjobs_table_has_the_seed_layout() -> None:
    """Header, separator and one row per numjobs with one decimal."""
    text = format_numjobs_table({"always": {1: 67.66, 2: 60.0}, "seed003": {1: 67.7, 2: 66.1}},
                                labels={"always": "v5.18-rc1", "seed003": "v5.18-rc1-patched"})
    lines = text.splitlines()
    assert lines[0].startswith("| numjobs | v5.18-rc1")
    assert lines[1].startswith("| ------- |")
    assert lines[2].split("|")[1].strip() == "1" and "67.7" in lines[2]
    assert len(lines) == 4


_COLUMNS = ("time_ns", "action", "sector", "nr_sectors", "pid", "aux", "comm")


@pytest.mark.slow
@pytest.mark.parametrize(("rw", "limits_kind", "wakeup", "preempt", "count", "iodepth"), [
    ("randwrite", "deadline", "per_queue", "always", 0, 1),
    ("randwrite", "deadline", "per_queue", "seed003", 0, 1),
    ("randwrite", "deadline", "global", "always", 0, 1),
    ("randwrite", "deadline", "global", "seed003", 0, 1),
    ("randread", "none", "global", "always", 0, 1),
    ("write", "deadline", "per_queue", "always", 3, 1),
    ("randwrite", "deadline", "per_queue", "seed003", 0, 4),
    ("randread", "none", "global", "always", 0, 16),
    ("write", "deadline", "global", "always", 5, 3),
    ("randwrite", "deadline_wce", "per_queue", "always", 0, 1),
    ("randwrite", "deadline_wce", "global", "seed003", 0, 1),
    ("write", "deadline_wce", "per_queue", "seed003", 3, 2),
    ("randwrite", "none_wce", "per_queue", "always", 0, 1),
    ("randread", "deadline_wce", "global", "always", 0, 1),
])
def test_numba_engine_gives_the_python_engines_events(rw: str, limits_kind: str, wakeup: str,
                                                      preempt: str, count: int,
                                                      iodepth: int) -> None:
    """The compiled engine reproduces the reference engine event for event (first call compiles)."""
    if limits_kind.startswith("none"):
        lim = QueueLimits(max_sectors=256, queue_depth=8, nr_requests=8, scheduler="none")
        device = "sata_ssd"
    else:
        lim = seed003_limits()
        device = "hdd"
    if limits_kind.endswith("_wce"):
        device = "hdd_wce"  # the drive's write-back cache path (admission, acks, destage)
    jobs = FioJobs(rw=rw, bs=1 << 20, numjobs=48, runtime_ns=0 if count else 2_000_000_000,
                   count=count, seed=11, iodepth=iodepth)
    a = simulate_jobs(jobs, limits=lim, device=device, wakeup=wakeup, preempt=preempt,
                      engine="python")
    b = simulate_jobs(jobs, limits=lim, device=device, wakeup=wakeup, preempt=preempt,
                      engine="numba")
    assert len(a.table) == len(b.table) > 0
    for col in _COLUMNS:
        assert np.array_equal(getattr(a.table, col), getattr(b.table, col)), col
    assert (a.bytes_in_window, a.ios_done, a.requests_done, a.rescues) == \
        (b.bytes_in_window, b.ios_done, b.requests_done, b.rescues)
    assert a.tag_stats == b.tag_stats
    assert a.max_waiters_per_queue == b.max_waiters_per_queue
    assert a.sequential_fraction == b.sequential_fraction


def test_simulate_jobs_rejects_bad_configurations() -> None:
    """Unknown engine, zero queue depth, a disk smaller than one I/O: ModelConfigError."""
    with pytest.raises(ModelConfigError):
        simulate_jobs(FioJobs(numjobs=1), limits=seed003_limits(), engine="gpu")
    with pytest.raises(ModelConfigError):
        simulate_jobs(FioJobs(numjobs=1), limits=seed003_limits().replace(queue_depth=0))
    with pytest.raises(ModelConfigError):
        simulate_jobs(FioJobs(numjobs=1), limits=seed003_limits(),
                      device={"kind": "hdd", "capacity_sectors": 1000})


def test_simulate_jobs_iodepth_keeps_that_many_ios_in_flight() -> None:
    """iodepth N: at most N I/Os per job between Q and their last C; NVMe 4K IOPS scale with N."""
    lim = QueueLimits(max_sectors=2560, queue_depth=1023, nr_requests=1023, scheduler="none")
    iops = {}
    for qd in (1, 8):
        res = simulate_jobs(FioJobs(rw="randread", bs=4096, numjobs=1, iodepth=qd,
                                    runtime_ns=50_000_000), limits=lim, device="nvme")
        t = res.table
        delta = np.where(t.action == ACT_QUEUE, 1, 0) - np.where(t.action == ACT_COMPLETE, 1, 0)
        assert np.cumsum(delta).max() == qd  # one piece per 4K I/O
        iops[qd] = res.ios_done
    assert iops[8] > 6 * iops[1]
    with pytest.raises(ModelConfigError):
        FioJobs(iodepth=0)


def _one_write(device: DeviceModel, bs: int) -> JobsResult:
    return simulate_jobs(FioJobs(rw="randwrite", bs=bs, numjobs=1, count=1, runtime_ns=0),
                         limits=seed003_limits(max_sectors_kb=1280), device=device)


def test_write_cache_completes_a_write_when_its_data_is_in_the_cache() -> None:
    """WCE: C = link transfer, not media time; write-through: C includes seek and rotation."""
    wce = PRESETS["hdd_wce"]
    through = dataclasses.replace(wce, write_cache_bytes=0)
    t_wce = _one_write(wce, 128 << 10)
    t_thr = _one_write(through, 128 << 10)
    c_wce = int(t_wce.table.time_ns[t_wce.table.action == ACT_COMPLETE][0])
    c_thr = int(t_thr.table.time_ns[t_thr.table.action == ACT_COMPLETE][0])
    d = int(t_wce.table.time_ns[t_wce.table.action == ACT_ISSUE][0])
    link = wce.command_overhead_ns + (128 << 10) / wce.interface_rate_bps * 1e9
    assert c_wce - d == pytest.approx(link, abs=2)
    assert c_thr - d > wce.avg_rotational_ns  # positioning + media transfer


def test_write_cache_admits_a_command_larger_than_the_cache() -> None:
    """A write bigger than the whole cache is still admitted (write-through), not hung."""
    tiny = dataclasses.replace(PRESETS["hdd_wce"], write_cache_bytes=64 << 10)
    res = _one_write(tiny, 1 << 20)
    assert res.ios_done == 1 and res.requests_done == 1


def test_write_cache_does_not_change_reads() -> None:
    """Reads bypass the write-back cache: same events as the write-through drive."""
    wce = PRESETS["hdd_wce"]
    jobs = FioJobs(rw="randread", bs=1 << 20, numjobs=4, runtime_ns=500_000_000)
    a = simulate_jobs(jobs, limits=seed003_limits(), device=wce)
    b = simulate_jobs(jobs, limits=seed003_limits(),
                      device=dataclasses.replace(wce, write_cache_bytes=0))
    assert np.array_equal(a.table.time_ns, b.table.time_ns)
    assert a.media_sequential_fraction == a.sequential_fraction


def test_write_cache_rejects_negative_size() -> None:
    """write_cache_bytes < 0 is a ModelConfigError from the manifest parser."""
    with pytest.raises(ModelConfigError):
        device_from_spec({"kind": "hdd", "write_cache_bytes": -1})
