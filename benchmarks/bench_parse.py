"""Trace parsing speed and memory against blkparse on the same file (issue 3).

Generates a realistic binary blktrace (Q/G/I/D/C with splits, remaps, unplugs, PROCESS notes
and odd-length messages; about 23% of records carry a payload), then in one run prints:

* our binary parse + seek histogram of every device: wall time, events/s, peak memory
  (tracemalloc: numpy allocations; the input is memory-mapped), bytes per event of the table;
* the wall time of ``blkparse -i - -o /dev/null < FILE`` on the same file and the ratio
  (target: ours <= 0.1 x blkparse);
* the text path: the wall time of blkparse printing the file as text, and of our parser reading
  that text back (target: ratio <= 1).

Each side runs ``--repeat`` times (default 3) and the minimum wall time is reported, so a
busy machine affects both sides alike.

Usage: ``python benchmarks/bench_parse.py [--events 10000000] [--repeat 3] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workers.analyzers.seek import seek_histogram  # noqa: E402
from workers.events import ACT_MESSAGE, ACT_REMAP, ACT_SPLIT, ACT_UNPLUG_IO  # noqa: E402
from workers.traces.blkparse_text import parse_blkparse_text  # noqa: E402
from workers.traces.blktrace_bin import merge_raw, parse_blktrace_raw  # noqa: E402
from workers.traces.synth import realistic_table  # noqa: E402
from workers.traces.writers import encode_blktrace  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _parse_and_seek(path: Path) -> tuple[float, int, int, int]:
    """(seconds, events, table bytes, peak traced bytes) of parse + seek histograms."""
    tracemalloc.start()
    t0 = time.perf_counter()
    table = merge_raw([parse_blktrace_raw(path)])
    for dev in table.device_ids():
        seek_histogram(table, dev)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, len(table), table.nbytes, peak


def _blkparse(path: Path, out: str) -> float:
    exe = shutil.which("blkparse")
    if exe is None:
        return float("nan")
    t0 = time.perf_counter()
    with open(path, "rb") as fin:
        subprocess.run([exe, "-i", "-", "-o", out], stdin=fin, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _floor(tmp: Path, n: int, repeat: int) -> float:
    """The issue's floor: a structured numpy view over fixed 48-byte records (no payloads, so
    no boundary walk) plus the seek histogram of the D rows of each device."""
    from workers.analyzers.seek import seek_from_arrays
    from workers.events import ACT_ISSUE, EventTable

    rng = np.random.default_rng(2)
    sector = np.cumsum(rng.integers(0, 4096, n)).astype(np.uint64)
    acts = np.tile(np.array([1, 4, 12, 7, 8], dtype=np.uint8), -(-n // 5))[:n]
    plain = EventTable({"time_ns": np.arange(n, dtype=np.int64) * 1000, "action": acts,
                        "rwbs": np.ones(n, np.uint16), "sector": sector,
                        "nr_sectors": np.full(n, 256, np.uint32),
                        "dev": (8 << 20) + 16 * (np.arange(n) % 2)})
    path = tmp / "floor.blktrace"
    path.write_bytes(encode_blktrace(plain, process_notes=False))
    del plain
    rec = np.dtype([("magic", "<u4"), ("seq", "<u4"), ("time", "<u8"), ("sector", "<u8"),
                    ("bytes", "<u4"), ("action", "<u4"), ("pid", "<u4"), ("device", "<u4"),
                    ("cpu", "<u4"), ("error", "<u2"), ("pdu_len", "<u2")])
    best = float("inf")
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        view = np.memmap(path, dtype=rec, mode="r")
        d = (view["action"] & 0xFFFF) == ACT_ISSUE
        for dev in np.unique(view["device"][d]):
            rows = d & (view["device"] == dev)
            seek_from_arrays(view["sector"][rows], view["bytes"][rows] >> 9)
        best = min(best, time.perf_counter() - t0)
        del view
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--keep", type=Path, default=None, help="keep generated files here")
    ap.add_argument("--no-text", action="store_true", help="skip the text-path comparison")
    ap.add_argument("--floor", action="store_true",
                    help="also time the floor: a numpy view of a payload-free file + seek")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each side; the minimum wall time is reported (default 3)")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-parse-")) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        table = realistic_table(args.events)
        data = encode_blktrace(table)
        trace = tmp / "bench.blktrace"
        trace.write_bytes(data)
        a = table.action
        payload = int(np.isin(a, [ACT_REMAP, ACT_SPLIT, ACT_UNPLUG_IO]).sum()
                      + (a == ACT_MESSAGE).sum())
        n_msgs = int((a == ACT_MESSAGE).sum())
        del table, data
        gen = time.perf_counter() - t0
        size = trace.stat().st_size
        print(f"generated {args.events:,} events ({size / 1e6:.1f} MB, {payload / args.events:.1%}"
              f" of events with a payload, {n_msgs} messages) in {gen:.1f} s")

        # warm up numba (compiled once, cached on disk) on a small file
        small = tmp / "warm.blktrace"
        small.write_bytes(encode_blktrace(realistic_table(2000)))
        _parse_and_seek(small)

        rss0 = _rss_mb()
        runs = [_parse_and_seek(trace) for _ in range(max(1, args.repeat))]
        rss1 = _rss_mb()
        ours = min(r[0] for r in runs)
        _, n, nbytes, peak = runs[0]
        ref = min(_blkparse(trace, "/dev/null") for _ in range(max(1, args.repeat)))
        print(f"ours   : parse + seek histogram {ours:8.3f} s  {n / ours / 1e6:7.2f} M events/s")
        print(f"         peak traced memory {peak / 1e6:8.1f} MB  (maxrss +{rss1 - rss0:.0f} MB)"
              f"  table {nbytes / n:.1f} bytes/event")
        if ref == ref:
            print(f"blkparse -i - -o /dev/null: {ref:8.3f} s  {n / ref / 1e6:7.2f} M events/s")
            print(f"ratio ours/blkparse = {ours / ref:.4f}  (target <= 0.1)")
        else:
            print("blkparse not installed: no reference ratio")

        if args.floor and ref == ref:
            floor = _floor(tmp, args.events, args.repeat)
            print(f"floor  : numpy view of a payload-free file + seek histogram {floor:8.3f} s"
                  f" = {floor / ref:.4f} of blkparse (the issue's floor is about 1/25)")

        if not args.no_text and ref == ref:
            text = tmp / "bench.blkparse.txt"
            t_print = min(_blkparse(trace, str(text)) for _ in range(max(1, args.repeat)))
            t_text = float("inf")
            for _ in range(max(1, args.repeat)):
                t1 = time.perf_counter()
                parsed = parse_blkparse_text(text)
                t_text = min(t_text, time.perf_counter() - t1)
                del parsed
            parsed = parse_blkparse_text(text)
            print(f"text   : blkparse printing {t_print:8.3f} s ({text.stat().st_size / 1e6:.0f} MB);"
                  f" our text parse {t_text:8.3f} s ({len(parsed):,} events)")
            print(f"ratio text parse/blkparse print = {t_text / t_print:.4f}  (target <= 1)")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
