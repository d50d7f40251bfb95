"""The analysis of a table handed out as time-ordered chunks, in bounded memory.

``analyze_chunks(chunks)`` returns exactly what :func:`workers.analyzers.analyze` returns for
the concatenation of the chunks (``analyze`` itself runs this over views of its table), while
holding one chunk at a time plus per-device state. ``chunks`` is a factory: every call gives a
fresh iterator over the same chunks (a column store on local disk reads them again), because
the analysis makes three passes:

1. **census**: rows per device and action letter (with and without data), the largest request
   per stage, the time span, the time of the last issue the lineage records follow, the top
   devices of the remaps. From it: each device's stage (:func:`common.choose_stage`), the
   throughput bins, ``max_sectors`` when it is the largest seen, the LBA slices.
2. **sections**: every stage stream is fed to its section's accumulator in issue order
   (``SeekAcc``, ``SizeAcc``, ``FragAcc``, ``OrderAcc``, ``MinMaxDecimator``, ``SeriesAcc``,
   ``IostatAcc``, ``RemapAcc``: the same classes the whole-table functions of those modules
   run once), and the stage pairs are matched chunk by chunk (:class:`PairStream`): a
   B event takes the nearest earlier A of its (device, sector) and an A its first B, as
   :class:`common.StageMatcher` pairs them, with the one A per key that may still be taken
   (the last one, not yet followed by a B) carried to the next chunk. Latencies go into
   value -> count maps (:class:`common.ValueCounts`); which A and B events were paired is
   kept as one bit per event for the next pass; the rows a lineage record can read (up to
   the last followed issue) are kept with the pairs of those issues.
3. **occupancy**: in-flight (D..C) and scheduler (G..D) levels are swept in time order
   (:class:`occupancy.StepSweep`), +1 at each paired start and -1 at each paired end, read
   off pass 2's bits (a start is only known to count once its end is found); the in-flight
   sweep's busy time is iostat's %util (the union of the D..C intervals), a Q..C sweep serves
   devices without D. Skipped without timestamps.

Memory beyond one chunk: the value -> count maps (latencies of every pair, seek distances
and sizes: 16 bytes per distinct value, or 8 per value when most are distinct), two bits per
matched stage event, the unpaired A events carried (24 bytes each), per-process counters,
the LBA points and the lineage rows (bounded by ``LINEAGE_LIMIT`` issues).

Preconditions: chunks share the whole table's ``comms`` list, ``devices``, ``meta`` and
``time_known``; with timestamps, time never goes back across the concatenation (ties keep
chunk order), as the merged table is sorted; a chunk that breaks this raises ValueError.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.common import (
    MATCH_STAGES,
    StageRows,
    ValueCounts,
    choose_stage,
    first_pairs,
    last_marked,
    match_key,
    rows_by_device,
)
from workers.analyzers.config import LINEAGE_LIMIT, RESULTS_VERSION, AnalyzeConfig
from workers.analyzers.fragmentation import FragAcc, resolve_chunk, resolve_max_sectors
from workers.analyzers.latency import LATENCY_PAIRS, distribution_of
from workers.analyzers.lba import MinMaxDecimator, lba_points
from workers.analyzers.lineage import RECORD_PAIRS, lineage
from workers.analyzers.occupancy import OCCUPANCY_PAIRS, StepSweep, occupancy_result
from workers.analyzers.ordering import OrderAcc, RemapAcc
from workers.analyzers.partial import (
    Partials,
    action_counts,
    size_stats_of,
    stage_partial,
    time_series_of,
)
from workers.analyzers.seek import SeekAcc
from workers.analyzers.sizes import SizeAcc
from workers.analyzers.throughput import (
    IOSTAT_COLUMNS,
    START_PAIRS,
    IostatAcc,
    SeriesAcc,
    mean_rows,
    nice_bin_ns,
)
from workers.events import (
    ACT_BACKMERGE,
    ACT_FRONTMERGE,
    ACT_REMAP,
    ACT_SPLIT,
    ACTION_CODES,
    ACTION_LETTERS,
    EventTable,
    dev_str,
    parse_dev,
)

__all__ = ["CHUNK_ROWS", "ChunkSource", "KeyedEvents", "PairStream", "analyze_chunks",
           "table_chunks"]

#: Rows per view when :func:`workers.analyzers.analyze` runs over a table in memory.
CHUNK_ROWS = 1 << 22

ChunkSource = Callable[[], Iterable[EventTable]]

#: Every stage pair a section reads: latencies, iostat starts and %util, occupancy, lineage.
MATCH_PAIRS: tuple[tuple[str, str], ...] = tuple(dict.fromkeys(
    list(LATENCY_PAIRS) + list(START_PAIRS) + [(a, b) for _k, a, b, _w in OCCUPANCY_PAIRS]
    + [(a, b) for a, b, _by_a in RECORD_PAIRS]))
#: Pairs only the lineage records read: not matched once their issues (the first
#: LINEAGE_LIMIT D events) are behind.
LINEAGE_ONLY: frozenset[tuple[str, str]] = frozenset(MATCH_PAIRS) - frozenset(
    list(LATENCY_PAIRS) + list(START_PAIRS) + [(a, b) for _k, a, b, _w in OCCUPANCY_PAIRS]
    + [("D", "C"), ("Q", "C")])
#: The pairs swept in pass 3 (their paired events are remembered as bits in pass 2):
#: in flight and %util (D..C), scheduler (G..D), %util without D (Q..C).
SWEEP_PAIRS: tuple[tuple[str, str], ...] = (("D", "C"), ("G", "D"), ("Q", "C"))

_NO_ROWS = np.zeros(0, np.int64)
#: By action code: one of the matched stages (Q/G/I/D/C).
_MATCH_LUT = np.zeros(256, bool)
_MATCH_LUT[[ACTION_CODES[s] for s in MATCH_STAGES]] = True


def table_chunks(table: EventTable, rows: int = CHUNK_ROWS) -> Iterator[EventTable]:
    """Consecutive views (no copy) of ``rows`` rows of ``table``, sharing its comms, devices,
    meta and time_known."""
    n = len(table)
    for lo in range(0, max(n, 1), max(1, rows)):
        cols = {k: v[lo:lo + rows] for k, v in table.columns().items()}
        yield EventTable(cols, comms=table.comms, devices=table.devices,
                         time_known=table.time_known, meta=table.meta)


# --- pass 1 -------------------------------------------------------------------------------------

@dataclass
class _DevCount:
    """One device's rows by action code: all, with data, and the largest request."""

    actions: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(256, np.int64))
    data: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(256, np.int64))
    max_nr: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(256, np.int64))


