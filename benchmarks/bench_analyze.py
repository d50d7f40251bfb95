"""All analyzers on a big generated EventTable, beside blkparse printing the same trace.

    .venv/bin/python benchmarks/bench_analyze.py --events 10000000

Generates ``--events`` events (requests through Q, G, I, D, C on ``--devices`` disks, with
some merges, splits and backward dispatches) with numpy, writes them as a blktrace v1 binary
stream (``workers.traces.writers.write_blktrace`` when present, else the minimal writer here),
times ``blkparse -i - -o /dev/null`` on it (the reference: what a maintainer runs today to
*look* at the trace) and ``workers.analyzers.analyze`` on the table, alternating the two
``--repeat`` times and keeping the best wall and CPU time of each (the machine is shared), and
prints both ratios (target <= 1). Also prints the size of the results JSON and of its largest chart arrays.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.analyzers import analyze  # noqa: E402
from workers.events import (  # noqa: E402
    ACTION_CODES,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    EventTable,
    make_dev,
)

STAGES = ("Q", "G", "I", "D", "C")


def generate(n_events: int, n_devices: int = 8, seed: int = 0) -> EventTable:
    """About ``n_events`` events: each request emits Q, G, I, D, C on one of the disks."""
    rng = np.random.default_rng(seed)
    nreq = max(1, n_events // len(STAGES))
    dev_i = rng.integers(0, n_devices, size=nreq)
    devs = np.array([make_dev(8, 16 * i) for i in range(n_devices)], dtype=np.uint32)
    size = rng.choice(np.array([8, 128, 256, 1024, 96]), size=nreq, p=[0.2, 0.3, 0.3, 0.15, 0.05])
    # mostly sequential per device, with 10% random jumps (backward seeks included)
    step = size.astype(np.int64)
    jump = rng.random(nreq) < 0.1
    step[jump] = rng.integers(-(1 << 24), 1 << 24, size=int(jump.sum()))
    sector = np.empty(nreq, dtype=np.int64)
    for d in range(n_devices):
        m = dev_i == d
        sector[m] = (1 << 30) + np.cumsum(step[m]) - step[m]
    sector = np.clip(sector, 0, None)
    t_q = np.cumsum(rng.integers(500, 20_000, size=nreq))  # ns
    offs = np.cumsum(rng.integers(100, 50_000, size=(nreq, len(STAGES))), axis=1)
    offs[:, 0] = 0
    times = (t_q[:, None] + offs).ravel()
    write = rng.random(nreq) < 0.3
    rwbs = np.where(write, RWBS_WRITE | RWBS_SYNC, RWBS_READ).astype(np.uint16)
    codes = np.array([ACTION_CODES[s] for s in STAGES], dtype=np.uint8)
    k = len(STAGES)
    table = EventTable.from_columns(
        time_ns=times, dev=np.repeat(devs[dev_i], k), cpu=np.repeat(dev_i % 2, k),
        pid=np.repeat(1000 + dev_i, k), action=np.tile(codes, nreq),
        rwbs=np.repeat(rwbs, k), sector=np.repeat(sector, k).astype(np.uint64),
        nr_sectors=np.repeat(size, k))
    table = table.sorted_by_time()
    # sequence numbers 1, 2, 3, ... per (device, CPU) in time order: each traced device has
    # its own relay channels (gaps would make blkparse track "skips", which is quadratic)
    seq = np.zeros(len(table), dtype=np.uint32)
    key = table.dev.astype(np.int64) * 1024 + table.cpu
    for k in np.unique(key):
        m = key == k
        seq[m] = np.arange(1, int(m.sum()) + 1)
    table.seq = seq
    return table


# --- minimal blktrace v1 writer (used only when workers.traces.writers is missing) ---------
_HDR = np.dtype([("magic", "<u4"), ("sequence", "<u4"), ("time", "<u8"), ("sector", "<u8"),
                 ("bytes", "<u4"), ("action", "<u4"), ("pid", "<u4"), ("device", "<u4"),
                 ("cpu", "<u4"), ("error", "<u2"), ("pdu_len", "<u2")])
_TC_READ, _TC_WRITE, _TC_SYNC = 1 << 16, 2 << 16, 8 << 16
_TC_OF_ACTION = {1: 0x10 << 16, 4: 0x10 << 16, 12: 0x10 << 16, 7: 0x40 << 16, 8: 0x80 << 16}


def write_blktrace_minimal(table: EventTable, path: Path) -> None:
    """Header-only v7 records (no pdus, no notes) of Q/G/I/D/C events, little endian."""
    rec = np.zeros(len(table), dtype=_HDR)
    rec["magic"] = 0x65617407
    rec["sequence"] = table.seq
    rec["time"] = table.time_ns
    rec["sector"] = table.sector
    rec["bytes"] = table.nr_sectors.astype(np.uint32) << 9
    cat = np.where((table.rwbs & RWBS_WRITE) != 0, _TC_WRITE, _TC_READ)
    cat |= np.where((table.rwbs & RWBS_SYNC) != 0, _TC_SYNC, 0)
    act_cat = np.zeros(256, dtype=np.uint32)
    for code, c in _TC_OF_ACTION.items():
        act_cat[code] = c
    rec["action"] = table.action.astype(np.uint32) | cat.astype(np.uint32) | act_cat[table.action]
    rec["pid"] = table.pid
    rec["device"] = table.dev
    rec["cpu"] = table.cpu
    path.write_bytes(rec.tobytes())


def write_trace(table: EventTable, path: Path) -> str:
    try:
        from workers.traces.writers import write_blktrace  # type: ignore[import-not-found]
    except ImportError:
        write_blktrace_minimal(table, path)
        return "minimal writer (benchmarks/bench_analyze.py)"
    with open(path, "wb") as out:
        write_blktrace(table, out)
    return "workers.traces.writers.write_blktrace"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--keep", help="directory to keep the generated trace in")
    ap.add_argument("--timeout", type=float, default=900.0, help="limit for blkparse (s)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side (best is kept)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    table = generate(args.events, args.devices)
    gen_s = time.perf_counter() - t0
    print(f"events: {len(table):,} on {args.devices} devices (generated in {gen_s:.2f} s)")

    tmp = Path(args.keep or tempfile.mkdtemp(prefix="bench_analyze_"))
    tmp.mkdir(parents=True, exist_ok=True)
    trace = tmp / "bench.blktrace.bin"
    writer = write_trace(table, trace)
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB, {writer})")

    blkparse = shutil.which("blkparse")
    ref_wall: list[float] = []
    ref_cpu: list[float] = []
    ana_wall: list[float] = []
    ana_cpu: list[float] = []
    res: dict = {}
    # alternate the two sides so both see the same background load; keep the best of each
    for _ in range(args.repeat):
        if blkparse:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            with open(trace, "rb") as fin:
                t0 = time.perf_counter()
                subprocess.run([blkparse, "-i", "-", "-o", os.devnull], stdin=fin, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=args.timeout)
                ref_wall.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            ref_cpu.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        c0 = time.process_time()
        t0 = time.perf_counter()
        res = analyze(table)
        ana_wall.append(time.perf_counter() - t0)
        ana_cpu.append(time.process_time() - c0)
    if blkparse:
        print(f"blkparse -i - -o /dev/null: wall {min(ref_wall):.2f} s, cpu {min(ref_cpu):.2f} s "
              f"(best of {args.repeat})")
    else:
        print("blkparse: not installed, no reference")
    t0 = time.perf_counter()
    blob = json.dumps(res)
    json_s = time.perf_counter() - t0
    print(f"analyze(): wall {min(ana_wall):.2f} s, cpu {min(ana_cpu):.2f} s (best of "
          f"{args.repeat}); json.dumps: {json_s:.2f} s; results {len(blob) / 1e6:.2f} MB")
    dev0 = next(iter(res["devices"].values()))
    for section in ("lba", "throughput", "seek", "sizes", "latency", "ordering", "fragmentation"):
        print(f"  chart data {section:<13} per device: {len(json.dumps(dev0[section])) / 1e3:8.1f} kB")
    if blkparse:
        print(f"ratio analyze / blkparse: wall {min(ana_wall) / min(ref_wall):.2f}, "
              f"cpu {min(ana_cpu) / min(ref_cpu):.2f} (target <= 1)")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
