"""Builders of hand-made event streams for the analyzer tests."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tests.shared import shared_dir
from workers.events import ACTION_CODES, RWBS_READ, RWBS_WRITE, EventTable, make_dev

REPO_ROOT = Path(__file__).resolve().parents[3]
#: the shared seeds: $BLKREVIEW_SHARED/seeds, else shared/seeds beside the repository (a CI
#: clone); tests/shared.py
SEED_DIRS = (shared_dir() / "seeds",)
SEED_DIR = next((d for d in SEED_DIRS if d.is_dir()), SEED_DIRS[0])
SEED_COPY_DIR = REPO_ROOT / "tests" / "data" / "seeds"


def seed_text(name: str) -> str:
    """A seed thread, from shared/seeds or the committed copy in tests/data/seeds."""
    for base in (*SEED_DIRS, SEED_COPY_DIR):
        p = base / name
        if p.exists():
            return p.read_text(encoding="utf-8", errors="replace")
    raise FileNotFoundError(name)


def seed_seek_blocks(text: str) -> list[list[str]]:
    """The ``Read|Write seek`` blocks of a seed, quote marks stripped, whitespace folded."""
    blocks: list[list[str]] = []
    cur: list[str] | None = None
    for raw in text.splitlines():
        line = " ".join(raw.lstrip(">").split())
        if line == "Read|Write seek":
            cur = [line]
            blocks.append(cur)
            continue
        if cur is None:
            continue
        if line.startswith("cnt ") or line.startswith(">=(KB)") or re.match(r"^\d+ \.\. \d+ :",
                                                                          line):
            cur.append(line)
        else:
            cur = None
    return blocks


def fold(text: str) -> list[str]:
    """Lines with runs of whitespace folded to one space, blank lines dropped."""
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def stream(sectors: Sequence[int], nr: Sequence[int] | int = 8, *, action: str = "D",
           dev: int = make_dev(8, 0), write: bool = False, times: Sequence[int] | None = None,
           pids: Sequence[int] | None = None) -> EventTable:
    """One device, one stage: requests at ``sectors`` of ``nr`` sectors, 1 us apart."""
    n = len(sectors)
    lens = np.full(n, nr) if isinstance(nr, int) else np.asarray(nr)
    return EventTable.from_columns(
        time_ns=np.arange(n) * 1000 if times is None else np.asarray(times),
        dev=np.full(n, dev), action=np.full(n, ACTION_CODES[action]),
        rwbs=np.full(n, RWBS_WRITE if write else RWBS_READ),
        sector=np.asarray(sectors, dtype=np.uint64), nr_sectors=lens,
        pid=np.asarray(pids) if pids is not None else np.full(n, 100),
    )


def sectors_from_gaps(gaps_sectors: Sequence[int], nr: int = 128, start: int = 1 << 20
                      ) -> list[int]:
    """Start sectors whose seed-000 seek distances (next - prev end) are ``gaps_sectors``."""
    out = [start]
    for g in gaps_sectors:
        out.append(out[-1] + nr + g)
    return out


def requests(spec: Sequence[tuple[int, int, str, dict[str, int]]], *,
             dev: int = make_dev(8, 0), pid: int = 100) -> EventTable:
    """Requests through stages: ``(sector, nr, "R"|"W", {"Q": t, "G": t, "D": t, "C": t})``.

    Events are emitted sorted by time; stages missing from a dict are not emitted.
    """
    cols: dict[str, list[int]] = {k: [] for k in ("time_ns", "action", "rwbs", "sector",
                                                  "nr_sectors")}
    for sector, nr, rw, stages in spec:
        for letter, t in stages.items():
            cols["time_ns"].append(t)
            cols["action"].append(ACTION_CODES[letter])
            cols["rwbs"].append(RWBS_WRITE if rw == "W" else RWBS_READ)
            cols["sector"].append(sector)
            cols["nr_sectors"].append(nr)
    n = len(cols["time_ns"])
    t = EventTable.from_columns(dev=np.full(n, dev), pid=np.full(n, pid),
                                **{k: np.asarray(v) for k, v in cols.items()})
    return t.sorted_by_time()


MS = 1_000_000


def two_cpu_reads(n: int = 8, *, seq_start: int = 1) -> EventTable:
    """``n`` sequential 64 KiB reads issued alternately from CPU 0 and CPU 1, in per-CPU blocks.

    Request i: Q at 0.9 + i ms, D at 1 + i ms, C at 1.5 + i ms, sector 128 * i. The rows are
    stored the way per-CPU files are read (every CPU 0 row, then every CPU 1 row), so times are
    not monotone across CPUs. Sequence numbers run per CPU from ``seq_start`` modulo 2**32 (a
    start near 2**32 makes them wrap).
    """
    cols: dict[str, list[int]] = {k: [] for k in ("time_ns", "action", "sector", "cpu", "seq")}
    for cpu in (0, 1):
        seq = seq_start
        for i in range(cpu, n, 2):
            d = MS + i * MS
            for letter, t in (("Q", d - MS // 10), ("D", d), ("C", d + MS // 2)):
                cols["time_ns"].append(t)
                cols["action"].append(ACTION_CODES[letter])
                cols["sector"].append(128 * i)
                cols["cpu"].append(cpu)
                cols["seq"].append(seq % (1 << 32))
                seq += 1
    m = len(cols["time_ns"])
    return EventTable.from_columns(
        time_ns=np.asarray(cols["time_ns"]), action=np.asarray(cols["action"]),
        sector=np.asarray(cols["sector"], dtype=np.uint64), cpu=np.asarray(cols["cpu"]),
        seq=np.asarray(cols["seq"], dtype=np.uint32), dev=np.full(m, make_dev(8, 0)),
        rwbs=np.full(m, RWBS_READ), nr_sectors=np.full(m, 128), pid=np.full(m, 100))
