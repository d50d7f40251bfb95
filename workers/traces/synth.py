"""Synthetic event tables: every action type, and large realistic streams.

Used by the blkparse equivalence tests (write a binary with :mod:`workers.traces.writers`, let
``blkparse`` print it, compare) and by ``benchmarks/bench_parse.py``. Generation is vectorized
so a 10-million-event stream takes seconds, not minutes.
"""

from __future__ import annotations

import numpy as np

from workers.events import (
    ACT_BACKMERGE,
    ACT_BOUNCE,
    ACT_COMPLETE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_MESSAGE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_REQUEUE,
    ACT_SLEEPRQ,
    ACT_SPLIT,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    NULL_COMM,
    EventTable,
    make_dev,
    rwbs_from_text,
)


def all_actions_table() -> EventTable:
    """Every action blkparse prints, many RWBS spellings, 2 devices, 3 cpus, errors, messages.

    Rows are in time order; sequence numbers count per (device, cpu) from 1.
    """
    sda, sdb, md = make_dev(8, 0), make_dev(8, 16), make_dev(9, 127)
    comms = [NULL_COMM, "fio", "kworker/u8:2", "dd", "a b-c", "msg: odd length!",
             "demo start", "x"]
    # (dev, cpu, pid, action, rwbs, sector, nr, aux, aux2, error, comm)
    rows = [
        (sda, 0, 0, ACT_MESSAGE, "N", 0, 0, 0, 0, 0, 6),
        (sda, 0, 4242, ACT_REMAP, "W", 2048, 8, 0, make_dev(8, 1), 0, 0),
        (sda, 0, 4242, ACT_QUEUE, "WS", 2048, 8, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_GETRQ, "WS", 2048, 8, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_PLUG, "N", 0, 0, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_QUEUE, "WS", 2056, 8, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_BACKMERGE, "WS", 2056, 8, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_QUEUE, "WS", 2040, 8, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_FRONTMERGE, "WS", 2040, 8, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_INSERT, "WS", 2040, 24, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_UNPLUG_IO, "N", 0, 0, 1, 0, 0, 1),
        (sda, 0, 4242, ACT_ISSUE, "WS", 2040, 24, 0, 0, 0, 1),
        (sdb, 1, 777, ACT_QUEUE, "R", 100000, 512, 0, 0, 0, 3),
        (sdb, 1, 777, ACT_SPLIT, "R", 100000, 512, 100256, 0, 0, 3),
        (sdb, 1, 777, ACT_SLEEPRQ, "R", 100000, 256, 0, 0, 0, 3),
        (sdb, 1, 777, ACT_GETRQ, "R", 100000, 256, 0, 0, 0, 3),
        (sdb, 1, 777, ACT_GETRQ, "R", 100256, 256, 0, 0, 0, 3),
        (sdb, 1, 777, ACT_BOUNCE, "R", 100256, 256, 0, 0, 0, 3),
        (sdb, 1, 777, ACT_INSERT, "R", 100000, 256, 0, 0, 0, 3),
        (sdb, 1, 777, ACT_ISSUE, "R", 100000, 256, 0, 0, 0, 3),
        (sdb, 1, 777, ACT_ISSUE, "R", 100256, 256, 0, 0, 0, 3),
        (sda, 0, 0, ACT_COMPLETE, "WS", 2040, 24, 0, 0, 0, 0),
        (sdb, 1, 0, ACT_REQUEUE, "R", 100256, 256, 0, 0, 0, 0),
        (sdb, 1, 0, ACT_ISSUE, "R", 100256, 256, 0, 0, 0, 0),
        (sdb, 1, 0, ACT_COMPLETE, "R", 100000, 256, 0, 0, 0, 0),
        (sdb, 1, 0, ACT_COMPLETE, "R", 100256, 256, 0, 0, 5, 0),
        (sda, 2, 31337, ACT_QUEUE, "FWS", 0, 0, 0, 0, 0, 4),
        (sda, 2, 31337, ACT_ISSUE, "FWS", 0, 0, 0, 0, 0, 4),
        (sda, 2, 0, ACT_COMPLETE, "FWS", 0, 0, 0, 0, 0, 0),
        (sda, 2, 31337, ACT_QUEUE, "WFS", 4096, 8, 0, 0, 0, 4),
        (sda, 2, 31337, ACT_QUEUE, "FWFSM", 4104, 8, 0, 0, 0, 4),
        (sda, 0, 4242, ACT_QUEUE, "D", 8192, 2048, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_COMPLETE, "D", 8192, 2048, 0, 0, 95, 1),
        (sda, 0, 0, ACT_UNPLUG_TIMER, "N", 0, 0, 3, 0, 0, 0),
        (sda, 0, 4242, ACT_QUEUE, "RAM", 64, 8, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_QUEUE, "RA", 72, 8, 0, 0, 0, 1),
        (sda, 0, 4242, ACT_QUEUE, "RS", 80, 8, 0, 0, 0, 1),
        (sda, 0, 0, ACT_MESSAGE, "N", 0, 0, 0, 0, 0, 5),
        (md, 1, 2, ACT_QUEUE, "R", 7, 2**32 - 1 >> 9, 0, 0, 0, 2),
        (sdb, 1, 2, ACT_REMAP, "R", 123456789012, 1024, 2**40, md, 0, 2),
        (sdb, 1, 2, ACT_QUEUE, "R", 123456789012, 1024, 0, 0, 0, 2),
        (sdb, 1, 2, ACT_UNPLUG_IO, "N", 0, 0, 2**63 + 5, 0, 0, 2),
        (sda, 0, 99999, ACT_QUEUE, "W", 1 << 60, 1, 0, 0, 0, 7),
    ]
    n = len(rows)
    cols = list(zip(*rows, strict=True))
    time_ns = np.arange(n, dtype=np.int64) * 1000 + 5_000_000_000
    time_ns[-5:] += 1_234_567_890  # a jump across a second boundary
    table = EventTable(
        {
            "time_ns": time_ns,
            "dev": np.array(cols[0], dtype=np.uint32),
            "cpu": np.array(cols[1], dtype=np.uint16),
            "pid": np.array(cols[2], dtype=np.uint32),
            "action": np.array(cols[3], dtype=np.uint8),
            "rwbs": np.array([rwbs_from_text(r) for r in cols[4]], dtype=np.uint16),
            "sector": np.array(cols[5], dtype=np.uint64),
            "nr_sectors": np.array(cols[6], dtype=np.uint32),
            "aux": np.array(cols[7], dtype=np.uint64),
            "aux2": np.array(cols[8], dtype=np.uint32),
            "error": np.array(cols[9], dtype=np.int16),
            "comm": np.array(cols[10], dtype=np.uint32),
        },
        comms=comms,
    )
    table.seq = _seq_per_stream(table)
    return table


