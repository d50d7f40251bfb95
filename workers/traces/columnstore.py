"""An EventTable on local disk, one ``.npy`` file per column, read and written in row chunks.

Why: a merged 100M-event table is 5.5 GB of columns (55 bytes per event). The parallel
ingest's merging worker held all of it, plus the parts it was merged from, and peaked at
8.5 GB (docs/deploy.md, "Huge traces"). Written here a chunk at a time and read back a row
slice at a time, the table never has to be in memory whole: the chunked merge
(:mod:`workers.traces.streammerge`) appends to a :class:`ColumnStoreWriter`, the analyzers read
:meth:`ColumnStore.chunks`, and :meth:`ColumnStore.save_npz` writes the stored table file
byte for byte as :meth:`EventTable.save` would.

Layout of a store directory: ``<column>.npy`` for every column of
:data:`workers.events.COLUMNS` (a plain ``np.save`` file: ``np.load(path, mmap_mode="r")``
reads it too) and ``table.json`` (rows, comms, devices, time_known, meta; written last, so a
directory without it is an unfinished store). Reads are ``np.fromfile`` on an offset: copies,
no mapping kept, so nothing of the file stays counted in the process's RSS after a chunk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from workers.events import (
    COLUMN_DTYPES,
    COLUMNS,
    NULL_COMM,
    DeviceInfo,
    EventTable,
    table_header,
    write_npz_chunks,
)

#: Rows per chunk by default: 2M rows are 110 MB of columns.
CHUNK_ROWS = 2_000_000
_INFO = "table.json"


def _npy_header(dtype: np.dtype[Any], rows: int) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {  # type: ignore[arg-type]
        "descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
        "shape": (int(rows),)})
    return buf.getvalue()


def read_npy_header(fh: IO[bytes]) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """``(shape, dtype)`` of the ``.npy`` stream ``fh`` (left at the first data byte);
    C-order only, as every file here is written."""
    version = np.lib.format.read_magic(fh)  # type: ignore[arg-type]
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)  # type: ignore[arg-type]
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)  # type: ignore[arg-type]
    if fortran:
        raise ValueError("Fortran-order arrays are not column data")
    return tuple(shape), dtype


class ColumnStoreWriter:
    """Appends row chunks to a new store of a known number of rows.

    The row count is fixed up front (the chunked merge knows it: the sum of its parts), so
    each ``.npy`` header is final when the file is created and chunks are plain appends
    (no memory map: dirty mapped pages would count in RSS until written back).
    """

    def __init__(self, path: str | os.PathLike[str], rows: int) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / _INFO).unlink(missing_ok=True)
        self.rows = int(rows)
        self.written = 0
        self._files: dict[str, IO[bytes]] = {}
        for name, _ in COLUMNS:
            fh = open(self.path / f"{name}.npy", "wb")  # noqa: SIM115 (closed in close())
            fh.write(_npy_header(COLUMN_DTYPES[name], self.rows))
            self._files[name] = fh

    def append(self, columns: Mapping[str, npt.ArrayLike]) -> None:
        """Append one chunk: every column, the same number of rows."""
        n = None
        for name, _ in COLUMNS:
            col = np.ascontiguousarray(columns[name], dtype=COLUMN_DTYPES[name])
            if n is None:
                n = len(col)
                if self.written + n > self.rows:
                    raise ValueError(f"{self.written + n} rows appended to a store of "
                                     f"{self.rows}")
            elif len(col) != n:
                raise ValueError(f"column {name} has {len(col)} rows, expected {n}")
            self._files[name].write(col.data)
        self.written += n or 0

    def close(self, *, comms: Sequence[str], devices: Mapping[int, DeviceInfo] | None = None,
              time_known: bool = True, meta: Mapping[str, Any] | None = None) -> ColumnStore:
        """Finish the store (every declared row must have been written) and open it."""
        for fh in self._files.values():
            fh.close()
        if self.written != self.rows:
            raise ValueError(f"{self.written} rows written to a store of {self.rows}")
        comms = list(comms) or [NULL_COMM]
        info = {"version": 1, "rows": self.rows, "comms": comms,
                "devices": [d.to_json() for d in (devices or {}).values()],
                "time_known": bool(time_known), "meta": dict(meta or {})}
        tmp = self.path / (_INFO + ".tmp")
        tmp.write_text(json.dumps(info))
        tmp.replace(self.path / _INFO)
        return ColumnStore(self.path)

    def abort(self) -> None:
        for fh in self._files.values():
            fh.close()


class ColumnStore:
    """A finished store: the table's small parts in memory, its columns on disk."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        info = json.loads((self.path / _INFO).read_text())
        self.rows: int = int(info["rows"])
        self.comms: list[str] = list(info["comms"])
        self.devices: dict[int, DeviceInfo] = {}
        for d in info.get("devices", []):
            di = DeviceInfo.from_json(d)
            self.devices[di.dev] = di
        self.time_known: bool = bool(info.get("time_known", True))
        self.meta: dict[str, Any] = dict(info.get("meta", {}))
        self._offsets: dict[str, int] = {}
        for name, _ in COLUMNS:
            with open(self.path / f"{name}.npy", "rb") as fh:
                shape, dtype = read_npy_header(fh)
                if tuple(shape) != (self.rows,) or dtype != COLUMN_DTYPES[name]:
                    raise ValueError(f"{self.path}: column {name} is {dtype}{shape}, expected "
                                     f"{COLUMN_DTYPES[name]}({self.rows},)")
                self._offsets[name] = fh.tell()

    @classmethod
    def from_table(cls, table: EventTable, path: str | os.PathLike[str], *,
                   rows: int = CHUNK_ROWS) -> ColumnStore:
        """A store holding ``table`` (tests, and small tables handed to chunked code)."""
        w = ColumnStoreWriter(path, len(table))
        for start in range(0, len(table), rows):
            w.append({n: getattr(table, n)[start:start + rows] for n, _ in COLUMNS})
        return w.close(comms=table.comms, devices=table.devices, time_known=table.time_known,
                       meta=table.meta)

    def __len__(self) -> int:
        return self.rows

    @property
    def nbytes(self) -> int:
        return sum(dt.itemsize for dt in COLUMN_DTYPES.values()) * self.rows

    def column(self, name: str, start: int = 0, stop: int | None = None) -> npt.NDArray[Any]:
        """Rows ``[start, stop)`` of one column, read into a new array."""
        dtype = COLUMN_DTYPES[name]
        stop = self.rows if stop is None else min(int(stop), self.rows)
        start = max(0, int(start))
        if stop <= start:
            return np.zeros(0, dtype=dtype)
        with open(self.path / f"{name}.npy", "rb") as fh:
            fh.seek(self._offsets[name] + start * dtype.itemsize)
            out = np.fromfile(fh, dtype=dtype, count=stop - start)
        if len(out) != stop - start:
            raise ValueError(f"{self.path}: column {name} is truncated")
        return out

    def column_chunks(self, name: str, rows: int = CHUNK_ROWS) -> Iterator[npt.NDArray[Any]]:
        for start in range(0, self.rows, rows):
            yield self.column(name, start, start + rows)

    def slice(self, start: int, stop: int, columns: Sequence[str] | None = None) -> EventTable:
        """Rows ``[start, stop)`` as an EventTable sharing this store's comms, devices and
        meta (columns not asked for are zero-filled)."""
        names = [n for n, _ in COLUMNS] if columns is None else list(columns)
        return EventTable({n: self.column(n, start, stop) for n in names}, comms=self.comms,
                          devices=self.devices, time_known=self.time_known, meta=self.meta)

    def chunks(self, rows: int = CHUNK_ROWS,
               columns: Sequence[str] | None = None) -> Iterator[EventTable]:
        """Consecutive row slices in table order (time order for a merged trace); call again
        for another pass. At least one chunk, empty for an empty store."""
        if self.rows == 0:
            yield self.slice(0, 0, columns)
            return
        for start in range(0, self.rows, max(1, int(rows))):
            yield self.slice(start, start + rows, columns)

    def to_table(self) -> EventTable:
        """The whole table in memory (small stores and tests only)."""
        return self.slice(0, self.rows)

    def header_table(self) -> EventTable:
        """An empty table with this store's comms, devices, time_known and meta."""
        return self.slice(0, 0)

    def save_npz(self, target: str | os.PathLike[str] | IO[bytes], *,
                 rows: int = CHUNK_ROWS) -> None:
        """The stored table file, byte for byte what ``self.to_table().save(target)`` writes,
        one column slice in memory at a time."""
        def members() -> Iterator[tuple[str, np.dtype[Any], int, Iterator[npt.NDArray[Any]]]]:
            for name, _ in COLUMNS:
                yield name, COLUMN_DTYPES[name], self.rows, self.column_chunks(name, rows)
            head = table_header(self.comms, self.devices, self.time_known, self.meta)
            yield "__header__", head.dtype, len(head), iter([head])

        write_npz_chunks(target, members())


