"""Device service timing: when one device's requests are dispatched (D) and complete (C).

:func:`dispatch_times` is the timing contract with the replay driver and
:class:`DeviceServer` the same service for requests issued one at a time (trace replay, the
job simulators). Split out of :mod:`workers.model.timing` (see its docstring).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from workers.errors import ModelConfigError
from workers.model.device import (
    KIND_SSD,
    DeviceModel,
    _service_parts,
    device_from_spec,
)


# ============================================================================================
# dispatch_times: the single-stream timing contract
# ============================================================================================
@njit(cache=True)
def _dispatch_kernel(kind: int, p: npt.NDArray[np.float64], parallel: int, exclusive_discard: bool,
                     queue_depth: int, ready: npt.NDArray[np.int64],
                     sector: npt.NDArray[np.int64], nr: npt.NDArray[np.int64],
                     is_write: npt.NDArray[np.bool_], is_discard: npt.NDArray[np.bool_],
                     head0: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    n = len(ready)
    d_out = np.empty(n, np.int64)
    c_out = np.empty(n, np.int64)
    units = np.zeros(max(parallel, 1), np.float64)
    bus_free = 0.0
    last_c = 0.0
    prev_d = -1.0e300
    head = head0
    for i in range(n):
        d = float(ready[i])
        if d < prev_d:
            d = prev_d  # dispatch order is the array order
        if i >= queue_depth:
            qd_free = float(c_out[i - queue_depth])
            if d < qd_free:
                d = qd_free
        prev_d = d
        u = 0
        for k in range(1, len(units)):
            if units[k] < units[u]:
                u = k
        start = max(d, units[u])
        setup, xfer = _service_parts(kind, p, sector[i], nr[i], is_write[i], is_discard[i], head)
        if exclusive_discard and is_discard[i]:
            start = max(d, last_c)  # a non-queued command drains the device first
            c = start + setup + xfer
            for k in range(len(units)):
                units[k] = c
        else:
            c = max(start + setup, bus_free) + xfer
            units[u] = c
        bus_free = c
        if c > last_c:
            last_c = c
        head = sector[i] + nr[i]
        d_out[i] = np.int64(math.ceil(d))
        c_out[i] = np.int64(math.ceil(c))
    return d_out, c_out


def _kernel_args(device: DeviceModel) -> tuple[int, npt.NDArray[np.float64], int, bool]:
    p = device.params()
    exclusive = device.kind_code == KIND_SSD and p[7] == 0.0
    return device.kind_code, p, device.parallelism, bool(exclusive)


def dispatch_times(ready_ns: npt.ArrayLike, sector: npt.ArrayLike, nr_sectors: npt.ArrayLike,
                   device: DeviceModel | str | Mapping[str, Any], queue_depth: int, *,
                   is_write: npt.ArrayLike | bool = False,
                   is_discard: npt.ArrayLike | bool = False,
                   head: int = -1) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """D and C times of one device's requests, given in dispatch order.

    Args:
        ready_ns: when each request could be dispatched (its I event, or the unplug).
        sector / nr_sectors: the requests.
        device: a service model or a spec for :func:`~workers.model.device.device_from_spec`.
        queue_depth: driver tags (``queue_depth`` of the tag set): request ``i`` is not
            dispatched before request ``i - queue_depth`` completed.
        is_write / is_discard: per request (arrays) or for all (bools).
        head: the HDD head position before the first request (-1: unknown, random).

    Returns:
        ``(d_ns, c_ns)``, int64 arrays. D is never before ready nor before the previous D;
        C >= D. Completions are in dispatch order (a single transfer channel).
    """
    dev = device_from_spec(device)
    if queue_depth <= 0:
        raise ModelConfigError(f"queue_depth must be positive, not {queue_depth}")
    r = np.ascontiguousarray(ready_ns, dtype=np.int64)
    n = len(r)
    s = np.ascontiguousarray(sector, dtype=np.int64)
    ln = np.ascontiguousarray(nr_sectors, dtype=np.int64)
    if len(s) != n or len(ln) != n:
        raise ValueError("ready_ns, sector and nr_sectors must have the same length")
    w = np.ascontiguousarray(np.broadcast_to(np.asarray(is_write, dtype=np.bool_), (n,)))
    dc = np.ascontiguousarray(np.broadcast_to(np.asarray(is_discard, dtype=np.bool_), (n,)))
    kind, p, par, excl = _kernel_args(dev)
    return _dispatch_kernel(kind, p, par, excl, int(queue_depth), r, s, ln, w, dc, int(head))


class DeviceServer:
    """The same two-stage server as :func:`dispatch_times`, fed one request at a time.

    The event simulation knows a request's completion the moment it dispatches it, because a
    device here serves in dispatch order and nothing dispatched later can overtake it.
    """

    def __init__(self, device: DeviceModel, head: int = -1) -> None:
        self.device = device
        self._kind, self._p, par, self._exclusive = _kernel_args(device)
        self._units = [0.0] * max(par, 1)
        self._bus_free = 0.0
        self._last_c = 0.0
        self.head = head
        self.busy_ns = 0.0

    def submit(self, t: int, sector: int, nr_sectors: int, is_write: bool,
               is_discard: bool = False) -> int:
        units = self._units
        u = min(range(len(units)), key=units.__getitem__) if len(units) > 1 else 0
        start = max(float(t), units[u])
        setup, xfer = _service_parts(self._kind, self._p, sector, nr_sectors, is_write,
                                     is_discard, self.head)
        if self._exclusive and is_discard:
            start = max(float(t), self._last_c)
            c = start + setup + xfer
            for k in range(len(units)):
                units[k] = c
        else:
            c = max(start + setup, self._bus_free) + xfer
            units[u] = c
        self.busy_ns += setup + xfer
        self._bus_free = c
        self._last_c = max(self._last_c, c)
        self.head = sector + nr_sectors
        return int(math.ceil(c))