def _seq_per_stream(table: EventTable) -> np.ndarray:  # type: ignore[type-arg]
    """1, 2, 3... per (device, cpu) in row order; 0 for messages."""
    seq = np.zeros(len(table), dtype=np.uint32)
    counters: dict[tuple[int, int], int] = {}
    for i in range(len(table)):
        if table.action[i] == ACT_MESSAGE:
            continue
        key = (int(table.dev[i]), int(table.cpu[i]))
        counters[key] = counters.get(key, 0) + 1
        seq[i] = counters[key]
    return seq


#: One I/O unit of the realistic stream: action, rwbs, sector offset, size, aux kind.
_UNIT = (
    (ACT_REMAP, 0, 2048),  # payload 16
    (ACT_QUEUE, 0, 2048),
    (ACT_SPLIT, 0, 2048),  # payload 8
    (ACT_GETRQ, 0, 1024),
    (ACT_GETRQ, 1024, 1024),
    (ACT_PLUG, 0, 0),
    (ACT_INSERT, 0, 1024),
    (ACT_INSERT, 1024, 1024),
    (ACT_UNPLUG_IO, 0, 0),  # payload 8
    (ACT_ISSUE, 0, 1024),
    (ACT_ISSUE, 1024, 1024),
    (ACT_COMPLETE, 0, 1024),
    (ACT_COMPLETE, 1024, 1024),
)


