"""The EventTable: one columnar table of block-layer trace events.

Every parser emits it, the replay model emits it, and every analyzer reads it, so a predicted
dispatch stream and a real trace are handled by exactly the same code (architecture.md, "The
one idea that keeps it simple").

Why columns and not rows: traces run to tens of millions of events. One numpy array per field
keeps a 10M-event table at about 50 bytes per event and lets analyzers work on whole columns
(``np.diff`` over sectors of the D events of one device, say) with no per-event Python objects.

Codes follow the kernel so that nothing is translated twice:

* ``action`` holds the low 16 bits of ``__BLK_TA_*`` (include/uapi/linux/blktrace_api.h):
  Q=1, M=2, F=3, G=4, S=5, R=6, D=7, C=8, P=9, U=10, UT=11, I=12, X=13, B=14, A=15.
  Notify records that are kept (messages) use ``ACT_MESSAGE``.
* ``rwbs`` is a bit set of the letters blkparse prints (``fill_rwbs`` in blkparse_fmt.c) plus
  the newer ftrace-only letters, see the ``RWBS_*`` constants.
* ``dev`` is the kernel-internal dev_t: ``major << 20 | minor`` (MINORBITS = 20).
* ``aux`` carries the action's extra number: the new sector for X (split), the original
  sector for A (remap; ``aux2`` then holds the original device), the depth for U/UT.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import numpy.typing as npt

# --- actions (low 16 bits of __BLK_TA_*) ---------------------------------------------------
ACT_QUEUE = 1
ACT_BACKMERGE = 2
ACT_FRONTMERGE = 3
ACT_GETRQ = 4
ACT_SLEEPRQ = 5
ACT_REQUEUE = 6
ACT_ISSUE = 7
ACT_COMPLETE = 8
ACT_PLUG = 9
ACT_UNPLUG_IO = 10
ACT_UNPLUG_TIMER = 11
ACT_INSERT = 12
ACT_SPLIT = 13
ACT_BOUNCE = 14
ACT_REMAP = 15
ACT_ABORT = 16
ACT_DRV_DATA = 17
ACT_ZONE_PLUG = 18
ACT_ZONE_UNPLUG = 19
ACT_MESSAGE = 64  # BLK_TN_MESSAGE notify kept as an event (blkparse prints it as "m")

#: blkparse action letters by code.
ACTION_LETTERS: dict[int, str] = {
    ACT_QUEUE: "Q",
    ACT_BACKMERGE: "M",
    ACT_FRONTMERGE: "F",
    ACT_GETRQ: "G",
    ACT_SLEEPRQ: "S",
    ACT_REQUEUE: "R",
    ACT_ISSUE: "D",
    ACT_COMPLETE: "C",
    ACT_PLUG: "P",
    ACT_UNPLUG_IO: "U",
    ACT_UNPLUG_TIMER: "UT",
    ACT_INSERT: "I",
    ACT_SPLIT: "X",
    ACT_BOUNCE: "B",
    ACT_REMAP: "A",
    ACT_ABORT: "AB",
    ACT_DRV_DATA: "DD",
    ACT_ZONE_PLUG: "ZP",
    ACT_ZONE_UNPLUG: "ZU",
    ACT_MESSAGE: "m",
}
ACTION_CODES: dict[str, int] = {v: k for k, v in ACTION_LETTERS.items()}

#: Stages an analyzer may look at, in the fallback order of architecture.md.
STAGE_FALLBACK: tuple[str, ...] = ("D", "I", "G", "Q")

# --- RWBS bits ------------------------------------------------------------------------------
RWBS_READ = 1 << 0  # R
RWBS_WRITE = 1 << 1  # W
RWBS_DISCARD = 1 << 2  # D
RWBS_NONE = 1 << 3  # N (no data direction: bare flush, plug, unplug)
RWBS_FLUSH = 1 << 4  # leading F (preflush)
RWBS_FUA = 1 << 5  # trailing F
RWBS_AHEAD = 1 << 6  # A
RWBS_SYNC = 1 << 7  # S
RWBS_META = 1 << 8  # M
RWBS_SECURE = 1 << 9  # E (ftrace only)
RWBS_WRITE_ZEROES = 1 << 10  # Z (ftrace only; "WZ"/"Z")
RWBS_PRIO = 1 << 11  # P (ftrace only, REQ_PRIO)
RWBS_ATOMIC = 1 << 12  # U (ftrace only, atomic write)
RWBS_ZONE = 1 << 13  # zone management ops (ftrace "ZO"/"ZC"/... or zone append)

#: Column names, dtypes. Order is the on-disk order in .npz files.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("time_ns", "int64"),  # ns; relative to the trace's genesis after parsing; -1 = unknown
    ("seq", "uint32"),  # per-CPU sequence (0 for notes / unknown)
    ("dev", "uint32"),  # major << 20 | minor
    ("cpu", "uint16"),
    ("pid", "uint32"),
    ("action", "uint8"),  # ACT_*
    ("rwbs", "uint16"),  # RWBS_* bits
    ("sector", "uint64"),
    ("nr_sectors", "uint32"),
    ("aux", "uint64"),  # X: new sector; A: original sector; U/UT: depth
    ("aux2", "uint32"),  # A: original device (dev_t); otherwise 0
    ("error", "int16"),
    ("comm", "uint32"),  # index into EventTable.comms; 0 is "(null)"
)
COLUMN_DTYPES: dict[str, np.dtype[Any]] = {n: np.dtype(t) for n, t in COLUMNS}
BYTES_PER_EVENT = sum(dt.itemsize for dt in COLUMN_DTYPES.values())

NULL_COMM = "(null)"


def make_dev(major: int, minor: int) -> int:
    """Kernel dev_t (MKDEV in include/linux/kdev_t.h: 20 minor bits)."""
    return (int(major) << 20) | (int(minor) & 0xFFFFF)


def dev_major(dev: int) -> int:
    return int(dev) >> 20


def dev_minor(dev: int) -> int:
    return int(dev) & 0xFFFFF


def dev_str(dev: int) -> str:
    """``"8,0"``: the spelling blkparse and the manifest use."""
    return f"{dev_major(dev)},{dev_minor(dev)}"


def checked_dev(major: int, minor: int) -> int:
    """:func:`make_dev` for numbers read from a file: out-of-range parts are a ValueError
    (the text parsers turn it into a ParseError with the line) instead of a masked minor or
    a dev_t too large for the column."""
    if not (0 <= major <= 0xFFF and 0 <= minor <= 0xFFFFF):
        raise ValueError(f"device {major},{minor} out of range (dev_t: 12-bit major, "
                         "20-bit minor)")
    return make_dev(major, minor)


def parse_dev(text: str) -> int:
    """Inverse of :func:`dev_str`; accepts ``"8,0"`` and ``"8:0"``."""
    sep = "," if "," in text else ":"
    parts = text.strip().split(sep)
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"bad device {text!r}: expected MAJOR,MINOR such as 8,0")
    try:
        return checked_dev(int(parts[0]), int(parts[1]))
    except ValueError:
        raise ValueError(f"bad device {text!r}: major < 4096 and minor < 1048576 (dev_t)"
                         ) from None


@dataclass(frozen=True)
class DeviceInfo:
    """What is known of one device: its name and any queue limits read from a manifest."""

    dev: int
    name: str = ""
    limits: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"dev": dev_str(self.dev), "name": self.name, "limits": dict(self.limits)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeviceInfo:
        return cls(dev=parse_dev(data["dev"]), name=data.get("name", ""),
                   limits=dict(data.get("limits", {})))


def _empty_column(name: str, n: int = 0) -> npt.NDArray[Any]:
    return np.zeros(n, dtype=COLUMN_DTYPES[name])


class EventTable:
    """Aligned numpy columns, one row per event, plus a comm string table and device info.

    Construct with :meth:`from_columns` (missing columns are zero-filled) or :meth:`empty`.
    Columns are plain attributes (``table.sector``) so analyzers read them without copies.
    ``time_known`` is False for tables parsed from text that carried no timestamps (ftrace
    lines quoted in a mail): order is kept, times are the row index.
    """

    __slots__ = tuple(n for n, _ in COLUMNS) + ("comms", "devices", "time_known", "meta")

    time_ns: npt.NDArray[np.int64]
    seq: npt.NDArray[np.uint32]
    dev: npt.NDArray[np.uint32]
    cpu: npt.NDArray[np.uint16]
    pid: npt.NDArray[np.uint32]
    action: npt.NDArray[np.uint8]
    rwbs: npt.NDArray[np.uint16]
    sector: npt.NDArray[np.uint64]
    nr_sectors: npt.NDArray[np.uint32]
    aux: npt.NDArray[np.uint64]
    aux2: npt.NDArray[np.uint32]
    error: npt.NDArray[np.int16]
    comm: npt.NDArray[np.uint32]

    def __init__(
        self,
        columns: Mapping[str, npt.ArrayLike],
        comms: Sequence[str] = (NULL_COMM,),
        devices: Mapping[int, DeviceInfo] | None = None,
        time_known: bool = True,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        n = None
        for name, _ in COLUMNS:
            if name in columns:
                arr = np.ascontiguousarray(columns[name], dtype=COLUMN_DTYPES[name])
                if arr.ndim != 1:
                    raise ValueError(f"column {name} must be 1-D")
                if n is None:
                    n = len(arr)
                elif len(arr) != n:
                    raise ValueError(f"column {name} has {len(arr)} rows, expected {n}")
                setattr(self, name, arr)
        unknown = set(columns) - set(COLUMN_DTYPES)
        if unknown:
            raise ValueError(f"unknown columns: {sorted(unknown)}")
        n = n or 0
        for name, _ in COLUMNS:
            if name not in columns:
                setattr(self, name, _empty_column(name, n))
        comms = list(comms) or [NULL_COMM]
        if comms[0] != NULL_COMM:
            comms.insert(0, NULL_COMM)
            self.comm = self.comm + np.uint32(1)
        self.comms: list[str] = comms
        self.devices: dict[int, DeviceInfo] = dict(devices or {})
        self.time_known = bool(time_known)
        self.meta: dict[str, Any] = dict(meta or {})

    # --- construction -------------------------------------------------------------------
    @classmethod
    def empty(cls) -> EventTable:
        return cls({})

    @classmethod
    def from_columns(cls, **columns: npt.ArrayLike) -> EventTable:
        return cls(columns)

    @classmethod
    def concat(cls, tables: Iterable[EventTable]) -> EventTable:
        """Stack tables; comm indices are remapped into one merged string table."""
        tables = list(tables)
        if not tables:
            return cls.empty()
        comms: list[str] = [NULL_COMM]
        index: dict[str, int] = {NULL_COMM: 0}
        cols: dict[str, list[npt.NDArray[Any]]] = {n: [] for n, _ in COLUMNS}
        devices: dict[int, DeviceInfo] = {}
        for t in tables:
            remap = np.empty(len(t.comms), dtype=np.uint32)
            for i, name in enumerate(t.comms):
                if name not in index:
                    index[name] = len(comms)
                    comms.append(name)
                remap[i] = index[name]
            for name, _ in COLUMNS:
                col = getattr(t, name)
                cols[name].append(remap[col] if name == "comm" else col)
            for d, info in t.devices.items():
                devices.setdefault(d, info)
        merged = {n: np.concatenate(v) for n, v in cols.items()}
        return cls(merged, comms=comms, devices=devices,
                   time_known=all(t.time_known for t in tables),
                   meta=tables[0].meta)

    # --- basic access -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.time_ns)

    def __repr__(self) -> str:
        return f"EventTable({len(self)} events, devices={[dev_str(d) for d in self.device_ids()]})"

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, n).nbytes for n, _ in COLUMNS)

    def columns(self) -> dict[str, npt.NDArray[Any]]:
        return {n: getattr(self, n) for n, _ in COLUMNS}

    def take(self, index: npt.ArrayLike) -> EventTable:
        """Rows selected by a boolean mask or an index array, sharing comms and devices."""
        idx = np.asarray(index)
        return EventTable({n: getattr(self, n)[idx] for n, _ in COLUMNS}, comms=self.comms,
                          devices=self.devices, time_known=self.time_known, meta=self.meta)

    def sorted_by_time(self) -> EventTable:
        """Stable sort on (time, dev, cpu, seq): blkparse's merge order across CPU files."""
        if len(self) == 0:
            return self
        order = np.lexsort((self.seq, self.cpu, self.dev, self.time_ns))
        if np.array_equal(order, np.arange(len(self))):
            return self
        return self.take(order)

    def device_ids(self) -> list[int]:
        ids = set(np.unique(self.dev).tolist()) | set(self.devices)
        return sorted(int(d) for d in ids)

    def device_name(self, dev: int) -> str:
        info = self.devices.get(dev)
        return info.name if info and info.name else dev_str(dev)

    def comm_of(self, row: int) -> str:
        return self.comms[int(self.comm[row])]

    def action_counts(self) -> dict[str, int]:
        codes, counts = np.unique(self.action, return_counts=True)
        return {ACTION_LETTERS.get(int(c), str(int(c))): int(n) for c, n in zip(codes, counts)}

    def stage(self, dev: int, stage: str | None = None) -> tuple[str | None, npt.NDArray[np.intp]]:
        """Row indices of one device at one stage, in table order.

        With ``stage=None`` use D, else I, else G, else Q (architecture.md) and return which
        stage was used; ``None`` when the device has none of them.
        """
        on_dev = self.dev == dev
        candidates = (stage,) if stage else STAGE_FALLBACK
        for letter in candidates:
            rows = np.flatnonzero(on_dev & (self.action == ACTION_CODES[letter]))
            if len(rows):
                return letter, rows
        return (stage if stage else None), np.empty(0, dtype=np.intp)

    # --- persistence --------------------------------------------------------------------
    def save(self, target: str | os.PathLike[str] | IO[bytes]) -> None:
        """Compressed .npz: the columns plus a JSON header (comms, devices, meta).

        Written by :func:`write_npz` (deflate level 1, column by column in chunks), which
        ``np.load`` and :meth:`load` read like any ``np.savez_compressed`` file.
        """
        arrays = dict(self.columns())
        arrays["__header__"] = table_header(self.comms, self.devices, self.time_known, self.meta)
        write_npz(target, arrays.items())

    @classmethod
    def load(cls, source: str | os.PathLike[str] | IO[bytes]) -> EventTable:
        with np.load(source, allow_pickle=False) as npz:
            header = json.loads(bytes(npz["__header__"]).decode())
            cols = {n: npz[n] for n, _ in COLUMNS if n in npz.files}
        devices = {}
        for d in header.get("devices", []):
            info = DeviceInfo.from_json(d)
            devices[info.dev] = info
        return cls(cols, comms=header["comms"], devices=devices,
                   time_known=header.get("time_known", True), meta=header.get("meta", {}))

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        self.save(buf)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> EventTable:
        return cls.load(io.BytesIO(data))