def read_rows(fp: IO[bytes], dtype: np.dtype[Any], n: int, *, what: str = "stored column"
              ) -> npt.NDArray[Any]:
    """The next ``n`` values of ``dtype`` from the stream ``fp`` (a decompressing zip member)
    into a new array: plain reads into one buffer, nothing mapped. ``what`` names the column's
    kind in the error when the stream ends early."""
    want = int(n) * dtype.itemsize
    buf = bytearray(want)
    view = memoryview(buf)
    got = 0
    while got < want:
        k = fp.readinto(view[got:])  # type: ignore[attr-defined]
        if not k:
            raise ValueError(f"{what} truncated")
        got += k
    return np.frombuffer(buf, dtype=dtype)


class StoredTable:
    """A stored table file (the ``.npz`` of :meth:`EventTable.save` or
    :meth:`ColumnStore.save_npz`) on local disk, read without loading it.

    Why: ``EventTable.load`` inflates every column of the file at once (55 bytes per event:
    5.5 GB at 100M events, and the comparison step held both sides' tables: 6553 MB,
    docs/deploy.md "Huge traces"). Here the header (comms, devices, meta) is read at once and
    the columns as row chunks inflated from their zip members as they are read: only the
    columns asked for, one chunk of each in memory. A chunk is an :class:`EventTable` with the
    header's comms, devices, time_known and meta, columns not read zero-filled (``np.zeros``:
    pages never touched count nothing), so ``EventTable.concat`` of the chunks of every
    column is what :meth:`EventTable.load` returns.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import zipfile

        self.path = Path(path)
        with zipfile.ZipFile(self.path) as zf:
            names = set(zf.namelist())
            with zf.open("__header__.npy") as fp:
                header = json.loads(bytes(np.lib.format.read_array(fp)).decode())
            self.present: list[str] = [n for n, _ in COLUMNS if f"{n}.npy" in names]
            rows: set[int] = set()
            for n in self.present:
                with zf.open(f"{n}.npy") as fp:
                    shape, dtype = read_npy_header(fp)
                    if len(shape) != 1:
                        raise ValueError(f"{self.path}: column {n} is not 1-D")
                    rows.add(int(shape[0]))
        if len(rows) > 1:
            raise ValueError(f"{self.path}: columns of different lengths {sorted(rows)}")
        self.rows: int = rows.pop() if rows else 0
        self.comms: list[str] = list(header["comms"])
        self.devices: dict[int, DeviceInfo] = {}
        for d in header.get("devices", []):
            info = DeviceInfo.from_json(d)
            self.devices[info.dev] = info
        self.time_known: bool = bool(header.get("time_known", True))
        self.meta: dict[str, Any] = dict(header.get("meta", {}))

    def __len__(self) -> int:
        return self.rows

    def _table(self, cols: Mapping[str, npt.ArrayLike]) -> EventTable:
        return EventTable(cols, comms=self.comms, devices=self.devices,
                          time_known=self.time_known, meta=self.meta)

    def chunks(self, rows: int = CHUNK_ROWS, columns: Sequence[str] | None = None,
               stop: int | None = None) -> Iterator[EventTable]:
        """Consecutive row slices of rows ``[0, stop)`` (all rows by default), in table order;
        call again for another pass. At least one chunk, empty for an empty table."""
        import zipfile

        want = [n for n in (columns if columns is not None else [n for n, _ in COLUMNS])
                if n in self.present]
        end = self.rows if stop is None else max(0, min(int(stop), self.rows))
        step = max(1, int(rows))
        with open(self.path, "rb") as fh, zipfile.ZipFile(fh) as zf:
            members = {n: zf.open(f"{n}.npy") for n in want}
            try:
                for fp in members.values():
                    read_npy_header(fp)
                if end == 0:
                    yield self._table({n: np.zeros(0, COLUMN_DTYPES[n]) for n in want})
                    return
                for start in range(0, end, step):
                    k = min(step, end - start)
                    yield self._table({n: read_rows(fp, COLUMN_DTYPES[n], k)
                                       for n, fp in members.items()})
            finally:
                for fp in members.values():
                    fp.close()

    def head(self, rows: int, columns: Sequence[str] | None = None) -> EventTable:
        """The first ``rows`` rows in memory (every column unless ``columns`` says)."""
        n = max(0, min(int(rows), self.rows))
        return next(iter(self.chunks(max(1, n), columns, stop=n)))

    def to_table(self) -> EventTable:
        """The whole table in memory: what :meth:`EventTable.load` returns."""
        return self.head(self.rows)