class _Census:
    """Pass 1: what the sections must know before they see a row."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.events = 0
        self.t_min: int | None = None
        self.t_max: int | None = None
        self._last_t: int | None = None
        self.devs: dict[int, _DevCount] = {}
        self.known: set[int] = set()
        self.d_data = 0
        self.horizon: int | None = None  # latest time among the issues the records follow
        self.tops: set[int] = set()
        self.first: EventTable | None = None

    def add(self, ch: EventTable) -> None:
        if self.first is None:
            self.first = ch.take(np.zeros(0, dtype=np.intp))
        self.known.update(int(d) for d in ch.devices)
        n = len(ch)
        if not n:
            return
        t = ch.time_ns
        if ch.time_known:
            if (self._last_t is not None and int(t[0]) < self._last_t) or bool(
                    np.any(t[1:] < t[:-1])):
                raise ValueError("chunks must be in time order (the merged table's order)")
            self._last_t = int(t[-1])
            lo, hi = int(t[0]), int(t[-1])  # in time order (checked above)
            self.t_min = lo if self.t_min is None else min(self.t_min, lo)
            self.t_max = hi if self.t_max is None else max(self.t_max, hi)
        self.events += n
        act = ch.action
        nr = ch.nr_sectors
        has = nr > 0
        # the devices seen so far usually cover the chunk: one searchsorted, no unique
        u = np.array(sorted(self.devs), dtype=ch.dev.dtype)
        pos = np.searchsorted(u, ch.dev) if len(u) else None
        if pos is None or not bool(np.all(u[np.minimum(pos, len(u) - 1)] == ch.dev)):
            u = np.union1d(u, np.unique(ch.dev)).astype(ch.dev.dtype)  # a hash, no sort
            pos = np.searchsorted(u, ch.dev)
        code = pos.astype(np.int64) * 256 + act
        del pos
        acts = np.bincount(code, minlength=len(u) * 256).reshape(len(u), 256)
        data = np.bincount(code[has], minlength=len(u) * 256).reshape(len(u), 256)
        flat = np.zeros(len(u) * 256, np.int64)
        match = has & _MATCH_LUT[act]
        np.maximum.at(flat, code[match], nr[match].astype(np.int64))
        mx = flat.reshape(len(u), 256)
        for i, d in enumerate(int(x) for x in u):
            dc = self.devs.setdefault(d, _DevCount())
            dc.actions += acts[i]
            dc.data += data[i]
            np.maximum(dc.max_nr, mx[i], out=dc.max_nr)
        d_rows = np.flatnonzero((act == ACTION_CODES["D"]) & has)
        if self.d_data < self.limit and len(d_rows):
            take = d_rows[: self.limit - self.d_data]
            hi = int(t[take].max())
            self.horizon = hi if self.horizon is None else max(self.horizon, hi)
        self.d_data += len(d_rows)
        remap = act == ACT_REMAP
        if remap.any():
            self.tops.update(int(x) for x in np.unique(ch.aux2[remap]))

    def device_ids(self) -> list[int]:
        return sorted(set(self.devs) | self.known)


# --- the streaming matcher ----------------------------------------------------------------------

@dataclass
class Pairs:
    """Pairs found in one chunk: times and stage ordinals of both events, the B event's row in
    the chunk."""

    time_a: npt.NDArray[np.int64]
    ord_a: npt.NDArray[np.int64]
    time_b: npt.NDArray[np.int64]
    ord_b: npt.NDArray[np.int64]
    row_b: npt.NDArray[np.int64]


@dataclass
class KeyedEvents:
    """One chunk's Q/G/I/D/C events with data, sorted once by (device, sector) key, chunk
    (time) order inside a key: every stage pair's matching reads its two letters off it.

    ``key`` holds 8 bits of the device's index and 56 of the sector (``common.match_key``);
    ``hi`` the rest of the index (0 below 256 devices), sorted first.
    """

    key: npt.NDArray[np.uint64]
    hi: npt.NDArray[np.int64]
    letter: npt.NDArray[np.uint8]  # index into MATCH_STAGES
    time: npt.NDArray[np.int64]
    ord: npt.NDArray[np.int64]  # ordinal among the table's events of that letter
    row: npt.NDArray[np.int64]  # row in the chunk
    by_letter: list[npt.NDArray[np.intp]] = field(default_factory=list)  # positions per letter

    def __post_init__(self) -> None:
        if not self.by_letter:
            self.by_letter = [np.flatnonzero(self.letter == i) for i in range(len(MATCH_STAGES))]

    def positions(self, a: int, b: int) -> npt.NDArray[np.intp]:
        """Positions (in key order) of the events of letters ``a`` and ``b``: the two sorted
        runs merged (timsort finds the runs: linear)."""
        return np.sort(np.concatenate((self.by_letter[a], self.by_letter[b])), kind="stable")

    @classmethod
    def of(cls, ch: EventTable, letters: dict[str, tuple[npt.NDArray[np.int64],
                                                          npt.NDArray[np.int64]]],
           dev_idx: npt.NDArray[np.int64]) -> KeyedEvents:
        lut = np.full(256, 255, np.uint8)
        for i, s in enumerate(MATCH_STAGES):
            lut[ACTION_CODES[s]] = i
        code = lut[ch.action]
        row = np.flatnonzero((code != 255) & (ch.nr_sectors > 0)).astype(np.int64)  # in order
        letter = code[row]
        ords = np.empty(len(row), np.int64)
        for i, s in enumerate(MATCH_STAGES):
            ords[letter == i] = letters[s][1]
        di = dev_idx[row]
        key = match_key(di & 255, ch.sector[row])
        hi = (di >> 8).astype(np.int64)
        del di
        order = np.lexsort((key, hi)) if hi.any() else np.argsort(key, kind="stable")
        row = row[order]
        return cls(key[order], hi[order], letter[order], ch.time_ns[row], ords[order], row)


class PairStream:
    """One stage pair A -> B matched chunk by chunk, as :class:`common.StageMatcher` does it
    on the whole table.

    A B event takes the last A before it with its key, and an A only its first B. So of the
    A events before a chunk only the last one of each key can still be taken, and only if no
    B followed it: those are carried (key, time, ordinal; in key order) and put before the
    chunk's events of their key, and the whole-table algorithm (:func:`common.last_marked`,
    :func:`common.first_pairs`) runs on that. Its pairs are the whole table's pairs with their
    B in this chunk.
    """

    def __init__(self, a: str, b: str) -> None:
        self.a, self.b = a, b
        self._ia, self._ib = MATCH_STAGES.index(a), MATCH_STAGES.index(b)
        self.key = np.zeros(0, np.uint64)
        self.hi = _NO_ROWS
        self.time = _NO_ROWS
        self.ord = _NO_ROWS

    def step(self, ev: KeyedEvents) -> Pairs:
        """The pairs whose B event is in this chunk (``ev``: its events by key)."""
        mine = ev.positions(self._ia, self._ib)
        ck, ch_, cl = ev.key[mine], ev.hi[mine], ev.letter[mine]
        ct, co, cr = ev.time[mine], ev.ord[mine], ev.row[mine]
        del mine
        np_, nc = len(self.key), len(ck)
        if not np_ + nc:
            return Pairs(_NO_ROWS, _NO_ROWS, _NO_ROWS, _NO_ROWS, _NO_ROWS)
        if not np_:  # nothing carried (the first chunk, or every A taken): the chunk alone
            key, hi, time, ords, rows = ck, ch_, ct, co, cr
            sa = cl == self._ia
        else:
            # the carried A events go before the chunk's events of their key (earlier)
            if not (ch_.any() or self.hi.any()):
                dest = np.searchsorted(ck, self.key, side="left") + np.arange(np_)
            else:  # beyond 256 devices: sort by (hi, key), carried events first in a key
                both = np.lexsort((np.concatenate((self.key, ck)),
                                   np.concatenate((self.hi, ch_))))
                dest = np.empty(np_ + nc, np.int64)
                dest[both] = np.arange(np_ + nc)
                dest = dest[:np_]
            theirs = np.ones(np_ + nc, bool)
            theirs[dest] = False

            def merged(carried: npt.NDArray[Any], chunk: npt.NDArray[Any]) -> npt.NDArray[Any]:
                out = np.empty(np_ + nc, chunk.dtype)
                out[dest] = carried
                out[theirs] = chunk
                return out

            key, hi = merged(self.key, ck), merged(self.hi, ch_)
            time, ords = merged(self.time, ct), merged(self.ord, co)
            rows = merged(np.full(np_, -1, np.int64), cr)
            sa = merged(np.ones(np_, bool), cl == self._ia)
        del ck, ch_, cl, ct, co, cr
        n = len(key)
        new = np.ones(n, bool)
        new[1:] = (key[1:] != key[:-1]) | (hi[1:] != hi[:-1])
        # each position's group start (common.group_starts, from the boundaries directly)
        gs = np.maximum.accumulate(np.where(new, np.arange(n, dtype=np.intp), 0))
        last_a = last_marked(sa, gs)
        apos, bpos = first_pairs(last_a, np.flatnonzero(~sa))
        out = Pairs(time[apos], ords[apos], time[bpos], ords[bpos], rows[bpos])
        # carried on: per key, the last A when no B came after it, i.e. the key's last event
        # when it is an A
        ends = np.r_[np.flatnonzero(new[1:]), n - 1]
        keep = ends[sa[ends]]
        self.key, self.hi, self.time, self.ord = key[keep], hi[keep], time[keep], ords[keep]
        return out


class BitSet:
    """One bit per stage event (by its ordinal): paired or not."""

    def __init__(self, n: int) -> None:
        self.bits = np.zeros((n + 7) // 8, np.uint8)

    def set(self, idx: npt.NDArray[np.int64]) -> None:
        if not len(idx):
            return
        lo, hi = int(idx.min()) & ~7, int(idx.max())
        if hi - lo < 8 * len(idx) + 64:
            # a chunk's ordinals are (nearly) one run: packed in one go (bitwise_or.at is
            # slow); a carried A far behind the run would make the span large, hence the test
            span = np.zeros((hi - lo + 8) & ~7, bool)
            span[idx - lo] = True
            part = self.bits[lo >> 3:(lo >> 3) + len(span) // 8]
            part |= np.packbits(span, bitorder="little")[:len(part)]
        else:
            np.bitwise_or.at(self.bits, idx >> 3,
                             np.left_shift(1, idx & 7).astype(np.uint8))

    def get(self, start: int, count: int) -> npt.NDArray[np.bool_]:
        """Bits ``start .. start + count - 1``."""
        if not count:
            return np.zeros(0, bool)
        lo, hi = start >> 3, (start + count + 7) >> 3
        bits = np.unpackbits(self.bits[lo:hi], bitorder="little").astype(bool)
        off = start - (lo << 3)
        return bits[off:off + count]


# --- per device ---------------------------------------------------------------------------------

@dataclass
class _Device:
    """One analyzed device: its stage, and the accumulators of its sections."""

    dev: int
    sr: StageRows  # stage, fallback, zero length (rows empty: they stream by)
    events: int
    actions: npt.NDArray[np.int64]
    usable: bool
    series: dict[str, Any] | None
    seek: SeekAcc
    sizes: SizeAcc
    frag: FragAcc
    frag_src: tuple[str, str | None]
    order: OrderAcc
    lba: MinMaxDecimator
    series_acc: SeriesAcc | None
    series_source: str
    iostat: IostatAcc = field(default_factory=IostatAcc)
    latency: dict[tuple[str, str], ValueCounts] = field(default_factory=dict)
    pair_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    sweeps: dict[tuple[str, str], StepSweep] = field(default_factory=dict)


def _stage_rows_info(dev: int, dc: _DevCount, stage: str | None) -> StageRows:
    seen = {s: int(dc.actions[ACTION_CODES[s]]) for s in MATCH_STAGES}
    used, fallback = choose_stage(seen, stage)
    zero = 0
    if used is not None:
        zero = int(dc.actions[ACTION_CODES[used]] - dc.data[ACTION_CODES[used]])
    return StageRows(dev=dev, stage=used, requested=stage, fallback=fallback,
                     rows=np.zeros(0, np.intp), zero_length=zero)


def _by_device(found: Pairs, dev_idx: npt.NDArray[np.int64], all_devs: list[int],
               state: dict[int, _Device], p: tuple[str, str]) -> None:
    """Count one chunk's pairs of ``p`` per device and add their latencies: one stable
    sort of the pairs by device index instead of a mask per device (a latency multiset does
    not depend on the order its values come in)."""
    if not len(found.row_b):
        return
    di = dev_idx[found.row_b]
    counts = np.bincount(di, minlength=len(all_devs))
    present = np.flatnonzero(counts)
    lat = None
    if len(present) > 1:
        order = np.argsort(di, kind="stable")
        lo = np.concatenate(([0], np.cumsum(counts)))
    for j in present.tolist():
        st = state.get(all_devs[j])
        if st is None:
            continue
        st.pair_counts[p] += int(counts[j])
        if p in st.latency:
            if lat is None:
                lat = found.time_b - found.time_a
                if len(present) > 1:
                    lat = lat[order]
            st.latency[p].add(lat[lo[j]:lo[j + 1]] if len(present) > 1 else lat)


def _letter_rows(ch: EventTable, counters: dict[str, int]
                 ) -> dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """Per stage letter: the chunk's rows with data and their ordinals among the table's
    rows of that letter (all devices); advances ``counters``."""
    out = {}
    has = ch.nr_sectors > 0
    for s in MATCH_STAGES:
        r = np.flatnonzero((ch.action == ACTION_CODES[s]) & has).astype(np.int64)
        out[s] = (r, counters[s] + np.arange(len(r), dtype=np.int64))
        counters[s] += len(r)
    return out


def analyze_chunks(chunks: ChunkSource, *, config: AnalyzeConfig | None = None,
                   summaries: Mapping[str, Any] | None = None,
                   partials: Partials | None = None) -> dict[str, Any]:
    """``analyze(concatenation of the chunks)``, one chunk in memory at a time.

    Args:
        chunks: returns a fresh iterable over the table's chunks (in order) at every call;
            it is called three times (twice without timestamps).
        config, summaries, partials: as :func:`workers.analyzers.analyze`.
    """
    config = config or AnalyzeConfig()

    def each() -> Iterator[EventTable]:
        yield from chunks()

    # --- pass 1
    census = _Census(LINEAGE_LIMIT)
    for ch in each():
        census.add(ch)
        del ch
    first = census.first if census.first is not None else EventTable.empty()
    timed = first.time_known
    all_devs = census.device_ids()
    devs = all_devs
    if config.devices is not None:
        wanted = {parse_dev(d) for d in config.devices}
        devs = [d for d in devs if d in wanted]
    n_events = census.events
    if n_events and timed and census.t_min is not None and census.t_max is not None:
        t0, t1 = census.t_min, census.t_max
    else:
        t0, t1 = 0, max(n_events - 1, 0)
    span = t1 - t0
    bin_ns = nice_bin_ns(span, config.time_bins)
    nbins = max(1, -(-span // bin_ns) if span else 1)
    if span and span % bin_ns == 0:
        nbins += 1  # the last event sits exactly on the end edge
    interval = span if timed else 0
    if partials is not None and partials.events != n_events:
        partials = None  # not these rows: compute everything from the table

    state: dict[int, _Device] = {}
    for d in devs:
        dc = census.devs.get(d, _DevCount())
        sr = _stage_rows_info(d, dc, config.stage)
        n_stage = int(dc.data[ACTION_CODES[sr.stage]]) if sr.stage is not None else 0
        events = int(dc.actions.sum())
        dp = partials.devices.get(d) if partials is not None else None
        sp = stage_partial(dp, sr.stage)
        usable = (partials is not None and (dp.events if dp is not None else 0) == events
                  and sp.rows == n_stage and sp.zero_length == sr.zero_length)
        series = (time_series_of(partials, d, sr.stage, t0, bin_ns, nbins)
                  if usable and partials is not None and timed else None)
        largest = int(dc.max_nr[ACTION_CODES[sr.stage]]) if sr.stage is not None else 0
        maxs, max_src = resolve_max_sectors(first, d, _NO_ROWS, config.max_sectors, largest)
        chunk, chunk_src = resolve_chunk(first, d, config.chunk_sectors)
        n_c = int(dc.data[ACTION_CODES["C"]])
        state[d] = _Device(
            dev=d, sr=sr, events=events, actions=dc.actions, usable=usable, series=series,
            seek=SeekAcc(), sizes=SizeAcc(), frag=FragAcc(maxs, chunk),
            frag_src=(max_src, chunk_src), order=OrderAcc(config.first_n, sr.stage),
            lba=MinMaxDecimator(n_stage, config.lba_max_points),
            series_acc=None if series is not None else SeriesAcc(t0, bin_ns, nbins),
            series_source="C" if n_c else "stage",
            latency={p: ValueCounts() for p in LATENCY_PAIRS} if timed else {},
            pair_counts=dict.fromkeys(MATCH_PAIRS, 0))

    # --- pass 2
    key_devs = np.array(all_devs, dtype=np.uint32)
    streams = {p: PairStream(*p) for p in MATCH_PAIRS}
    totals = {s: int(sum(int(dc.data[ACTION_CODES[s]]) for dc in census.devs.values()))
              for s in MATCH_STAGES}
    bits = {p: (BitSet(totals[p[0]]), BitSet(totals[p[1]])) for p in SWEEP_PAIRS} if timed \
        else {}
    counters = dict.fromkeys(MATCH_STAGES, 0)
    limit = LINEAGE_LIMIT
    rec: dict[tuple[str, str], dict[int, int]] = {(a, b): {} for a, b, _ in RECORD_PAIRS}
    remaps = RemapAcc(config.first_n)
    lin_parts: list[EventTable] = [first]
    tops = np.array(sorted(census.tops), dtype=np.uint32)
    lin_codes = np.array([ACT_BACKMERGE, ACT_FRONTMERGE, ACT_REMAP], dtype=np.uint8)
    top_codes = np.array([ACTION_CODES["Q"], ACT_SPLIT], dtype=np.uint8)
    for ch in each():
        if not len(ch):
            continue
        letters = _letter_rows(ch, counters)
        t = ch.time_ns
        dev_idx = np.searchsorted(key_devs, ch.dev).astype(np.int64)
        ev = KeyedEvents.of(ch, letters, dev_idx)
        start_c = np.full(len(ch), -1, np.int64)
        d_before = counters["D"] - len(letters["D"][0])
        for p in MATCH_PAIRS:
            a, b = p
            if p in LINEAGE_ONLY and d_before >= limit:
                continue  # every issue with a record is behind: no pair of this kind is read
            found = streams[p].step(ev)
            if p in START_PAIRS:  # G overrides Q (START_PAIRS' order)
                start_c[found.row_b] = found.time_a
            if p in bits:
                bits[p][0].set(found.ord_a)
                bits[p][1].set(found.ord_b)
            if (a, b) in rec:
                if b == "D":
                    sel = found.ord_b < limit
                    rec[p].update(zip(found.ord_b[sel].tolist(), found.time_a[sel].tolist()))
                else:
                    sel = found.ord_a < limit
                    rec[p].update(zip(found.ord_a[sel].tolist(), found.time_b[sel].tolist()))
            _by_device(found, dev_idx, all_devs, state, p)
        del ev
        _sections(ch, state, start_c, dev_idx, all_devs)
        del start_c, dev_idx
        rm = np.flatnonzero((ch.action == ACT_REMAP) & (ch.nr_sectors > 0))
        if len(rm):
            remaps.add(ch.aux2[rm], ch.aux[rm], ch.nr_sectors[rm], ch.dev[rm], ch.sector[rm],
                       t[rm])
        if census.horizon is not None and not (timed and int(t[0]) > census.horizon):
            # (a timed chunk starting past the horizon keeps no row: not scanned)
            d_rows, d_ord = letters["D"]
            keep = np.isin(ch.action, lin_codes) | (np.isin(ch.action, top_codes)
                                                    & np.isin(ch.dev, tops))
            keep[d_rows[d_ord < limit]] = True
            keep &= t <= census.horizon
            if keep.any():
                lin_parts.append(ch.take(np.flatnonzero(keep)))
        del ch, letters

    # --- pass 3
    if timed and state:
        _sweep_pass(each, state, bits, t0, bin_ns, nbins)
    del bits

    devices: dict[str, Any] = {}
    for d in devs:
        devices[dev_str(d)] = _device_result(state.pop(d), first, config, t0, bin_ns, nbins,
                                             interval, timed, partials)
    remap_json = remaps.result()
    rows = {k: v["throughput"]["iostat"] for k, v in devices.items()}
    names = {k: v["name"] for k, v in devices.items()}
    sub = EventTable.concat(lin_parts)
    del lin_parts
    sub_d = np.flatnonzero((sub.action == ACTION_CODES["D"]) & (sub.nr_sectors > 0))
    lin_pairs = {p: {int(sub_d[o]): v for o, v in found.items()} for p, found in rec.items()}
    return {
        "version": RESULTS_VERSION,
        "events": n_events,
        "time_known": timed,
        "t0_ns": t0,
        "span_ns": span,
        "bin_ns": bin_ns,
        "nbins": nbins,
        "stage_requested": config.stage,
        "devices": devices,
        "iostat": {"columns": list(IOSTAT_COLUMNS), "rows": rows,
                   "groups": mean_rows(rows, names, exclude=tuple(remap_json))},
        "remaps": remap_json,
        "lineage": lineage(sub, None, limit=LINEAGE_LIMIT, qs=config.percentiles,
                           pairs=lin_pairs),
        "summaries": dict(summaries or {}),
    }


def _sections(ch: EventTable, state: dict[int, _Device], start_c: npt.NDArray[np.int64],
              dev_idx: npt.NDArray[np.int64], all_devs: list[int]) -> None:
    """Feed one chunk's rows of every analyzed device to its section accumulators."""
    seen = np.flatnonzero(np.bincount(dev_idx, minlength=len(all_devs)))
    present = [all_devs[j] for j in seen.tolist() if all_devs[j] in state]
    c_code, merge_codes = ACTION_CODES["C"], (ACT_BACKMERGE, ACT_FRONTMERGE)
    for d, rows in rows_by_device(ch, present).items():
        st = state[d]
        act = ch.action[rows]
        has = ch.nr_sectors[rows] > 0
        if st.sr.stage is not None:
            s = rows[(act == ACTION_CODES[st.sr.stage]) & has]
            sec, nr, rwbs, t = ch.sector[s], ch.nr_sectors[s], ch.rwbs[s], ch.time_ns[s]
            st.seek.add(sec, nr)
            if not st.usable:
                st.sizes.add(nr, rwbs)
            st.frag.add(sec, nr)
            st.order.add(sec, nr, ch.pid[s], ch.comm[s], t, rwbs, ch.comms)
            st.lba.add(sec, t, sec, nr, rwbs)
            if st.series_acc is not None and st.series_source == "stage":
                st.series_acc.add(t, nr, rwbs)
        c = rows[(act == c_code) & has]
        if len(c):
            if st.series_acc is not None and st.series_source == "C":
                st.series_acc.add(ch.time_ns[c], ch.nr_sectors[c], ch.rwbs[c])
            st.iostat.add_completions(ch.rwbs[c], ch.nr_sectors[c], ch.time_ns[c], start_c[c])
        m = rows[np.isin(act, merge_codes)]
        if len(m):
            st.iostat.add_merges(ch.rwbs[m])


