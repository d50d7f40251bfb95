"""Helpers shared by the model tests: small stacks, running a replay, reading D streams."""

from __future__ import annotations

import numpy as np

from workers.events import ACT_ISSUE, ACT_SPLIT, RWBS_READ, EventTable, dev_str


def d_stream(table: EventTable, dev: int | None = None) -> list[tuple[str, int, int]]:
    """(dev, sector, nr_sectors) of every D event, in table order."""
    m = table.action == ACT_ISSUE
    if dev is not None:
        m &= table.dev == dev
    idx = np.flatnonzero(m)
    return [(dev_str(int(table.dev[i])), int(table.sector[i]), int(table.nr_sectors[i]))
            for i in idx]


def x_points(table: EventTable, dev: int) -> list[tuple[int, int]]:
    """(sector, new sector) of every X (split) event of one device."""
    idx = np.flatnonzero((table.action == ACT_SPLIT) & (table.dev == dev))
    return [(int(table.sector[i]), int(table.aux[i])) for i in idx]


def thread_table(rows: list[tuple[int, int, int, int, int]]) -> EventTable:
    """A blktrace table of one thread's reads (pid 7) from ``(time, dev, action, sector,
    nr_sectors)`` rows."""
    t, dev, act, sec, nr = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    n = len(t)
    table = EventTable.from_columns(time_ns=t, dev=dev, action=act, sector=sec, nr_sectors=nr,
                                    pid=np.full(n, 7), rwbs=np.full(n, RWBS_READ))
    table.meta["format"] = "blktrace"
    return table