#: Bytes of a column compressed at a time by :func:`write_npz` (no copy of a whole column).
NPZ_CHUNK_BYTES = 16 << 20


def table_header(comms: Sequence[str], devices: Mapping[int, DeviceInfo], time_known: bool,
                 meta: Mapping[str, Any]) -> npt.NDArray[np.uint8]:
    """The ``__header__`` member of a stored table (JSON as bytes): what :meth:`EventTable.load`
    reads besides the columns. One function, so a table written in chunks from a column store
    (:mod:`workers.traces.columnstore`) carries exactly the header :meth:`EventTable.save`
    writes."""
    header = {
        "version": 1,
        "comms": list(comms),
        "devices": [d.to_json() for d in devices.values()],
        "time_known": time_known,
        "meta": dict(meta),
    }
    return np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)


def write_npz(target: str | os.PathLike[str] | IO[bytes],
              arrays: Iterable[tuple[str, npt.NDArray[Any]]], *, level: int = 1) -> None:
    """An .npz (a zip of ``NAME.npy`` members) that ``np.load`` reads like the output of
    ``np.savez_compressed``, written faster and in constant extra memory.

    ``np.savez_compressed`` deflates at zlib's default level 6 and serializes each array whole
    (``tobytes`` copies it): on a 100M-event table the copy was 800 MB for the time column and
    the compression took longer than parsing. Level 1 is about 5x faster for 20% more bytes
    (measured on ``realistic_table``, see docs/deploy.md), and each array is written in
    :data:`NPZ_CHUNK_BYTES` slices of its own buffer.
    """
    def members() -> Iterable[tuple[str, np.dtype[Any], int, Iterable[npt.NDArray[Any]]]]:
        for name, arr in arrays:
            a = np.ascontiguousarray(arr).reshape(-1)
            step = max(1, NPZ_CHUNK_BYTES // max(1, a.dtype.itemsize))
            yield name, a.dtype, len(a), (a[i:i + step] for i in range(0, len(a), step))

    write_npz_chunks(target, members(), level=level)


def write_npz_chunks(target: str | os.PathLike[str] | IO[bytes],
                     members: Iterable[tuple[str, np.dtype[Any], int,
                                             Iterable[npt.NDArray[Any]]]],
                     *, level: int = 1) -> None:
    """:func:`write_npz` for 1-D arrays given as ``(name, dtype, length, chunks)``: each member
    is deflated as its chunks arrive, so a table bigger than memory (a column store, read a
    slice at a time) is written as the same .npz bytes :meth:`EventTable.save` writes for it.
    """
    import zipfile

    with zipfile.ZipFile(target, mode="w", compression=zipfile.ZIP_DEFLATED,  # type: ignore[arg-type]
                         compresslevel=level, allowZip64=True) as zf:
        for name, dtype, length, chunks in members:
            with zf.open(name + ".npy", mode="w", force_zip64=True) as fp:
                np.lib.format.write_array_header_1_0(fp, {  # type: ignore[arg-type]
                    "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                    "fortran_order": False, "shape": (int(length),)})
                written = 0
                for chunk in chunks:
                    c = np.ascontiguousarray(chunk, dtype=dtype).reshape(-1)
                    written += len(c)
                    flat = c.view(np.uint8)
                    for start in range(0, len(flat), NPZ_CHUNK_BYTES):
                        fp.write(flat[start:start + NPZ_CHUNK_BYTES].data)
                if written != length:
                    raise ValueError(f"{name}: {written} rows written, {length} declared")


# --- RWBS text <-> bits ---------------------------------------------------------------------
#: Flag letters after the op, in the order ``blk_fill_rwbs`` and ``fill_rwbs`` print them.
#: Shared by both spellings (blkparse here, the kernel's in ``workers.traces.ftrace``).
RWBS_FLAG_LETTERS: tuple[tuple[str, int], ...] = (
    ("F", RWBS_FUA), ("A", RWBS_AHEAD), ("S", RWBS_SYNC), ("M", RWBS_META),
    ("P", RWBS_PRIO), ("U", RWBS_ATOMIC),
)
#: blkparse's first (direction) letter.
_RWBS_DIRECTION = {"R": RWBS_READ, "W": RWBS_WRITE, "D": RWBS_DISCARD, "N": RWBS_NONE,
                   "E": RWBS_SECURE | RWBS_DISCARD, "Z": RWBS_ZONE}
#: Letters after the direction: the flags, then write-zeroes and zone spellings.
_RWBS_LATER = {**dict(RWBS_FLAG_LETTERS), "Z": RWBS_WRITE_ZEROES, "W": RWBS_WRITE,
               "R": RWBS_READ, "O": RWBS_ZONE, "C": RWBS_ZONE}


def rwbs_from_text(text: str) -> int:
    """Bits from a blkparse / ftrace RWBS string such as ``"WS"``, ``"FWFS"``, ``"RA"``.

    Follows ``fill_rwbs`` (blkparse_fmt.c) and ``blk_fill_rwbs`` (kernel/trace/blktrace.c):
    a leading F is a preflush, then the direction letter, then a trailing F is FUA.
    """
    bits = 0
    s = text.strip()
    if s.startswith("F") and len(s) > 1 and s[1] in "WRDNSEZ":
        bits |= RWBS_FLUSH
        s = s[1:]
    elif s == "F":
        return RWBS_FLUSH
    if s and s[0] in _RWBS_DIRECTION:
        bits |= _RWBS_DIRECTION[s[0]]
        s = s[1:]
    for ch in s:
        bit = _RWBS_LATER.get(ch)
        if bit is None:
            raise ValueError(f"unknown RWBS letter {ch!r} in {text!r}")
        bits |= bit
    return bits


def rwbs_to_text(bits: int) -> str:
    """The blkparse spelling of a bit set (inverse of :func:`rwbs_from_text`)."""
    out = []
    if bits & RWBS_FLUSH:
        out.append("F")
    if bits & RWBS_SECURE:
        out.append("E")
    elif bits & RWBS_DISCARD:
        out.append("D")
    elif bits & RWBS_WRITE_ZEROES and not bits & RWBS_WRITE:
        out.append("Z")
    elif bits & RWBS_WRITE:
        out.append("W")
    elif bits & RWBS_READ:
        out.append("R")
    elif bits & RWBS_ZONE:
        out.append("Z")
    else:
        out.append("N")
    if bits & RWBS_WRITE_ZEROES and bits & RWBS_WRITE:
        out.append("Z")
    out.extend(letter for letter, bit in RWBS_FLAG_LETTERS if bits & bit)
    return "".join(out)


def is_write(rwbs: npt.NDArray[np.uint16]) -> npt.NDArray[np.bool_]:
    """blkparse counts everything that is not a write under Reads (trace-formats.md 1.5)."""
    out: npt.NDArray[np.bool_] = (rwbs & RWBS_WRITE) != 0
    return out
