"""The layout of the events the replay engines hand over (an *event chunk*).

Both engines record events as (time, dev, pid, action, rwbs, sector, nr, aux, aux2). The
compiled engine (:mod:`workers.model.fast`) writes them straight into one array per field in
the EventTable's own dtype for that column, so that the table's columns are those arrays
(:func:`workers.model.replay.event_columns` sorts and numbers them in place): 15M events of a
1M-bio run are then written once, not staged in int64 rows and converted (issue 13's speed
target; first-touching memory is a large part of the run's cost on the VM). The Python engine's
rows are converted with :func:`rows_to_chunk`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from workers.events import COLUMN_DTYPES

#: Field indices of a chunk, and rows of the Python engine's events transposed (``[9, n]``).
EV_TIME, EV_DEV, EV_PID, EV_ACT, EV_RWBS, EV_SEC, EV_NR, EV_AUX, EV_AUX2 = range(9)
#: The EventTable column each field becomes.
EVENT_FIELDS = ("time_ns", "dev", "pid", "action", "rwbs", "sector", "nr_sectors", "aux", "aux2")
#: One array per field of ``EVENT_FIELDS`` in ``COLUMN_DTYPES``, rows in recording order.
EventChunk = tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any],
                   npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any],
                   npt.NDArray[Any]]


def new_events(rows: int) -> EventChunk:
    """An event buffer of ``rows`` rows, not initialised (np.empty: rows never written cost no
    memory)."""
    return tuple(np.empty(rows, dtype=COLUMN_DTYPES[f])  # type: ignore[return-value]
                 for f in EVENT_FIELDS)


def rows_to_chunk(cols: npt.NDArray[np.int64]) -> EventChunk:
    """An event chunk from ``[9, n]`` int64 rows (each field cast as numpy's astype casts)."""
    return tuple(np.ascontiguousarray(cols[k], dtype=COLUMN_DTYPES[f])  # type: ignore[return-value]
                 for k, f in enumerate(EVENT_FIELDS))


def head(chunk: EventChunk, n: int) -> EventChunk:
    """The first ``n`` rows of each field (views)."""
    return tuple(a[:n] for a in chunk)  # type: ignore[return-value]


def one_chunk(chunks: list[EventChunk]) -> EventChunk:
    """The chunks as one (the only one as it is, else each field concatenated)."""
    if len(chunks) == 1:
        return chunks[0]
    return tuple(np.concatenate([c[k] for c in chunks])  # type: ignore[return-value]
                 for k in range(len(EVENT_FIELDS)))