def _group_rows(ch: EventTable, rows: npt.NDArray[np.int64], devs: npt.NDArray[np.int64]
                ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``rows`` grouped by device in the order of ``devs`` (table order inside a device, rows
    of other devices left out): the grouped rows and the bounds of device ``j``'s group,
    ``bounds[j]:bounds[j + 1]``. One stable sort instead of a mask per device."""
    d = ch.dev[rows].astype(np.int64)
    sdevs = np.sort(devs)
    where = np.argsort(devs, kind="stable")  # sorted position -> index in devs
    pos = np.searchsorted(sdevs, d)
    ok = sdevs[np.minimum(pos, len(sdevs) - 1)] == d if len(sdevs) else np.zeros(len(d), bool)
    idx = np.full(len(d), len(devs), np.int64)
    idx[ok] = where[pos[ok]]
    order = np.argsort(idx, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(idx, minlength=len(devs) + 1))))
    return rows[order], bounds


def _sweep_pass(each: Callable[[], Iterator[EventTable]], state: dict[int, _Device],
                bits: dict[tuple[str, str], tuple[BitSet, BitSet]], t0: int, bin_ns: int,
                nbins: int) -> None:
    """Pass 3: the occupancy and %util sweeps of every analyzed device."""
    for st in state.values():
        st.sweeps = {(a, b): StepSweep(t0, bin_ns, nbins) for _k, a, b, _w in OCCUPANCY_PAIRS}
        if not st.actions[ACTION_CODES["D"]]:
            st.sweeps[("Q", "C")] = StepSweep(t0, 0, 0)  # %util from Q..C: busy time only
    counters = dict.fromkeys(MATCH_STAGES, 0)
    devs = np.array([st.dev for st in state.values()], dtype=np.int64)
    for ch in each():
        if not len(ch):
            continue
        letters = _letter_rows(ch, counters)
        safe = int(ch.time_ns[-1])  # later chunks start at this time or after
        ends: dict[tuple[str, str], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
        for p, (abits, bbits) in bits.items():
            ra, oa = letters[p[0]]
            rb, ob = letters[p[1]]
            sa = ra[abits.get(int(oa[0]), len(oa))] if len(oa) else ra
            sb = rb[bbits.get(int(ob[0]), len(ob))] if len(ob) else rb
            ends[p] = (sa, sb)
        for p, (sa, sb) in ends.items():
            ga, gb = _group_rows(ch, sa, devs), _group_rows(ch, sb, devs)
            for j, st in enumerate(state.values()):
                sweep = st.sweeps.get(p)
                if sweep is None:
                    continue
                ta = ch.time_ns[ga[0][ga[1][j]:ga[1][j + 1]]]
                tb = ch.time_ns[gb[0][gb[1][j]:gb[1][j + 1]]]
                sweep.push(np.concatenate((ta, tb)),
                           np.concatenate((np.ones(len(ta), np.int64),
                                           -np.ones(len(tb), np.int64))), safe)
        del ch, letters, ends
    for st in state.values():
        for sweep in st.sweeps.values():
            sweep.flush()


def _device_result(st: _Device, first: EventTable, config: AnalyzeConfig, t0: int,
                   bin_ns: int, nbins: int, interval: int, timed: bool,
                   partials: Partials | None) -> dict[str, Any]:
    """All sections of one device from its accumulators (the layout of docs/analyzers.md)."""
    sr, d = st.sr, st.dev
    dp = partials.devices.get(d) if partials is not None else None
    series = st.series
    if series is None:
        assert st.series_acc is not None
        series = st.series_acc.result(st.series_source)
    if not timed:
        for k in ("read_mbps", "write_mbps", "read_iops", "write_iops"):
            series[k] = []
    util = ("D", "C") if st.actions[ACTION_CODES["D"]] else ("Q", "C")
    sweep = st.sweeps.get(util)
    row = st.iostat.row(interval, sweep.busy if sweep is not None else 0,
                        st.pair_counts[util])
    if row["note"] == "no C events" and sr.stage != "D":
        # a device with none of the stages (named by the manifest only, or only P/U events)
        # says so instead of "stage None"
        row["note"] = (f"no D/C events: stage {sr.stage}" if sr.stage is not None
                       else "no events" if not st.events else "no Q/G/I/D/C events")
    series["iostat"] = row
    # no interval (no timestamps, or one instant): no rate, rather than a rate of 0
    series["mb_per_s"] = series["total_mb"] / (interval / 1e9) if interval else None
    series["iops"] = series["total_ios"] / (interval / 1e9) if interval else None
    empty = (_NO_ROWS, _NO_ROWS)
    return {
        "name": first.device_name(d),
        "stage": sr.stage,
        "stage_note": sr.describe(),
        "fallback": sr.fallback,
        "events": int(st.lba.n),
        "zero_length": sr.zero_length,
        "actions": (action_counts(dp) if st.usable else
                    {ACTION_LETTERS.get(int(c), str(int(c))): int(st.actions[c])
                     for c in np.flatnonzero(st.actions)}),
        "seek": st.seek.result(dev=dev_str(d), name=first.device_name(d), stage=sr.stage,
                               requested_stage=sr.requested, fallback=sr.fallback,
                               zero_length=sr.zero_length).to_json(),
        "sizes": (size_stats_of(stage_partial(dp, sr.stage), qs=config.percentiles)
                  if st.usable else st.sizes.result(qs=config.percentiles)).to_json(),
        "fragmentation": st.frag.result(*st.frag_src, st.actions),
        "throughput": series,
        "latency": {f"{a}2{b}": distribution_of(*(st.latency[(a, b)].finish() if timed
                                                  else empty), config.percentiles)
                    for a, b in LATENCY_PAIRS},
        "ordering": st.order.result(first.comms),
        "lba": lba_points(st.lba, t0, timed),
        "occupancy": (occupancy_result({k: (st.sweeps[(a, b)].result(),
                                            st.pair_counts[(a, b)])
                                        for k, a, b, _w in OCCUPANCY_PAIRS}, bin_ns, nbins)
                      if timed else None),
    }
