"""Peak memory of each stage of the parallel ingest's data path, each in its own process.

    .venv/bin/python benchmarks/bench_merge_memory.py --events 100000000 --cpus 8
    .venv/bin/python benchmarks/bench_merge_memory.py --events 20000000 --cpus 1 --range-mb 256

Writes ``--cpus`` per-CPU binary files of ``--events`` events (bench_ingest_workers.write_trace),
then runs, each in a fresh Python process so its peak RSS (VmHWM) is its own: every shard
(parse, partials, part written to a local file: what the ``parse_shard`` task does), the
chunked merge of the part files into a column store (``streammerge.ingest_stored``), the
stored table file written from the store (``ColumnStore.save_npz``) and, when
``workers.analyzers.stream`` exists, the chunked analysis. With ``--range-mb`` a file over that
size is parsed as byte ranges (workers/traces/byterange.py), a shard each as the task runs it
(the range fetched into a temporary file, parsed, partials, part written), and the merge
chains the ranges' parts (``RangedPartFile``).
No database, broker or S3: bench_ingest_workers.py measures the whole task path end to end.
Prints one JSON line per stage (seconds, peak RSS in MB) and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARD = """
import sys, time
from benchmarks.bench_merge_memory import hwm
from workers.analyzers.partial import partials_of
from workers.traces.shards import parse_shard, write_part
t0 = time.perf_counter()
path, out = sys.argv[1], sys.argv[2]
part = parse_shard(path, path.rsplit('/', 1)[1], manifest=None)
partials = partials_of(part.table, anchor_ns=None)
with open(out, 'wb') as fh:
    write_part(part, fh)
print(part.events, time.perf_counter() - t0, hwm())
"""

RANGE = """
import os, sys, time
from benchmarks.bench_merge_memory import hwm
from workers.analyzers.partial import partials_of
from workers.traces.byterange import parse_range_fetched
from workers.traces.shards import write_part
t0 = time.perf_counter()
path, out, i, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
name = path.rsplit('/', 1)[1]
def fetch(offset, length, fh):
    with open(path, 'rb') as src:
        src.seek(offset)
        left = length
        while left:
            data = src.read(min(left, 8 << 20))
            fh.write(data)
            left -= len(data)
head = open(path, 'rb').read(4)
part = parse_range_fetched(fetch, size=os.path.getsize(path), head=head, index=i, count=n,
                           name=name, basename=name)
partials = partials_of(part.table, anchor_ns=None)
with open(out, 'wb') as fh:
    write_part(part, fh)
print(part.events, time.perf_counter() - t0, hwm())
"""

MERGE = """
import json, sys, time
from benchmarks.bench_merge_memory import hwm
from pathlib import Path
from workers.traces.byterange import RangedPartFile
from workers.traces.shards import PartFile
from workers.traces.streammerge import ingest_stored
t0 = time.perf_counter()
spec = json.loads(Path(sys.argv[1]).read_text())
paths = [f for f, _ in spec]
parts = [PartFile(p[0]) if len(p) == 1 else RangedPartFile([PartFile(x) for x in p])
         for _, p in spec]
out = Path(sys.argv[-1])
names = [p.rsplit('/', 1)[1] for p in paths]
st = ingest_stored(paths, names=names, strict=False, parts=dict(zip(names, parts)), out=out)
assert st is not None
print(len(st.store), time.perf_counter() - t0,
      hwm())
"""

SAVE = """
import sys, time
from benchmarks.bench_merge_memory import hwm
from workers.traces.columnstore import ColumnStore
t0 = time.perf_counter()
store = ColumnStore(sys.argv[1])
store.save_npz(sys.argv[2])
print(len(store), time.perf_counter() - t0, hwm())
"""

ANALYZE = """
import json, sys, time
from benchmarks.bench_merge_memory import hwm
from workers.analyzers.stream import analyze_chunks
from workers.traces.columnstore import ColumnStore
t0 = time.perf_counter()
store = ColumnStore(sys.argv[1])
res = analyze_chunks(lambda: store.chunks())
json.dumps(res, default=str)
print(len(store), time.perf_counter() - t0, hwm())
"""


def hwm() -> int:
    """This process's peak RSS in kB (VmHWM: of this exec's memory only; ``ru_maxrss`` keeps
    the parent's peak across fork and exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def stage(name: str, code: str, args: list[str]) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True)
    rows, secs, kb = out.stdout.split()[-3:]
    res = {"stage": name, "rows": int(rows), "seconds": round(float(secs), 1),
           "peak_rss_mb": round(int(kb) / 1024), "loadavg": [round(x, 2)
                                                           for x in os.getloadavg()]}
    print(json.dumps(res), flush=True)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=8_000_000)
    ap.add_argument("--cpus", type=int, default=8)
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    ap.add_argument("--range-mb", type=float, default=-1,
                    help="parse a file over this size as byte ranges of about this size "
                         "(BLKREVIEW_SHARD_RANGE_MB); -1: every file whole")
    ap.add_argument("--no-merge", action="store_true", help="the shards only")
    args = ap.parse_args()
    from benchmarks.bench_ingest_workers import write_trace

    with tempfile.TemporaryDirectory(prefix="bench-merge-", dir=args.dir) as tmp_s:
        tmp = Path(tmp_s)
        t0 = time.perf_counter()
        files = write_trace(args.events, args.cpus, tmp)
        print(json.dumps({"stage": "write_trace", "seconds": round(time.perf_counter() - t0, 1),
                          "bytes": sum(f.stat().st_size for f in files)}), flush=True)
        from workers.traces.byterange import range_count

        budget = int(args.range_mb * 1024 * 1024) if args.range_mb > 0 else -1
        parts: list[list[Path]] = []
        for f in files:
            n = range_count(f.stat().st_size, budget)
            if n == 1:
                p = tmp / (f.name + ".part")
                stage(f"shard {f.name}", SHARD, [str(f), str(p)])
                parts.append([p])
                continue
            ranges = []
            for i in range(n):
                p = tmp / f"{f.name}.{i}of{n}.part"
                stage(f"shard {f.name} range {i}/{n}", RANGE, [str(f), str(p), str(i), str(n)])
                ranges.append(p)
            parts.append(ranges)
        if args.no_merge:
            return 0
        return _merge(files, parts, tmp)


def _merge(files: list[Path], parts: list[list[Path]], tmp: Path) -> int:
    store = tmp / "store"
    spec = tmp / "parts.json"
    spec.write_text(json.dumps([[str(f), [str(x) for x in p]]
                                for f, p in zip(files, parts, strict=True)]))
    stage("merge", MERGE, [str(spec), str(store)])
    stage("save_npz", SAVE, [str(store), str(tmp / "events.npz")])
    try:
        import workers.analyzers.stream  # noqa: F401
    except ImportError:
        print(json.dumps({"stage": "analyze_chunks", "skipped": "no workers.analyzers.stream"}))
        return 0
    stage("analyze_chunks", ANALYZE, [str(store)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