def realistic_table(n_events: int, *, seed: int = 1, cpus: int = 4,
                    devices: int = 2) -> EventTable:
    """A large dd-like stream: remap -> Q -> split -> 2x G/I/D/C with plug/unplug.

    3 of every 13 records carry a payload (A: 16 bytes, X and U: 8), i.e. 23%; completions
    come from pid 0 (IRQ context, comm ``(null)``); one odd-length message every ~100k events.
    """
    rng = np.random.default_rng(seed)
    unit = len(_UNIT)
    n_units = max(1, -(-n_events // unit))
    acts = np.array([u[0] for u in _UNIT], dtype=np.uint8)
    offs = np.array([u[1] for u in _UNIT], dtype=np.uint64)
    sizes = np.array([u[2] for u in _UNIT], dtype=np.uint32)
    action = np.tile(acts, n_units)[:n_events]
    k = len(action)
    unit_idx = np.repeat(np.arange(n_units, dtype=np.int64), unit)[:k]
    # sequential per unit, with occasional random jumps (seeks)
    base = np.cumsum(np.where(rng.random(n_units) < 0.1,
                              rng.integers(0, 1 << 24, n_units), 2048)).astype(np.uint64)
    sector = base[unit_idx] + np.tile(offs, n_units)[:k]
    nr = np.tile(sizes, n_units)[:k]
    cpu_of_unit = rng.integers(0, cpus, n_units).astype(np.uint16)
    dev_of_unit = (make_dev(8, 0) + 16 * rng.integers(0, devices, n_units)).astype(np.uint32)
    pid_of_unit = (1000 + rng.integers(0, 50, n_units)).astype(np.uint32)
    cpu = cpu_of_unit[unit_idx]
    dev = dev_of_unit[unit_idx]
    pid = pid_of_unit[unit_idx]
    is_c = action == ACT_COMPLETE
    pid = np.where(is_c, np.uint32(0), pid)
    rwbs = np.where((action == ACT_PLUG) | (action == ACT_UNPLUG_IO), np.uint16(8),
                    np.uint16(1))  # N / R
    aux = np.zeros(k, dtype=np.uint64)
    aux[action == ACT_SPLIT] = sector[action == ACT_SPLIT] + np.uint64(1024)
    aux[action == ACT_UNPLUG_IO] = 2
    remap = action == ACT_REMAP
    aux[remap] = sector[remap] // np.uint64(8)
    aux2 = np.where(remap, np.uint32(make_dev(9, 0)), np.uint32(0)).astype(np.uint32)
    nr = np.where((action == ACT_PLUG) | (action == ACT_UNPLUG_IO), np.uint32(0), nr)
    time_ns = np.cumsum(rng.integers(200, 5000, k)).astype(np.int64)
    comms = [NULL_COMM] + [f"worker-{i}" for i in range(50)]
    comm = np.where(pid == 0, np.uint32(0), pid - np.uint32(999)).astype(np.uint32)
    msg_rows = np.arange(50_000, k, 100_000)
    if len(msg_rows):
        comms.append("checkpoint: odd-length note")  # 27 bytes
        action[msg_rows] = ACT_MESSAGE
        comm[msg_rows] = len(comms) - 1
        rwbs[msg_rows] = 8
        sector[msg_rows] = 0
        nr[msg_rows] = 0
        aux[msg_rows] = 0
    table = EventTable({"time_ns": time_ns, "dev": dev, "cpu": cpu, "pid": pid,
                        "action": action, "rwbs": rwbs, "sector": sector, "nr_sectors": nr,
                        "aux": aux, "aux2": aux2, "comm": comm}, comms=comms)
    return table
