"""The binary merge stacks and orders the per-CPU parts one column at a time (bounded memory
on a 100M-event bundle) and gives exactly the table of the readable concat + stable sort."""

from __future__ import annotations

import numpy as np

from workers.events import COLUMNS, EventTable
from workers.traces.blktrace_bin import _merge_columns
from workers.traces.synth import realistic_table


def _parts(seed: int) -> list[EventTable]:
    t = realistic_table(30_000, seed=seed, cpus=4)
    # per-CPU files: each sorted, interleaved in time, with ties across files
    t.time_ns //= 1000
    return [t.take(np.flatnonzero(t.cpu == c)) for c in range(4)]


def test_merge_columns_equals_concat_and_stable_sort() -> None:
    for seed in (1, 2):
        parts = _parts(seed)
        ref = EventTable.concat(parts)
        ref = ref.take(np.argsort(ref.time_ns, kind="stable"))
        assert len(np.unique(ref.time_ns)) < len(ref)  # ties are there to be kept in order
        out = _merge_columns(parts)
        for name, dtype in COLUMNS:
            assert out[name].dtype == np.dtype(dtype)
            assert np.array_equal(out[name], getattr(ref, name)), name
        # the parts were consumed, so the bundle is not held twice
        assert all(len(getattr(p, name)) == 0 for p in parts for name, _ in COLUMNS)


def test_merge_columns_keeps_already_ordered_input() -> None:
    t = realistic_table(5_000, seed=3)
    half = len(t) // 2
    parts = [t.take(np.arange(half)), t.take(np.arange(half, len(t)))]
    out = _merge_columns(parts)
    for name, _ in COLUMNS:
        assert np.array_equal(out[name], getattr(t, name)), name
