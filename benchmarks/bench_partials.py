"""Per-shard partial results (workers/analyzers/partial.py): what they cost and what they save.

    .venv/bin/python benchmarks/bench_partials.py --events 2000000 --cpus 4

Generates a ``--events`` table on ``--cpus`` CPUs (``workers.traces.synth.realistic_table``),
splits it by CPU as blktrace writes it, and times (best of ``--repeat``): ``partials_of`` on
each shard (the work a shard task adds), ``merge_partials`` (the callback), and ``analyze`` on
the whole table with and without the merged partials (the callback's analysis); checks that
both analyses give the same JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.analyzers import analyze  # noqa: E402
from workers.analyzers.partial import merge_partials, partials_of  # noqa: E402
from workers.traces.synth import realistic_table  # noqa: E402


def best(fn, repeat: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--cpus", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    table = realistic_table(a.events, cpus=a.cpus).sorted_by_time()
    anchor = int(table.time_ns.min())
    shards = [table.take(np.flatnonzero(table.cpu == c)) for c in range(a.cpus)]
    t_part = [best(lambda s=s: partials_of(s, anchor_ns=anchor), a.repeat) for s in shards]
    parts = [p for _, p in t_part]
    t_merge, merged = best(lambda: merge_partials(parts), a.repeat)  # type: ignore[arg-type]
    t_plain, plain = best(lambda: analyze(table), a.repeat)
    t_with, with_p = best(lambda: analyze(table, partials=merged), a.repeat)  # type: ignore[arg-type]
    same = json.dumps(plain, sort_keys=True) == json.dumps(with_p, sort_keys=True)
    print(f"events {len(table):,} on {a.cpus} shards")
    print("partials_of per shard: " + ", ".join(f"{t:.3f} s" for t, _ in t_part))
    print(f"merge_partials: {t_merge:.4f} s; stored size {sum(len(p.to_bytes()) for p in parts):,} B")
    print(f"analyze whole table: {t_plain:.2f} s; with partials: {t_with:.2f} s "
          f"(saves {t_plain - t_with:.2f} s); identical JSON: {same}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
