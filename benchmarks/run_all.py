"""Run every benchmark at a small size (a smoke run); pass --full for the issue's sizes.

Each benchmark prints its own figures and ratios against a reference run in the same process
(blkparse on the same file). Figures recorded in the docs say which size and command they came from.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SMALL = {
    "bench_parse.py": ["--events", "200000"],
    "bench_analyze.py": ["--events", "200000"],
    "bench_replay.py": ["--bios", "20000"],
    "bench_contention.py": ["--sim-seconds", "60"],
    "bench_pages.py": ["--events", "200000", "--seconds", "5"],
    "bench_compare_memory.py": ["--events", "1000000"],
}


def main(argv: list[str]) -> int:
    full = "--full" in argv
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        args = [] if full else SMALL.get(script.name, [])
        print(f"\n=== {script.name} {' '.join(args)}", flush=True)
        rc = subprocess.call([sys.executable, str(script), *args])
        if rc:
            print(f"=== {script.name} exited {rc}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
