"""CPU time of ``analyze()`` on a ``realistic_table``, for comparing two versions of the engine.

    cd /tmp && PYTHONPATH=/path/to/checkout /path/to/.venv/bin/python \
        /path/to/benchmarks/bench_analyze_cpu.py --events 1000000 --devices 2 --label new

Imports ``workers`` from ``PYTHONPATH`` (not from this file's checkout), so the same script
times an older tree unpacked with ``git archive REV workers | tar -x -C /tmp/old``: run the two
interleaved, each in a fresh process, and compare CPU seconds (the machine is shared: wall
time follows the load, CPU time much less). Table generation is not timed. Prints one line:
label, events, devices, CPU and wall seconds of ``analyze()``, the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    from workers.analyzers import analyze
    from workers.traces.synth import realistic_table

    table = realistic_table(args.events, seed=args.seed, cpus=4, devices=args.devices)
    c0, w0 = time.process_time(), time.perf_counter()
    analyze(table)
    c1, w1 = time.process_time(), time.perf_counter()
    print(f"{args.label} events={args.events} devices={args.devices} cpu={c1 - c0:.2f}s "
          f"wall={w1 - w0:.2f}s load={os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
